"""Recursive ROAR killed: a `fmm-fast roar` process SIGKILLed at two points resumes to the uninterrupted
result, and a chain whose Ray worker is killed beyond its retries is named while the others are kept.

Apart from test_roar.py, whose module fixture they do not use, so that the two workers of `make test` run
them beside that file's tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_kills import environment, fmm, keyword_csv, kill_when, run, stable
from test_roar import killing_workers

from fmm_fast.cli import main
from fmm_fast.core.records import read_record

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def roar_flags(root: Path) -> list[str]:
    """`fmm-fast roar`'s options for a tiny run of loo-abs (and rand) in 2 steps on keyword data in `root`."""
    data = ["--dataset", str(keyword_csv(root / "keywords.csv", 120)), "--text-field", "text",
            "--label-field", "label"]  # fmt: skip
    return [*data, "--measure", "loo-abs", "--steps", "2", "--epochs", "4", "--lr", "5e-3", "--batch-size",
            "8", "--layers", "1", "--width", "32", "--device", "cpu", "--quiet", "--no-erasure"]  # fmt: skip


def test_a_killed_run_resumes_to_the_uninterrupted_result(tmp_path) -> None:
    env = environment(tmp_path)
    flags = roar_flags(tmp_path)
    run(fmm("roar", *flags, "--out", str(tmp_path / "reference")), env)
    out = tmp_path / "killed"
    argv = fmm("roar", *flags, "--out", str(out))
    steps = out / "seed-0"
    kill_when(argv, env, "after rand's step 1", lambda: (steps / "rand/step-050/record.json").is_file())
    kill_when(argv, env, "in loo-abs's step 1", lambda: (steps / "loo-abs/step-050/dataset.npz").is_file())
    run(argv, env)
    results = [read_record(d / "result.json") for d in (tmp_path / "reference", out)]
    assert stable(results[1]) == stable(results[0])
    assert results[0]["seeds"]["0"]["curves"]["rand"][0] > 0.8  # a model that learnt: rankings can differ
    for record in ("step-000", "loo-abs/step-050", "rand/step-050"):
        steps = [
            stable(read_record(d / "seed-0" / record / "record.json")) for d in (tmp_path / "reference", out)
        ]
        assert steps[1] == steps[0]


def test_a_chain_killed_beyond_its_retries_is_named_and_the_others_are_kept(tmp_path, capfd) -> None:
    """Every attempt of loo-abs's chain killed: exit 1 naming that chain; rand's finished chain is kept, and
    a rerun resumes without redoing it."""
    pytest.importorskip("ray")
    from fmm_fast.distributed.roar_chains import CHAIN_RETRIES

    out = tmp_path / "out"
    argv = ["roar", *roar_flags(tmp_path), "--workers", "2", "--out", str(out)]
    with killing_workers(out / "logs" / "seed-0-loo-abs.log", CHAIN_RETRIES + 1) as killed:
        code = main(argv)
    err = capfd.readouterr().err
    assert code == 1 and len(killed) == CHAIN_RETRIES + 1, err
    assert "1 of 2 chains failed: seed 0 loo-abs: its Ray worker failed" in err, err
    kept = out / "seed-0" / "rand" / "step-050" / "record.json"
    assert kept.is_file() and not (out / "seed-0" / "loo-abs" / "step-050" / "record.json").exists()
    written = kept.stat().st_mtime_ns
    assert main(argv) == 0, capfd.readouterr().err
    assert kept.stat().st_mtime_ns == written  # rand's chain was not rerun
    assert set(read_record(out / "result.json")["seeds"]["0"]["curves"]) == {"rand", "loo-abs"}

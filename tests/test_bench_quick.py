"""`bench/run --quick` in CI: every bench script runs end to end on the tiny model, so a change that breaks
one fails here, and every script in bench/ is part of it, so a new one cannot be left out. Its output goes
to a temporary folder, never to bench/results."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fmm_fast.core.records import read_record

BENCH = Path(__file__).resolve().parent.parent / "bench"
LIBRARIES_NOTE = "bench/quick.py must run every script here (a .py without __main__ is a library)"


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import quick

    return quick


def bench_scripts() -> set[str]:
    """What a person runs in bench/: the .py files with a __main__ block, and the shell scripts (.sh)."""
    python = {path.name for path in BENCH.glob("*.py") if '__name__ == "__main__"' in path.read_text()}
    return python | {path.name for path in BENCH.glob("*.sh")}


def test_every_bench_script_is_in_the_quick_run(quick) -> None:
    planned = [*quick.TABLE_SCRIPTS, *(item.script for item in quick.QUICK_RUNS)]
    assert len(planned) == len(set(planned))
    assert set(planned) == bench_scripts(), LIBRARIES_NOTE


def test_quick_bench_runs_every_script_into_its_out_folder(quick, tmp_path) -> None:
    results = BENCH / "results"
    before = sorted(results.rglob("*")) if results.exists() else []
    out, cache = tmp_path / "out", tmp_path / "cache"
    completed = subprocess.run(
        [
            sys.executable,
            str(BENCH / "run"),
            "--quick",
            "--device",
            "cpu",
            "--out",
            str(out),
            "--cache",
            str(cache),
        ],
        capture_output=True,
        text=True,
        check=False,
        # one intra-op thread: the tiny model gains nothing from two, and beside the other test worker two
        # threads spin waiting for each other
        env=os.environ | {"OMP_NUM_THREADS": "1"},
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-6000:]

    record = read_record(out / "bench-run.json")
    assert record["quick"] and record["table"]
    assert set(record["results"]) >= {"occlusion_cpu", "curve_cpu", "masf", "perturbation_cpu", "memory"}
    outcomes = {outcome["script"]: outcome for outcome in record["scripts"]}
    assert list(outcomes) == [item.script for item in quick.QUICK_RUNS]
    for item in quick.QUICK_RUNS:
        outcome = outcomes[item.script]
        reason = item.needs("cpu")
        if reason is None:
            assert outcome["status"] == "ok", outcome
            assert (out / "logs" / f"{item.script}.log").is_file()
        else:  # skipped where it cannot run, with its reason printed
            assert (outcome["status"], outcome["note"]) == ("skipped", reason)
            assert reason in completed.stdout
    # the scripts that ran left their results in the out folder
    for name in ("bench_engine", "bench_peer_metrics", "bench_masf_ties", "bench_masf_calibration"):
        assert (out / f"{name}.json").is_file()
    assert (out / "precision" / "precision.json").is_file()
    assert (out / "roar-summary" / "roar-workers.json").is_file()
    assert (cache / "tiny-roberta").is_dir()
    assert record["preload_cpu_seconds"] > 0  # the scripts ran in processes forked from the server
    assert (sorted(results.rglob("*")) if results.exists() else []) == before

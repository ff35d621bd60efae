"""bench/reproduce --workers: the study's chains on a local 2-worker Ray runtime give what one process gives,
their Recursive ROAR steps included (README-tables.md's ROAR section); a failed chain is named (exit 1) after
the other finished, and a rerun resumes; bad flags exit 2.

The tiny scale on babi-1 (a 1-layer width-32 RoBERTa), seeds 0 and 1: two chains. Each chain computes on
one thread (--worker-cpus 1), so the one-process run is pinned to one CPU with one thread as well: training
is then bit-identical, and so is everything after it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("ray")

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
STUDY = ["--scale", "tiny", "--datasets", "babi-1"]
RECORDS = ("train/**/run.json", "evaluate/**/result.json", "masf/**/masf.json", "supporting/*.json",
           "roar/**/result.json", "roar/**/record.json")  # fmt: skip
VOLATILE = {"durations", "versions", "machine"}  # and every key holding "seconds"


def reproduce(*arguments: str | Path, one_thread: bool = False) -> subprocess.CompletedProcess:
    """bench/reproduce.py as a user runs it; one_thread: on one CPU with one thread, as a worker of
    --worker-cpus 1 computes."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    if one_thread:
        environment |= {"OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    command = [sys.executable, str(BENCH / "reproduce.py"), *map(str, arguments)]
    pin = _on_one_cpu if one_thread else None  # ONNX Runtime takes as many threads as the cores it may use
    return subprocess.run(command, env=environment, preexec_fn=pin, capture_output=True, text=True)


def _on_one_cpu() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def steps_json(root: Path) -> dict[str, dict]:
    return json.loads((root / "steps.json").read_text())["steps"]


def comparable(value, root: Path):
    """A record with its volatile parts dropped and `root` written as ROOT."""
    if isinstance(value, dict):
        return {
            key: comparable(item, root)
            for key, item in value.items()
            if key not in VOLATILE and "seconds" not in key
        }
    if isinstance(value, list):
        return [comparable(item, root) for item in value]
    return value.replace(str(root), "ROOT") if isinstance(value, str) else value


def results(root: Path) -> dict[str, object]:
    """Every record the chains wrote (volatile parts dropped), the trained weights' digests (ROAR's too),
    tables (a)-(d) of README-tables.md and the report's ROAR table."""
    sys.path.insert(0, str(BENCH))
    try:
        from reproduce_plan import SCALES, Study
        from reproduce_tables import masf_table, performance_table, supporting_table
    finally:
        sys.path.remove(str(BENCH))
    tiny = SCALES["tiny"]
    study = Study(replace(tiny, datasets=tuple(p for p in tiny.datasets if p.dataset == "babi-1")), root)
    found: dict[str, object] = {}
    for pattern in RECORDS:
        for path in sorted(root.glob(pattern)):
            found[str(path.relative_to(root))] = comparable(json.loads(path.read_text()), root)
    for weights in sorted(
        [*root.glob("train/**/model.safetensors"), *root.glob("roar/**/model.safetensors")]
    ):
        found[str(weights.relative_to(root))] = hashlib.sha256(weights.read_bytes()).hexdigest()
    tables = [performance_table(study), (study.report_dir / "table.md").read_text(), masf_table(study),
              supporting_table(study), (study.report_dir / "roar.md").read_text()]  # fmt: skip
    found["tables"] = [table.replace(str(root), "ROOT") for table in tables]
    return found


def test_chains_on_two_workers_equal_one_process_and_resume_after_a_failed_chain(tmp_path) -> None:
    single = reproduce(*STUDY, "--out", tmp_path / "single", one_thread=True)
    assert single.returncode == 0, single.stderr

    root = tmp_path / "ray"
    # a file of another run where seed 1's evaluation goes: `fmm-fast evaluate` refuses it (exit 2)
    foreign = root / "evaluate" / "babi-1" / "seed-1" / "curves" / "notes.txt"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("not fmm-fast's")
    failed = reproduce(*STUDY, "--out", root, "--workers", "2")
    assert failed.returncode == 1, failed.stderr
    assert "1 of 2 chains failed: babi-1 seed 1: `fmm-fast evaluate" in failed.stderr
    assert "babi-1 seed 0: done, 10 of 10 steps ran" in failed.stderr
    assert (root / "roar" / "babi-1" / "seed-0" / "result.json").is_file()  # the other chain finished
    assert "holds files that are not this run's" in (root / "logs" / "babi-1-seed-1.log").read_text()
    assert not (root / "README-tables.md").exists()
    before = steps_json(root)
    trained = "train babi-1 masked seed 1"
    assert before[trained]["status"] == "ran" and before[trained]["seconds"] > 0

    foreign.unlink()
    resumed = reproduce(*STUDY, "--out", root, "--workers", "2")
    assert resumed.returncode == 0, resumed.stderr
    assert "babi-1 seed 1: done, 5 of 10 steps ran" in resumed.stderr  # evaluate ×2, masf, overlap, roar
    after = steps_json(root)
    assert after[trained] == {**before[trained], "status": "reused"}  # the time it took when it ran
    assert after.keys() == steps_json(tmp_path / "single").keys()
    assert all(entry["seconds"] is not None for entry in after.values())
    readme = (root / "README-tables.md").read_text()
    roar = readme.split("## (f) Recursive ROAR")[1]
    assert "### babi-1: Recursive ROAR, plain retraining" in roar and "| grad-l2 | RACU |" in roar
    assert "| babi-1 | Recursive ROAR | plain, a new model at every step | 2 | 2 |" in roar  # cost: 2 seeds
    assert (root / "roar-babi-1-plain-recursive-grad-l2.png").is_file()  # the report's ROAR plot

    assert results(root) == results(tmp_path / "single")


@pytest.mark.parametrize(
    ("flags", "message", "ray_installed"),
    [
        (["--workers", "0"], "--workers must be at least 1, got 0", True),
        (["--workers", "2", "--worker-cpus", "0"], "--worker-cpus must be at least 1, got 0", True),
        (["--ray-address", "127.0.0.1:1"], "cannot reach the Ray cluster at 127.0.0.1:1", True),
        (["--workers", "2"], "install the extra: pip install 'fmm-fast[ray]'", False),
    ],
)
def test_bad_scale_flags_exit_2_with_one_line_before_any_work(
    flags, message, ray_installed, tmp_path, monkeypatch, capsys
) -> None:
    if not ray_installed:
        monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    monkeypatch.syspath_prepend(str(BENCH))
    from reproduce import main

    assert main([*STUDY, "--out", str(tmp_path / "out"), *flags]) == 2
    error = capsys.readouterr().err
    assert error.startswith("reproduce: ") and message in error and error.count("\n") == 1
    assert not (tmp_path / "out").exists()

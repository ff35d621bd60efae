"""Kill tests: a run SIGKILLed after its k-th saved step, then rerun, ends with the record of a run never
interrupted (timings and pass counters aside: a resumed run refills its forward-pass cache).

Every run is a real `python -m fmm_fast` subprocess on a tiny model: train (which promises to restart from
scratch when rerun into its own directory), evaluate, aopc and masf (which resume from their state files).
"""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KEYWORDS = {"negative": "awful", "positive": "great"}
FILLER = ["the", "a", "film", "plot", "actor", "scene", "music", "story", "long", "short", "old", "new",
          "red", "blue", "city", "night", "day"]  # fmt: skip
TRAIN_FLAGS = ["--epochs", "6", "--lr", "5e-3", "--batch-size", "8", "--layers", "1", "--width", "32",
               "--device", "cpu", "--quiet"]  # fmt: skip
# Cost-only keys: wall times, forward-pass counts (a resumed run recomputes what the cache held), machines.
VOLATILE = {
    "seconds",
    "seconds_this_session",
    "durations",
    "total_seconds",
    "engine",
    "forward_passes",
    "shared_rows",  # rows another measure's passes ran: a resumed run's cache starts empty
    "machine",
    "earlier_machines",
}


def keyword_csv(path: Path, rows: int = 240) -> Path:
    """Short texts whose label is one keyword: a 1-layer model learns it in a few epochs."""
    rng = random.Random(0)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        for _ in range(rows):
            label = rng.choice(sorted(KEYWORDS))
            words = [rng.choice(FILLER) for _ in range(rng.randint(4, 9))]
            words.insert(rng.randint(0, len(words)), KEYWORDS[label])
            writer.writerow([" ".join(words), label])
    return path


def environment(tmp: Path) -> dict[str, str]:
    return os.environ | {
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",  # the same thread count in every run: bit-identical training
        "XDG_CACHE_HOME": str(tmp / "cache"),
    }


def fmm(*args: str) -> list[str]:
    return [sys.executable, "-m", "fmm_fast", *args]


def run(argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


def kill_when(argv: list[str], env: dict[str, str], point: str, reached: Callable[[], bool]) -> None:
    """Start `argv` and SIGKILL it as soon as `reached()`; fails if the run ends first."""
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while process.poll() is None and time.monotonic() < deadline:
        if reached():
            process.send_signal(signal.SIGKILL)
            assert process.wait() == -signal.SIGKILL
            return
        time.sleep(0.002)
    process.kill()
    pytest.fail(f"the run ended (code {process.wait()}) before the kill point {point}")


def saved(path: Path, key: str, count: int) -> Callable[[], bool]:
    """Whether the JSON record at `path` exists and its list `key` holds at least `count` entries."""

    def check() -> bool:
        try:
            return len(json.loads(path.read_text())[key]) >= count
        except (OSError, ValueError, KeyError):
            return False

    return check


def stable(record):
    """The record without its cost-only keys (recursively)."""
    if isinstance(record, dict):
        return {k: stable(v) for k, v in record.items() if k not in VOLATILE}
    if isinstance(record, list):
        return [stable(v) for v in record]
    return record


def assert_close(got, expected, path: str = "") -> None:
    """JSON values equal, floats within fp32 noise (1e-6: probabilities and their differences)."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(expected), path
        for key in expected:
            assert_close(got[key], expected[key], f"{path}/{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), path
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert_close(g, e, f"{path}/{i}")
    elif isinstance(expected, float):
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-6), path
    else:
        assert got == expected, path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(workspace, env, data flags, the uninterrupted train run's directory, its ONNX export)."""
    from fmm_fast.export.onnx_export import export_onnx

    root = tmp_path_factory.mktemp("kills")
    env = environment(root)
    data = ["--dataset", str(keyword_csv(root / "keywords.csv")), "--text-field", "text", "--label-field",
            "label"]  # fmt: skip
    run(fmm("train", *data, *TRAIN_FLAGS, "--out", str(root / "train")), env)
    export_onnx(root / "train" / "model", root / "model.onnx")
    return root, env, data, root / "train", root / "model.onnx"


def test_train_killed_after_an_epoch_resumes_bit_for_bit(trained):
    root, env, data, reference, _ = trained
    out = root / "train-killed"
    argv = fmm("train", *data, *TRAIN_FLAGS, "--out", str(out))
    kill_when(argv, env, "train after epoch 2", saved(out / "run.json", "epochs", 2))
    assert (out / "resume.pt").is_file()
    run(argv, env)
    records = [json.loads((d / "run.json").read_text()) for d in (reference, out)]
    # Killed once run.json had 2 epochs: resume.pt holds epoch 2, or epoch 1 if the kill fell between the two.
    assert records[1].pop("resumed_after_epochs") in ([1], [2])
    for record in records:  # where each run wrote: the only difference allowed
        del record["model"]["path"]
    assert stable(records[1]) == stable(records[0])
    assert records[0]["test"]["0.0"]["accuracy"] > 0.8  # a model that learnt: curves that can differ
    weights = [(d / "model" / "model.safetensors").read_bytes() for d in (reference, out)]
    assert weights[0] == weights[1]


def test_evaluate_killed_at_four_points_ends_as_an_uninterrupted_run(trained):
    root, env, data, _, onnx_path = trained
    flags = ["--model", str(onnx_path), *data, "--measure", "loo-abs", "--measure", "grad-l2",
             "--limit", "24", "--token-budget", "256", "--quiet"]  # fmt: skip
    run(fmm("evaluate", *flags, "--out", str(root / "eval-reference")), env)
    out = root / "eval-killed"
    state = out / "seed-0" / "state"
    argv = fmm("evaluate", *flags, "--out", str(out))
    kill_when(argv, env, "evaluate after r=0/r=1", lambda: (state / "shared.json").is_file())
    kill_when(argv, env, "evaluate after rand step 3", saved(state / "rand.json", "curve", 4))
    kill_when(argv, env, "evaluate after loo-abs step 1", saved(state / "loo-abs.json", "curve", 2))
    kill_when(argv, env, "evaluate after grad-l2 step 6", saved(state / "grad-l2.json", "curve", 7))
    run(argv, env)
    reference = json.loads((root / "eval-reference" / "seed-0" / "result.json").read_text())
    resumed = json.loads((out / "seed-0" / "result.json").read_text())
    assert stable(resumed) == stable(reference)
    assert reference["measures"]["loo-abs"]["racu"] > 0  # the curves fall: a wrong resume would show
    assert (out / "curves.csv").read_text() == (root / "eval-reference" / "curves.csv").read_text()


def test_aopc_killed_after_each_measure_ends_as_an_uninterrupted_run(trained):
    root, env, data, _, onnx_path = trained
    flags = ["--model", str(onnx_path), *data, "--measure", "loo-abs", "--measure", "grad-l2",
             "--limit", "24", "--explain-batch-rows", "5", "--quiet"]  # fmt: skip
    run(fmm("aopc", *flags, "--out", str(root / "aopc-reference")), env)
    out = root / "aopc-killed"
    state = out / "seed-0" / "state"
    argv = fmm("aopc", *flags, "--out", str(out))
    kill_when(argv, env, "aopc after rand", lambda: (state / "rand.json").is_file())
    kill_when(argv, env, "aopc after loo-abs", lambda: (state / "loo-abs.json").is_file())
    finished = {name: (state / f"{name}.json").read_bytes() for name in ("rand", "loo-abs")}
    run(argv, env)
    # the measures finished before the kills were read back, not recomputed
    assert {name: (state / f"{name}.json").read_bytes() for name in finished} == finished
    reference, resumed = (root / "aopc-reference" / "seed-0", out / "seed-0")
    records = [json.loads((d / "result.json").read_text()) for d in (reference, resumed)]
    # A measure computed after a kill meets an engine cache without the earlier measures' rows, so some
    # of its rows run in other batches: probabilities agree to fp32 noise, predictions and counts exactly.
    assert_close(stable(records[1]), stable(records[0]))
    assert records[0]["arguments"]["engine"]["explain_batch_rows"] == 5  # the knob reaches the protocol
    assert records[0]["measures"]["loo-abs"]["racu"] > 0  # the curves fall: a wrong resume would show
    lines = [(d / "peer.jsonl").read_text().splitlines() for d in (reference, resumed)]
    assert_close([json.loads(x) for x in lines[1]], [json.loads(x) for x in lines[0]])


def test_masf_killed_after_its_first_model_ends_as_an_uninterrupted_run(trained):
    root, env, data, reference_train, onnx_path = trained
    flags = ["--model", str(onnx_path), "--model", str(reference_train / "model"), *data, "--quiet"]
    run(fmm("masf", *flags, "--out", str(root / "masf-reference")), env)
    out = root / "masf-killed"
    argv = fmm("masf", *flags, "--out", str(out))
    kill_when(argv, env, "masf after model 1 of 2", lambda: (out / "state" / "model-0.json").is_file())
    run(argv, env)
    records = [json.loads((d / "masf.json").read_text()) for d in (root / "masf-reference", out)]
    assert stable(records[1]) == stable(records[0])
    assert (out / "p_values.csv").read_text() == (root / "masf-reference" / "p_values.csv").read_text()

"""The evaluation install: fmm-fast evaluates an exported .onnx where PyTorch and transformers are absent.

Each run is a subprocess whose start-up (tests/evaluation_install/sitecustomize.py) makes importing torch,
transformers, datasets or pyarrow fail as if they were not installed, so an import anywhere on the path,
however indirect, fails the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
BLOCKER = TESTS / "evaluation_install"


def without_training_stack(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    """`python ARGUMENTS` with this checkout's fmm_fast and the training stack uninstallable."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BLOCKER), str(REPO)])}
    return subprocess.run(
        [sys.executable, *arguments], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def fmm_fast(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    return without_training_stack("-m", "fmm_fast", *arguments, cwd=cwd)


def data_flags(data: dict) -> list[str]:
    return ["--dataset", "babi-1", "--size", str(data["size"]), "--test-size", str(data["test_size"])]


def test_the_blocker_blocks(tmp_path):
    result = without_training_stack("-c", "import torch", cwd=tmp_path)
    assert result.returncode == 1 and "No module named 'torch'" in result.stderr


def test_evaluate_explain_masf_report_without_pytorch(tiny_babi, tmp_path):
    _, onnx_path, data = tiny_babi
    evaluate = fmm_fast(
        "evaluate", "--model", str(onnx_path), *data_flags(data), "--measure", "loo-abs",
        "--measure", "beam-sign-2", "--limit", "4", "--out", str(tmp_path / "eval"), "--quiet",
        cwd=tmp_path,
    )  # fmt: skip
    assert evaluate.returncode == 0, evaluate.stderr
    record = json.loads((tmp_path / "eval" / "seed-0" / "result.json").read_text())
    assert set(record["curves"]) == {"rand", "loo-abs", "beam-sign-2"} and record["n_examples"] == 4
    assert all(len(curve["micro_f1"]) == 11 for curve in record["curves"].values())
    assert record["model"]["backend"].startswith("onnxruntime")

    explain = fmm_fast(
        "explain", "--model", str(onnx_path), *data_flags(data), "--measure", "loo-abs", "--limit", "2",
        "--out", str(tmp_path / "explanations.jsonl"),
        cwd=tmp_path,
    )  # fmt: skip
    assert explain.returncode == 0, explain.stderr
    assert len((tmp_path / "explanations.jsonl").read_text().splitlines()) == 2

    masf = fmm_fast(
        "masf", "--model", str(onnx_path), *data_flags(data), "--out", str(tmp_path / "masf"), cwd=tmp_path
    )
    assert masf.returncode == 0, masf.stderr
    (summary,) = json.loads((tmp_path / "masf" / "masf.json").read_text())["models"].values()
    assert len(summary["per_ratio"]) == 11

    report = fmm_fast("report", str(tmp_path / "eval"), "--out", str(tmp_path / "report"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "report" / "report.json").is_file()


def test_offline_datasets_and_local_files_without_pytorch(tmp_path):
    rows = [{"text": f"review {i}", "label": i % 2, "word": "pos" if i % 2 else "neg"} for i in range(20)]
    csv_lines = ["text,label", *(f"{row['text']},{row['label']}" for row in rows)]
    (tmp_path / "reviews.csv").write_text("\n".join(csv_lines))
    json_lines = [json.dumps({"text": row["text"], "label": row["word"]}) for row in rows]
    (tmp_path / "reviews.jsonl").write_text("\n".join(json_lines))
    script = """
import json
from fmm_fast.data import load_dataset
sizes = {}
for name, fields in [("babi-1", {}), ("movie-snippets", {}), ("reviews.csv", {"text_field": "text",
        "label_field": "label"}), ("reviews.jsonl", {"text_field": "text", "label_field": "label"})]:
    dataset = load_dataset(name, size=20, test_size=4, **fields)
    sizes[name] = [dataset.label_names, sum(len(split) for split in dataset.splits.values())]
print(json.dumps(sizes))
"""
    result = without_training_stack("-c", script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    sizes = json.loads(result.stdout)
    assert sizes["reviews.csv"] == [["0", "1"], 20] and sizes["reviews.jsonl"] == [["neg", "pos"], 20]
    assert sizes["babi-1"][1] == 24 and sizes["movie-snippets"][1] == 24


@pytest.mark.parametrize(
    ("command", "needs"),
    [
        (["train", "--dataset", "babi-1", "--out", "trained"], "training"),
        (["export", "--model", "CHECKPOINT", "--out", "model.onnx"], "export"),
        (["evaluate", "--model", "ONNX", "--measure", "grad-l2", "--out", "eval"], "PyTorch checkpoint"),
        (["explain", "--model", "CHECKPOINT", "-m", "loo-abs", "--out", "x.jsonl"], "the PyTorch checkpoint"),
    ],
)
def test_training_steps_name_the_missing_extra(tiny_babi, tmp_path, command, needs):
    checkpoint, onnx_path, _ = tiny_babi
    arguments = [{"CHECKPOINT": str(checkpoint), "ONNX": str(onnx_path)}.get(a, a) for a in command]
    result = fmm_fast(*arguments, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert 'pip install "fmm-fast[train]"' in line and needs in line
    assert sorted(path.name for path in tmp_path.iterdir()) == []  # nothing written

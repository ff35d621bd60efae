"""The worked example runs: Captum LayerIntegratedGradients → JSONL → `fmm-fast aopc --explanations`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("captum")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "captum_round_trip.py"


def test_captum_round_trip(tiny_babi, tmp_path):
    checkpoint, _, data = tiny_babi
    spec = importlib.util.spec_from_file_location("captum_round_trip", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    argv = ["--model", str(checkpoint), "--out", str(tmp_path), "--dataset", "babi-1", "--limit", "2"]
    argv += ["--steps", "3", "--size", str(data["size"]), "--test-size", str(data["test_size"])]
    assert example.main(argv) == 0
    lines = [json.loads(line) for line in (tmp_path / "captum-lig.jsonl").read_text().splitlines()]
    assert [line["index"] for line in lines] == [0, 1]
    record = json.loads((tmp_path / "evaluate" / "seed-0" / "result.json").read_text())
    assert list(record["measures"]) == [
        "rand",
        "int-grad-sign",
        "int-grad-abs",
        "captum-lig",
        "captum-lig-abs",
    ]
    assert record["measures"]["captum-lig"]["signed"] and not record["measures"]["captum-lig-abs"]["signed"]

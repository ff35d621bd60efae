"""The your-own-measure example runs in its tiny mode: a ten-line measure, given as a Python function,
evaluated recursively beside loo-abs, in the same report table as the built-in measures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from fmm_fast.core.records import read_record

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "your_measure.py"


def test_your_measure_example_tiny(tmp_path, monkeypatch, one_torch_thread):
    spec = importlib.util.spec_from_file_location("your_measure", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, example)  # the measure is found by its import path
    spec.loader.exec_module(example)
    assert example.main(["--out", str(tmp_path), "--tiny"]) == 0
    record = read_record(tmp_path / "evaluate" / "seed-0" / "result.json")
    margin = record["measures"]["margin_loo"]
    assert margin["source"]["locator"] == "your_measure:margin_loo" and margin["signed"] is False
    assert margin["forward_passes"] > 0  # it asked the engine: recomputed on the masked input at each step
    table = (tmp_path / "report" / "table.md").read_text()
    rows = {line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")}
    assert {"margin_loo", "loo-abs"} <= rows

"""Inputs read as given: CSV cells stay text, texts cut to the model's length are reported, and the
majority baseline is the chosen metric of the majority predictor (through the CLI, on the tiny model)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fmm_fast.cli import main
from fmm_fast.core.metrics import majority_metric
from fmm_fast.core.records import read_record
from fmm_fast.data import load_dataset
from fmm_fast.data.babi import LOCATIONS

LONG = "Mary went to the garden. " * 140  # about 700 tokens: longer than the model's 512


def _fields(path) -> list[str]:
    return ["--dataset", str(path), "--text-field", "text", "--label-field", "label"]


def test_texts_cut_to_the_models_length_are_warned_and_recorded(tiny_babi, tmp_path, capsys):
    _, onnx_path, _ = tiny_babi
    data = tmp_path / "long.csv"
    rows = [(LONG, "garden") if i % 2 else ("003 went to the kitchen", "kitchen") for i in range(20)]
    data.write_text("text,label\n" + "".join(f"{t},{label}\n" for t, label in rows))
    common = ["--model", str(onnx_path), *_fields(data), "--split", "train", "--limit", "4"]
    assert main(["explain", *common, "-m", "rand", "--quiet", "--out", str(tmp_path / "x.jsonl")]) == 0
    err = capsys.readouterr().err
    lines = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    cut = [line for line in lines if line["tokens_total"] > line["tokens_kept"]]
    assert cut and all(line["tokens_kept"] == 512 == len(line["tokens"]) for line in cut)
    assert f"{len(cut)} of 4 examples are longer than the model's maximum of 512 tokens" in err
    short = [line for line in lines if line["tokens_total"] == line["tokens_kept"]]
    assert short and all(line["text"] == "003 went to the kitchen" for line in short)  # not "3 went ..."
    out = tmp_path / "e"
    assert main(["evaluate", *common, "--measure", "rand", "--quiet", "--out", str(out)]) == 0
    truncation = read_record(out / "seed-0" / "result.json")["truncation"]
    assert truncation["examples_cut"] == len(cut) and truncation["examples"] == 4
    assert truncation["tokens_total"] - truncation["tokens_kept"] == sum(
        line["tokens_total"] - line["tokens_kept"] for line in lines
    )


@pytest.mark.parametrize("metric", ["macro-f1", "accuracy"])
def test_the_majority_baseline_is_the_chosen_metric_in_results_and_report(tiny_babi, tmp_path, metric):
    _, onnx_path, _ = tiny_babi
    data = tmp_path / "rare.csv"
    rows = [("Mary went to the kitchen.", "kitchen") if i % 8 == 0 else ("John went to the garden.", "garden")
            for i in range(100)]  # fmt: skip
    data.write_text("text,label\n" + "".join(f"{t},{label}\n" for t, label in rows))
    out = tmp_path / "e"
    argv = ["evaluate", "--model", str(onnx_path), *_fields(data), "--metric", metric, "--measure", "rand",
            "--quiet", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    record = read_record(out / "seed-0" / "result.json")
    dataset = load_dataset(str(data), text_field="text", label_field="label")
    test = [LOCATIONS.index(dataset.label_names[i]) for i in dataset.splits["test"].labels]
    key = metric.replace("-", "_")
    assert record["majority_baseline"] == pytest.approx(majority_metric(np.array(test), key, len(LOCATIONS)))
    if metric == "macro-f1":
        assert record["majority_baseline"] < 0.2  # the accuracy share would be 0.9
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    group = read_record(tmp_path / "report" / "report.json")["groups"][0]
    assert group["majority_baseline"] == pytest.approx(record["majority_baseline"])
    performance = (tmp_path / "report" / "performance.md").read_text()
    assert f"{100 * record['majority_baseline']:.1f}" in performance

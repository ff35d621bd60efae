"""`fmm-fast check` on the tiny bAbI model: the record, the verdict rule, one forward pass per masked set,
resuming, refusing, the one-line bad inputs, and its line in `fmm-fast report`."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_cli import data_flags
from test_user_texts import assert_self_contained

from fmm_fast.backends.base import ForwardOutput
from fmm_fast.cli import main
from fmm_fast.core.records import read_record
from fmm_fast.core.settings import CheckSettings
from fmm_fast.data.options import DataOptions
from fmm_fast.protocols.check import verdict
from fmm_fast.protocols.masf.statistic import summarize_p_values

# bAbI-1 of 300: 60 validation examples calibrate, halves of 30 (the default 32 components are too many)
SMALL = ["--split-components", "8", "--limit", "12", "--ratios", "0.5", "-q"]


def check_argv(model, data: dict, out, *extra: str) -> list[str]:
    return ["check", "--model", str(model), *data_flags(data), "--out", str(out), *SMALL, *extra]


def test_check_writes_record_and_figure_and_scores_each_set_once(tiny_babi, tmp_path, capsys):
    _, onnx_path, data = tiny_babi
    assert main(check_argv(onnx_path, data, tmp_path / "check")) == 0
    record = read_record(tmp_path / "check" / "check.json")
    assert record["kind"] == "check" and record["n_examples"] == 12
    assert [p["ratio"] for p in record["points"]] == [0.0, 0.5, 1.0]  # 0 and 1 always
    calibration = record["calibration"]
    assert (calibration["method"], calibration["n_level_1"], calibration["n"]) == ("split", 30, 30)
    assert calibration["strategy"] == "masked"  # calibrated as the model was trained
    for point in record["points"]:
        assert set(point["metrics"]) >= {record["metric"]}
        assert point["in_distribution"] == (point["simes"] > 0.05)
    assert record["verdict"] == verdict(record["points"], "masked", record["verdict"]["fix"] or "")
    # At most one forward pass per row: 60 calibration inputs and 3 sets of 12, the signals of each set
    # served by the pass that scored its metric.
    assert record["engine"]["forward_rows"] <= 60 + 3 * 12
    assert (tmp_path / "check" / "check.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert f"verdict: {record['verdict']['text']}" in printed
    assert_self_contained(printed + record["verdict"]["text"], "check's printed lines")


def test_unmasked_and_fully_masked_p_values_are_masf_split_ones(tiny_babi, tmp_path):
    """At 0% and 100% both commands test the same inputs against the same calibration (the whole
    60-example validation split masked as trained, seed 0): the same Simes p-values."""
    _, onnx_path, data = tiny_babi
    assert main(check_argv(onnx_path, data, tmp_path / "check")) == 0
    argv = ["masf", "--model", str(onnx_path), *data_flags(data), "--limit", "12", "-q"]
    argv += ["--calibration", "split", "--split-components", "8", "--out", str(tmp_path / "masf")]
    assert main(argv) == 0
    (masf,) = read_record(tmp_path / "masf" / "masf.json")["models"].values()
    masf_simes = {s["ratio"]: s["simes"] for s in masf["per_ratio"]}
    checked = read_record(tmp_path / "check" / "check.json")["points"]
    for point in (checked[0], checked[-1]):
        assert point["simes"] == pytest.approx(masf_simes[point["ratio"]], abs=1e-12)


class MaskShiftBackend:
    """The real backend, but every hidden-state signal moves with the row's share of mask tokens, and the
    model says it was trained plainly: masked inputs leave the (unmasked) calibration distribution."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.info = replace(inner.info, strategy="plain")
        self.name = inner.name

    def forward(self, input_ids, attention_mask, with_signals: bool = False) -> ForwardOutput:
        output = self.inner.forward(input_ids, attention_mask, with_signals)
        if output.signals is not None:
            share = (input_ids == self.info.mask_id).sum(axis=1) / attention_mask.sum(axis=1)
            output.signals = output.signals + np.float32(20) * share[:, None, None].astype(np.float32)
        return output


def test_masks_that_move_the_signals_are_out_of_distribution_with_the_fixing_command(
    tiny_babi, tmp_path, capsys, monkeypatch
):
    from fmm_fast.api import checking as check_command

    checkpoint, onnx_path, data = tiny_babi
    load = check_command.load_model

    def shifted(path, options):
        loaded = load(path, options)
        return replace(loaded, backend=MaskShiftBackend(loaded.backend))

    monkeypatch.setattr(check_command, "load_model", shifted)
    assert main(check_argv(onnx_path, data, tmp_path / "check")) == 0
    record = read_record(tmp_path / "check" / "check.json")
    judged = record["verdict"]
    assert record["calibration"]["strategy"] == "plain"
    assert record["points"][0]["in_distribution"] and not record["points"][-1]["in_distribution"]
    assert not judged["in_distribution"] and judged["out_from"] == judged["out_ratios"][0] > 0
    # the .onnx file trains from the checkpoint it was exported from, on the check's dataset
    fix = (
        f"fmm-fast train --model {checkpoint} --strategy masked --dataset babi-1 --size {data['size']} "
        f"--test-size {data['test_size']} --out {checkpoint.parent}-masked"
    )
    assert judged["fix"] == fix
    assert f"out of distribution from {judged['out_from']:.0%} masked" in judged["text"]
    assert judged["text"].endswith(fix) and fix in capsys.readouterr().out


def test_verdict_rule():
    def points(*simes: float) -> list[dict]:
        return [{"ratio": r / 10, "simes": s} for r, s in enumerate(simes)]

    fix = "fmm-fast train --model m --strategy masked --dataset d --out m-masked"
    inside = verdict(points(0.5, 0.06, 0.9), "plain", fix)
    assert inside["in_distribution"] and inside["out_from"] is None and inside["fix"] is None
    out = verdict(points(0.5, 0.3, 0.05, 0.2, 0.01), "plain", fix)  # at most 0.05 is out; the first counts
    assert (out["in_distribution"], out["out_from"], out["out_ratios"]) == (False, 0.2, [0.2, 0.4])
    assert out["text"].startswith("out of distribution from 20% masked") and out["fix"] == fix
    assert "already" in verdict(points(0.5, 0.01), "masked", fix)["text"]
    unmasked = verdict(points(0.01, 0.01), "plain", fix)  # the test split itself: masking cannot be judged
    assert unmasked["out_from"] == 0 and unmasked["fix"] is None and "even unmasked" in unmasked["text"]
    # what the record's points hold: summarize_p_values' Simes
    assert summarize_p_values(np.array([0.01, 0.02, 0.9]))["simes"] == pytest.approx(0.03)


def test_ratios_always_hold_zero_and_one_once():
    settings = CheckSettings("m.onnx", DataOptions("babi-1"), ratios=(0.5, 0.2, 0.5, 1.0))
    assert settings.ratios == (0.0, 0.2, 0.5, 1.0)


def test_an_interrupted_check_resumes_where_it_stopped(tiny_babi, tmp_path, capsys, monkeypatch):
    import fmm_fast.protocols.check as protocol

    checkpoint, _, data = tiny_babi
    assert main(check_argv(checkpoint, data, tmp_path / "whole")) == 0
    steps = protocol.erasure_steps

    def one_step_then_killed(*args, **kwargs):
        for index, step in enumerate(steps(*args, **kwargs)):
            if index == 1:
                raise KeyboardInterrupt
            yield step

    monkeypatch.setattr(protocol, "erasure_steps", one_step_then_killed)
    out = tmp_path / "resumed"
    assert main(check_argv(checkpoint, data, out)) == 130
    assert [p["ratio"] for p in read_record(out / "state" / "points.json")["points"]] == [0.0, 0.5]
    monkeypatch.setattr(protocol, "erasure_steps", steps)
    assert main(check_argv(checkpoint, data, out)) == 0
    whole = read_record(tmp_path / "whole" / "check.json")
    resumed = read_record(out / "check.json")
    assert resumed["points"] == whole["points"] and resumed["verdict"] == whole["verdict"]
    assert resumed["engine"]["forward_rows"] < whole["engine"]["forward_rows"]  # 0% and 50% not rerun
    # another run in the same --out is refused, in one line, and nothing of it changes
    assert main(check_argv(checkpoint, data, out, "--seed", "1")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "differs in seed" in err[0]
    assert read_record(out / "check.json") == resumed


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--ratios", "0.5,1.5"], "--ratios must be shares between 0 and 1, got 1.5"),
        (["--ratios", "half"], "--ratios 'half' is not a comma-separated list of numbers"),
        (["--calibration-size", "30"], "--calibration-size must be at least 40"),
        (["--split-components", "64"], "must be below the hidden size 64"),
        (["--split-components", "30"], "needs more than 30 examples in half A, got 30"),
    ],
)
def test_bad_inputs_are_one_line_and_write_nothing(tiny_babi, tmp_path, capsys, flags, message):
    _, onnx_path, data = tiny_babi
    out = tmp_path / "check"
    argv = ["check", "--model", str(onnx_path), *data_flags(data), "--out", str(out), "--limit", "12"]
    given = {flag for flag in flags if flag.startswith("--")}
    argv += [*flags, *([] if "--split-components" in given else ["--split-components", "8"])]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_report_has_a_line_per_check(tiny_babi, tmp_path, capsys):
    _, onnx_path, data = tiny_babi
    assert main(check_argv(onnx_path, data, tmp_path / "runs" / "check")) == 0
    record = read_record(tmp_path / "runs" / "check" / "check.json")
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "report")]) == 0
    table = (tmp_path / "report" / "check.md").read_text()
    (row,) = [line for line in table.splitlines() if line.startswith(f"| {onnx_path} |")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    metric = record["metric"]
    assert cells[1:4] == ["masked", "babi-1/test (12 examples)", metric]
    assert cells[4] == f"{100 * record['points'][0]['metrics'][metric]:.1f}"
    expected = "in distribution under masking" if record["verdict"]["in_distribution"] else "out of"
    assert cells[7].startswith(expected)
    assert table in capsys.readouterr().out
    # a damaged check.json is named in one line, and the report is not written
    (tmp_path / "runs" / "check" / "check.json").write_text("{")
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "report2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "check.json is damaged" in err[0] and "fmm-fast check" in err[0]

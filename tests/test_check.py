"""`fmm-fast check` on the tiny bAbI model: the record, the verdict rule, one verdict per weights (however
they arrive, whatever their folder says), the Holm correction, one forward pass per masked set, resuming,
refusing, the one-line bad inputs, the Python result, and its line in `fmm-fast report`."""

from __future__ import annotations

import json
import shutil
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
from fmm_fast.protocols.check import FIX_EPOCHS, FIX_LR, FIX_SIZE
from fmm_fast.protocols.check_statistics import excess_nll, holm, label_prior
from fmm_fast.protocols.check_verdict import CANNOT_TELL, DOES_NOT, EXCESS_NLL_LIMIT, HANDLES, judge
from fmm_fast.protocols.masf.statistic import summarize_p_values

# bAbI-1 of 300: 60 validation examples calibrate, halves of 30
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
    assert calibration["set"] == "unmasked"  # the default for every model (this one was trained masked)
    assert record["correction"] == "holm"
    assert [p["simes_holm"] for p in record["points"]] == holm([p["simes"] for p in record["points"]])
    for point in record["points"]:
        assert set(point["metrics"]) >= {record["metric"]}
        assert point["in_distribution"] == (point["simes_holm"] > 0.05)
    judged = judge(
        record["points"], record["metric"], record["majority_baseline"], record["verdict"]["fix"] or ""
    )
    assert record["verdict"] == judged
    # At most one forward pass per row: 60 calibration inputs and 3 sets of 12, the signals of each set
    # served by the pass that scored its metric.
    assert record["engine"]["forward_rows"] <= 60 + 3 * 12
    assert (tmp_path / "check" / "check.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert f"calibration: unmasked; verdict: {record['verdict']['text']}" in printed
    assert_self_contained(printed + record["verdict"]["text"], "check's printed lines")


def test_unmasked_and_fully_masked_p_values_are_masf_split_ones(tiny_babi, tmp_path):
    """At 0% and 100% both commands test the same inputs against the same calibration (the whole
    60-example validation split masked as trained, seed 0): the same Simes p-values."""
    _, onnx_path, data = tiny_babi
    assert main(check_argv(onnx_path, data, tmp_path / "check", "--calibration", "masked")) == 0
    argv = ["masf", "--model", str(onnx_path), *data_flags(data), "--limit", "12", "-q"]
    argv += ["--calibration", "split", "--split-components", "8", "--out", str(tmp_path / "masf")]
    assert main(argv) == 0
    (masf,) = read_record(tmp_path / "masf" / "masf.json")["models"].values()
    masf_simes = {s["ratio"]: s["simes"] for s in masf["per_ratio"]}
    checked = read_record(tmp_path / "check" / "check.json")["points"]
    for point in (checked[0], checked[-1]):
        assert point["simes"] == pytest.approx(masf_simes[point["ratio"]], abs=1e-12)


class MaskShiftBackend:
    """The real backend, but masks move every hidden-state signal and push the logits confidently to the
    first label, with the row's share of mask tokens; and its metadata says it was trained masked: a model
    that does not handle masks, whatever its folder says."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.info = replace(inner.info, strategy="masked")
        self.name = inner.name

    def forward(self, input_ids, attention_mask, with_signals: bool = False) -> ForwardOutput:
        output = self.inner.forward(input_ids, attention_mask, with_signals)
        share = (input_ids == self.info.mask_id).sum(axis=1) / attention_mask.sum(axis=1)
        output.logits = output.logits.copy()
        output.logits[:, 0] += np.float32(30) * share.astype(np.float32)
        if output.signals is not None:
            output.signals = output.signals + np.float32(20) * share[:, None, None].astype(np.float32)
        return output


def test_a_model_that_overreacts_to_masks_does_not_handle_them_with_the_fixing_command(
    tiny_babi, tmp_path, capsys, monkeypatch
):
    import fmm_fast.protocols.check as protocol
    from fmm_fast.api import checking as check_command

    checkpoint, onnx_path, data = tiny_babi
    load = check_command.load_model

    def shifted(path, options):
        loaded = load(path, options)
        return replace(loaded, backend=MaskShiftBackend(loaded.backend))

    monkeypatch.setattr(check_command, "load_model", shifted)
    # the tiny model has not learned bAbI (it scores the majority baseline): a baseline it beats, so that
    # the verdict is decided by what masks do to it
    monkeypatch.setattr(protocol, "majority_metric", lambda *_: 0.0)
    assert main(check_argv(onnx_path, data, tmp_path / "check")) == 0
    record = read_record(tmp_path / "check" / "check.json")
    judged = record["verdict"]
    # MaSF moves too: raw p at the floor 1/31 at 100%, but one of 3 ratios' tests: Holm's 3/31 is not out
    fully = record["points"][-1]
    assert fully["simes"] <= 0.05 < fully["simes_holm"] == pytest.approx(3 / 31)
    assert judged["verdict"] == DOES_NOT and record["points"][-1]["excess_nll"] > EXCESS_NLL_LIMIT
    # the .onnx file trains from the checkpoint it was exported from, on the check's dataset, for minutes
    fix = (
        f"fmm-fast train --model {checkpoint} --strategy masked --dataset babi-1 "
        f"--test-size {data['test_size']} --size {min(data['size'], FIX_SIZE)} --epochs {FIX_EPOCHS} "
        f"--lr {FIX_LR:g} --out {checkpoint.parent}-masked"
    )
    assert judged["fix"] == fix
    assert judged["text"].startswith(DOES_NOT) and judged["text"].endswith(fix)
    assert fix in capsys.readouterr().out


def points_of(*rows: tuple[float, float, float]) -> list[dict]:
    """Check points at ratios 0, 0.5, 1 from (accuracy, excess NLL, Holm p) per ratio; the excess NLL's
    standard error a quarter of the limit (its 95% interval ±0.49 limits)."""
    return [
        {
            "ratio": r,
            "metrics": {"accuracy": a},
            "excess_nll": e,
            "excess_nll_se": EXCESS_NLL_LIMIT / 4,
            "simes_holm": p,
        }
        for r, (a, e, p) in zip((0.0, 0.5, 1.0), rows, strict=True)
    ]


def test_verdict_rule():
    fix = "fmm-fast train --model m --strategy masked --dataset d --out m-masked"
    learned = -2 * EXCESS_NLL_LIMIT  # unmasked, it beats the label prior by twice the limit
    handles = judge(points_of((0.9, learned, 0.5), (0.7, 0, 0.5), (0.5, 0.0, 0.01)), "accuracy", 0.5, fix)
    assert handles["verdict"] == HANDLES and handles["fix"] is None
    assert (handles["first_out_ratio"], handles["out_ratios"]) == (1.0, [1.0])  # MaSF shown, not used
    does_not = judge(points_of((0.9, 0, 0.5), (0.7, 0.5, 0.04), (0.5, 2.0, 0.5)), "accuracy", 0.5, fix)
    assert (does_not["verdict"], does_not["fix"], does_not["first_out_ratio"]) == (DOES_NOT, fix, 0.5)
    assert does_not["text"].startswith(DOES_NOT) and does_not["text"].endswith(fix)
    # the interval limit ± 0.49 limits straddles the limit: not enough test examples to decide
    unsure = judge(
        points_of((0.9, learned, 0.5), (0.7, 0, 0.5), (0.5, EXCESS_NLL_LIMIT, 0.5)), "accuracy", 0.5, fix
    )
    assert unsure["verdict"] == CANNOT_TELL and "--limit" in unsure["text"]
    # near the prior when masked, but barely better than it unmasked (the study's weakly trained models,
    # plain or masked, on bAbI-1): falling back to the prior shows nothing
    flat = judge(
        points_of((0.9, -EXCESS_NLL_LIMIT, 0.5), (0.7, 0, 0.5), (0.5, 0.0, 0.5)), "accuracy", 0.5, fix
    )
    assert flat["verdict"] == CANNOT_TELL and "beat the label prior by only" in flat["text"]
    assert flat["fix"] is None
    # a model no better than the majority unmasked, or a test split unlike the validation split
    untrained = judge(points_of((0.5, 0, 0.5), (0.5, 0, 0.5), (0.5, 2.0, 0.5)), "accuracy", 0.5, fix)
    assert untrained["verdict"] == CANNOT_TELL and "majority baseline unmasked" in untrained["text"]
    unlike = judge(points_of((0.9, 0, 0.01), (0.7, 0, 0.5), (0.5, 2.0, 0.5)), "accuracy", 0.5, fix)
    assert unlike["verdict"] == CANNOT_TELL and unlike["first_out_ratio"] == 0.0 and unlike["fix"] is None
    # what the record's points hold: summarize_p_values' Simes
    assert summarize_p_values(np.array([0.01, 0.02, 0.9]))["simes"] == pytest.approx(0.03)


def test_holm_adjusts_each_ratio_for_the_family():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4·0.005, 3·0.01, 2·0.03, max(1·0.04, 0.06); in the given order
    assert holm([0.03, 0.04, 0.01, 0.005]) == pytest.approx([0.06, 0.06, 0.03, 0.02])
    assert holm([0.5, 0.9]) == [1.0, 1.0]  # capped at 1, never below an earlier step
    assert holm([0.3, 0.04]) == pytest.approx([0.3, 0.08])
    assert holm([0.2]) == [0.2]


def test_excess_nll_is_zero_for_the_prior_and_positive_for_confident_mistakes():
    labels = np.array([0, 0, 0, 1])
    prior = label_prior(labels, 2)  # add-one smoothed: (4/6, 2/6)
    assert prior == pytest.approx([4 / 6, 2 / 6])
    as_prior = np.tile(np.log(prior), (4, 1))
    assert excess_nll(as_prior, labels, prior)[0] == pytest.approx(0.0, abs=1e-12)
    confident = np.array([[0.0, 10.0]] * 4)  # always label 1, surely
    mean, spread = excess_nll(confident, labels, prior)
    assert mean > 5 and spread > 0


def test_the_same_weights_get_the_same_verdict_however_they_arrive(tiny_babi, tmp_path, monkeypatch, capsys):
    """The issue's 2×2 on the tiny model: the same weights as the fmm-fast folder, a copy whose metadata says
    "plain", a copy without fmm-fast's metadata, the .onnx and a transformers (model, tokenizer) pair get the
    same points and verdict under the default calibration; the CLI and Python agree; the result's attributes
    and table are the printed ones."""
    import pandas  # noqa: F401 - to_pandas below
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    import fmm_fast

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    checkpoint, onnx_path, data = tiny_babi
    says_plain, bare = tmp_path / "says-plain", tmp_path / "bare"
    shutil.copytree(checkpoint, says_plain)
    info_file = says_plain / "fmm_info.json"
    info = json.loads(info_file.read_text())
    assert info["info"]["strategy"] == "masked"
    info["info"]["strategy"] = "plain"
    info_file.write_text(json.dumps(info))
    shutil.copytree(checkpoint, bare)
    (bare / "fmm_info.json").unlink()
    pair = (
        AutoModelForSequenceClassification.from_pretrained(checkpoint),
        AutoTokenizer.from_pretrained(checkpoint),
    )
    flags = {"dataset": "babi-1", **data, "limit": 12, "ratios": [0.5], "quiet": True}
    models = {"folder": checkpoint, "says-plain": says_plain, "bare": bare, "onnx": onnx_path, "pair": pair}
    results = {
        name: fmm_fast.check(model, out=tmp_path / "checks" / name, **flags) for name, model in models.items()
    }
    records = {name: result.record for name, result in results.items()}
    assert len({r["model"]["strategy"] for r in records.values()}) > 1  # the metadata did differ
    for record in records.values():
        assert record["calibration"]["set"] == "unmasked"
        assert record["calibration"]["components"] == 29  # fitted: half A of 30 varies in 29 directions
        for key in ("verdict", "first_out_ratio", "out_ratios", "fix"):
            assert record["verdict"][key] == records["folder"]["verdict"][key]
    # What the metadata says about the training changes nothing: the same points, to the bit. (Without
    # fmm_info.json the folder's own tokenizer.json encodes bAbI's question pairs with two separators where
    # fmm-fast's checkpoint records one: other inputs, so those two are compared with each other.)
    assert records["says-plain"]["points"] == records["folder"]["points"]
    assert records["pair"]["points"] == records["bare"]["points"]
    for got, want in zip(records["onnx"]["points"], records["folder"]["points"], strict=True):
        assert got["excess_nll"] == pytest.approx(want["excess_nll"], abs=1e-4)  # another runtime
    # the CLI on the same weights: the same record's points and verdict
    argv = ["check", "--model", str(bare), *data_flags(data), "--out", str(tmp_path / "cli")]
    assert main([*argv, "--limit", "12", "--ratios", "0.5", "-q"]) == 0
    cli = read_record(tmp_path / "cli" / "check.json")
    assert cli["points"] == records["bare"]["points"] and cli["verdict"] == records["bare"]["verdict"]
    # the Python result: the verdict, MaSF's first out ratio, the calibration, and the printed table
    result = results["folder"]
    assert result.verdict == records["folder"]["verdict"]["verdict"]
    assert result.first_out_ratio == records["folder"]["verdict"]["first_out_ratio"]
    assert result.calibration == "unmasked"
    table = result.to_pandas()
    metric = records["folder"]["metric"]
    assert list(table.columns) == [
        "ratio",
        metric,
        "majority",
        "excess_nll",
        "simes",
        "simes_holm",
        "in_distribution",
    ]
    assert table["simes_holm"].tolist() == [p["simes_holm"] for p in records["folder"]["points"]]
    with pytest.raises(TypeError):
        fmm_fast.check(checkpoint, tmp_path / "positional")  # out is given by keyword, as everywhere


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
    assert cells[6] == f"{100 * record['majority_baseline']:.1f}"
    assert cells[7] == f"{record['points'][-1]['excess_nll']:.2f}"
    first = record["verdict"]["first_out_ratio"]
    assert cells[8] == "unmasked: " + ("in at every ratio" if first is None else f"out from {first:.0%}")
    assert cells[9].startswith(record["verdict"]["verdict"])
    assert table in capsys.readouterr().out
    # a damaged check.json is named in one line, and the report is not written
    (tmp_path / "runs" / "check" / "check.json").write_text("{")
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "report2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "check.json is damaged" in err[0] and "fmm-fast check" in err[0]


def test_a_straddling_interval_is_narrowed_by_the_option_that_left_examples_out():
    """--limit is advised only where it cut the test split: with every example used it changes nothing."""
    from fmm_fast.data.options import DataOptions
    from fmm_fast.protocols.check import narrowing_advice

    assert "--limit above 12" in narrowing_advice(DataOptions("babi-1", limit=12), 12)
    assert "--test-size above 30" in narrowing_advice(DataOptions("babi-1", test_size=30), 30)
    for data, used in [(DataOptions("babi-1"), 40), (DataOptions("babi-1", limit=100), 40)]:
        advice = narrowing_advice(data, used)
        assert "--limit" not in advice and f"all {used} test examples were used" in advice


def test_a_calibration_too_small_for_any_ratio_to_be_out_is_named():
    """Holm multiplies the smallest p by the ratios: 200 calibration examples (floor 1/101) and 11 ratios can
    never reach 0.05, which the table's header says; 500 (floor 0.004) can."""
    from fmm_fast.protocols.check import _unreachable

    assert "raise --calibration-size" in _unreachable(1 / 101, 11, used=200, asked=200)
    assert "the validation split holds only 123" in _unreachable(1 / 101, 11, used=123, asked=500)
    assert _unreachable(0.004, 11, 500, 500) == "" and _unreachable(1 / 101, 1, 200, 200) == ""

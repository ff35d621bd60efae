"""The fidelity estimate of a reduced-precision evaluate, explain, aopc or masf run: the sample, the
comparison, record and table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fmm_fast.backends.loading import load_model
from fmm_fast.backends.options import BackendOptions
from fmm_fast.cli import main
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.measures.external import ExternalExplanation
from fmm_fast.measures.spec import resolve_measures
from fmm_fast.protocols.aopc import SUMMARIES
from fmm_fast.protocols.fidelity import (
    FidelitySample,
    SampleErasure,
    compare,
    fidelity_estimate,
    p_value_fidelity,
    peer_fidelity,
    precision_run,
    ranking_fidelity,
    sample_indices,
    scorer,
)

ACCURACY = scorer("accuracy", 2)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_sample_is_seeded_sorted_and_at_most_the_split() -> None:
    first = sample_indices(100, 16, seed=3)
    assert np.array_equal(first, sample_indices(100, 16, seed=3))
    assert not np.array_equal(first, sample_indices(100, 16, seed=4))
    assert len(set(first.tolist())) == 16 and np.all(np.diff(first) > 0) and first.max() < 100
    assert sample_indices(5, 16, seed=0).tolist() == [0, 1, 2, 3, 4]


def erasure(predictions: dict[str, list[list[int]]], erased_token: dict[str, list[int]]) -> SampleErasure:
    """A sample's erasure from each measure's predictions at every ratio ((K+1) lists of n labels) and one
    token per example standing for its erased input at every step."""
    arrays = {name: np.asarray(p, dtype=np.int64) for name, p in predictions.items()}
    erased = {
        name: [[np.asarray([t]) for t in tokens] for _ in range(len(arrays[name]) - 2)]
        for name, tokens in erased_token.items()
    }
    return SampleErasure(arrays["rand"][0], arrays, erased)


LABELS = np.asarray([0, 1, 0, 1, 0, 1, 0, 1])
RAND = [[0, 1, 0, 1, 0, 1, 0, 1]] * 6 + [[0, 0, 0, 1, 0, 0, 0, 1]] * 5  # falls from 1.0 to 0.75
FAST = [[0, 1, 0, 1, 0, 1, 0, 1]] + [[0, 0, 0, 0, 0, 0, 0, 0]] * 10  # 0.5 from r = 0.1 on


def test_the_same_erasure_in_both_precisions_differs_by_nothing() -> None:
    run = erasure({"rand": RAND, "m": FAST}, {"rand": list(range(8)), "m": list(range(8))})
    result = compare(run, run, LABELS, ACCURACY, seed=0)
    assert result["prediction_agreement"] == 1.0 and result["n_examples"] == 8
    for entry in result["measures"].values():
        assert entry["identical_masks"] == [1.0] * 9
        assert entry["delta_acu"] == 0.0 and entry["delta_acu_ci"] == [0.0, 0.0]
    assert result["measures"]["m"]["racu_fp32"] > 0  # the measure falls faster than rand


def test_a_reduced_precision_that_erases_otherwise_shows_its_shift() -> None:
    fp32 = erasure({"rand": RAND, "m": FAST}, {"rand": list(range(8)), "m": list(range(8))})
    later = [[0, 1, 0, 1, 0, 1, 0, 1]] * 6 + [[0, 0, 0, 0, 0, 0, 0, 0]] * 5  # falls at r = 0.6 only
    reduced = erasure({"rand": RAND, "m": later}, {"rand": list(range(8)), "m": [0, 1, 2, 3, 9, 9, 9, 9]})
    result = compare(reduced, fp32, LABELS, ACCURACY, seed=0)
    m = result["measures"]["m"]
    assert m["identical_masks"] == [0.5] * 9
    assert m["delta_acu"] == pytest.approx(m["acu_reduced"] - m["acu_fp32"]) and m["delta_acu"] < 0
    low, high = m["delta_racu_ci"]
    assert low <= m["delta_racu"] <= high < 0  # it erases more slowly in every resample
    assert result["measures"]["rand"]["delta_racu"] == 0.0


def test_per_example_figures_compare_over_the_examples_both_define() -> None:
    run = erasure({"rand": RAND, "m": FAST}, {"rand": list(range(8)), "m": list(range(8))})
    fp32_values = np.asarray([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, np.nan])
    reduced_values = fp32_values + 0.05
    reduced_values[0] = np.nan  # undefined in one precision: left out of both means
    fp32 = SampleErasure(run.unmasked, run.predictions, run.erased, {"m": {"tau_loo": fp32_values}})
    reduced = SampleErasure(run.unmasked, run.predictions, run.erased, {"m": {"tau_loo": reduced_values}})
    m = compare(reduced, fp32, LABELS, ACCURACY, seed=0)["measures"]["m"]
    assert m["tau_loo_fp32"] == pytest.approx(np.mean(fp32_values[1:7]))
    assert m["delta_tau_loo"] == pytest.approx(0.05) and m["delta_acu"] == 0.0
    assert m["delta_tau_loo_ci"] == pytest.approx([0.05, 0.05])  # every resample shifts by the same
    assert "delta_tau_loo" not in compare(reduced, fp32, LABELS, ACCURACY, seed=0)["measures"]["rand"]


@pytest.fixture
def fp32_twice(tiny_babi):
    """Ten test examples and both sides of an estimate on the same fp32 model: what compares exactly."""
    checkpoint, _, data = tiny_babi
    options = BackendOptions(device="cpu")
    loaded = load_model(checkpoint, options)
    _, encoded = open_split(loaded, DataOptions("babi-1", limit=10, **data))
    return encoded, (precision_run(loaded, options, 2048), precision_run(loaded, options, 2048))


def test_an_estimate_of_fp32_against_itself_is_exact(fp32_twice) -> None:
    encoded, sides = fp32_twice
    specs = resolve_measures(["loo-abs", "grad-l2"])
    estimate = fidelity_estimate(specs, 0, FidelitySample.draw(encoded, 4, 0), sides, "accuracy", 8)
    assert estimate["n_examples"] == 4 and estimate["sample"] == sample_indices(10, 4, 0).tolist()
    assert estimate["prediction_agreement"] == 1.0 and estimate["seconds"] > 0
    assert set(estimate["measures"]) == {"rand", "loo-abs", "grad-l2"}
    for entry in estimate["measures"].values():
        assert entry["identical_masks"] == [1.0] * 9 and entry["delta_acu"] == 0.0


def test_a_ranking_estimate_of_fp32_against_itself_is_exact(fp32_twice) -> None:
    encoded, sides = fp32_twice
    specs = resolve_measures(["loo-abs", "grad-l2"], baseline=False)
    estimate = ranking_fidelity(specs, 0, FidelitySample.draw(encoded, 5, 0), sides, 8)
    assert estimate["n_examples"] == 5 and estimate["prediction_agreement"] == 1.0
    assert {name: m["identical_masks"] for name, m in estimate["measures"].items()} == {
        "loo-abs": [1.0] * 9,
        "grad-l2": [1.0] * 9,
    }


def test_a_peer_metrics_estimate_of_fp32_against_itself_is_exact(fp32_twice) -> None:
    encoded, sides = fp32_twice
    specs = resolve_measures(["loo-abs", "grad-l2"])
    scores = [np.arange(len(e), dtype=np.float64) for e in encoded.explained]  # later tokens first
    outside = ExternalExplanation("outside", Path("outside.jsonl"), scores, False)
    sample = FidelitySample.draw(encoded, 5, 0)
    estimate = peer_fidelity(specs, [outside], 0, sample, sides, "accuracy", 8)
    assert estimate["n_examples"] == 5 and estimate["prediction_agreement"] == 1.0
    assert estimate["masks"] == "ranking" and estimate["sample"] == sample.ids.tolist()
    assert list(estimate["measures"]) == ["rand", "loo-abs", "grad-l2", "outside"]
    for entry in estimate["measures"].values():
        assert entry["identical_masks"] == [1.0] * 9
        for key in ("acu", *(key for key, _ in SUMMARIES)):
            assert entry[f"delta_{key}"] == 0.0, key
        assert entry["delta_racu"] == 0.0 or np.isnan(entry["racu_fp32"])  # nan over a flat rand curve
        assert np.isfinite(entry["aopc_comprehensiveness_fp32"])


def test_a_bf16_explanation_run_records_and_prints_its_estimate(tiny_babi, tmp_path, capsys) -> None:
    checkpoint, _, data = tiny_babi
    argv = ["explain", "--model", str(checkpoint), "--dataset", "babi-1", "--size", str(data["size"])]
    argv += ["--test-size", str(data["test_size"]), "--limit", "5", "-m", "loo-abs", "--device", "cpu"]
    out = tmp_path / "explanations.jsonl"
    assert main([*argv, "--precision", "bf16", "--fidelity-sample", "3", "--quiet", "--out", str(out)]) == 0
    estimate = json.loads(out.with_suffix(".run.json").read_text())["fidelity"]
    assert estimate["precision"] == "bf16" and estimate["n_examples"] == 3
    assert len(estimate["measures"]["loo-abs"]["identical_masks"]) == 9
    assert "identical ranking masks" in capsys.readouterr().out
    assert main([*argv, "--quiet", "--overwrite", "--out", str(out)]) == 0  # fp32: no estimate
    assert "fidelity" not in json.loads(out.with_suffix(".run.json").read_text())


def run_tiny(capsys, command: str, checkpoint, data, out, *flags: str) -> tuple[int, str, str]:
    """`command` on the tiny bAbI model's first 6 test examples (with loo-abs where it takes measures):
    its exit code, printed lines and errors."""
    argv = [command, "--model", str(checkpoint), "--dataset", "babi-1", "--size", str(data["size"])]
    argv += ["--test-size", str(data["test_size"]), "--limit", "6", "--device", "cpu"]
    argv += [] if command == "masf" else ["-m", "loo-abs"]
    code = main([*argv, *flags, "--quiet", "--out", str(out)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_bf16_evaluation_records_and_prints_its_estimate(tiny_babi, tmp_path, capsys) -> None:
    checkpoint, _, data = tiny_babi
    code, out, _ = run_tiny(capsys, "evaluate", checkpoint, data, tmp_path / "bf16", "--precision", "bf16",
                                "--fidelity-sample", "4")  # fmt: skip
    assert code == 0
    record = json.loads((tmp_path / "bf16" / "seed-0" / "result.json").read_text())
    estimate = record["fidelity"]
    assert estimate["precision"] == "bf16" and estimate["n_examples"] == 4
    assert set(estimate["measures"]) == {"rand", "loo-abs"}
    assert all(len(m["identical_masks"]) == 9 for m in estimate["measures"].values())
    assert "fidelity of bf16 against fp32 on a sample of 4 examples" in out and "ΔRACU" in out
    assert "fidelity" not in record["arguments"] and record["arguments"]["fidelity_sample"] == 4


@pytest.mark.parametrize("flags", [[], ["--precision", "bf16", "--fidelity-sample", "0"]])
def test_no_estimate_in_fp32_or_when_turned_off(tiny_babi, tmp_path, capsys, flags) -> None:
    checkpoint, _, data = tiny_babi
    code, out, _ = run_tiny(capsys, "evaluate", checkpoint, data, tmp_path / "run", *flags)
    assert code == 0 and "fidelity of" not in out
    assert "fidelity" not in json.loads((tmp_path / "run" / "seed-0" / "result.json").read_text())


def test_a_negative_sample_is_a_user_error(tiny_babi, tmp_path, capsys) -> None:
    checkpoint, _, data = tiny_babi
    code, _, err = run_tiny(capsys, "evaluate", checkpoint, data, tmp_path / "run", "--fidelity-sample", "-1")
    assert code == 2 and "--fidelity-sample" in err and err.count("\n") == 1


def test_a_bf16_peer_metrics_run_records_and_prints_its_seeded_estimate(tiny_babi, tmp_path, capsys) -> None:
    checkpoint, _, data = tiny_babi
    flags = ("--precision", "bf16", "--fidelity-sample", "4", "--seed", "3")
    code, out, _ = run_tiny(capsys, "aopc", checkpoint, data, tmp_path / "bf16", *flags)
    assert code == 0
    record = json.loads((tmp_path / "bf16" / "seed-3" / "result.json").read_text())
    estimate = record["fidelity"]
    assert estimate["precision"] == "bf16" and estimate["n_examples"] == 4
    assert estimate["sample"] == sample_indices(6, 4, seed=3).tolist()  # drawn by the run's seed
    assert set(estimate["measures"]) == {"rand", "loo-abs"}
    loo = estimate["measures"]["loo-abs"]
    assert len(loo["identical_masks"]) == 9 and all(0 <= share <= 1 for share in loo["identical_masks"])
    assert {"delta_racu", "delta_aopc_comprehensiveness", "delta_aopc_sufficiency", "delta_tau_loo"} <= set(
        loo
    )
    assert estimate["seconds"] > 0 and record["arguments"]["fidelity_sample"] == 4
    assert "fidelity of bf16 against fp32 on a sample of 4 examples" in out
    assert "identical ranking masks" in out and "ΔAOPC comp" in out and "Δτ-LOO" in out
    # a second run draws the same examples
    code, _, _ = run_tiny(capsys, "aopc", checkpoint, data, tmp_path / "again", *flags)
    again = json.loads((tmp_path / "again" / "seed-3" / "result.json").read_text())["fidelity"]
    assert code == 0 and again["sample"] == estimate["sample"]


@pytest.mark.parametrize("flags", [[], ["--precision", "bf16", "--fidelity-sample", "0"]])
def test_no_peer_metrics_estimate_in_fp32_or_when_turned_off(tiny_babi, tmp_path, capsys, flags) -> None:
    checkpoint, _, data = tiny_babi
    code, out, _ = run_tiny(capsys, "aopc", checkpoint, data, tmp_path / "run", *flags)
    assert code == 0 and "fidelity of" not in out
    assert "fidelity" not in json.loads((tmp_path / "run" / "seed-0" / "result.json").read_text())


def test_p_values_moved_by_a_reduced_precision_show_their_shift() -> None:
    fp32 = {0.0: np.asarray([0.2, 0.5, 0.01, 0.9]), 0.5: np.asarray([0.1, 0.3, 0.6, 0.8])}
    reduced = {0.0: fp32[0.0].copy(), 0.5: fp32[0.5] + np.asarray([0.1, 0.1, 0.1, 0.1])}
    reduced[0.0][2] = 0.06  # crosses the in-distribution level
    estimate = p_value_fidelity(reduced, fp32, 0.75, "bf16", np.arange(4), seed=0, seconds=1.5)
    unmoved, moved = estimate["per_ratio"]
    assert unmoved["ratio"] == 0.0 and unmoved["same_side"] == 0.75
    assert unmoved["delta_mean_p"] == pytest.approx(0.05 / 4)
    assert moved["delta_mean_p"] == pytest.approx(0.1) and moved["delta_mean_p_ci"] == pytest.approx(
        [0.1, 0.1]
    )
    assert moved["same_side"] == 1.0 and estimate["prediction_agreement"] == 0.75
    assert estimate["n_examples"] == 4 and estimate["sample"] == [0, 1, 2, 3]


def test_a_bf16_masf_run_records_and_prints_its_seeded_estimate(tiny_babi, tmp_path, capsys) -> None:
    checkpoint, _, data = tiny_babi
    flags = ("--precision", "bf16", "--fidelity-sample", "4", "--seed", "2")
    code, out, _ = run_tiny(capsys, "masf", checkpoint, data, tmp_path / "bf16", *flags)
    assert code == 0
    (result,) = json.loads((tmp_path / "bf16" / "masf.json").read_text())["models"].values()
    estimate = result["fidelity"]
    assert estimate["precision"] == "bf16" and estimate["n_examples"] == 4 and estimate["seconds"] > 0
    assert estimate["sample"] == sample_indices(6, 4, seed=2).tolist()  # drawn by the run's seed
    assert [r["ratio"] for r in estimate["per_ratio"]] == [s["ratio"] for s in result["per_ratio"]]
    assert all(0 <= r["same_side"] <= 1 and r["delta_mean_p_ci"] is not None for r in estimate["per_ratio"])
    assert "in bf16 against fp32 on a sample of 4 test examples" in out and "Δ mean p" in out


@pytest.mark.parametrize("flags", [[], ["--precision", "bf16", "--fidelity-sample", "0"]])
def test_no_masf_estimate_in_fp32_or_when_turned_off(tiny_babi, tmp_path, capsys, flags) -> None:
    checkpoint, _, data = tiny_babi
    code, out, _ = run_tiny(capsys, "masf", checkpoint, data, tmp_path / "run", *flags)
    (result,) = json.loads((tmp_path / "run" / "masf.json").read_text())["models"].values()
    assert code == 0 and "fidelity" not in result and "against fp32" not in out

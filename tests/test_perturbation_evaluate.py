"""The perturbation measures end to end: recursive erasure through `evaluate` on the tiny bAbI model's ONNX
export (forward passes only, no PyTorch model), and the same explanations from the ONNX and PyTorch
backends."""

from __future__ import annotations

import math

import numpy as np

import fmm_fast

NAMES = ["shapley-sampling", "kernel-shap-abs", "lime", "occlusion-2-abs"]
OPTIONS = {"samples": 24, "permutations": 2}


def test_each_perturbation_measure_runs_recursive_erasure_on_onnx(tiny_babi, tmp_path) -> None:
    _, onnx_path, data = tiny_babi
    evaluation = fmm_fast.evaluate(
        onnx_path, dataset="babi-1", **data, measure=NAMES, measure_option=OPTIONS, limit=4, quiet=True,
        out=tmp_path / "run",
    )  # fmt: skip
    rows = {row["measure"]: row for row in evaluation.rows()}
    assert sorted(rows) == sorted([*NAMES, "rand"])
    for name in NAMES:
        curve = [rows[name][f"r={r / 10:g}"] for r in range(11)]
        assert curve[0] == rows["rand"]["r=0"] and curve[-1] == rows["rand"]["r=1"]
        assert all(math.isfinite(point) for point in curve)


def test_onnx_and_pytorch_give_the_same_perturbation_explanations(tiny_babi) -> None:
    checkpoint, onnx_path, data = tiny_babi
    for name in ("kernel-shap", "shapley-sampling", "lime"):
        explained = [
            fmm_fast.explain(
                model, dataset="babi-1", **data, measure=name, measure_option=OPTIONS, limit=2, quiet=True
            )
            for model in (onnx_path, checkpoint)
        ]
        for onnx_side, torch_side in zip(*explained, strict=True):
            scores = np.asarray(onnx_side.scores)
            assert np.abs(scores).max() > 0
            # the two runtimes' float32 logits differ in their last bits; the tiny model's scores are small
            np.testing.assert_allclose(scores, torch_side.scores, rtol=1e-2, atol=1e-6)

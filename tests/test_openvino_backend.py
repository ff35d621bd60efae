"""OpenVinoBackend's plugin properties: the per-operation profile bench/ reads."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from fmm_fast.core.datatypes import pad_batch

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("openvino") is None, reason="the openvino extra is not installed"
)


def batch(info, lengths: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ordinary tokens (a mask in each) of the given lengths, right-padded."""
    words = [i for i in range(5, 200) if i not in info.special_ids]
    rows = []
    for length in lengths:
        ids = np.resize(words, length)
        ids[length // 2] = info.mask_id
        rows.append(np.asarray([info.special_ids[0], *ids, info.special_ids[-1]], dtype=np.int64))
    return pad_batch(rows, info.pad_id)


def test_profile_names_the_matrix_products_only_when_asked_for(tiny_babi) -> None:
    from fmm_fast.backends.openvino_backend import OpenVinoBackend

    _, onnx_path, _ = tiny_babi
    plain = OpenVinoBackend(onnx_path, "fp32")
    profiled = OpenVinoBackend(onnx_path, "fp32", properties={"PERF_COUNT": True})
    input_ids, attention_mask = batch(plain.info, (5, 9, 13))
    expected = plain.forward(input_ids, attention_mask).logits
    np.testing.assert_array_equal(profiled.forward(input_ids, attention_mask).logits, expected)
    assert all(node.real_time.total_seconds() == 0 for node in plain.profiling_info())
    node_types = {node.node_type for node in profiled.profiling_info()}
    assert "FullyConnected" in node_types
    assert sum(node.real_time.total_seconds() for node in profiled.profiling_info()) > 0

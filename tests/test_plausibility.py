"""Plausibility against supporting facts: token-F1, IOU and AUPRC by hand and against scikit-learn."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fmm_fast.protocols.plausibility import auprc, plausibility, token_f1, token_iou


def flags(pattern: str) -> np.ndarray:
    return np.array([c == "S" for c in pattern])


EXPLAINED = np.array([False, True, True, True, True, False])  # [CLS] a b c d [SEP]
SUPPORTING = flags(".SS...")  # a and b
SCORES = np.array([9.0, 0.9, 0.1, 0.5, 0.1, 9.0])  # ranking a, c, b, d (b before d on the tie)


def test_hand_computed_values():
    assert token_f1(SCORES, SUPPORTING, EXPLAINED, 1) == pytest.approx(2 * 1 * 0.5 / 1.5)  # P 1, R 1/2
    assert token_f1(SCORES, SUPPORTING, EXPLAINED, 2) == pytest.approx(0.5)  # a, c: P 1/2, R 1/2
    assert token_f1(SCORES, SUPPORTING, EXPLAINED, 3) == pytest.approx(2 * (2 / 3) / (2 / 3 + 1))
    assert token_iou(SCORES, SUPPORTING, EXPLAINED, 2) == pytest.approx(1 / 3)  # {a} of {a, b, c}
    assert token_iou(SCORES, SUPPORTING, EXPLAINED, 3) == pytest.approx(2 / 3)
    # curve points: (0, 1), a (1/2, 1), c (1/2, 1/2), {b, d} tied (1, 1/2): areas 1/2 + 0 + 1/2·1/2
    assert auprc(SCORES, SUPPORTING, EXPLAINED) == pytest.approx(0.75)
    assert math.isnan(token_f1(SCORES, flags("......"), EXPLAINED, 2))


def test_auprc_matches_scikit_learn_as_ferret_calls_it():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(2, 12))
        gold = rng.random(n) < 0.4
        gold[rng.integers(n)] = True
        scores = rng.integers(0, 4, n).astype(float)  # ties are common
        precision, recall, _ = metrics.precision_recall_curve(gold, scores)
        expected = metrics.auc(recall, precision)
        assert auprc(scores, gold, np.ones(n, bool)) == pytest.approx(expected, abs=1e-12)


def test_means_skip_examples_without_supporting_tokens():
    result = plausibility([SCORES, SCORES], [SUPPORTING, flags("......")], [EXPLAINED, EXPLAINED], [2])
    assert result == {"token_f1": {"2": 0.5}, "iou": {"2": pytest.approx(1 / 3)}, "auprc": 0.75}

"""Metrics against hand-worked confusion matrices, edge cases and a scikit-learn cross-check."""

import math

import numpy as np
import pytest
from sklearn.metrics import f1_score, matthews_corrcoef

from fmm_fast.core.metrics import (
    METRICS,
    accuracy,
    compute_metrics,
    confusion_matrix,
    macro_f1,
    majority_metric,
    matthews,
    micro_f1,
)

# Binary: gold [0 0 0 1 1], pred [0 0 1 1 0] -> confusion (rows gold) [[2, 1], [1, 1]].
#   accuracy 3/5. F1_0 = 2·2/(2·2+1+1) = 2/3, F1_1 = 2·1/(2·1+1+1) = 1/2, macro = 7/12.
#   MCC with positive = 1: TP 1, TN 2, FP 1, FN 1 -> (1·2 − 1·1)/sqrt(2·2·3·3) = 1/6.
BINARY_TRUE = np.array([0, 0, 0, 1, 1])
BINARY_PRED = np.array([0, 0, 1, 1, 0])

# Three classes, class 2 never predicted: gold [0 0 1 1 2 2], pred [0 0 1 0 1 1]
#   -> confusion [[2, 0, 0], [1, 1, 0], [0, 2, 0]]; accuracy 3/6.
#   F1_0 = 4/(4+1+0) = 0.8, F1_1 = 2/(2+2+1) = 0.4, F1_2 = 0 -> macro 0.4.
#   Gorodkin: c 3, s 6, t (2, 2, 2), p (3, 3, 0): (3·6 − 12)/sqrt((36 − 18)(36 − 12)) = 6/sqrt(432) = √3/6.
THREE_TRUE = np.array([0, 0, 1, 1, 2, 2])
THREE_PRED = np.array([0, 0, 1, 0, 1, 1])


def test_confusion_matrix_by_hand():
    assert confusion_matrix(BINARY_TRUE, BINARY_PRED).tolist() == [[2, 1], [1, 1]]
    assert confusion_matrix(THREE_TRUE, THREE_PRED).tolist() == [[2, 0, 0], [1, 1, 0], [0, 2, 0]]
    assert confusion_matrix([0, 1], [1, 1], num_labels=3).shape == (3, 3)


def test_binary_by_hand():
    assert accuracy(BINARY_TRUE, BINARY_PRED) == pytest.approx(3 / 5)
    assert micro_f1(BINARY_TRUE, BINARY_PRED) == pytest.approx(3 / 5)
    assert macro_f1(BINARY_TRUE, BINARY_PRED) == pytest.approx(7 / 12)
    assert matthews(BINARY_TRUE, BINARY_PRED) == pytest.approx(1 / 6)


def test_three_classes_with_a_class_never_predicted():
    assert accuracy(THREE_TRUE, THREE_PRED) == pytest.approx(0.5)
    assert micro_f1(THREE_TRUE, THREE_PRED) == pytest.approx(0.5)
    assert macro_f1(THREE_TRUE, THREE_PRED) == pytest.approx(0.4)  # F1 of class 2 counts as 0
    assert matthews(THREE_TRUE, THREE_PRED) == pytest.approx(math.sqrt(3) / 6)


def test_constant_prediction():
    # gold [0 1 1 2], always 1: accuracy 1/2; F1_1 = 2·2/(2·2+2+0) = 2/3, others 0 -> macro (2/3)/3 = 2/9.
    # Σ p_k² = 16 = s², so Matthews' denominator is 0 and it scores 0.
    gold, pred = np.array([0, 1, 1, 2]), np.array([1, 1, 1, 1])
    assert accuracy(gold, pred) == pytest.approx(0.5)
    assert macro_f1(gold, pred, num_labels=3) == pytest.approx(2 / 9)
    assert matthews(gold, pred) == 0.0
    assert matthews(np.zeros(5, int), np.zeros(5, int)) == 0.0  # constant gold too


def test_majority_baseline_matches_paper_formula():
    # The paper's majority-class baseline: macro-F1 = (1/K)·c/(0.5·s + 0.5·c), c = majority count.
    gold = np.array([0] * 7 + [1] * 2 + [2] * 1)
    pred = np.zeros_like(gold)
    c, s, k = 7, 10, 3
    assert macro_f1(gold, pred, num_labels=k) == pytest.approx((1 / k) * c / (0.5 * s + 0.5 * c))


def test_the_majority_baseline_is_the_chosen_metric_of_the_majority_predictor():
    spam = np.array([0] * 870 + [1] * 130)  # 13% positive
    assert majority_metric(spam, "accuracy", 2) == pytest.approx(0.87)
    assert majority_metric(spam, "macro_f1", 2) == pytest.approx(0.465, abs=5e-4)  # not 0.87
    assert majority_metric(np.array([1, 0, 1]), "micro_f1", 3) == pytest.approx(2 / 3)
    assert np.isnan(majority_metric(np.array([], dtype=np.int64), "accuracy", 2))


def test_extremes():
    gold = np.array([0, 1, 2, 1, 0])
    assert compute_metrics(gold, gold, 3) == pytest.approx(
        {"accuracy": 1.0, "macro_f1": 1.0, "micro_f1": 1.0, "matthews": 1.0}
    )
    assert matthews(np.array([0, 1, 0, 1]), np.array([1, 0, 1, 0])) == pytest.approx(-1.0)
    assert accuracy(np.array([0, 1, 0, 1]), np.array([1, 0, 1, 0])) == 0.0


def test_absent_class_counts_only_when_num_labels_says_so():
    gold = pred = np.array([0, 1, 0, 1])
    assert macro_f1(gold, pred) == pytest.approx(1.0)
    assert macro_f1(gold, pred, num_labels=3) == pytest.approx(2 / 3)


def test_bad_inputs():
    with pytest.raises(ValueError, match="y_pred"):
        accuracy(np.array([0, 1]), np.array([0]))
    with pytest.raises(ValueError, match="at least one"):
        accuracy(np.array([], int), np.array([], int))
    with pytest.raises(ValueError, match="out of range"):
        macro_f1(np.array([0, 3]), np.array([0, 1]), num_labels=3)
    with pytest.raises(ValueError, match="non-negative"):
        matthews(np.array([0, -1]), np.array([0, 1]))


def test_registry_and_compute_metrics():
    assert set(METRICS) == {"accuracy", "macro_f1", "micro_f1", "matthews"}
    result = compute_metrics(THREE_TRUE, THREE_PRED, 3)
    assert set(result) == set(METRICS)
    for name, value in result.items():
        assert value == pytest.approx(METRICS[name](THREE_TRUE, THREE_PRED))
        assert isinstance(value, float)


@pytest.mark.filterwarnings("ignore:A single label was found")  # sklearn's note on tiny samples
@pytest.mark.parametrize("num_labels", [2, 3, 6])
def test_against_sklearn(num_labels):
    rng = np.random.default_rng(num_labels)
    for _ in range(20):
        size = int(rng.integers(1, 60))
        gold = rng.integers(0, num_labels, size)
        # Mostly-correct predictions with noise, sometimes collapsed onto few classes.
        pred = np.where(rng.random(size) < 0.6, gold, rng.integers(0, num_labels, size))
        if rng.random() < 0.3:
            pred = np.minimum(pred, 1)
        labels = list(range(num_labels))
        assert accuracy(gold, pred) == pytest.approx(np.mean(gold == pred))
        assert macro_f1(gold, pred, num_labels) == pytest.approx(
            f1_score(gold, pred, labels=labels, average="macro", zero_division=0)
        )
        assert micro_f1(gold, pred, num_labels) == pytest.approx(
            f1_score(gold, pred, labels=labels, average="micro", zero_division=0)
        )
        assert matthews(gold, pred) == pytest.approx(matthews_corrcoef(gold, pred), abs=1e-12)

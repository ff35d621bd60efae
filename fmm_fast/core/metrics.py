"""Classification metrics on integer label arrays, computed from one confusion matrix (plain NumPy).

Every metric takes y_true (N,) int and y_pred (N,) int label indices. Degenerate cases score 0 instead of
dividing by zero: a class that is never predicted (or never gold) has F1 0, and Matthews of a constant
prediction (or a constant gold) is 0 — the conventions of scikit-learn and of the paper's TF metrics.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, num_labels: int | None = None) -> np.ndarray:
    """(K, K) int64 counts, rows = gold label, columns = predicted label.

    K = num_labels, or one more than the largest label seen when num_labels is None.
    """
    gold = np.asarray(y_true, dtype=np.int64).reshape(-1)
    pred = np.asarray(y_pred, dtype=np.int64).reshape(-1)
    if gold.shape != pred.shape:
        raise ValueError(f"y_true has {gold.size} labels but y_pred has {pred.size}")
    if gold.size == 0:
        raise ValueError("metrics need at least one example")
    if min(gold.min(), pred.min()) < 0:
        raise ValueError("labels must be non-negative class indices")
    largest = int(max(gold.max(), pred.max()))
    if num_labels is None:
        num_labels = largest + 1
    elif largest >= num_labels:
        raise ValueError(f"label {largest} is out of range for num_labels={num_labels}")
    counts = np.bincount(gold * num_labels + pred, minlength=num_labels * num_labels)
    return counts.reshape(num_labels, num_labels).astype(np.int64)


def _safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Elementwise numerator / denominator with 0 where the denominator is 0."""
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator != 0)


def accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Fraction of examples whose predicted label equals the gold label."""
    matrix = confusion_matrix(y_true, y_pred)
    return float(np.trace(matrix) / matrix.sum())


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray, num_labels: int | None = None) -> float:
    """Unweighted mean of the per-class F1 over all num_labels classes.

    F1_k = 2·TP_k / (2·TP_k + FP_k + FN_k), and 0 for a class with no gold and no predicted example
    (the paper's TF F1 averages over every class this way; give num_labels so absent classes count).
    """
    matrix = confusion_matrix(y_true, y_pred, num_labels)
    true_positives = np.diag(matrix)
    false_positives = matrix.sum(axis=0) - true_positives
    false_negatives = matrix.sum(axis=1) - true_positives
    per_class = _safe_divide(2 * true_positives, 2 * true_positives + false_positives + false_negatives)
    return float(per_class.mean())


def micro_f1(y_true: np.ndarray, y_pred: np.ndarray, num_labels: int | None = None) -> float:
    """F1 of the TP/FP/FN counts pooled over classes; for single-label data it equals accuracy."""
    matrix = confusion_matrix(y_true, y_pred, num_labels)
    true_positives = np.trace(matrix)
    wrong = matrix.sum() - true_positives  # every error is one FP (its prediction) and one FN (its gold)
    return float(_safe_divide(2 * true_positives, 2 * true_positives + 2 * wrong))


def matthews(y_true: np.ndarray, y_pred: np.ndarray, num_labels: int | None = None) -> float:
    """Multiclass Matthews correlation (Gorodkin's R_K, as scikit-learn's matthews_corrcoef).

    With c correct of s examples, t_k gold and p_k predicted counts of class k:
    (c·s − Σ t_k p_k) / sqrt((s² − Σ p_k²)(s² − Σ t_k²)), and 0 when either factor is 0.
    """
    matrix = confusion_matrix(y_true, y_pred, num_labels).astype(np.float64)
    gold_counts = matrix.sum(axis=1)
    pred_counts = matrix.sum(axis=0)
    correct = np.trace(matrix)
    total = matrix.sum()
    covariance = correct * total - gold_counts @ pred_counts
    spread = (total**2 - pred_counts @ pred_counts) * (total**2 - gold_counts @ gold_counts)
    return float(covariance / np.sqrt(spread)) if spread > 0 else 0.0


METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "accuracy": accuracy,
    "macro_f1": macro_f1,
    "micro_f1": micro_f1,
    "matthews": matthews,
}


def compute_metrics(y_true: np.ndarray, y_pred: np.ndarray, num_labels: int) -> dict[str, float]:
    """All four metrics, with F1 averaged over all num_labels classes."""
    return {
        "accuracy": accuracy(y_true, y_pred),
        "macro_f1": macro_f1(y_true, y_pred, num_labels),
        "micro_f1": micro_f1(y_true, y_pred, num_labels),
        "matthews": matthews(y_true, y_pred, num_labels),
    }


def majority_metric(y_true: np.ndarray, metric: str, num_labels: int) -> float:
    """`metric` of the majority predictor (always the most frequent gold label, the first on a tie): the
    baseline of every curve and table in that metric (e.g. macro-F1 0.47 where accuracy is 0.885).

    y_true: (N,) int label indices; nan when N = 0.
    """
    gold = np.asarray(y_true, dtype=np.int64).reshape(-1)
    if gold.size == 0:
        return float("nan")
    majority = np.full(gold.shape, np.bincount(gold, minlength=num_labels).argmax(), dtype=np.int64)
    return compute_metrics(gold, majority, num_labels)[metric]

"""The statistics `fmm-fast check` decides with (docs/method.md, "Does the model handle masks?"): how far a
model's predictions on fully masked inputs are from the label prior, and the Holm correction of the MaSF
tests across masking ratios."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def label_prior(labels: np.ndarray, num_labels: int) -> np.ndarray:
    """(N,) int gold labels of the training split -> (C,) float64 label shares, add-one smoothed so that a
    class the split lacks has a finite log-probability."""
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=num_labels).astype(np.float64)
    return (counts + 1) / (counts.sum() + num_labels)


def gold_nll(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(N, C) logits, (N,) gold labels -> (N,) float64 negative log-softmax of the gold label."""
    values = np.asarray(logits, dtype=np.float64)
    top = values.max(axis=1, keepdims=True)
    log_norm = top[:, 0] + np.log(np.exp(values - top).sum(axis=1))
    return log_norm - values[np.arange(len(values)), labels]


def excess_nll(logits: np.ndarray, labels: np.ndarray, prior: np.ndarray) -> tuple[float, float]:
    """(N, C) logits, (N,) gold labels, (C,) label prior -> the mean over the N examples of the gold label's
    NLL under the model minus under the prior, in nats, and its standard error: 0 for a model that answers
    with the prior, positive for one more confidently wrong than it."""
    labels = np.asarray(labels, dtype=np.int64)
    excess = gold_nll(logits, labels) + np.log(prior[labels])
    spread = float(excess.std(ddof=1) / np.sqrt(len(excess))) if len(excess) > 1 else float("inf")
    return float(excess.mean()), spread


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (one per masking ratio), in the given order:
    adjusted p_(i) = max over j ≤ i of min(1, (m − j + 1) p_(j)) in ascending order. Rejecting where the
    adjusted p is at most α controls the family-wise error at α under any dependence between the tests."""
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (len(p) - np.arange(len(p))) * p[order])
    adjusted = np.empty_like(p)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted.tolist()

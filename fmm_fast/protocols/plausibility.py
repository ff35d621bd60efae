"""Plausibility against ground-truth tokens (bAbI's supporting facts), with ferret's three metrics.

Per example, over its explained tokens, with the gold set S = explained tokens inside a supporting fact:
- token-F1@k: the hard rationale is the top-k tokens (docs/method.md §4 ranking: descending score, ties to the
  earlier position); F1 of its precision |top-k ∩ S| / |top-k| and recall |top-k ∩ S| / |S| (0 when
  either is 0), as ferret's token-level F1 (ERASER's instance F1);
- IOU@k: |top-k ∩ S| / |top-k ∪ S|, ferret's token IOU;
- AUPRC: the area under the precision-recall curve of the soft scores against S, by the trapezoid
  rule over the curve that scikit-learn's precision_recall_curve draws (one point per distinct score,
  plus precision 1 at recall 0), as ferret computes it.
ferret ranks by signed score and, by default, drops non-positive scores from the hard rationale; here
signed measures rank by signed score too (as the overlap does) and nothing is dropped, so that every
measure's top-k has k tokens. An example without supporting tokens gets nan (left out of means).
"""

from __future__ import annotations

import numpy as np

from fmm_fast.measures.ranking import top_k_positions


def _gold(supporting: np.ndarray, explained: np.ndarray) -> np.ndarray:
    return np.asarray(supporting, dtype=bool) & np.asarray(explained, dtype=bool)


def token_f1(scores: np.ndarray, supporting: np.ndarray, explained: np.ndarray, k: int) -> float:
    """(T,) arrays -> F1 of the top-k explained tokens against the supporting ones (nan without any)."""
    gold = _gold(supporting, explained)
    if not gold.any():
        return float("nan")
    top = top_k_positions(scores, explained, k)
    hits = int(np.count_nonzero(gold[top]))
    if hits == 0:
        return 0.0
    precision, recall = hits / len(top), hits / int(np.count_nonzero(gold))
    return 2 * precision * recall / (precision + recall)


def token_iou(scores: np.ndarray, supporting: np.ndarray, explained: np.ndarray, k: int) -> float:
    """(T,) arrays -> |top-k ∩ S| / |top-k ∪ S| (nan without supporting tokens)."""
    gold = _gold(supporting, explained)
    if not gold.any():
        return float("nan")
    predicted = np.zeros(len(gold), dtype=bool)
    predicted[top_k_positions(scores, explained, k)] = True
    return int(np.count_nonzero(predicted & gold)) / int(np.count_nonzero(predicted | gold))


def auprc(scores: np.ndarray, supporting: np.ndarray, explained: np.ndarray) -> float:
    """(T,) arrays -> area under the precision-recall curve of the explained tokens' scores against S.

    One curve point per distinct score (every token scoring at least it is predicted), then the point
    (recall 0, precision 1); trapezoid rule over recall. nan without supporting tokens.
    """
    gold = _gold(supporting, explained)
    if not gold.any():
        return float("nan")
    positions = np.flatnonzero(explained)
    values = np.asarray(scores, dtype=np.float64)[positions]
    labels = gold[positions]
    order = np.argsort(-values, kind="stable")
    values, labels = values[order], labels[order]
    last_of_each_value = np.r_[np.flatnonzero(np.diff(values)), len(values) - 1]
    true_positives = np.cumsum(labels)[last_of_each_value]
    predicted = last_of_each_value + 1
    precision = np.r_[1.0, true_positives / predicted]
    recall = np.r_[0.0, true_positives / true_positives[-1]]
    return float(np.sum(np.diff(recall) * (precision[1:] + precision[:-1]) / 2))


def plausibility(
    scores: list[np.ndarray], supporting: list[np.ndarray], explained: list[np.ndarray], ks: list[int]
) -> dict:
    """Means over examples with supporting tokens: {"token_f1": {k: .}, "iou": {k: .}, "auprc": .}."""
    rows = list(zip(scores, supporting, explained, strict=True))

    def mean(values: list[float]) -> float | None:
        finite = [v for v in values if not np.isnan(v)]
        return float(np.mean(finite)) if finite else None

    return {
        "token_f1": {str(k): mean([token_f1(s, g, e, k) for s, g, e in rows]) for k in ks},
        "iou": {str(k): mean([token_iou(s, g, e, k) for s, g, e in rows]) for k in ks},
        "auprc": mean([auprc(s, g, e) for s, g, e in rows]),
    }

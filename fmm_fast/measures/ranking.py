"""The ranking every fixed-explanation metric shares (method.md §4, §8): explained tokens by descending score,
ties to the earlier position; tokens that are not explained never rank."""

from __future__ import annotations

import numpy as np


def top_k_positions(scores: np.ndarray, explained: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k highest-scoring explained tokens (fewer if fewer are explained).

    scores, explained: (T,). A stable sort on the negated score, so ties go to the earlier position.
    Returns (min(k, n_explained),) int64; k = n_explained gives the whole ranking.
    """
    key = np.where(explained, -np.asarray(scores, dtype=np.float64), np.inf)
    return np.argsort(key, kind="stable")[: min(k, int(np.count_nonzero(explained)))]

"""The ranking every fixed-explanation metric shares (method.md §4, §8): explained tokens by descending score,
ties to the earlier position; tokens that are not explained never rank."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def top_k_positions(scores: np.ndarray, explained: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k highest-scoring explained tokens (fewer if fewer are explained).

    scores, explained: (T,). A stable sort on the negated score, so ties go to the earlier position.
    Returns (min(k, n_explained),) int64; k = n_explained gives the whole ranking.
    """
    key = np.where(explained, -np.asarray(scores, dtype=np.float64), np.inf)
    return np.argsort(key, kind="stable")[: min(k, int(np.count_nonzero(explained)))]


@dataclass(frozen=True)
class UnitRanking:
    """One example's explained units ranked by score (method.md §4 "Erasure units"; token units: the tokens,
    as top_k_positions ranks them).

    positions: (K,) int64 the explained positions, ascending; unit: (K,) int64 each one's unit, 0..n-1 in
    order of their first token; rank: (K,) int64 its unit's place in the ranking (0 = the highest score;
    ties to the earlier unit); unit_scores: (n,) float64 each unit's score (the score of its first token:
    every token of a unit holds its unit's score).
    """

    positions: np.ndarray
    unit: np.ndarray
    rank: np.ndarray
    unit_scores: np.ndarray

    @classmethod
    def of(cls, scores: np.ndarray, explained: np.ndarray, units: np.ndarray | None = None) -> UnitRanking:
        """scores, explained: (T,); units: (T,) int64 as EncodedSplit.units (-1 outside), None for tokens."""
        positions = np.flatnonzero(explained)
        if units is None:
            unit, first = np.arange(len(positions)), np.arange(len(positions))
        else:
            _, first, unit = np.unique(units[positions], return_index=True, return_inverse=True)
        unit_scores = np.asarray(scores, dtype=np.float64)[positions[first]]
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(-unit_scores, kind="stable")] = np.arange(len(first))
        return cls(positions, unit.astype(np.int64), rank[unit], unit_scores)

    @property
    def n(self) -> int:
        return len(self.unit_scores)

    def top(self, k: int) -> np.ndarray:
        """The positions of every token of the k highest-ranked units, ascending."""
        return self.positions[self.rank < k]

    def members(self, unit: int) -> np.ndarray:
        """The positions of unit `unit`'s tokens, ascending."""
        return self.positions[self.unit == unit]

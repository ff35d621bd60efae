"""The `rand` baseline measure (docs/method.md §3): U[0, 1) per explained token, redrawn at every call;
and the per-example random streams every measure that draws shares (`row_generators`)."""

from __future__ import annotations

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.measures.base import ExplainBatch, Measure, PassCount


def row_generators(batch: ExplainBatch, seed: int, shared: np.random.Generator) -> list[np.random.Generator]:
    """One Generator per row of `batch`: seeded by (seed, example id) when the batch has example_ids, so
    the draws do not depend on which examples share a batch (or a Ray worker); else `shared` for every row
    (drawn from in row order)."""
    if batch.example_ids is None:
        return [shared] * batch.input_ids.shape[0]
    return [np.random.default_rng([seed, int(example)]) for example in batch.example_ids]


class RandomMeasure(Measure):
    """Scores from one numpy Generator seeded at construction: a run is reproducible, calls differ.

    A batch with example_ids draws each row from its own Generator seeded by (seed, example id) instead,
    so the draws do not depend on which examples share a batch (or a worker).
    """

    name = "rand"
    signed = False
    scores_units = True  # one draw per unit: a sum over a unit's tokens would favour long units

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def planned_passes(self, units: int) -> PassCount:
        return PassCount()

    def explain(self, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray:
        """(B, T) float64: U[0, 1) on explained tokens, 0 elsewhere (the engine is not used)."""
        if batch.example_ids is None:
            scores = self.rng.random(batch.input_ids.shape)
        else:  # a row's first T_i draws are the same whatever the padded width T
            width = batch.input_ids.shape[1]
            scores = np.stack([rng.random(width) for rng in row_generators(batch, self.seed, self.rng)])
        if batch.units is not None:  # one draw per unit: the draw at its first token (token units: each's)
            for row in range(len(scores)):
                units = batch.row_units(row)
                inside = units >= 0
                _, first, unit_of = np.unique(units[inside], return_index=True, return_inverse=True)
                scores[row, inside] = scores[row, np.flatnonzero(inside)[first]][unit_of]
        return np.where(batch.explained, scores, 0.0)

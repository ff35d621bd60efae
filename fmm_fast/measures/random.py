"""The `rand` baseline measure (SPEC §3): U[0, 1) per explained token, redrawn at every call."""

from __future__ import annotations

import numpy as np

from fmm_fast.engine import MaskBatchEngine
from fmm_fast.measures.base import ExplainBatch, Measure


class RandomMeasure(Measure):
    """Scores from one numpy Generator seeded at construction: a run is reproducible, calls differ."""

    name = "rand"
    signed = False

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def explain(self, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray:
        """(B, T) float64: U[0, 1) on explained tokens, 0 elsewhere (the engine is not used)."""
        scores = self.rng.random(batch.input_ids.shape)
        return np.where(batch.explained, scores, 0.0)

"""Perturbation measures on the mask-batch engine (docs/method.md "Perturbation measures"): the machinery
they share, coalitions → masked rows → v(z) → one score per erasure unit.

For one example, M = its visible erasure units (`ExplainBatch.visible_units`), n = |M|. A coalition is a
(n,) bool keep-vector over M (True = kept); x_z is x with every token of the units not kept replaced by the
mask token, and v(z) = logit_y(x_z). A `CoalitionMeasure` says which coalitions an example needs
(`coalitions`) and how their values become unit scores (`attribute`); `explain` sends the coalitions of every
row of the batch to the engine in one call, which drops duplicate rows and serves cached ones (as for LOO),
and gives every token of a unit that unit's score.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine, mask_positions
from fmm_fast.core.datatypes import unpad
from fmm_fast.measures.base import ExplainBatch, Measure
from fmm_fast.measures.random import row_generators

# Coalitions per example of kernel-shap and lime, and permutations of shapley-sampling: about ten times the
# forward passes of leave-one-out (n) on sentences of 20 units, as each is recomputed at every erasure step.
DEFAULT_SAMPLES = 200
DEFAULT_PERMUTATIONS = 10


class CoalitionMeasure(Measure):
    """A measure defined by the values v(z) of coalitions of an example's units (see the module docstring).

    Subclasses give `coalitions` and `attribute`; the `-abs` variant of a measure is its subclass with
    `signed = False`. Random draws come from one Generator per example (`row_generators`): seeded by
    (seed, example id) when the batch has example ids, so sharded workers draw what one process draws.
    """

    signed = True
    scores_units = True

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    @abstractmethod
    def coalitions(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """(K, n) bool, True = unit kept: the coalitions one example with n ≥ 1 units needs."""

    @abstractmethod
    def attribute(self, keep: np.ndarray, values: np.ndarray) -> np.ndarray:
        """keep: (K, n) bool, as `coalitions` made it; values: (K,) float64, v of each -> (n,) float64."""

    def explain(self, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray:
        """(B, T) float64: every token of a visible unit scores that unit's score; 0 elsewhere."""
        mask_id = engine.info.mask_id
        generators = row_generators(batch, self.seed, self.rng)
        plans: list[tuple[int, list[np.ndarray], np.ndarray]] = []  # (row, units, keep (K, n))
        requests: list[np.ndarray] = []
        for row, sequence in enumerate(unpad(batch.input_ids, batch.attention_mask)):
            units = batch.visible_units(row, mask_id)
            if not units:
                continue
            keep = self.coalitions(len(units), generators[row])
            requests.extend(coalition_rows(sequence, units, keep, mask_id))
            plans.append((row, units, keep))
        scores = np.zeros(batch.input_ids.shape, dtype=np.float64)
        if not requests:
            return scores
        logits = engine.logits(requests)
        start = 0
        for row, units, keep in plans:
            values = logits[start : start + len(keep), batch.labels[row]].astype(np.float64)
            start += len(keep)
            for positions, score in zip(units, self.attribute(keep, values), strict=True):
                scores[row, positions] = score
        return scores if self.signed else np.abs(scores)


def coalition_rows(
    sequence: np.ndarray, units: list[np.ndarray], keep: np.ndarray, mask_id: int
) -> list[np.ndarray]:
    """The masked inputs x_z of one example: sequence (T,) int64; units: n arrays of positions; keep (K, n)
    bool -> K arrays (T,) int64, the tokens of every unit not kept replaced by mask_id."""
    unit_of = np.full(len(sequence), -1, dtype=np.int64)
    for unit, positions in enumerate(units):
        unit_of[positions] = unit
    covered = np.flatnonzero(unit_of >= 0)
    masks = np.zeros((len(keep), len(sequence)), dtype=bool)
    masks[:, covered] = ~keep[:, unit_of[covered]]
    return mask_positions(sequence, masks, mask_id)


def random_subsets(sizes: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """(N,) int64 sizes in 0..n -> (N, n) bool, row i a uniform random subset of sizes[i] of the n units
    (the sizes[i] smallest of n uniform keys)."""
    ranks = np.argsort(np.argsort(rng.random((len(sizes), n)), axis=1), axis=1)
    return ranks < np.asarray(sizes)[:, None]

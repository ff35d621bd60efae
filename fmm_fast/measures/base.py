"""The measure interface: one call signature for every importance measure."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.errors import UserError


@dataclass
class ExplainBatch:
    """A right-padded batch to explain.

    input_ids: (B, T) int64; attention_mask: (B, T) int64 (1 = real token);
    labels: (B,) int64 gold labels (the target logit); explained: (B, T) bool, tokens a measure may score
    (first segment, non-special). Tokens already equal to the mask id count as explained but masked.
    example_ids: (B,) int64 the rows' example indices in their split, or None. Measures that draw random
    numbers draw them per example when given, so a split sharded across workers draws what one process does.
    units: (B, T) int64, the erasure unit of each token (tokens of a row with the same value ≥ 0 are masked
    together: a word, a sentence), -1 where not explained; None means token units (every explained token
    its own unit).

    Example: `engine.logits(list(batch.input_ids))[np.arange(len(batch.labels)), batch.labels]` is each
    row's explained logit (the engine deduplicates and caches rows).
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    labels: np.ndarray
    explained: np.ndarray
    example_ids: np.ndarray | None = None
    units: np.ndarray | None = None

    def row_units(self, row: int) -> np.ndarray:
        """(T,) int64 the unit of each token of row `row`, -1 where not explained."""
        if self.units is not None:
            return np.where(self.explained[row], self.units[row], -1).astype(np.int64)
        return np.where(self.explained[row], np.arange(self.explained.shape[1]), -1).astype(np.int64)

    def visible_units(self, row: int, mask_id: int) -> list[np.ndarray]:
        """The units of row `row` a masking measure may still mask (M of docs/method.md §10, by unit), in
        order of their first token: each a (k,) int64 array of positions, ascending. A unit whose every
        token is already the mask id is left out; masking a unit masks all its tokens. Token units: one
        position each."""
        units = self.row_units(row)
        visible = units[(units >= 0) & (self.input_ids[row] != mask_id)]
        if not len(visible):
            return []
        first_seen = np.unique(visible, return_index=True)[1]
        # group every position by unit once (a stable sort keeps positions ascending within a unit)
        positions = np.flatnonzero(units >= 0)
        order = positions[np.argsort(units[positions], kind="stable")]
        ids, starts = np.unique(units[order], return_index=True)
        groups = dict(zip(ids.tolist(), np.split(order, starts[1:]), strict=True))
        return [groups[int(unit)] for unit in visible[np.sort(first_seen)]]


def row_unit_totals(scores: np.ndarray, units: np.ndarray) -> np.ndarray:
    """(T,) float64: every token of a unit given the sum of its tokens' `scores` ((T,)), 0 outside the
    units. units: (T,) int64, -1 outside (ExplainBatch.row_units, EncodedSplit.units)."""
    totals = np.zeros(len(scores), dtype=np.float64)
    inside = units >= 0
    totals[inside] = np.bincount(units[inside], weights=scores[inside])[units[inside]]
    return totals


def unit_totals(scores: np.ndarray, batch: ExplainBatch) -> np.ndarray:
    """(B, T) float64: row_unit_totals of every row of `scores` ((B, T), as a measure that scores tokens
    returns them); `scores` itself for token units."""
    if batch.units is None:
        return scores
    return np.stack([row_unit_totals(row, batch.row_units(r)) for r, row in enumerate(scores)])


@dataclass(frozen=True)
class PassCount:
    """Model passes a piece of work needs: forward passes, backward passes (a forward and a backward pass
    through the model, for gradients) and whether the count is exact (False: an upper bound)."""

    forward: int = 0
    backward: int = 0
    exact: bool = True

    def __add__(self, other: PassCount) -> PassCount:
        return PassCount(
            self.forward + other.forward, self.backward + other.backward, self.exact and other.exact
        )


def check_positive(option: str, value: int) -> int:
    """value as an int; UserError unless it is an integer ≥ 1."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise UserError(f"{option} must be an integer >= 1, got {value!r}; pass e.g. {option}=1")
    return int(value)


class Measure(ABC):
    """An importance measure, and fmm-fast's extension point (docs/guides/your-measure.md). Subclasses
    declare `name`, `signed`, `needs_gradients`, `recursive`.

    explain(batch, engine) -> (B, T) float64 scores; positions outside `explained` score 0.
    `recursive = False` marks measures computed once on the unmasked input (beam search).
    A measure's options are the keyword parameters of its constructor (the built-in cost knobs: integers
    ≥ 1 checked with `check_positive`; a plug-in's: converted from --measure-option text to their
    annotations), plus `seed` for measures that draw random numbers (a fresh instance per erasure step).

    Example (in my_measures.py; then `fmm-fast evaluate ... --measure ./my_measures.py:LastFirst`):

        class LastFirst(fmm_fast.Measure):
            name, signed = "last-first", False

            def explain(self, batch, engine):
                positions = np.arange(batch.input_ids.shape[1], dtype=np.float64)
                return np.where(batch.explained, positions, 0.0)
    """

    name: ClassVar[str]
    signed: ClassVar[bool]
    needs_gradients: ClassVar[bool] = False
    recursive: ClassVar[bool] = True
    # True: explain() masks whole units (batch.visible_units) and gives every token of a unit that unit's
    # score. False: it scores tokens, and a unit's score is the sum of its tokens' (token units: unchanged).
    scores_units: ClassVar[bool] = False

    @abstractmethod
    def explain(self, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray: ...

    def planned_passes(self, units: int) -> PassCount | None:
        """The passes explain() asks for on one example with `units` units not yet masked (its own row
        included), for a run's cost line; None when they cannot be counted ahead."""
        return None

    def unit_scores(self, scores: np.ndarray, batch: ExplainBatch) -> np.ndarray:
        """(B, T) float64 explain()'s `scores` with every token of a unit holding its unit's score: what the
        protocols rank units by. A measure that scores tokens gives a unit the sum of its tokens' scores."""
        return scores if self.scores_units else unit_totals(scores, batch)

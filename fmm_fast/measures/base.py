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
        """The units of row `row` a masking measure may still mask (SPEC §10's M, by unit), in order of their
        first token: each a (k,) int64 array of positions, ascending. A unit whose every token is already the
        mask id is left out; masking a unit masks all its tokens. Token units: one position each."""
        units = self.row_units(row)
        visible = units[(units >= 0) & (self.input_ids[row] != mask_id)]
        first_seen = np.unique(visible, return_index=True)[1]
        return [np.flatnonzero(units == unit) for unit in visible[np.sort(first_seen)]]


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

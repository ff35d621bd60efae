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
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    labels: np.ndarray
    explained: np.ndarray
    example_ids: np.ndarray | None = None


def check_positive(option: str, value: int) -> int:
    """value as an int; UserError unless it is an integer ≥ 1."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise UserError(f"{option} must be an integer >= 1, got {value!r}; pass e.g. {option}=1")
    return int(value)


class Measure(ABC):
    """An importance measure. Subclasses declare `name`, `signed`, `needs_gradients`, `recursive`.

    explain(batch, engine) -> (B, T) float64 scores; positions outside `explained` score 0.
    `recursive = False` marks measures computed once on the unmasked input (beam search).
    A measure's options are the keyword parameters of its constructor (cost knobs, each an integer ≥ 1,
    checked with `check_positive`), plus `seed` for measures that draw random numbers.
    """

    name: ClassVar[str]
    signed: ClassVar[bool]
    needs_gradients: ClassVar[bool] = False
    recursive: ClassVar[bool] = True

    @abstractmethod
    def explain(self, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray: ...

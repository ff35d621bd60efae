"""A measure's scores checked where every protocol asks for them: what a measure raises or returns wrong
(a plug-in's mistake) becomes one line naming the measure, the example and the problem."""

from __future__ import annotations

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.errors import UserError
from fmm_fast.measures.base import ExplainBatch, Measure


def _subset(batch: ExplainBatch, rows: np.ndarray) -> ExplainBatch:
    """The rows `rows` of a batch, as a batch."""
    return ExplainBatch(
        batch.input_ids[rows],
        batch.attention_mask[rows],
        batch.labels[rows],
        batch.explained[rows],
        None if batch.example_ids is None else batch.example_ids[rows],
        None if batch.units is None else batch.units[rows],
    )


def _example(batch: ExplainBatch, row: int) -> int:
    return int(batch.example_ids[row]) if batch.example_ids is not None else row


def checked_scores(measure: Measure, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray:
    """measure.explain(batch, engine) as (B, T) float64, finite on the explained tokens.

    UserError when the measure raises (the example named is the first whose row alone raises; the call
    is retried row by row to find it), returns another shape, or a non-finite score on an explained token.
    A UserError the measure raises itself passes through as it is."""
    try:
        scores = measure.explain(batch, engine)
    except UserError:
        raise
    except Exception as error:
        raise UserError(_failure(measure, batch, engine, error)) from None
    try:
        scores = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise UserError(
            f"measure '{measure.name}' returned scores that are not numbers for examples "
            f"{_example(batch, 0)}..{_example(batch, len(batch.labels) - 1)} ({error}); return a (B, T) array"
        ) from None
    if scores.shape != batch.input_ids.shape:
        raise UserError(
            f"measure '{measure.name}' returned scores of shape {scores.shape} for a batch of shape "
            f"{batch.input_ids.shape} (examples from {_example(batch, 0)}); return one score per token"
        )
    bad = np.argwhere(batch.explained & ~np.isfinite(scores))
    if len(bad):
        row, position = (int(v) for v in bad[0])
        raise UserError(
            f"measure '{measure.name}' gave example {_example(batch, row)} the score {scores[row, position]} "
            f"at token {position}; every explained token needs a finite score"
        )
    return scores


def _failure(measure: Measure, batch: ExplainBatch, engine: MaskBatchEngine, error: Exception) -> str:
    """The line for a measure that raised on `batch`: the first example that raises alone, else all."""
    failing, raised = None, error
    if len(batch.labels) > 1:
        for row in range(len(batch.labels)):
            try:
                measure.explain(_subset(batch, np.array([row])), engine)
            except Exception as alone:  # the same failure, narrowed to one example
                failing, raised = row, alone
                break
    if failing is None and len(batch.labels) > 1:
        where = f"examples {_example(batch, 0)}..{_example(batch, len(batch.labels) - 1)}"
    else:
        where = f"example {_example(batch, failing or 0)}"
    detail = str(raised).splitlines()[0] if str(raised) else ""
    return f"measure '{measure.name}' failed on {where} ({type(raised).__name__}: {detail}); fix the measure"

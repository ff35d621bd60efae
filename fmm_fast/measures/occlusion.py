"""Leave-one-out occlusion (docs/method.md §3): loo-sign and loo-abs."""

from __future__ import annotations

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.datatypes import unpad
from fmm_fast.measures.base import ExplainBatch, Measure, PassCount


class LeaveOneOutSign(Measure):
    """logit_y(x) − logit_y(x with unit u masked), on every token of each explained unit not already masked
    (token units: each explained token); 0 elsewhere.

    Every single-unit masking of every row goes to the engine in one call, after the unmasked rows
    (which the engine may serve from its cache, e.g. from the erasure step that produced this input).
    """

    name = "loo-sign"
    signed = True
    scores_units = True

    def planned_passes(self, units: int) -> PassCount:
        return PassCount(forward=1 + units)  # the row itself (often cached) and one per unit

    def explain(self, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray:
        mask_id = engine.info.mask_id
        sequences = unpad(batch.input_ids, batch.attention_mask)
        occluded: list[np.ndarray] = []
        targets: list[list[np.ndarray]] = []  # per row: the positions of each unit occluded
        for row, sequence in enumerate(sequences):
            units = batch.visible_units(row, mask_id)
            copies = np.repeat(sequence[None, :], len(units), axis=0)
            for copy, positions in zip(copies, units, strict=True):
                copy[positions] = mask_id
            occluded.extend(copies)
            targets.append(units)
        logits = engine.logits(sequences + occluded)

        rows_count = len(sequences)
        reference = logits[np.arange(rows_count), batch.labels].astype(np.float64)
        row_of = np.repeat(np.arange(rows_count), [len(units) for units in targets])
        masked_logit = logits[rows_count:][np.arange(len(row_of)), batch.labels[row_of]].astype(np.float64)
        differences = reference[row_of] - masked_logit
        scores = np.zeros(batch.input_ids.shape, dtype=np.float64)
        for row, positions, difference in zip(
            row_of, (p for units in targets for p in units), differences, strict=True
        ):
            scores[row, positions] = difference
        return scores if self.signed else np.abs(scores)


class LeaveOneOutAbs(LeaveOneOutSign):
    name = "loo-abs"
    signed = False

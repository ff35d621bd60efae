"""Leave-one-out occlusion (docs/method.md §3): loo-sign and loo-abs."""

from __future__ import annotations

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.datatypes import unpad
from fmm_fast.measures.base import ExplainBatch, Measure


class LeaveOneOutSign(Measure):
    """logit_y(x) − logit_y(x with token t masked), for explained tokens not already masked; 0 elsewhere.

    Every single-token masking of every row goes to the engine in one call, after the unmasked rows
    (which the engine may serve from its cache, e.g. from the erasure step that produced this input).
    """

    name = "loo-sign"
    signed = True

    def explain(self, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray:
        mask_id = engine.info.mask_id
        sequences = unpad(batch.input_ids, batch.attention_mask)
        occluded: list[np.ndarray] = []
        targets: list[np.ndarray] = []  # per row: (n_r,) positions to occlude
        for sequence, explained in zip(sequences, batch.explained, strict=True):
            positions = np.flatnonzero(explained[: len(sequence)] & (sequence != mask_id))
            copies = np.repeat(sequence[None, :], len(positions), axis=0)
            copies[np.arange(len(positions)), positions] = mask_id
            occluded.extend(copies)
            targets.append(positions)
        logits = engine.logits(sequences + occluded)

        rows_count = len(sequences)
        reference = logits[np.arange(rows_count), batch.labels].astype(np.float64)
        row_of = np.repeat(np.arange(rows_count), [len(p) for p in targets])
        cols = np.concatenate(targets) if targets else np.empty(0, dtype=np.int64)
        masked_logit = logits[rows_count:][np.arange(len(row_of)), batch.labels[row_of]].astype(np.float64)
        scores = np.zeros(batch.input_ids.shape, dtype=np.float64)
        scores[row_of, cols] = reference[row_of] - masked_logit
        return scores if self.signed else np.abs(scores)


class LeaveOneOutAbs(LeaveOneOutSign):
    name = "loo-abs"
    signed = False

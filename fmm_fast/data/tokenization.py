"""Text splits → ragged token arrays with per-token explained / maskable flags (docs/method.md §1)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from tokenizers import Tokenizer

from fmm_fast.core.datatypes import EncodedSplit

if TYPE_CHECKING:
    from fmm_fast.data.base import TextSplit


def encode_texts(
    tokenizer: Tokenizer,
    first: list[str],
    second: list[str] | None,
    labels: np.ndarray,
    supporting_spans: list[list[tuple[int, int]]] | None = None,
) -> EncodedSplit:
    """Tokenize (first, second) pairs; the tokenizer truncates longest-first and never pads.

    explained = tokens of the first segment that are not special; maskable = every non-special token.
    supporting_spans: per example, [start, end) character spans in `first`; a first-segment token is
    flagged supporting when its character offsets overlap one of them. None: no supporting flags.
    """
    inputs = list(zip(first, second, strict=True)) if second is not None else list(first)
    encodings = tokenizer.encode_batch(inputs)
    input_ids, explained, maskable, supporting = [], [], [], []
    for row, encoding in enumerate(encodings):
        ids = np.asarray(encoding.ids, dtype=np.int64)
        special = np.asarray(encoding.special_tokens_mask, dtype=bool)
        first_segment = np.asarray([s == 0 for s in encoding.sequence_ids], dtype=bool)
        input_ids.append(ids)
        explained.append(first_segment & ~special)
        maskable.append(~special)
        if supporting_spans is not None:
            offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
            supporting.append(explained[-1] & overlaps_any(offsets, supporting_spans[row]))
    texts = list(zip(first, second if second is not None else [None] * len(first), strict=True))
    return EncodedSplit(input_ids, explained, maskable, np.asarray(labels, dtype=np.int64), texts, supporting)


def overlaps_any(offsets: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """(T,) bool: token [start, end) shares at least one character with one of the [start, end) `spans`.

    offsets: (T, 2) int64 character offsets of the tokens (offsets of the second segment count in the
    second text, so callers keep only first-segment tokens).
    """
    if not spans:
        return np.zeros(len(offsets), dtype=bool)
    bounds = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    starts, ends = offsets[:, :1], offsets[:, 1:]
    return np.any((starts < bounds[None, :, 1]) & (ends > bounds[None, :, 0]), axis=1)


def encode_split(tokenizer: Tokenizer, split: TextSplit) -> EncodedSplit:
    return encode_texts(tokenizer, split.first, split.second, split.labels, split.supporting)

"""Text splits → ragged token arrays with per-token explained / maskable flags (SPEC §1)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from tokenizers import Tokenizer

from fmm_fast.types import EncodedSplit

if TYPE_CHECKING:
    from fmm_fast.data.base import TextSplit


def encode_texts(
    tokenizer: Tokenizer, first: list[str], second: list[str] | None, labels: np.ndarray
) -> EncodedSplit:
    """Tokenize (first, second) pairs; the tokenizer truncates longest-first and never pads.

    explained = tokens of the first segment that are not special; maskable = every non-special token.
    """
    inputs = list(zip(first, second, strict=True)) if second is not None else list(first)
    encodings = tokenizer.encode_batch(inputs)
    input_ids, explained, maskable = [], [], []
    for encoding in encodings:
        ids = np.asarray(encoding.ids, dtype=np.int64)
        special = np.asarray(encoding.special_tokens_mask, dtype=bool)
        first_segment = np.asarray([s == 0 for s in encoding.sequence_ids], dtype=bool)
        input_ids.append(ids)
        explained.append(first_segment & ~special)
        maskable.append(~special)
    texts = list(zip(first, second if second is not None else [None] * len(first), strict=True))
    return EncodedSplit(input_ids, explained, maskable, np.asarray(labels, dtype=np.int64), texts)


def encode_split(tokenizer: Tokenizer, split: TextSplit) -> EncodedSplit:
    return encode_texts(tokenizer, split.first, split.second, split.labels)

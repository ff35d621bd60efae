"""Text splits → ragged token arrays with per-token explained / maskable flags (docs/method.md §1).

Texts longer than the model's maximum are cut to it (longest segment first); every split records how many
tokens each example had before the cut (EncodedSplit.token_totals), so the cut is reported, never silent.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
from tokenizers import Encoding, Tokenizer

from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.errors import UserError
from fmm_fast.data.units import DEFAULT_UNIT, split_units

if TYPE_CHECKING:
    from fmm_fast.data.base import TextSplit

# Texts per encode_batch call. A cut text's Encoding keeps its overflowing tokens (a 2,000-word document cut
# to 128 tokens holds all ~2,500), and the heap keeps what a large batch of them took after they are freed:
# encoding 100 such documents at once added ~40 MB to the process for good, 16 at a time a sixth of it.
ENCODE_CHUNK = 16


def encode_in_chunks(tokenizer: Tokenizer, inputs: list) -> Iterator[Encoding]:
    """tokenizer.encode_batch(inputs), ENCODE_CHUNK inputs at a time, in order: each chunk's encodings are
    freed before the next is made as long as the caller keeps only what it takes from them (the same
    encodings as one call: each input is encoded on its own)."""
    for start in range(0, len(inputs), ENCODE_CHUNK):
        yield from tokenizer.encode_batch(inputs[start : start + ENCODE_CHUNK])


def encode_texts(
    tokenizer: Tokenizer,
    first: list[str],
    second: list[str] | None,
    labels: np.ndarray,
    supporting_spans: list[list[tuple[int, int]]] | None = None,
    unit: str = DEFAULT_UNIT,
) -> EncodedSplit:
    """Tokenize (first, second) pairs; the tokenizer truncates longest-first and never pads.

    token_totals of the result: each example's token count before that cut; max_length: the cut's length.
    unit: the erasure unit the result's `units` describe (fmm_fast.data.units; token: none needed).

    explained = tokens of the first segment that are not special; maskable = every non-special token.
    supporting_spans: per example, [start, end) character spans in `first`; a first-segment token is
    flagged supporting when its character offsets overlap one of them. None: no supporting flags.
    """
    inputs = list(zip(first, second, strict=True)) if second is not None else list(first)
    input_ids, explained, maskable, supporting, offsets = [], [], [], [], []
    for row, encoding in enumerate(encode_in_chunks(tokenizer, inputs)):
        ids = np.asarray(encoding.ids, dtype=np.int64)
        special = np.asarray(encoding.special_tokens_mask, dtype=bool)
        first_segment = np.asarray([s == 0 for s in encoding.sequence_ids], dtype=bool)
        input_ids.append(ids)
        explained.append(first_segment & ~special)
        maskable.append(~special)
        offsets.append(np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2))
        if supporting_spans is not None:
            supporting.append(explained[-1] & overlaps_any(offsets[-1], supporting_spans[row]))
    texts = list(zip(first, second if second is not None else [None] * len(first), strict=True))
    totals = _token_totals(tokenizer, inputs, [len(ids) for ids in input_ids])
    return EncodedSplit(
        input_ids,
        explained,
        maskable,
        np.asarray(labels, dtype=np.int64),
        texts,
        supporting,
        totals,
        max_length=(tokenizer.truncation or {}).get("max_length"),
        unit=unit,
        units=split_units(unit, first, offsets, explained),
    )


def _token_totals(tokenizer: Tokenizer, inputs: list, kept: list[int]) -> np.ndarray:
    """(N,) int64 token count of each input before truncation: the kept count, and for the inputs that
    reached the maximum length an encoding without the cut."""
    totals = np.asarray(kept, dtype=np.int64)
    limit = (tokenizer.truncation or {}).get("max_length")
    full = np.flatnonzero(totals >= limit) if limit is not None else np.empty(0, dtype=np.int64)
    if len(full):
        uncut = Tokenizer.from_str(tokenizer.to_str())
        uncut.no_truncation()
        totals[full] = [len(e.ids) for e in encode_in_chunks(uncut, [inputs[i] for i in full])]
    return totals


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


def cut_to(tokenizer: Tokenizer, max_length: int | None, option: str = "--max-length") -> Tokenizer:
    """`tokenizer`, or for a --max-length below its own maximum a copy that cuts to max_length tokens
    (longest segment first, as the model's own cut); a bad value is a UserError naming `option`."""
    if max_length is None:
        return tokenizer
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 4:
        raise UserError(f"{option} must be an integer of at least 4 tokens, got {max_length!r}")
    limit = (tokenizer.truncation or {}).get("max_length")
    if limit is not None and limit <= max_length:
        return tokenizer
    shorter = Tokenizer.from_str(tokenizer.to_str())
    shorter.enable_truncation(max_length=max_length, strategy="longest_first")
    return shorter


def encode_split(
    tokenizer: Tokenizer, split: TextSplit, unit: str = DEFAULT_UNIT, max_length: int | None = None
) -> EncodedSplit:
    """encode_texts of a split, cut to the model's maximum length or the shorter `max_length` (--max-length);
    a warning on stderr when texts were cut."""
    cutting = cut_to(tokenizer, max_length)
    encoded = encode_texts(cutting, split.first, split.second, split.labels, split.supporting, unit)
    cut = encoded.truncation()
    if cut["examples_cut"]:
        whose = "the model's maximum" if cutting is tokenizer else "--max-length"
        print(
            f"fmm-fast: warning: {cut['examples_cut']} of {cut['examples']} examples are longer than "
            f"{whose} of {encoded.max_length} tokens and were cut to it (tokens kept / total: "
            f"{cut['tokens_kept']} / {cut['tokens_total']}); results describe the kept tokens only, and "
            "record the cut",
            file=sys.stderr,
        )
    return encoded

"""Erasure units (docs/method.md §4 "Erasure units"): which tokens of an example are masked together.

A unit is a set of explained tokens: one token (`token`, the default), a word (`word`: a maximal run of
non-whitespace characters of the explained text) or a sentence (`sentence`: pysbd's rule-based English
segmentation of the explained text). Words and sentences come from the characters, through each token's
character offsets, so the same text has the same words under every tokenizer (byte-level BPE, WordPiece
and Unigram ones split punctuation and spaces into words of their own differently). A token whose offsets
cover only whitespace (a lone `Ġ` or `▁`) belongs to the next token's word, the previous one's at the end.
A sentence is a union of words: a word belongs to the sentence its first character is in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fmm_fast.core.errors import UserError

UNITS = ("token", "word", "sentence")
DEFAULT_UNIT = "token"


def check_unit(unit: str, option: str = "--unit") -> str:
    """`unit` when it is one of UNITS; UserError naming `option` otherwise."""
    if unit not in UNITS:
        raise UserError(f"unknown {option} '{unit}'; choose one of {', '.join(UNITS)}")
    return unit


def word_of_characters(text: str) -> np.ndarray:
    """(len(text),) int64: the word each character is in (words numbered from 0), -1 on whitespace."""
    blank = np.fromiter((c.isspace() for c in text), dtype=bool, count=len(text))
    starts = ~blank & np.concatenate([[True], blank[:-1]]) if len(text) else blank
    return np.where(blank, -1, np.cumsum(starts) - 1).astype(np.int64)


def sentence_starts(text: str) -> np.ndarray:
    """(S,) int64 the character where each sentence of `text` starts (pysbd, English rules, text kept as
    it is: its segments, whitespace included, concatenate back to `text`)."""
    import pysbd  # only runs with sentence units

    segments = pysbd.Segmenter(language="en", clean=False).segment(text)
    starts, cursor = [], 0
    for segment in segments:
        # pysbd keeps every character in clean=False mode; find() guards against one it drops or moves
        found = text.find(segment, cursor)
        start = cursor if found < 0 else found
        starts.append(start)
        cursor = start + len(segment)
    return np.asarray(starts or [0], dtype=np.int64)


def token_words(offsets: np.ndarray, explained: np.ndarray, words: np.ndarray) -> np.ndarray:
    """(T,) int64 the word of each explained token, -1 elsewhere.

    offsets: (T, 2) int64 character [start, end) of each token in the explained text; explained: (T,) bool;
    words: word_of_characters of that text. A token takes the word of its first non-whitespace character;
    one with none (whitespace only, or an empty span) takes the next explained token's word.
    """
    result = np.full(len(explained), -1, dtype=np.int64)
    pending: list[int] = []  # whitespace-only tokens waiting for the next token's word
    last = -1
    for position in np.flatnonzero(explained):
        start, end = int(offsets[position, 0]), int(offsets[position, 1])
        inside = words[start:end]
        found = inside[inside >= 0]
        if not len(found):
            pending.append(position)
            continue
        last = int(found[0])
        result[[*pending, position]] = last
        pending = []
    result[pending] = last if last >= 0 else 0  # trailing blanks: the last word (or one unit of their own)
    return result


def example_units(unit: str, text: str, offsets: np.ndarray, explained: np.ndarray) -> np.ndarray:
    """(T,) int64 the unit of each explained token of one example, numbered 0..n-1 in order of their first
    token, -1 where not explained. unit: "word" or "sentence"; text: the explained segment's text."""
    words = word_of_characters(text)
    units = token_words(offsets, explained, words)
    if unit == "sentence" and (words >= 0).any():
        first_character = np.flatnonzero(np.concatenate([[words[0] >= 0], np.diff(words) > 0]))
        word_sentence = np.searchsorted(sentence_starts(text), first_character, side="right") - 1
        units = np.where(units >= 0, np.maximum(word_sentence, 0)[np.maximum(units, 0)], -1)
    # renumber: the units the kept (possibly truncated) tokens have, 0..n-1 in order (ids only rise)
    kept = units >= 0
    units[kept] = np.unique(units[kept], return_inverse=True)[1]
    return units


def split_units(
    unit: str, texts: Sequence[str], offsets: Sequence[np.ndarray], explained: Sequence[np.ndarray]
) -> list[np.ndarray]:
    """example_units of every example; an empty list for token units (every explained token its own unit,
    which the code paths of token units take without a units array)."""
    if check_unit(unit) == "token":
        return []
    return [example_units(unit, *example) for example in zip(texts, offsets, explained, strict=True)]

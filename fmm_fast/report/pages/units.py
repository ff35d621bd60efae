"""What the explanations page colours: the words of an example's text, or its model tokens.

Words are the whitespace-separated pieces of the text (as `--explanations` word scores count them). A
model token belongs to the word its first character falls in, by the tokenizer's character offsets; a
word's score is the sum of its explained tokens' scores. Special tokens are never shown.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from fmm_fast.measures.external import WORD  # one definition of a word for word scores and the page
from fmm_fast.protocols.explanations import Explanation

SPECIAL = -1  # Explanation.segments of a special token


@dataclass(frozen=True)
class Unit:
    """One piece of shown text. score None: not scored (whitespace, the unexplained second segment, a
    word truncated away); detail: the hover text."""

    text: str
    score: float | None = None
    detail: str = ""


def _format(score: float) -> str:
    return f"{score:+.3g}"


def has_offsets(explanation: Explanation) -> bool:
    """Whether the explanation carries the character offsets the word view needs."""
    return len(explanation.offsets) == len(explanation.tokens) == len(explanation.segments) > 0


def token_units(explanation: Explanation) -> list[Unit]:
    """One unit per non-special model token, as the tokenizer spells it (sub-word marks included)."""
    units = []
    for position, (token, score, explained) in enumerate(
        zip(explanation.tokens, explanation.scores, explanation.explained, strict=True)
    ):
        special = explanation.segments[position] == SPECIAL if explanation.segments else False
        if special:
            continue
        detail = f"token {position} {token!r}: {_format(score)}" if explained else "not explained"
        units.append(Unit(token, score if explained else None, detail))
    return units


def word_units(explanation: Explanation) -> list[Unit]:
    """The explained text as it was written, whitespace kept: one unit per word and per gap.

    Falls back to token_units when the explanation has no offsets (files written before they were).
    """
    if not has_offsets(explanation):
        return token_units(explanation)
    text = explanation.text
    spans = [match.span() for match in WORD.finditer(text)]
    pieces: list[list[int]] = [[] for _ in spans]
    starts = [start for start, _ in spans]
    for position, ((start, end), segment) in enumerate(
        zip(explanation.offsets, explanation.segments, strict=True)
    ):
        covered = text[start:end]
        if segment != 0 or not covered.strip():
            continue
        start += len(covered) - len(covered.lstrip())  # a token may carry the space before its word
        word = _word_at(starts, spans, start)
        if word is not None:
            pieces[word].append(position)
    units, cursor = [], 0
    for (start, end), positions in zip(spans, pieces, strict=True):
        if start > cursor:
            units.append(Unit(text[cursor:start]))
        units.append(_word(explanation, text[start:end], positions))
        cursor = end
    if cursor < len(text):
        units.append(Unit(text[cursor:]))
    return units


def _word_at(starts: list[int], spans: list[tuple[int, int]], character: int) -> int | None:
    """The index of the word holding `character`, or None (it is whitespace)."""
    word = bisect.bisect_right(starts, character) - 1
    return word if word >= 0 and character < spans[word][1] else None


def _word(explanation: Explanation, word: str, positions: list[int]) -> Unit:
    explained = [p for p in positions if explanation.explained[p]]
    if not positions:
        return Unit(word, None, "beyond the model's maximum length: not seen")
    if not explained:
        return Unit(word, None, "not explained")
    score = sum(explanation.scores[p] for p in explained)
    parts = " + ".join(f"{explanation.tokens[p]} {_format(explanation.scores[p])}" for p in explained)
    detail = f"{word}: {_format(score)}" + (f" = {parts}" if len(explained) > 1 else "")
    return Unit(word, score, detail)

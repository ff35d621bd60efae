"""Explanations made elsewhere (another library, a human, a language model), read from JSON Lines.

One JSON object per evaluated example:
    {"index": 3, "token_scores": [...]}   one score per model token, aligned to the tokens
                                          `fmm-fast explain` writes (specials and second segment included;
                                          only the explained tokens' scores are used), or
    {"index": 3, "word_scores": [...]}    one score per whitespace-separated word of the explained text;
                                          every model token of a word gets that word's score.
A file `fmm-fast explain -m NAME --out FILE` wrote is read as it is (its "scores" are token scores).
`index` is the example's 0-based position in the evaluated split (after --limit), as in the lines of
`fmm-fast explain`. Every mistake in the file is a UserError naming the line and the example.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.errors import UserError
from fmm_fast.core.reading import json_lines
from fmm_fast.measures import measure_names
from fmm_fast.measures.registry import perturbation_names

SCORE_KEYS = ("token_scores", "word_scores")
EXPLAIN_SCORES = "scores"  # the token scores of a line of `fmm-fast explain`, which this reads as it is
WORD = re.compile(r"\S+")


@dataclass
class ExternalExplanation:
    """Fixed per-token scores for every example of a split, from one file.

    name: the file's stem (the measure's name in results); scores: one (T_i,) float64 per example;
    signed: True when any explained token has a negative score.
    """

    name: str
    path: Path
    scores: list[np.ndarray]
    signed: bool


def word_token_scores(
    tokenizer: Tokenizer, text: str, pair: str | None, word_scores: list[float]
) -> np.ndarray:
    """Spread per-word scores over the model's tokens of (text, pair): (T,) float64, 0 outside `text`.

    Words are the whitespace-separated pieces of `text`; a token of the first segment takes the score
    of the word its characters fall in. Raises ValueError when the counts differ.
    """
    words = [match.span() for match in WORD.finditer(text)]
    if len(words) != len(word_scores):
        raise ValueError(f"{len(word_scores)} word_scores for {len(words)} whitespace-separated words")
    word_of_char = np.full(len(text), -1, dtype=np.int64)
    for word, (start, end) in enumerate(words):
        word_of_char[start:end] = word
    encoding = tokenizer.encode(text, pair) if pair is not None else tokenizer.encode(text)
    scores = np.zeros(len(encoding.ids), dtype=np.float64)
    for position, (segment, (start, end)) in enumerate(
        zip(encoding.sequence_ids, encoding.offsets, strict=True)
    ):
        if segment != 0 or end <= start:
            continue
        covered = word_of_char[start:end]
        covered = covered[covered >= 0]
        if len(covered):
            scores[position] = word_scores[int(covered[0])]
    return scores


def load_explanations(path: Path, split: EncodedSplit, tokenizer: Tokenizer) -> ExternalExplanation:
    """Read and check one explanations file against the evaluated split (see the module docstring)."""
    path = Path(path)
    builtin = (*measure_names(), *perturbation_names(), "beam", "occlusion", "occlusion-abs")
    if path.stem in builtin or path.stem.startswith(("beam-sign-", "occlusion-")):
        raise UserError(
            f"explanations file {path} is named like the built-in measure '{path.stem}'; rename it "
            "(its name labels the results)"
        )
    try:
        lines = json_lines(path)
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"cannot read explanations file {path} ({error}); give a UTF-8 .jsonl file") from None
    except ValueError as error:  # bad JSON, named by the file's own line number
        raise UserError(f"{path} {error}; write one JSON object per line") from None
    scores: dict[int, np.ndarray] = {}
    measures = {r["measure"] for _, r in lines if isinstance(r, dict) and isinstance(r.get("measure"), str)}
    if len(measures) > 1:
        raise UserError(
            f"{path} holds the explanations of {len(measures)} measures ({', '.join(sorted(measures))}); "
            "give one file per measure (`fmm-fast explain -m NAME`)"
        )
    for number, record in lines:
        where = f"{path} line {number}"
        index = _example_index(record, where, len(split))
        where = f"{where} (example {index})"
        if index in scores:
            raise UserError(f"{where}: example {index} already has an explanation; give one line per example")
        scores[index] = _token_scores(record, where, split, index, tokenizer)
    missing = [i for i in range(len(split)) if i not in scores]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise UserError(
            f"{path} explains {len(scores)} of the {len(split)} evaluated examples: example "
            f"{missing[0]}{more} missing; give one line per example, or evaluate fewer with --limit"
        )
    ordered = [scores[i] for i in range(len(split))]
    signed = any(bool(np.any(s[e] < 0)) for s, e in zip(ordered, split.explained, strict=True))
    return ExternalExplanation(path.stem, path, ordered, signed)


def _example_index(record: object, where: str, count: int) -> int:
    if not isinstance(record, dict):
        raise UserError(f'{where}: not a JSON object; write e.g. {{"index": 0, "token_scores": [...]}}')
    index = record.get("index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise UserError(
            f'{where}: "index" must be the example\'s 0-based position in the split, got {index!r}'
        )
    if not 0 <= index < count:
        raise UserError(
            f"{where}: example {index} is not in the evaluated split (indices 0–{count - 1}); "
            "check --dataset, --split and --limit"
        )
    return index


def _finite_float(value: float) -> bool:
    """Whether a JSON number is a finite float64 (an integer like 10**400 is beyond its range)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _shown(value: float) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}… ({len(text)} digits)"


def _token_scores(
    record: dict, where: str, split: EncodedSplit, index: int, tokenizer: Tokenizer
) -> np.ndarray:
    given = [key for key in SCORE_KEYS if key in record]
    if not given and EXPLAIN_SCORES in record:  # a line `fmm-fast explain` wrote: its scores are per token
        record = {**record, "token_scores": record[EXPLAIN_SCORES]}
        given = ["token_scores"]
    if len(given) != 1:
        raise UserError(f"{where}: give exactly one of token_scores or word_scores")
    values = record[given[0]]
    if not isinstance(values, list) or any(
        isinstance(v, bool) or not isinstance(v, int | float) for v in values
    ):
        raise UserError(f"{where}: {given[0]} must be a list of numbers")
    bad = next((i for i, v in enumerate(values) if not _finite_float(v)), None)
    if bad is not None:
        raise UserError(
            f"{where}: {given[0]}[{bad}] is {_shown(values[bad])}, not a finite 64-bit float; every score "
            "must be one"
        )
    if given[0] == "token_scores":
        tokens = len(split.input_ids[index])
        if len(values) != tokens:
            raise UserError(
                f"{where}: {len(values)} token_scores for {tokens} tokens; align them to the tokens "
                "`fmm-fast explain` writes (special tokens included), or give word_scores"
            )
        return np.asarray(values, dtype=np.float64)
    text, pair = split.texts[index]
    try:
        return word_token_scores(tokenizer, text, pair, values)
    except ValueError as error:
        raise UserError(
            f"{where}: {error}; give one score per whitespace-separated word of the text"
        ) from None

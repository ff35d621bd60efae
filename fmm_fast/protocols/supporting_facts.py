"""Supporting-fact overlap: how much of a measure's top-k lands on the tokens of bAbI's supporting facts.

bAbI records which sentences determine each answer (TextSplit.supporting, character spans); tokenization
turns them into per-token flags (EncodedSplit.supporting). A faithful explanation of a model that solved
the task should rank those tokens first. Per example the overlap is |top-k ∩ supporting| / min(k, |S|),
so 1 means the top-k is all supporting tokens (or holds all of them when there are fewer than k); the
mean runs over examples that have supporting tokens. `rand` gives the chance level, and
chance_overlap its expectation in closed form. Each measure's record also holds ferret's token-F1, IOU and
AUPRC against the same tokens (fmm_fast.protocols.plausibility).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from fmm_fast.backends.loading import LoadedModel, load_model
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.errors import UserError
from fmm_fast.core.machine import machine_record
from fmm_fast.core.reading import read_checked
from fmm_fast.core.records import versions, write_record
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.measures.ranking import top_k_positions
from fmm_fast.measures.spec import MeasureSpec, resolve_measure
from fmm_fast.protocols.explanations import explain_encoded
from fmm_fast.protocols.plausibility import plausibility


def overlap_per_example(
    scores: list[np.ndarray], supporting: list[np.ndarray], explained: list[np.ndarray], k: int
) -> np.ndarray:
    """(N,) float64: |top-k explained tokens ∩ supporting| / min(k, |supporting|) per example.

    scores, supporting, explained: one (T_i,) array per example (supporting and explained bool).
    Only explained supporting tokens count; an example without any gets nan.
    """
    k = _check_k(k)
    if not len(scores) == len(supporting) == len(explained):
        raise ValueError(
            f"{len(scores)} score arrays, {len(supporting)} supporting and {len(explained)} explained flags"
        )
    values = np.full(len(scores), np.nan)
    for i, (row_scores, row_supporting, row_explained) in enumerate(
        zip(scores, supporting, explained, strict=True)
    ):
        target = np.asarray(row_supporting, dtype=bool) & np.asarray(row_explained, dtype=bool)
        count = int(np.count_nonzero(target))
        if count:
            top = top_k_positions(row_scores, row_explained, k)
            values[i] = np.count_nonzero(target[top]) / min(k, count)
    return values


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise UserError(f"k must be an integer >= 1, got {k!r}; pass e.g. k=5")
    return int(k)


def _mean_over_supported(values: np.ndarray) -> float:
    if np.all(np.isnan(values)):
        raise UserError(
            "no example has supporting-fact tokens; the overlap needs a dataset that records supporting "
            "facts, such as babi-1, babi-2 or babi-3"
        )
    return float(np.nanmean(values))


def supporting_overlap(
    scores: list[np.ndarray], supporting: list[np.ndarray], explained: list[np.ndarray], k: int
) -> float:
    """Mean over examples of |top-k explained tokens ∩ supporting| / min(k, |supporting|).

    scores: one (T_i,) float array per example; supporting, explained: (T_i,) bool. Top-k by descending
    score, ties to the earlier position (docs/method.md §4). Examples without supporting tokens are left out.
    """
    return _mean_over_supported(overlap_per_example(scores, supporting, explained, k))


def chance_overlap(supporting: list[np.ndarray], explained: list[np.ndarray], k: int) -> float:
    """The expected supporting_overlap of a uniformly random ranking (what `rand` estimates).

    The top-k is a uniform draw of d = min(k, n) of the n explained tokens, so it holds d·s/n of the
    s supporting ones on average (hypergeometric mean).
    """
    k = _check_k(k)
    values = np.full(len(supporting), np.nan)
    for i, (row_supporting, row_explained) in enumerate(zip(supporting, explained, strict=True)):
        row_explained = np.asarray(row_explained, dtype=bool)
        count = int(np.count_nonzero(np.asarray(row_supporting, dtype=bool) & row_explained))
        n = int(np.count_nonzero(row_explained))
        if count:
            values[i] = min(k, n) * count / n / min(k, count)
    return _mean_over_supported(values)


def run_supporting_overlap(
    model: str | Path,
    data: DataOptions,
    plan: Sequence[tuple[str, int]],
    ks: Sequence[int],
    out: Path,
    seed: int = 0,
    known_scores: Mapping[str, Sequence[np.ndarray] | None] | None = None,
) -> dict:
    """Supporting-fact overlap of several measures on the first test examples; resumable.

    plan: (measure, number of test examples) pairs, e.g. [("loo-abs", 100), ("beam-sign-10", 10)]; each
    measure explains the unmasked inputs once (gold-label logit). ks: the k values to report. The record
    is rewritten to `out` (JSON) after every measure, and a rerun skips measures already there.
    known_scores: a measure's scores of the first test examples (one (T_i,) array each) that the same
    model, data and seed already gave, e.g. an evaluation's beam ranking (saved_unmasked_scores; None:
    none saved): used instead of explaining again when they cover the measure's examples.
    """
    if not plan:
        raise UserError("the overlap plan names no measure; pass e.g. [('loo-abs', 100)]")
    ks = [_check_k(k) for k in ks]
    specs = {measure: resolve_measure(measure) for measure, _ in plan}  # a typo fails before any work
    loaded = load_model(model)
    largest = max(limit for _, limit in plan)
    _, encoded = open_split(loaded, data.select(limit=largest))
    if not encoded.supporting:
        raise UserError(f"dataset '{data.dataset}' records no supporting facts; use babi-1, babi-2 or babi-3")
    settings = {
        "model": str(model),
        "dataset": data.dataset,
        "split": data.split,
        "size": data.size,
        "test_size": data.test_size,
        "seed": seed,
        "ks": ks,
    }
    record = _load_record(out, settings)
    for measure, limit in plan:
        subset = encoded.subset(range(min(limit, len(encoded))))
        done = record["measures"].get(measure)
        if done is not None and done["n_examples"] == len(subset):
            continue
        known = (known_scores or {}).get(measure)
        if known is not None and len(known) >= len(subset):
            scores = _fitted(known[: len(subset)], subset, measure)
            record["measures"][measure] = _overlap(subset, scores, ks, seconds=0.0, reused=True)
        else:
            record["measures"][measure] = _measure_overlap(loaded, subset, specs[measure], ks, seed)
        write_record(out, record)
    return record


def _load_record(out: Path, settings: dict) -> dict:
    """The record of an earlier run with the same settings, or a fresh one."""
    if out.is_file():
        record = read_checked(
            out,
            {"settings": dict, "measures": {"*": {"n_examples": int}}},
            "remove it (it is recomputed) or choose another path",
        )
        if record.get("settings") != settings:
            raise UserError(
                f"{out} holds an overlap run with other settings; remove it or choose another path"
            )
        return record
    out.parent.mkdir(parents=True, exist_ok=True)
    return {
        "kind": "supporting-overlap",
        "settings": settings,
        "measures": {},
        "versions": versions(),
        "machine": machine_record(),
    }


def _fitted(scores: Sequence[np.ndarray], subset: EncodedSplit, measure: str) -> list[np.ndarray]:
    """Known scores, checked to hold one score per token of each example of `subset`."""
    if [len(s) for s in scores] != [len(ids) for ids in subset.input_ids]:
        raise UserError(
            f"the known scores of {measure} do not fit the test examples (other lengths): they come from "
            "another model or data; leave them out to explain again"
        )
    return [np.asarray(s, dtype=np.float64) for s in scores]


def _measure_overlap(
    loaded: LoadedModel,
    subset: EncodedSplit,
    measure: MeasureSpec,
    ks: Sequence[int],
    seed: int,
) -> dict:
    """Explain `subset` with `measure` once; its overlap and the chance level at every k, and the time."""
    started = time.perf_counter()
    explanations = explain_encoded(loaded, subset, measure, seed)
    scores = [np.asarray(e.scores, dtype=np.float64) for e in explanations]
    return _overlap(subset, scores, ks, seconds=time.perf_counter() - started, reused=False)


def _overlap(
    subset: EncodedSplit, scores: list[np.ndarray], ks: Sequence[int], seconds: float, reused: bool
) -> dict:
    """One measure's record: its overlap and the chance level at every k, plausibility, the time spent
    explaining, and whether the scores were known (reused) rather than explained here."""
    return {
        "n_examples": len(subset),
        "overlap": {str(k): supporting_overlap(scores, subset.supporting, subset.explained, k) for k in ks},
        "chance": {str(k): chance_overlap(subset.supporting, subset.explained, k) for k in ks},
        # ferret's token-F1@k, IOU@k and AUPRC against the same supporting-fact tokens
        "plausibility": plausibility(scores, subset.supporting, subset.explained, list(ks)),
        "supporting_tokens_mean": float(np.mean([np.count_nonzero(s) for s in subset.supporting])),
        "explained_tokens_mean": float(np.mean([np.count_nonzero(e) for e in subset.explained])),
        "seconds": seconds,
        "reused": reused,
    }

"""A fidelity estimate for a reduced-precision run: how far bf16 (or fp16) moves an evaluation or an
explanation run from fp32 on the user's own data, measured on a seeded sample of its examples run in both.

A reduced-precision run is a different, slightly noisier measurement: its rounding reorders near-ties among
importance scores, and a recursive erasure then masks other tokens from that step on. The sample shows by
how much, at the time the run is made. Every measure of the run erases the sample recursively twice, on the
run's engine and on an fp32 one (docs/method.md §4), and the two are compared:
  - prediction agreement: the share of the sample whose unmasked prediction is the same in both;
  - identical masks: per step r_j (j = 1..K-1), the share of the sample whose erased input is the same;
  - ΔACU, ΔRACU (reduced − fp32, ×1 as the record stores ACU/RACU) of each measure on the sample, with a
    95% percentile bootstrap interval over its examples (paired: one resample scores both precisions);
  - seconds: what the sample cost, both erasures.
An explanation run draws no curves: its estimate (ranking_fidelity) has the prediction agreement and, per
ratio r_j, the share of the sample whose floor(r_j·n) top-ranked explained tokens by each measure's scores
(the mask a one-shot erasure by that ranking makes) are the same in both precisions.
The estimate describes the sample only; with 16 examples its intervals are wide, and they say so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel, gradient_backend
from fmm_fast.backends.options import BackendOptions
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.metrics import METRICS
from fmm_fast.data.masking import masked_count
from fmm_fast.measures.base import Measure
from fmm_fast.measures.spec import BASELINE, MeasureSpec
from fmm_fast.protocols.curve_stats import RATIOS, acu_racu_against_baseline, format_ci
from fmm_fast.protocols.erasure import erase_top, erasure_steps, explain_split, fully_masked

BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE = 0.95


Scorer = Callable[[np.ndarray, np.ndarray], float]  # (y_true, y_pred) -> the primary metric


def scorer(metric: str, num_labels: int) -> Scorer:
    """The primary metric over all num_labels classes, as the run's own curves score it."""
    score = METRICS[metric]
    return score if metric == "accuracy" else lambda y_true, y_pred: score(y_true, y_pred, num_labels)


def sample_indices(n_examples: int, size: int, seed: int) -> np.ndarray:
    """(min(size, n),) sorted indices of the examples the estimate runs in both precisions, drawn by the
    run's seed."""
    rng = np.random.default_rng([seed, n_examples])
    return np.sort(rng.choice(n_examples, size=min(size, n_examples), replace=False))


@dataclass
class FidelitySample:
    """The examples an estimate runs in both precisions: ids (n,) their indices in the run's split (what
    measures drawing random numbers per example see), split the examples themselves."""

    ids: np.ndarray
    split: EncodedSplit

    @classmethod
    def draw(cls, split: EncodedSplit, size: int, seed: int) -> FidelitySample:
        ids = sample_indices(len(split), size, seed)
        return cls(ids, split.subset(ids))


@dataclass
class PrecisionRun:
    """One precision's side of the estimate: what scores the erased inputs and what each measure explains
    on (gradient measures need their own)."""

    precision: str
    engine: MaskBatchEngine
    engine_for: Callable[[Measure], MaskBatchEngine]


Sides = tuple[PrecisionRun, PrecisionRun]  # the run's reduced precision, then fp32


def precision_run(loaded: LoadedModel, options: BackendOptions, token_budget: int) -> PrecisionRun:
    """One side of the estimate on `loaded` (resolved `options`): an engine of its own (the run's engine
    keeps its counts), and a gradient engine made when a measure first needs one."""
    engine = MaskBatchEngine(loaded.backend, token_budget=token_budget)
    made: list[MaskBatchEngine] = []

    def engine_for(measure: Measure) -> MaskBatchEngine:
        if not measure.needs_gradients:
            return engine
        if not made:
            made.append(MaskBatchEngine(gradient_backend(loaded, options), token_budget=token_budget))
        return made[0]

    return PrecisionRun(options.precision, engine, engine_for)


@dataclass
class SampleErasure:
    """One precision's erasure of the sample. predictions: measure -> (K+1, n) int64 predicted labels at
    every ratio; erased: measure -> per step j = 1..K-1, the n erased inputs."""

    unmasked: np.ndarray
    predictions: dict[str, np.ndarray]
    erased: dict[str, list[list[np.ndarray]]]


def erase_sample(
    specs: Sequence[MeasureSpec], seed: int, sample: FidelitySample, side: PrecisionRun, rows: int
) -> SampleErasure:
    """Every measure's recursive erasure of `sample` on one precision's side."""
    examples, engine = sample.split, side.engine
    unmasked = engine.logits(list(examples.input_ids)).argmax(axis=1)
    ends = engine.logits(fully_masked(examples, engine.info.mask_id)).argmax(axis=1)
    predictions, erased = {}, {}
    for spec in specs:
        curve, masks = [unmasked], []
        steps = erasure_steps(
            spec, seed, examples, engine, list(examples.input_ids), 1, rows, engine_for=side.engine_for,
            example_ids=sample.ids,
        )  # fmt: skip
        for step in steps:
            if step.predictions is None:  # r = 1: every explained token masked
                curve.append(ends)
            else:
                curve.append(step.predictions)
                masks.append(step.erased)
        predictions[spec.name] = np.stack(curve)
        erased[spec.name] = masks
    return SampleErasure(unmasked, predictions, erased)


def _scores(
    predictions: dict[str, np.ndarray], labels: np.ndarray, rows: np.ndarray, score: Scorer
) -> dict[str, tuple[float, float]]:
    """(ACU, RACU) of every measure on the examples `rows` of the sample (a resample may repeat some)."""
    curves = {name: [score(labels[rows], p[rows]) for p in curve] for name, curve in predictions.items()}
    return acu_racu_against_baseline(curves)


def compare(
    reduced: SampleErasure, fp32: SampleErasure, labels: np.ndarray, score: Scorer, seed: int
) -> dict:
    """The estimate's figures (see the module docstring) from both precisions' erasures of the sample."""
    n = len(labels)
    every = np.arange(n)
    reduced_scores = _scores(reduced.predictions, labels, every, score)
    fp32_scores = _scores(fp32.predictions, labels, every, score)
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, n, size=n) for _ in range(BOOTSTRAP_RESAMPLES)]
    resampled = [
        (_scores(reduced.predictions, labels, rows, score), _scores(fp32.predictions, labels, rows, score))
        for rows in draws
    ]
    tail = 100 * (1 - CONFIDENCE) / 2
    measures = {}
    for name in reduced.predictions:
        same = [_identical(x, y) for x, y in zip(reduced.erased[name], fp32.erased[name], strict=True)]
        entry = {"identical_masks": same}
        for index, key in enumerate(("acu", "racu")):
            differences = np.asarray([r[name][index] - f[name][index] for r, f in resampled])
            finite = differences[np.isfinite(differences)]
            interval = [float(v) for v in np.percentile(finite, [tail, 100 - tail])] if len(finite) else None
            entry[f"{key}_reduced"] = reduced_scores[name][index]
            entry[f"{key}_fp32"] = fp32_scores[name][index]
            entry[f"delta_{key}"] = reduced_scores[name][index] - fp32_scores[name][index]
            entry[f"delta_{key}_ci"] = interval
        measures[name] = entry
    return {
        "n_examples": n,
        "prediction_agreement": float(np.mean(reduced.unmasked == fp32.unmasked)),
        "measures": measures,
        "confidence": CONFIDENCE,
        "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
    }


def fidelity_estimate(
    specs: Sequence[MeasureSpec], seed: int, sample: FidelitySample, sides: Sides, metric: str, rows: int
) -> dict:
    """The estimate for an erasure run of `specs` (rand among them) seeded `seed`: `sample` erased on the
    run's side and on fp32's (`sides`). The record's "fidelity" section."""
    if not any(spec.name == BASELINE for spec in specs):
        raise ValueError(f"a fidelity estimate needs the {BASELINE} baseline among the measures")
    started = time.perf_counter()
    reduced, fp32 = (erase_sample(specs, seed, sample, side, rows) for side in sides)
    score = scorer(metric, sides[0].engine.info.num_labels)
    return {
        "precision": sides[0].precision,
        "sample": sample.ids.tolist(),
        "metric": metric,
        "ratios": [float(r) for r in RATIOS],
        **compare(reduced, fp32, sample.split.labels, score, seed),
        "seconds": time.perf_counter() - started,
    }


def ranking_fidelity(
    specs: Sequence[MeasureSpec], seed: int, sample: FidelitySample, sides: Sides, rows: int
) -> dict:
    """The estimate for an explanation run of `specs` seeded `seed` (see the module docstring): `sample`
    explained on both `sides`. The explanation run record's "fidelity" section."""
    started = time.perf_counter()
    examples = sample.split
    inputs, mask_id = list(examples.input_ids), sides[0].engine.info.mask_id
    lengths = [int(e.sum()) for e in examples.explained]
    unmasked = [side.engine.logits(inputs).argmax(axis=1) for side in sides]
    measures = {}
    for spec in specs:
        masks = []
        for side in sides:
            measure = spec.build(seed)  # as `explain` builds it: the same random draws on both sides
            explaining = side.engine_for(measure)
            scores = explain_split(measure, explaining, inputs, examples, rows, example_ids=sample.ids)
            masks.append(
                [
                    [
                        erase_top(x, e, s, int(masked_count(float(ratio), n)), mask_id)
                        for x, e, s, n in zip(inputs, examples.explained, scores, lengths, strict=True)
                    ]
                    for ratio in RATIOS[1:-1]
                ]
            )
        measures[spec.name] = {"identical_masks": [_identical(a, b) for a, b in zip(*masks, strict=True)]}
    return {
        "precision": sides[0].precision,
        "sample": sample.ids.tolist(),
        "ratios": [float(r) for r in RATIOS],
        "n_examples": len(sample.ids),
        "prediction_agreement": float(np.mean(unmasked[0] == unmasked[1])),
        "measures": measures,
        "seconds": time.perf_counter() - started,
    }


def _identical(first: Sequence[np.ndarray], second: Sequence[np.ndarray]) -> float:
    """The share of examples whose masked inputs are the same."""
    return float(np.mean([np.array_equal(a, b) for a, b in zip(first, second, strict=True)]))


def fidelity_lines(estimate: dict) -> list[str]:
    """The printed block of an estimate: the sample, its cost and agreement, then a row per measure (with
    ΔACU and ΔRACU where the run drew curves)."""
    curves = "delta_racu" in next(iter(estimate["measures"].values()))
    masks = "erasure masks" if curves else "ranking masks"
    lines = [
        f"fidelity of {estimate['precision']} against fp32 on a sample of {estimate['n_examples']} examples "
        f"(run in both, {estimate['seconds']:.1f} s): predictions agree on "
        f"{100 * estimate['prediction_agreement']:.0f}%",
        f"{'measure':<16}{f'identical {masks} min/mean':>32}"
        + (f"{'ΔACU ×100 (95% CI)':>24}{'ΔRACU ×100 (95% CI)':>24}" if curves else ""),
    ]
    for name, m in estimate["measures"].items():
        same = m["identical_masks"]
        shares = f"{100 * min(same):.0f}% / {100 * sum(same) / len(same):.0f}%"
        deltas = [
            format_ci(m[f"delta_{key}"], *(m[f"delta_{key}_ci"] or (math.nan, math.nan)))
            for key in (("acu", "racu") if curves else ())
        ]
        lines.append(f"{name:<16}{shares:>32}" + "".join(f"{d:>24}" for d in deltas))
    return lines

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
A peer-metrics run (`fmm-fast aopc`, docs/method.md §8) ranks once: its estimate (peer_fidelity) ranks the
sample on both sides, by every measure and every explanation file, and has those same ranking masks, the
ΔACU/ΔRACU of the non-recursive curves and the Δ of the mean AOPC comprehensiveness, AOPC sufficiency and
τ-LOO (over the examples that define them in both), each with its paired bootstrap interval.
A MaSF run (`fmm-fast masf`, docs/method.md §6) explains nothing: its estimate (p_value_fidelity, per
calibration method) has the prediction agreement and, per masking ratio, the Δ of the sample's mean p-value
(each precision calibrated on the whole validation split) with its paired bootstrap interval, and the share
of the sample whose p-value falls on the same side of the in-distribution level in both.
The estimate describes the sample only; with 16 examples its intervals are wide, and they say so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel
from fmm_fast.backends.options import BackendOptions
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.metrics import METRICS
from fmm_fast.measures.base import Measure
from fmm_fast.measures.external import ExternalExplanation
from fmm_fast.measures.spec import BASELINE, MeasureSpec
from fmm_fast.protocols.aopc import SUMMARIES, fixed_ranking
from fmm_fast.protocols.aopc_metrics import peer_metrics
from fmm_fast.protocols.curve_stats import RATIOS, acu_racu_against_baseline, format_ci
from fmm_fast.protocols.erasure import (
    engine_chooser,
    erase_split,
    erasure_steps,
    explain_split,
    fully_masked,
)
from fmm_fast.protocols.masf.statistic import IN_DISTRIBUTION_LEVEL

BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE = 0.95
# the printed title of each figure an estimate compares
FIGURE_TITLES = {"acu": "ACU", "racu": "RACU", **{key: title.rstrip(" ↑↓") for key, title in SUMMARIES}}


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
    return PrecisionRun(options.precision, engine, engine_chooser(loaded, options, engine))


@dataclass
class SampleErasure:
    """One precision's erasure of the sample. unmasked: (n,) predicted labels; predictions: measure ->
    (K+1, n) int64 predicted labels at every ratio; erased: measure -> per step j = 1..K-1, the n erased
    inputs; values: measure -> figure -> (n,) float64 per-example figures to compare too (nan where an
    example leaves one undefined), e.g. AOPC comprehensiveness."""

    unmasked: np.ndarray
    predictions: dict[str, np.ndarray]
    erased: dict[str, list[list[np.ndarray]]]
    values: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)


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


def _defined_means(reduced: np.ndarray, fp32: np.ndarray) -> tuple[float, float]:
    """The means of a per-example figure in both precisions over the examples both define (nan: none)."""
    both = np.isfinite(reduced) & np.isfinite(fp32)
    if not both.any():
        return math.nan, math.nan
    return float(reduced[both].mean()), float(fp32[both].mean())


def _draws(n: int, seed: int) -> list[np.ndarray]:
    """The rows of the whole sample of n examples, then of each paired bootstrap resample, seeded."""
    rng = np.random.default_rng(seed)
    return [np.arange(n), *(rng.integers(0, n, size=n) for _ in range(BOOTSTRAP_RESAMPLES))]


def _delta(key: str, pairs: Sequence[tuple[float, float]]) -> dict:
    """A figure's entries from its (reduced, fp32) values on the whole sample (first) and on each
    bootstrap resample: both values, their difference and its percentile interval (None: no finite one)."""
    (reduced, fp32), resampled = pairs[0], pairs[1:]
    differences = np.asarray([r - f for r, f in resampled])
    finite = differences[np.isfinite(differences)]
    tail = 100 * (1 - CONFIDENCE) / 2
    interval = [float(v) for v in np.percentile(finite, [tail, 100 - tail])] if len(finite) else None
    return {
        f"{key}_reduced": reduced,
        f"{key}_fp32": fp32,
        f"delta_{key}": reduced - fp32,
        f"delta_{key}_ci": interval,
    }


def compare(
    reduced: SampleErasure, fp32: SampleErasure, labels: np.ndarray, score: Scorer, seed: int
) -> dict:
    """The estimate's figures (see the module docstring) from both precisions' erasures of the sample: per
    measure ACU and RACU, then its per-example `values`, each on the sample and on the same paired
    resamples of its examples."""
    n = len(labels)
    draws = _draws(n, seed)
    curve_scores = [
        (_scores(reduced.predictions, labels, rows, score), _scores(fp32.predictions, labels, rows, score))
        for rows in draws
    ]
    measures = {}
    for name in reduced.predictions:
        same = [_identical(x, y) for x, y in zip(reduced.erased[name], fp32.erased[name], strict=True)]
        entry: dict = {"identical_masks": same}
        for index, key in enumerate(("acu", "racu")):
            entry |= _delta(key, [(r[name][index], f[name][index]) for r, f in curve_scores])
        for key, values in reduced.values.get(name, {}).items():
            paired = fp32.values[name][key]
            entry |= _delta(key, [_defined_means(values[rows], paired[rows]) for rows in draws])
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
    erase = partial(erase_sample, specs, seed, sample, rows=rows)
    return _compared_curves(specs, erase, "erasure", seed, sample, sides, metric)


def _compared_curves(
    specs: Sequence[MeasureSpec],
    erase: Callable[[PrecisionRun], SampleErasure],
    masks: str,
    seed: int,
    sample: FidelitySample,
    sides: Sides,
    metric: str,
) -> dict:
    """The "fidelity" section of a run that draws curves of `specs` (rand among them): `erase` run on both
    `sides`, compared; masks: what its erased inputs are ("erasure": recursive, "ranking": one-shot)."""
    if not any(spec.name == BASELINE for spec in specs):
        raise ValueError(f"a fidelity estimate needs the {BASELINE} baseline among the measures")
    started = time.perf_counter()
    reduced, fp32 = (erase(side) for side in sides)
    score = scorer(metric, sides[0].engine.info.num_labels)
    return {
        "precision": sides[0].precision,
        "sample": sample.ids.tolist(),
        "masks": masks,
        "metric": metric,
        "ratios": [float(r) for r in RATIOS],
        **compare(reduced, fp32, sample.split.labels, score, seed),
        "seconds": time.perf_counter() - started,
    }


def peer_sample(
    specs: Sequence[MeasureSpec],
    external: Sequence[ExternalExplanation],
    seed: int,
    sample: FidelitySample,
    side: PrecisionRun,
    rows: int,
) -> SampleErasure:
    """The peer metrics of `sample` on one precision's side: every measure ranks it once there (as `aopc`
    does), every explanation file gives its fixed scores; each ranking's non-recursive curve, its masks and
    its per-example AOPC comprehensiveness, AOPC sufficiency and τ-LOO."""
    examples, engine = sample.split, side.engine
    rankings = {
        spec.name: fixed_ranking(spec, seed, side.engine_for, examples, rows, example_ids=sample.ids)[0]
        for spec in specs
    }
    rankings |= {e.name: [e.scores[i] for i in sample.ids] for e in external}
    predictions, erased, values = {}, {}, {}
    for name, scores in rankings.items():
        results = peer_metrics(engine, examples, scores, RATIOS)
        predictions[name] = np.stack([r.curve_predictions for r in results], axis=1)
        erased[name] = ranking_masks(examples, scores, engine.info.mask_id)
        values[name] = {key: np.asarray([getattr(r, key) for r in results]) for key, _ in SUMMARIES}
    unmasked = engine.logits(list(examples.input_ids)).argmax(axis=1)
    return SampleErasure(unmasked, predictions, erased, values)


def peer_fidelity(
    specs: Sequence[MeasureSpec],
    external: Sequence[ExternalExplanation],
    seed: int,
    sample: FidelitySample,
    sides: Sides,
    metric: str,
    rows: int,
) -> dict:
    """The estimate for a peer-metrics run of `specs` (rand among them) and the `external` explanations,
    seeded `seed` (see the module docstring): `sample` ranked and scored on both `sides`. The peer-metrics
    record's "fidelity" section."""
    erase = partial(peer_sample, specs, external, seed, sample, rows=rows)
    return _compared_curves(specs, erase, "ranking", seed, sample, sides, metric)


def ranking_masks(
    examples: EncodedSplit, scores: Sequence[np.ndarray], mask_id: int
) -> list[list[np.ndarray]]:
    """Per ratio r_j (j = 1..K-1), every example with its floor(r_j·n) top-ranked explained units by
    `scores` ((T_i,) each) masked: a one-shot erasure by that ranking."""
    return [erase_split(examples, examples.input_ids, scores, ratio, mask_id) for ratio in RATIOS[1:-1]]


def ranking_fidelity(
    specs: Sequence[MeasureSpec], seed: int, sample: FidelitySample, sides: Sides, rows: int
) -> dict:
    """The estimate for an explanation run of `specs` seeded `seed` (see the module docstring): `sample`
    explained on both `sides`. The explanation run record's "fidelity" section."""
    started = time.perf_counter()
    examples = sample.split
    inputs = list(examples.input_ids)
    unmasked = [side.engine.logits(inputs).argmax(axis=1) for side in sides]
    measures = {}
    for spec in specs:
        masks = []
        for side in sides:
            measure = spec.build(seed)  # as `explain` builds it: the same random draws on both sides
            explaining = side.engine_for(measure)
            scores = explain_split(measure, explaining, inputs, examples, rows, example_ids=sample.ids)
            masks.append(ranking_masks(examples, scores, side.engine.info.mask_id))
        measures[spec.name] = {"identical_masks": [_identical(a, b) for a, b in zip(*masks, strict=True)]}
    return {
        "precision": sides[0].precision,
        "sample": sample.ids.tolist(),
        "masks": "ranking",
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
    """The printed block of an estimate: the sample, its cost and agreement, then a row per measure: its
    identical masks and the Δ of every figure the estimate compares (none for an explanation run)."""
    first = next(iter(estimate["measures"].values()))
    figures = [key.removeprefix("delta_") for key in first if key.startswith("delta_") and key[-3:] != "_ci"]
    headers = [f"Δ{FIGURE_TITLES[key]} ×100 (95% CI)" for key in figures]
    widths = [max(24, len(header) + 2) for header in headers]
    masks = f"identical {estimate['masks']} masks min/mean"
    lines = [
        f"fidelity of {estimate['precision']} against fp32 on a sample of {estimate['n_examples']} examples "
        f"(run in both, {estimate['seconds']:.1f} s): predictions agree on "
        f"{100 * estimate['prediction_agreement']:.0f}%",
        f"{'measure':<16}{masks:>32}"
        + "".join(f"{header:>{width}}" for header, width in zip(headers, widths, strict=True)),
    ]
    for name, m in estimate["measures"].items():
        same = m["identical_masks"]
        shares = f"{100 * min(same):.0f}% / {100 * sum(same) / len(same):.0f}%"
        deltas = [
            format_ci(m[f"delta_{key}"], *(m[f"delta_{key}_ci"] or (math.nan, math.nan))) for key in figures
        ]
        lines.append(
            f"{name:<16}{shares:>32}" + "".join(f"{d:>{w}}" for d, w in zip(deltas, widths, strict=True))
        )
    return lines


def p_value_fidelity(
    reduced: dict[float, np.ndarray],
    fp32: dict[float, np.ndarray],
    agreement: float,
    precision: str,
    sample: np.ndarray,
    seed: int,
    seconds: float,
) -> dict:
    """The estimate of one MaSF calibration method (see the module docstring) from the sample's p-values
    in both precisions, ratio -> (n,) float64, each calibrated in its own; sample: (n,) the examples' indices
    in the test split; agreement: of the unmasked predictions. A MaSF result's "fidelity" section."""
    draws = _draws(len(sample), seed)
    per_ratio = []
    for ratio, values in reduced.items():
        paired = fp32[ratio]
        entry = _delta("mean_p", [(float(values[rows].mean()), float(paired[rows].mean())) for rows in draws])
        level = IN_DISTRIBUTION_LEVEL
        per_ratio.append(
            {"ratio": ratio, **entry, "same_side": float(np.mean((values < level) == (paired < level)))}
        )
    return {
        "precision": precision,
        "sample": sample.tolist(),
        "n_examples": len(sample),
        "prediction_agreement": agreement,
        "level": IN_DISTRIBUTION_LEVEL,
        "per_ratio": per_ratio,
        "confidence": CONFIDENCE,
        "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
        "seconds": seconds,
    }


def p_value_fidelity_lines(label: str, estimate: dict) -> list[str]:
    """The printed block of a MaSF estimate of the result `label`: the sample, its cost and agreement, then
    a row per masking ratio."""
    level = estimate["level"]
    lines = [
        f"fidelity of {label} in {estimate['precision']} against fp32 on a sample of "
        f"{estimate['n_examples']} test examples (fp32 calibrated again, {estimate['seconds']:.1f} s): "
        "predictions agree on "
        f"{100 * estimate['prediction_agreement']:.0f}%",
        f"{'ratio':>6}{'Δ mean p ×100 (95% CI)':>26}{f'same side of {level}':>20}",
    ]
    for r in estimate["per_ratio"]:
        delta = format_ci(r["delta_mean_p"], *(r["delta_mean_p_ci"] or (math.nan, math.nan)))
        lines.append(f"{r['ratio']:>6.1f}{delta:>26}{100 * r['same_side']:>19.0f}%")
    return lines

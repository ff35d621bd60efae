"""Aggregation of evaluation results over seeds: mean and 95% BCa CI per (dataset, strategy, measure).

Seeds whose model did not converge are dropped (docs/method.md §5); one run per seed speaks for its model.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fmm_fast.core.errors import UserError
from fmm_fast.data.units import DEFAULT_UNIT, UNITS
from fmm_fast.protocols.curve_stats import (
    BABI_CONVERGENCE_THRESHOLD,
    bootstrap_ci,
    converged,
    format_ci,
    proportion_interval,
)
from fmm_fast.report.load import EvaluationResult, RoarResult, read_results
from fmm_fast.report.order import BASELINE_MEASURE, measure_sort_key, strategy_sort_key

BAND_PERCENTILES = (2.5, 97.5)


def seeds_text(count: int) -> str:
    """A count of seeds in words ("1 seed", "3 seeds"): every n the tables show says what it counts."""
    return f"{count} seed{'s' * (count != 1)}"


@dataclass(frozen=True)
class Estimate:
    """Mean and 95% BCa bootstrap CI over seeds. values: (n,) float64, one per seed."""

    values: np.ndarray
    mean: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Estimate:
        array = np.asarray(list(values), dtype=np.float64)
        return cls(array, *bootstrap_ci(array))

    def formatted(self) -> str:
        """×100, one decimal: "54.9 (−2.1/+1.8)"."""
        return format_ci(self.mean, self.low, self.high)


@dataclass(frozen=True)
class CurveScores:
    """One measure's curves and ACU/RACU over the seeds that ran it. curves: (n, R) float64, one per seed."""

    name: str
    signed: bool
    seeds: list[int]
    acu: Estimate
    racu: Estimate
    curves: np.ndarray
    racu_undefined: list[str] = field(default_factory=list, kw_only=True)  # why some seed's RACU is nan

    @property
    def score_name(self) -> str:
        """The score docs/method.md §5 reads: ACU for signed measures, RACU for unsigned ones."""
        return "ACU" if self.signed else "RACU"

    @property
    def score(self) -> Estimate:
        return self.acu if self.signed else self.racu

    def curve_band(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(R,) 2.5 and 97.5 percentiles across seeds, or None with fewer than 2 seeds."""
        if len(self.seeds) < 2:
            return None
        low, high = np.percentile(self.curves, BAND_PERCENTILES, axis=0)
        return low, high


@dataclass(frozen=True)
class MeasureReport(CurveScores):
    """One measure of an erasure run aggregated over the kept seeds. seconds, forward_passes, shared_rows:
    (n,) float64 (shared_rows: rows it took from another measure's passes, which counted them)."""

    seconds: np.ndarray
    forward_passes: np.ndarray
    shared_rows: np.ndarray


@dataclass(frozen=True)
class GroupReport:
    """One (dataset, strategy): its kept seeds and measures. ratios: (R,) float64."""

    dataset: str
    strategy: str
    split: str
    metric: str
    ratios: np.ndarray
    majority_baseline: float
    seeds: list[int]
    unmasked: Estimate
    fully_masked: Estimate
    measures: dict[str, MeasureReport]  # canonical order
    files: list[Path]
    machines: dict[str, int]  # where the kept runs computed (load.machine_text) -> how many runs
    unit: str = DEFAULT_UNIT  # the erasure unit its runs masked (runs of other units: other groups)
    n_examples: int = 0  # of every run of the group (one example set)
    variant: str = ""  # what sets it apart from other groups of its (dataset, strategy, unit); "" when alone

    @property
    def label(self) -> str:
        """The dataset as tables and plots name the group: with its unit unless tokens, and the variant
        where its (dataset, strategy, unit) has several groups."""
        label = self.dataset if self.unit == DEFAULT_UNIT else f"{self.dataset}, {self.unit} units"
        return f"{label} · {self.variant}" if self.variant else label

    @property
    def counts(self) -> str:
        """What its column's n counts: "3 seeds × 100 examples"."""
        return f"{seeds_text(len(self.seeds))} × {self.n_examples} examples"


@dataclass(frozen=True)
class DroppedSeed:
    """A seed left out of aggregation because its model did not converge (docs/method.md §5)."""

    dataset: str
    strategy: str
    seed: int
    metric: str
    unmasked: float
    n_examples: int  # of the run that judged convergence
    files: list[Path]

    @property
    def interval(self) -> tuple[float, float]:
        """95% (Wilson) interval of the unmasked metric, an accuracy on n_examples."""
        return proportion_interval(self.unmasked, self.n_examples)

    @property
    def undecided(self) -> bool:
        """True when the threshold lies inside the interval: too few examples to tell."""
        low, high = self.interval
        return low <= BABI_CONVERGENCE_THRESHOLD <= high

    def describe(self) -> str:
        hint = ""
        if self.undecided:
            low, high = self.interval
            hint = (
                f"; {self.n_examples} examples cannot tell (95% interval {100 * low:.0f}–{100 * high:.0f}): "
                "evaluate more of them (--limit)"
            )
        return (
            f"{self.dataset} / {self.strategy} seed {self.seed}: unmasked {self.metric} "
            f"{100 * self.unmasked:.1f} ≤ {100 * BABI_CONVERGENCE_THRESHOLD:.1f} on {self.n_examples} "
            f"examples{hint} ({', '.join(str(p) for p in self.files)})"
        )


@dataclass(frozen=True)
class Report:
    """groups: sorted by strategy, then dataset. ignored: result.json files of other commands."""

    groups: list[GroupReport]
    dropped: list[DroppedSeed]
    files: list[Path]
    ignored: list[Path]

    def strategies(self) -> list[str]:
        return sorted({g.strategy for g in self.groups}, key=strategy_sort_key)


def check_consistent(
    results: Sequence[EvaluationResult | RoarResult],
    attributes: Sequence[str] = ("split", "metric", "ratios"),
) -> None:
    """Seeds of one (dataset, strategy) must share these attributes (ratios: an array) to be averaged."""
    first = results[0]
    for result in results[1:]:
        for attribute in attributes:
            if not np.array_equal(getattr(result, attribute), getattr(first, attribute)):
                raise UserError(
                    f"{first.path} and {result.path} ({first.dataset}/{first.strategy}) differ in "
                    f"{attribute}; report results of one {attribute} at a time"
                )


def _measure_report(name: str, runs_by_seed: dict[int, list[EvaluationResult]]) -> MeasureReport:
    """Collect one measure over the seeds that ran it; a seed may spread its measures over several files."""
    seeds, runs = [], []
    for seed, results in runs_by_seed.items():
        holders = [r for r in results if name in r.measures]
        # Every file carries its own `rand` baseline, so only rand may repeat within a seed.
        if len(holders) > 1 and name != BASELINE_MEASURE:
            raise UserError(
                f"measure {name} of seed {seed} appears in both {holders[0].path} and {holders[1].path}; "
                "pass only one of them"
            )
        if holders:
            seeds.append(seed)
            runs.append(holders[0].measures[name])
    return MeasureReport(
        name=name,
        signed=runs[0].signed,
        seeds=seeds,
        acu=Estimate.of(run.acu for run in runs),
        racu=Estimate.of(run.racu for run in runs),
        curves=np.stack([run.curve for run in runs]),
        seconds=np.array([run.seconds for run in runs]),
        forward_passes=np.array([run.forward_passes for run in runs]),
        shared_rows=np.array([run.shared_rows for run in runs]),
        racu_undefined=sorted({run.racu_undefined for run in runs if run.racu_undefined}),
    )


def _check_one_rand(seed: int, results: Sequence[EvaluationResult]) -> None:
    """UserError when files of one seed (one model, one example set) hold `rand` curves that differ:
    neither may silently stand for the other."""
    holders = [r for r in results if BASELINE_MEASURE in r.measures]
    first = holders[0].measures[BASELINE_MEASURE].curve if holders else None
    for other in holders[1:]:
        if not np.allclose(other.measures[BASELINE_MEASURE].curve, first, rtol=0, atol=1e-12):
            raise UserError(
                f"the {BASELINE_MEASURE} curves of seed {seed} in {holders[0].path} and {other.path} differ "
                "(runs of one model on one example set draw the same rand); report them one at a time"
            )


def _variants(results: Sequence[EvaluationResult]) -> dict[tuple[str, str], str]:
    """(model, examples) -> the words that set its runs apart from the other runs of one (dataset,
    strategy): the model's folder name, the number of examples, or both; "" when there is one group."""
    keys = list(dict.fromkeys((r.model, r.examples) for r in results))
    if len(keys) == 1:
        return {keys[0]: ""}
    counts = {r.examples: r.n_examples for r in results}
    models = {model for model, _ in keys}
    sets = {examples for _, examples in keys}
    variants = {}
    for model, examples in keys:
        words = []
        if len(models) > 1:
            words.append(Path(model).name or "fmm-fast")
        if len(sets) > 1:
            words.append(f"{counts[examples]} examples")
        variants[(model, examples)] = ", ".join(words)
    if len(set(variants.values())) != len(variants):  # same count, other options: number them
        variants = {key: f"{words} #{i + 1}" for i, (key, words) in enumerate(variants.items())}
    return variants


def _warn_kept_apart(dataset: str, strategy: str, variants: dict[tuple[str, str], str]) -> None:
    if len(variants) > 1:
        print(
            f"fmm-fast: warning: {dataset} / {strategy}: runs of different models or example sets are kept "
            f"apart ({'; '.join(variants.values())}): never averaged or scored against each other's "
            f"{BASELINE_MEASURE}; each has its own column",
            file=sys.stderr,
        )


def aggregate(
    results: Sequence[EvaluationResult], ignored: Sequence[Path] = (), drop_unconverged: bool = True
) -> Report:
    """Group results by (dataset, strategy, erasure unit), drop non-converged seeds, aggregate each measure.

    ignored: result.json files of other commands, only listed in the report.
    drop_unconverged=False keeps every seed (to plot what one evaluation run produced).
    """
    by_kind: dict[tuple[str, str, str], list[EvaluationResult]] = defaultdict(list)
    for result in sorted(results, key=lambda r: r.path):
        by_kind[(result.dataset, result.strategy, result.unit)].append(result)
    by_group: dict[tuple[str, str, str, str], list[EvaluationResult]] = defaultdict(list)
    for (dataset, strategy, unit), kind_results in by_kind.items():
        variants = _variants(kind_results)
        _warn_kept_apart(dataset, strategy, variants)
        for result in kind_results:
            by_group[(dataset, strategy, unit, variants[(result.model, result.examples)])].append(result)
    groups, dropped = [], []
    for (dataset, strategy, unit, variant), group_results in by_group.items():
        check_consistent(group_results)
        runs_by_seed: dict[int, list[EvaluationResult]] = defaultdict(list)
        for result in group_results:
            runs_by_seed[result.seed].append(result)
        kept: dict[int, list[EvaluationResult]] = {}
        representatives: list[EvaluationResult] = []  # one per kept seed
        for seed in sorted(runs_by_seed):
            seed_results = runs_by_seed[seed]
            _check_one_rand(seed, seed_results)
            judge = seed_results[0]  # every run of the group erased the same examples with the same model
            if not drop_unconverged or converged(dataset, judge.unmasked):
                kept[seed] = seed_results
                representatives.append(judge)
            else:
                files = [r.path for r in seed_results]
                dropped.append(
                    DroppedSeed(
                        dataset, strategy, seed, judge.metric, judge.unmasked, judge.n_examples, files
                    )
                )
        if not kept:
            continue
        names = sorted({n for rs in kept.values() for r in rs for n in r.measures}, key=measure_sort_key)
        groups.append(
            GroupReport(
                dataset=dataset,
                strategy=strategy,
                split=representatives[0].split,
                metric=representatives[0].metric,
                ratios=representatives[0].ratios,
                majority_baseline=representatives[0].majority_baseline,
                seeds=list(kept),
                unmasked=Estimate.of(r.unmasked for r in representatives),
                fully_masked=Estimate.of(r.fully_masked for r in representatives),
                measures={name: _measure_report(name, kept) for name in names},
                files=[r.path for rs in kept.values() for r in rs],
                machines=dict(Counter(r.machine for rs in kept.values() for r in rs).most_common()),
                unit=unit,
                n_examples=representatives[0].n_examples,
                variant=variant,
            )
        )
    groups.sort(
        key=lambda g: (strategy_sort_key(g.strategy), g.dataset, UNITS.index(g.unit), g.n_examples, g.variant)
    )
    return Report(groups, dropped, files=sorted(r.path for r in results), ignored=list(ignored))


def load_report(dirs: Sequence[Path]) -> Report:
    """Find, read and aggregate every evaluation result.json under `dirs` (ROAR runs are left out)."""
    results = read_results(dirs)
    return aggregate(results.evaluations, results.ignored)

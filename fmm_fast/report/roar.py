"""The report's ROAR section: `fmm-fast roar` runs aggregated over seeds, beside no-retraining erasure.

A group is one (dataset, retraining strategy, recursive or not). Each measure gets its ROAR curve (a new
model trained at every masking ratio) with ACU/RACU and the clipped RACU over seeds, and beside it the
same measure's erasure curve without retraining: of the run's own step-0 model (its seed-S/erasure run),
and of every erasure run of the same dataset given to the same report (typically the masked model's
`fmm-fast evaluate`). The cost rows put both protocols' trainings, passes and wall time side by side.
"""

from __future__ import annotations

import functools
import math
import operator
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fmm_fast.core.errors import UserError
from fmm_fast.protocols.curve_stats import BABI_CONVERGENCE_THRESHOLD, converged
from fmm_fast.report.aggregate import CurveScores, Estimate, GroupReport, aggregate, check_consistent
from fmm_fast.report.load import ROAR_PHASES, EvaluationResult, RoarCost, RoarResult, RoarSeed
from fmm_fast.report.order import measure_sort_key, strategy_sort_key


@dataclass(frozen=True)
class RoarMeasure(CurveScores):
    """One measure's ROAR curve over the kept seeds that finished it; racu_clipped: RACU clipped to
    [−1, 1] as the Recursive ROAR paper reported it."""

    racu_clipped: Estimate


@dataclass(frozen=True)
class NoRetraining:
    """A column of comparison: one model's erasure curves, no retraining. own: the ROAR run's step-0
    model (its seed-S/erasure runs); otherwise erasure runs given to the report beside the ROAR run.

    group: the curves on their own ratios (plotted, costed). scored: the same runs read at the ROAR run's
    ratios where those are a subset of theirs (ACU/RACU on the same trapezoids as ROAR's, so a finer grid
    does not decide the comparison), else group itself. off_roar_ratios: scored is not on the ROAR run's
    ratios (they are not a subset of the runs' own), so its areas compare with ROAR's only roughly.
    """

    own: bool
    group: GroupReport
    scored: GroupReport
    off_roar_ratios: bool

    @property
    def regridded(self) -> bool:
        return not np.array_equal(self.scored.ratios, self.group.ratios)

    @property
    def label(self) -> str:
        split = "" if self.group.split == "test" else f", {self.group.split} split"
        model = "step-0 model" if self.own else "model (evaluate)"
        return f"No retraining: {self.group.strategy} {model}{split}"


@dataclass(frozen=True)
class RoarGroup:
    """The ROAR runs of one (dataset, strategy, recursive), aggregated. ratios: (R,) float64.

    names: every measure of the runs in canonical order; measures: those with at least one finished seed;
    notes: what is left out and why (steps not run yet, erasures not written, seeds that did not converge).
    """

    dataset: str
    strategy: str
    recursive: bool
    metric: str
    ratios: np.ndarray
    majority_baseline: float
    seeds: list[int]
    names: list[str]
    signed: dict[str, bool]
    measures: dict[str, RoarMeasure]
    no_retraining: list[NoRetraining]
    cost: RoarCost
    runs: list[RoarResult]
    notes: list[str]

    @property
    def protocol(self) -> str:
        return self.runs[0].protocol

    @property
    def complete(self) -> bool:
        """Every run says it finished and every seed of every measure is scored."""
        return all(run.complete for run in self.runs) and all(
            name in self.measures and len(self.measures[name].seeds) == len(self.seeds) for name in self.names
        )


@dataclass(frozen=True)
class CostRow:
    """One protocol's cost on one dataset, totalled over seeds and measures; nan where not recorded.

    seconds: phase (ROAR_PHASES) -> wall seconds.
    """

    dataset: str
    protocol: str
    model: str
    seeds: int
    measures: int
    trainings: int
    forward_passes: float
    backward_passes: float
    seconds: dict[str, float]


@dataclass(frozen=True)
class RoarReport:
    """groups: sorted by dataset, strategy, recursive first; cost: ROAR rows and their erasure rows."""

    groups: list[RoarGroup]
    cost: list[CostRow]
    files: list[Path]


def _step0(seed: RoarSeed) -> float:
    """The step-0 model's metric (ratio 0 of every curve), nan when step 0 has not run."""
    return next((float(c[0]) for c in seed.curves.values() if math.isfinite(c[0])), math.nan)


def _unfinished_note(run: RoarResult, seed: RoarSeed) -> str | None:
    missing = [
        f"{name} at {', '.join(f'{100 * r:.0f}' for r in ratios)}%"
        for name, ratios in seed.missing.items()
        if ratios
    ]
    return f"seed {seed.seed}: steps not run yet: {'; '.join(missing)} ({run.path})" if missing else None


def _roar_measure(name: str, signed: bool, seeds: list[RoarSeed]) -> RoarMeasure:
    return RoarMeasure(
        name=name,
        signed=signed,
        seeds=[seed.seed for seed in seeds],
        acu=Estimate.of(seed.acu[name] for seed in seeds),
        racu=Estimate.of(seed.racu[name] for seed in seeds),
        curves=np.stack([seed.curves[name] for seed in seeds]),
        racu_clipped=Estimate.of(seed.racu_clipped[name] for seed in seeds),
    )


def _columns(
    own: bool, results: Sequence[EvaluationResult], ratios: np.ndarray, drop_unconverged: bool
) -> list[NoRetraining]:
    """One no-retraining column per (dataset, strategy) of `results`, scored at `ratios` (the ROAR run's)
    where every kept run can be read there."""
    columns = []
    for group in aggregate(results, drop_unconverged=drop_unconverged).groups:
        kept = set(group.files)
        regridded = [result.at_ratios(ratios) for result in results if result.path in kept]
        scored = group
        if all(result is not None for result in regridded):
            [scored] = aggregate(regridded, drop_unconverged=False).groups
        columns.append(NoRetraining(own, group, scored, not np.array_equal(scored.ratios, ratios)))
    return columns


def _percents(ratios: np.ndarray) -> str:
    return ", ".join(f"{100 * r:.3g}%" for r in ratios)


def _dividing(steps: int) -> str:
    """The step counts whose ratios j/K lie on a grid of `steps` equal steps: "1, 2, 5 or 10" for 10."""
    counts = [str(k) for k in range(1, steps + 1) if steps % k == 0]
    return counts[0] if len(counts) == 1 else f"{', '.join(counts[:-1])} or {counts[-1]}"


def _group(runs: list[RoarResult], evaluations: Sequence[EvaluationResult]) -> RoarGroup:
    first = runs[0]
    check_consistent(runs, ("metric", "ratios"))
    holders: dict[tuple[str, int], RoarResult] = {}
    finished: dict[str, dict[int, RoarSeed]] = defaultdict(dict)
    kept: list[RoarSeed] = []
    notes = []
    for run in runs:
        if not run.complete:  # steps, or the no-retraining erasure, still to run
            notes.append(f"{run.path} is not finished: rerun its `fmm-fast roar` to finish it")
        for seed in run.seeds.values():
            for name in seed.curves:
                holder = holders.setdefault((name, seed.seed), run)
                if holder is not run:
                    raise UserError(
                        f"ROAR runs {holder.path} and {run.path} both hold seed {seed.seed} of {name} on "
                        f"{run.dataset} ({run.strategy}, {run.protocol}); pass only one of them"
                    )
            step0 = _step0(seed)
            if not converged(run.dataset, step0):
                notes.append(
                    f"seed {seed.seed} dropped: the step-0 model's {run.metric} {100 * step0:.1f} ≤ "
                    f"{100 * BABI_CONVERGENCE_THRESHOLD:.1f} did not converge ({run.path})"
                )
                continue
            kept.append(seed)
            for name in seed.curves:
                if seed.finished(name):
                    finished[name][seed.seed] = seed
            note = _unfinished_note(run, seed)
            if note:
                notes.append(note)
            if seed.erasure_path is not None and seed.erasure is None:
                notes.append(
                    f"seed {seed.seed}: its no-retraining erasure {run.path.parent / seed.erasure_path} is "
                    "not written yet"
                )
    signed = {name: sign for run in runs for name, sign in run.signed.items()}
    names = sorted(signed, key=measure_sort_key)
    own = [seed.erasure for seed in kept if seed.erasure is not None]
    beside = [result for result in evaluations if result.dataset == first.dataset]
    columns = _columns(True, own, first.ratios, drop_unconverged=False)
    columns += _columns(False, beside, first.ratios, drop_unconverged=True)
    notes += [
        f"{column.label}: its curves are not measured at every ratio of ROAR's ({_percents(first.ratios)}), "
        f"so its areas are on its own ratios ({_percents(column.scored.ratios)}) and compare with ROAR's "
        f"only roughly: `fmm-fast roar --steps {_dividing(len(column.scored.ratios) - 1)}` puts ROAR's "
        "ratios on its grid"
        for column in columns
        if column.off_roar_ratios
    ]
    return RoarGroup(
        dataset=first.dataset,
        strategy=first.strategy,
        recursive=first.recursive,
        metric=first.metric,
        ratios=first.ratios,
        majority_baseline=first.majority_baseline,
        seeds=sorted(seed.seed for seed in kept),
        names=names,
        signed=signed,
        measures={
            name: _roar_measure(name, signed[name], [by_seed[s] for s in sorted(by_seed)])
            for name in names
            if (by_seed := finished.get(name))
        },
        no_retraining=columns,
        cost=functools.reduce(operator.add, (run.cost for run in runs)),
        runs=runs,
        notes=notes,
    )


def _erasure_cost(dataset: str, column: NoRetraining) -> CostRow:
    """One no-retraining column's cost: one model per seed, the erasure's passes and seconds."""
    group = column.group
    seconds = dict.fromkeys(ROAR_PHASES, math.nan)
    seconds["total"] = float(sum(m.seconds.sum() for m in group.measures.values()))
    return CostRow(
        dataset=dataset,
        protocol="No-retraining erasure",
        model=column.label.removeprefix("No retraining: "),
        seeds=len(group.seeds),
        measures=len(group.measures),
        trainings=len(group.seeds),
        forward_passes=float(sum(m.forward_passes.sum() for m in group.measures.values())),
        backward_passes=math.nan,  # evaluate does not count them
        seconds=seconds,
    )


def _cost_rows(groups: Sequence[RoarGroup]) -> list[CostRow]:
    """Per group its ROAR row, then its no-retraining columns' rows (each erasure source once)."""
    rows: dict[tuple, CostRow] = {}
    for group in groups:
        rows[(group.dataset, group.strategy, group.recursive)] = CostRow(
            dataset=group.dataset,
            protocol=group.protocol,
            model=f"{group.strategy}, a new model at every step",
            seeds=len({seed for run in group.runs for seed in run.seeds}),
            measures=len(group.names),
            trainings=group.cost.trainings,
            forward_passes=group.cost.forward_passes,
            backward_passes=group.cost.backward_passes,
            seconds=group.cost.seconds,
        )
        for column in group.no_retraining:
            files = tuple(column.group.files)
            rows.setdefault(files, _erasure_cost(group.dataset, column))
    return list(rows.values())


def aggregate_roar(runs: Sequence[RoarResult], evaluations: Sequence[EvaluationResult]) -> RoarReport:
    """Group ROAR runs by (dataset, strategy, recursive), aggregate each over seeds, pair each with the
    no-retraining erasure of its dataset among `evaluations` (the erasure runs given beside it)."""
    by_group: dict[tuple[str, str, bool], list[RoarResult]] = defaultdict(list)
    for run in sorted(runs, key=lambda r: r.path):
        by_group[(run.dataset, run.strategy, run.recursive)].append(run)
    order = sorted(by_group, key=lambda k: (k[0], strategy_sort_key(k[1]), not k[2]))
    groups = [_group(by_group[key], evaluations) for key in order]
    return RoarReport(groups, _cost_rows(groups), files=sorted(run.path for run in runs))

"""Aggregate `fmm-fast evaluate` result files into tables, curve figures and JSON (SPEC §5).

Every `result.json` (kind "evaluate") is one seed sample of one (dataset, strategy). The report reads
the per-seed ACU/RACU, curves and timings written there and only aggregates them: mean and 95% BCa
bootstrap CI across seeds, after dropping bAbI seeds that did not converge.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fmm_fast import __version__
from fmm_fast.errors import UserError
from fmm_fast.stats import (
    BABI_CONVERGENCE_THRESHOLD,
    bootstrap_ci,
    converged,
    format_ci,
    proportion_interval,
)

RESULT_FILE = "result.json"
BASELINE_MEASURE = "rand"
# Table row order; beam-sign-B follows by B, unknown measures come last, alphabetically.
CANONICAL_MEASURES = (
    "rand",
    "grad-l1",
    "grad-l2",
    "inp-grad-sign",
    "inp-grad-abs",
    "int-grad-sign",
    "int-grad-abs",
    "loo-sign",
    "loo-abs",
)
CANONICAL_STRATEGIES = ("plain", "masked", "only-masked")
BAND_PERCENTILES = (2.5, 97.5)


def measure_sort_key(name: str) -> tuple[int, int, str]:
    """Canonical measure order: CANONICAL_MEASURES, then beam-sign-B by B, then the rest by name."""
    if name in CANONICAL_MEASURES:
        return 0, CANONICAL_MEASURES.index(name), ""
    beam = re.fullmatch(r"beam-sign-(\d+)", name)
    if beam:
        return 1, int(beam[1]), ""
    return 2, 0, name


def _strategy_sort_key(name: str) -> tuple[int, str]:
    known = name in CANONICAL_STRATEGIES
    return (CANONICAL_STRATEGIES.index(name), "") if known else (len(CANONICAL_STRATEGIES), name)


# ---------------------------------------------------------------------------------------------------
# Reading result.json files


@dataclass(frozen=True)
class MeasureRun:
    """One measure of one evaluation run. curve: (R,) float64 primary metric per masking ratio."""

    signed: bool
    acu: float
    racu: float  # nan where the file has null (flat baseline, see stats.acu_racu)
    seconds: float
    forward_passes: float
    curve: np.ndarray


@dataclass(frozen=True)
class EvaluationResult:
    """One result.json of `fmm-fast evaluate`, reduced to what the report needs.

    ratios: (R,) float64 rising from 0 to 1. measures: name -> MeasureRun, in canonical order.
    """

    path: Path
    dataset: str
    strategy: str
    split: str
    seed: int
    metric: str
    majority_baseline: float
    ratios: np.ndarray
    measures: dict[str, MeasureRun]
    n_examples: int

    @property
    def unmasked(self) -> float:
        """Primary metric at r = 0 (nothing masked, so the same on every curve)."""
        return float(next(iter(self.measures.values())).curve[0])

    @property
    def fully_masked(self) -> float:
        """Primary metric at r = 1 (every explained token masked, the same on every curve)."""
        return float(next(iter(self.measures.values())).curve[-1])


class _MalformedResult(Exception):
    """Internal: what is wrong inside one result file; load_result turns it into a UserError."""


def _field(mapping: object, key: str, where: str) -> object:
    if not isinstance(mapping, dict):
        raise _MalformedResult(f"{where or 'the file'} is not a JSON object")
    if key not in mapping:
        raise _MalformedResult(f"missing field {where + '.' if where else ''}{key}")
    return mapping[key]


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _MalformedResult(f"{where} must be a non-empty string")
    return value


def _number(value: object, where: str, nullable: bool = False) -> float:
    if value is None and nullable:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _MalformedResult(f"{where} must be a number")
    return float(value)


def _numbers(value: object, where: str) -> np.ndarray:
    if not isinstance(value, list):
        raise _MalformedResult(f"{where} must be a list of numbers")
    return np.array([_number(item, where) for item in value], dtype=np.float64)


def _parse_result(path: Path, data: object) -> EvaluationResult:
    model = _field(data, "model", "")
    metric = _text(_field(data, "metric", ""), "metric")
    seed = _field(data, "seed", "")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise _MalformedResult("seed must be an integer")
    n_examples = _field(data, "n_examples", "")
    if isinstance(n_examples, bool) or not isinstance(n_examples, int) or n_examples < 1:
        raise _MalformedResult("n_examples must be a positive integer")
    ratios = _numbers(_field(data, "ratios", ""), "ratios")
    if len(ratios) < 2 or ratios[0] != 0 or ratios[-1] != 1 or np.any(np.diff(ratios) <= 0):
        raise _MalformedResult(f"ratios must rise strictly from 0 to 1, got {ratios.tolist()}")
    curves = _field(data, "curves", "")
    measure_entries = _field(data, "measures", "")
    if not isinstance(measure_entries, dict) or not measure_entries:
        raise _MalformedResult("measures must be a non-empty object")
    measures = {}
    for name in sorted(measure_entries, key=measure_sort_key):
        entry = measure_entries[name]
        where = f"measures.{name}"
        curve_where = f"curves.{name}.{metric}"
        curve = _numbers(_field(_field(curves, name, "curves"), metric, f"curves.{name}"), curve_where)
        if len(curve) != len(ratios):
            raise _MalformedResult(f"{curve_where} has {len(curve)} values for {len(ratios)} ratios")
        signed = _field(entry, "signed", where)
        if not isinstance(signed, bool):
            raise _MalformedResult(f"{where}.signed must be true or false")
        measures[name] = MeasureRun(
            signed=signed,
            acu=_number(_field(entry, "acu", where), f"{where}.acu", nullable=True),
            racu=_number(_field(entry, "racu", where), f"{where}.racu", nullable=True),
            seconds=_number(_field(entry, "seconds", where), f"{where}.seconds"),
            forward_passes=_number(_field(entry, "forward_passes", where), f"{where}.forward_passes"),
            curve=curve,
        )
    return EvaluationResult(
        path=path,
        dataset=_text(_field(data, "dataset", ""), "dataset"),
        strategy=_text(_field(model, "strategy", "model"), "model.strategy"),
        split=_text(_field(data, "split", ""), "split"),
        seed=seed,
        metric=metric,
        majority_baseline=_number(_field(data, "majority_baseline", ""), "majority_baseline"),
        ratios=ratios,
        measures=measures,
        n_examples=n_examples,
    )


def load_result(path: Path) -> EvaluationResult | None:
    """Read one result.json; None when it is another command's result (its "kind" is not "evaluate").

    Raises UserError naming the file when it is not a well-formed evaluation result.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if _field(data, "kind", "") != "evaluate":
            return None
        return _parse_result(path, data)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, _MalformedResult) as error:
        raise UserError(
            f"malformed result file {path}: {error}; rerun `fmm-fast evaluate` for it or move it out of "
            "the report's directories"
        ) from None


def find_result_files(dirs: Sequence[Path]) -> list[Path]:
    """Every result.json under `dirs` (recursively; a result.json path itself also counts), sorted."""
    found: set[Path] = set()
    for directory in dirs:
        if not directory.exists():
            raise UserError(f"{directory} does not exist; pass directories written by `fmm-fast evaluate`")
        if directory.is_file():
            if directory.name != RESULT_FILE:
                raise UserError(f"{directory} is not a {RESULT_FILE}; pass result directories instead")
            found.add(directory)
        else:
            found.update(directory.rglob(RESULT_FILE))
    return sorted(found)


# ---------------------------------------------------------------------------------------------------
# Aggregation


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

    def to_dict(self) -> dict:
        return {
            "mean": _json_number(self.mean),
            "ci_low": _json_number(self.low),
            "ci_high": _json_number(self.high),
            "values": _json_numbers(self.values),
        }


@dataclass(frozen=True)
class MeasureReport:
    """One measure aggregated over the kept seeds that ran it.

    curves: (n, R) float64 primary metric per seed; seconds, forward_passes: (n,) float64.
    """

    name: str
    signed: bool
    seeds: list[int]
    acu: Estimate
    racu: Estimate
    curves: np.ndarray
    seconds: np.ndarray
    forward_passes: np.ndarray

    @property
    def score_name(self) -> str:
        """The score SPEC §5 reads: ACU for signed measures, RACU for unsigned ones."""
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


@dataclass(frozen=True)
class DroppedSeed:
    """A seed left out of aggregation because its model did not converge (SPEC §5)."""

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
        return sorted({g.strategy for g in self.groups}, key=_strategy_sort_key)


def _check_consistent(results: list[EvaluationResult]) -> None:
    """Seeds of one (dataset, strategy) must share split, metric and ratios to be averaged."""
    first = results[0]
    for result in results[1:]:
        for attribute, same in (
            ("split", result.split == first.split),
            ("metric", result.metric == first.metric),
            ("ratios", np.array_equal(result.ratios, first.ratios)),
        ):
            if not same:
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
    )


def aggregate(
    results: Sequence[EvaluationResult], ignored: Sequence[Path] = (), drop_unconverged: bool = True
) -> Report:
    """Group results by (dataset, strategy), drop non-converged seeds, aggregate each measure.

    ignored: result.json files of other commands, only listed in the report.
    drop_unconverged=False keeps every seed (to plot what one evaluation run produced).
    """
    by_group: dict[tuple[str, str], list[EvaluationResult]] = defaultdict(list)
    for result in sorted(results, key=lambda r: r.path):
        by_group[(result.dataset, result.strategy)].append(result)
    groups, dropped = [], []
    for (dataset, strategy), group_results in by_group.items():
        _check_consistent(group_results)
        runs_by_seed: dict[int, list[EvaluationResult]] = defaultdict(list)
        for result in group_results:
            runs_by_seed[result.seed].append(result)
        kept: dict[int, list[EvaluationResult]] = {}
        for seed in sorted(runs_by_seed):
            seed_results = runs_by_seed[seed]
            # the run on the most examples judges (a beam run on a handful must not)
            judge = max(seed_results, key=lambda r: r.n_examples)
            if not drop_unconverged or converged(dataset, judge.unmasked):
                kept[seed] = seed_results
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
        first_runs = [seed_results[0] for seed_results in kept.values()]
        groups.append(
            GroupReport(
                dataset=dataset,
                strategy=strategy,
                split=first_runs[0].split,
                metric=first_runs[0].metric,
                ratios=first_runs[0].ratios,
                majority_baseline=first_runs[0].majority_baseline,
                seeds=list(kept),
                unmasked=Estimate.of(r.unmasked for r in first_runs),
                fully_masked=Estimate.of(r.fully_masked for r in first_runs),
                measures={name: _measure_report(name, kept) for name in names},
                files=[r.path for rs in kept.values() for r in rs],
            )
        )
    groups.sort(key=lambda g: (_strategy_sort_key(g.strategy), g.dataset))
    return Report(groups, dropped, files=sorted(r.path for r in results), ignored=list(ignored))


def load_report(dirs: Sequence[Path]) -> Report:
    """Find, read and aggregate every evaluation result.json under `dirs`."""
    paths = find_result_files(dirs)
    results, ignored = [], []
    for path in paths:
        result = load_result(path)
        if result is None:
            ignored.append(path)
        else:
            results.append(result)
    if not results:
        where = ", ".join(str(d) for d in dirs)
        other = f" ({len(ignored)} result.json of other commands ignored)" if ignored else ""
        raise UserError(
            f"no evaluation result.json found under {where}{other}; run `fmm-fast evaluate` first or pass "
            "the directories it wrote to"
        )
    return aggregate(results, ignored)


# ---------------------------------------------------------------------------------------------------
# Rendering


def _json_number(value: float) -> float | None:
    """JSON has no nan or infinity: write null instead."""
    return float(value) if math.isfinite(value) else None


def _json_numbers(values: np.ndarray) -> list:
    """(...) float64 array -> nested lists with null for non-finite values."""
    if values.ndim > 1:
        return [_json_numbers(row) for row in values]
    return [_json_number(v) for v in values]


def _markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _score_table(report: Report, strategy: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the measures × datasets table of one strategy (shared by .md and .tex)."""
    groups = [g for g in report.groups if g.strategy == strategy]
    names = sorted({name for g in groups for name in g.measures}, key=measure_sort_key)
    header = ["Measure", "Score"] + [f"{g.dataset} (n={len(g.seeds)})" for g in groups]
    rows = []
    for name in names:
        measure_of = [g.measures.get(name) for g in groups]
        score_name = next(m.score_name for m in measure_of if m is not None)
        cells = []
        for group, measure in zip(groups, measure_of, strict=True):
            if measure is None:
                cells.append("")
            elif len(measure.seeds) != len(group.seeds):  # the measure ran on fewer seeds than the model
                cells.append(f"{measure.score.formatted()} [n={len(measure.seeds)}]")
            else:
                cells.append(measure.score.formatted())
        rows.append([name, score_name, *cells])
    return header, rows


TABLE_CAPTION = (
    "RACU (unsigned measures) or ACU (signed measures) ×100: mean over seeds and 95% BCa bootstrap CI "
    "as offsets from the mean"
)


def _dropped_note(report: Report) -> str:
    if not report.dropped:
        return ""
    lines = ["Dropped seeds (did not converge: bAbI unmasked metric ≤ 0.5):"]
    lines += [f"- {seed.describe()}" for seed in report.dropped]
    return "\n".join(lines)


def render_table_markdown(report: Report) -> str:
    """table.md: one measures × datasets table per strategy, then the dropped seeds."""
    parts = [f"{TABLE_CAPTION}."]
    for strategy in report.strategies():
        header, rows = _score_table(report, strategy)
        parts += [f"### Strategy: {strategy}", _markdown_table(header, rows)]
    parts.append(_dropped_note(report))
    return "\n\n".join(p for p in parts if p) + "\n"


_LATEX_SPECIAL = re.compile(r"([&%$#_{}])")


def _latex(text: str) -> str:
    escaped = _LATEX_SPECIAL.sub(r"\\\1", text)
    return escaped.replace("−", "$-$").replace("×", r"$\times$").replace("~", r"\textasciitilde{}")


def render_table_latex(report: Report) -> str:
    """table.tex: one booktabs table per strategy (needs \\usepackage{booktabs})."""
    parts = []
    for strategy in report.strategies():
        header, rows = _score_table(report, strategy)
        body = [" & ".join(_latex(cell) for cell in row) + r" \\" for row in [header, *rows]]
        parts.append(
            "\n".join(
                [
                    r"\begin{table}[t]",
                    r"\centering",
                    rf"\caption{{{_latex(f'{TABLE_CAPTION}; strategy {strategy}.')}}}",
                    r"\begin{tabular}{ll" + "r" * (len(header) - 2) + "}",
                    r"\toprule",
                    body[0],
                    r"\midrule",
                    *body[1:],
                    r"\bottomrule",
                    r"\end{tabular}",
                    r"\end{table}",
                ]
            )
        )
    return "% generated by fmm-fast report\n" + "\n\n".join(parts) + "\n"


def render_performance_markdown(report: Report) -> str:
    """performance.md: unmasked and 100%-masked primary metric vs the class-majority baseline."""
    rows = [
        [
            g.strategy,
            g.dataset,
            g.metric,
            str(len(g.seeds)),
            g.unmasked.formatted(),
            g.fully_masked.formatted(),
            f"{100 * g.majority_baseline:.1f}",
            "n/a"
            if math.isnan(g.majority_baseline)
            else "yes"
            if g.fully_masked.mean >= g.majority_baseline
            else "no",
        ]
        for g in report.groups
    ]
    header = [
        "Strategy",
        "Dataset",
        "Metric",
        "Seeds",
        "Unmasked",
        "100% masked",
        "Majority baseline",
        "100% masked ≥ baseline",
    ]
    caption = "Primary metric ×100 on the evaluated split: mean over kept seeds and 95% BCa bootstrap CI."
    return "\n\n".join([caption, _markdown_table(header, rows), _dropped_note(report)]).strip() + "\n"


def render_timing_markdown(report: Report) -> str:
    """timing.md: wall time and forward passes of each measure, mean per evaluation run."""
    rows = [
        [
            g.strategy,
            g.dataset,
            m.name,
            str(len(m.seeds)),
            f"{np.mean(m.seconds):.1f}",
            f"{np.mean(m.forward_passes):,.0f}",
        ]
        for g in report.groups
        for m in g.measures.values()
    ]
    header = ["Strategy", "Dataset", "Measure", "Runs", "Seconds per run", "Forward passes per run"]
    return _markdown_table(header, rows) + "\n"


def plot_curves(group: GroupReport, path: Path) -> None:
    """Primary metric vs masking ratio, one line per measure (rand dashed), percentile band across seeds."""
    from matplotlib.figure import Figure  # imported here: matplotlib is slow to import, only plots need it

    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.subplots()
    percent = 100 * group.ratios
    any_band = False
    for measure in group.measures.values():
        (line,) = axes.plot(
            percent,
            100 * measure.curves.mean(axis=0),
            linestyle="--" if measure.name == BASELINE_MEASURE else "-",
            marker="o",
            markersize=3,
            label=f"{measure.name} (n={len(measure.seeds)})",
        )
        band = measure.curve_band()
        if band is not None:
            any_band = True
            axes.fill_between(percent, 100 * band[0], 100 * band[1], color=line.get_color(), alpha=0.2, lw=0)
    if math.isfinite(group.majority_baseline):
        axes.axhline(100 * group.majority_baseline, color="gray", linestyle=":", label="majority baseline")
    axes.set_xlabel("masked explained tokens (%)")
    axes.set_ylabel(f"{group.metric} (×100)")
    axes.set_title(f"{group.dataset}, {group.strategy} ({group.split} split)")
    band_note = "mean over seeds; band: 2.5–97.5 percentile" if any_band else "mean over seeds"
    axes.legend(title=band_note, fontsize="small", title_fontsize="small", loc="best")
    figure.savefig(path, dpi=120)


def plot_run_curves(paths: Sequence[Path], png: Path) -> None:
    """The figure of one `fmm-fast evaluate` call: its seeds' result.json files, all seeds kept."""
    results = [result for result in (load_result(path) for path in paths) if result is not None]
    groups = aggregate(results, drop_unconverged=False).groups
    if len(groups) != 1:
        raise ValueError(f"plot_run_curves needs the results of one dataset and strategy, got {len(groups)}")
    plot_curves(groups[0], png)


def _file_stem(*parts: str) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9_.-]+", "_", part) for part in parts)


def report_to_dict(report: Report) -> dict:
    """Everything aggregated, JSON-ready (nan as null)."""

    def measure_dict(m: MeasureReport) -> dict:
        band = m.curve_band()
        return {
            "signed": m.signed,
            "reported": m.score_name.lower(),
            "seeds": m.seeds,
            "acu": m.acu.to_dict(),
            "racu": m.racu.to_dict(),
            "curve": {
                "mean": _json_numbers(m.curves.mean(axis=0)),
                "percentile_2.5": None if band is None else _json_numbers(band[0]),
                "percentile_97.5": None if band is None else _json_numbers(band[1]),
                "per_seed": _json_numbers(m.curves),
            },
            "seconds_mean": _json_number(np.mean(m.seconds)),
            "forward_passes_mean": _json_number(np.mean(m.forward_passes)),
        }

    return {
        "kind": "report",
        "fmm_fast_version": __version__,
        "files": [str(p) for p in report.files],
        "ignored_files": [str(p) for p in report.ignored],
        "dropped_seeds": [
            {
                "dataset": d.dataset,
                "strategy": d.strategy,
                "seed": d.seed,
                "metric": d.metric,
                "unmasked": _json_number(d.unmasked),
                "n_examples": d.n_examples,
                "undecided": d.undecided,
                "files": [str(p) for p in d.files],
            }
            for d in report.dropped
        ],
        "groups": [
            {
                "dataset": g.dataset,
                "strategy": g.strategy,
                "split": g.split,
                "metric": g.metric,
                "ratios": _json_numbers(g.ratios),
                "majority_baseline": _json_number(g.majority_baseline),
                "seeds": g.seeds,
                "unmasked": g.unmasked.to_dict(),
                "fully_masked": g.fully_masked.to_dict(),
                "measures": {name: measure_dict(m) for name, m in g.measures.items()},
                "files": [str(p) for p in g.files],
            }
            for g in report.groups
        ],
    }


# ---------------------------------------------------------------------------------------------------
# Writing


def _output_dir(out: Path) -> Path:
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; pass a directory for the report")
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_tables(report: Report, out: Path) -> list[Path]:
    """Write table.md, table.tex, performance.md and timing.md into `out`; returns their paths."""
    out = _output_dir(out)
    written = []
    for name, render in (
        ("table.md", render_table_markdown),
        ("table.tex", render_table_latex),
        ("performance.md", render_performance_markdown),
        ("timing.md", render_timing_markdown),
    ):
        path = out / name
        path.write_text(render(report), encoding="utf-8")
        written.append(path)
    return written


def write_figures(report: Report, out: Path) -> list[Path]:
    """Write curves-<dataset>-<strategy>.png per group into `out`; returns their paths."""
    out = _output_dir(out)
    written = []
    for group in report.groups:
        path = out / f"curves-{_file_stem(group.dataset, group.strategy)}.png"
        plot_curves(group, path)
        written.append(path)
    return written


def write_report(dirs: Sequence[Path], out: Path) -> Report:
    """The whole `fmm-fast report`: tables, figures and report.json for every result under `dirs`."""
    report = load_report(dirs)
    write_tables(report, out)
    write_figures(report, out)
    (out / "report.json").write_text(
        json.dumps(report_to_dict(report), indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )
    return report


def export_script_main(
    argv: Sequence[str] | None, writer: Callable[[Report, Path], list[Path]], description: str
) -> int:
    """The shared body of export/make_tables.py and export/make_figures.py: `--results DIR... --out DIR`.

    Runs `writer` (write_tables or write_figures) on the aggregated results, prints the written paths;
    returns the exit code (2 with a one-line error on a user mistake).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--results", type=Path, nargs="+", required=True, help="evaluation result directories"
    )
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    args = parser.parse_args(argv)
    try:
        written = writer(load_report(args.results), args.out)
    except UserError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    print("\n".join(str(path) for path in written))
    return 0

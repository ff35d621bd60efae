"""The report's figures as PNG: erasure curves per (dataset, strategy), ROAR against no-retraining
erasure per measure, and MaSF p-values per ratio.

matplotlib is imported inside the functions: it is slow to import and only plotting needs it. Each draws a
bare Figure, never pyplot, so the caller's matplotlib backend is left alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fmm_fast.core.writing import replacing
from fmm_fast.protocols.masf.statistic import IN_DISTRIBUTION_LEVEL
from fmm_fast.report.aggregate import CurveScores, GroupReport, aggregate, seeds_text
from fmm_fast.report.load import load_result
from fmm_fast.report.order import BASELINE_MEASURE
from fmm_fast.report.roar import RoarGroup

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def plot_curves(group: GroupReport, path: Path) -> None:
    """The PNG of curves_figure(group)."""
    _save(curves_figure(group), path, dpi=120)


def curves_figure(group: GroupReport) -> Figure:
    """Primary metric vs masking ratio, one line per measure (rand dashed), percentile band across seeds."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.subplots()
    colors = curve_colors(len(group.measures))
    bands = [
        _draw_curve(axes, group.ratios, measure, f"{measure.name} ({seeds_text(len(measure.seeds))})", color)
        for measure, color in zip(group.measures.values(), colors, strict=True)
    ]
    _finish(axes, group.metric, group.majority_baseline, any(bands))
    axes.set_title(f"{group.label}, {group.strategy} ({group.split} split, {group.n_examples} examples)")
    return figure


def curve_colors(count: int) -> list[tuple[float, float, float, float]]:
    """`count` distinct colours, one per curve: matplotlib's ten (tab10) while they suffice, then tab20's
    twenty, then evenly spaced hues, so no two measures share a colour whatever their number."""
    from matplotlib import colormaps

    if count <= 10:
        return [colormaps["tab10"](i) for i in range(count)]
    if count <= 20:
        return [colormaps["tab20"](i) for i in range(count)]
    return [colormaps["hsv"](i / count) for i in range(count)]


def _draw_curve(
    axes: Axes, ratios: np.ndarray, scores: CurveScores, label: str, color: str | tuple | None = None
) -> bool:
    """The mean curve over seeds (rand dashed) and its percentile band; True when a band was drawn.

    ratios: (R,) float64 fractions, drawn as percent."""
    percent = 100 * ratios
    (line,) = axes.plot(
        percent,
        100 * scores.curves.mean(axis=0),
        linestyle="--" if scores.name == BASELINE_MEASURE else "-",
        marker="o",
        markersize=3,
        color=color,
        label=label,
    )
    band = scores.curve_band()
    if band is not None:
        axes.fill_between(percent, 100 * band[0], 100 * band[1], color=line.get_color(), alpha=0.2, lw=0)
    return band is not None


def _finish(axes: Axes, metric: str, majority_baseline: float, any_band: bool) -> None:
    """Majority-baseline line, axis labels and the legend, whose title says what the bands are."""
    if math.isfinite(majority_baseline):
        axes.axhline(100 * majority_baseline, color="gray", linestyle=":", label="majority baseline")
    axes.set_xlabel("masked explained tokens (%)")
    axes.set_ylabel(f"{metric} (×100)")
    band_note = "mean over seeds; band: 2.5–97.5 percentile" if any_band else "mean over seeds"
    axes.legend(title=band_note, fontsize="small", title_fontsize="small", loc="best")


def plot_roar_measure(group: RoarGroup, name: str, path: Path) -> None:
    """The PNG of roar_measure_figure(group, name)."""
    _save(roar_measure_figure(group, name), path, dpi=120)


def roar_measure_figure(group: RoarGroup, name: str) -> Figure:
    """One measure's ROAR curve (a model retrained at every ratio) and its no-retraining erasure curves,
    each with its own `rand` (dashed, same colour), percentile band across seeds when there are several."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.subplots()
    sources = [(f"{group.protocol}, {group.strategy} retrained", group.ratios, group.measures)]
    sources += [
        (c.label.removeprefix("No retraining: "), c.group.ratios, c.group.measures)
        for c in group.no_retraining
    ]
    bands = []
    for index, (source, ratios, measures) in enumerate(sources):
        color = f"C{index}"
        for shown in dict.fromkeys((name, BASELINE_MEASURE)):
            if shown in measures:
                label = f"{shown}: {source} ({seeds_text(len(measures[shown].seeds))})"
                bands.append(_draw_curve(axes, ratios, measures[shown], label, color))
    _finish(axes, group.metric, group.majority_baseline, any(bands))
    axes.set_title(f"{group.dataset}, {name}: retrained at every step vs no retraining")
    return figure


def plot_run_curves(paths: Sequence[Path], png: Path) -> None:
    """The figure of one `fmm-fast evaluate` call: its seeds' result.json files, all seeds kept."""
    results = [result for result in (load_result(path) for path in paths) if result is not None]
    groups = aggregate(results, drop_unconverged=False).groups
    if len(groups) != 1:
        raise ValueError(f"plot_run_curves needs the results of one dataset and strategy, got {len(groups)}")
    plot_curves(groups[0], png)


def plot_p_values(curves: dict[str, tuple[list[float], list[float]]], path: str | PathLike) -> None:
    """The PNG of p_values_figure(curves)."""
    _save(p_values_figure(curves), Path(path))


def p_values_figure(curves: dict[str, tuple[list[float], list[float]]]) -> Figure:
    """Simes p-value against masking ratio, one line per label, log y axis.

    curves: label -> (masking ratios, Simes p-values). A p-value of 0 cannot sit on a log axis; it is
    drawn at a floor a decade below the smallest positive value or 0.05, whichever is lower (the axis
    label says so).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not curves:
        raise ValueError("plot_p_values needs at least one curve")
    for label, (ratios, p_values) in curves.items():
        if len(ratios) != len(p_values):
            raise ValueError(f"curve {label!r}: {len(ratios)} ratios but {len(p_values)} p-values")
    all_p = np.concatenate([np.asarray(p, dtype=np.float64) for _, p in curves.values()])
    positive = all_p[all_p > 0]
    floor = min(float(positive.min()) if positive.size else IN_DISTRIBUTION_LEVEL, IN_DISTRIBUTION_LEVEL) / 10

    figure = Figure(figsize=(6, 4), dpi=120)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for label, (ratios, p_values) in curves.items():
        axes.plot(ratios, np.maximum(np.asarray(p_values, dtype=np.float64), floor), marker="o", label=label)
    axes.axhline(IN_DISTRIBUTION_LEVEL, color="gray", linestyle="--", linewidth=1, label="0.05")
    axes.set_yscale("log")
    axes.set_xlabel("masking ratio")
    zero_note = f" (0 drawn at {floor:.0e})" if (all_p <= 0).any() else ""
    axes.set_ylabel(f"MaSF Simes p-value{zero_note}")
    axes.legend()
    figure.tight_layout()
    return figure


def _save(figure: Figure, path: Path, dpi: int | None = None) -> None:
    """Write `figure` as the PNG `path` through core.writing (atomic, never through a link)."""
    with replacing(path) as staged:
        figure.savefig(staged, format="png", dpi=dpi)


def plot_check(record: dict, path: str | PathLike) -> None:
    """The PNG of check_figure(record)."""
    _save(check_figure(record), Path(path))


def check_figure(record: dict) -> Figure:
    """The figure of one `fmm-fast check` record: its primary metric against the masking ratio with the
    majority baseline (top), and the MaSF Simes p-value per ratio with the 0.05 line (bottom, log axis)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    percent = [100 * point["ratio"] for point in record["points"]]
    metric = record["metric"]
    figure = Figure(figsize=(6, 6), dpi=120, layout="constrained")
    FigureCanvasAgg(figure)
    top, bottom = figure.subplots(2, 1, sharex=True)
    values = [100 * p["metrics"][metric] for p in record["points"]]
    top.plot(percent, values, marker="o", label="rand masking")
    top.axhline(100 * record["majority_baseline"], color="gray", linestyle=":", label="majority baseline")
    top.set_ylabel(f"{metric} (×100)")
    top.legend(fontsize="small")
    top.set_title(f"{record['dataset']}: {record['verdict']['text'].split(':')[0]}", fontsize="small")
    simes = np.array([p["simes"] for p in record["points"]], dtype=np.float64)
    floor = min(float(simes[simes > 0].min()) if (simes > 0).any() else 1.0, IN_DISTRIBUTION_LEVEL) / 10
    bottom.plot(percent, np.maximum(simes, floor), marker="o", color="C1", label="MaSF Simes p (split)")
    bottom.axhline(IN_DISTRIBUTION_LEVEL, color="gray", linestyle="--", linewidth=1, label="0.05")
    bottom.set_yscale("log")
    bottom.set_xlabel("masked explained tokens (%)")
    bottom.set_ylabel("MaSF p-value" + (f" (0 drawn at {floor:.0e})" if (simes <= 0).any() else ""))
    bottom.legend(fontsize="small")
    return figure

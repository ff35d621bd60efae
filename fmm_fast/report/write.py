"""Writing the report: tables, figures and report.json into one output directory."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fmm_fast import __version__
from fmm_fast.core.errors import UserError
from fmm_fast.core.records import write_record
from fmm_fast.report.aggregate import Estimate, MeasureReport, Report, load_report
from fmm_fast.report.plots import plot_curves
from fmm_fast.report.tables import (
    render_performance_markdown,
    render_table_latex,
    render_table_markdown,
    render_timing_markdown,
)

REPORT_FILE = "report.json"


def _json_number(value: float) -> float | None:
    """JSON has no nan or infinity: write null instead."""
    return float(value) if math.isfinite(value) else None


def _json_numbers(values: np.ndarray) -> list:
    """(...) float64 array -> nested lists with null for non-finite values."""
    if values.ndim > 1:
        return [_json_numbers(row) for row in values]
    return [_json_number(v) for v in values]


def _estimate_dict(estimate: Estimate) -> dict:
    return {
        "mean": _json_number(estimate.mean),
        "ci_low": _json_number(estimate.low),
        "ci_high": _json_number(estimate.high),
        "values": _json_numbers(estimate.values),
    }


def _measure_dict(measure: MeasureReport) -> dict:
    band = measure.curve_band()
    return {
        "signed": measure.signed,
        "reported": measure.score_name.lower(),
        "seeds": measure.seeds,
        "acu": _estimate_dict(measure.acu),
        "racu": _estimate_dict(measure.racu),
        "racu_undefined": measure.racu_undefined,
        "curve": {
            "mean": _json_numbers(measure.curves.mean(axis=0)),
            "percentile_2.5": None if band is None else _json_numbers(band[0]),
            "percentile_97.5": None if band is None else _json_numbers(band[1]),
            "per_seed": _json_numbers(measure.curves),
        },
        "seconds_mean": _json_number(np.mean(measure.seconds)),
        "forward_passes_mean": _json_number(np.mean(measure.forward_passes)),
    }


def report_to_dict(report: Report) -> dict:
    """Everything aggregated, JSON-ready (nan as null)."""
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
                "unmasked": _estimate_dict(g.unmasked),
                "fully_masked": _estimate_dict(g.fully_masked),
                "measures": {name: _measure_dict(m) for name, m in g.measures.items()},
                "files": [str(p) for p in g.files],
            }
            for g in report.groups
        ],
    }


def _output_dir(out: Path) -> Path:
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; pass a directory for the report")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _file_stem(*parts: str) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9_.-]+", "_", part) for part in parts)


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
    """The whole `fmm-fast report`: tables, figures and report.json for every result under `dirs`.

    report.json is written last and atomically, so its presence means the report is complete.
    """
    report = load_report(dirs)
    write_tables(report, out)
    write_figures(report, out)
    write_record(out / REPORT_FILE, report_to_dict(report))
    return report

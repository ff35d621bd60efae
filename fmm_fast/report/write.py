"""Writing the report: tables, figures, report.json and the peer-metrics table into one output directory,
only once every input has been read."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from fmm_fast import __version__
from fmm_fast.core.outputs import claim_directory, finish_run
from fmm_fast.core.records import ensure_writable, write_record
from fmm_fast.core.writing import write_text
from fmm_fast.data.units import DEFAULT_UNIT
from fmm_fast.measures.path_names import path_name
from fmm_fast.report.aggregate import CurveScores, Estimate, GroupReport, Report, aggregate
from fmm_fast.report.check import CHECK_TABLE, load_checks, render_check_markdown
from fmm_fast.report.load import read_results
from fmm_fast.report.masf import MASF_FIGURE, MASF_TABLE, load_masf_curves, write_masf
from fmm_fast.report.order import BASELINE_MEASURE
from fmm_fast.report.peer import PEER_TABLE, has_recursive_results, load_peer_records, render_peer_markdown
from fmm_fast.report.plots import plot_curves, plot_roar_measure
from fmm_fast.report.roar import RoarGroup, RoarReport, aggregate_roar
from fmm_fast.report.roar_tables import render_cost_markdown, render_roar_markdown
from fmm_fast.report.tables import (
    render_performance_markdown,
    render_table_latex,
    render_table_markdown,
    render_timing_markdown,
)

REPORT_FILE = "report.json"
ROAR_TABLE = "roar.md"
COST_TABLE = "roar-cost.md"


def _json_number(value: float) -> float:
    """A plain float; write_record writes a non-finite one as null and names it in "non_finite"."""
    return float(value)


def _json_numbers(values: np.ndarray) -> list:
    """(...) float64 array -> nested lists of floats (non-finite ones as `_json_number` says)."""
    return np.asarray(values, dtype=np.float64).tolist()


def _estimate_dict(estimate: Estimate) -> dict:
    return {
        "mean": _json_number(estimate.mean),
        "ci_low": _json_number(estimate.low),
        "ci_high": _json_number(estimate.high),
        "values": _json_numbers(estimate.values),
    }


def _scores_dict(measure: CurveScores) -> dict:
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
    }


def _measures_dict(group: GroupReport) -> dict:
    return {
        name: {
            **_scores_dict(measure),
            "seconds_mean": _json_number(np.mean(measure.seconds)),
            "forward_passes_mean": _json_number(np.mean(measure.forward_passes)),
        }
        for name, measure in group.measures.items()
    }


def report_to_dict(report: Report) -> dict:
    """Everything aggregated, for write_record (it writes nan as null and names it in "non_finite")."""
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
                "unit": g.unit,
                "split": g.split,
                "metric": g.metric,
                "variant": g.variant,
                "n_examples": g.n_examples,
                "ratios": _json_numbers(g.ratios),
                "majority_baseline": _json_number(g.majority_baseline),
                "seeds": g.seeds,
                "unmasked": _estimate_dict(g.unmasked),
                "fully_masked": _estimate_dict(g.fully_masked),
                "measures": _measures_dict(g),
                "files": [str(p) for p in g.files],
                "machines": g.machines,
            }
            for g in report.groups
        ],
    }


def _roar_group_dict(group: RoarGroup) -> dict:
    return {
        "dataset": group.dataset,
        "protocol": group.protocol,
        "strategy": group.strategy,
        "recursive": group.recursive,
        "complete": group.complete,
        "metric": group.metric,
        "ratios": _json_numbers(group.ratios),
        "majority_baseline": _json_number(group.majority_baseline),
        "seeds": group.seeds,
        "measures": {
            name: {**_scores_dict(m), "racu_clipped": _estimate_dict(m.racu_clipped)}
            for name, m in group.measures.items()
        },
        "not_finished": [name for name in group.names if name not in group.measures],
        "no_retraining": [
            {
                "label": column.label,
                "own_step0_model": column.own,
                "strategy": column.group.strategy,
                "split": column.group.split,
                "seeds": column.group.seeds,
                "ratios": _json_numbers(column.scored.ratios),
                "measures": _measures_dict(column.scored),
                "own_ratios": _json_numbers(column.group.ratios),
                "measures_at_own_ratios": _measures_dict(column.group),
                "files": [str(p) for p in column.group.files],
            }
            for column in group.no_retraining
        ],
        "notes": group.notes,
        "files": [str(run.path) for run in group.runs],
    }


def roar_to_dict(roar: RoarReport) -> dict:
    """The ROAR section of report.json: its groups and the cost rows (nan: not recorded)."""
    return {
        "roar": [_roar_group_dict(group) for group in roar.groups],
        "cost": [asdict(row) for row in roar.cost],
    }


STEM_CHARACTERS = 120  # a figure's name stays far below the file systems' 255 bytes


def _file_stem(*parts: str) -> str:
    """The parts as a file name's stem; a long one is cut and told apart by a hash of the parts."""
    stem = "-".join(re.sub(r"[^A-Za-z0-9_.@-]+", "_", part) for part in parts)
    if len(stem) <= STEM_CHARACTERS:
        return stem
    return f"{stem[:STEM_CHARACTERS]}-{hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:12]}"


TABLES = {
    "table.md": render_table_markdown,
    "table.tex": render_table_latex,
    "performance.md": render_performance_markdown,
    "timing.md": render_timing_markdown,
}


def figure_name(group: GroupReport) -> str:
    units = () if group.unit == DEFAULT_UNIT else (group.unit,)  # token units: the names of before units
    kept_apart = [group.variant] if group.variant else []  # one of several groups of its (dataset, strategy)
    return f"curves-{_file_stem(group.dataset, group.strategy, *units, *kept_apart)}.png"


def roar_figures(roar: RoarReport) -> list[tuple[RoarGroup, str, str]]:
    """(group, measure, file name) of each ROAR figure: one per measure other than rand (which every
    figure shows)."""
    figures = []
    for group in roar.groups:
        mode = "recursive" if group.recursive else "non-recursive"
        for name in group.names:
            if name != BASELINE_MEASURE:
                stem = _file_stem(group.dataset, group.strategy, mode, path_name(name))
                figures.append((group, name, f"roar-{stem}.png"))
    return figures


def report_fields(dirs: Sequence[Path]) -> dict[str, list[str]]:
    """The fingerprint fields of a report's output directory: its input directories, resolved and sorted
    (`fmm-fast report` and the export scripts claim theirs with them)."""
    return {"inputs": sorted(str(Path(d).resolve()) for d in dirs)}


def table_names(report: Report) -> list[str]:
    """The entries `write_tables` writes (the same for every report)."""
    return list(TABLES)


def figure_names(report: Report) -> list[str]:
    """The entries `write_figures` writes: one per (dataset, strategy) group of `report`."""
    return [figure_name(group) for group in report.groups]


def write_tables(report: Report, out: Path) -> list[Path]:
    """Write table.md, table.tex, performance.md and timing.md into `out`; returns their paths."""
    written = [ensure_writable(out) / name for name in TABLES]
    for path, render in zip(written, TABLES.values(), strict=True):
        write_text(path, render(report))
    return written


def write_figures(report: Report, out: Path) -> list[Path]:
    """Write curves-<dataset>-<strategy>.png per group into `out`; returns their paths."""
    written = [ensure_writable(out) / name for name in figure_names(report)]
    for path, group in zip(written, report.groups, strict=True):
        plot_curves(group, path)
    return written


def write_roar(roar: RoarReport, out: Path) -> list[Path]:
    """Write roar.md, roar-cost.md and roar-<dataset>-<strategy>-<mode>-<measure>.png per measure other
    than rand (which every figure shows) into `out`; returns their paths."""
    written = [ensure_writable(out) / ROAR_TABLE, out / COST_TABLE]
    write_text(written[0], render_roar_markdown(roar))
    write_text(written[1], render_cost_markdown(roar))
    for group, name, file_name in roar_figures(roar):
        plot_roar_measure(group, name, out / file_name)
        written.append(out / file_name)
    return written


@dataclass
class Written:
    """What `write_report` wrote: the erasure report and the ROAR report (None when `dirs` hold only
    peer-metrics, MaSF or check results), the peer-metrics, MaSF and check tables (None when they hold
    none)."""

    report: Report | None
    roar: RoarReport | None
    peer_table: str | None
    masf_table: str | None
    check_table: str | None = None


def write_report(
    dirs: Sequence[Path], out: Path, overwrite: bool = False, also: Sequence[str] = ()
) -> Written:
    """The whole `fmm-fast report`: tables, figures and report.json for every result under `dirs` (the
    erasure part when there are evaluate results, the ROAR part when there are ROAR runs), peer-metrics.md
    for the `--protocol aopc` ones, masf.md / masf.png for the `fmm-fast masf` ones and check.md for the
    `fmm-fast check` ones.

    Every input is read and checked before anything is written (a bad input leaves `out` as it was);
    then `out` is claimed as a report of these inputs (fmm_fast.core.outputs: a new directory, or one
    holding a report of the same inputs, or with --overwrite an earlier report, never another command's
    output), listing what it writes and `also` (files the caller writes there next, e.g. report.html).
    report.json is written last and atomically, so its presence means the report is complete.
    """
    peer_records = load_peer_records(dirs)
    peer_table = render_peer_markdown(peer_records) if peer_records else None
    masf_curves = load_masf_curves(dirs)
    checks = load_checks(dirs)
    check_table = render_check_markdown(checks) if checks else None
    report = roar = None
    erasure = False  # whether there are evaluate results (not only ROAR runs)
    if has_recursive_results(dirs) or (not peer_records and not masf_curves and not checks):
        results = read_results(dirs)
        erasure = bool(results.evaluations)
        shown = {Path(record["path"]) for record in peer_records}  # peer.md shows them: not ignored
        report = aggregate(results.evaluations, [p for p in results.ignored if p not in shown])
        roar = aggregate_roar(results.roar, results.evaluations)
    files = [PEER_TABLE] if peer_table is not None else []
    if masf_curves:
        files += [MASF_TABLE, MASF_FIGURE]
    if check_table is not None:
        files.append(CHECK_TABLE)
    if report is not None and erasure:
        files += [*table_names(report), *figure_names(report)]
    if roar is not None and roar.groups:
        files += [ROAR_TABLE, COST_TABLE, *(name for _, _, name in roar_figures(roar))]
    if report is not None:
        files.append(REPORT_FILE)
    claim_directory(out, "report", report_fields(dirs), overwrite, files=[*files, *also])
    if peer_table is not None:
        write_text(out / PEER_TABLE, peer_table)
    masf_table = write_masf(masf_curves, out) if masf_curves else None
    if check_table is not None:
        write_text(out / CHECK_TABLE, check_table)
    if report is not None and roar is not None:
        if erasure:
            write_tables(report, out)
            write_figures(report, out)
        if roar.groups:
            write_roar(roar, out)
        write_record(out / REPORT_FILE, {**report_to_dict(report), **roar_to_dict(roar)})
    finish_run(out)
    return Written(report, roar, peer_table, masf_table, check_table)

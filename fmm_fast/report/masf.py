"""The report's MaSF section: the verdicts of `fmm-fast masf` runs (masf.json) as a table and one plot.

Per model (and calibration) one row: the Simes p-value at each masking ratio and whether the masked inputs
are in distribution (Simes p above 0.05).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fmm_fast.core.reading import read_checked
from fmm_fast.core.writing import write_text
from fmm_fast.protocols.masf.statistic import IN_DISTRIBUTION_LEVEL
from fmm_fast.report.identity import count_once, run_identity
from fmm_fast.report.markdown_text import markdown
from fmm_fast.report.plots import plot_p_values
from fmm_fast.report.tables import markdown_table

MASF_FILE = "masf.json"
MASF_TABLE = "masf.md"
MASF_FIGURE = "masf.png"


def find_masf_files(dirs: Sequence[Path]) -> list[Path]:
    """Every masf.json under `dirs` (a masf.json path itself also counts), sorted."""
    found = {d for d in dirs if d.is_file() and d.name == MASF_FILE}
    found.update(p for d in dirs if d.is_dir() for p in d.rglob(MASF_FILE))
    return sorted(found)


# What the report reads of a masf.json: per model, the verdict at each ratio and its calibration.
MASF_RECORD = {
    "models": {
        "*": {
            "per_ratio": [{"ratio": float, "simes": float, "in_distribution": bool}],
            "calibration?": {"method?": str, "p_value_floor?": (float, None)},
        }
    }
}


def load_masf_curves(dirs: Sequence[Path]) -> dict[str, dict]:
    """label -> {"per_ratio": per-ratio summaries ({"ratio", "simes", "in_distribution", ...}),
    "calibration": its method and p-value floor} of every model of every masf.json under `dirs` (each
    run once: report.identity); labels name the run's folder when there are several runs. UserError naming
    a file that is damaged or holds a field of the wrong type."""
    read = []
    for path in find_masf_files(dirs):
        models = read_checked(path, MASF_RECORD, "rerun `fmm-fast masf` for it")["models"]
        runs = {
            label: {"per_ratio": run["per_ratio"], "calibration": run.get("calibration", {})}
            for label, run in models.items()
        }
        read.append((path, runs))
    read = count_once(read, lambda item: run_identity(item[0], None, item[1]), lambda item: item[0])
    files = [path for path, _ in read]
    curves = {}
    for path, runs in read:
        for label, run in runs.items():
            curves[f"{path.parent.name}: {label}" if len(files) > 1 else label] = run
    return curves


def _calibration(calibration: dict) -> str:
    floor = calibration.get("p_value_floor")
    return " ".join(
        [calibration.get("method", ""), "" if floor is None else f"(p-value floor {floor:.2g})"]
    ).strip()


def render_masf_markdown(curves: dict[str, dict]) -> str:
    """One row per model: its calibration and the Simes p-value at each masking ratio, ✓ in distribution,
    ✗ out of it; a note for each calibration that cannot give a p-value below the test's level."""
    ratios = sorted({entry["ratio"] for run in curves.values() for entry in run["per_ratio"]})
    rows, saturated = [], []
    for label, run in curves.items():
        by_ratio = {entry["ratio"]: entry for entry in run["per_ratio"]}
        cells = [
            f"{by_ratio[r]['simes']:.2g} {'✓' if by_ratio[r]['in_distribution'] else '✗'}"
            if r in by_ratio
            else ""
            for r in ratios
        ]
        rows.append([label, _calibration(run["calibration"]), *cells])
        floor = run["calibration"].get("p_value_floor")
        if floor is not None and floor > IN_DISTRIBUTION_LEVEL:
            saturated.append(
                markdown(
                    "- {label}: the calibration saturates, no p-value can fall below {floor:.2g}, so ✓ says "
                    "nothing here; calibrate on a larger validation split",
                    label=label,
                    floor=floor,
                )
            )
    caption = (
        "MaSF Simes p-value per masking ratio: ✓ masked inputs in distribution "
        f"(p > {IN_DISTRIBUTION_LEVEL}), ✗ out of distribution."
    )
    table = markdown_table(["Model", "Calibration", *(f"r = {r:.1f}" for r in ratios)], rows)
    return "\n\n".join([caption, table, *(["\n".join(saturated)] if saturated else [])]) + "\n"


def write_masf(curves: dict[str, dict], out: Path) -> str:
    """Write OUT/masf.md and OUT/masf.png of `curves` (load_masf_curves'); returns the table."""
    text = render_masf_markdown(curves)
    write_text(out / MASF_TABLE, text)
    plot_p_values(
        {
            label: ([e["ratio"] for e in c["per_ratio"]], [e["simes"] for e in c["per_ratio"]])
            for label, c in curves.items()
        },
        out / MASF_FIGURE,
    )
    return text

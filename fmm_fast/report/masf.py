"""The report's MaSF section: the verdicts of `fmm-fast masf` runs (masf.json) as a table and one plot.

Per model (and calibration) one row: the Simes p-value at each masking ratio and whether the masked inputs
are in distribution (Simes p above 0.05).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fmm_fast.core.errors import UserError
from fmm_fast.core.records import read_record
from fmm_fast.protocols.masf.statistic import IN_DISTRIBUTION_LEVEL
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


def load_masf_curves(dirs: Sequence[Path]) -> dict[str, list[dict]]:
    """label -> per-ratio summaries ({"ratio", "simes", "in_distribution", ...}) of every model of every
    masf.json under `dirs`; labels name the run's folder when there are several runs."""
    files = find_masf_files(dirs)
    curves = {}
    for path in files:
        try:
            models = read_record(path)["models"]
            runs = {label: result["per_ratio"] for label, result in models.items()}
        except (OSError, ValueError, LookupError, TypeError, AttributeError) as error:
            raise UserError(f"malformed MaSF result {path} ({error}); rerun `fmm-fast masf` for it") from None
        for label, per_ratio in runs.items():
            curves[f"{path.parent.name}: {label}" if len(files) > 1 else label] = per_ratio
    return curves


def render_masf_markdown(curves: dict[str, list[dict]]) -> str:
    """One row per model: the Simes p-value at each masking ratio, ✓ in distribution, ✗ out of it."""
    ratios = sorted({entry["ratio"] for per_ratio in curves.values() for entry in per_ratio})
    rows = []
    for label, per_ratio in curves.items():
        by_ratio = {entry["ratio"]: entry for entry in per_ratio}
        cells = [
            f"{by_ratio[r]['simes']:.2g} {'✓' if by_ratio[r]['in_distribution'] else '✗'}"
            if r in by_ratio
            else ""
            for r in ratios
        ]
        rows.append([label, *cells])
    caption = (
        "MaSF Simes p-value per masking ratio: ✓ masked inputs in distribution "
        f"(p > {IN_DISTRIBUTION_LEVEL}), ✗ out of distribution."
    )
    return caption + "\n\n" + markdown_table(["Model", *(f"r = {r:.1f}" for r in ratios)], rows) + "\n"


def write_masf_report(dirs: Sequence[Path], out: Path) -> str | None:
    """Write OUT/masf.md and OUT/masf.png when `dirs` hold MaSF results; returns the table (None: none)."""
    curves = load_masf_curves(dirs)
    if not curves:
        return None
    text = render_masf_markdown(curves)
    out.mkdir(parents=True, exist_ok=True)
    (out / MASF_TABLE).write_text(text, encoding="utf-8")
    plot_p_values(
        {label: ([e["ratio"] for e in c], [e["simes"] for e in c]) for label, c in curves.items()},
        out / MASF_FIGURE,
    )
    return text

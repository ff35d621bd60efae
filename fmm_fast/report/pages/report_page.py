"""`fmm-fast report --html`: one self-contained page to share, REPORT_DIR/report.html.

It holds whatever this report run wrote: every Markdown table (the faithfulness table, peer metrics, MaSF
verdicts, performance, timing and any other the report writes) as HTML and every PNG figure inlined as a
data URI; then the run settings and versions of each result file, and, given `fmm-fast explain` output,
a section per measure with its first few examples. Nothing on the page is fetched.
"""

from __future__ import annotations

import base64
import html
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from fmm_fast import __version__
from fmm_fast.api import Explanation
from fmm_fast.core.records import read_record
from fmm_fast.core.writing import write_text
from fmm_fast.data.local import display_name
from fmm_fast.report.load import find_result_files
from fmm_fast.report.masf import MASF_TABLE, find_masf_files
from fmm_fast.report.pages.document import document, view_controls
from fmm_fast.report.pages.examples import example_section, group_examples, measure_scales
from fmm_fast.report.pages.markdown import inline, markdown_html
from fmm_fast.report.pages.scale import legend
from fmm_fast.report.peer import PEER_TABLE
from fmm_fast.report.write import COST_TABLE, ROAR_TABLE

REPORT_PAGE = "report.html"
EXAMPLES_PER_MEASURE = 3
# Known tables first, in reading order, under these headings; any other table follows under its file name.
TABLE_TITLES = {
    "table.md": "Faithfulness: RACU and ACU",
    PEER_TABLE: "Peer metrics",
    MASF_TABLE: "MaSF: are masked inputs in distribution?",
    "performance.md": "Model performance",
    "timing.md": "Timing",
    ROAR_TABLE: "ROAR beside erasure without retraining",
    COST_TABLE: "ROAR and erasure: cost",
}


def written_files(out: Path, since_ns: int) -> list[Path]:
    """The files of `out` written since `since_ns` (time.time_ns()): this report run's, not a stale
    earlier run's that happen to share the folder."""
    return sorted(p for p in out.iterdir() if p.is_file() and p.stat().st_mtime_ns >= since_ns)


def _table_order(path: Path) -> tuple[int, str]:
    names = list(TABLE_TITLES)
    return (names.index(path.name), "") if path.name in TABLE_TITLES else (len(names), path.name)


def _tables(files: list[Path]) -> list[tuple[str, str]]:
    tables = sorted((p for p in files if p.suffix == ".md"), key=_table_order)
    return [
        (TABLE_TITLES.get(p.name, p.stem.replace("-", " ").capitalize()), markdown_html(p.read_text("utf-8")))
        for p in tables
    ]


def _figures(files: list[Path]) -> str:
    figures = []
    for path in (p for p in files if p.suffix == ".png"):
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        figures.append(
            f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(path.stem)}">'
            f"<figcaption>{html.escape(path.name)}</figcaption></figure>"
        )
    return "".join(figures)


def _shown_path(path: Path, dirs: Sequence[Path]) -> str:
    """A result file's path from the folder given to the report (its name included), not from /."""
    for directory in dirs:
        if directory.is_dir() and path.is_relative_to(directory):
            return str(path.relative_to(directory.parent))
    return path.name


def _runs(dirs: Sequence[Path]) -> str:
    """Each result file's kind, dataset, model strategy, seed and size, its settings, and the versions."""
    rows, details = [], []
    versions: dict[str, set[str]] = defaultdict(set)
    for path in sorted({*find_result_files(dirs), *find_masf_files(dirs)}):
        record = read_record(path)
        shown = _shown_path(path, dirs)
        arguments = record.get("arguments", {})
        dataset = record.get("dataset") or arguments.get("data", {}).get("dataset", "")
        model = record.get("model") if isinstance(record.get("model"), dict) else {}
        cells = [
            shown,
            record.get("kind", ""),
            display_name(str(dataset)),
            model.get("strategy", ""),
            record.get("seed", arguments.get("seed", "")),
            record.get("n_examples", ""),
            record.get("fmm_fast_version", ""),
        ]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
        settings = json.dumps(arguments, indent=1, sort_keys=True, default=str)
        details.append(
            f"<details><summary>settings of {html.escape(shown)}</summary><pre>{html.escape(settings)}</pre>"
            "</details>"
        )
        for package, version in record.get("versions", {}).items():
            versions[package].add(str(version))
    header = "".join(
        f"<th>{h}</th>" for h in ("File", "Kind", "Dataset", "Strategy", "Seed", "Examples", "fmm-fast")
    )
    version_rows = "".join(
        f"<tr><td>{html.escape(p)}</td><td>{html.escape(', '.join(sorted(v)))}</td></tr>"
        for p, v in sorted(versions.items())
    )
    return (
        f'<table class="data"><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        f"{''.join(details)}<h3>Versions</h3>"
        f'<table class="data"><thead><tr><th>Package</th><th>Version</th></tr></thead><tbody>{version_rows}'
        "</tbody></table>"
    )


def _explanations(explanations: list[Explanation]) -> str:
    """Per measure, its first few examples (by index) on that measure's own scale."""
    by_measure: dict[str, list[Explanation]] = defaultdict(list)
    for explanation in sorted(explanations, key=lambda e: e.index):
        if len(by_measure[explanation.measure]) < EXAMPLES_PER_MEASURE:
            by_measure[explanation.measure].append(explanation)
    parts = [view_controls()]
    for name, chosen in by_measure.items():
        examples = group_examples(chosen)
        scales = measure_scales(examples)
        sections = "".join(example_section(e, scales, heading="h4") for e in examples)
        parts.append(
            f'<h3 id="measure-{html.escape(name)}">{html.escape(name)}</h3>{legend(scales[name])}{sections}'
        )
    return "".join(parts)


def report_page(dirs: Sequence[Path], files: list[Path], explanations: list[Explanation]) -> str:
    """The page from this run's files (tables, figures), the result files under `dirs` and explanations."""
    sections = _tables(files)
    figures = _figures(files)
    if figures:
        sections.append(("Figures", figures))
    if explanations:
        sections.append(("Example explanations", _explanations(explanations)))
    sections.append(("Runs: settings and versions", _runs(dirs)))
    contents = "".join(
        f'<li><a href="#s{i}">{inline(title)}</a></li>' for i, (title, _) in enumerate(sections)
    )
    body = "".join(
        f'<section><h2 id="s{i}">{inline(t)}</h2>{b}</section>' for i, (t, b) in enumerate(sections)
    )
    given = ", ".join(d.name or str(d) for d in dirs)
    header = (
        "<h1>fmm-fast report</h1>"
        f"<p class='muted'>results under {html.escape(given)}; fmm-fast {__version__}</p>"
        f"<ul>{contents}</ul>"
    )
    return document("fmm-fast report", f'<div class="report">{header}{body}</div>')


def write_report_page(
    out: Path, dirs: Sequence[Path], since_ns: int, explanations: list[Explanation]
) -> Path:
    """Write OUT/report.html from what this report run wrote to `out` since `since_ns`."""
    page = out / REPORT_PAGE
    write_text(page, report_page(dirs, written_files(out, since_ns), explanations))
    return page

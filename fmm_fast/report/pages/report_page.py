"""`fmm-fast report --html`: one self-contained page to share, REPORT_DIR/report.html.

It holds whatever this report run wrote: every Markdown table (the faithfulness table, peer metrics, MaSF
verdicts, performance, timing and any other the report writes) as HTML and every PNG figure inlined as a
data URI; then the run settings and versions of each result file, and, given `fmm-fast explain` output,
a section per measure with its first few examples. Nothing on the page is fetched.
"""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from fmm_fast import __version__
from fmm_fast.core.reading import read_checked
from fmm_fast.core.writing import write_text
from fmm_fast.data.local import display_name
from fmm_fast.data.units import DEFAULT_UNIT
from fmm_fast.protocols.explanations import Explanation
from fmm_fast.report.load import find_result_files
from fmm_fast.report.masf import MASF_TABLE, find_masf_files
from fmm_fast.report.pages.document import document, view_controls
from fmm_fast.report.pages.examples import example_section, group_examples, measure_scales
from fmm_fast.report.pages.markdown import inline, markdown_html
from fmm_fast.report.pages.markup import Html, join, markup
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


def _tables(files: list[Path]) -> list[tuple[str, Html]]:
    tables = sorted((p for p in files if p.suffix == ".md"), key=_table_order)
    return [
        (TABLE_TITLES.get(p.name, p.stem.replace("-", " ").capitalize()), markdown_html(p.read_text("utf-8")))
        for p in tables
    ]


def _figures(files: list[Path]) -> Html:
    return join(
        markup(
            '<figure><img src="data:image/png;base64,{data}" alt="{stem}"><figcaption>{name}</figcaption>'
            "</figure>",
            data=base64.b64encode(path.read_bytes()).decode("ascii"),
            stem=path.stem,
            name=path.name,
        )
        for path in files
        if path.suffix == ".png"
    )


def _shown_path(path: Path, dirs: Sequence[Path]) -> str:
    """A result file's path from the folder given to the report (its name included), not from /."""
    for directory in dirs:
        if directory.is_dir() and path.is_relative_to(directory):
            return str(path.relative_to(directory.parent))
    return path.name


# What the runs table reads of any command's record, each field only where the record has it.
RUN_HEADER = {
    "kind?": str,
    "dataset?": str,
    "model?": ({"strategy?": str}, str),
    "seed?": (int, None),
    "n_examples?": int,
    "fmm_fast_version?": str,
    "arguments?": {"data?": {"dataset?": str, "unit?": str}, "seed?": (int, None)},
    "versions?": {"*": str},
}
RUNS_HEADINGS = ("File", "Kind", "Dataset", "Unit", "Strategy", "Seed", "Examples", "fmm-fast")


def _runs(dirs: Sequence[Path]) -> Html:
    """Each result file's kind, dataset, model strategy, seed and size, its settings, and the versions."""
    rows, details = [], []
    versions: dict[str, set[str]] = defaultdict(set)
    for path in sorted({*find_result_files(dirs), *find_masf_files(dirs)}):
        record = read_checked(
            path, RUN_HEADER, "rerun the command that wrote it, or move it out of the report's folders"
        )
        shown = _shown_path(path, dirs)
        arguments = record.get("arguments", {})
        dataset = record.get("dataset") or arguments.get("data", {}).get("dataset", "")
        model = record.get("model") if isinstance(record.get("model"), dict) else {}
        cells = [
            shown,
            record.get("kind", ""),
            display_name(dataset),
            arguments.get("data", {}).get("unit", DEFAULT_UNIT),  # records made before units: tokens
            model.get("strategy", ""),
            record.get("seed", arguments.get("seed", "")),
            record.get("n_examples", ""),
            record.get("fmm_fast_version", ""),
        ]
        rows.append(markup("<tr>{cells}</tr>", cells=join(markup("<td>{c}</td>", c=c) for c in cells)))
        details.append(
            markup(
                "<details><summary>settings of {shown}</summary><pre>{settings}</pre></details>",
                shown=shown,
                settings=json.dumps(arguments, indent=1, sort_keys=True, default=str),
            )
        )
        for package, version in record.get("versions", {}).items():
            versions[package].add(version)
    return markup(
        '<table class="data"><thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table>{details}'
        '<h3>Versions</h3><table class="data"><thead><tr><th>Package</th><th>Version</th></tr></thead>'
        "<tbody>{versions}</tbody></table>",
        header=join(markup("<th>{h}</th>", h=h) for h in RUNS_HEADINGS),
        rows=join(rows),
        details=join(details),
        versions=join(
            markup("<tr><td>{p}</td><td>{v}</td></tr>", p=p, v=", ".join(sorted(v)))
            for p, v in sorted(versions.items())
        ),
    )


def _explanations(explanations: list[Explanation]) -> Html:
    """Per measure, its first few examples (by index) on that measure's own scale."""
    by_measure: dict[str, list[Explanation]] = defaultdict(list)
    for explanation in sorted(explanations, key=lambda e: e.index):
        if len(by_measure[explanation.measure]) < EXAMPLES_PER_MEASURE:
            by_measure[explanation.measure].append(explanation)
    parts = [view_controls()]
    for name, chosen in by_measure.items():
        examples = group_examples(chosen)
        scales = measure_scales(examples)
        parts.append(
            markup(
                '<h3 id="measure-{name}">{name}</h3>{legend}{sections}',
                name=name,
                legend=legend(scales[name]),
                sections=join(example_section(e, scales, heading="h4") for e in examples),
            )
        )
    return join(parts)


def report_page(dirs: Sequence[Path], files: list[Path], explanations: list[Explanation]) -> str:
    """The page from this run's files (tables, figures), the result files under `dirs` and explanations."""
    sections = _tables(files)
    figures = _figures(files)
    if figures:
        sections.append(("Figures", figures))
    if explanations:
        sections.append(("Example explanations", _explanations(explanations)))
    sections.append(("Runs: settings and versions", _runs(dirs)))
    header = markup(
        '<h1>fmm-fast report</h1><p class="muted">results under {given}; fmm-fast {version}</p>'
        "<ul>{contents}</ul>",
        given=", ".join(d.name or str(d) for d in dirs),
        version=__version__,
        contents=join(
            markup('<li><a href="#s{i}">{title}</a></li>', i=i, title=inline(title))
            for i, (title, _) in enumerate(sections)
        ),
    )
    body = join(
        markup('<section><h2 id="s{i}">{title}</h2>{body}</section>', i=i, title=inline(t), body=b)
        for i, (t, b) in enumerate(sections)
    )
    return document(
        "fmm-fast report", markup('<div class="report">{header}{body}</div>', header=header, body=body)
    )


def write_report_page(
    out: Path, dirs: Sequence[Path], since_ns: int, explanations: list[Explanation]
) -> Path:
    """Write OUT/report.html from what this report run wrote to `out` since `since_ns`."""
    page = out / REPORT_PAGE
    write_text(page, report_page(dirs, written_files(out, since_ns), explanations))
    return page

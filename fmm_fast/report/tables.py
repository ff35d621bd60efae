"""The report's tables as text: measures × datasets scores (Markdown and LaTeX), performance, timing."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from fmm_fast.report.aggregate import CurveScores, Estimate, Report, seeds_text
from fmm_fast.report.markdown_text import Markdown, escape_text, markdown, plain_text
from fmm_fast.report.order import measure_sort_key

TABLE_CAPTION = (
    "RACU (unsigned measures) or ACU (signed measures) ×100: mean over seeds and 95% BCa bootstrap CI "
    "as offsets from the mean"
)
SHARED_ROWS_NOTE = (
    "A row two measures of one run need (e.g. loo-abs and loo-sign at the first step) runs once and is "
    "counted under the measure that ran it first: each measure's seconds and forward passes are its own. The "
    "last column gives the rows it took from another measure's passes instead, which it would run too if "
    "evaluated alone."
)
_LATEX_SPECIAL = re.compile(r"([&%$#_{}])")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A GitHub Markdown table: the header row, the separator, one line per row; each cell escaped for
    Markdown unless it is Markdown already (made by markdown_text.markdown)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c if isinstance(c, Markdown) else escape_text(c) for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *(line(row) for row in rows)])


def score_cell(measure: CurveScores, group_seeds: int, estimate: Estimate | None = None) -> str:
    """A measure's score (or another of its estimates) as a table cell.

    "undefined: why" for a nan RACU whose reason the run recorded; " [k seeds]" when the measure has fewer
    seeds than its group (group_seeds, n counting seeds), e.g. a slow measure run on some seeds only.
    """
    estimate = measure.score if estimate is None else estimate
    if measure.score_name == "RACU" and measure.racu_undefined and math.isnan(estimate.mean):
        return markdown("undefined: {why}", why="; ".join(measure.racu_undefined))
    if len(measure.seeds) != group_seeds:
        return markdown("{score} [{seeds}]", score=estimate.formatted(), seeds=seeds_text(len(measure.seeds)))
    return estimate.formatted()


def _score_table(report: Report, strategy: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the measures × datasets table of one strategy (shared by .md and .tex)."""
    groups = [g for g in report.groups if g.strategy == strategy]
    names = sorted({name for g in groups for name in g.measures}, key=measure_sort_key)
    header = ["Measure", "Score"] + [f"{g.label} ({g.counts})" for g in groups]
    rows = []
    for name in names:
        measure_of = [g.measures.get(name) for g in groups]
        score_name = next(m.score_name for m in measure_of if m is not None)
        cells = [
            "" if measure is None else score_cell(measure, len(group.seeds))
            for group, measure in zip(groups, measure_of, strict=True)
        ]
        rows.append([name, score_name, *cells])
    return header, rows


def _dropped_note(report: Report) -> str:
    if not report.dropped:
        return ""
    lines = ["Dropped seeds (did not converge: bAbI unmasked metric ≤ 0.5):"]
    lines += [markdown("- {seed}", seed=seed.describe()) for seed in report.dropped]
    return "\n".join(lines)


def render_table_markdown(report: Report) -> str:
    """table.md: one measures × datasets table per strategy, then the dropped seeds."""
    parts = [f"{TABLE_CAPTION}."]
    for strategy in report.strategies():
        header, rows = _score_table(report, strategy)
        parts += [markdown("### Strategy: {strategy}", strategy=strategy), markdown_table(header, rows)]
    parts.append(_dropped_note(report))
    return "\n\n".join(p for p in parts if p) + "\n"


def _latex(text: str) -> str:
    text = plain_text(text) if isinstance(text, Markdown) else text  # a cell the Markdown table shares
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
            g.label,
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
    return "\n\n".join([caption, markdown_table(header, rows), _dropped_note(report)]).strip() + "\n"


def render_timing_markdown(report: Report) -> str:
    """timing.md: wall time and forward passes of each measure, mean per evaluation run."""
    rows = [
        [
            g.strategy,
            g.label,
            m.name,
            str(len(m.seeds)),
            f"{np.mean(m.seconds):.1f}",
            f"{np.mean(m.forward_passes):,.0f}",
            f"{np.mean(m.shared_rows):,.0f}",
        ]
        for g in report.groups
        for m in g.measures.values()
    ]
    header = [
        "Strategy",
        "Dataset",
        "Measure",
        "Runs",
        "Seconds per run",
        "Forward passes per run",
        "Rows from other measures' passes",
    ]
    machines: Counter[str] = Counter()
    for group in report.groups:
        machines.update(group.machines)
    where = "; ".join(f"{machine} ({count} runs)" for machine, count in machines.most_common())
    measured = markdown("Measured on: {where}.", where=where) if where else ""
    parts = [markdown_table(header, rows), SHARED_ROWS_NOTE, measured]
    return Markdown("\n\n".join(part for part in parts if part) + "\n")

"""The ROAR section's tables as Markdown: ROAR beside no-retraining erasure per measure, and their cost."""

from __future__ import annotations

import math

from fmm_fast.report.aggregate import seeds_text
from fmm_fast.report.load import ROAR_PHASES
from fmm_fast.report.markdown_text import markdown, prose
from fmm_fast.report.roar import CostRow, NoRetraining, RoarGroup, RoarReport
from fmm_fast.report.tables import markdown_table, score_cell

ROAR_CAPTION = (
    "ROAR trains a new model at every masking ratio, on the dataset masked by the measure (Recursive "
    "ROAR: with importance from the previous step's model; ROAR: from the step-0 model). Beside it, the "
    "same measure's erasure curve without retraining. ×100: RACU for unsigned measures, ACU for signed "
    "ones; mean over seeds and 95% BCa bootstrap CI as offsets from the mean; [n=k]: fewer seeds. "
    "Clipped: RACU clipped to [−1, 1] (unsigned measures), as the Recursive ROAR paper reported it. "
    'Each column names the model its curves come from; "at ROAR\'s ratios": that erasure curve is read at '
    "ROAR's coarser ratios and its area recomputed there, so both areas use the same trapezoids (the "
    "erasure table gives it on its own ratios)."
)
GRID_NOTE = ", at ROAR's ratios"
OWN_GRID_NOTE = ", on its own ratios (see Left out)"
COST_CAPTION = (
    "Cost of each protocol, totals over seeds and measures. ROAR: the run's own count (a model reused "
    "for an identical masked dataset is not counted). No-retraining erasure: one trained model per seed "
    "(its training time is not in the evaluate record); its seconds are the erasure's wall time summed "
    "over measures (explaining and scoring interleave, so they are not split); evaluate does not count "
    "backward passes. Runs may come from different machines."
)


def _grid_note(column: NoRetraining) -> str:
    if column.regridded:
        return GRID_NOTE
    return OWN_GRID_NOTE if column.off_roar_ratios else ""


def _roar_rows(group: RoarGroup) -> tuple[list[str], list[list[str]]]:
    seeds = len(group.seeds)
    header = [
        "Measure",
        "Score",
        f"{group.protocol}: {group.strategy} model retrained at every step ({seeds_text(seeds)})",
        "Clipped RACU",
        *(
            f"{column.label}{_grid_note(column)} ({seeds_text(len(column.scored.seeds))})"
            for column in group.no_retraining
        ),
    ]
    rows = []
    for name in group.names:
        measure = group.measures.get(name)
        if measure is None:
            roar = ["not finished", ""]
        else:  # clipped RACU only where RACU is read
            clipped = "" if measure.signed else score_cell(measure, seeds, measure.racu_clipped)
            roar = [score_cell(measure, seeds), clipped]
        erasure = []
        for column in group.no_retraining:
            other = column.scored.measures.get(name)
            erasure.append("" if other is None else score_cell(other, len(column.scored.seeds)))
        rows.append([name, "ACU" if group.signed[name] else "RACU", *roar, *erasure])
    return header, rows


def render_roar_markdown(report: RoarReport) -> str:
    """roar.md: per (dataset, strategy, recursive) a measures table, then what was left out and why."""
    parts = [ROAR_CAPTION]
    for group in report.groups:
        state = "" if group.complete else " (incomplete)"
        seeds = ", ".join(map(str, group.seeds)) or "none kept"
        seed_word = "seed" if len(group.seeds) == 1 else "seeds"
        parts.append(
            markdown(
                "### {dataset}: {protocol}, {strategy} retraining ({seed_word} {seeds}){state}",
                dataset=group.dataset,
                protocol=group.protocol,
                strategy=group.strategy,
                seed_word=seed_word,
                seeds=seeds,
                state=state,
            )
        )
        parts.append(markdown_table(*_roar_rows(group)))
        if group.notes:
            notes = [markdown("- {note}", note=prose(note)) for note in group.notes]
            parts.append("\n".join(["Left out:", *notes]))
    return "\n\n".join(parts) + "\n"


def _count(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:,.0f}"


def _seconds(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:,.1f}"


def _cost_cells(row: CostRow) -> list[str]:
    return [
        row.dataset,
        row.protocol,
        row.model,
        str(row.seeds),
        str(row.measures),
        str(row.trainings),
        _count(row.forward_passes),
        _count(row.backward_passes),
        *(_seconds(row.seconds[phase]) for phase in ROAR_PHASES),
    ]


def render_cost_markdown(report: RoarReport) -> str:
    """roar-cost.md: trainings, passes and wall time per phase of ROAR and of no-retraining erasure."""
    header = [
        "Dataset",
        "Protocol",
        "Model",
        "Seeds",
        "Measures",
        "Model trainings",
        "Forward passes",
        "Backward passes",
        *(f"{phase.capitalize()} s" for phase in ROAR_PHASES),
    ]
    table = markdown_table(header, [_cost_cells(row) for row in report.cost])
    return f"{COST_CAPTION}\n\n{table}\n"

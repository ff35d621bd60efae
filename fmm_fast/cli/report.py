"""`fmm-fast report`: tables, curve figures and JSON from evaluation and ROAR result directories."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from fmm_fast.cli.app import app
from fmm_fast.cli.options import OverwriteOption
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import output_lock

FILE_CLOCK_SLACK_NS = 50_000_000


@app.command("report")
def report_command(
    dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="DIR",
            help="Directories searched recursively for the result.json of `fmm-fast evaluate` and `roar`, "
            "the masf.json of `fmm-fast masf` and the check.json of `fmm-fast check`.",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="REPORT_DIR",
            help="Directory for the tables, figures and report.json: new, empty, or holding a report of "
            "the same DIRs (rewritten).",
        ),
    ],
    html: Annotated[
        bool,
        typer.Option(
            "--html",
            help="Also write REPORT_DIR/report.html: one self-contained file to share (tables, figures "
            "inlined, run settings and versions).",
        ),
    ] = False,
    explanations: Annotated[
        list[Path],
        typer.Option(
            "--explanations",
            metavar="FILE.jsonl",
            help="`fmm-fast explain` output whose first examples report.html shows per measure; repeat for "
            "several files. Needs --html.",
        ),
    ] = [],  # noqa: B006  (typer copies the default)
    overwrite: OverwriteOption = False,
) -> None:
    """Aggregate ACU/RACU over seeds (mean, 95% BCa CI), plot the erasure curves, print the table.

    Results of `fmm-fast aopc` get their own table, OUT/peer-metrics.md; those of
    `fmm-fast masf` their verdicts, OUT/masf.md and OUT/masf.png; those of `fmm-fast check` theirs,
    OUT/check.md. ROAR runs (`fmm-fast roar`) get
    OUT/roar.md, each measure's ROAR RACU beside its no-retraining erasure RACU (of the run's step-0 model
    and of erasure runs of the same dataset given here), OUT/roar-cost.md (trainings, passes and wall time
    of both protocols) and one figure per measure. Every input is checked before anything is written.
    """
    if explanations and not html:
        raise UserError("--explanations are shown in report.html; add --html")
    with output_lock(out):  # before SciPy and matplotlib load: a second process exits at once
        from fmm_fast.api import load_explanations
        from fmm_fast.report.pages.examples import group_examples
        from fmm_fast.report.pages.report_page import REPORT_PAGE, write_report_page
        from fmm_fast.report.roar_tables import render_cost_markdown, render_roar_markdown
        from fmm_fast.report.tables import render_table_markdown
        from fmm_fast.report.write import write_report

        shown = [e for path in explanations for e in load_explanations(path)]
        group_examples(shown)  # two files that disagree fail before any work
        # file times come from a coarse kernel clock that may lag time.time_ns() by a tick (a few ms)
        started = time.time_ns() - FILE_CLOCK_SLACK_NS
        written = write_report(dirs, out, overwrite, also=[REPORT_PAGE] if html else [])
        if html:
            page = write_report_page(out, dirs, started, shown)
    report, roar = written.report, written.roar
    if report is not None and roar is not None:
        roar_runs = f" and {len(roar.files)} ROAR run{'s' * (len(roar.files) != 1)}" if roar.files else ""
        typer.echo(f"fmm-fast report: {len(report.files)} results{roar_runs}, written to {out}", err=True)
        if report.files:
            typer.echo(render_table_markdown(report))
        if roar.groups:
            typer.echo(render_roar_markdown(roar))
            typer.echo(render_cost_markdown(roar))
    for table in (written.peer_table, written.masf_table, written.check_table):
        if table is not None:
            typer.echo(table)
    if html:
        typer.echo(f"wrote {page}", err=True)

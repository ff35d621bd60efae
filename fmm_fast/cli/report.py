"""`fmm-fast report`: tables, curve figures and JSON from evaluation and ROAR result directories."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from fmm_fast.cli.app import app
from fmm_fast.core.errors import UserError

FILE_CLOCK_SLACK_NS = 50_000_000


@app.command("report")
def report_command(
    dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="DIR",
            help="Directories searched recursively for the result.json of `fmm-fast evaluate` and `roar`, "
            "and the masf.json of `fmm-fast masf`.",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", metavar="REPORT_DIR", help="Directory for the tables, figures and report.json."
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
) -> None:
    """Aggregate ACU/RACU over seeds (mean, 95% BCa CI), plot the erasure curves, print the table.

    Results of `fmm-fast aopc` get their own table, OUT/peer-metrics.md; those of
    `fmm-fast masf` their verdicts, OUT/masf.md and OUT/masf.png. ROAR runs (`fmm-fast roar`) get
    OUT/roar.md, each measure's ROAR RACU beside its no-retraining erasure RACU (of the run's step-0 model
    and of erasure runs of the same dataset given here), OUT/roar-cost.md (trainings, passes and wall time
    of both protocols) and one figure per measure.
    """
    from fmm_fast.api import load_explanations
    from fmm_fast.report.masf import write_masf_report
    from fmm_fast.report.pages.examples import group_examples
    from fmm_fast.report.pages.report_page import write_report_page
    from fmm_fast.report.peer import has_recursive_results, write_peer_report
    from fmm_fast.report.roar_tables import render_cost_markdown, render_roar_markdown
    from fmm_fast.report.tables import render_table_markdown
    from fmm_fast.report.write import write_report

    if explanations and not html:
        raise UserError("--explanations are shown in report.html; add --html")
    shown = [e for path in explanations for e in load_explanations(path)]
    group_examples(shown)  # two files that disagree fail before any work
    # file times come from a coarse kernel clock that may lag time.time_ns() by a tick (a few ms)
    started = time.time_ns() - FILE_CLOCK_SLACK_NS
    peer_table = write_peer_report(dirs, out)
    masf_table = write_masf_report(dirs, out)
    if has_recursive_results(dirs) or (peer_table is None and masf_table is None):
        report, roar = write_report(dirs, out)
        roar_runs = f" and {len(roar.files)} ROAR run{'s' * (len(roar.files) != 1)}" if roar.files else ""
        typer.echo(f"fmm-fast report: {len(report.files)} results{roar_runs}, written to {out}", err=True)
        if report.files:
            typer.echo(render_table_markdown(report))
        if roar.groups:
            typer.echo(render_roar_markdown(roar))
            typer.echo(render_cost_markdown(roar))
    for table in (peer_table, masf_table):
        if table is not None:
            typer.echo(table)
    if html:
        typer.echo(f"wrote {write_report_page(out, dirs, started, shown)}", err=True)

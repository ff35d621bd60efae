"""`fmm-fast report`: tables, curve figures and JSON from evaluation and ROAR result directories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fmm_fast.cli.app import app


@app.command("report")
def report_command(
    dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="DIR",
            help="Directories searched recursively for the result.json of `fmm-fast evaluate` and `roar`.",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", metavar="REPORT_DIR", help="Directory for the tables, figures and report.json."
        ),
    ],
) -> None:
    """Aggregate ACU/RACU over seeds (mean, 95% BCa CI), plot the erasure curves, print the table.

    Results of `fmm-fast evaluate --protocol aopc` get their own table, OUT/peer-metrics.md. ROAR runs
    (`fmm-fast roar`) get OUT/roar.md, each measure's ROAR RACU beside its no-retraining erasure RACU
    (of the run's step-0 model and of erasure runs of the same dataset given here), OUT/roar-cost.md
    (trainings, passes and wall time of both protocols) and one figure per measure.
    """
    from fmm_fast.report.peer import has_recursive_results, write_peer_report
    from fmm_fast.report.roar_tables import render_cost_markdown, render_roar_markdown
    from fmm_fast.report.tables import render_table_markdown
    from fmm_fast.report.write import write_report

    peer_table = write_peer_report(dirs, out)
    if peer_table is None or has_recursive_results(dirs):
        report, roar = write_report(dirs, out)
        roar_runs = f" and {len(roar.files)} ROAR run{'s' * (len(roar.files) != 1)}" if roar.files else ""
        typer.echo(f"fmm-fast report: {len(report.files)} results{roar_runs}, written to {out}", err=True)
        if report.files:
            typer.echo(render_table_markdown(report))
        if roar.groups:
            typer.echo(render_roar_markdown(roar))
            typer.echo(render_cost_markdown(roar))
    if peer_table is not None:
        typer.echo(peer_table)

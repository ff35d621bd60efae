"""`fmm-fast report`: tables, curve figures and JSON from evaluation result directories."""

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
            metavar="DIR", help="Directories searched recursively for `fmm-fast evaluate` result.json."
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

    Results of `fmm-fast evaluate --protocol aopc` get their own table, OUT/peer-metrics.md.
    """
    from fmm_fast.report.peer import has_recursive_results, write_peer_report
    from fmm_fast.report.tables import render_table_markdown
    from fmm_fast.report.write import write_report

    peer_table = write_peer_report(dirs, out)
    if peer_table is None or has_recursive_results(dirs):
        report = write_report(dirs, out)
        typer.echo(f"fmm-fast report: {len(report.files)} results, written to {out}", err=True)
        typer.echo(render_table_markdown(report))
    if peer_table is not None:
        typer.echo(peer_table)

"""`fmm-fast report`: tables, curve figures and JSON from evaluation and ROAR result directories, on top of
`fmm_fast.report` (fmm_fast.api.reporting)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fmm_fast.cli.app import app
from fmm_fast.cli.options import OverwriteOption


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
    from fmm_fast.api.reporting import report

    report(dirs, out=out, html=html, explanations=explanations, overwrite=overwrite)

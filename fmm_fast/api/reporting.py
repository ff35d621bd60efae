"""`fmm_fast.report` (the body of `fmm-fast report`): tables, curve figures and JSON from the folders of
evaluate, aopc, masf and roar runs."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fmm_fast.api.arguments import checked_arguments
from fmm_fast.api.inputs import as_list, run_folder
from fmm_fast.api.results import Report
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import output_lock

FILE_CLOCK_SLACK_NS = 50_000_000


@checked_arguments
def report(
    dirs: str | Path | Any | Sequence[str | Path | Any],
    *,
    out: str | Path | None = None,
    html: bool = False,
    explanations: str | Path | Sequence[str | Path] = (),
    overwrite: bool = False,
) -> Report:
    """Aggregate ACU/RACU over seeds (mean, 95% BCa CI), plot the erasure curves, write the tables: what
    `fmm-fast report` does, with its options.

    dirs: folders (or results of fmm_fast.evaluate, aopc, masf, roar, check) searched for their records. html:
    also report.html, one self-contained page; explanations: `fmm-fast explain` .jsonl files whose first
    examples it shows (needs html). out: the report folder (new, empty, or a report of the same dirs);
    None: a new temporary folder. Returns Report: report.json with the tables and figures beside it.

    Example: `fmm_fast.report([evaluation, masf_result], html=True)`
    """
    folders = [Path(getattr(d, "path", d)) for d in (dirs if isinstance(dirs, list | tuple) else [dirs])]
    shown_files = [Path(path) for path in as_list(explanations, "explanations")]
    if shown_files and not html:
        raise UserError("--explanations are shown in report.html; add --html")
    out = run_folder(out, "report")
    with output_lock(out):  # before SciPy and matplotlib load: a second process exits at once
        from fmm_fast.protocols.explanations import load_explanations
        from fmm_fast.report.pages.examples import group_examples
        from fmm_fast.report.pages.report_page import REPORT_PAGE, write_report_page
        from fmm_fast.report.roar_tables import render_cost_markdown, render_roar_markdown
        from fmm_fast.report.tables import render_table_markdown
        from fmm_fast.report.write import write_report

        shown = [e for path in shown_files for e in load_explanations(path)]
        group_examples(shown)  # two files that disagree fail before any work
        # file times come from a coarse kernel clock that may lag time.time_ns() by a tick (a few ms)
        started = time.time_ns() - FILE_CLOCK_SLACK_NS
        written = write_report(folders, out, overwrite, also=[REPORT_PAGE] if html else [])
        if html:
            page = write_report_page(out, folders, started, shown)
    evaluations, roar = written.report, written.roar
    if evaluations is not None and roar is not None:
        roar_runs = f" and {len(roar.files)} ROAR run{'s' * (len(roar.files) != 1)}" if roar.files else ""
        print(
            f"fmm-fast report: {len(evaluations.files)} results{roar_runs}, written to {out}", file=sys.stderr
        )
        if evaluations.files:
            print(render_table_markdown(evaluations))
        if roar.groups:
            print(render_roar_markdown(roar))
            print(render_cost_markdown(roar))
    for table in (written.peer_table, written.masf_table, written.check_table):
        if table is not None:
            print(table)
    if html:
        print(f"wrote {page}", file=sys.stderr)
    return Report(out)

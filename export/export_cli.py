"""The command line shared by make_tables.py and make_figures.py: `--results DIR... --out DIR [--overwrite]`.

Both claim --out as `fmm-fast report` does (fmm_fast.core.outputs): a new or empty directory, one holding a
report of the same results (the script's files are rewritten, the others kept), or with --overwrite an
earlier report, of which only the files its marker lists are removed. A directory holding anything else is
refused, and every result is read and checked before anything is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import check_directory, claim_directory, output_lock
from fmm_fast.report.aggregate import Report, load_report
from fmm_fast.report.write import report_fields


def nothing_to_export(report: Report, results: Sequence[Path]) -> str:
    """Why `report` (of `results`) has no (dataset, strategy) group to draw, and what to do."""
    where = ", ".join(map(str, results))
    if report.dropped:
        seeds = "; ".join(seed.describe() for seed in report.dropped)
        return (
            f"every seed under {where} is left out as not converged ({seeds}); retrain those models or "
            "pass converged runs"
        )
    return (
        f"no `fmm-fast evaluate` result under {where} (ROAR runs and other commands' results have no erasure "
        "curves to draw here; `fmm-fast report` draws theirs); pass the folders evaluate wrote"
    )


def export_main(
    argv: Sequence[str] | None,
    writer: Callable[[Report, Path], list[Path]],
    names: Callable[[Report], list[str]],
    prog: str,
    description: str,
) -> int:
    """Run `writer` (write_tables or write_figures) on the aggregated results into the claimed --out,
    listing `names(report)` (the entries it writes) in the run marker; print the written paths.

    Returns the exit code: 0, or 2 with a one-line error on a user mistake.
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--results", type=Path, nargs="+", required=True, help="evaluation result directories"
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output directory: new, empty, or holding a report of the same --results",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier report in --out (only the files fmm-fast wrote there are removed)",
    )
    args = parser.parse_args(argv)
    try:
        with output_lock(args.out):  # a second process writing the same --out exits at once
            report = load_report(args.results)
            fields = report_fields(args.results)
            check_directory(args.out, "report", fields, args.overwrite)  # what --out holds is told first
            if not names(report):
                raise UserError(nothing_to_export(report, args.results))
            claim_directory(args.out, "report", fields, args.overwrite, files=names(report))
            written = writer(report, args.out)
    except UserError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    print("\n".join(str(path) for path in written))
    return 0

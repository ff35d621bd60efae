"""The command line shared by make_tables.py and make_figures.py: `--results DIR... --out DIR`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from fmm_fast.core.errors import UserError
from fmm_fast.report.aggregate import Report, load_report


def export_main(
    argv: Sequence[str] | None, writer: Callable[[Report, Path], list[Path]], description: str
) -> int:
    """Run `writer` (write_tables or write_figures) on the aggregated results, print the written paths.

    Returns the exit code: 0, or 2 with a one-line error on a user mistake.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--results", type=Path, nargs="+", required=True, help="evaluation result directories"
    )
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    args = parser.parse_args(argv)
    try:
        written = writer(load_report(args.results), args.out)
    except UserError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    print("\n".join(str(path) for path in written))
    return 0

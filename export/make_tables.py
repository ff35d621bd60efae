"""Build the README's tables (table.md/.tex, performance.md, timing.md) from evaluation result dirs.

Usage: python export/make_tables.py --results runs/sst2 runs/babi-2 --out docs/results/tables
"""

import sys
from pathlib import Path

from export_cli import export_main

from fmm_fast.report.write import table_names, write_tables

if __name__ == "__main__":
    sys.exit(
        export_main(sys.argv[1:], write_tables, table_names, Path(__file__).name, __doc__.splitlines()[0])
    )

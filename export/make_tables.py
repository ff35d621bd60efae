"""Build the README's tables (table.md/.tex, performance.md, timing.md) from evaluation result dirs.

Usage: python export/make_tables.py --results runs/sst2 runs/babi-2 --out docs/results
"""

import sys

from fmm_fast.report import export_script_main, write_tables

if __name__ == "__main__":
    sys.exit(export_script_main(sys.argv[1:], write_tables, __doc__.splitlines()[0]))

"""Build the README's erasure-curve figures (curves-<dataset>-<strategy>.png) from evaluation result dirs.

Usage: python export/make_figures.py --results runs/sst2 runs/babi-2 --out docs/results/figures
"""

import sys
from pathlib import Path

from export_cli import export_main

from fmm_fast.report.write import figure_names, write_figures

if __name__ == "__main__":
    sys.exit(
        export_main(sys.argv[1:], write_figures, figure_names, Path(__file__).name, __doc__.splitlines()[0])
    )

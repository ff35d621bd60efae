import sys

from fmm_fast.cli import main

sys.exit(main())

"""Makes this Python an evaluation-only install: importing the `train` and `hub` extras fails, and pandas (the
Python API's `.to_pandas()` imports it on use; no command may need it).

On PYTHONPATH, Python imports this file at start-up (site.py); tests/test_evaluation_install.py runs
fmm-fast in such a subprocess. Blocked modules raise ModuleNotFoundError exactly as if not installed.
"""

import sys
from importlib.abc import MetaPathFinder

BLOCKED = ("torch", "transformers", "datasets", "pyarrow", "pandas")


class _Uninstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named '{name}' (blocked by the test)", name=name)
        return None


sys.meta_path.insert(0, _Uninstalled())

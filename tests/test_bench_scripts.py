"""Every bench script imports: a moved or renamed library name breaks a script that only runs by hand."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.parametrize("script", sorted(path.stem for path in BENCH.glob("*.py")))
def test_bench_script_imports(script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    module = importlib.import_module(script)
    if '__name__ == "__main__"' in (BENCH / f"{script}.py").read_text():
        assert callable(getattr(module, "main", None)), f"bench/{script}.py runs but has no main()"
    sys.modules.pop(script, None)

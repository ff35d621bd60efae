"""The package reads as the pipeline and no import runs back up: the stages below the Python API (data,
models, training, export, backends, measures, protocols, report, distributed) never import the API or the
commands, not even inside a function, so each stage can be used, tested and read without the layers that
drive it."""

from __future__ import annotations

import ast
from pathlib import Path

import fmm_fast

PACKAGE = Path(fmm_fast.__file__).parent
BELOW_THE_API = (
    "core", "data", "training", "export", "backends", "measures", "protocols", "report", "distributed"
)
DRIVERS = ("fmm_fast.api", "fmm_fast.cli", "fmm_fast.demo")


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at its top or inside a function ("from fmm_fast import api" as
    fmm_fast.api)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def driven(module: str) -> bool:
    return any(module == driver or module.startswith(f"{driver}.") for driver in DRIVERS)


def test_no_stage_below_the_api_imports_the_api_or_the_commands():
    upward = {
        f"{path.relative_to(PACKAGE.parent)} imports {module}"
        for stage in BELOW_THE_API
        for path in sorted((PACKAGE / stage).rglob("*.py"))
        for module in imported_modules(path)
        if driven(module)
    }
    assert not upward, sorted(upward)


def test_the_check_sees_an_import_inside_a_function(tmp_path):
    source = tmp_path / "stage.py"
    source.write_text("def late():\n    from fmm_fast.api import explain_texts\n", encoding="utf-8")
    assert any(driven(module) for module in imported_modules(source))

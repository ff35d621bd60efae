"""The module table of docs/architecture.md names every package of fmm_fast/, so a newcomer finds each
concept's room."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _packages() -> list[str]:
    package = ROOT / "fmm_fast"
    return sorted(
        str(init.parent.relative_to(ROOT)) + "/"
        for init in package.rglob("__init__.py")
        if init.parent != package and "__pycache__" not in init.parts
    )


def _table_rows() -> list[str]:
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page[page.index("| module | concept |") :].split("\n\n", 1)[0]
    return [line.split("|")[1] for line in table.splitlines()[2:]]


def test_module_table_names_every_package() -> None:
    named = set()
    for cell in _table_rows():
        named.update(re.findall(r"`(fmm_fast/[a-z_/]+/)`", cell))
    missing = [package for package in _packages() if package not in named]
    assert not missing, f"packages missing from the module table of docs/architecture.md: {missing}"


def test_module_table_names_only_existing_paths() -> None:
    for cell in _table_rows():
        for path in re.findall(r"`(fmm_fast/[a-z_/]+(?:\.py)?/?)`", cell):
            assert (ROOT / path).exists(), f"the module table names {path}, which does not exist"


def test_top_level_stays_small() -> None:
    entries = [p.name for p in (ROOT / "fmm_fast").iterdir() if p.name != "__pycache__"]
    assert len(entries) <= 14, sorted(entries)

"""The docs site builds as `make docs` builds it: offline, every warning an error (a link or anchor that does
not exist, a page left out of the menu, a docstring the API reference cannot read)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from docs_markdown import ROOT

pytest.importorskip("mkdocs")


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "explain_texts" in api  # the reference was generated from the docstrings, not left empty

"""`fmm-fast --help` starts without the heavy libraries: the CLI imports them inside its commands.

Counted by module, never timed: each help runs in a fresh Python, which then reports what it imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from fmm_fast.cli import _register
from fmm_fast.cli.app import app

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("numba", "scipy", "matplotlib", "onnxruntime", "openvino", "torch", "transformers", "ray")
# `python -m fmm_fast ARGUMENTS`, then the top-level packages it imported, as JSON on stderr's last line
RUN_AND_REPORT = """
import json, runpy, sys
sys.argv[0] = "fmm-fast"
try:
    runpy.run_module("fmm_fast", run_name="__main__")
except SystemExit as exit_:
    code = exit_.code
print(json.dumps({"code": code, "packages": sorted({name.split(".")[0] for name in sys.modules})}),
      file=sys.stderr)
"""


def help_run(*arguments: str) -> tuple[str, set[str]]:
    """(help text, top-level packages imported) of `python -m fmm_fast ARGUMENTS --help`."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    result = subprocess.run(
        [sys.executable, "-c", RUN_AND_REPORT, *arguments, "--help"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    report = json.loads(result.stderr.splitlines()[-1])
    assert report["code"] in (0, None), result.stderr
    return result.stdout, set(report["packages"])


@pytest.mark.parametrize("command", [[], ["evaluate"]])
def test_help_imports_no_heavy_library(command):
    text, packages = help_run(*command)
    assert "fmm_fast" in packages and "typer" in packages  # the report sees this run's imports
    assert sorted(packages & set(HEAVY)) == []
    assert "Usage:" in text


@pytest.mark.parametrize("name", ["evaluate", "aopc"])
def test_help_shows_every_option(name):
    _register()
    (command,) = [c for c in typer.main.get_command(app).commands.values() if c.name == name]
    shown = [parameter for parameter in command.params if not getattr(parameter, "hidden", False)]
    flags = [flag for parameter in shown for flag in parameter.opts if flag.startswith("--")]
    text, _ = help_run(name)
    assert len(flags) > 20  # model, data, engine and backend groups, the command's own
    assert [flag for flag in flags if flag not in text] == []

"""What users read names docs/method.md or says the thing itself: never a spec section or an issue number.

The printed lines and files of real runs are checked where those runs happen (test_cli, test_peer_cli,
test_masf's CLI runs) through `assert_self_contained`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from docs_markdown import documents
from test_report import results, write_result  # noqa: F401  (the fixture `results` is used by name)

from fmm_fast.cli import _register, main
from fmm_fast.cli.app import app

# "SPEC §4", "the SPEC", "issue 14", "issue #14", "(#15)"
CITATION = re.compile(r"\bSPEC\b|\bissues?\s*#?\d+|#\d+\b", re.IGNORECASE)
ROOT = Path(__file__).resolve().parent.parent


def assert_self_contained(text: str, where: str) -> None:
    found = [match.group(0) for match in CITATION.finditer(text)]
    assert not found, f"{where} cites {found}: name docs/method.md or say the thing itself"


def test_the_pattern_finds_what_it_must():
    for cited in ("see SPEC §6", "(#15)", "issue 14's rule", "Issue #3", "issues 2"):
        with pytest.raises(AssertionError):
            assert_self_contained(cited, "example")
    assert_self_contained("docs/method.md §6; 95% CI; x>=1; special tokens", "example")


def command_names() -> list[str]:
    _register()
    return sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_every_command_is_checked():
    assert {"train", "export", "explain", "evaluate", "masf", "report", "demo"} <= set(command_names())


@pytest.mark.parametrize("command", [None, *command_names()])
def test_help_is_self_contained(command: str | None, capsys):
    assert main(["--help"] if command is None else [command, "--help"]) == 0
    text = capsys.readouterr().out
    assert "Usage:" in text
    assert_self_contained(text, f"fmm-fast {command or ''} --help")


def test_generated_report_is_self_contained(results: Path, tmp_path: Path, capsys):  # noqa: F811
    out = tmp_path / "report"
    assert main(["report", str(results), "--out", str(out)]) == 0
    assert_self_contained(capsys.readouterr().out, "report's printed table")
    written = [path for path in out.iterdir() if path.suffix in (".md", ".tex", ".json", ".html")]
    assert {"table.md", "report.json"} <= {path.name for path in written}
    for path in written:
        assert_self_contained(path.read_text(), f"report's {path.name}")


def test_readme_and_docs_are_self_contained():
    for path in [ROOT / "bench" / "README.md", *documents()]:
        assert_self_contained(path.read_text(), path.relative_to(ROOT).as_posix())

"""Every `fmm-fast ...` command line shown in README.md and docs/ parses with the CLI's own click objects:
the command exists, every option it gives exists, is shown by that command's --help and gets its value, and
no stray argument is left. Nothing runs; values stay unchecked (docs write placeholders such as N or DIR)."""

from __future__ import annotations

import pytest
import typer.main
from docs_markdown import CommandLine, command_lines, documents

from fmm_fast.cli import _register, _usage_error_types, app

COMMANDS = [line for document in documents() for line in command_lines(document)]


def cli():
    _register()
    return typer.main.get_command(app)


def _strict_context(command, name, parent=None):
    """A context for `command` that parses strictly (unknown options are errors) without checking values."""
    context = command.make_context(name, [], parent=parent, resilient_parsing=True)
    context.resilient_parsing = False
    return context


def _flags(command) -> dict:
    return {flag: p for p in command.params for flag in (*p.opts, *getattr(p, "secondary_opts", ()))}


def _as_typed(command, arguments: list[str]) -> list[str]:
    """Prose names an option without its value ("`fmm-fast masf --evaluation`"): give it a placeholder."""
    last = _flags(command).get(arguments[-1]) if arguments else None
    if last is not None and not getattr(last, "is_flag", False) and not getattr(last, "count", False):
        return [*arguments, "VALUE"]
    return arguments


def _check_flags(command, arguments):
    """Each option given exists on `command` and is not hidden from its --help."""
    by_flag = _flags(command)
    for word in arguments:
        flag = word.split("=", 1)[0]
        if flag.startswith("-") and not flag.lstrip("-").replace(".", "").isdigit() and flag in by_flag:
            assert not getattr(by_flag[flag], "hidden", False), f"{flag} is not in --help"


def parse(arguments: tuple[str, ...]) -> str:
    """Parse like `fmm-fast ARGUMENTS`; the command's name (or '' for options of fmm-fast alone). Raises
    click's usage errors for an unknown command or option, a missing option value or an extra argument."""
    group = cli()
    context = _strict_context(group, "fmm-fast")
    _, rest, _ = group.make_parser(context).parse_args(_as_typed(group, list(arguments)))
    if not rest or rest[0].isupper():  # `fmm-fast --threads N COMMAND`: a placeholder, not a command
        return ""
    name, command, rest = group.resolve_command(context, rest)
    if command is None:
        raise AssertionError(f"no command {rest[0]!r}")
    parser = command.make_parser(_strict_context(command, name, context))
    _, extra, _ = parser.parse_args(_as_typed(command, rest))
    assert extra == [], f"unexpected argument(s) {extra}"
    _check_flags(command, rest)
    return name


def test_the_docs_show_commands():
    shown = {parse(line.arguments) for line in COMMANDS}
    assert {"train", "export", "evaluate", "masf", "report", "explain", "aopc", "roar"} <= shown


@pytest.mark.parametrize("line", COMMANDS, ids=str)
def test_every_command_line_parses(line: CommandLine):
    parse(line.arguments)


@pytest.mark.parametrize(
    "arguments",
    [
        ("evalute", "--model", "m.onnx"),  # no such command
        ("evaluate", "--model", "m.onnx", "--measures", "loo-abs"),  # no such option
        ("report", "runs/eval", "--out", "runs/report", "--precision", "bf16"),  # not this command's
        ("demo", "demo-output"),  # an argument the command does not take
        ("--thread", "2", "train"),  # no such option of fmm-fast itself
    ],
)
def test_a_wrong_command_line_fails(arguments):
    usage_errors, _ = _usage_error_types()  # click's, and those of the click typer vendors
    with pytest.raises((*usage_errors, AssertionError)):
        parse(arguments)

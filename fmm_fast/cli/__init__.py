"""Console entry point `fmm-fast`: one command per module, user mistakes and disk errors (full, read-only,
no permission: core.disk_errors) become one line + exit 2.

A command module imports what loads Numba, SciPy, matplotlib or a backend inside its command, so that
`fmm-fast --help` starts fast (tests/test_cli_startup.py).
"""

from __future__ import annotations

import functools
import importlib
import sys

import typer
from typer.core import TyperCommand

from fmm_fast.cli.app import app
from fmm_fast.cli.once import OnceCommand
from fmm_fast.core.disk_errors import disk_error_line
from fmm_fast.core.errors import UserError

COMMAND_MODULES = [
    "train",
    "export",
    "explain",
    "evaluate",
    "aopc",
    "roar",
    "masf",
    "check",
    "report",
    "demo",
]


def _register() -> None:
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(f"fmm_fast.cli.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"fmm_fast.cli.{name}":
                raise
    for command in app.registered_commands:  # every command refuses a repeated single-value option
        if command.cls in (None, TyperCommand):
            command.cls = OnceCommand


@functools.cache
def _command() -> typer.core.TyperGroup:
    """The click group of every command, built once per process: typer builds it afresh at every
    `app(...)` call (about 10 ms, paid by every in-process call: the API's and the tests')."""
    _register()
    return typer.main.get_command(app)


def _usage_error_types() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(usage-error classes, abort classes) of click and of the click copy typer may vendor."""
    import click

    usage, abort = [click.exceptions.ClickException], [click.exceptions.Abort]
    try:
        from typer._click import exceptions as vendored  # typer ≥ 0.2x ships its own click
    except ImportError:
        vendored = None
    if vendored is not None:
        usage.append(vendored.ClickException)
        abort.append(getattr(vendored, "Abort", click.exceptions.Abort))
    return tuple(usage), tuple(abort)


def _one_line(message: str) -> str:
    """The message with line breaks and other unprintable characters (a binary file's bytes quoted by a
    parser) shown as spaces: a user error is always one line."""
    return "".join(c if c.isprintable() else " " for c in message)


def main(argv: list[str] | None = None) -> int:
    try:
        # without standalone mode, typer.Exit(n) returns n; what `app(...)` adds to the call is the pretty
        # tracebacks, which the app turns off
        code = _command()(args=argv, standalone_mode=False)
    except UserError as error:
        print(f"fmm-fast: error: {_one_line(error.command_message)}", file=sys.stderr)
        return 2
    except OSError as error:  # a full, read-only or forbidden disk is not a bug of fmm-fast: one line
        line = disk_error_line(error)
        if line is None:
            raise
        print(f"fmm-fast: error: {_one_line(line)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "fmm-fast: interrupted; finished steps are saved, rerun the same command to resume.",
            file=sys.stderr,
        )
        return 130
    except SystemExit as exit_:
        return int(exit_.code or 0)
    except Exception as error:  # usage errors (typer vendors its own click, so check both)
        usage_errors = _usage_error_types()
        if isinstance(error, usage_errors[0]):  # one line, like every other user mistake
            context = getattr(error, "ctx", None)
            command = f" {context.info_name}" if context is not None and context.parent is not None else ""
            print(
                f"fmm-fast: error: {_one_line(error.format_message())} (see fmm-fast{command} --help)",
                file=sys.stderr,
            )
            return 2
        if isinstance(error, usage_errors[1]):
            return 1
        raise
    return code if isinstance(code, int) else 0  # a command's own return value is not an exit code


if __name__ == "__main__":
    sys.exit(main())

"""Single-value options are given once: `--model A --model B` is refused, where click keeps the last.

Every command is built with OnceCommand (registered for all of them in fmm_fast.cli), and the application
with OnceGroup, so the rule holds for every option that takes one value or is a flag, before a command and
in it, and for commands added later.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup

from fmm_fast.core.errors import UserError


def refusing_repeats(parser: Any) -> Any:
    """The click parser `parser`, made to refuse a repeated option unless the option collects a list."""
    parse = parser.parse_args

    def parse_once(args: list[str]) -> Any:
        options, rest, order = parse(args)  # order: each option as often as it was given
        seen: set[str] = set()
        for param in order:
            if getattr(param, "param_type_name", "") != "option" or param.multiple:
                continue
            if param.name in seen:
                takes = "is a flag" if param.is_flag else "takes one value"
                raise UserError(
                    f"{max(param.opts, key=len)} was given more than once; it {takes}, give it once"
                )
            seen.add(param.name)
        return options, rest, order

    parser.parse_args = parse_once
    return parser


class OnceCommand(TyperCommand):
    """A typer command whose parser refuses a repeated single-value option."""

    def make_parser(self, ctx: Any) -> Any:
        return refusing_repeats(super().make_parser(ctx))


class OnceGroup(TyperGroup):
    """The application's options before the command (--threads), parsed as OnceCommand's."""

    def make_parser(self, ctx: Any) -> Any:
        return refusing_repeats(super().make_parser(ctx))

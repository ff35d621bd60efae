"""The one way the report builds Markdown: a template of this code filled with escaped values.

`markdown(template, **values)` formats `template` (str.format syntax) with every value escaped for
Markdown text, whatever its type: a label, a measure or dataset name, a path or a reason read from a file
renders as the text it is, never as a tag, a link, an attribute list ({: ...}, the docs site's attr_list),
emphasis, a table cell boundary or a new block. The spec `:code` puts a value in a code span instead. Only
the result of `markdown` is `Markdown`, passed through unescaped: `markdown_table` escapes every other cell.
The same contract as fmm_fast/report/pages/markup.py's `markup` for HTML.
"""

from __future__ import annotations

import re
import string
from typing import Any

# Characters that open Markdown constructs anywhere in a line (Python-Markdown's and GitHub's): escaped
# with a backslash. `<`, `>` and `&` (raw HTML, autolinks, entities) become entities instead.
# An underscore inside a word (micro_f1, a_path) opens no emphasis in either: it stays as it is.
_INLINE_SPECIAL = re.compile(r"([\\`*{}\[\]|!]|(?<![^\W_])_|_(?![^\W_]))")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# What starts a block at the beginning of a value placed after "- " or "### ": a heading, a list item.
_BLOCK_START = re.compile(r"^(\s*)(#)|^(\s*\d*)([+\-.)])(?=\s|$)")


class Markdown(str):
    """Markdown that is safe to insert as is: made by `markdown`, or a constant of this code."""


def escape_text(value: Any) -> str:
    """`value` as Markdown text that renders as itself (one line: line breaks become spaces)."""
    text = " ".join(str(value).splitlines())
    text = "".join(_ENTITIES.get(char, char) for char in _INLINE_SPECIAL.sub(r"\\\1", text))
    return _BLOCK_START.sub(
        lambda start: "\\".join(part for part in start.groups() if part is not None), text
    )


def prose(text: str) -> Markdown:
    """A sentence of this code that marks commands as `code` and holds values (paths, names): escaped as
    text outside its code spans, the spans kept (their content is literal in Markdown)."""
    parts, cursor = [], 0
    for span in _CODE_SPAN.finditer(text):
        parts += [escape_text(text[cursor : span.start()]), span[0]]
        cursor = span.end()
    return Markdown("".join([*parts, escape_text(text[cursor:])]))


def plain_text(text: str) -> str:
    """The text `escape_text` escaped, as it reads (what a Markdown renderer shows of it)."""
    unescaped = re.sub(r"\\([\\`*_{}\[\]|!#+\-.)])", r"\1", text)
    return re.sub(r"&(amp|lt|gt);", lambda entity: {"amp": "&", "lt": "<", "gt": ">"}[entity[1]], unescaped)


def code_span(value: Any) -> str:
    """`value` as a code span: fenced by more backticks than it holds in a row (its text is literal there)."""
    text = " ".join(str(value).splitlines())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{padding}{text}{padding}{fence}"


class _Escaping(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, Markdown):
            return value
        if format_spec == "code":
            return code_span(value)
        return escape_text(format(value, format_spec))


_FORMATTER = _Escaping()


def markdown(template: str, /, **values: Any) -> Markdown:
    """`template` with each {name} replaced by the value, escaped unless it is Markdown ({name:code}: a code
    span; other specs format the value first, then it is escaped)."""
    return Markdown(_FORMATTER.vformat(template, (), values))

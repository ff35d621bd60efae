"""The report's Markdown files as HTML: the subset they use (headings, tables, lists, paragraphs, code
blocks, `code` and **bold**), so every table the report writes shows on its page without a per-table
renderer and without a Markdown dependency."""

from __future__ import annotations

import re

from fmm_fast.report.markdown_text import plain_text
from fmm_fast.report.pages.markup import Html, join, markup

# a backslash escape (text, as markdown_text writes it), `code` or **bold**
_INLINE = re.compile(r"\\.|`([^`]+)`|\*\*((?:\\.|[^*])+)\*\*")
_CELL_BORDER = re.compile(r"(?<!\\)\|")  # a pipe that is not escaped
_HEADING = re.compile(r"(#{1,6})\s+(.*)")


def inline(text: str) -> Html:
    """One line of Markdown text as escaped HTML with its `code` and **bold** spans; backslash escapes and
    the entities markdown_text writes read as the characters they stand for."""
    parts, cursor = [], 0
    for match in _INLINE.finditer(text):
        code, bold = match.groups()
        if code is None and bold is None:  # an escaped character: part of the text around it
            continue
        parts.append(markup("{plain}", plain=plain_text(text[cursor : match.start()])))
        span = markup("<code>{c}</code>", c=code) if code is not None else None
        parts.append(span or markup("<b>{b}</b>", b=plain_text(bold)))
        cursor = match.end()
    parts.append(markup("{plain}", plain=plain_text(text[cursor:])))
    return join(parts)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in _CELL_BORDER.split(line.strip().removeprefix("|").removesuffix("|"))]


def _table(lines: list[str]) -> Html:
    """A pipe table: header, separator, rows."""
    return markup(
        '<table class="data"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>',
        header=join(markup("<th>{c}</th>", c=inline(cell)) for cell in _cells(lines[0])),
        body=join(
            markup(
                "<tr>{cells}</tr>",
                cells=join(markup("<td>{c}</td>", c=inline(cell)) for cell in _cells(line)),
            )
            for line in lines[2:]
        ),
    )


def markdown_html(text: str, top: int = 3) -> Html:
    """Markdown as HTML; the file's largest heading becomes <h`top`>, the next ones smaller."""
    lines = text.splitlines()
    parts: list[Html] = []
    largest = min(_levels(lines))  # the fewest #s
    index = 0
    while index < len(lines):
        line = lines[index]
        start = index
        heading = _HEADING.fullmatch(line.strip())
        if not line.strip():
            index += 1
        elif heading:
            level = min(6, top + len(heading[1]) - largest)
            parts.append(markup("<h{level}>{text}</h{level}>", level=level, text=inline(heading[2])))
            index += 1
        elif line.startswith("```"):
            index += 1
            while index < len(lines) and not lines[index].startswith("```"):
                index += 1
            parts.append(markup("<pre>{code}</pre>", code="\n".join(lines[start + 1 : index])))
            index += 1
        else:
            kind = "|" if line.startswith("|") else "- " if line.startswith("- ") else ""
            index += 1
            while index < len(lines) and lines[index].strip() and _same_block(lines[index], kind):
                index += 1
            block = lines[start:index]
            if kind == "|":
                parts.append(_table(block))
            elif kind == "- ":
                items = join(markup("<li>{item}</li>", item=inline(item[2:])) for item in block)
                parts.append(markup("<ul>{items}</ul>", items=items))
            else:
                parts.append(markup("<p>{text}</p>", text=inline(" ".join(block))))
    return join(parts, "\n")


def _same_block(line: str, kind: str) -> bool:
    if kind:
        return line.startswith(kind)
    return not (line.startswith(("|", "- ", "```")) or _HEADING.fullmatch(line.strip()))


def _levels(lines: list[str]) -> list[int]:
    return [len(m[1]) for m in (_HEADING.fullmatch(line.strip()) for line in lines) if m] or [1]

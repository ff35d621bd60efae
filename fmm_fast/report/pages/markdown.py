"""The report's Markdown files as HTML: the subset they use (headings, tables, lists, paragraphs, code
blocks, `code` and **bold**), so every table the report writes shows on its page without a per-table
renderer and without a Markdown dependency."""

from __future__ import annotations

import html
import re

_INLINE = [(re.compile(r"`([^`]+)`"), r"<code>\1</code>"), (re.compile(r"\*\*([^*]+)\*\*"), r"<b>\1</b>")]
_HEADING = re.compile(r"(#{1,6})\s+(.*)")


def inline(text: str) -> str:
    """One line of Markdown text as escaped HTML with its `code` and **bold** spans."""
    escaped = html.escape(text, quote=False)
    for pattern, replacement in _INLINE:
        escaped = pattern.sub(replacement, escaped)
    return escaped


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table(lines: list[str]) -> str:
    """A pipe table: header, separator, rows."""
    header = "".join(f"<th>{inline(cell)}</th>" for cell in _cells(lines[0]))
    body = "".join(
        "<tr>" + "".join(f"<td>{inline(cell)}</td>" for cell in _cells(line)) + "</tr>" for line in lines[2:]
    )
    return f'<table class="data"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>'


def markdown_html(text: str, top: int = 3) -> str:
    """Markdown as HTML; the file's largest heading becomes <h`top`>, the next ones smaller."""
    lines = text.splitlines()
    parts: list[str] = []
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
            parts.append(f"<h{level}>{inline(heading[2])}</h{level}>")
            index += 1
        elif line.startswith("```"):
            index += 1
            while index < len(lines) and not lines[index].startswith("```"):
                index += 1
            parts.append(f"<pre>{html.escape(chr(10).join(lines[start + 1 : index]))}</pre>")
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
                parts.append("<ul>" + "".join(f"<li>{inline(item[2:])}</li>" for item in block) + "</ul>")
            else:
                parts.append(f"<p>{inline(' '.join(block))}</p>")
    return "\n".join(parts)


def _same_block(line: str, kind: str) -> bool:
    if kind:
        return line.startswith(kind)
    return not (line.startswith(("|", "- ", "```")) or _HEADING.fullmatch(line.strip()))


def _levels(lines: list[str]) -> list[int]:
    return [len(m[1]) for m in (_HEADING.fullmatch(line.strip()) for line in lines) if m] or [1]

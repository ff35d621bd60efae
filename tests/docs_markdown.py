"""Reading the documentation as its readers see it: the Markdown files of README.md and docs/, the links in
their text, their headings' anchors and the `fmm-fast` command lines they show."""

from __future__ import annotations

import re
import shlex
import unicodedata
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(
    r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
SHELL_BLOCKS = {"bash", "sh", "shell", "console"}  # commands; a block without a language is program output
CODE_SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # https:, mailto:, data:
PLACEHOLDERS = {"...", "…", "|"}  # "one of", "and so on": not arguments


def documents() -> list[Path]:
    """README.md and every Markdown file under docs/ (the results pages' raw records included)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def without_code(text: str) -> str:
    """The text with fenced blocks and code spans blanked (links and headings inside them are not real)."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)


def links(text: str) -> list[str]:
    """Targets of the inline links and images in the text outside code."""
    return LINK.findall(without_code(text))


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc (MkDocs) gives a heading; GitHub's is the same for these docs."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(text: str) -> set[str]:
    return {slug(h) for h in HEADING.findall(FENCE.sub("", text))}


def broken_links(document: Path) -> list[str]:
    """Each relative link of `document` whose file, or whose heading in a Markdown file, does not exist."""
    text = document.read_text(encoding="utf-8")
    problems = []
    for target in links(text):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (document.parent / path).resolve() if path else document
        if not resolved.exists():
            problems.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text("utf-8")):
            problems.append(f"{target}: no heading with anchor #{anchor} in {resolved.name}")
    return problems


@dataclass(frozen=True)
class CommandLine:
    """One `fmm-fast ...` command as a reader would type it: where it is shown, and its arguments."""

    where: str
    arguments: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: fmm-fast {' '.join(self.arguments)}"


def _arguments(line: str) -> tuple[str, ...] | None:
    """The arguments after `fmm-fast` in a shell line, usage brackets and placeholders dropped; None if the
    line does not run fmm-fast."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # an unbalanced quote: not a command line
        return None
    if "fmm-fast" not in words:
        return None
    arguments = []
    for word in words[words.index("fmm-fast") + 1 :]:
        if word in {"&&", "||", ";", ">", "2>", "|&"}:
            break
        word = word.strip("[]")
        if word and word not in PLACEHOLDERS:
            arguments.append(word)
    return tuple(arguments)


def command_lines(document: Path) -> list[CommandLine]:
    """Every fmm-fast command in the shell blocks and the code spans of `document`."""
    text = document.read_text(encoding="utf-8")
    name = document.relative_to(ROOT).as_posix()
    found = []
    for block in FENCE.finditer(text):
        if block.group("info").strip().lower() in SHELL_BLOCKS:
            joined = re.sub(r"\\\n", " ", block.group("body"))
            for line in joined.splitlines():
                arguments = _arguments(line.strip().removeprefix("$ "))
                if arguments is not None:
                    found.append(CommandLine(f"{name} (block)", arguments))
    for span in CODE_SPAN.findall(FENCE.sub("", text)):
        span = " ".join(span.split())  # a span may wrap over lines
        if span.startswith("fmm-fast ") or " fmm-fast " in span:
            arguments = _arguments(span)
            if arguments is not None:
                found.append(CommandLine(name, arguments))
    return found

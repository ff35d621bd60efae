"""No script from an input file runs in a page fmm-fast writes, nor in its Markdown files rendered as the
docs site renders Markdown.

Every field of every file `fmm-fast report --html` reads (an evaluate result, a ROAR run, an aopc result,
a masf.json, an `fmm-fast explain` line) is given, one at a time, a script payload in place of its value
(a string for a number, so a wrong type too) and in place of its key; the report either refuses the file
in one line naming it (exit 2) or writes a page where the payload is text, never markup. The page of
`fmm-fast explain --html` gets the payload in every string it shows. Every Markdown file the report writes
(table.md, check.md, ...) is rendered with the Markdown extensions of mkdocs.yml: the payload is text there
too. Then, in headless Chromium, pages holding every payload the report accepted show that none of them ran.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import shutil
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from doubles import explanation
from test_report import write_masf, write_result
from test_report_roar import write_roar

from fmm_fast.api import save_explanations
from fmm_fast.cli import main
from fmm_fast.core.records import write_record
from fmm_fast.report.pages.browser import find_chromium, render
from fmm_fast.report.pages.explain_page import write_explanations_page

# Runs if it lands in a page as markup: sets the title, adds an element, logs an error (three signs).
SCRIPT = (
    '<script>document.title="PWNED";document.documentElement.append(Object.assign('
    'document.createElement("i"),{id:"pwned-ran"}));console.error("Error: PWNED ran")</script>'
)
# Breaks out of a quoted attribute first; the handler runs without fetching anything.
HANDLER = "\"'><svg onload=\"console.error('Error: PWNED svg')\"></svg>"
# An attribute list (the docs site's attr_list extension): in Markdown, a handler on the element before it.
ATTRIBUTES = "{: onmouseover=\"console.error('Error: PWNED attr')\" }"
PAYLOAD = HANDLER + SCRIPT + ATTRIBUTES
NAME_PAYLOAD = '"\'><svg onload=console.error("Error:PWNED-name")>'  # a file name: no slash
MARKUP = ("<script>document.title", "<svg")  # how a payload's markup shows unescaped


def unescaped(page: str) -> list[str]:
    """The payload markup found in `page` as markup (escaped text never holds a "<")."""
    return [mark for mark in MARKUP if mark in page]


Path_ = tuple[Any, ...]  # keys and list indices from the top of a record


def places(value: Any, at: Path_ = ()) -> Iterator[tuple[str, Path_]]:
    """("value", path) for every field and ("key", path) for every key; of a list, its first item."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield "key", (*at, key)
            yield from places(inner, (*at, key))
        if at:
            yield "value", at
    elif isinstance(value, list):
        if value:
            yield from places(value[0], (*at, 0))
        yield "value", at
    else:
        yield "value", at


def planted(record: Any, kind: str, at: Path_, payload: str) -> Any:
    """A copy of `record` with `payload` as the value (or the key) at `at`."""
    copy = json.loads(json.dumps(record))
    holder = copy
    for step in at[:-1]:
        holder = holder[step]
    if kind == "value":
        holder[at[-1]] = payload
    else:
        holder[payload] = holder.pop(at[-1])
    return copy


@dataclass
class Input:
    """One input format: the folder given to the report and the file whose fields are tried."""

    name: str
    folder: Path
    file: Path
    lines: bool = False  # JSON Lines (the first line's fields are tried)

    def read(self) -> Any:
        text = self.file.read_text("utf-8")
        return json.loads(text.splitlines()[0] if self.lines else text)

    def write(self, record: Any, original: str) -> None:
        if self.lines:
            rest = original.split("\n", 1)[1]
            self.file.write_text(json.dumps(record) + "\n" + rest, "utf-8")
        else:
            self.file.write_text(json.dumps(record), "utf-8")


PEER_SUMMARY = {"mean": 0.12, "ci_low": 0.1, "ci_high": 0.14, "n": 4, "undefined": 0}


def write_aopc(folder: Path) -> Path:
    """A result.json as `fmm-fast aopc` writes it (the fields the report reads and a few more)."""
    summaries = dict.fromkeys(("aopc_comprehensiveness", "aopc_sufficiency", "tau_loo"), PEER_SUMMARY)
    record = {
        "kind": "peer-metrics",
        "fmm_fast_version": "0.1.0",
        "arguments": {"data": {"dataset": "sms"}, "seed": 0},
        "model": {"path": "m.onnx", "strategy": "masked"},
        "dataset": "sms",
        "split": "test",
        "seed": 0,
        "protocol": "aopc",
        "n_examples": 4,
        "measures": {
            name: {
                "signed": name == "loo-sign",
                "acu": 0.1,
                "racu": 0.2,
                **summaries,
                "tau_loo": PEER_SUMMARY,
            }
            for name in ("rand", "loo-sign")
        },
        "versions": {"numpy": "2.0"},
    }
    folder.mkdir(parents=True)
    write_record(folder / "result.json", record)
    return folder / "result.json"


def write_check(folder: Path) -> Path:
    """A check.json as `fmm-fast check` writes it (the fields the report reads), out of distribution with
    a fix."""
    points = [
        {
            "ratio": ratio,
            "metrics": {"accuracy": accuracy},
            "excess_nll": excess,
            "simes": simes,
            "simes_holm": holm,
            "in_distribution": holm > 0.05,
        }
        for ratio, accuracy, excess, simes, holm in [(0.0, 0.9, 0.0, 0.5, 0.5), (1.0, 0.5, 0.7, 0.01, 0.02)]
    ]
    record = {
        "kind": "check",
        "dataset": "sms",
        "split": "test",
        "n_examples": 4,
        "metric": "accuracy",
        "majority_baseline": 0.5,
        "model": {"path": "m.onnx", "strategy": "plain"},
        "points": points,
        "calibration": {"set": "unmasked"},
        "verdict": {
            "verdict": "does not handle masks",
            "first_out_ratio": 1.0,
            "fix": "fmm-fast train --model m",
        },
    }
    folder.mkdir(parents=True)
    write_record(folder / "check.json", record)
    return folder / "check.json"


def inputs(root: Path) -> list[Input]:
    evaluate = write_result(
        root / "evaluate",
        "sms",
        "masked",
        0,
        {"rand": (0.0, 0.0), "loo-sign": (0.3, 0.9)},
        unmasked=0.9,
        machine={"cpu": "Test CPU", "threads": 2},
    )
    masf = write_masf(root / "masf", {"masked (m.onnx)": [0.5] * 11})
    roar = write_roar(root / "roar", seeds=(0,), measures=("rand", "loo-sign"))
    aopc = write_aopc(root / "aopc")
    check = write_check(root / "check")
    explained = root / "explained.jsonl"
    save_explanations(explained, [explanation([0.1, 0.2, 0.05, -0.3, 0.0, 0.4])])  # one line: any index sorts
    return [
        Input("evaluate", root / "evaluate", evaluate),
        Input("masf", root / "masf", masf),
        Input("roar", root / "roar", roar / "result.json"),
        Input("aopc", root / "aopc", aopc),
        Input("check", root / "check", check),
        Input("explain", root / "aopc", explained, lines=True),
    ]


@dataclass
class Outcome:
    given: Input
    kind: str  # "value" or "key"
    at: Path_
    code: int | None
    err: str
    page: str | None  # report.html when the report wrote one
    markdown: dict[str, str]  # each .md file the report wrote: its text

    @property
    def where(self) -> str:
        return f"{self.given.name} {self.kind} {'.'.join(map(str, self.at))}"


def report(given: Input, out: Path, explained: Path) -> tuple[int | None, str]:
    """Run `fmm-fast report --html` in this process; (exit code, stderr), None and the traceback when it
    raised instead of exiting."""
    argv = ["report", str(given.folder), "--out", str(out), "--html", "--explanations", str(explained)]
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            return main(argv), err.getvalue()
        except Exception:
            return None, traceback.format_exc()


def sweep(root: Path) -> list[Outcome]:
    """Every field and key of every input, one at a time, with the payload; each file restored after."""
    outcomes = []
    formats = inputs(root)
    explained = next(i for i in formats if i.name == "explain").file
    for number, given in enumerate(formats):
        original = given.file.read_text("utf-8")
        record = given.read()
        for index, (kind, at) in enumerate(places(record)):
            given.write(planted(record, kind, at, PAYLOAD), original)
            out = root / "out" / f"{number}-{index}"
            code, err = report(given, out, explained)
            page = out / "report.html"
            text = page.read_text("utf-8") if code == 0 and page.is_file() else None
            tables = {md.name: md.read_text("utf-8") for md in out.glob("*.md")} if code == 0 else {}
            outcomes.append(Outcome(given, kind, at, code, err, text, tables))
        given.file.write_text(original, "utf-8")
    return outcomes


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> list[Outcome]:
    return sweep(tmp_path_factory.mktemp("injection"))


def problem(outcome: Outcome) -> str | None:
    """What is wrong with how the report took one payload, or None."""
    if outcome.code == 2:
        lines = outcome.err.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("fmm-fast: error:"):
            return f"not one error line: {outcome.err[-2000:]}"
        named = (str(outcome.given.file), str(outcome.given.folder))  # a file of another kind: the folder
        return None if any(name in lines[0] for name in named) else f"names no file: {lines[0]}"
    if outcome.code != 0 or outcome.page is None:
        return f"exit {outcome.code}, no page: {outcome.err[-2000:]}"
    return f"markup on the page: {unescaped(outcome.page)}" if unescaped(outcome.page) else None


def test_every_field_of_every_input_is_text_or_refused(swept):
    outcomes = swept
    assert len(outcomes) > 150  # every field of six formats and the explain line
    problems = [f"{o.where}: {p}" for o in outcomes if (p := problem(o))]
    assert problems == [], "\n".join(problems)
    shown = [o for o in outcomes if o.page is not None and "PWNED" in o.page]
    assert len(shown) > 20  # many payloads reached a page, as text


def docs_site_html(text: str) -> str:
    """Markdown as HTML, rendered as the docs site renders it: Python-Markdown with mkdocs.yml's
    extensions and their options."""
    import markdown
    import yaml

    site = yaml.safe_load((Path(__file__).parents[1] / "mkdocs.yml").read_text())
    names, options = [], {}
    for entry in site["markdown_extensions"]:
        name, config = next(iter(entry.items())) if isinstance(entry, dict) else (entry, None)
        names.append(name)
        if config:
            options[name] = config
    return markdown.markdown(text, extensions=names, extension_configs=options)


LIVE_MARKUP = re.compile(r"<(script|svg|iframe|img)\b|<[^>]*\son\w+\s*=", re.IGNORECASE)  # a tag or a handler


def test_every_markdown_file_shows_payloads_as_text(swept):
    """Each .md of each report run, rendered as the docs site does: the payload is there as text, and no
    tag or event handler of it is live."""
    rendered = {
        f"{o.where}: {name}": docs_site_html(text)
        for o in swept
        for name, text in o.markdown.items()
        if "PWNED" in text
    }
    kinds = {where.split()[0] for where in rendered}
    assert {"evaluate", "masf", "roar", "aopc", "check"} <= kinds  # payloads reached every kind of table
    live = {where: LIVE_MARKUP.findall(html) for where, html in rendered.items() if LIVE_MARKUP.search(html)}
    assert live == {}


def explain_page_with_payloads(page: Path) -> None:
    """The explanations page with the payload in every string it shows: text, second segment, label,
    prediction, measure, model tokens and the lines about the run."""
    planted = explanation(
        [0.1, 0.2, 0.05, -0.3, 0.0, 0.4],
        text=PAYLOAD,
        pair=PAYLOAD,
        label=PAYLOAD,
        prediction=PAYLOAD + "x",
        measure=PAYLOAD,
    )
    tokens = [PAYLOAD if i else token for i, token in enumerate(planted.tokens)]
    write_explanations_page(page, [replace(planted, tokens=tokens)], [PAYLOAD])


def test_the_explanations_page_shows_payloads_as_text(tmp_path):
    page = tmp_path / "explained.html"
    explain_page_with_payloads(page)
    text = page.read_text("utf-8")
    assert unescaped(text) == []
    assert text.count("PWNED") >= 7  # each string is on the page, as text


def combined(outcomes: list[Outcome], given: Input) -> Any:
    """The record of `given` with the payload, each with its own mark, in every place the report accepted
    it and showed it: the fields first, then the keys (deepest first)."""
    shown = [o for o in outcomes if o.given is given and o.page is not None and "PWNED" in o.page]
    record = given.read()
    ordered = sorted(shown, key=lambda o: (o.kind == "key", -len(o.at)))
    for number, outcome in enumerate(ordered):
        record = planted(record, outcome.kind, outcome.at, PAYLOAD.replace("PWNED", f"PWNED-{number}"))
    return record


CHROMIUM = find_chromium()


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium on PATH; `make browser` installs it")
def test_no_payload_runs_in_a_browser(swept, tmp_path):
    assert CHROMIUM is not None
    outcomes = swept
    explained = next(o.given for o in outcomes if o.given.name == "explain").file
    pages = []
    for given in {o.given.name: o.given for o in outcomes}.values():
        original = given.file.read_text("utf-8")
        given.write(combined(outcomes, given), original)
        folder = given.folder
        if given.name == "evaluate":  # a folder name, shown as the results' place and in file paths
            folder = shutil.copytree(given.folder, tmp_path / NAME_PAYLOAD)
        out = tmp_path / f"report-{given.name}"
        code, err = report(Input(given.name, folder, given.file, given.lines), out, explained)
        given.file.write_text(original, "utf-8")
        assert code == 0, err
        pages.append(out / "report.html")
    pages.append(tmp_path / "explained.html")
    explain_page_with_payloads(pages[-1])
    bodies = [docs_site_html(t) for o in outcomes for t in o.markdown.values() if "PWNED" in t]
    markdown_page = tmp_path / "markdown.html"
    markdown_page.write_text(
        "<!doctype html><title>fmm-fast report</title><body>" + "".join(bodies) + "</body>", "utf-8"
    )
    pages.append(markdown_page)
    for page in pages:
        assert "PWNED" in page.read_text("utf-8")
        rendered = render(CHROMIUM, page)
        assert rendered.console_errors == [], page
        assert 'id="pwned-ran"' not in rendered.dom, page
        assert re.search(r"<title>fmm-fast (report|explanations)</title>", rendered.dom), page


PAGES = Path(__file__).parents[1] / "fmm_fast" / "report" / "pages"


def markup_outside_markup_py(source: str) -> list[str]:
    """Where a page module builds markup other than through markup(): an f-string holding a tag, the
    stdlib html module, or Html() of something other than an UPPER_CASE constant of this code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            literal = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if "<" in literal:
                found.append(f"line {node.lineno}: an f-string with a tag")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if "html" in names:
                found.append(f"line {node.lineno}: imports html")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Html":
            trusted = all(isinstance(a, ast.Name) and a.id.isupper() for a in node.args)
            if not trusted:
                found.append(f"line {node.lineno}: Html() of a value")
    return found


def test_pages_build_markup_only_through_markup():
    modules = sorted(p for p in PAGES.glob("*.py") if p.name not in ("markup.py", "browser.py"))
    assert len(modules) >= 7
    found = {p.name: f for p in modules if (f := markup_outside_markup_py(p.read_text("utf-8")))}
    assert found == {}
    broken = 'import html\nrow = f"<td>{html.escape(x)}</td>"\nHtml(label)'
    assert len(markup_outside_markup_py(broken)) == 3  # the check sees each way round markup()

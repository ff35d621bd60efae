"""Both pages in a real browser (headless Chromium, `make browser`): the explanations page shows words,
not sub-word pieces; both show their legends; nothing fails to load and the scripts run without error.
Each page is also screenshotted."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import pytest
from doubles import explanation
from test_report import write_masf, write_result

from fmm_fast.api import explain_texts, save_explanations
from fmm_fast.cli import main
from fmm_fast.report.pages.browser import Rendered, find_chromium, render, screenshot
from fmm_fast.report.pages.explain_page import write_explanations_page

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium on PATH; `make browser`")
PNG = b"\x89PNG\r\n\x1a\n"
# the tiny model's tokenizer spells rare words in pieces: kitchen e t t e, l o r
TEXTS = ["Mary journeyed to the kitchenette, lor.", "John went to the hallway."]


def loaded(page: Path) -> Rendered:
    """The page rendered; fails on a console error or anything the page would fetch."""
    assert CHROMIUM is not None
    rendered = render(CHROMIUM, page)
    assert rendered.console_errors == []
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", rendered.dom)  # only inline data and anchors
    for data in re.findall(r'<img src="data:image/png;base64,([^"]+)"', rendered.dom):
        assert base64.b64decode(data)[:8] == PNG
    return rendered


def text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def word_views(dom: str) -> list[tuple[str, list[str]]]:
    """Each word view: its whole text and the texts of its coloured spans."""
    views = re.findall(r'<div class="text words">(.*?)</div>', dom)
    return [
        (text_of(v), [text_of(s) for s in re.findall(r'<span class="s \w"[^>]*>(.*?)</span>', v)])
        for v in views
    ]


def token_views(dom: str) -> list[str]:
    return re.findall(r'<div class="text tokens">(.*?)</div>', dom)


def snap(page: Path, png: Path) -> None:
    assert CHROMIUM is not None
    screenshot(CHROMIUM, page, png)
    assert png.read_bytes()[:8] == PNG and png.stat().st_size > 10_000


def test_explanations_page_shows_words_in_a_browser(tiny_babi, tmp_path):
    checkpoint, _, _ = tiny_babi
    pairs, labels = ["Where is Mary?", "Where is John?"], ["kitchen", "hallway"]
    explanations = [
        e
        for measure in ("loo-sign", "grad-l2")
        for e in explain_texts(checkpoint, TEXTS, pairs, labels, measure=measure)
    ]
    assert any(token.startswith("Ġkitchen") for token in explanations[0].tokens)
    assert len(explanations[0].tokens) > len(TEXTS[0].split()) + 8  # pieces to merge, specials, question
    page = tmp_path / "explanations.html"
    write_explanations_page(page, explanations, ["tiny bAbI model"])
    dom = loaded(page).dom
    views = word_views(dom)
    assert len(views) == 4  # 2 examples × 2 measures
    for (text, words), expected in zip(views, [TEXTS[0]] * 2 + [TEXTS[1]] * 2, strict=True):
        assert text == expected and words == expected.split()  # whole words, as written
    assert "&lt;s&gt;" not in dom and "&lt;/s&gt;" not in dom  # special tokens hidden in both views
    tokens = [text_of(t) for t in re.findall(r"<span[^>]*>(.*?)</span>", token_views(dom)[0])]
    assert tokens[3:8] == ["Ġthe", "Ġkitchen", "e", "t", "t"]  # the pieces, one switch away
    legends = re.findall(r'<div class="legend" data-measure="([^"]+)"[^>]*>.*?<span class="bar (\w+)">', dom)
    assert legends == [("loo-sign", "diverging"), ("grad-l2", "sequential")]
    assert re.search(r'<tr data-id="ex-0" class="is-\w+ selected">', dom)  # the page's script ran
    snap(page, tmp_path / "explanations.png")


def test_html_report_renders_in_a_browser(tmp_path):
    runs = tmp_path / "runs"
    for seed in range(2):
        scores = {"rand": (0.0, 0.0), "loo-abs": (0.1, 0.4 + 0.1 * seed), "loo-sign": (0.3, 0.9)}
        write_result(runs, "sms", "masked", seed, scores, unmasked=0.9)
    write_masf(runs, {"masked (m.onnx)": [0.5] * 11})
    explained = tmp_path / "e.jsonl"
    save_explanations(explained, [explanation([0.1, 0.2, 0.05, -0.3, 0.0, 0.4], index=i) for i in range(3)])
    out = tmp_path / "report"
    assert main(["report", str(runs), "--out", str(out), "--html", "--explanations", str(explained)]) == 0
    dom = loaded(out / "report.html").dom
    assert dom.count('<img src="data:image/png;base64,') == 2  # the curves and the MaSF figure
    assert '<div class="legend" data-measure="loo-sign"' in dom
    assert [words for _, words in word_views(dom)] == [["ok", "lor,", "see", "you"]] * 3
    snap(out / "report.html", tmp_path / "report.png")

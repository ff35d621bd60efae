"""Every relative link in README.md and docs/ leads somewhere: the file exists, and a #anchor into a Markdown
page names one of its headings (mkdocs build --strict checks the site's pages too; this runs in `make test`
and covers the README and the raw records)."""

from __future__ import annotations

import pytest
from docs_markdown import ROOT, broken_links, documents, links, slug


@pytest.mark.parametrize("document", documents(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(document):
    assert broken_links(document) == []


def test_the_readme_links_the_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert {"docs/method.md", "docs/results/index.md", "docs/known-gaps.md"} <= set(links(readme))


def test_a_missing_file_or_heading_is_reported(tmp_path):
    (tmp_path / "there.md").write_text("# A page\n\n## Its `second` part: *here*\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#its-second-part-here) ![gone](missing.png) [bad](there.md#nowhere)\n"
        "`[in code](missing.md)` and\n\n```\n[in a block](missing.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "missing.png: no such file",
        "there.md#nowhere: no heading with anchor #nowhere in there.md",
    ]


def test_anchors_follow_the_site():
    assert slug("bAbI-2, seed 0 (2026-12-02)") == "babi-2-seed-0-2026-12-02"
    assert slug("Export to `ONNX`") == "export-to-onnx"

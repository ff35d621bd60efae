"""The screenshots in docs/ show the current pages: docs/screenshots.json records the digest of the code that
renders them (fmm_fast/report/) and of each PNG when `make screenshots` took them. Digests, not file dates:
a git checkout gives every file the time of the checkout."""

from __future__ import annotations

import importlib.util
import json

from docs_markdown import ROOT

PNG = b"\x89PNG\r\n\x1a\n"


def screenshots_script():
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "docs" / "screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_screenshots_were_taken_from_the_current_page_code():
    script = screenshots_script()
    record = json.loads(script.RECORD.read_text(encoding="utf-8"))
    assert record["viewer_sha256"] == script.viewer_digest(), (
        "fmm_fast/report/ changed since docs/*.png were taken: run `make screenshots` (needs `make browser`) "
        "and commit the PNGs with docs/screenshots.json"
    )
    assert set(record["png_sha256"]) == set(script.PAGES)
    for name, digest in record["png_sha256"].items():
        png = script.DOCS / name
        assert png.read_bytes()[:8] == PNG
        assert script.file_digest(png) == digest, f"docs/{name} is not the screenshot make screenshots took"


def test_the_digest_follows_the_page_code(tmp_path, monkeypatch):
    script = screenshots_script()
    for name in ("pages/units.py", "peer.py"):
        (tmp_path / "fmm_fast" / "report" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "fmm_fast" / "report" / name).write_text("x = 1\n", encoding="utf-8")
    monkeypatch.setattr(script, "ROOT", tmp_path)
    monkeypatch.setattr(script, "VIEWER", tmp_path / "fmm_fast" / "report")
    before = script.viewer_digest()
    (tmp_path / "fmm_fast" / "report" / "peer.py").write_text("x = 2\n", encoding="utf-8")  # a table's text
    assert script.viewer_digest() != before

"""Screenshots of the two pages for the README, rendered as tests/test_browser.py renders them.

    python docs/screenshots.py EXPLAIN.html REPORT.html

writes docs/explain-page.png and docs/report-page.png (headless Chromium: `make browser`). The committed ones
come from a MiniLM fine-tuned (masked) on 800 movie-snippets sentences: `fmm-fast explain --measure loo-abs
--measure grad-l2 --measure int-grad-sign --limit 100 --html` and `fmm-fast report --html` over its
evaluate (2 seeds, 30 sentences), `evaluate --protocol aopc` and `masf` runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fmm_fast.report.pages.browser import find_chromium, render, screenshot

DOCS = Path(__file__).resolve().parent


def main(explain_page: Path, report_page: Path) -> None:
    browser = find_chromium()
    if browser is None:
        sys.exit("no headless Chromium on PATH; run `make browser`")
    for page, name, height in (
        (explain_page, "explain-page.png", 860),
        (report_page, "report-page.png", 1100),
    ):
        errors = render(browser, page).console_errors
        if errors:
            sys.exit(f"{page}: {errors}")
        print(screenshot(browser, page, DOCS / name, height=height))


if __name__ == "__main__":
    main(*(Path(argument) for argument in sys.argv[1:3]))

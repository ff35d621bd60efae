"""The two screenshots in the docs, made from the current code: `make screenshots`.

    python docs/screenshots.py [WORK_DIR]        (default: build/screenshots)

Fine-tunes MiniLM (masked) on 1,500 movie-snippets sentences for one epoch at lr 1e-4, then runs
`fmm-fast explain --html` (loo-abs, grad-l2, int-grad-sign on 100 test sentences), `evaluate` (2 seeds, 30
sentences), `aopc`, `masf` and `report --html` over them, and photographs both pages in headless Chromium
(`make browser`): docs/explain-page.png and docs/report-page.png. A rerun reuses the trained model and the
finished evaluate/aopc/masf steps, and always renders the pages again.

Beside the PNGs it writes docs/screenshots.json: the digest of the code that renders the pages (every file
of fmm_fast/report/, which writes the pages and the tables in them) and of each PNG.
tests/test_docs_screenshots.py fails when that code changed after the screenshots were taken; file dates
cannot tell, a checkout resets them.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
VIEWER = ROOT / "fmm_fast" / "report"
RECORD = DOCS / "screenshots.json"
PAGES = {"explain-page.png": 860, "report-page.png": 1100}  # PNG name: height in pixels


def viewer_digest() -> str:
    """sha256 over the path and bytes of every .py file under fmm_fast/report/, in path order."""
    digest = hashlib.sha256()
    for path in sorted(VIEWER.rglob("*.py")):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fmm_fast(*arguments: str | Path) -> None:
    command = [sys.executable, "-m", "fmm_fast", *map(str, arguments)]
    print("$", " ".join(command[2:]), flush=True)
    subprocess.run(command, check=True)


def make_pages(work: Path) -> tuple[Path, Path]:
    """Run the commands (reusing what a previous run finished); the two HTML pages."""
    checkpoint, onnx = work / "train" / "model", work / "model.onnx"
    explanations = work / "explanations.jsonl"
    data = ["--dataset", "movie-snippets"]
    measures = ["--measure", "loo-abs", "--measure", "grad-l2"]
    if not (checkpoint / "fmm_info.json").is_file():
        fmm_fast("train", "--quiet", *data, "--model", "minilm", "--lr", "1e-4", "--size", "1500",
                 "--epochs", "1", "--strategy", "masked", "--out", work / "train", "--overwrite")
    if not onnx.is_file():
        fmm_fast("export", "--model", checkpoint, "--out", onnx)
    fmm_fast("explain", "--quiet", "--model", checkpoint, *data, *measures, "--measure", "int-grad-sign",
             "--limit", "100", "--out", explanations, "--html", "--overwrite")
    fmm_fast("evaluate", "--quiet", "--model", checkpoint, *data, *measures, "--limit", "30",
             "--seed", "0", "--seed", "1", "--out", work / "eval")
    fmm_fast("aopc", "--quiet", "--model", checkpoint, *data, *measures, "--limit", "30",
             "--out", work / "aopc")
    fmm_fast("masf", "--quiet", "--model", onnx, *data, "--size", "1500", "--limit", "100",
             "--out", work / "masf")
    fmm_fast("report", work / "eval", work / "aopc", work / "masf", "--out", work / "report", "--html",
             "--explanations", explanations, "--overwrite")
    return explanations.with_suffix(".html"), work / "report" / "report.html"


def main(work: Path) -> None:
    from fmm_fast.report.pages.browser import find_chromium, render, screenshot

    browser = find_chromium()
    if browser is None:
        sys.exit("no headless Chromium on PATH; run `make browser`")
    work.mkdir(parents=True, exist_ok=True)
    code = viewer_digest()
    pngs = {}
    for page, (name, height) in zip(make_pages(work), PAGES.items(), strict=True):
        errors = render(browser, page).console_errors
        if errors:
            sys.exit(f"{page}: {errors}")
        pngs[name] = file_digest(screenshot(browser, page, DOCS / name, height=height))
        print("wrote", DOCS / name)
    if viewer_digest() != code:
        sys.exit("fmm_fast/report/ changed while the screenshots were taken; run it again")
    RECORD.write_text(json.dumps({"viewer_sha256": code, "png_sha256": pngs}, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "screenshots")

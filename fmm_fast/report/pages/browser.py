"""Rendering a page in headless Chromium: its DOM after the page's script ran, its console errors and a
screenshot. The browser tests and docs/screenshots.py use it; `make test` installs Chromium (Debian) where it
can, `make browser` anyway."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
TIMEOUT_SECONDS = 180


def find_chromium() -> str | None:
    """The first headless-capable Chromium on PATH, or None."""
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


@dataclass(frozen=True)
class Rendered:
    """A page as the browser built it: dom (HTML after scripts ran) and the console's error lines."""

    dom: str
    console_errors: list[str]


def _run(browser: str, page: Path, *arguments: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--mute-audio"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        flags.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    with tempfile.TemporaryDirectory(prefix="fmm-fast-chromium-") as profile:
        return subprocess.run(
            [browser, *flags, f"--user-data-dir={profile}", *arguments, Path(page).resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            check=True,
        )


def render(browser: str, page: Path) -> Rendered:
    """The page's DOM once loaded, and every console message that reports an error (uncaught exceptions,
    resources that failed to load)."""
    done = _run(browser, page, "--enable-logging=stderr", "--v=0", "--dump-dom")
    errors = [
        line
        for line in done.stderr.splitlines()
        if "CONSOLE" in line and any(word in line for word in ("Uncaught", "Failed", "Error", "error"))
    ]
    return Rendered(done.stdout, errors)


def screenshot(browser: str, page: Path, png: Path, width: int = 1400, height: int = 900) -> Path:
    """A PNG of the page's first `width` × `height` pixels."""
    _run(browser, page, f"--screenshot={Path(png).resolve()}", f"--window-size={width},{height}")
    return png

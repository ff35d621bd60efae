"""Helpers for every command that writes a JSON run record: versions, atomic JSON, output dirs, timing."""

from __future__ import annotations

import json
import os
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from fmm_fast.errors import UserError

RECORDED_PACKAGES = ("fmm-fast", "torch", "transformers", "onnxruntime", "numpy")


def versions() -> dict[str, str]:
    """Python, platform and the versions of the installed packages that results depend on."""
    found = {"python": platform.python_version(), "platform": platform.platform()}
    for package in RECORDED_PACKAGES:
        try:
            found[package.replace("-", "_")] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def _to_json(value: Any) -> Any:
    """json.dump's fallback: numpy scalars and arrays become Python numbers and lists, paths strings."""
    if hasattr(value, "tolist"):  # numpy arrays and scalars (and torch tensors)
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def write_json(path: str | Path, record: Any) -> None:
    """Write `record` as indented JSON; atomic (a temporary file renamed over `path`), so readers never
    see half a record."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(record, indent=2, default=_to_json) + "\n")
    os.replace(temporary, path)


def ensure_writable(directory: str | Path) -> Path:
    """Create `directory` (and parents) if needed; UserError when it is a file or cannot be written to."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise UserError(f"output path {directory} is a file; choose a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(
            f"cannot create output directory {directory} ({error.strerror}); choose another path"
        ) from error
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UserError(f"output directory {directory} is not writable; choose another path")
    return directory


def prepare_out_dir(path: str | Path, allowed: set[str] | frozenset[str] = frozenset()) -> Path:
    """A writable output directory that holds nothing but the `allowed` names (created when missing).

    UserError when it already holds anything else, so one run never mixes its files with another's.
    """
    path = Path(path)
    if path.is_dir():
        unexpected = sorted(entry.name for entry in path.iterdir() if entry.name not in allowed)
        if unexpected:
            raise UserError(f"output directory {path} is not empty; choose a new --out or remove it")
    return ensure_writable(path)


class Stopwatch:
    """Wall time since creation, or since entering `with Stopwatch() as clock:` until leaving it."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.stop: float | None = None

    def __enter__(self) -> Stopwatch:
        self.start = time.perf_counter()
        self.stop = None
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop = time.perf_counter()

    @property
    def seconds(self) -> float:
        return (self.stop if self.stop is not None else time.perf_counter()) - self.start

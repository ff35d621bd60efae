"""Output ownership: a run writes only into a new output, or into one that holds the same run.

A claimed directory gets RUN_MARKER: the run's kind and fingerprint fields (everything that shapes its
numbers). A later command may write there only when its kind and fields are equal (it resumes, or restarts,
that run), or with --overwrite, which first removes what the earlier run wrote. Output files (explain's
.jsonl, export's .onnx) have no marker: an existing one is only replaced with --overwrite.

While a command writes, it holds a lock (fcntl.flock on LOCK_NAME in the directory, or on `.NAME.lock`
beside a file), so a second process writing the same output exits at once. The OS releases a flock when
the process ends, crash and SIGKILL included, so a lock file left on disk never blocks a later run.
"""

from __future__ import annotations

import fcntl
import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from fmm_fast.core.errors import UserError
from fmm_fast.core.records import ensure_writable, read_record, write_record

RUN_MARKER = ".fmm-fast-run.json"
LOCK_NAME = ".fmm-fast.lock"


@contextmanager
def output_lock(path: Path, file: bool = False) -> Iterator[None]:
    """Hold the lock of output `path` (a directory, created if needed, or with `file` a file) for the
    `with` block.

    UserError at once when another process holds it. A directory whose run failed before it wrote anything
    but its marker is released: a corrected rerun may take it.
    """
    if file:
        ensure_writable(path.parent)
        lock_path = path.with_name(f".{path.name}.lock")
    else:
        lock_path = ensure_writable(path) / LOCK_NAME
    handle: IO[str] = lock_path.open("a")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(
                f"another fmm-fast process is writing {path} (it holds {lock_path}); wait for it to end "
                "or choose another --out"
            ) from None
        try:
            yield
        except BaseException:
            if path.is_dir() and not _occupants(path, lambda name: name == RUN_MARKER):
                (path / RUN_MARKER).unlink(missing_ok=True)
            raise
    finally:
        handle.close()  # closing releases the flock


def read_marker(directory: Path) -> dict[str, Any] | None:
    """The run marker of `directory`, None when it has none; UserError when it is unreadable."""
    path = directory / RUN_MARKER
    if not path.is_file():
        return None
    try:
        marker = read_record(path)
        if not isinstance(marker.get("fields"), dict):
            raise ValueError("not a run marker")
    except (OSError, UnicodeDecodeError, ValueError, LookupError, TypeError) as error:
        raise UserError(
            f"{path} is damaged ({error}); remove {directory} or pass --overwrite to replace it"
        ) from error
    return marker


def differences(recorded: dict[str, Any], wanted: dict[str, Any], prefix: str = "") -> list[str]:
    """`key (recorded → wanted)` for every leaf where two field dicts differ, nested keys dotted."""
    found = []
    for key in sorted(set(recorded) | set(wanted)):
        old, new = recorded.get(key), wanted.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            found += differences(old, new, f"{prefix}{key}.")
        elif old != new:
            found.append(f"{prefix}{key} ({_short(old)} → {_short(new)})")
    return found


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 24 else text[:12] + "…"


def _is_fmm_output(directory: Path) -> bool:
    """Whether the directory, or one of its subdirectories, is a run fmm-fast claimed."""
    return (directory / RUN_MARKER).is_file() or any(
        (child / RUN_MARKER).is_file() for child in directory.iterdir() if child.is_dir()
    )


def _clear(directory: Path) -> None:
    """Remove everything in `directory` but its lock (which this process holds)."""
    for entry in directory.iterdir():
        if entry.name == LOCK_NAME:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _occupants(directory: Path, own: Callable[[str], bool]) -> list[str]:
    return sorted(e.name for e in directory.iterdir() if e.name != LOCK_NAME and not own(e.name))


def check_directory(directory: Path, kind: str, fields: dict[str, Any], overwrite: bool = False) -> bool:
    """Whether `directory` may take this run (True: it is new, empty or holds this same run).

    UserError naming the difference when it holds another run, or files that are not a run; False when
    --overwrite asks to replace an earlier run (the caller clears it under the lock with `claim_directory`).
    Reads only: nothing is created or changed.
    """
    fields = _as_recorded(fields)
    if directory.exists() and not directory.is_dir():
        raise UserError(f"output path {directory} is a file; choose a directory")
    if not directory.is_dir() or not _occupants(directory, lambda name: False):
        return True
    marker = read_marker(directory) if not overwrite else None
    if marker is not None:
        if marker.get("kind") == kind and marker["fields"] == fields:
            return True
        changed = "kind" if marker.get("kind") != kind else ", ".join(differences(marker["fields"], fields))
        raise UserError(
            f"{directory} holds another {marker.get('kind')} run (it differs in {changed}); choose a new "
            "--out, rerun with the same options to resume it, or pass --overwrite to replace it"
        )
    if overwrite and _is_fmm_output(directory):
        return False
    advice = "; --overwrite replaces only an earlier fmm-fast run: remove them yourself" if overwrite else ""
    raise UserError(
        f"output directory {directory} holds files that are not this run's "
        f"({_listing(_occupants(directory, lambda name: False))}); choose a new --out{advice}"
    )


def _listing(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def claim_directory(directory: Path, kind: str, fields: dict[str, Any], overwrite: bool = False) -> None:
    """Make `directory` this run's: check it (see check_directory), clear it when --overwrite replaces an
    earlier run, and write the marker. Call it while holding `output_lock(directory)`."""
    if not check_directory(directory, kind, fields, overwrite):
        _clear(directory)
    if not (ensure_writable(directory) / RUN_MARKER).is_file():
        write_record(directory / RUN_MARKER, {"kind": kind, "fields": _as_recorded(fields)})


def _as_recorded(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields as the marker gives them back (tuples become lists), so equal runs compare equal."""
    return json.loads(json.dumps(fields))


def check_container(directory: Path, own: Callable[[str], bool], overwrite: bool = False) -> None:
    """A directory of several runs (evaluate's OUT/seed-S/ and the curves beside them): UserError when it
    holds any entry `own` does not accept; with --overwrite the accepted entries are removed (under the
    caller's lock)."""
    if directory.exists() and not directory.is_dir():
        raise UserError(f"output path {directory} is a file; choose a directory")
    if not directory.is_dir():
        return
    foreign = _occupants(directory, own)
    if foreign:
        raise UserError(
            f"output directory {directory} holds files of another run ({_listing(foreign)}); "
            "choose a new --out"
        )
    if overwrite:
        _clear(directory)


def check_file(path: Path, overwrite: bool) -> None:
    """UserError when output file `path` exists and --overwrite was not given, or when it is a directory."""
    if path.is_dir():
        raise UserError(f"--out {path} is a directory; give a file name")
    if path.exists() and not overwrite:
        raise UserError(f"{path} already exists; choose another --out or pass --overwrite to replace it")

"""Output ownership: a run writes only into a new output, or into one that holds the same run, and it only
ever replaces or removes what a marker says fmm-fast wrote.

A claimed directory gets RUN_MARKER: the run's kind, its fingerprint fields (everything that shapes its
numbers), the names of the entries the run writes there ("files") and, once the run has written everything,
"finished" (a new claim clears it): a pipeline of runs (the demo, the reproduction study) skips a step whose
marker says it finished with the same fingerprint and redoes one whose settings changed. A later command
may write there only when its kind and fields are equal (it resumes, or restarts, that run), or, for the
same kind, with --overwrite, which first removes the entries the earlier marker lists (a listed directory
with a marker of its own, e.g. evaluate's OUT/seed-S, loses only what its own marker lists). Anything
else in the directory (a user's notes, a file named like fmm-fast's own but unlisted) is never touched, and
a directory holding such files without a marker is never claimed. A container of runs (evaluate's OUT) is
claimed the same way, with the fields its seeds share. Output files (explain's .jsonl, export's .onnx)
carry their mark in their content: an existing one is replaced only with --overwrite and only when it is
fmm-fast's.

While a command writes, it holds a lock (fcntl.flock on LOCK_NAME in the directory, or on `.NAME.lock`
beside a file), taken before any model or data loads, so a second process writing the same output exits
at once. The lock file is removed as the command ends (a later taker checks it locked the file still in
place); the OS releases a flock when the process ends, crash and SIGKILL included, so a lock file a killed
run leaves on disk never blocks a later run.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from fmm_fast.core.errors import UserError
from fmm_fast.core.reading import read_checked, shape_error
from fmm_fast.core.records import ensure_writable, write_record
from fmm_fast.core.writing import is_staging, writing_into

RUN_MARKER = ".fmm-fast-run.json"
LOCK_NAME = ".fmm-fast.lock"
MARKER_SHAPE = {"kind": str, "fields": dict}  # "files" ([str]) is absent from markers of older versions
_OWN = (RUN_MARKER, LOCK_NAME)  # the marker and the lock (and a marker half-written: see _occupants)


@contextmanager
def output_lock(path: Path, file: bool = False) -> Iterator[None]:
    """Hold the lock of output `path` (a directory, created if needed, or with `file` a file) for the
    `with` block.

    UserError at once when another process holds it. A directory whose run failed before it wrote anything
    but its marker is released: a corrected rerun may take it (and a directory this call created is
    removed again).
    """
    created = not path.exists()
    if file:
        ensure_writable(path.parent)
        lock_path = path.with_name(f".{path.name}.lock")
    else:
        lock_path = ensure_writable(path) / LOCK_NAME
    handle, made_lock = _acquire(lock_path, path)
    try:
        try:
            with writing_into(path.parent if file else path):
                yield
        except BaseException:
            if not file and path.is_dir() and not _occupants(path):
                (path / RUN_MARKER).unlink(missing_ok=True)
                if created:  # nothing of this failed run remains: leave no empty directory behind
                    lock_path.unlink(missing_ok=True)
                    path.rmdir()
            raise
    finally:
        if made_lock:  # still held: no lock file this run made outlives it (one found there stays)
            lock_path.unlink(missing_ok=True)
        handle.close()  # closing releases the flock


def _acquire(lock_path: Path, path: Path) -> tuple[IO[str], bool]:
    """The open, flocked lock file of output `path` and whether this call made the file; UserError when
    another process holds it.

    A holder removes the file as it finishes, so a lock taken on a file that is no longer at `lock_path`
    (opened just before its removal) guards nothing: it is dropped and the lock taken again on the new file.
    """
    while True:
        made = not lock_path.exists()
        handle: IO[str] = lock_path.open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise UserError(
                f"another fmm-fast process is writing {path} (it holds {lock_path}); wait for it to end "
                "or choose another --out"
            ) from None
        try:
            current = os.stat(lock_path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(handle.fileno()).st_ino:
            return handle, made
        handle.close()


def read_marker(directory: Path) -> dict[str, Any] | None:
    """The run marker of `directory`, None when it has none; UserError when it is damaged."""
    path = directory / RUN_MARKER
    if not path.is_file():
        return None
    fix = (
        f"fmm-fast cannot tell which files of {directory} it wrote: move what you keep and remove the "
        "directory yourself, or choose another --out"
    )
    marker = read_checked(path, MARKER_SHAPE, fix)
    if "files" in marker and (error := shape_error(marker["files"], [str], "files")):
        raise UserError(f"{path} is damaged or not what fmm-fast wrote ({error}); {fix}")
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


def _occupants(directory: Path) -> list[str]:
    """The entries of `directory` besides its marker and lock."""
    return sorted(
        e.name for e in directory.iterdir() if e.name not in _OWN and not is_staging(e.name, RUN_MARKER)
    )


def _listing(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def check_directory(
    directory: Path,
    kind: str,
    fields: dict[str, Any],
    overwrite: bool = False,
) -> bool:
    """Whether `directory` may take this run as it is (True: it is new, empty or holds this same run).

    False when it holds an earlier run of the same kind and --overwrite asks to replace it (the caller
    clears it under the lock with `claim_directory`). UserError naming the difference when it holds
    another run without --overwrite, a run of another kind, or files without a marker. Reads only: nothing
    is created or changed.
    """
    fields = as_recorded(fields)
    if directory.exists() and not directory.is_dir():
        raise UserError(f"output path {directory} is a file; choose a directory")
    if not directory.is_dir() or not _occupants(directory):
        return True
    marker = read_marker(directory)
    _check_links(directory, (marker or {}).get("files", []))
    if marker is None:
        advice = "; --overwrite replaces only what an fmm-fast run wrote: move them yourself"
        raise UserError(
            f"output directory {directory} holds files that are not this run's "
            f"({_listing(_occupants(directory))}); choose a new --out{advice if overwrite else ''}"
        )
    if marker["kind"] != kind:
        raise UserError(
            f"{directory} holds another run, of `fmm-fast {marker['kind']}` (it differs in kind); choose "
            f"a new --out (--overwrite replaces only an earlier {kind} run)"
        )
    changed = differences(marker["fields"], fields)
    if not changed:
        return True
    if overwrite:
        _check_removable(directory, marker)
        return False
    raise UserError(
        f"{directory} holds another {kind} run (it differs in {', '.join(changed)}); choose a new --out, "
        "rerun with the same options to resume it, or pass --overwrite to replace it"
    )


def _foreign(directory: Path, marker: dict[str, Any], prefix: str = "") -> list[str]:
    """The entries, at any depth, of the listed directories with markers of their own (OUT/seed-S,
    OUT/seed-S/MEASURE, ...) that their markers do not list, as paths relative to `directory`."""
    found = []
    for name in marker.get("files", []):
        inner = read_marker(directory / name) if (directory / name).is_dir() else None
        if inner is not None:
            own = inner.get("files", [])
            found += [f"{prefix}{name}/{e}" for e in _occupants(directory / name) if not _owned(e, own)]
            found += _foreign(directory / name, inner, f"{prefix}{name}/")
    return found


def _check_links(directory: Path, names: Sequence[str]) -> None:
    """UserError when an entry `names` lists (one the run writes into) is a symbolic link to a folder
    outside `directory`: the run would write through it (a link to a file is replaced, never followed:
    core.writing, which also refuses any other write that would leave the output)."""
    real = Path(os.path.realpath(directory))
    for entry in (directory / name for name in names):
        target = Path(os.path.realpath(entry))
        if entry.is_symlink() and target.is_dir() and real not in target.parents:
            raise UserError(
                f"{entry} is a symbolic link out of the output {directory} (to {target}); fmm-fast writes "
                "only inside its --out: remove the link, or choose another --out"
            )


def _check_removable(directory: Path, marker: dict[str, Any]) -> None:
    """UserError when a run that --overwrite would remove (a listed directory with its own marker, e.g.
    OUT/seed-S, or one inside it) holds entries its marker does not list: they would outlive it inside the
    new run's place, so nothing is removed until the user moves them."""
    foreign = _foreign(directory, marker)
    if foreign:
        raise UserError(
            f"--overwrite would replace the runs in {directory}, but they hold files fmm-fast did not write "
            f"({_listing(foreign)}); move them out first, or choose a new --out"
        )


def claim_directory(
    directory: Path,
    kind: str,
    fields: dict[str, Any],
    overwrite: bool = False,
    files: Sequence[str] = (),
) -> None:
    """Make `directory` this run's: check it (see check_directory), remove what the earlier run wrote when
    --overwrite replaces it, and write the marker, which lists `files` (the entries this run writes there)
    besides those an earlier claim of this same run listed. Call it while holding `output_lock(directory)`.
    """
    keep = check_directory(directory, kind, fields, overwrite)
    marker = read_marker(directory) if directory.is_dir() else None
    _check_unlisted(directory, marker, files)
    if not keep:
        remove_owned(directory, files)
        marker = None
    listed = list(dict.fromkeys([*(marker or {}).get("files", []), *files]))
    wanted = {"kind": kind, "fields": as_recorded(fields), "files": listed}
    if marker != wanted:
        write_record(ensure_writable(directory) / RUN_MARKER, wanted)


def _check_unlisted(directory: Path, marker: dict[str, Any] | None, files: Sequence[str]) -> None:
    """UserError when an entry this run writes already exists in `directory` but its marker does not list
    it (a user's report.html beside an earlier report that wrote none): fmm-fast did not write it, so it
    is neither replaced nor removed. A marker of an older version lists nothing: its entries are the run's.
    """
    if marker is None or "files" not in marker:
        return
    unlisted = [n for n in files if n not in marker["files"] and os.path.lexists(directory / n)]
    if unlisted:
        raise UserError(
            f"{directory} holds files fmm-fast did not write where this run writes ({_listing(unlisted)}); "
            "move them out, or choose a new --out"
        )


def claim_part(directory: Path, kind: str, fields: dict[str, Any], files: Sequence[str]) -> None:
    """Claim `directory`, an entry that the marker of its parent (claimed by this run) lists, for the part
    of the run written there (a seed, a measure, a step of roar), listing `files`: as claim_directory, so
    --overwrite of the parent removes only what each level lists. A directory that an older version wrote
    without a marker of its own is the run's already (the parent's marker lists it): it gets one."""
    if directory.is_dir() and read_marker(directory) is None and _occupants(directory):
        write_record(directory / RUN_MARKER, {"kind": kind, "fields": as_recorded(fields), "files": [*files]})
    else:
        claim_directory(directory, kind, fields, files=files)


def list_files(directory: Path, files: Sequence[str]) -> None:
    """Add `files` to the entries the marker of `directory` (claimed by this run, or by the step it took
    over, e.g. roar's step-0 training) lists, before they are written."""
    marker = read_marker(directory)
    if marker is None:
        raise ValueError(f"{directory} has no run marker: claim it before listing its files")
    _check_unlisted(directory, marker, files)
    listed = list(dict.fromkeys([*marker.get("files", []), *files]))
    if listed != marker.get("files"):
        write_record(directory / RUN_MARKER, {**marker, "files": listed})


def finish_run(directory: Path) -> None:
    """Note in the marker of `directory` (claimed by this run) that the run has written everything."""
    marker = read_marker(directory)
    if marker is None:
        raise ValueError(f"{directory} has no run marker: claim it before finishing its run")
    write_record(directory / RUN_MARKER, {**marker, "finished": True})


def holds_run(directory: Path, kind: str, fields: dict[str, Any]) -> bool:
    """Whether `directory` holds a run (finished or not) of `kind` with these fingerprint fields. Reads
    only."""
    marker = read_marker(directory) if directory.is_dir() else None
    if marker is None or marker["kind"] != kind:
        return False
    return not differences(marker["fields"], as_recorded(fields))


def finished_run(directory: Path, kind: str, fields: dict[str, Any]) -> bool:
    """Whether `directory` holds a finished run of `kind` with these fingerprint fields (see holds_run)."""
    if not holds_run(directory, kind, fields):
        return False
    return (read_marker(directory) or {}).get("finished") is True


def remove_owned(directory: Path, files: Sequence[str] = ()) -> None:
    """Remove what the marker of `directory` lists (a marker of an older version lists nothing: then the
    entries `files` of the run replacing it, which the same command writes), and the marker. A listed
    directory with a marker of its own loses only what that marker lists, and goes when it is then empty;
    one without is fmm-fast's whole (state/, model/). Nothing unlisted is touched."""
    if not directory.is_dir():
        return
    marker = read_marker(directory) or {}
    listed = marker.get("files", files)
    for entry in [e for e in directory.iterdir() if _owned(e.name, listed)]:
        if entry.is_dir() and not entry.is_symlink():
            if (entry / RUN_MARKER).is_file():
                remove_owned(entry)
                if not any(entry.iterdir()):
                    entry.rmdir()
            else:
                shutil.rmtree(entry)
        elif entry.exists() or entry.is_symlink():
            entry.unlink()
    (directory / RUN_MARKER).unlink(missing_ok=True)


def _owned(entry: str, names: Sequence[str]) -> bool:
    """Whether directory entry `entry` is one of `names` or a staging file of one of them or of the marker
    (what core.writing leaves when killed mid-write)."""
    return entry in names or any(is_staging(entry, name) for name in [*names, RUN_MARKER])


def as_recorded(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields as the marker gives them back (tuples become lists), so equal runs compare equal."""
    return json.loads(json.dumps(fields))


def check_file(path: Path, overwrite: bool, written_by_fmm: Callable[[Path], bool], what: str) -> None:
    """UserError when output file `path` is a directory, exists without --overwrite, or exists and is not
    fmm-fast's `what` (`written_by_fmm(path)` reads the mark in its content): only those are replaced."""
    if path.is_dir():
        raise UserError(f"--out {path} is a directory; give a file name")
    if not path.exists():
        return
    if not overwrite:
        raise UserError(f"{path} already exists; choose another --out or pass --overwrite to replace it")
    if not written_by_fmm(path):
        raise UserError(
            f"{path} is not {what} fmm-fast wrote; --overwrite replaces only those: move it or choose "
            "another --out"
        )

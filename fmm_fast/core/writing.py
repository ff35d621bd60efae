"""The one way fmm-fast writes a file: every record, table, figure, page, array file, model and cache goes
through `replacing` (or its `write_text` / `write_bytes`), so no reader ever sees half a file and no
write ever lands outside the output it was meant for.

- Atomic: the content goes to a new staging file beside the target (`.NAME.PID.tmp[SUFFIX]`, opened with
  O_EXCL | O_NOFOLLOW, so it is never someone else's file or link), is fsynced, and is renamed over the
  target with os.replace. A killed write leaves at most a staging file (outputs.remove_owned clears it).
- Symlinks: a symbolic link at the path being written is replaced, as an entry, by the new file; its
  target is never opened, so a link planted at `OUT/curves.csv` cannot make fmm-fast overwrite the file
  it points to. A path inside an output this process holds (core.outputs.output_lock registers it with
  `writing_into`) whose folder leads out of that output through a symbolic link (`OUT/seed-0 -> /etc`)
  is refused with one line, before anything is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from fmm_fast.core.disk_errors import naming
from fmm_fast.core.errors import UserError

_ROOTS: list[Path] = []  # the outputs this process writes into now (output_lock holds their locks)
STAGING_MARK = ".tmp"


@contextmanager
def writing_into(root: Path) -> Iterator[None]:
    """Within the block, refuse writes under `root` whose folder resolves outside it (see the module)."""
    _ROOTS.append(Path(os.path.abspath(root)))
    try:
        yield
    finally:
        _ROOTS.pop()


def staging_name(name: str, suffix: str = "") -> str:
    """The staging file of an entry `name` of this process (suffix: a format some writers pick by it)."""
    return f".{name}.{os.getpid()}{STAGING_MARK}{suffix}"


def is_staging(entry: str, name: str) -> bool:
    """Whether directory entry `entry` is a staging file of `name` (of any process, any version)."""
    return entry.startswith(f".{name}.") and STAGING_MARK in entry[len(name) + 1 :]


def check_inside(path: Path) -> None:
    """UserError when `path` lies in a registered output but its folder resolves outside that output."""
    absolute = Path(os.path.abspath(path))
    for root in _ROOTS:
        if absolute != root and root in absolute.parents:
            real_root, real_folder = Path(os.path.realpath(root)), Path(os.path.realpath(absolute.parent))
            if real_folder != real_root and real_root not in real_folder.parents:
                raise UserError(
                    f"cannot write {path}: its folder is a symbolic link out of the output {root} (to "
                    f"{real_folder}); remove the link, or choose another --out"
                )


@contextmanager
def replacing(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a new, empty staging file beside `path`; when the block ends without error, fsync it and
    rename it over `path` (a link there is replaced, not followed). On error the staging file is removed
    and `path` is left as it was. `suffix` ends the staging file's name, for writers that choose a
    format by it (np.savez, ONNX Runtime)."""
    path = Path(path)
    check_inside(path)
    staged = path.with_name(staging_name(path.name, suffix))
    with naming(path, staged):  # a full or read-only disk: an OSError naming `path`, not the staging file
        if staged.is_symlink() or staged.exists():  # left by a killed process that had this pid
            staged.unlink()
        os.close(os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666))
        try:
            yield staged
            descriptor = os.open(staged, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
            os.replace(staged, path)
        except BaseException:
            with suppress(OSError):  # the error that stopped the write is the one to report
                staged.unlink(missing_ok=True)
            raise


def write_text(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` through `replacing`."""
    with replacing(path) as staged:
        staged.write_text(text, encoding="utf-8")


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through `replacing`."""
    with replacing(path) as staged:
        staged.write_bytes(data)

"""OS errors that are the disk's or the user's, not fmm-fast's: a full disk or quota, a read-only file
system, a path fmm-fast may not write (or read), a failing disk.

The CLI ends such an error with one line naming the path, the error and what to do, and exit code 2
(`disk_error_line`); every step a run finished before is on disk already, so a rerun resumes. For that,
the error must name its path: a buffered write's ENOSPC names none, a staging file is not the file the
user knows of, and savers written in C++ or Rust (safetensors, tokenizers) report a failed write in their
own exception types. Writers therefore write inside `naming(path)`, which re-raises all of those as an
OSError naming `path`. Any other OSError (a missing file fmm-fast should have made, ...) is a fault of
fmm-fast and keeps its traceback.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_SPACE = "free space there, or choose an --out on another disk"
ADVICE = {
    errno.ENOSPC: _SPACE,
    errno.EDQUOT: f"your disk quota is used up: {_SPACE}",
    errno.EFBIG: "the file system cannot hold a file this large: choose an --out on another disk",
    errno.EROFS: "choose an --out on a writable file system",
    errno.EACCES: "fix its permissions, or choose another --out",
    errno.EPERM: "fix its permissions, or choose another --out",
    errno.EIO: "the disk failed: check it, or choose an --out on another disk",
}
# A failed write as Rust's std::io::Error shows it ("No space left on device (os error 28)").
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def disk_error_line(error: OSError) -> str | None:
    """The one line for `error` (without the program's prefix) when it is one of ADVICE's and names its
    path; None otherwise (the caller lets it raise)."""
    if error.errno not in ADVICE or not error.filename:
        return None
    reason = error.strerror or os.strerror(error.errno)
    return (
        f"{error.filename}: {reason}; {ADVICE[error.errno]}, then rerun the same command: what finished is "
        "kept and the run resumes"
    )


@contextmanager
def naming(path: str | Path, *staging: str | Path) -> Iterator[None]:
    """Writes to `path` in the block end, when the OS refuses them, in an OSError naming `path` (see the
    module): one that names no file, or names one of `staging` (a file or folder written first and
    renamed to `path` after, a name the user never gave) or a file in it, and a saver's own error type
    that carries the OS error number in its message."""
    try:
        yield
    except OSError as error:
        if error.errno is None or (error.filename and not _inside(error.filename, staging)):
            raise
        raise OSError(error.errno, error.strerror, str(path)) from error
    except Exception as error:
        found = _RUST_OS_ERROR.search(str(error))
        if found is None or int(found.group(1)) not in ADVICE:
            raise
        number = int(found.group(1))
        raise OSError(number, os.strerror(number), str(path)) from error


def _inside(filename: str | bytes, places: tuple[str | Path, ...]) -> bool:
    """Whether `filename` is one of `places` or lies in one."""
    named = Path(os.path.abspath(os.fsdecode(filename)))
    absolute = [Path(os.path.abspath(place)) for place in places]
    return any(named == place or place in named.parents for place in absolute)

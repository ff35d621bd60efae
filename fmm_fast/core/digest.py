"""The content digest of every input a run reads (a model file or checkpoint directory, a data file, saved
masked sets, a hub dataset's loaded splits), for run fingerprints and for the caches derived from a model.

Re-exporting another model to the same path, or editing a data file, must not resume the old run, so
fingerprints hold the input's sha256, not its path. Hashing a large file takes a while, so digests are
cached per file in CACHE_FILE under $XDG_CACHE_HOME (default ~/.cache)/fmm-fast, keyed by the file's
size, modification time, inode and status-change time: `cp -p`, `mv` and `rsync -a` can give a new
content an old size and mtime, but a new content always has a new inode or a new ctime (which no user
call can set back).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from fmm_fast.core.errors import UserError
from fmm_fast.core.writing import write_text

CACHE_FILE = "sha256.json"
_CHUNK = 1 << 20


def cache_directory() -> Path:
    """fmm-fast's cache folder: $XDG_CACHE_HOME (default ~/.cache)/fmm-fast."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "fmm-fast"


def _cache_path() -> Path:
    return cache_directory() / CACHE_FILE


def _read_cache(path: Path) -> dict[str, list]:
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):  # no cache yet, or a damaged one: start afresh
        return {}
    return cache if isinstance(cache, dict) else {}


def _write_cache(path: Path, cache: dict[str, list]) -> None:
    """Atomic and best effort: a cache that cannot be written only costs time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(cache))
    except OSError:
        pass


def stream_sha256(chunks: Iterable[bytes]) -> str:
    """sha256 of the bytes `chunks` give, in order (a file's blocks, a dataset's encoded rows)."""
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path, cache: dict[str, list]) -> str:
    """sha256 of one file, from `cache` ({resolved path: [size, mtime_ns, inode, ctime_ns, sha256]}) when
    all four still match; a fresh digest is stored there."""
    stat = path.stat()
    key = str(path.resolve())
    identity = [stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns]
    cached = cache.get(key)
    if isinstance(cached, list) and len(cached) == 5 and cached[:4] == identity:
        return str(cached[4])
    with path.open("rb") as handle:
        digest = stream_sha256(iter(lambda: handle.read(_CHUNK), b""))
    cache[key] = [*identity, digest]
    return digest


def content_sha256(path: str | Path) -> str:
    """sha256 of a file, or of a directory's files (name and digest of each, sorted; hidden files left
    out). UserError when the path does not exist or cannot be read."""
    path = Path(path)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    else:
        raise UserError(f"'{path}' does not exist; check the path")
    cache_path = _cache_path()
    cache = _read_cache(cache_path)
    before = dict(cache)
    try:
        digests = [(str(p.relative_to(path)) if p != path else "", file_sha256(p, cache)) for p in files]
    except OSError as error:
        where = error.filename or path
        raise UserError(f"cannot read '{where}' ({error.strerror}); check the path") from None
    if cache != before:
        _write_cache(cache_path, cache)
    if path.is_file():
        return digests[0][1]
    return hashlib.sha256(json.dumps(digests).encode()).hexdigest()


def content_id(path: str | Path) -> str:
    """ "sha256:<hex>" of `path` (see content_sha256): what a fingerprint holds for an input."""
    return f"sha256:{content_sha256(path)}"

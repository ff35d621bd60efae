"""The content digest of every input a run reads (a model file or checkpoint directory, a data file, saved
masked sets, a hub dataset's loaded splits), for run fingerprints and for the caches derived from a model.

Re-exporting another model to the same path, or editing a data file, must not resume the old run, so
fingerprints hold the input's sha256, not its path. Hashing a large file takes a while, so digests are
cached per file under $XDG_CACHE_HOME (default ~/.cache)/fmm-fast/CACHE_FOLDER, keyed by the file's
size, modification time, inode and status-change time: `cp -p`, `mv` and `rsync -a` can give a new
content an old size and mtime, but a new content always has a new inode or a new ctime (which no user
call can set back).

The cache is split into BUCKETS files by a hash of the file's path, and a bucket drops the entries of
files that no longer exist when it is written: a digest reads and rewrites only its files' buckets, so
its cost does not grow with every file ever hashed (one file of them all, read and rewritten at every
digest, grew to megabytes and took most of a short command's time).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from fmm_fast.core.errors import UserError
from fmm_fast.core.writing import write_text

CACHE_FOLDER = "sha256"
BUCKETS = 256  # a digest of one file reads and rewrites about 1/256 of the cache
_CHUNK = 1 << 20


def cache_directory() -> Path:
    """fmm-fast's cache folder: $XDG_CACHE_HOME (default ~/.cache)/fmm-fast."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "fmm-fast"


def cache_bucket(path: Path) -> Path:
    """The bucket file that caches the digest of the file at `path` (chosen by its resolved path)."""
    number = int(hashlib.sha256(str(path.resolve()).encode()).hexdigest(), 16) % BUCKETS
    return cache_directory() / CACHE_FOLDER / f"{number:02x}.json"


def _read_cache(path: Path) -> dict[str, list]:
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):  # no cache yet, or a damaged one: start afresh
        return {}
    return cache if isinstance(cache, dict) else {}


def _write_cache(path: Path, cache: dict[str, list]) -> None:
    """Atomic and best effort: a cache that cannot be written only costs time. The entries of files that
    are gone are left out."""
    live = {key: entry for key, entry in cache.items() if os.path.exists(key)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(live))
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
    caches: dict[Path, dict[str, list]] = {}  # bucket file -> its entries, read once
    before: dict[Path, dict[str, list]] = {}
    digests = []
    try:
        for file in files:
            bucket = cache_bucket(file)
            if bucket not in caches:
                caches[bucket] = _read_cache(bucket)
                before[bucket] = dict(caches[bucket])
            digests.append(
                (str(file.relative_to(path)) if file != path else "", file_sha256(file, caches[bucket]))
            )
    except OSError as error:
        where = error.filename or path
        raise UserError(f"cannot read '{where}' ({error.strerror}); check the path") from None
    for bucket, cache in caches.items():
        if cache != before[bucket]:
            _write_cache(bucket, cache)
    if path.is_file():
        return digests[0][1]
    return hashlib.sha256(json.dumps(digests).encode()).hexdigest()


def content_id(path: str | Path) -> str:
    """ "sha256:<hex>" of `path` (see content_sha256): what a fingerprint holds for an input."""
    return f"sha256:{content_sha256(path)}"

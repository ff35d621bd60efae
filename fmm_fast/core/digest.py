"""The content digest of a model (an .onnx file or a checkpoint directory), for run fingerprints.

Re-exporting a different model to the same path must not resume the old run, so fingerprints hold the
model's sha256, not its path. Hashing a large model takes a while, so digests are cached per file by size
and modification time in CACHE_FILE under $XDG_CACHE_HOME (default ~/.cache)/fmm-fast.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from fmm_fast.core.errors import UserError

CACHE_FILE = "model-sha256.json"
_CHUNK = 1 << 20


def _cache_path() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "fmm-fast" / CACHE_FILE


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
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(cache))
        os.replace(temporary, path)
    except OSError:
        pass


def file_sha256(path: Path, cache: dict[str, list]) -> str:
    """sha256 of one file, from `cache` ({resolved path: [size, mtime_ns, sha256]}) when size and
    mtime still match; a fresh digest is stored there."""
    stat = path.stat()
    key = str(path.resolve())
    cached = cache.get(key)
    if isinstance(cached, list) and cached[:2] == [stat.st_size, stat.st_mtime_ns]:
        return str(cached[2])
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    cache[key] = [stat.st_size, stat.st_mtime_ns, digest.hexdigest()]
    return digest.hexdigest()


def model_sha256(model: str | Path) -> str:
    """sha256 of an .onnx file, or of a checkpoint directory's files (name and digest of each, sorted)."""
    model = Path(model)
    if model.is_file():
        files = [model]
    elif model.is_dir():
        files = sorted(p for p in model.rglob("*") if p.is_file() and not p.name.startswith("."))
    else:
        raise UserError(f"model '{model}' does not exist; check --model")
    cache_path = _cache_path()
    cache = _read_cache(cache_path)
    before = dict(cache)
    digests = [(str(p.relative_to(model)) if p != model else "", file_sha256(p, cache)) for p in files]
    if cache != before:
        _write_cache(cache_path, cache)
    if model.is_file():
        return digests[0][1]
    return hashlib.sha256(json.dumps(digests).encode()).hexdigest()

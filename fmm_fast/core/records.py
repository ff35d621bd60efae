"""Run records: the one reader/writer pair (and NaN policy) of every JSON record, versions, output dirs,
timing."""

from __future__ import annotations

import json
import math
import os
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fmm_fast import __version__
from fmm_fast.core.errors import UserError
from fmm_fast.core.writing import write_text

if TYPE_CHECKING:
    from fmm_fast.backends.loading import LoadedModel
    from fmm_fast.core.datatypes import EncodedSplit
    from fmm_fast.data.base import TextDataset

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


def split_run_header(
    kind: str, settings: Any, loaded: LoadedModel, dataset: TextDataset, encoded: EncodedSplit
) -> dict[str, Any]:
    """What the record of a run over one split of `dataset` starts with: its kind, the settings as given
    (their to_dict(); `data` and `seed` among them), the model that ran, how the dataset's splits were made
    and the truncation to its length cut of `encoded`."""
    return {
        "kind": kind,
        "fmm_fast_version": __version__,
        "arguments": settings.to_dict(),
        "model": loaded.describe(settings.model),
        "dataset": dataset.name,
        "dataset_file": dataset.file,
        "splits": settings.data.splits_record(),
        "split": settings.data.split,
        "seed": settings.seed,
        "truncation": encoded.truncation(),
    }


NON_FINITE_FIELD = "non_finite"
_NON_FINITE_VALUES = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _plain(value: Any) -> Any:
    """numpy scalars and arrays (and torch tensors) as Python numbers and lists, paths as strings."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _pointer_token(key: str) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _finite_copy(value: Any, pointer: str, non_finite: dict[str, str]) -> Any:
    """`value` as plain JSON types; every non-finite float becomes None and is noted in `non_finite`."""
    value = _plain(value)
    if isinstance(value, float) and not math.isfinite(value):
        non_finite[pointer] = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return None
    if isinstance(value, dict):
        return {k: _finite_copy(v, f"{pointer}/{_pointer_token(k)}", non_finite) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_copy(v, f"{pointer}/{i}", non_finite) for i, v in enumerate(value)]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps_record(record: dict[str, Any], indent: int | None = 2) -> str:
    """A run record as indented JSON text, under the one NaN policy of every record fmm-fast writes.

    JSON has no NaN or Infinity, so each non-finite number (a RACU over a flat baseline, a metric of an
    empty split, ...) is written as null, and the record gets a top-level "non_finite" object that maps
    the RFC 6901 JSON pointer of every such null to the value it stands for ("nan", "inf" or "-inf").
    A null not listed there is a real "none" (e.g. --limit not given). numpy values become plain numbers.
    indent None: one line (JSON Lines). The text ends with a newline.
    """
    non_finite: dict[str, str] = {}
    plain = _finite_copy(record, "", non_finite)
    plain.pop(NON_FINITE_FIELD, None)  # a record read back carries its own, recomputed here
    if non_finite:
        plain[NON_FINITE_FIELD] = non_finite
    return json.dumps(plain, indent=indent, allow_nan=False) + "\n"


def loads_record(text: str) -> dict[str, Any]:
    """The record `dumps_record` wrote, its non-finite numbers back as float nan/inf.

    The "non_finite" map is consumed (not returned). Older records that hold a bare NaN still load.
    Raises ValueError (json.JSONDecodeError) on malformed text, when the top level is not an object, or
    when a "non_finite" pointer names no null of the record.
    """
    return restore_non_finite(json.loads(text))


def restore_non_finite(record: Any) -> dict[str, Any]:
    """A parsed record with the nulls its "non_finite" map names back as float nan/inf (see
    loads_record, which raises what this raises)."""
    if not isinstance(record, dict):
        raise ValueError("a run record must be a JSON object")
    non_finite = record.pop(NON_FINITE_FIELD, None) or {}
    if not isinstance(non_finite, dict):
        raise ValueError(f'"{NON_FINITE_FIELD}" must map JSON pointers to "nan", "inf" or "-inf"')
    for pointer, value in non_finite.items():
        try:
            *parents, last = [_unescape(token) for token in str(pointer).split("/")[1:]]
            container: Any = record
            for token in parents:
                container = container[int(token) if isinstance(container, list) else token]
            if container[int(last) if isinstance(container, list) else last] is not None:
                raise ValueError("it names a value, not a null")
            container[int(last) if isinstance(container, list) else last] = _NON_FINITE_VALUES[value]
        except (LookupError, TypeError, ValueError) as error:  # a missing key, index or value name
            reason = error if isinstance(error, ValueError) else f"no such field or value {error}"
            raise ValueError(f'"{NON_FINITE_FIELD}" entry {pointer!r}: {reason}') from None
    return record


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def write_record(path: str | Path, record: dict[str, Any]) -> None:
    """Write a run record (see `dumps_record`) through core.writing (atomic, never through a link), so
    readers never see half a record."""
    write_text(path, dumps_record(record))


def read_record(path: str | Path) -> dict[str, Any]:
    """A record `write_record` wrote. Raises OSError, UnicodeDecodeError or ValueError for a bad file."""
    return loads_record(Path(path).read_text(encoding="utf-8"))


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

    def carry(self, seconds: float) -> None:
        """Count `seconds` spent elsewhere (an interrupted invocation's) as if this clock had run them."""
        self.start -= seconds

"""The one validation path of every file fmm-fast reads back: run markers, state files, result records,
JSON Lines (explanations, data).

A file is read with `fmm_fast.core.records.read_record` (or `json_lines`) and checked against the shape
its reader expects (`Shape`, below). Damage or a wrong shape in a file the user gave or must fix is one
UserError line naming the file, the problem and the fix (`read_checked`); a damaged state file, which
fmm-fast can recompute, is recomputed with a warning (`read_state`). JSON Lines errors name the file's own
line number.

Shape: a type (float accepts ints, never bools), None (null), a tuple (any one of its shapes), a one-item
list (a list whose every item has that shape), a dict (an object holding at least those keys, each of
its shape; a key ending in "?" may be absent) or {"*": shape} (an object whose every value has that
shape).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from fmm_fast.core.errors import UserError
from fmm_fast.core.records import read_record

Shape = Any
# What reading a file can raise: missing or unreadable, bad encoding, bad JSON (a ValueError).
READ_ERRORS = (OSError, UnicodeDecodeError, ValueError)


def shape_error(value: Any, shape: Shape, where: str = "") -> str | None:
    """Where `value` first departs from `shape` and how, or None when it fits."""
    place = where or "the top level"
    if isinstance(shape, tuple):
        errors = [shape_error(value, option, where) for option in shape]
        return None if None in errors else errors[0]
    if shape is None:
        return None if value is None else f"{place} must be null"
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{place} must be a list"
        items = (shape_error(item, shape[0], f"{where}[{i}]") for i, item in enumerate(value))
        return next((error for error in items if error), None)
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{place} must be an object"
        if set(shape) == {"*"}:
            shape = dict.fromkeys(value, shape["*"])
        for key, inner in shape.items():
            name = key.removesuffix("?")
            if name not in value:
                if name != key:
                    continue
                return f"{where + '.' if where else ''}{key} is missing"
            if error := shape_error(value[name], inner, f"{where + '.' if where else ''}{name}"):
                return error
        return None
    if isinstance(value, bool) and shape is not bool:
        return f"{place} must be {_name(shape)}, not true/false"
    if shape is float:
        return None if isinstance(value, int | float) else f"{place} must be a number"
    return None if isinstance(value, shape) else f"{place} must be {_name(shape)}"


def _name(shape: type) -> str:
    names = {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        dict: "a JSON object",
    }
    return names.get(shape, f"a {shape.__name__}")


def check_record(path: Path, shape: Shape) -> dict[str, Any]:
    """The record at `path` when it fits `shape`; ValueError (or the read's own error) naming the fault."""
    record = read_record(path)
    if error := shape_error(record, shape):
        raise ValueError(error)
    return record


def read_checked(path: Path, shape: Shape, fix: str) -> dict[str, Any]:
    """The record at `path` when it reads and fits `shape`; else UserError: the file, the problem, `fix`."""
    try:
        return check_record(path, shape)
    except READ_ERRORS as error:
        raise UserError(f"{path} is damaged or not what fmm-fast wrote ({_reason(error)}); {fix}") from None


def read_state(path: Path, shape: Shape, valid: Callable[[dict], bool] | None = None) -> dict | None:
    """A saved state when it reads, fits `shape` and passes `valid`; None when there is none, or (with a
    warning on stderr) when it is damaged: the caller recomputes it."""
    if not path.is_file():
        return None
    try:
        state = check_record(path, shape)
        if valid is not None and not valid(state):
            raise ValueError("it does not fit this run's examples")
    except READ_ERRORS as error:
        _warn_once(path, f"fmm-fast: warning: {path} is damaged ({_reason(error)}); recomputing it")
        return None
    return state


# (file, its size and change time) already warned about: a run reads a damaged file in several places
# (a step's record when it runs, when a later step searches for a trained model, when the result is
# summed up), and the user needs to hear of it once; rewritten and damaged again, it is told again.
_WARNED: set[tuple[str, int, int]] = set()


def _warn_once(path: Path, message: str) -> None:
    try:
        status = path.stat()
        key = (str(path.resolve()), status.st_size, status.st_mtime_ns)
    except OSError:
        key = (str(path), -1, -1)
    if key not in _WARNED:
        _WARNED.add(key)
        print(message, file=sys.stderr)


def _reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


class LineError(ValueError):
    """What is wrong with line `number` of a JSON Lines file (str: "line N: reason")."""

    def __init__(self, number: int, reason: str) -> None:
        super().__init__(f"line {number}: {reason}")
        self.number, self.reason = number, reason


def json_lines(path: Path) -> list[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a JSON Lines file, numbered as in the file.

    A leading UTF-8 BOM is skipped. Lines are split at newlines only (a JSON string may hold U+2028 and
    other characters str.splitlines breaks at). LineError ("line N: ...") for bad JSON or an object that
    names a key twice; OSError / UnicodeDecodeError when the file cannot be read as UTF-8.
    """
    values = []
    for number, line in enumerate(path.read_text(encoding="utf-8-sig").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            values.append((number, json.loads(line, object_pairs_hook=partial(_unique_keys, number=number))))
        except json.JSONDecodeError as error:
            raise LineError(number, f"{error.msg} (column {error.colno})") from None
    return values


def _unique_keys(pairs: list[tuple[str, Any]], number: int) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = next((key for i, key in enumerate(keys) if key in keys[:i]), None)
    if repeated is not None:
        raise LineError(number, f"it names the key {repeated!r} twice; give each key once")
    return dict(pairs)

"""Reading `fmm-fast evaluate` result files: find them, parse them, validate them.

The public surface is `find_result_files`, `load_result` and `read_results`; the file itself is read by
`fmm_fast.core.records.read_record`, the reader of every run record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fmm_fast.core.errors import UserError
from fmm_fast.core.records import read_record
from fmm_fast.report.order import measure_sort_key

RESULT_FILE = "result.json"


@dataclass(frozen=True)
class MeasureRun:
    """One measure of one evaluation run. curve: (R,) float64 primary metric per masking ratio."""

    signed: bool
    acu: float
    racu: float  # nan where the file has null (flat baseline, see stats.acu_racu)
    seconds: float
    forward_passes: float
    curve: np.ndarray
    racu_undefined: str | None = None  # why racu is nan, as evaluate recorded it


@dataclass(frozen=True)
class EvaluationResult:
    """One result.json of `fmm-fast evaluate`, reduced to what the report needs.

    ratios: (R,) float64 rising from 0 to 1. measures: name -> MeasureRun, in canonical order.
    """

    path: Path
    dataset: str
    strategy: str
    split: str
    seed: int
    metric: str
    majority_baseline: float
    ratios: np.ndarray
    measures: dict[str, MeasureRun]
    n_examples: int

    @property
    def unmasked(self) -> float:
        """Primary metric at r = 0 (nothing masked, so the same on every curve)."""
        return float(next(iter(self.measures.values())).curve[0])

    @property
    def fully_masked(self) -> float:
        """Primary metric at r = 1 (every explained token masked, the same on every curve)."""
        return float(next(iter(self.measures.values())).curve[-1])


class _MalformedResult(Exception):
    """Internal: what is wrong inside one result file; load_result turns it into a UserError."""


def _field(mapping: object, key: str, where: str) -> object:
    if not isinstance(mapping, dict):
        raise _MalformedResult(f"{where or 'the file'} is not a JSON object")
    if key not in mapping:
        raise _MalformedResult(f"missing field {where + '.' if where else ''}{key}")
    return mapping[key]


def _optional_text(value: object, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _MalformedResult(f"{where} must be a non-empty string")
    return value


def _number(value: object, where: str, nullable: bool = False) -> float:
    if value is None and nullable:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _MalformedResult(f"{where} must be a number")
    return float(value)


def _numbers(value: object, where: str) -> np.ndarray:
    if not isinstance(value, list):
        raise _MalformedResult(f"{where} must be a list of numbers")
    return np.array([_number(item, where) for item in value], dtype=np.float64)


def _parse_result(path: Path, data: object) -> EvaluationResult:
    model = _field(data, "model", "")
    metric = _text(_field(data, "metric", ""), "metric")
    seed = _field(data, "seed", "")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise _MalformedResult("seed must be an integer")
    n_examples = _field(data, "n_examples", "")
    if isinstance(n_examples, bool) or not isinstance(n_examples, int) or n_examples < 1:
        raise _MalformedResult("n_examples must be a positive integer")
    ratios = _numbers(_field(data, "ratios", ""), "ratios")
    if len(ratios) < 2 or ratios[0] != 0 or ratios[-1] != 1 or np.any(np.diff(ratios) <= 0):
        raise _MalformedResult(f"ratios must rise strictly from 0 to 1, got {ratios.tolist()}")
    curves = _field(data, "curves", "")
    measure_entries = _field(data, "measures", "")
    if not isinstance(measure_entries, dict) or not measure_entries:
        raise _MalformedResult("measures must be a non-empty object")
    measures = {}
    for name in sorted(measure_entries, key=measure_sort_key):
        entry = measure_entries[name]
        where = f"measures.{name}"
        curve_where = f"curves.{name}.{metric}"
        curve = _numbers(_field(_field(curves, name, "curves"), metric, f"curves.{name}"), curve_where)
        if len(curve) != len(ratios):
            raise _MalformedResult(f"{curve_where} has {len(curve)} values for {len(ratios)} ratios")
        signed = _field(entry, "signed", where)
        if not isinstance(signed, bool):
            raise _MalformedResult(f"{where}.signed must be true or false")
        measures[name] = MeasureRun(
            signed=signed,
            acu=_number(_field(entry, "acu", where), f"{where}.acu", nullable=True),
            racu=_number(_field(entry, "racu", where), f"{where}.racu", nullable=True),
            seconds=_number(_field(entry, "seconds", where), f"{where}.seconds"),
            forward_passes=_number(_field(entry, "forward_passes", where), f"{where}.forward_passes"),
            curve=curve,
            racu_undefined=_optional_text(entry.get("racu_undefined"), f"{where}.racu_undefined"),
        )
    return EvaluationResult(
        path=path,
        dataset=_text(_field(data, "dataset", ""), "dataset"),
        strategy=_text(_field(model, "strategy", "model"), "model.strategy"),
        split=_text(_field(data, "split", ""), "split"),
        seed=seed,
        metric=metric,
        majority_baseline=_number(_field(data, "majority_baseline", ""), "majority_baseline"),
        ratios=ratios,
        measures=measures,
        n_examples=n_examples,
    )


def load_result(path: Path) -> EvaluationResult | None:
    """Read one result.json; None when it is another command's result (its "kind" is not "evaluate").

    Raises UserError naming the file when it is not a well-formed evaluation result.
    """
    try:
        data = read_record(path)
        if _field(data, "kind", "") != "evaluate":
            return None
        return _parse_result(path, data)
    except (OSError, ValueError, _MalformedResult) as error:  # ValueError: bad JSON or encoding
        raise UserError(
            f"malformed result file {path}: {error}; rerun `fmm-fast evaluate` for it or move it out of "
            "the report's directories"
        ) from None


def find_result_files(dirs: Sequence[Path]) -> list[Path]:
    """Every result.json under `dirs` (recursively; a result.json path itself also counts), sorted."""
    found: set[Path] = set()
    for directory in dirs:
        if not directory.exists():
            raise UserError(f"{directory} does not exist; pass directories written by `fmm-fast evaluate`")
        if directory.is_file():
            if directory.name != RESULT_FILE:
                raise UserError(f"{directory} is not a {RESULT_FILE}; pass result directories instead")
            found.add(directory)
        else:
            found.update(directory.rglob(RESULT_FILE))
    return sorted(found)


def read_results(dirs: Sequence[Path]) -> tuple[list[EvaluationResult], list[Path]]:
    """Every evaluation result under `dirs`, and the result.json files of other commands (ignored).

    Raises UserError when there is no evaluation result at all.
    """
    paths = find_result_files(dirs)
    results, ignored = [], []
    for path in paths:
        result = load_result(path)
        if result is None:
            ignored.append(path)
        else:
            results.append(result)
    if not results:
        where = ", ".join(str(d) for d in dirs)
        other = f" ({len(ignored)} result.json of other commands ignored)" if ignored else ""
        raise UserError(
            f"no evaluation result.json found under {where}{other}; run `fmm-fast evaluate` first or pass "
            "the directories it wrote to"
        )
    return results, ignored

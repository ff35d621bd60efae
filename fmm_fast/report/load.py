"""Reading result files of `fmm-fast evaluate` and `fmm-fast roar`: find them, parse them, validate them.

The public surface is `find_result_files`, `load_run`, `load_result` and `read_results`; the file itself is
read by `fmm_fast.core.records.read_record`, the reader of every run record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from fmm_fast.core.errors import UserError
from fmm_fast.core.records import read_record
from fmm_fast.data.local import display_name
from fmm_fast.data.units import DEFAULT_UNIT, UNITS
from fmm_fast.protocols.curve_stats import acu_racu_against_baseline
from fmm_fast.report.identity import distinct_evaluations, distinct_roar
from fmm_fast.report.order import BASELINE_MEASURE, measure_sort_key

RESULT_FILE = "result.json"
ROAR_PROTOCOL = "roar"
ROAR_PHASES = ("train", "explain", "mask", "evaluate", "total")
FLAT_BASELINE = "rand is flat at these ratios (random masking did not change the metric)"
NOT_RECORDED = "not recorded (a record older than the machine field)"


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
    shared_rows: float = 0.0  # rows it took from another measure's passes (counted there)


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
    machine: str = NOT_RECORDED  # where the run computed (machine_text)
    unit: str = DEFAULT_UNIT  # the erasure unit (records made before units: tokens)
    model: str = ""  # a model trained elsewhere: its folder (fmm-fast's: "", its seeds are the strategy's)
    examples: str = ""  # the example set: n_examples and the data options that chose them (example_set)

    @property
    def unmasked(self) -> float:
        """Primary metric at r = 0 (nothing masked, so the same on every curve)."""
        return float(next(iter(self.measures.values())).curve[0])

    @property
    def fully_masked(self) -> float:
        """Primary metric at r = 1 (every explained token masked, the same on every curve)."""
        return float(next(iter(self.measures.values())).curve[-1])

    def at_ratios(self, ratios: np.ndarray) -> EvaluationResult | None:
        """This run read at a subset of its ratios (e.g. a ROAR run's coarser grid), each curve's ACU/RACU
        recomputed there against the file's own rand, so that areas on both grids use the same trapezoids.

        ratios: (S,) float64 rising from 0 to 1. Returns the run itself where they are its own ratios, None
        where they are not a subset of them (or the file has no rand to score against).
        """
        if np.array_equal(ratios, self.ratios):
            return self
        index = [np.flatnonzero(np.isclose(self.ratios, r, rtol=0.0, atol=1e-9)) for r in ratios]
        if BASELINE_MEASURE not in self.measures or any(len(i) != 1 for i in index):
            return None
        kept = np.concatenate(index)
        curves = {name: run.curve[kept] for name, run in self.measures.items()}
        scores = acu_racu_against_baseline(curves, self.ratios[kept])
        measures = {
            name: replace(
                run,
                acu=scores[name][0],
                racu=scores[name][1],
                curve=curves[name],
                racu_undefined=FLAT_BASELINE if math.isnan(scores[name][1]) else None,
            )
            for name, run in self.measures.items()
        }
        return replace(self, ratios=self.ratios[kept], measures=measures)


@dataclass(frozen=True)
class RoarCost:
    """What a ROAR run spent, totalled over its seeds, measures and steps. seconds: phase -> wall seconds."""

    trainings: int
    forward_passes: float
    backward_passes: float
    seconds: dict[str, float]

    def __add__(self, other: RoarCost) -> RoarCost:
        return RoarCost(
            self.trainings + other.trainings,
            self.forward_passes + other.forward_passes,
            self.backward_passes + other.backward_passes,
            {phase: self.seconds[phase] + other.seconds[phase] for phase in ROAR_PHASES},
        )


@dataclass(frozen=True)
class RoarSeed:
    """One seed of a ROAR run.

    curves: measure -> (R,) float64 test metric of the model retrained at each ratio, nan where the step
    has not run yet (`missing` lists those ratios). acu, racu, racu_clipped: measure -> score, only for
    measures whose curve and the `rand` curve are both finished. erasure: the no-retraining erasure of the
    step-0 model (attached by read_results), erasure_path where the run says it is (None: not run).
    """

    seed: int
    curves: dict[str, np.ndarray]
    missing: dict[str, list[float]]
    acu: dict[str, float]
    racu: dict[str, float]
    racu_clipped: dict[str, float]
    erasure_path: Path | None
    erasure: EvaluationResult | None = None

    def finished(self, name: str) -> bool:
        """True when the measure's curve and the rand curve it is scored against have every step."""
        return name in self.racu


@dataclass(frozen=True)
class RoarResult:
    """One result.json of `fmm-fast roar` (one dataset, retraining strategy and recursive mode).

    ratios: (R,) float64 rising from 0 to 1; seeds: seed -> RoarSeed; signed: measure -> whether it is
    signed (ACU is read for it); complete: the run's own word that every step has run.
    """

    path: Path
    dataset: str
    metric: str
    majority_baseline: float
    strategy: str
    recursive: bool
    ratios: np.ndarray
    complete: bool
    signed: dict[str, bool]
    seeds: dict[int, RoarSeed]
    cost: RoarCost
    erasure_paths: list[Path] = field(default_factory=list)

    @property
    def protocol(self) -> str:
        return "Recursive ROAR" if self.recursive else "ROAR (non-recursive)"


class _MalformedResult(Exception):
    """Internal: what is wrong inside one result file; load_run turns it into a UserError."""


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


def _ratios(data: object) -> np.ndarray:
    ratios = _numbers(_field(data, "ratios", ""), "ratios")
    if len(ratios) < 2 or ratios[0] != 0 or ratios[-1] != 1 or np.any(np.diff(ratios) <= 0):
        raise _MalformedResult(f"ratios must rise strictly from 0 to 1, got {ratios.tolist()}")
    return ratios


def _parse_result(path: Path, data: object) -> EvaluationResult:
    model = _field(data, "model", "")
    metric = _text(_field(data, "metric", ""), "metric")
    seed = _field(data, "seed", "")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise _MalformedResult("seed must be an integer")
    n_examples = _field(data, "n_examples", "")
    if isinstance(n_examples, bool) or not isinstance(n_examples, int) or n_examples < 1:
        raise _MalformedResult("n_examples must be a positive integer")
    ratios = _ratios(data)
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
            shared_rows=_number(entry.get("shared_rows", 0), f"{where}.shared_rows"),
        )
    return EvaluationResult(
        path=path,
        dataset=display_name(_text(_field(data, "dataset", ""), "dataset")),  # older records: a path
        strategy=_text(_field(model, "strategy", "model"), "model.strategy"),
        split=_text(_field(data, "split", ""), "split"),
        seed=seed,
        metric=metric,
        majority_baseline=_number(_field(data, "majority_baseline", ""), "majority_baseline"),
        ratios=ratios,
        measures=measures,
        n_examples=n_examples,
        machine=machine_text(data.get("machine")),
        unit=recorded_unit(data),
        model=model_key(model),
        examples=example_set(data, n_examples),
    )


def recorded_unit(record: dict) -> str:
    """The erasure unit a run record's arguments name (token when they name none: older records)."""
    arguments = record.get("arguments")
    data = arguments.get("data") if isinstance(arguments, dict) else None
    unit = data.get("unit", DEFAULT_UNIT) if isinstance(data, dict) else DEFAULT_UNIT
    if unit not in UNITS:
        raise _MalformedResult(f"arguments.data.unit must be one of {', '.join(UNITS)}")
    return unit


def model_key(model: dict) -> str:
    """What tells the models of one (dataset, strategy) apart: "" for a model fmm-fast trained (the runs
    of its strategy are seeds of one recipe), else the folder it came from (two classifiers trained
    elsewhere are two models, never two seeds of one)."""
    if model.get("trained_by") == "fmm-fast":
        return ""
    return str(model.get("source") or model.get("path") or "")


EXAMPLE_OPTIONS = ("limit", "size", "test_size", "data_seed")  # the data options that choose the examples


def example_set(data: dict, n_examples: int) -> str:
    """The example set a run erased, as a key: its count and the data options that chose them (a
    100-example run and a 20-example one are not averaged, nor scored against each other's rand)."""
    arguments = data.get("arguments")
    options = arguments.get("data") if isinstance(arguments, dict) else None
    chosen = {name: options.get(name) for name in EXAMPLE_OPTIONS} if isinstance(options, dict) else {}
    return json.dumps({"n_examples": n_examples, **chosen}, sort_keys=True)


def machine_text(machine: object) -> str:
    """A record's machine (core.machine.machine_record) as "CPU, N threads", NOT_RECORDED without one."""
    if not isinstance(machine, dict) or not isinstance(machine.get("cpu"), str):
        return NOT_RECORDED
    threads = machine.get("threads")
    return machine["cpu"] + (f", {threads} threads" if isinstance(threads, int) else "")


def _signed(name: str, recorded: object) -> bool:
    """Whether measure `name` of a ROAR record is signed: the record's word ("signed"), or for a record
    written before it kept one, the built-in measure's."""
    if isinstance(recorded, dict) and name in recorded:
        if not isinstance(recorded[name], bool):
            raise _MalformedResult(f"signed.{name} must be true or false")
        return recorded[name]
    from fmm_fast.measures.registry import find_measure  # the measures' own word; imports no torch

    try:
        return bool(find_measure(name)[0].signed)
    except UserError as error:
        raise _MalformedResult(str(error)) from None


def _roar_seed(seed: int, entry: object, ratios: np.ndarray) -> RoarSeed:
    where = f"seeds.{seed}"
    curve_entries = _field(entry, "curves", where)
    if not isinstance(curve_entries, dict) or not curve_entries:
        raise _MalformedResult(f"{where}.curves must be a non-empty object")
    curves, missing = {}, {}
    for name, values in curve_entries.items():
        curve_where = f"{where}.curves.{name}"
        if not isinstance(values, list) or len(values) != len(ratios):
            raise _MalformedResult(f"{curve_where} must be a list of {len(ratios)} numbers or nulls")
        # null: the step has not run yet (a non-finite metric comes back from read_record as a float)
        curves[name] = np.array([_number(v, curve_where, nullable=True) for v in values], dtype=np.float64)
        missing[name] = [float(r) for r, v in zip(ratios, values, strict=True) if v is None]
    scores: dict[str, dict[str, float]] = {"acu": {}, "racu": {}, "racu_clipped": {}}
    for name in curves:
        if missing[name] or missing.get(BASELINE_MEASURE):
            continue  # not scored yet
        for key, values in scores.items():
            value = _field(_field(entry, key, where), name, f"{where}.{key}")
            values[name] = _number(value, f"{where}.{key}.{name}", nullable=True)
    erasure = _field(entry, "erasure", where)
    return RoarSeed(
        seed=seed,
        curves=curves,
        missing=missing,
        acu=scores["acu"],
        racu=scores["racu"],
        racu_clipped=scores["racu_clipped"],
        erasure_path=None if erasure is None else Path(_text(erasure, f"{where}.erasure")),
    )


def _roar_cost(data: object) -> RoarCost:
    cost = _field(data, "cost", "")
    trainings = _field(cost, "trainings", "cost")
    if isinstance(trainings, bool) or not isinstance(trainings, int) or trainings < 0:
        raise _MalformedResult("cost.trainings must be a non-negative integer")
    seconds = _field(cost, "seconds", "cost")
    return RoarCost(
        trainings=trainings,
        forward_passes=_number(_field(cost, "forward_passes", "cost"), "cost.forward_passes"),
        backward_passes=_number(_field(cost, "backward_passes", "cost"), "cost.backward_passes"),
        seconds={p: _number(_field(seconds, p, "cost.seconds"), f"cost.seconds.{p}") for p in ROAR_PHASES},
    )


def _parse_roar(path: Path, data: object) -> RoarResult:
    ratios = _ratios(data)
    seed_entries = _field(data, "seeds", "")
    if not isinstance(seed_entries, dict) or not seed_entries:
        raise _MalformedResult("seeds must be a non-empty object")
    if not all(key.isdecimal() for key in seed_entries):
        raise _MalformedResult(f"seeds must be keyed by seed numbers, got {sorted(seed_entries)}")
    seeds = {int(k): _roar_seed(int(k), entry, ratios) for k, entry in seed_entries.items()}
    complete = _field(data, "complete", "")
    recursive = _field(data, "recursive", "")
    for name, flag in (("complete", complete), ("recursive", recursive)):
        if not isinstance(flag, bool):
            raise _MalformedResult(f"{name} must be true or false")
    unfinished = [f"seeds.{s}.curves.{n}" for s, seed in seeds.items() for n, m in seed.missing.items() if m]
    if complete and unfinished:
        raise _MalformedResult(f"complete is true but {unfinished[0]} has steps that did not run (null)")
    names = sorted({name for seed in seeds.values() for name in seed.curves}, key=measure_sort_key)
    return RoarResult(
        path=path,
        dataset=display_name(_text(_field(data, "dataset", ""), "dataset")),
        metric=_text(_field(data, "metric", ""), "metric"),
        majority_baseline=_number(_field(data, "majority_baseline", ""), "majority_baseline", nullable=True),
        strategy=_text(_field(data, "strategy", ""), "strategy"),
        recursive=recursive,
        ratios=ratios,
        complete=complete,
        signed={name: _signed(name, data.get("signed")) for name in names},
        seeds=dict(sorted(seeds.items())),
        cost=_roar_cost(data),
    )


def load_run(path: Path) -> EvaluationResult | RoarResult | None:
    """Read one result.json of `fmm-fast evaluate` or `fmm-fast roar`; None for another command's result.

    Raises UserError naming the file when it is not well-formed.
    """
    try:
        data = read_record(path)
        if isinstance(data, dict) and data.get("protocol") == ROAR_PROTOCOL:
            return _parse_roar(path, data)
        if _field(data, "kind", "") != "evaluate":
            return None
        return _parse_result(path, data)
    except (OSError, ValueError, _MalformedResult) as error:  # ValueError: bad JSON or encoding
        raise UserError(
            f"malformed result file {path}: {error}; rerun the `fmm-fast evaluate` or `fmm-fast roar` that "
            "wrote it, or move it out of the report's directories"
        ) from None


def load_result(path: Path) -> EvaluationResult | None:
    """Read one `fmm-fast evaluate` result.json; None when it is another command's result.

    Raises UserError naming the file when it is not well-formed.
    """
    result = load_run(path)
    return result if isinstance(result, EvaluationResult) else None


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


@dataclass(frozen=True)
class Results:
    """What read_results found. evaluations: erasure runs of `fmm-fast evaluate`, without the ones a ROAR
    run holds (those hang on its seeds); roar: ROAR runs; ignored: result.json files of other commands."""

    evaluations: list[EvaluationResult]
    roar: list[RoarResult]
    ignored: list[Path]


def _attach_erasures(run: RoarResult, loaded: dict[Path, EvaluationResult]) -> RoarResult:
    """The run with each seed's no-retraining erasure result attached (read here if not found already)."""
    seeds, paths = {}, []
    for number, seed in run.seeds.items():
        erasure = None
        if seed.erasure_path is not None:
            path = (run.path.parent / seed.erasure_path).resolve()
            paths.append(path)
            erasure = loaded.get(path) or (load_result(path) if path.is_file() else None)
        seeds[number] = replace(seed, erasure=erasure)
    return replace(run, seeds=seeds, erasure_paths=paths)


def read_results(dirs: Sequence[Path]) -> Results:
    """Every evaluation and ROAR result under `dirs`, and the result.json files of other commands.

    Raises UserError when there is neither an evaluation nor a ROAR result.
    """
    evaluations: dict[Path, EvaluationResult] = {}
    roar, ignored = [], []
    for path in find_result_files(dirs):
        result = load_run(path)
        if isinstance(result, EvaluationResult):
            evaluations[path.resolve()] = result
        elif isinstance(result, RoarResult):
            roar.append(result)
        else:
            ignored.append(path)
    if not evaluations and not roar:
        where = ", ".join(str(d) for d in dirs)
        other = f" ({len(ignored)} result.json of other commands ignored)" if ignored else ""
        raise UserError(
            f"no evaluation or ROAR result.json found under {where}{other}; run `fmm-fast evaluate` or "
            "`fmm-fast roar` first or pass the directories they wrote to"
        )
    evaluations, roar = distinct_evaluations(evaluations), distinct_roar(roar)  # copies count once
    roar = [_attach_erasures(run, evaluations) for run in roar]
    held = {path for run in roar for path in run.erasure_paths}
    return Results([r for p, r in evaluations.items() if p not in held], roar, ignored)

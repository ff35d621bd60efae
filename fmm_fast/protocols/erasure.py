"""Faithfulness by recursive erasure (docs/method.md §4–5): one curve per measure, ACU/RACU against `rand`.

The loop is backend-agnostic: scoring passes go through a MaskBatchEngine, whose cache lets the pass
that scored ratio r_j serve as the reference input of the measure at the next step (LOO's y0).
Every finished (measure, ratio) step is written to `<out>/state/` at once, so a killed run resumes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel, gradient_backend
from fmm_fast.backends.options import BackendOptions
from fmm_fast.core.datatypes import EncodedSplit, pad_batch, save_ragged
from fmm_fast.core.errors import UserError
from fmm_fast.core.machine import machine_record
from fmm_fast.core.metrics import compute_metrics, majority_metric
from fmm_fast.core.outputs import claim_directory, finish_run
from fmm_fast.core.reading import read_state
from fmm_fast.core.records import split_run_header, versions, write_record
from fmm_fast.core.settings import EvaluationSettings
from fmm_fast.data.base import TextDataset
from fmm_fast.data.masking import masked_count
from fmm_fast.measures.base import ExplainBatch, Measure
from fmm_fast.measures.guard import checked_scores
from fmm_fast.measures.path_names import measure_entry
from fmm_fast.measures.spec import BASELINE, MeasureSpec
from fmm_fast.protocols.curve_stats import RATIOS, acu_racu_against_baseline

RUN_KIND = "evaluate"  # the run marker's kind and the record's


def erase_top(
    input_ids: np.ndarray,
    explained: np.ndarray,
    scores: np.ndarray,
    count: int,
    mask_id: int,
    units: np.ndarray | None = None,
) -> np.ndarray:
    """Mask the `count` highest-ranked explained units of one example (every token of each).

    input_ids, explained, scores: (T,); units: (T,) int64 the unit of each explained token (0..n-1 in order
    of their first token, -1 elsewhere; every token of a unit holds its unit's score), None for token units.
    Ranking: already-masked units (every token masked) first, then units by descending score (ties → the
    earlier unit), non-explained tokens never.
    """
    erased = input_ids.copy()
    if units is None:
        key = np.where(explained, scores.astype(np.float64), -np.inf)
        key[explained & (input_ids == mask_id)] = np.inf
        erased[np.argsort(-key, kind="stable")[:count]] = mask_id
        return erased
    inside = units >= 0
    # unit_of: each explained token's unit as 0..n-1 in unit order; first: each unit's first token
    _, first, unit_of = np.unique(units[inside], return_index=True, return_inverse=True)
    key = scores[inside][first].astype(np.float64)
    key[np.bincount(unit_of, weights=input_ids[inside] != mask_id, minlength=len(first)) == 0] = np.inf
    chosen = np.zeros(len(first), dtype=bool)
    chosen[np.argsort(-key, kind="stable")[:count]] = True
    erased[np.flatnonzero(inside)[chosen[unit_of]]] = mask_id
    return erased


def erase_split(
    split: EncodedSplit,
    current: Sequence[np.ndarray],
    scores: Sequence[np.ndarray],
    ratio: float,
    mask_id: int,
) -> list[np.ndarray]:
    """The inputs `current` of `split` ((T_i,) each) with the top floor(ratio·n) of each example's n units
    masked, ranked by `scores` ((T_i,) each, every token of a unit holding its unit's score) as erase_top
    ranks them: one erasure step."""
    counts = masked_count(float(ratio), split.unit_counts())
    return [
        erase_top(ids, e, s, int(k), mask_id, split.example_units(i))
        for i, (ids, e, s, k) in enumerate(zip(current, split.explained, scores, counts, strict=True))
    ]


def padded_units(split: EncodedSplit, rows: np.ndarray, width: int) -> np.ndarray | None:
    """(B, width) int64 the units of the examples `rows` of `split`, right-padded with -1 (ExplainBatch's
    `units`); None for token units."""
    if not split.units:
        return None
    units = np.full((len(rows), width), -1, dtype=np.int64)
    for r, i in enumerate(rows):
        units[r, : len(split.units[i])] = split.units[i]
    return units


def lazy_engine_chooser(
    engine: MaskBatchEngine, make_gradient_engine: Callable[[], MaskBatchEngine] | None
) -> Callable[[Measure], MaskBatchEngine]:
    """engine_for(measure): `engine`, or for a measure that needs gradients the engine make_gradient_engine()
    returns, made once, when a measure first asks for it. Without a maker every measure gets `engine` (a
    measure that needs gradients then says so itself)."""
    made: list[MaskBatchEngine] = []

    def engine_for(measure: Measure) -> MaskBatchEngine:
        if not measure.needs_gradients or make_gradient_engine is None:
            return engine
        if not made:
            made.append(make_gradient_engine())
        return made[0]

    return engine_for


def gradient_engine_maker(
    loaded: LoadedModel, options: BackendOptions, engine: MaskBatchEngine
) -> Callable[[], MaskBatchEngine]:
    """A maker of the gradient engine on `loaded` (`options` resolved), with `engine`'s token budget."""
    return lambda: MaskBatchEngine(
        gradient_backend(loaded, options), token_budget=engine.token_budget, cache_mb=engine.cache_mb
    )


def engine_chooser(
    loaded: LoadedModel, options: BackendOptions, engine: MaskBatchEngine
) -> Callable[[Measure], MaskBatchEngine]:
    """lazy_engine_chooser with the gradient engine on `loaded` (gradient_engine_maker)."""
    return lazy_engine_chooser(engine, gradient_engine_maker(loaded, options, engine))


def explain_split(
    measure: Measure,
    engine: MaskBatchEngine,
    sequences: list[np.ndarray],
    split: EncodedSplit,
    batch_rows: int,
    on_batch: Callable[[int], None] | None = None,
    example_ids: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Scores of `measure` for every sequence: batches of similar length, one explain() call each, every
    token of a unit holding its unit's score (Measure.unit_scores).

    example_ids: (N,) the sequences' indices in the whole split (default 0..N-1), for measures that draw
    random numbers per example.
    """
    ids = np.arange(len(sequences)) if example_ids is None else np.asarray(example_ids, dtype=np.int64)
    order = np.argsort([len(s) for s in sequences], kind="stable")
    scores: list[np.ndarray] = [np.empty(0)] * len(sequences)
    pad_id = engine.info.pad_id
    for start in range(0, len(order), batch_rows):
        rows = order[start : start + batch_rows]
        input_ids, attention_mask = pad_batch([sequences[i] for i in rows], pad_id)
        explained = np.zeros(input_ids.shape, dtype=bool)
        for r, i in enumerate(rows):
            explained[r, : len(sequences[i])] = split.explained[i]
        units = padded_units(split, rows, input_ids.shape[1])
        batch = ExplainBatch(input_ids, attention_mask, split.labels[rows], explained, ids[rows], units)
        batch_scores = measure.unit_scores(checked_scores(measure, batch, engine), batch)
        for r, i in enumerate(rows):
            scores[i] = np.asarray(batch_scores[r, : len(sequences[i])], dtype=np.float64)
        if on_batch is not None:
            on_batch(len(rows))
    return scores


@dataclass
class ErasureStep:
    """One finished erasure step of one measure on some examples.

    step: j of r_j (1..10); erased: the masked inputs at r_j, one (T_i,) array per example;
    predictions: (N,) int64 predicted labels on them, None at r = 1 (every explained token masked:
    shared by all measures, scored once); fixed_scores: a non-recursive measure's scores (lists), else None.
    """

    step: int
    erased: list[np.ndarray]
    predictions: np.ndarray | None
    fixed_scores: list[list[float]] | None


def erasure_steps(
    spec: MeasureSpec,
    seed: int,
    split: EncodedSplit,
    engine: MaskBatchEngine,
    current: list[np.ndarray],
    first_step: int,
    batch_rows: int,
    fixed_scores: list[list[float]] | None = None,
    on_batch: Callable[[int], None] | None = None,
    engine_for: Callable[[Measure], MaskBatchEngine] | None = None,
    example_ids: np.ndarray | None = None,
    ratios: Sequence[float] = RATIOS,
) -> Iterator[ErasureStep]:
    """Recursive erasure of `split` by the measure `spec` (of a run seeded `seed`) from step `first_step`
    (inputs `current`) to r = 1, over `ratios` (rising from 0 to 1; default the protocol's 0, 0.1, ..., 1).

    Yields each step as it finishes, so a caller can save it before the next one starts. The erasure of an
    example depends only on that example, so any sharding of a split gives the same steps (up to fp32 noise
    from other batch compositions). `engine` scores the erased inputs; engine_for(measure) is the engine a
    measure explains on (default `engine`; gradient measures need a gradient backend). example_ids: (N,)
    the examples' indices in the whole split when `split` is a shard of it (default 0..N-1).
    """
    mask_id = engine.info.mask_id
    report = on_batch or (lambda _: None)
    steps_total = len(ratios) - 1
    for step in range(first_step, steps_total + 1):
        if step == steps_total:
            report(len(split))
            yield ErasureStep(step, fully_masked(split, mask_id), None, fixed_scores)
            return
        measure = spec.build(seed, step)  # a fresh measure per step: a resumed run redraws identically
        if measure.recursive or fixed_scores is None:
            explaining = engine if engine_for is None else engine_for(measure)
            scores = explain_split(measure, explaining, current, split, batch_rows, report, example_ids)
            if not measure.recursive:
                fixed_scores = [s.tolist() for s in scores]
        else:
            scores = [np.asarray(s) for s in fixed_scores]
            report(len(split))
        current = erase_split(split, current, scores, ratios[step], mask_id)
        # this scoring pass serves as the next step's LOO reference from the engine's cache
        predictions = engine.logits(current).argmax(axis=1)
        yield ErasureStep(step, current, predictions, fixed_scores)


def fully_masked(split: EncodedSplit, mask_id: int) -> list[np.ndarray]:
    """Every explained token masked (r = 1): one (T_i,) array per example."""
    return [np.where(e, mask_id, ids) for ids, e in zip(split.input_ids, split.explained, strict=True)]


def apply_masked(input_ids: list[np.ndarray], masked: list[list[int]], mask_id: int) -> list[np.ndarray]:
    """The inputs with the saved masked positions (one list per example) set to mask_id."""
    current = []
    for ids, positions in zip(input_ids, masked, strict=True):
        x = ids.copy()
        x[np.asarray(positions, dtype=np.int64)] = mask_id
        current.append(x)
    return current


def masked_positions(erased: list[np.ndarray], mask_id: int) -> list[list[int]]:
    """Inverse of apply_masked: the masked positions of each example (what state files store)."""
    return [np.flatnonzero(x == mask_id).tolist() for x in erased]


def save_masked_step(
    out_dir: Path, name: str, ratio: float, erased: list[np.ndarray], labels: np.ndarray
) -> None:
    """`--save-masked`: the masked test set of one measure at one ratio, for `fmm-fast masf --measure`."""
    folder = measure_entry(out_dir / "masked", name)
    folder.mkdir(parents=True, exist_ok=True)
    save_ragged(folder / f"ratio-{ratio:.1f}.npz", erased, labels=labels)


def undefined_racu_reason(predicted: np.ndarray, label_names: Sequence[str], metric: str) -> str:
    """Why RACU has no value: the rand curve is flat, most often because the model predicts one class.

    predicted: (L,) how many examples the model predicts as each label at r = 0.
    """
    counts = np.asarray(predicted)
    if np.count_nonzero(counts) == 1:
        label = label_names[int(counts.argmax())]
        return f"the model predicts one class ('{label}' for all {int(counts.sum())} examples)"
    return f"random masking leaves the {metric} unchanged (a flat rand curve)"


def erasure_result(
    specs: Sequence[MeasureSpec],
    states: dict[str, dict],
    labels: np.ndarray,
    metric: str,
    seconds: float,
    predicted: np.ndarray,
    label_names: Sequence[str],
) -> dict:
    """Curves, ACU/RACU against `rand` and costs from the finished state of each measure of `specs`
    ("curve": one metrics dict per ratio, "seconds", "forward_passes"); labels: (N,) gold labels (the
    majority baseline: the majority predictor's `metric`); predicted: (L,) examples predicted as each of
    the model's L labels `label_names` at r = 0 (why a RACU is undefined, if one is)."""
    metric_names = list(states[BASELINE]["curve"][0])
    curves = {
        name: {m: [point[m] for point in s["curve"]] for m in metric_names} for name, s in states.items()
    }
    scores = acu_racu_against_baseline({name: curve[metric] for name, curve in curves.items()})
    majority = majority_metric(labels, metric, len(label_names))
    chosen = {spec.name: spec for spec in specs}
    measures = {
        name: {
            **chosen[name].record(),  # signed and where its code came from: report never imports it
            "acu": acu,
            "racu": racu,
            "seconds": float(states[name]["seconds"]),
            "forward_passes": int(states[name]["forward_passes"]),
            # rows this measure took from another's passes (counted there): alone it would run them too
            "shared_rows": int(states[name].get("shared_rows", 0)),
        }
        for name, (acu, racu) in scores.items()
    }
    for name, (_, racu) in scores.items():
        if np.isnan(racu):
            measures[name]["racu_undefined"] = undefined_racu_reason(predicted, label_names, metric)
    return {
        "curves": curves,
        "measures": measures,
        "metric": metric,
        "majority_baseline": majority,
        "ratios": [float(r) for r in RATIOS],
        "n_examples": len(labels),
        "seconds_this_session": seconds,
    }


RUN_FILES = ("state", "masked", "result.json")  # what a seed directory holds (its marker lists them)
METRICS_SHAPE = {"*": float}
SHARED_STATE = {"r0": METRICS_SHAPE, "r1": METRICS_SHAPE, "r0_predicted": [int]}
MEASURE_STATE = {
    "curve": [METRICS_SHAPE],
    "masked": [[int]],
    "fixed_scores": (None, [[float]]),
    "seconds": float,
    "forward_passes": int,
    "shared_rows?": int,  # absent from states of older versions
}


def measure_state_path(out_dir: Path, name: str) -> Path:
    """Where the one-process erasure run in `out_dir` (an evaluation's seed directory) keeps a measure's
    state ("shared": the points every measure shares)."""
    return measure_entry(out_dir / "state", name, ".json")


def saved_unmasked_scores(out_dir: Path, measure: str) -> list[np.ndarray] | None:
    """The scores a non-recursive measure gave the unmasked inputs in the erasure run in `out_dir`, one
    (T_i,) float64 array per example, of the gold label: its fixed ranking, what explaining the unmasked
    split gives. None when that run saved none (a recursive measure, one it did not run, a sharded run)."""
    state = read_state(measure_state_path(out_dir, measure), MEASURE_STATE)
    if state is None or state["fixed_scores"] is None:
        return None
    return [np.asarray(scores, dtype=np.float64) for scores in state["fixed_scores"]]


def fits_split(state: dict, split: EncodedSplit) -> bool:
    """Whether a measure's saved state describes `split`'s examples: one list of masked positions per
    example, each inside its example, fixed scores (if any) one per token, at most one curve point per
    ratio."""
    lengths = [len(ids) for ids in split.input_ids]
    if len(state["masked"]) != len(lengths) or not 1 <= len(state["curve"]) <= len(RATIOS):
        return False
    if any(p < 0 or p >= n for positions, n in zip(state["masked"], lengths, strict=True) for p in positions):
        return False
    fixed = state["fixed_scores"]
    return fixed is None or [len(scores) for scores in fixed] == lengths


class ErasureRun:
    """Runs (and resumes) the recursive-erasure curves of several measures on one split."""

    def __init__(
        self,
        settings: EvaluationSettings,
        split: EncodedSplit,
        engine: MaskBatchEngine,
        out_dir: Path,
        metric: str,
        gradient_engine: Callable[[], MaskBatchEngine] | None = None,
        progress_factory: Callable[..., object] | None = None,
    ) -> None:
        self.settings = settings
        self.split = split
        self.engine = engine
        self.out_dir = out_dir
        self.metric = metric
        self._engine_for = lazy_engine_chooser(engine, gradient_engine)
        self.progress_factory = progress_factory
        self.mask_id = engine.info.mask_id
        if engine.info.num_labels <= int(split.labels.max(initial=0)):
            raise UserError(
                f"the model has {engine.info.num_labels} labels but the dataset uses label index "
                f"{int(split.labels.max())}; evaluate a model trained on this dataset"
            )

    # -- shared points -------------------------------------------------------------------------
    def _score(self, sequences: list[np.ndarray]) -> dict[str, float]:
        logits = self.engine.logits(sequences)
        predictions = logits.argmax(axis=1)
        return compute_metrics(self.split.labels, predictions, self.engine.info.num_labels)

    # -- state ---------------------------------------------------------------------------------
    def _load_state(self, name: str) -> dict | None:
        """A saved state, or None when there is none or it is damaged (then with a warning: recomputed).

        Which run the states belong to is settled by the directory's run marker (claim_directory).
        """
        path = measure_state_path(self.out_dir, name)
        if name == "shared":
            num_labels = self.engine.info.num_labels
            return read_state(path, SHARED_STATE, lambda state: len(state["r0_predicted"]) == num_labels)
        return read_state(path, MEASURE_STATE, lambda state: fits_split(state, self.split))

    def _save_state(self, name: str, state: dict) -> None:
        path = measure_state_path(self.out_dir, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_record(path, state)

    # -- one curve -----------------------------------------------------------------------------
    def run_measure(self, spec: MeasureSpec, shared: dict[str, dict[str, float]]) -> dict:
        """Curve of one measure; resumes from its state file. Returns the finished state."""
        name = spec.name
        state = self._load_state(name) or {
            "measure": name,
            "curve": [shared["r0"]],
            "masked": [[] for _ in self.split.input_ids],
            "fixed_scores": None,
            "seconds": 0.0,
            "forward_passes": 0,
            "shared_rows": 0,
        }
        steps_total = len(RATIOS) - 1
        done = len(state["curve"]) - 1
        if done >= steps_total:
            return state
        progress = self._progress(name, (steps_total - done) * len(self.split))
        started, rows_before = time.perf_counter(), self.engine.stats.forward_rows
        self.engine.owner, shared_before = name, self.engine.stats.shared_rows
        steps = erasure_steps(
            spec,
            self.settings.seed,
            self.split,
            self.engine,
            apply_masked(self.split.input_ids, state["masked"], self.mask_id),
            done + 1,
            self.settings.engine.explain_batch_rows,
            state["fixed_scores"],
            lambda k: progress_update(progress, k),
            self._engine_for,
        )
        for step in steps:
            metrics = (  # no measure is computed at r = 1: the shared fully masked point
                shared["r1"]
                if step.predictions is None
                else compute_metrics(self.split.labels, step.predictions, self.engine.info.num_labels)
            )
            if self.settings.save_masked:
                save_masked_step(self.out_dir, name, RATIOS[step.step], step.erased, self.split.labels)
            state["masked"] = masked_positions(step.erased, self.mask_id)
            state["fixed_scores"] = step.fixed_scores
            state["curve"].append(metrics)
            now = time.perf_counter()
            state["seconds"] += now - started
            state["forward_passes"] += self.engine.stats.forward_rows - rows_before
            state["shared_rows"] = state.get("shared_rows", 0) + self.engine.stats.shared_rows - shared_before
            started, rows_before = now, self.engine.stats.forward_rows
            shared_before = self.engine.stats.shared_rows
            self._save_state(name, state)
        if progress is not None:
            progress.close()
        return state

    def _progress(self, name: str, total: int):
        return None if self.progress_factory is None else self.progress_factory(total=total, desc=name)

    # -- the whole run -------------------------------------------------------------------------
    def run(self) -> dict:
        """All curves (rand first), ACU/RACU, and the result record (also written as result.json)."""
        started = time.perf_counter()
        claim_directory(self.out_dir, RUN_KIND, self.settings.fingerprint_fields(), files=RUN_FILES)
        shared = self._load_state("shared")
        if shared is None:
            num_labels = self.engine.info.num_labels
            predictions = self.engine.logits(list(self.split.input_ids)).argmax(axis=1)
            shared = {
                "r0": compute_metrics(self.split.labels, predictions, num_labels),
                "r1": self._score(fully_masked(self.split, self.mask_id)),
                "r0_predicted": np.bincount(predictions, minlength=num_labels).tolist(),
            }
            self._save_state("shared", shared)
        # canonical names ("beam" → "beam-sign-10"): one state file and one result key per measure
        specs = self.settings.specs
        states = {spec.name: self.run_measure(spec, shared) for spec in specs}
        seconds = time.perf_counter() - started
        info = self.engine.info
        return erasure_result(
            specs, states, self.split.labels, self.metric, seconds, shared["r0_predicted"], info.label_names
        )


def progress_update(progress, count: int) -> None:
    if progress is not None:
        progress.update(count)


def evaluate_model(
    loaded: LoadedModel,
    dataset: TextDataset,
    encoded: EncodedSplit,
    settings: EvaluationSettings,
    out_dir: Path,
    engine: MaskBatchEngine,
    progress_factory: Callable[..., object] | None = None,
    fidelity: Callable[[], dict] | None = None,
) -> dict:
    """Curves of one seed for a loaded model on `encoded` (settings.data's split of `dataset`); writes and
    returns out_dir/result.json's record. fidelity: the reduced-precision fidelity estimate of the seed
    (protocols.fidelity), computed once the curves are, kept in the record as "fidelity"."""
    started = time.perf_counter()
    run = ErasureRun(
        settings,
        encoded,
        engine,
        out_dir,
        dataset.metric,
        gradient_engine=gradient_engine_maker(loaded, settings.backend, engine),
        progress_factory=progress_factory,
    )
    result = run.run()
    record = evaluation_record(loaded, dataset, encoded, settings, result, engine.stats.as_dict())
    if fidelity is not None:
        record["fidelity"] = fidelity()
    record["durations"] = {"total_seconds": time.perf_counter() - started}
    write_record(out_dir / "result.json", record)
    finish_run(out_dir)
    return record


def evaluation_record(
    loaded: LoadedModel,
    dataset: TextDataset,
    encoded: EncodedSplit,
    settings: EvaluationSettings,
    result: dict,
    engine: dict,
) -> dict:
    """The result.json record of one seed: what ran, on what (with what truncation to the model's length
    cut of `encoded`), and erasure_result's curves and scores."""
    return {
        **split_run_header(RUN_KIND, settings, loaded, dataset, encoded),
        "fingerprint": settings.fingerprint(),  # what decides its numbers: report counts equal runs once
        **result,
        "engine": engine,
        "versions": versions(),
        "machine": machine_record(),
    }

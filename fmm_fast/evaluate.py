"""Faithfulness by recursive erasure (SPEC §4–5): one curve per measure, ACU/RACU against `rand`.

The loop is backend-agnostic: scoring passes go through a MaskBatchEngine, whose cache lets the pass
that scored ratio r_j serve as the reference input of the measure at the next step (LOO's y0).
Every finished (measure, ratio) step is written to `<out>/state/` at once, so a killed run resumes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fmm_fast import __version__
from fmm_fast.data.base import TextDataset
from fmm_fast.engine import MaskBatchEngine
from fmm_fast.errors import UserError
from fmm_fast.loading import LoadedModel, gradient_backend
from fmm_fast.masking import masked_count
from fmm_fast.measures import get_measure
from fmm_fast.measures.base import ExplainBatch, Measure
from fmm_fast.metrics import compute_metrics
from fmm_fast.outputs import claim_directory
from fmm_fast.runrecord import read_record, versions, write_record
from fmm_fast.settings import EvaluationSettings
from fmm_fast.stats import RATIOS, acu_racu
from fmm_fast.types import EncodedSplit, pad_batch, save_ragged

BASELINE = "rand"


def erase_top(
    input_ids: np.ndarray, explained: np.ndarray, scores: np.ndarray, count: int, mask_id: int
) -> np.ndarray:
    """Mask the `count` highest-ranked explained tokens of one example.

    input_ids, explained, scores: (T,). Ranking: already-masked explained tokens first, then explained
    tokens by descending score (ties → earlier position), non-explained tokens never.
    """
    key = np.where(explained, scores.astype(np.float64), -np.inf)
    key[explained & (input_ids == mask_id)] = np.inf
    order = np.argsort(-key, kind="stable")[:count]
    erased = input_ids.copy()
    erased[order] = mask_id
    return erased


def explain_split(
    measure: Measure,
    engine: MaskBatchEngine,
    sequences: list[np.ndarray],
    split: EncodedSplit,
    batch_rows: int,
    on_batch: Callable[[int], None] | None = None,
) -> list[np.ndarray]:
    """Scores of `measure` for every sequence: batches of similar length, one explain() call each."""
    order = np.argsort([len(s) for s in sequences], kind="stable")
    scores: list[np.ndarray] = [np.empty(0)] * len(sequences)
    pad_id = engine.info.pad_id
    for start in range(0, len(order), batch_rows):
        rows = order[start : start + batch_rows]
        input_ids, attention_mask = pad_batch([sequences[i] for i in rows], pad_id)
        explained = np.zeros(input_ids.shape, dtype=bool)
        for r, i in enumerate(rows):
            explained[r, : len(sequences[i])] = split.explained[i]
        batch = ExplainBatch(input_ids, attention_mask, split.labels[rows], explained)
        batch_scores = measure.explain(batch, engine)
        for r, i in enumerate(rows):
            scores[i] = np.asarray(batch_scores[r, : len(sequences[i])], dtype=np.float64)
        if on_batch is not None:
            on_batch(len(rows))
    return scores


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
        self._gradient_engine_factory = gradient_engine
        self._gradient_engine: MaskBatchEngine | None = None
        self.progress_factory = progress_factory
        self.mask_id = engine.info.mask_id
        self.state_dir = out_dir / "state"
        self.ratios = RATIOS
        self.lengths = np.asarray([int(e.sum()) for e in split.explained])
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

    def _fully_masked(self) -> list[np.ndarray]:
        return [
            np.where(e, self.mask_id, ids)
            for ids, e in zip(self.split.input_ids, self.split.explained, strict=True)
        ]

    # -- state ---------------------------------------------------------------------------------
    def _load_state(self, name: str) -> dict | None:
        """A saved state, or None when there is none or it is damaged (then with a warning: recomputed).

        Which run the states belong to is settled by the directory's run marker (claim_directory).
        """
        path = self.state_dir / f"{name}.json"
        if not path.is_file():
            return None
        try:
            state = read_record(path)
            if ("r0" if name == "shared" else "curve") not in state:
                raise ValueError("not a state record")
        except (OSError, UnicodeDecodeError, ValueError, LookupError, TypeError) as error:
            print(f"fmm-fast: warning: {path} is damaged ({error}); recomputing it", file=sys.stderr)
            return None
        return state

    def _save_state(self, name: str, state: dict) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        write_record(self.state_dir / f"{name}.json", state)

    def _engine_for(self, measure: Measure) -> MaskBatchEngine:
        if not measure.needs_gradients:
            return self.engine
        if self._gradient_engine is None:
            if self._gradient_engine_factory is None:
                return self.engine  # the measure itself reports that it needs gradients
            self._gradient_engine = self._gradient_engine_factory()
        return self._gradient_engine

    # -- one curve -----------------------------------------------------------------------------
    def run_measure(self, name: str, shared: dict[str, dict[str, float]]) -> dict:
        """Curve of one measure; resumes from its state file. Returns the finished state."""
        state = self._load_state(name) or {
            "measure": name,
            "curve": [shared["r0"]],
            "masked": [[] for _ in self.split.input_ids],
            "fixed_scores": None,
            "seconds": 0.0,
            "forward_passes": 0,
        }
        steps_total = len(self.ratios) - 1
        done = len(state["curve"]) - 1
        if done >= steps_total:
            return state
        progress = self._progress(name, (steps_total - done) * len(self.split))
        for step in range(done + 1, len(self.ratios)):
            started, rows_before = time.perf_counter(), self.engine.stats.forward_rows
            current = self._apply(state["masked"])
            if step == steps_total:
                erased, metrics = self._fully_masked(), shared["r1"]  # no measure computed at r = 1
                progress_update(progress, len(self.split))
            else:
                # a fresh measure per step with a step-derived seed: a resumed run redraws identically
                measure = get_measure(
                    name, seed=self.settings.seed * 1000 + step, **self.settings.measure_options
                )
                if measure.recursive or state["fixed_scores"] is None:
                    scores = explain_split(
                        measure,
                        self._engine_for(measure),
                        current,
                        self.split,
                        self.settings.engine.explain_batch_rows,
                        lambda k: progress_update(progress, k),
                    )
                    if not measure.recursive:
                        state["fixed_scores"] = [s.tolist() for s in scores]
                else:
                    scores = [np.asarray(s) for s in state["fixed_scores"]]
                    progress_update(progress, len(self.split))
                ratio = float(self.ratios[step])
                erased = [
                    erase_top(ids, e, s, int(masked_count(ratio, n)), self.mask_id)
                    for ids, e, s, n in zip(current, self.split.explained, scores, self.lengths, strict=True)
                ]
                metrics = self._score(erased)
            if self.settings.save_masked:
                self._save_masked(name, step, erased)
            state["masked"] = [np.flatnonzero(x == self.mask_id).tolist() for x in erased]
            state["curve"].append(metrics)
            state["seconds"] += time.perf_counter() - started
            state["forward_passes"] += self.engine.stats.forward_rows - rows_before
            self._save_state(name, state)
        if progress is not None:
            progress.close()
        return state

    def _apply(self, masked: list[list[int]]) -> list[np.ndarray]:
        current = []
        for ids, positions in zip(self.split.input_ids, masked, strict=True):
            x = ids.copy()
            x[np.asarray(positions, dtype=np.int64)] = self.mask_id
            current.append(x)
        return current

    def _save_masked(self, name: str, step: int, erased: list[np.ndarray]) -> None:
        folder = self.out_dir / "masked" / name
        folder.mkdir(parents=True, exist_ok=True)
        save_ragged(folder / f"ratio-{self.ratios[step]:.1f}.npz", erased, labels=self.split.labels)

    def _progress(self, name: str, total: int):
        return None if self.progress_factory is None else self.progress_factory(total=total, desc=name)

    # -- the whole run -------------------------------------------------------------------------
    def run(self) -> dict:
        """All curves (rand first), ACU/RACU, and the result record (also written as result.json)."""
        started = time.perf_counter()
        claim_directory(self.out_dir, "evaluate", self.settings.fingerprint_fields())
        shared = self._load_state("shared")
        if shared is None:
            predictions = self.engine.logits(list(self.split.input_ids)).argmax(axis=1)
            shared = {
                "r0": compute_metrics(self.split.labels, predictions, self.engine.info.num_labels),
                "r1": self._score(self._fully_masked()),
                "r0_predicted": np.bincount(predictions, minlength=self.engine.info.num_labels).tolist(),
            }
            self._save_state("shared", shared)
        # canonical names ("beam" → "beam-sign-10"): one state file and one result key per measure
        names = list(
            dict.fromkeys(
                [
                    BASELINE,
                    *(get_measure(m, **self.settings.measure_options).name for m in self.settings.measures),
                ]
            )
        )
        states = {name: self.run_measure(name, shared) for name in names}
        return self._result(states, shared, time.perf_counter() - started)

    def _undefined_racu_reason(self, shared: dict) -> str:
        """Why RACU has no value: the rand curve is flat, most often because the model predicts one class."""
        counts = np.asarray(shared["r0_predicted"])
        if np.count_nonzero(counts) == 1:
            label = self.engine.info.label_names[int(counts.argmax())]
            return f"the model predicts one class ('{label}' for all {int(counts.sum())} examples)"
        return f"random masking leaves the {self.metric} unchanged (a flat rand curve)"

    def _result(self, states: dict[str, dict], shared: dict, seconds: float) -> dict:
        metric_names = list(states[BASELINE]["curve"][0])
        curves = {
            name: {m: [point[m] for point in s["curve"]] for m in metric_names} for name, s in states.items()
        }
        names = list(curves)
        measure_curves = np.asarray([curves[n][self.metric] for n in names], dtype=np.float64)
        baseline = np.repeat(measure_curves[names.index(BASELINE)][None, :], len(names), axis=0)
        acu, racu = acu_racu(measure_curves, baseline, self.ratios)
        labels = self.split.labels
        majority = float(np.bincount(labels).max() / len(labels)) if len(labels) else float("nan")
        measures = {
            name: {
                "signed": bool(get_measure(name).signed),
                "acu": float(acu[i]),
                "racu": float(racu[i]),
                "seconds": float(states[name]["seconds"]),
                "forward_passes": int(states[name]["forward_passes"]),
            }
            for i, name in enumerate(names)
        }
        for i, name in enumerate(names):
            if np.isnan(racu[i]):
                measures[name]["racu_undefined"] = self._undefined_racu_reason(shared)
        return {
            "curves": curves,
            "measures": measures,
            "metric": self.metric,
            "majority_baseline": majority,
            "ratios": [float(r) for r in self.ratios],
            "n_examples": len(self.split),
            "seconds_this_session": seconds,
        }


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
) -> dict:
    """Curves of one seed for a loaded model on `encoded` (settings.data's split of `dataset`); writes and
    returns out_dir/result.json's record."""
    started = time.perf_counter()
    run = ErasureRun(
        settings.ran_in(loaded.precision.used),  # a resumed run must have run in the same precision
        encoded,
        engine,
        out_dir,
        dataset.metric,
        gradient_engine=lambda: MaskBatchEngine(
            gradient_backend(loaded, settings.backend), token_budget=engine.token_budget
        ),
        progress_factory=progress_factory,
    )
    result = run.run()
    record = {
        "kind": "evaluate",
        "fmm_fast_version": __version__,
        "arguments": settings.to_dict(),
        "model": {
            "path": settings.model,
            "strategy": loaded.info.strategy,
            "source": loaded.info.source,
            "backend": loaded.backend.name,
            "precision": loaded.precision.as_dict(),
        },
        "dataset": dataset.name,
        "split": settings.data.split,
        "seed": settings.seed,
        **result,
        "durations": {"total_seconds": time.perf_counter() - started},
        "engine": engine.stats.as_dict(),
        "versions": versions(),
    }
    write_record(out_dir / "result.json", record)
    return record

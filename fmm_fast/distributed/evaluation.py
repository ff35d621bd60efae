"""`evaluate --workers`: recursive erasure sharded by example over Ray actors, metrics in the driver.

A task is a shard of examples and the measures it runs: its whole erasure (all steps, every measure)
runs in one actor. Recursive measures go in length-balanced chunks (with the r = 0 and r = 1
predictions); non-recursive ones (beam search, whose cost varies most) in small groups handed to
whichever actor is idle. Each finished task is saved under `<out>/state/shards/`, so a rerun resumes:
the directory is claimed under the same run marker and fingerprint as a one-process run
(fmm_fast.core.outputs), so only the same run resumes, and a damaged shard file is recomputed with a warning.
The driver reassembles predictions and masked inputs in example order and computes the curves,
ACU/RACU exactly as one process does (fmm_fast.protocols.erasure.erasure_result).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from fmm_fast.backends.loading import LoadedModel
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.metrics import compute_metrics
from fmm_fast.core.outputs import claim_directory, finish_run
from fmm_fast.core.reading import read_state
from fmm_fast.core.records import write_record
from fmm_fast.core.settings import EvaluationSettings
from fmm_fast.data.base import TextDataset
from fmm_fast.distributed.pool import Task, WorkerPool
from fmm_fast.distributed.sharding import split_shards
from fmm_fast.distributed.worker import TaskResult
from fmm_fast.protocols.curve_stats import RATIOS
from fmm_fast.protocols.erasure import (
    RUN_FILES,
    RUN_KIND,
    apply_masked,
    erasure_result,
    evaluation_record,
    fully_masked,
    save_masked_step,
)

SHARD_STATE = {
    "indices": [int],
    "measures": {"*": {"predictions": [[int]], "masked": [[[int]]], "seconds": float, "forward_passes": int}},
}


@dataclass(frozen=True)
class Shard:
    """Examples (indices into the split, ascending) whose whole erasure by `measures` runs in one task;
    with_ends: the task also predicts them unmasked (r = 0) and fully masked (r = 1). key names its state
    file (a hash of the run's fingerprint and all of this)."""

    key: str
    indices: list[int]
    measures: list[str]
    with_ends: bool

    @property
    def work(self) -> int:
        """Progress units: examples × measures."""
        return len(self.indices) * len(self.measures)


def _fits_shard(saved: dict, shard: Shard) -> bool:
    """Whether a saved shard state holds every measure of `shard`, a row per example and step."""
    rows, steps = len(shard.indices), len(RATIOS) - 2
    ends = all(len(saved.get(end) or []) == rows for end in ("r0", "r1")) if shard.with_ends else True
    return (
        saved["indices"] == shard.indices
        and set(saved["measures"]) == set(shard.measures)
        and ends
        and all(
            len(curve["predictions"]) == len(curve["masked"]) == steps
            and all(len(step) == rows for step in [*curve["predictions"], *curve["masked"]])
            for curve in saved["measures"].values()
        )
    )


class ShardedErasure:
    """The erasure curves of several measures on one split, computed by a WorkerPool."""

    def __init__(
        self,
        pool: WorkerPool,
        settings: EvaluationSettings,
        split: EncodedSplit,
        out_dir: Path,
        metric: str,
        label_names: list[str],
        mask_id: int,
        progress_factory: Callable[..., object] | None = None,
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.split = split
        self.out_dir = out_dir
        self.metric = metric
        self.label_names = label_names
        self.num_labels = len(label_names)
        self.mask_id = mask_id
        self.progress_factory = progress_factory
        self.shard_dir = out_dir / "state" / "shards"
        self.resumed = 0

    def plan(self) -> list[Shard]:
        """Every shard of the run, costliest first within each kind (beam groups go first)."""
        specs = self.settings.specs
        recursive = [s.name for s in specs if s.recursive]  # `rand` is always one of them
        fixed = [s.name for s in specs if not s.recursive]
        workers = len(self.pool.actors)
        kinds = [(fixed, True, False), (recursive, False, True)] if fixed else [(recursive, False, True)]
        return [
            Shard(self._key(rows, measures, with_ends), rows, measures, with_ends)
            for measures, uneven, with_ends in kinds
            for rows in split_shards(self.split, workers, uneven)
        ]

    def _task(self, shard: Shard) -> Task:
        rows = np.asarray(shard.indices, dtype=np.int64)
        settings = self.settings
        specs = [spec for spec in settings.specs if spec.name in shard.measures]
        arguments = (rows, specs, settings.seed, settings.engine.explain_batch_rows, shard.with_ends)
        return Task(shard.key, "erase", (self.split.subset(rows), *arguments), len(rows))

    def _key(self, indices: list[int], measures: list[str], with_ends: bool) -> str:
        identity = [self.settings.fingerprint(), indices, measures, with_ends]
        return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:20]

    # -- state ---------------------------------------------------------------------------------
    def _load(self, shard: Shard) -> dict | None:
        """A finished shard's saved state; None when there is none or it is damaged (then recomputed)."""
        path = self.shard_dir / f"{shard.key}.json"
        return read_state(path, SHARD_STATE, partial(_fits_shard, shard=shard))

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> dict:
        """All curves, ACU/RACU (erasure_result's record) plus "resumed_shards"."""
        started = time.perf_counter()
        claim_directory(self.out_dir, RUN_KIND, self.settings.fingerprint_fields(), files=RUN_FILES)
        self.shard_dir.mkdir(parents=True, exist_ok=True)
        shards = {shard.key: shard for shard in self.plan()}
        done: dict[str, dict] = {}
        for key, shard in shards.items():
            saved = self._load(shard)
            if saved is not None:
                done[key] = saved
        self.resumed = len(done)
        pending = [shard for key, shard in shards.items() if key not in done]
        progress = self._progress(sum(s.work for s in pending))

        def finish(task: Task, result: TaskResult) -> None:
            shard = shards[task.key]
            saved = {"indices": shard.indices, **result.value, "host": result.host, "pid": result.pid}
            saved["seconds"] = result.seconds
            write_record(self.shard_dir / f"{task.key}.json", saved)  # before it counts: a rerun resumes here
            done[task.key] = saved
            if progress is not None:
                progress.update(shard.work)

        self.pool.run([self._task(shard) for shard in pending], finish)
        if progress is not None:
            progress.close()
        return self._assemble([done[key] for key in shards], time.perf_counter() - started)

    def _assemble(self, shards: list[dict], seconds: float) -> dict:
        """Predictions and masked positions back in example order; curves as one process computes them."""
        n = len(self.split)
        ends = {end: np.full(n, -1, dtype=np.int64) for end in ("r0", "r1")}
        steps = len(RATIOS) - 2  # measured steps j = 1..9
        predictions: dict[str, np.ndarray] = {}
        masked: dict[str, list[list[list[int]]]] = {}
        costs: dict[str, dict[str, float]] = {}
        for shard in shards:
            rows = np.asarray(shard["indices"], dtype=np.int64)
            for end in ends:
                if end in shard:
                    ends[end][rows] = shard[end]
            for name, curve in shard["measures"].items():
                predictions.setdefault(name, np.full((steps, n), -1, dtype=np.int64))[:, rows] = curve[
                    "predictions"
                ]
                steps_masked = masked.setdefault(name, [[[] for _ in range(n)] for _ in range(steps)])
                for j in range(steps):
                    for row, positions in zip(rows, curve["masked"][j], strict=True):
                        steps_masked[j][row] = positions
                cost = costs.setdefault(name, {"seconds": 0.0, "forward_passes": 0})
                cost["seconds"] += curve["seconds"]
                cost["forward_passes"] += curve["forward_passes"]
        missing = [name for name, p in predictions.items() if (p < 0).any()] + [
            e for e, p in ends.items() if (p < 0).any()
        ]
        if missing:  # every example is in exactly one shard per measure: a gap is a bug, never a result
            raise RuntimeError(f"shards left examples without predictions for {missing}")
        labels = self.split.labels

        def score(predicted: np.ndarray) -> dict[str, float]:
            return compute_metrics(labels, predicted, self.num_labels)

        states = {
            name: {
                "curve": [score(ends["r0"]), *[score(p) for p in predictions[name]], score(ends["r1"])],
                **costs[name],
            }
            for name in (spec.name for spec in self.settings.specs)
        }
        if self.settings.save_masked:
            for name in states:
                for j in range(steps):
                    erased = apply_masked(self.split.input_ids, masked[name][j], self.mask_id)
                    save_masked_step(self.out_dir, name, RATIOS[j + 1], erased, labels)
                save_masked_step(
                    self.out_dir, name, RATIOS[-1], fully_masked(self.split, self.mask_id), labels
                )
        predicted = np.bincount(ends["r0"], minlength=self.num_labels)
        result = erasure_result(
            self.settings.specs, states, labels, self.metric, seconds, predicted, self.label_names
        )
        return {**result, "resumed_shards": self.resumed}

    def _progress(self, total: int):
        if self.progress_factory is None:
            return None
        return self.progress_factory(total=total, desc=f"{len(self.pool.actors)} workers")


def evaluate_sharded(
    pool: WorkerPool,
    loaded: LoadedModel,
    dataset: TextDataset,
    encoded: EncodedSplit,
    settings: EvaluationSettings,
    out_dir: Path,
    progress_factory: Callable[..., object] | None = None,
) -> dict:
    """evaluate_model on a WorkerPool: the same result.json record, plus a `workers` section."""
    started = time.perf_counter()
    pool.begin()
    info = loaded.info
    run = ShardedErasure(
        pool, settings, encoded, out_dir, dataset.metric, info.label_names, info.mask_id, progress_factory
    )
    result = run.run()
    record = evaluation_record(loaded, dataset, encoded, settings, result, pool.engine.as_dict())
    record["workers"] = pool.record()
    record["durations"] = {"total_seconds": time.perf_counter() - started}
    write_record(out_dir / "result.json", record)
    finish_run(out_dir)
    return record

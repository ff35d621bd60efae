"""The Ray actor: one exported model opened once, its own MaskBatchEngine, and the three kinds of work.

The class is plain Python (pool.py wraps it with ray.remote), so this module imports without Ray.
"""

from __future__ import annotations

import hashlib
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.settings import EngineOptions
from fmm_fast.core.writing import write_bytes
from fmm_fast.measures.spec import MeasureSpec
from fmm_fast.protocols.erasure import erasure_steps, fully_masked, masked_positions
from fmm_fast.protocols.explanations import predict_and_explain


@dataclass(frozen=True)
class ModelFile:
    """Where an actor finds the model: `path` when that file (same sha256) exists on its node, else the bytes
    behind bytes_ref (a one-element list, so Ray passes the object reference and not the bytes: an actor on
    the driver's machine or on shared storage never fetches them)."""

    path: str
    sha256: str
    bytes_ref: list

    @classmethod
    def publish(cls, path: Path, ray) -> ModelFile:
        data = path.read_bytes()
        return cls(str(path.resolve()), hashlib.sha256(data).hexdigest(), [ray.put(data)])

    def local_path(self) -> Path:
        path = Path(self.path)
        if path.is_file() and _sha256(path) == self.sha256:
            return path
        import ray

        folder = Path(tempfile.mkdtemp(prefix="fmm-fast-model-"))
        copy = folder / path.name
        write_bytes(copy, ray.get(self.bytes_ref[0]))
        return copy


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class TaskResult:
    """What an actor sends back for one task: the payload, who ran it and for how long (seconds in the
    actor, so the driver can tell compute from scheduling overhead), and what its engine did for it (the
    EngineStats fields, as a dict of increments)."""

    value: object
    host: str
    pid: int
    seconds: float
    engine: dict


class ModelWorker:
    """One actor. It opens the model on its first task and keeps it (every task names the model, so a
    restarted actor reopens it by itself); the ONNX Runtime session runs `threads` intra-op threads,
    inter-op 1 (ONNX Runtime ignores the OMP_NUM_THREADS Ray sets, so the count is set on the session)."""

    def __init__(self, provider: str, threads: int, engine: EngineOptions) -> None:
        self.provider = provider
        self.threads = threads
        self.engine_options = engine
        self._engine: MaskBatchEngine | None = None

    def _engine_for(self, model: ModelFile) -> MaskBatchEngine:
        if self._engine is None:
            from fmm_fast.backends.onnx_backend import OnnxBackend

            backend = OnnxBackend.from_file(model.local_path(), provider=self.provider, threads=self.threads)
            self._engine = self.engine_options.engine_on(backend)
        return self._engine

    def open(self, model: ModelFile) -> dict:
        """Open the model now (a bad file fails here); returns this actor's host, process id and threads."""
        self._engine_for(model)
        return {"host": socket.gethostname(), "pid": os.getpid(), "threads": self.threads}

    def _timed(self, model: ModelFile, work, *args) -> TaskResult:
        engine = self._engine_for(model)
        started, before = time.perf_counter(), engine.stats.as_dict()
        value = work(engine, *args)
        seconds = time.perf_counter() - started
        used = {field: count - before[field] for field, count in engine.stats.as_dict().items()}
        return TaskResult(value, socket.gethostname(), os.getpid(), seconds, used)

    def erase(
        self,
        model: ModelFile,
        split: EncodedSplit,
        example_ids: np.ndarray,
        measures: list[MeasureSpec],
        seed: int,
        batch_rows: int,
        with_ends: bool,
    ) -> TaskResult:
        """The whole recursive erasure of a shard by every measure; see erase_shard."""
        arguments = (split, example_ids, measures, seed, batch_rows, with_ends)
        return self._timed(model, erase_shard, *arguments)

    def explain(
        self,
        model: ModelFile,
        split: EncodedSplit,
        example_ids: np.ndarray,
        spec: MeasureSpec,
        seed: int,
        batch_rows: int,
    ) -> TaskResult:
        """Class probabilities (N, C) and one (T_i,) score array per example of a shard (example_ids: its
        indices) by the measure `spec` seeded `seed`."""
        return self._timed(model, _predict_and_explain, split, spec.build(seed), batch_rows, example_ids)

    def signals(self, model: ModelFile, sequences: list[np.ndarray]) -> TaskResult:
        """(N, L+1, D) MaSF signals of a shard of sequences."""
        return self._timed(model, MaskBatchEngine.signals, sequences)


def _predict_and_explain(
    engine: MaskBatchEngine, split: EncodedSplit, measure, batch_rows: int, example_ids: np.ndarray
) -> tuple[np.ndarray, list[np.ndarray]]:
    return predict_and_explain(engine, engine, split, measure, batch_rows, None, False, example_ids)


def erase_shard(
    engine: MaskBatchEngine,
    split: EncodedSplit,
    example_ids: np.ndarray,
    measures: list[MeasureSpec],
    seed: int,
    batch_rows: int,
    with_ends: bool,
) -> dict:
    """Recursive erasure of a shard (example_ids: (N,) its indices in the whole split) by each measure of a
    run seeded `seed`.

    Returns {"measures": {name: {"masked": per step j = 1..9, the masked positions of each example;
    "predictions": per step j = 1..9, (N,) predicted labels; "seconds"; "forward_passes"}}} and, with_ends,
    "r0"/"r1": (N,) predictions on the unmasked and the fully masked inputs.
    """
    mask_id = engine.info.mask_id
    result: dict = {"measures": {}}
    if with_ends:
        result["r0"] = engine.logits(split.input_ids).argmax(axis=1).tolist()
        result["r1"] = engine.logits(fully_masked(split, mask_id)).argmax(axis=1).tolist()
    for spec in measures:
        started, rows = time.perf_counter(), engine.stats.forward_rows
        steps = [
            step
            for step in erasure_steps(
                spec, seed, split, engine, list(split.input_ids), 1, batch_rows, example_ids=example_ids
            )
            if step.predictions is not None  # r = 1 is the same for every measure: "r1"
        ]
        result["measures"][spec.name] = {
            "masked": [masked_positions(step.erased, mask_id) for step in steps],
            "predictions": [step.predictions.tolist() for step in steps],
            "seconds": time.perf_counter() - started,
            "forward_passes": engine.stats.forward_rows - rows,
        }
    return result

"""`masf --workers`: MaSF signals of many sequences computed shard by shard on a WorkerPool."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fmm_fast.backends.engine import EngineStats
from fmm_fast.distributed.pool import Task, WorkerPool, add_stats
from fmm_fast.distributed.sharding import CHUNKS_PER_WORKER, length_balanced_chunks
from fmm_fast.distributed.worker import TaskResult


class ShardedSignals:
    """The part of MaskBatchEngine that run_masf uses (`signals`, `stats`), spread over a WorkerPool."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self.stats = EngineStats()

    def signals(self, sequences: Sequence[np.ndarray], progress=None) -> np.ndarray:
        """(N,) sequences -> (N, L+1, D) float32 MaSF signals in request order; distinct rows run once."""
        keys = [np.asarray(s, dtype=np.int64).tobytes() for s in sequences]
        unique: dict[bytes, np.ndarray] = {}
        for key, sequence in zip(keys, sequences, strict=True):
            unique.setdefault(key, np.asarray(sequence, dtype=np.int64))
        distinct = list(unique.values())
        shards = length_balanced_chunks([len(s) for s in distinct], CHUNKS_PER_WORKER * len(self.pool.actors))
        tasks = [
            Task(k, "signals", ([distinct[i] for i in rows],), len(rows)) for k, rows in enumerate(shards)
        ]
        found: list[np.ndarray] = [np.empty(0)] * len(distinct)

        def finish(task: Task, result: TaskResult) -> None:
            for row, signal in zip(shards[task.key], result.value, strict=True):
                found[row] = signal
            add_stats(self.stats, result.engine)
            if progress is not None:
                progress.update(task.examples)

        self.pool.run(tasks, finish)
        self.stats.requested_rows += len(sequences) - len(distinct)  # the duplicates no actor saw
        position = {key: i for i, key in enumerate(unique)}
        return np.stack([found[position[k]] for k in keys]) if keys else np.empty((0, 0, 0), np.float32)

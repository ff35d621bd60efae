"""`explain --workers`: a split's explanations computed shard by shard on a WorkerPool."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fmm_fast.backends.loading import LoadedModel
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.settings import DEFAULT_EXPLAIN_BATCH_ROWS
from fmm_fast.distributed.pool import Task, WorkerPool
from fmm_fast.distributed.sharding import split_shards
from fmm_fast.distributed.worker import TaskResult
from fmm_fast.measures.spec import MeasureSpec
from fmm_fast.protocols.explanations import Explanation, to_explanations


def explain_sharded(
    pool: WorkerPool,
    loaded: LoadedModel,
    encoded: EncodedSplit,
    spec: MeasureSpec,
    seed: int = 0,
    batch_rows: int = DEFAULT_EXPLAIN_BATCH_ROWS,
    on_batch: Callable[[int], None] | None = None,
) -> list[Explanation]:
    """explain_encoded on a WorkerPool: the same explanations of the measure `spec`, in example order (gold
    labels explained)."""
    shards = split_shards(encoded, len(pool.actors), uneven=not spec.recursive)
    tasks = [
        Task(k, "explain", (encoded.subset(rows), np.asarray(rows), spec, seed, batch_rows), len(rows))
        for k, rows in enumerate(shards)
    ]
    probabilities = np.zeros((len(encoded), loaded.info.num_labels), dtype=np.float64)
    scores: list[np.ndarray] = [np.empty(0)] * len(encoded)

    def finish(task: Task, result: TaskResult) -> None:
        shard_probabilities, shard_scores = result.value
        for row, row_probabilities, row_scores in zip(
            shards[task.key], shard_probabilities, shard_scores, strict=True
        ):
            probabilities[row], scores[row] = row_probabilities, row_scores
        if on_batch is not None:
            on_batch(task.examples)

    pool.begin()
    pool.run(tasks, finish)
    return to_explanations(loaded, encoded, spec, probabilities, scores)

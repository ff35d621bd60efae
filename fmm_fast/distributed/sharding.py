"""Split a dataset into shards of examples whose costs are alike."""

from __future__ import annotations

import numpy as np

from fmm_fast.core.datatypes import EncodedSplit

CHUNKS_PER_WORKER = 4  # enough for the tail to balance, few enough that batches stay large
GROUPS_PER_WORKER = 8  # uneven work: at least this many small groups per worker...
GROUP_SIZE = 4  # ...of at most this many examples


def split_shards(split: EncodedSplit, workers: int, uneven: bool) -> list[list[int]]:
    """Shards of a split for `workers` actors, costliest first.

    Even work (forward passes ~ tokens: LOO, rand, signals): CHUNKS_PER_WORKER length-balanced chunks
    per worker. Uneven work (beam search, cost ~ n² in explained tokens n): small groups handed to
    whichever actor is idle.
    """
    if not uneven:
        return length_balanced_chunks([len(ids) for ids in split.input_ids], CHUNKS_PER_WORKER * workers)
    size = max(1, min(GROUP_SIZE, len(split) // (GROUPS_PER_WORKER * workers)))
    return small_groups([int(e.sum()) ** 2 for e in split.explained], size)


def length_balanced_chunks(costs: list[int] | np.ndarray, count: int) -> list[list[int]]:
    """Example indices in at most `count` chunks of near-equal total cost, each of similar lengths.

    costs: (N,) per-example cost (e.g. tokens). Examples are sorted by cost (so a chunk's batches pad
    little) and cut where the running total crosses a multiple of total/count. Chunks come out
    costliest first, so the long ones start early and the short ones fill the tail. Indices within a
    chunk are ascending.
    """
    costs = np.asarray(costs, dtype=np.float64)
    if len(costs) == 0:
        return []
    count = max(1, min(count, len(costs)))
    order = np.argsort(costs, kind="stable")
    running = np.cumsum(costs[order])
    total = running[-1] if running[-1] > 0 else 1.0
    # chunk k holds the examples whose cumulative cost ends in ((k)/count, (k+1)/count] of the total
    owner = np.minimum((running * count / total - 1e-9).astype(np.int64), count - 1)
    chunks = [sorted(int(i) for i in order[owner == k]) for k in range(count)]
    chunks = [c for c in chunks if c]
    return sorted(chunks, key=lambda c: -costs[c].sum())


def small_groups(costs: list[int] | np.ndarray, size: int) -> list[list[int]]:
    """Groups of `size` examples of similar cost, costliest first (for uneven work such as beam search)."""
    order = np.argsort(-np.asarray(costs, dtype=np.float64), kind="stable")
    return [sorted(int(i) for i in order[start : start + size]) for start in range(0, len(order), size)]

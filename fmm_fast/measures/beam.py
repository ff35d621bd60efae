"""Beam search explanation (docs/method.md §3 "Beam search explanation"): beam-sign-B.

:class:`BeamSearch` runs all rows of a batch in lock-step: at each of the n steps every row's children go
to the engine in one call, so the model sees a few large batches instead of one pass per child.
Candidates are boolean rows over a row's maskable tokens; duplicates are found by sorting their packed
bitsets (``np.unique`` on bytes, never pairwise), and all bookkeeping is numpy per row per step.
:func:`beam_search_reference` is the plain per-example version (bench baseline and test oracle).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.datatypes import unpad
from fmm_fast.measures.base import ExplainBatch, Measure, PassCount, check_positive

DEFAULT_BEAM_SIZE = 10


def beam_forward_bound(n: int, beam_size: int) -> int:
    """Upper bound on forward passes for one example with n maskable units: 1 + B·n(n+1)/2 (0 if n = 0)."""
    return 0 if n == 0 else 1 + beam_size * n * (n + 1) // 2


@dataclass
class BeamStats:
    """Counters of the last :meth:`BeamSearch.explain` call; per-row arrays are (B,) int64."""

    maskable: np.ndarray  # n per row
    forward_passes: np.ndarray  # rows the search asked for: 1 (unmasked) + children kept, 0 when n = 0
    duplicates: np.ndarray  # children dropped by de-duplication
    engine_calls: int = 0
    engine_seconds: float = 0.0  # wall time inside engine.logits
    total_seconds: float = 0.0

    @property
    def bookkeeping_seconds(self) -> float:
        return self.total_seconds - self.engine_seconds


@dataclass
class _RowBeam:
    """One example's beam. Candidates are rows of `masked` (b, n) bool over the maskable units (local index
    i ↔ the tokens positions[unit_of == i]); `orders` (b, k) int64 local indices in removal order;
    `scores` (b,) float64, best first."""

    sequence: np.ndarray  # (T_r,) int64, unpadded
    units: list[np.ndarray]  # the n maskable units in order, each its (k_i,) positions (token units: one)
    label: int
    mask_id: int
    y0: float = 0.0
    masked: np.ndarray = field(init=False)
    orders: np.ndarray = field(init=False)
    scores: np.ndarray = field(init=False)
    duplicates: int = 0
    kept_children: int = 0
    _parent: np.ndarray = field(init=False)
    _token: np.ndarray = field(init=False)
    _children: np.ndarray = field(init=False)
    positions: np.ndarray = field(init=False)  # (K,) int64 the positions of every unit's tokens
    unit_of: np.ndarray = field(init=False)  # (K,) int64 the local unit of each of those positions

    def __post_init__(self) -> None:
        sizes = [len(unit) for unit in self.units]
        self.positions = np.concatenate(self.units) if self.units else np.empty(0, dtype=np.int64)
        self.unit_of = np.repeat(np.arange(len(self.units)), sizes)
        self.masked = np.zeros((1, len(self.units)), dtype=bool)
        self.orders = np.zeros((1, 0), dtype=np.int64)
        self.scores = np.zeros(1, dtype=np.float64)

    @property
    def n(self) -> int:
        return len(self.units)

    def expand(self) -> np.ndarray:
        """Make the de-duplicated children of the current beam; returns their sequences (m, T_r) int64."""
        # np.nonzero walks row-major: parents best first, then visible tokens in position order
        parent, token = np.nonzero(~self.masked)
        children = self.masked[parent]
        children[np.arange(len(parent)), token] = True
        # return_index gives each set's first occurrence; sorting it keeps creation order
        _, first = np.unique(np.packbits(children, axis=1), axis=0, return_index=True)
        keep = np.sort(first)
        self.duplicates += len(parent) - len(keep)
        self.kept_children += len(keep)
        self._parent, self._token, self._children = parent[keep], token[keep], children[keep]
        full = np.zeros((len(keep), len(self.sequence)), dtype=bool)
        full[:, self.positions] = self._children[:, self.unit_of]
        return np.where(full, self.mask_id, self.sequence[None, :])

    def crop(self, child_logits: np.ndarray, beam_size: int) -> None:
        """Score the children from `expand` ((m,) float64 target logits) and keep the best beam_size."""
        scores = self.scores[self._parent] + (self.y0 - child_logits)
        best = np.argsort(-scores, kind="stable")[:beam_size]  # stable: ties keep the earlier child
        self.masked = self._children[best]
        self.orders = np.column_stack([self.orders[self._parent[best]], self._token[best]])
        self.scores = scores[best]

    def ranking(self) -> np.ndarray:
        """(T_r,) float64: the final order's first removed unit scores n on each of its tokens, the last 1,
        others 0."""
        unit_scores = np.zeros(self.n, dtype=np.float64)
        unit_scores[self.orders[0]] = np.arange(self.n, 0, -1)
        scores = np.zeros(len(self.sequence), dtype=np.float64)
        scores[self.positions] = unit_scores[self.unit_of]
        return scores


class BeamSearch(Measure):
    """beam-sign-B: the removal order found by beam search, as scores n..1 (computed once, not recursively).

    After each call, `last_stats` holds a :class:`BeamStats`.
    """

    signed = True
    recursive = False
    scores_units = True

    def __init__(self, beam_size: int = DEFAULT_BEAM_SIZE) -> None:
        self.beam_size = check_positive("beam_size", beam_size)
        self.last_stats: BeamStats | None = None

    @property
    def name(self) -> str:  # type: ignore[override]  # the beam size is part of the name
        return f"beam-sign-{self.beam_size}"

    def planned_passes(self, units: int) -> PassCount:
        return PassCount(forward=beam_forward_bound(units, self.beam_size), exact=False)  # duplicates: fewer

    def explain(self, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray:
        start = time.perf_counter()
        mask_id = engine.info.mask_id
        rows = [
            _RowBeam(sequence, batch.visible_units(row, mask_id), int(label), mask_id)
            for row, (sequence, label) in enumerate(
                zip(unpad(batch.input_ids, batch.attention_mask), batch.labels, strict=True)
            )
        ]
        stats = BeamStats(
            maskable=np.array([row.n for row in rows], dtype=np.int64),
            forward_passes=np.zeros(len(rows), dtype=np.int64),
            duplicates=np.zeros(len(rows), dtype=np.int64),
        )

        for step in range(int(stats.maskable.max(initial=0))):
            active = [row for row in rows if row.n > step]
            # the first call also carries the unmasked rows, whose target logit is y0
            requests: list[np.ndarray] = [row.sequence for row in active] if step == 0 else []
            labels = [row.label for row in active] if step == 0 else []
            sizes = []
            for row in active:
                children = row.expand()
                requests.extend(children)
                labels.extend([row.label] * len(children))
                sizes.append(len(children))
            engine_start = time.perf_counter()
            logits = engine.logits(requests)
            stats.engine_seconds += time.perf_counter() - engine_start
            stats.engine_calls += 1
            targets = logits[np.arange(len(requests)), labels].astype(np.float64)
            if step == 0:
                for row, y0 in zip(active, targets[: len(active)], strict=True):
                    row.y0 = float(y0)
                targets = targets[len(active) :]
            offsets = np.concatenate([[0], np.cumsum(sizes)])
            for row, begin, end in zip(active, offsets[:-1], offsets[1:], strict=True):
                row.crop(targets[begin:end], self.beam_size)

        scores = np.zeros(batch.input_ids.shape, dtype=np.float64)
        for index, row in enumerate(rows):
            if row.n:
                scores[index, : len(row.sequence)] = row.ranking()
                stats.forward_passes[index] = 1 + row.kept_children
                stats.duplicates[index] = row.duplicates
        stats.total_seconds = time.perf_counter() - start
        self.last_stats = stats
        return scores


def beam_search_reference(
    score_fn: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    explained: np.ndarray,
    label: int,
    mask_id: int,
    beam_size: int,
) -> np.ndarray:
    """method.md §3 beam search for one example, written plainly: a list of candidates, pairwise duplicate
    checks and one score_fn call per child.

    score_fn: (T,) int64 token ids -> (C,) logits; called once for x and once per kept child (never when
    no token is maskable), so counting its calls counts forward passes.
    x: (T,) int64 unpadded; explained: (T,) bool. Returns (T,) float64 scores n..1 along the final order.
    """
    maskable = [t for t in range(len(x)) if explained[t] and x[t] != mask_id]
    scores = np.zeros(len(x), dtype=np.float64)
    if not maskable:
        return scores
    y0 = float(score_fn(x)[label])
    beam: list[tuple[list[int], float]] = [([], 0.0)]  # (removal order, score), best first
    for _ in maskable:
        children: list[tuple[list[int], float]] = []
        for order, score in beam:
            for token in maskable:
                if token in order:
                    continue
                child = [*order, token]
                if any(set(child) == set(made) for made, _ in children):
                    continue
                children.append((child, score))
        evaluated = []
        for order, score in children:
            masked = np.array(x, dtype=np.int64)
            masked[order] = mask_id
            evaluated.append((order, score + (y0 - float(score_fn(masked)[label]))))
        beam = sorted(evaluated, key=lambda candidate: -candidate[1])[:beam_size]  # sorted() is stable
    final_order = beam[0][0]
    scores[final_order] = np.arange(len(final_order), 0, -1)
    return scores

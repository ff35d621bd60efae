"""Peer faithfulness metrics on masked models (method.md §8): AOPC comprehensiveness, AOPC sufficiency, τ-LOO,
and the non-recursive erasure curve of the same fixed ranking.

The ranking is computed once on the unmasked input, so any per-token scores work: a built-in measure's
or an explanation made elsewhere. Per example, every masked variant it needs — the input itself, the 10
comprehensiveness and 10 sufficiency maskings, one masking per erasure-curve ratio and one per explained
token (leave-one-out) — goes to the mask-batch engine in the same request, which drops the duplicates
(repeated k_q on short inputs, curve rows equal to comprehensiveness rows, rows it scored earlier).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from decimal import ROUND_HALF_UP, Decimal

import numpy as np

from fmm_fast.backends.base import Backend
from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.data.masking import masked_count
from fmm_fast.measures.ranking import UnitRanking
from fmm_fast.protocols.curve_stats import RATIOS

# q = 0.1, 0.2, ..., 1.0 held as integer tenths, so that k_q is computed without float rounding.
THRESHOLD_TENTHS = np.arange(1, 11, dtype=np.int64)
THRESHOLDS: np.ndarray = THRESHOLD_TENTHS / 10
# Examples per engine request (each example's rows stay together in one request).
DEFAULT_CHUNK_EXAMPLES = 32


def top_counts(n: int) -> np.ndarray:
    """(10,) int64 k_q = max(1, round_half_up(q·n)) for q = 0.1..1.0, duplicates kept.

    round_half_up(j·n/10) = floor((j·n + 5) / 10) in integers: exact where float q·n is not (0.7·5).
    """
    return np.maximum(1, (THRESHOLD_TENTHS * int(n) + 5) // 10)


def softmax(logits: np.ndarray) -> np.ndarray:
    """(N, C) logits -> (N, C) float64 probabilities."""
    shifted = np.asarray(logits, dtype=np.float64)
    shifted = shifted - shifted.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


def kendall_tau_b(scores: np.ndarray, drops: np.ndarray) -> tuple[float, str | None]:
    """Kendall τ-b of two (n,) arrays, or (nan, why) when undefined (n < 2 or a constant side)."""
    if len(scores) < 2:
        return float("nan"), "fewer than 2 explained tokens"
    if np.all(scores == scores[0]):
        return float("nan"), "constant explanation scores"
    if np.all(drops == drops[0]):
        return float("nan"), "constant leave-one-out drops"
    import scipy.stats  # a second of imports: only `fmm-fast aopc` computes τ, and fmm_fast.api imports this

    return float(scipy.stats.kendalltau(scores, drops, variant="b").statistic), None


@dataclass
class PeerScores:
    """The docs/method.md §8 values of one example under one explanation.

    n: explained tokens; probability: p(y|x); top_counts: (10,) k_q; comprehensiveness, sufficiency:
    (10,) float64 per threshold (nan when n = 0); tau_loo: nan when undefined, with the reason in
    tau_undefined; curve_predictions: (R,) int64 predicted label at each erasure ratio.
    """

    n: int
    label: int
    probability: float
    top_counts: np.ndarray
    comprehensiveness: np.ndarray
    sufficiency: np.ndarray
    tau_loo: float
    tau_undefined: str | None
    curve_predictions: np.ndarray

    @property
    def aopc_comprehensiveness(self) -> float:
        return float(np.mean(self.comprehensiveness))

    @property
    def aopc_sufficiency(self) -> float:
        return float(np.mean(self.sufficiency))

    def to_state(self) -> dict:
        """Every field, for a run's saved state (write_record keeps the nan values)."""
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict) -> PeerScores:
        """The PeerScores `to_state` gave, as read back from a saved state (read_record)."""
        return cls(
            n=int(state["n"]),
            label=int(state["label"]),
            probability=float(state["probability"]),
            top_counts=np.asarray(state["top_counts"], dtype=np.int64),
            comprehensiveness=np.asarray(state["comprehensiveness"], dtype=np.float64),
            sufficiency=np.asarray(state["sufficiency"], dtype=np.float64),
            tau_loo=float(state["tau_loo"]),
            tau_undefined=state["tau_undefined"],
            curve_predictions=np.asarray(state["curve_predictions"], dtype=np.int64),
        )

    def to_json(self) -> dict:
        """JSON-ready (nan as null)."""

        def number(value: float) -> float | None:
            return None if np.isnan(value) else float(value)

        return {
            "n_explained": self.n,
            "label": self.label,
            "probability": self.probability,
            "k": self.top_counts.tolist(),
            "comprehensiveness": [number(v) for v in self.comprehensiveness],
            "sufficiency": [number(v) for v in self.sufficiency],
            "aopc_comprehensiveness": number(self.aopc_comprehensiveness),
            "aopc_sufficiency": number(self.aopc_sufficiency),
            "tau_loo": number(self.tau_loo),
            "tau_loo_undefined": self.tau_undefined,
        }


def example_variants(
    input_ids: np.ndarray,
    explained: np.ndarray,
    scores: np.ndarray,
    mask_id: int,
    ratios: Sequence[float],
    units: np.ndarray | None = None,
) -> tuple[list[np.ndarray], UnitRanking]:
    """Every masked variant one example needs, in a fixed layout (see `PeerLayout`), and the ranking of its
    explained units they follow.

    input_ids, explained, scores: (T,); units: (T,) the example's units (EncodedSplit.units), None for
    token units. Returns 1 + 10 + 10 + R + n arrays of shape (T,): x, x with the top-k_q explained units
    masked (q = 0.1..1), x with every explained unit masked but the top-k_q, x with the top floor(r·n)
    masked (docs/method.md §4's count) per ratio r, x with explained unit i masked.
    With n = 0 the threshold rows are x itself (their values are reported as nan).
    """
    ranking = UnitRanking.of(scores, explained, units)
    n = ranking.n
    fully_masked = input_ids.copy()
    fully_masked[ranking.positions] = mask_id

    def masked_top(k: int) -> np.ndarray:
        row = input_ids.copy()
        row[ranking.top(k)] = mask_id
        return row

    def kept_top(k: int) -> np.ndarray:
        row = fully_masked.copy()
        kept = ranking.top(k)
        row[kept] = input_ids[kept]
        return row

    counts = top_counts(n) if n else np.zeros(len(THRESHOLDS), dtype=np.int64)
    rows = [input_ids.copy()]
    rows += [masked_top(k) if n else input_ids.copy() for k in counts]
    rows += [kept_top(k) if n else input_ids.copy() for k in counts]
    rows += [masked_top(int(masked_count(r, n))) for r in ratios]
    for unit in range(n):
        row = input_ids.copy()
        row[ranking.members(unit)] = mask_id
        rows.append(row)
    return rows, ranking


def peer_scores_from_logits(
    logits: np.ndarray, unit_scores: np.ndarray, label: int, n_ratios: int
) -> PeerScores:
    """Read one example's method.md §8 values from the logits of its `example_variants` rows: (rows, C);
    unit_scores: (n,) its explained units' scores (UnitRanking.unit_scores)."""
    n = len(unit_scores)
    probabilities = softmax(logits)[:, label]
    full = float(probabilities[0])
    thresholds = len(THRESHOLDS)
    comprehensiveness = full - probabilities[1 : 1 + thresholds]
    sufficiency = full - probabilities[1 + thresholds : 1 + 2 * thresholds]
    curve_start = 1 + 2 * thresholds
    curve_predictions = logits[curve_start : curve_start + n_ratios].argmax(axis=1).astype(np.int64)
    loo_drops = full - probabilities[curve_start + n_ratios :]
    if n == 0:
        comprehensiveness = sufficiency = np.full(thresholds, np.nan)
    tau, undefined = kendall_tau_b(np.asarray(unit_scores, dtype=np.float64), loo_drops)
    return PeerScores(
        n=n,
        label=int(label),
        probability=full,
        top_counts=top_counts(n) if n else np.zeros(thresholds, dtype=np.int64),
        comprehensiveness=comprehensiveness,
        sufficiency=sufficiency,
        tau_loo=tau,
        tau_undefined=undefined,
        curve_predictions=curve_predictions,
    )


def peer_metrics(
    engine: MaskBatchEngine,
    split: EncodedSplit,
    scores: Sequence[np.ndarray],
    ratios: Sequence[float] = tuple(RATIOS),
    chunk_examples: int = DEFAULT_CHUNK_EXAMPLES,
    on_chunk: Callable[[int], None] | None = None,
) -> list[PeerScores]:
    """docs/method.md §8 values of every example of `split` under fixed per-token `scores` ((T_i,) each;
    with units other than tokens, every token of a unit holds its unit's score), by `split`'s units.

    Examples go to the engine `chunk_examples` at a time, each with all of its variants in that one
    request. ratios: the erasure-curve ratios whose predictions to record (empty: no curve rows).
    """
    if len(scores) != len(split):
        raise ValueError(f"{len(scores)} score arrays for {len(split)} examples")
    mask_id = engine.info.mask_id
    results: list[PeerScores] = []
    for start in range(0, len(split), chunk_examples):
        indices = range(start, min(start + chunk_examples, len(split)))
        variants = [
            example_variants(
                split.input_ids[i], split.explained[i], scores[i], mask_id, ratios, split.example_units(i)
            )
            for i in indices
        ]
        logits = engine.logits([row for rows, _ in variants for row in rows])
        offset = 0
        for i, (rows, ranking) in zip(indices, variants, strict=True):
            results.append(
                peer_scores_from_logits(
                    logits[offset : offset + len(rows)],
                    ranking.unit_scores,
                    int(split.labels[i]),
                    len(ratios),
                )
            )
            offset += len(rows)
        if on_chunk is not None:
            on_chunk(len(indices))
    return results


def peer_metrics_reference(
    backend: Backend, split: EncodedSplit, scores: Sequence[np.ndarray]
) -> tuple[list[dict], int]:
    """The straightforward per-threshold loop, for tests and the bench: no engine, no shared rows.

    For every example and every threshold q it masks the input with plain Python loops and runs it
    alone through `backend`; k_q by decimal rounding, τ-b by scipy. Returns per example
    {"comprehensiveness": [10], "sufficiency": [10], "tau_loo": float} and the forward passes run.
    """
    import scipy.stats

    mask_id = backend.info.mask_id
    passes = 0
    nan = float("nan")

    def probability(row: list[int], label: int) -> float:
        nonlocal passes
        passes += 1
        ids = np.asarray([row], dtype=np.int64)
        logits = backend.forward(ids, np.ones_like(ids)).logits[0].astype(np.float64)
        exp = np.exp(logits - logits.max())
        return float(exp[label] / exp.sum())

    out = []
    for ids, explained, row_scores, label in zip(
        split.input_ids, split.explained, scores, split.labels, strict=True
    ):
        ids_list, label = [int(t) for t in ids], int(label)
        positions = [t for t in range(len(ids_list)) if explained[t]]
        ranked = sorted(positions, key=lambda t: (-float(row_scores[t]), t))
        n = len(positions)
        if n == 0:
            out.append({"comprehensiveness": [nan] * 10, "sufficiency": [nan] * 10, "tau_loo": nan})
            continue
        full = probability(ids_list, label)
        comprehensiveness, sufficiency = [], []
        for tenths in range(1, 11):
            k = max(1, int((Decimal(tenths) / 10 * n).quantize(Decimal(1), rounding=ROUND_HALF_UP)))
            top = set(ranked[:k])
            erased = [mask_id if t in top else token for t, token in enumerate(ids_list)]
            kept = [
                mask_id if (t in positions and t not in top) else token for t, token in enumerate(ids_list)
            ]
            comprehensiveness.append(full - probability(erased, label))
            sufficiency.append(full - probability(kept, label))
        drops = []
        for position in positions:
            occluded = list(ids_list)
            occluded[position] = mask_id
            drops.append(full - probability(occluded, label))
        explanation = [float(row_scores[t]) for t in positions]
        tau = nan
        if n >= 2 and len(set(explanation)) > 1 and len(set(drops)) > 1:
            tau = float(scipy.stats.kendalltau(explanation, drops, variant="b").statistic)
        out.append({"comprehensiveness": comprehensiveness, "sufficiency": sufficiency, "tau_loo": tau})
    return out, passes

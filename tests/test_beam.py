"""Beam search explanation (docs/method.md §3): hand-worked cases, exhaustive oracle, per-example reference,
counts."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
from doubles import (
    CLS_ID,
    MASK_ID,
    SEP_ID,
    LookupBackend,
    drop_table_model,
    exhaustive_beam_order,
    interaction_model,
    make_batch,
    random_batch,
)

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.datatypes import unpad
from fmm_fast.measures import get_measure
from fmm_fast.measures.beam import BeamSearch, beam_forward_bound, beam_search_reference

A, B, C, D = 10, 11, 12, 13  # token ids of the letters a, b, c, d

# drop(S) = y0 − logit_y(S masked); y0 = −drops[""] = 0. A candidate's score is the sum of the drops
# of its prefix sets. The full set always drops 0, so only the first three removals matter.
DROPS = {
    "": 0,
    "a": 3, "b": 2, "c": 1, "d": 0,
    "ab": 1, "ac": 1, "ad": 1, "bc": 0, "bd": 4, "cd": 10,
    "abc": 0, "abd": 5, "acd": 20, "bcd": 2,
    "abcd": 0,
}  # fmt: skip


def beam_forward_count(n: int, beam_size: int) -> int:
    """Children made (before de-duplication) + 1: 1 + Σ_{k<n} min(B, C(n,k))·(n−k) (0 if n = 0).

    Forward passes = this minus the duplicates dropped, as long as each step's beam is full
    (always true for B = 1, which makes no duplicates, and for B ≥ C(n, n//2), which keeps every subset).
    """
    return 0 if n == 0 else 1 + sum(min(beam_size, comb(n, k)) * (n - k) for k in range(n))


def hand_backend(label: int = 1) -> LookupBackend:
    return LookupBackend(drop_table_model(DROPS, {A: "a", B: "b", C: "c", D: "d"}, label))


def run_beam(
    backend: LookupBackend, batch, beam_size: int, token_budget: int = 64
) -> tuple[np.ndarray, BeamSearch, MaskBatchEngine]:
    measure = BeamSearch(beam_size)
    engine = MaskBatchEngine(backend, token_budget=token_budget)
    return measure.explain(batch, engine), measure, engine


class CountingScore:
    """A score_fn that counts its calls (= forward passes)."""

    def __init__(self, score_fn) -> None:
        self.score_fn, self.calls = score_fn, 0

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        self.calls += 1
        return self.score_fn(ids)


def reference_scores(backend: LookupBackend, batch, beam_size: int) -> np.ndarray:
    rows = unpad(batch.input_ids, batch.attention_mask)
    out = np.zeros(batch.input_ids.shape)
    for index, (x, label) in enumerate(zip(rows, batch.labels, strict=True)):
        explained = batch.explained[index, : len(x)]
        out[index, : len(x)] = beam_search_reference(
            backend.score, x, explained, int(label), MASK_ID, beam_size
        )
    return out


# Row [CLS a b c d SEP]: positions 1..4 hold a..d.
HAND_ROW = [CLS_ID, A, B, C, D, SEP_ID]
HAND_EXPLAINED = [False, True, True, True, True, False]

# B = 1. step 1: a 3, b 2, c 1, d 0 -> keep a (3).
#   step 2 from a: ab 3+1=4, ac 3+1=4, ad 3+1=4, a three-way tie -> ab, the first made.
#   step 3 from ab: abc 4+0=4, abd 4+5=9 -> abd.  step 4: abdc 9.  Order a, b, d, c.
#   (Keeping ac instead would have reached acd: 4+20.)
# B = 2. step 1: keep a 3, b 2.
#   step 2: from a: ab 4, ac 4, ad 4; from b: ba duplicate (dropped), bc 2+0=2, bd 2+4=6.
#   sorted: bd 6, ab 4, ac 4, ad 4, bc 2 -> keep bd, ab (ab wins the tie with ac, ad).
#   step 3: from bd (b,d): abd 6+5=11, bcd 6+2=8; from ab (a,b): abc 4+0=4, abd duplicate.
#   The first abd made (from bd, order b,d,a) wins; had the later one won, order a,b,d scores 9.
#   keep abd 11, bcd 8.  step 4: abdc 11 (bcd's child is a duplicate).  Order b, d, a, c.
# B = 3. step 1: keep a 3, b 2, c 1.
#   step 2: ab 4, ac 4, ad 4 (from a), bc 2, bd 6 (from b), cd 1+10=11 (from c; ca, cb duplicates).
#   keep cd 11, bd 6, ab 4.
#   step 3: from cd: acd 11+20=31, bcd 11+2=13; from bd: abd 6+5=11 (bcd dup); from ab: abc 4 (abd dup).
#   keep acd 31, bcd 13, abd 11.  step 4: acdb 31.  Order c, d, a, b.
# B ≥ 6 = C(4, 2) (every subset): the best chain is c (1), cd (10), acd (20): 31, the same order.
HAND_ORDERS = {1: [A, B, D, C], 2: [B, D, A, C], 3: [C, D, A, B], 6: [C, D, A, B], 50: [C, D, A, B]}


@pytest.mark.parametrize("beam_size", sorted(HAND_ORDERS))
def test_hand_worked_orders(beam_size: int) -> None:
    batch = make_batch([HAND_ROW], [HAND_EXPLAINED], [1])
    scores, _, _ = run_beam(hand_backend(), batch, beam_size)
    expected = np.zeros(len(HAND_ROW))
    for rank, token in enumerate(HAND_ORDERS[beam_size]):
        expected[HAND_ROW.index(token)] = 4 - rank
    np.testing.assert_array_equal(scores[0], expected)
    np.testing.assert_array_equal(reference_scores(hand_backend(), batch, beam_size)[0], expected)


def test_hand_worked_counts() -> None:
    batch = make_batch([HAND_ROW], [HAND_EXPLAINED], [1])
    # B = 2 above: 4 + (3 + 2) + (2 + 1) + 1 children kept, plus the unmasked row = 14;
    # made 1 + 4 + 6 + 4 + 2 = 17 (beam_forward_count), 3 duplicates (ba; abd from ab; bcda).
    _, measure, engine = run_beam(hand_backend(), batch, 2)
    assert measure.last_stats.forward_passes.tolist() == [14]
    assert measure.last_stats.duplicates.tolist() == [3]
    assert beam_forward_count(4, 2) == 17
    assert engine.stats.forward_rows == 14
    # B = 3 evaluates every subset once: 2^4 = 16.
    _, measure, engine = run_beam(hand_backend(), batch, 3)
    assert measure.last_stats.forward_passes.tolist() == [16] and engine.stats.forward_rows == 16


def test_pre_masked_tokens_and_padding_are_ignored() -> None:
    # The same letters with a pre-masked token in between and a padded, shorter neighbour row.
    row = [CLS_ID, A, MASK_ID, B, C, D, SEP_ID]
    explained = [False, True, True, True, True, True, False]
    batch = make_batch([row, [CLS_ID, B, SEP_ID]], [explained, [False, True, False]], [1, 1])
    scores, _, _ = run_beam(hand_backend(), batch, 2)
    # order b, d, a, c as in the B = 2 case; the pre-masked position scores 0
    np.testing.assert_array_equal(scores[0], [0, 2, 0, 4, 1, 3, 0])
    # second row: a single maskable token ranks 1; padding scores 0
    np.testing.assert_array_equal(scores[1], [0, 1, 0, 0, 0, 0, 0])


def test_target_is_the_gold_label() -> None:
    batch = make_batch([HAND_ROW], [HAND_EXPLAINED], [0])
    scores, _, _ = run_beam(hand_backend(label=0), batch, 1)
    np.testing.assert_array_equal(scores[0], [0, 4, 3, 1, 2, 0])  # order a, b, d, c as for B = 1
    # with label 1 the target logit is the constant one: every drop ties at 0 -> position order
    flat, _, _ = run_beam(hand_backend(label=0), make_batch([HAND_ROW], [HAND_EXPLAINED], [1]), 3)
    np.testing.assert_array_equal(flat[0], [0, 4, 3, 2, 1, 0])


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_large_beam_equals_exhaustive_search(n: int, seed: int) -> None:
    # integer effects in {-1, 0, 1}: many exact ties, so the tie rules are exercised
    backend = LookupBackend(interaction_model(seed, levels=[-1.0, 0.0, 1.0]))
    batch = random_batch(seed, [n], premasked=1 if n > 2 else 0)
    scores, measure, engine = run_beam(backend, batch, comb(n, n // 2))
    x = unpad(batch.input_ids, batch.attention_mask)[0]
    explained = batch.explained[0, : len(x)]
    order = exhaustive_beam_order(backend.score, x, explained, int(batch.labels[0]), MASK_ID)
    expected = np.zeros(batch.input_ids.shape[1])
    expected[order] = np.arange(len(order), 0, -1)
    np.testing.assert_array_equal(scores[0], expected)
    # every subset of the m = n − (pre-masked) maskable tokens is evaluated exactly once
    m = len(order)
    assert measure.last_stats.forward_passes.tolist() == [2**m] == [engine.stats.forward_rows]


@pytest.mark.parametrize("beam_size", [1, 2, 3, 5])
@pytest.mark.parametrize("levels", [None, [-1.0, 0.0, 1.0]])
def test_batched_equals_reference(beam_size: int, levels: list[float] | None) -> None:
    backend = LookupBackend(interaction_model(beam_size, levels=levels))
    batch = random_batch(10 + beam_size, [6, 0, 3, 7, 1, 5], premasked=1)
    scores, measure, _ = run_beam(backend, batch, beam_size)
    np.testing.assert_array_equal(scores, reference_scores(backend, batch, beam_size))
    # one engine call per step, for all rows together
    assert measure.last_stats.engine_calls == int(measure.last_stats.maskable.max())


@pytest.mark.parametrize("beam_size", [1, 2, 4, 10])
def test_forward_pass_counts(beam_size: int) -> None:
    backend = LookupBackend(interaction_model(3))
    batch = random_batch(4, [7, 2, 0, 5], premasked=1)
    _, measure, engine = run_beam(backend, batch, beam_size)
    stats = measure.last_stats
    # rows hold distinct words, so the engine runs exactly what the search asked for
    assert engine.stats.forward_rows == stats.forward_passes.sum()
    for n, passes, duplicates in zip(stats.maskable, stats.forward_passes, stats.duplicates, strict=True):
        made = beam_forward_count(int(n), beam_size)
        assert passes <= beam_forward_bound(int(n), beam_size)
        # exact when every step's beam is full: B = 1 (no duplicates) or B keeps every subset
        if beam_size == 1 or beam_size >= comb(int(n), int(n) // 2):
            assert passes == made - duplicates
        else:
            assert passes <= made - duplicates
        if beam_size == 1:
            assert duplicates == 0 and passes == (1 + n * (n + 1) // 2 if n else 0)
    # the reference makes the same forward passes, one score_fn call each
    for index, x in enumerate(unpad(batch.input_ids, batch.attention_mask)):
        counted = CountingScore(backend.score)
        explained = batch.explained[index, : len(x)]
        beam_search_reference(counted, x, explained, int(batch.labels[index]), MASK_ID, beam_size)
        assert counted.calls == stats.forward_passes[index]


def test_counts_formulas() -> None:
    assert beam_forward_bound(0, 10) == 0 and beam_forward_count(0, 10) == 0
    assert beam_forward_bound(20, 10) == 1 + 10 * 210
    assert beam_forward_count(3, 1) == 1 + 3 + 2 + 1
    # B ≥ C(n, k) for all k: every child of every subset is made: 1 + Σ_k C(n,k)(n−k) = 1 + n·2^(n−1)
    assert beam_forward_count(5, 10) == 1 + 5 * 2**4


def test_registry_and_flags() -> None:
    measure = get_measure("beam")
    assert isinstance(measure, BeamSearch) and measure.name == "beam-sign-10" and measure.beam_size == 10
    assert measure.signed and not measure.recursive and not measure.needs_gradients
    assert get_measure("beam-sign-3").beam_size == 3
    assert get_measure("beam", beam_size=4).name == "beam-sign-4"

"""Peer metrics (docs/method.md §8): hand-computed values, k_q rounding, and the engine path against the
plain loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
from doubles import CLS_ID, MASK_ID, SEP_ID, LookupBackend, interaction_model, random_batch

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.datatypes import EncodedSplit, unpad
from fmm_fast.protocols.aopc_metrics import (
    kendall_tau_b,
    peer_metrics,
    peer_metrics_reference,
    top_counts,
)

A, B, C, D = 4, 5, 6, 7  # token ids of the hand-made model's words
WEIGHTS = {A: 2.0, B: 1.0, C: -1.0, D: 0.5}  # class-1 logit = Σ weights of visible words; class 0: 0


def hand_logits(ids: np.ndarray) -> np.ndarray:
    return np.array([0.0, sum(WEIGHTS.get(int(t), 0.0) for t in ids)])


def sigmoid(x: float) -> float:
    """p(class 1) of logits (0, x)."""
    return 1.0 / (1.0 + math.exp(-x))


def split_of(sequences: list[list[int]], labels: list[int]) -> EncodedSplit:
    """Rows [CLS] words [SEP]; every word explained."""
    ids = [np.asarray(s, dtype=np.int64) for s in sequences]
    explained = [np.isin(s, list(WEIGHTS)) for s in ids]
    return EncodedSplit(ids, explained, explained, np.asarray(labels, dtype=np.int64))


def test_top_counts_round_half_up_and_keep_duplicates():
    assert top_counts(1).tolist() == [1] * 10
    assert top_counts(3).tolist() == [1, 1, 1, 1, 2, 2, 2, 2, 3, 3]  # 0.5·3 = 1.5 rounds up to 2
    assert top_counts(5).tolist() == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]  # 0.7·5 = 3.5 → 4 (float gives 3.4999…)
    assert top_counts(7).tolist() == [1, 1, 2, 3, 4, 4, 5, 6, 6, 7]
    assert top_counts(20).tolist() == list(range(2, 21, 2))


def test_hand_made_model_gives_exact_values():
    # example 0: words a b c, scores a .9, b .1, c .5 → ranking a, c, b; n = 3, k = 1,1,1,1,2,2,2,2,3,3
    # example 1: words a b d, scores 1, 1, 0 → ranking a, b (tie: earlier first), d
    split = split_of([[CLS_ID, A, B, C, SEP_ID], [CLS_ID, A, B, D, SEP_ID]], [1, 1])
    scores = [np.array([0, 0.9, 0.1, 0.5, 0]), np.array([0, 1.0, 1.0, 0.0, 0])]
    results = peer_metrics(MaskBatchEngine(LookupBackend(hand_logits)), split, scores)

    first = results[0]
    full = sigmoid(2)  # visible a + b + c: 2 + 1 − 1
    assert first.probability == pytest.approx(full, rel=1e-12)
    # masked top-1 {a}: 1 − 1 = 0; top-2 {a, c}: 1; top-3: nothing visible: 0
    expected_comp = [full - sigmoid(0)] * 4 + [full - sigmoid(1)] * 4 + [full - sigmoid(0)] * 2
    # kept top-1 {a}: 2; top-2 {a, c}: 1; all kept: 2
    expected_suff = [full - sigmoid(2)] * 4 + [full - sigmoid(1)] * 4 + [full - sigmoid(2)] * 2
    assert first.comprehensiveness == pytest.approx(expected_comp, rel=1e-12, abs=1e-15)
    assert first.sufficiency == pytest.approx(expected_suff, rel=1e-12, abs=1e-15)
    assert first.aopc_comprehensiveness == pytest.approx(
        full - (6 * sigmoid(0) + 4 * sigmoid(1)) / 10, rel=1e-12
    )
    assert first.aopc_sufficiency == pytest.approx(full - (6 * sigmoid(2) + 4 * sigmoid(1)) / 10, rel=1e-12)
    # LOO drops: a → σ(2) − σ(0) > b → σ(2) − σ(1) > c → σ(2) − σ(3); scores a > c > b:
    # (a,b) concordant, (a,c) concordant, (b,c) discordant → τ-b = (2 − 1) / 3
    assert first.tau_loo == pytest.approx(1 / 3, rel=1e-12)

    second = results[1]
    full = sigmoid(3.5)
    expected_comp = [full - sigmoid(1.5)] * 4 + [full - sigmoid(0.5)] * 4 + [full - sigmoid(0)] * 2
    expected_suff = [full - sigmoid(2)] * 4 + [full - sigmoid(3)] * 4 + [full - sigmoid(3.5)] * 2
    assert second.comprehensiveness == pytest.approx(expected_comp, rel=1e-12, abs=1e-15)
    assert second.sufficiency == pytest.approx(expected_suff, rel=1e-12, abs=1e-15)
    # scores (1, 1, 0), drops strictly decreasing: C = 2, D = 0, one tie in the scores → 2 / √(2·3)
    assert second.tau_loo == pytest.approx(2 / math.sqrt(6), rel=1e-12)


def test_tau_is_undefined_for_short_or_constant_inputs():
    assert kendall_tau_b(np.array([1.0]), np.array([0.3]))[1] == "fewer than 2 explained tokens"
    assert kendall_tau_b(np.array([1.0, 1.0]), np.array([0.3, 0.1]))[1] == "constant explanation scores"
    assert kendall_tau_b(np.array([1.0, 2.0]), np.array([0.3, 0.3]))[1] == "constant leave-one-out drops"
    split = split_of([[CLS_ID, A, SEP_ID], [CLS_ID, SEP_ID]], [1, 1])
    one, empty = peer_metrics(
        MaskBatchEngine(LookupBackend(hand_logits)), split, [np.array([0, 1.0, 0]), np.zeros(2)]
    )
    assert math.isnan(one.tau_loo) and one.tau_undefined == "fewer than 2 explained tokens"
    # n = 1: k_q = 1 at every threshold, so the same value ten times (duplicates kept)
    assert one.comprehensiveness.tolist() == [sigmoid(2) - sigmoid(0)] * 10
    assert np.isnan(empty.aopc_comprehensiveness) and np.isnan(empty.aopc_sufficiency)


def test_duplicate_rows_cost_no_forward_pass():
    split = split_of([[CLS_ID, A, SEP_ID]], [1])
    engine = MaskBatchEngine(LookupBackend(hand_logits))
    peer_metrics(engine, split, [np.array([0, 1.0, 0])])
    # x and x with a masked are the only distinct rows among the 1 + 20 + 11 + 1 requested
    assert engine.stats.requested_rows == 33
    assert engine.stats.forward_rows == 2


def test_engine_path_equals_the_per_threshold_loop_exactly():
    batch = random_batch(seed=3, lengths=[0, 1, 2, 5, 9, 12], premasked=1, second_segment=2)
    sequences = unpad(batch.input_ids, batch.attention_mask)
    explained = [flags[: len(s)] for flags, s in zip(batch.explained, sequences, strict=True)]
    split = EncodedSplit(sequences, explained, explained, batch.labels)
    rng = np.random.default_rng(0)
    # integer scores make ties common, so the tie rule is exercised too
    scores = [np.where(e, rng.integers(0, 3, len(e)), 0).astype(np.float64) for e in explained]
    backend = LookupBackend(interaction_model(seed=1))
    engine = MaskBatchEngine(backend, token_budget=64)
    fast = peer_metrics(engine, split, scores, chunk_examples=4)
    reference, passes = peer_metrics_reference(backend, split, scores)
    assert passes > engine.stats.forward_rows
    for got, want in zip(fast, reference, strict=True):
        np.testing.assert_array_equal(got.comprehensiveness, want["comprehensiveness"])
        np.testing.assert_array_equal(got.sufficiency, want["sufficiency"])
        np.testing.assert_array_equal(got.tau_loo, want["tau_loo"])
    assert any(MASK_ID in s for s in sequences)  # a pre-masked token is among the explained ones

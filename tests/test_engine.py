"""The mask-batch engine on a recording lookup backend: packing, de-duplication, the cache, EngineStats."""

import itertools
from dataclasses import replace

import numpy as np
import pytest
from doubles import FIRST_WORD_ID, PAD_ID, VOCAB_SIZE, RecordingBackend, interaction_model

from fmm_fast.backends.engine import MaskBatchEngine


def distinct_rows(seed: int, lengths: list[int]) -> list[np.ndarray]:
    """One (T,) int64 row per length, word ids only, no two rows equal (a row's first id is unique)."""
    rng = np.random.default_rng(seed)
    rows = []
    for index, length in enumerate(lengths):
        row = rng.integers(FIRST_WORD_ID, VOCAB_SIZE, size=length)
        row[0] = FIRST_WORD_ID + index % (VOCAB_SIZE - FIRST_WORD_ID)
        rows.append(row.astype(np.int64))
    assert len({r.tobytes() for r in rows}) == len(rows)
    return rows


def expected_logits(backend: RecordingBackend, rows: list[np.ndarray]) -> np.ndarray:
    """(N, C) float32: each row scored on its own, in request order."""
    return np.stack([backend.score(row) for row in rows])


@pytest.mark.parametrize(("token_budget", "max_rows"), [(64, 512), (64, 3), (17, 512), (400, 8)])
def test_batches_stay_under_the_budget_sorted_by_length(token_budget: int, max_rows: int):
    backend = RecordingBackend(interaction_model(0))
    lengths = np.random.default_rng(1).integers(1, 17, size=60).tolist()
    rows = distinct_rows(2, lengths)
    engine = MaskBatchEngine(backend, token_budget=token_budget, max_rows=max_rows)

    np.testing.assert_array_equal(engine.logits(rows), expected_logits(backend, rows))
    sizes = []
    for input_ids, attention_mask in backend.batches:
        batch_rows, width = input_ids.shape
        real_lengths = attention_mask.sum(axis=1)
        assert batch_rows * width <= token_budget and batch_rows <= max_rows
        assert real_lengths.max() == width  # no padding beyond the batch's longest row
        assert np.all(input_ids[attention_mask == 0] == PAD_ID)
        sizes.append((batch_rows, real_lengths.min(), width))
    forwarded = backend.forwarded_rows()
    assert sorted(forwarded) == sorted(tuple(r.tolist()) for r in rows)  # each row exactly once
    assert [len(r) for r in forwarded] == sorted(lengths)  # rows go in ascending length
    # Greedy packing: a batch closes only when its next row would break the budget or the row limit.
    for (rows_now, _, _), (_, next_shortest, _) in itertools.pairwise(sizes):
        assert rows_now == max_rows or (rows_now + 1) * next_shortest > token_budget


def test_a_row_longer_than_the_budget_runs_alone():
    backend = RecordingBackend(interaction_model(0))
    rows = distinct_rows(3, [3, 30, 4, 2])
    out = MaskBatchEngine(backend, token_budget=12).logits(rows)
    np.testing.assert_array_equal(out, expected_logits(backend, rows))
    assert [ids.shape for ids, _ in backend.batches] == [(3, 4), (1, 30)]


def test_duplicates_run_once_and_every_copy_gets_the_result():
    backend = RecordingBackend(interaction_model(4, num_labels=3), num_labels=3)
    unique = distinct_rows(5, [5, 3, 7, 3, 6])
    order = np.random.default_rng(6).permutation(np.repeat(np.arange(len(unique)), 3))
    requests = [unique[i].copy() for i in order]  # equal content, distinct arrays
    engine = MaskBatchEngine(backend, cache_rows=0)

    out = engine.logits(requests)
    np.testing.assert_array_equal(out, expected_logits(backend, requests))
    assert sorted(backend.forwarded_rows()) == sorted(tuple(r.tolist()) for r in unique)
    assert (engine.stats.requested_rows, engine.stats.forward_rows) == (15, 5)

    signals = engine.signals(requests)
    assert signals.shape == (15, 2, 3)
    np.testing.assert_array_equal(signals, np.stack([backend.row_signals(r) for r in requests]))
    assert len(backend.forwarded_rows()) == 10  # signals: de-duplicated too, 5 more rows
    assert (engine.stats.requested_rows, engine.stats.forward_rows) == (30, 10)


def test_cache_serves_repeated_rows_and_signals_bypass_it():
    backend = RecordingBackend(interaction_model(7))
    a, b, c = distinct_rows(8, [4, 6, 5])
    engine = MaskBatchEngine(backend)

    engine.logits([a, b])
    forwarded_before = len(backend.forwarded_rows())
    out = engine.logits([b, c, a, c])  # a and b are cached, c runs once
    np.testing.assert_array_equal(out, expected_logits(backend, [b, c, a, c]))
    assert backend.forwarded_rows()[forwarded_before:] == [tuple(c.tolist())]
    assert (engine.stats.requested_rows, engine.stats.forward_rows) == (6, 3)

    engine.signals([a])  # signals are never cached: the row runs again
    assert backend.forwarded_rows()[-1] == tuple(a.tolist()) and engine.stats.forward_rows == 4


def test_without_a_cache_every_call_runs_its_rows():
    backend = RecordingBackend(interaction_model(7))
    rows = distinct_rows(9, [4, 6])
    engine = MaskBatchEngine(backend, cache_rows=0)
    engine.logits(rows)
    engine.logits(rows)
    assert len(backend.forwarded_rows()) == 4 and engine.stats.forward_rows == 4


def test_cache_evicts_the_least_recently_used_row():
    backend = RecordingBackend(interaction_model(10))
    a, b, c, d = distinct_rows(11, [3, 4, 5, 6])
    engine = MaskBatchEngine(backend, cache_rows=3)

    def runs(rows: list[np.ndarray]) -> list[tuple[int, ...]]:
        """The rows this call forwarded, after checking its results."""
        before = len(backend.forwarded_rows())
        np.testing.assert_array_equal(engine.logits(rows), expected_logits(backend, rows))
        return backend.forwarded_rows()[before:]

    key = {tuple(row.tolist()): name for name, row in zip("abcd", (a, b, c, d), strict=True)}
    assert [key[r] for r in runs([a, b, c])] == ["a", "b", "c"]
    assert runs([a]) == []  # a hit makes a the most recently used: b is now the oldest
    assert [key[r] for r in runs([d])] == ["d"]  # evicts b
    assert [key[r] for r in runs([b])] == ["b"]  # b was evicted; evicts c
    assert runs([a, d, b]) == []
    assert [key[r] for r in runs([c])] == ["c"]


def test_stats_count_rows_tokens_padding_and_batches():
    backend = RecordingBackend(interaction_model(12))
    rows = distinct_rows(13, [3, 2, 5, 3])
    engine = MaskBatchEngine(backend, token_budget=8)
    engine.owner = "first"
    engine.logits([*rows, rows[0]])
    # By length 2, 3, 3, 5 under 8 tokens: [2, 3] (padded to 3: one pad), [3], [5].
    assert [ids.shape for ids, _ in backend.batches] == [(2, 3), (1, 3), (1, 5)]
    stats = engine.stats.as_dict()
    assert stats["model_seconds"] >= 0.0
    del stats["model_seconds"]
    assert stats == {
        "requested_rows": 5,
        "forward_rows": 4,
        "shared_rows": 0,
        "forward_tokens": 13,
        "padded_tokens": 1,
        "batches": 3,
    }
    engine.logits(rows)  # all cached: requested grows, nothing else does
    assert engine.stats.requested_rows == 9 and engine.stats.batches == 3
    engine.owner = "another"  # rows another owner ran count once as shared, then as its own
    engine.logits([rows[0], rows[0], rows[1]])
    engine.logits([rows[0]])
    assert engine.stats.shared_rows == 2 and engine.stats.batches == 3


def test_empty_requests_run_nothing():
    backend = RecordingBackend(interaction_model(0), num_labels=2)
    engine = MaskBatchEngine(backend)
    assert engine.logits([]).shape == (0, 2)
    assert engine.signals([]).shape[0] == 0
    assert backend.batches == [] and engine.stats.batches == 0


def test_rejects_a_budget_or_row_limit_below_one():
    backend = RecordingBackend(interaction_model(0))
    with pytest.raises(ValueError, match="must be positive"):
        MaskBatchEngine(backend, token_budget=0)
    with pytest.raises(ValueError, match="must be positive"):
        MaskBatchEngine(backend, max_rows=0)


def test_keep_signals_serves_the_signals_of_scored_rows_without_running_them_again():
    backend = RecordingBackend(interaction_model(14))
    a, b, c = distinct_rows(15, [4, 6, 5])
    engine = MaskBatchEngine(backend, cache_rows=2, keep_signals=True)

    np.testing.assert_array_equal(engine.logits([a, b]), expected_logits(backend, [a, b]))
    signals = engine.signals([b, a, b])  # both scored just now: nothing runs
    np.testing.assert_array_equal(signals, np.stack([backend.row_signals(r) for r in (b, a, b)]))
    assert len(backend.forwarded_rows()) == 2 and engine.stats.forward_rows == 2

    engine.signals([c])  # a fresh row runs once, and its logits are cached with its signals
    np.testing.assert_array_equal(engine.logits([c]), expected_logits(backend, [c]))
    assert backend.forwarded_rows()[2:] == [tuple(c.tolist())]
    # c evicted a (the least recently used of the two kept): a's signals go with its logits
    np.testing.assert_array_equal(engine.signals([a])[0], backend.row_signals(a))
    assert backend.forwarded_rows()[-1] == tuple(a.tolist()) and engine.stats.forward_rows == 4


def test_a_tiny_cache_gives_the_same_results_within_its_byte_budget():
    backend = RecordingBackend(interaction_model(16))
    rows = distinct_rows(17, [5, 7, 6, 9, 4, 8] * 5)
    one_entry = MaskBatchEngine(backend)
    one_entry.logits(rows[:1])
    entry_bytes = one_entry.cache_bytes
    tiny = MaskBatchEngine(backend, cache_mb=3.5 * entry_bytes / 2**20)  # room for 3 rows of logits
    large = MaskBatchEngine(backend)
    requests = [rows[:12], rows[6:20], rows[::2], rows, rows[3:9] * 2]
    for request in requests:
        np.testing.assert_array_equal(tiny.logits(request), large.logits(request))
        np.testing.assert_array_equal(tiny.logits(request), expected_logits(backend, request))
        assert 0 < tiny.cache_bytes <= tiny.cache_budget and len(tiny._cache) == 3
    assert large.cache_bytes > tiny.cache_budget and tiny.stats.forward_rows > large.stats.forward_rows
    # Owned, compact copies: no kept row holds the backend's output array alive.
    for engine in (tiny, large):
        assert all(logits.base is None and logits.shape == (2,) for logits in engine._cache.values())


def test_signals_are_kept_as_owned_copies_and_counted_in_the_budget():
    backend = RecordingBackend(interaction_model(18))
    rows = distinct_rows(19, [4, 6, 5, 7])
    engine = MaskBatchEngine(backend, keep_signals=True)
    engine.logits(rows)
    assert all(signals.base is None for signals in engine._signal_cache.values())
    plain = MaskBatchEngine(backend)
    plain.logits(rows)
    signal_bytes = sum(signals.nbytes for signals in engine._signal_cache.values())
    assert engine.cache_bytes > plain.cache_bytes + signal_bytes
    without = MaskBatchEngine(backend, cache_mb=0)
    np.testing.assert_array_equal(without.logits(rows + rows), expected_logits(backend, rows + rows))
    assert without.cache_bytes == 0 and not without._cache and without.stats.forward_rows == 4


def test_batches_of_long_rows_hand_freed_memory_back(monkeypatch):
    from fmm_fast.backends import engine as engine_module
    from fmm_fast.core.heap import _malloc_trim

    calls = []
    monkeypatch.setattr(engine_module, "release_free_heap", lambda: calls.append(1))
    backend = RecordingBackend(interaction_model(20))
    short = distinct_rows(21, [5, 7, 6])
    MaskBatchEngine(backend, token_budget=8).logits(short)
    assert calls == []  # short rows: their many small batches skip the call
    long = distinct_rows(22, [engine_module.LONG_ROW_TOKENS, engine_module.LONG_ROW_TOKENS + 3])
    MaskBatchEngine(backend, token_budget=engine_module.LONG_ROW_TOKENS).logits(long)
    assert len(calls) == 2  # one per batch of long rows
    backend.info = replace(backend.info, hidden_size=engine_module.LARGE_BATCH_VALUES // 80)
    calls.clear()
    MaskBatchEngine(backend, token_budget=100).logits(distinct_rows(23, [30, 31, 32, 33, 34]))
    # batches (3, 32) and (2, 34): 96 tokens of short rows × the width reach LARGE_BATCH_VALUES, 68 do not
    assert [ids.shape for ids, _ in backend.batches[-2:]] == [(3, 32), (2, 34)]
    assert len(calls) == 1
    assert _malloc_trim() is not None  # glibc (Linux, where these tests run) has it: the call does work

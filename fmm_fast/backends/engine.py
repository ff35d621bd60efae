"""The mask-batch engine: many masked variants of few inputs, evaluated in few large batches.

Requests are plain token-id arrays. The engine drops duplicates (and rows it evaluated recently),
sorts the rest by length so no batch pads beyond its own longest row, packs batches under a token
budget (memory stays bounded whatever the request count), runs them on any backend, and returns
results in request order.

Its cache of recent rows stays under a byte budget (cache_mb): each entry is a 16-byte digest of the row's
tokens and owned copies of its logits (and signals), counted with their bookkeeping. Owned copies, not rows of
the backend's output: a kept view holds the whole output array (often a PyTorch tensor's storage) alive, and
thousands of half-freed batches fragment the heap (measured in bench/bench_memory.py). A full-length key
would cost 8 bytes per token per row: 16 KB for a 2,000-token row.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from fmm_fast.backends.base import Backend
from fmm_fast.core.datatypes import pad_batch
from fmm_fast.core.heap import release_free_heap

# Rows × padded length per batch. On a 2-core CPU 512–2048 ran MiniLM LOO batches fastest (16384 was
# 20–25% slower: bench/bench_engine.py's sweep); a GPU wants more (--token-budget).
DEFAULT_TOKEN_BUDGET = 2048
# Bytes the cache of recent rows may hold (--cache-mb). 256 MiB keeps about a million rows of logits, or
# 25,000 of MiniLM's MaSF signals (7 × 384 float32 each); results are the same with any budget, only rows
# evicted before they are asked again run again.
DEFAULT_CACHE_MB = 256
# Rows at least this long make batches whose freed buffers the engine hands back to the operating system
# (core/heap.py): long documents' runs stay flat; short rows' many small batches skip the call.
LONG_ROW_TOKENS = 512
# So do batches whose hidden states hold at least this many values (rows × length × width), whatever their
# rows' length: their feed-forward buffers are megabytes each. MiniLM explaining 100 documents cut to 128
# tokens (full 2,048-token batches) left ~110 MB of freed pages resident; a trim costs about a millisecond.
LARGE_BATCH_VALUES = 1 << 19
KEY_BYTES = 16  # blake2b digest of a row's token ids
# What an entry costs beyond its arrays' data: the key's bytes object, each ndarray's header, the dict slot
# (CPython 3.11, 64-bit: 49 + 112 per array + about 100); an estimate, so the budget is honest, not exact.
ENTRY_OVERHEAD_BYTES = 49 + KEY_BYTES + 100
ARRAY_OVERHEAD_BYTES = 112


def row_key(sequence: np.ndarray) -> bytes:
    """(T,) token ids -> 16-byte key: equal rows, equal keys; a collision between different rows has
    probability about 2⁻¹²⁸ per pair."""
    return hashlib.blake2b(np.asarray(sequence, dtype=np.int64).tobytes(), digest_size=KEY_BYTES).digest()


@dataclass
class EngineStats:
    requested_rows: int = 0  # rows asked for
    forward_rows: int = 0  # rows actually run through the model
    shared_rows: int = 0  # rows served from the cache that another owner's passes ran (MaskBatchEngine.owner)
    forward_tokens: int = 0  # non-padding tokens run through the model
    padded_tokens: int = 0  # padding positions run through the model
    batches: int = 0
    model_seconds: float = 0.0  # wall time inside backend.forward

    def as_dict(self) -> dict:
        return asdict(self)


class MaskBatchEngine:
    """Evaluate many token sequences with deduplication, length bucketing and token-budget packing.

    token_budget bounds rows × padded length per batch; max_rows bounds rows per batch.
    The cache keeps the logits of recently evaluated rows, so e.g. the pass that scored an erasure step
    serves as the leave-one-out reference of the next step without running again: at most cache_rows rows
    (None: no row limit) and cache_mb MiB (cache_bytes: what it holds now), least recently used out first.
    keep_signals: every forward pass also computes the rows' MaSF signals and the cache keeps them beside
    the logits, so `signals()` of rows that `logits()` just scored runs nothing (one pass serves both).
    owner: who asks now (erasure sets each measure's name): a cached row that another owner's pass ran
    counts in stats.shared_rows, so each measure's cost can say which rows another measure paid for.
    """

    def __init__(
        self,
        backend: Backend,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        max_rows: int = 512,
        cache_rows: int | None = None,
        keep_signals: bool = False,
        cache_mb: float = DEFAULT_CACHE_MB,
    ) -> None:
        if token_budget < 1 or max_rows < 1:
            raise ValueError("token_budget and max_rows must be positive")
        if cache_mb < 0:
            raise ValueError("cache_mb must be 0 (no cache) or positive")
        self.backend = backend
        self.token_budget = token_budget
        self.max_rows = max_rows
        self.cache_rows = cache_rows
        self.cache_mb = cache_mb  # engines made beside this one (the gradient engine) get the same budget
        self.cache_budget = int(cache_mb * 2**20)
        self.cache_bytes = 0
        self.keep_signals = keep_signals
        self.stats = EngineStats()
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._signal_cache: dict[bytes, np.ndarray] = {}  # keep_signals only; evicted with _cache
        self.owner = ""
        self._owners: dict[bytes, str] = {}  # who ran each cached row; evicted with _cache

    @property
    def info(self):
        return self.backend.info

    def logits(self, sequences: Sequence[np.ndarray], progress=None) -> np.ndarray:
        """(N,) sequences of (T_i,) int64 -> (N, C) float32 logits, in request order."""
        self.stats.requested_rows += len(sequences)
        keys = [row_key(s) for s in sequences]
        missing: dict[bytes, np.ndarray] = {}
        shared: set[bytes] = set()
        for key, seq in zip(keys, sequences, strict=True):
            if key in self._cache:
                self._cache.move_to_end(key)
                if self._owners.get(key, "") not in ("", self.owner):  # "": the run's own shared points
                    shared.add(key)
                    self._owners[key] = self.owner  # asked again, it is a hit alone too: counted once
            elif key not in missing:
                missing[key] = np.asarray(seq, dtype=np.int64)
        fresh: dict[bytes, np.ndarray] = {}
        fresh_signals: dict[bytes, np.ndarray] = {}
        missing_keys = list(missing)
        for batch_keys, output in self._run(
            [missing[k] for k in missing_keys], missing_keys, self.keep_signals, progress
        ):
            fresh.update(zip(batch_keys, output.logits, strict=True))
            if output.signals is not None:
                fresh_signals.update(zip(batch_keys, output.signals, strict=True))
        self.stats.shared_rows += len(shared)
        num_labels = self.info.num_labels
        out = np.empty((len(sequences), num_labels), dtype=np.float32)
        for row, key in enumerate(keys):
            out[row] = fresh[key] if key in fresh else self._cache[key]
        self._remember(fresh, fresh_signals)
        return out

    def signals(self, sequences: Sequence[np.ndarray], progress=None) -> np.ndarray:
        """(N,) sequences -> (N, L+1, D) float32 MaSF signals, in request order (deduplicated; cached only
        with keep_signals, where cached rows run nothing and fresh ones are cached with their logits)."""
        self.stats.requested_rows += len(sequences)
        keys = [row_key(s) for s in sequences]
        unique: dict[bytes, np.ndarray] = {}
        for key, seq in zip(keys, sequences, strict=True):
            if key not in self._signal_cache:
                unique.setdefault(key, np.asarray(seq, dtype=np.int64))
        unique_keys = list(unique)
        found: dict[bytes, np.ndarray] = {}
        fresh: dict[bytes, np.ndarray] = {}
        for batch_keys, output in self._run([unique[k] for k in unique_keys], unique_keys, True, progress):
            assert output.signals is not None
            found.update(zip(batch_keys, output.signals, strict=True))
            fresh.update(zip(batch_keys, output.logits, strict=True))
        rows = [found[k] if k in found else self._signal_cache[k] for k in keys]
        if self.keep_signals:
            self._remember(fresh, found)
        return np.stack(rows) if keys else np.empty((0, 0, 0), np.float32)

    def _run(
        self, sequences: list[np.ndarray], keys: list[bytes], with_signals: bool, progress
    ) -> Iterator[tuple[list[bytes], object]]:
        for rows in self._pack([len(s) for s in sequences]):
            batch = [sequences[i] for i in rows]
            input_ids, attention_mask = pad_batch(batch, self.info.pad_id)
            start = time.perf_counter()
            output = self.backend.forward(input_ids, attention_mask, with_signals=with_signals)
            self.stats.model_seconds += time.perf_counter() - start
            real = int(attention_mask.sum())
            self.stats.batches += 1
            self.stats.forward_rows += len(rows)
            self.stats.forward_tokens += real
            self.stats.padded_tokens += attention_mask.size - real
            if (
                input_ids.shape[1] >= LONG_ROW_TOKENS
                or input_ids.size * self.info.hidden_size >= LARGE_BATCH_VALUES
            ):
                release_free_heap()
            if progress is not None:
                progress.update(len(rows))
            yield [keys[i] for i in rows], output

    def _pack(self, lengths: list[int]) -> Iterator[list[int]]:
        """Group row indices into batches: sorted by length, rows × longest ≤ token_budget."""
        order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
        batch: list[int] = []
        for index in order:
            longest = lengths[index]  # ascending order: the newest row is the longest
            if batch and ((len(batch) + 1) * longest > self.token_budget or len(batch) >= self.max_rows):
                yield batch
                batch = []
            batch.append(int(index))
        if batch:
            yield batch

    def _entry_bytes(self, key: bytes) -> int:
        """What the cache's entry `key` costs: its arrays' data and the bookkeeping around them."""
        arrays = [self._cache[key], *([self._signal_cache[key]] if key in self._signal_cache else [])]
        return ENTRY_OVERHEAD_BYTES + sum(ARRAY_OVERHEAD_BYTES + array.nbytes for array in arrays)

    def _remember(self, fresh: dict[bytes, np.ndarray], signals: dict[bytes, np.ndarray]) -> None:
        """Cache owned copies of fresh rows' logits (and with keep_signals their signals), then evict the
        least recently used until the cache is within cache_rows and its byte budget."""
        if self.cache_rows == 0 or self.cache_budget == 0:
            return
        for key, logits in fresh.items():
            if key in self._cache:  # asked twice in one call: already counted
                continue
            self._cache[key] = logits.copy()
            self._owners[key] = self.owner
            if self.keep_signals and key in signals:
                self._signal_cache[key] = signals[key].copy()
            self.cache_bytes += self._entry_bytes(key)
        rows_limit = len(self._cache) if self.cache_rows is None else self.cache_rows
        while self._cache and (len(self._cache) > rows_limit or self.cache_bytes > self.cache_budget):
            evicted = next(iter(self._cache))
            self.cache_bytes -= self._entry_bytes(evicted)
            del self._cache[evicted]
            self._signal_cache.pop(evicted, None)
            self._owners.pop(evicted, None)


def mask_positions(input_ids: np.ndarray, masks: np.ndarray, mask_id: int) -> list[np.ndarray]:
    """Masked copies of one sequence.

    input_ids: (T,) int64; masks: (K, T) bool, True = replace by mask_id. Returns K arrays of shape (T,).
    """
    copies = np.where(masks, mask_id, input_ids[None, :]).astype(np.int64)
    return list(copies)

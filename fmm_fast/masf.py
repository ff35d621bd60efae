"""MaSF in-distribution test (Max-Simes-Fisher, SPEC §6) on MaSF signals.

A signal is one example's (L+1, D) float32 matrix (per-layer max over its non-pad hidden states).
Levels, per example:
  1 → per feature (layer, dim): c = ecdf_cal(value) = #(calibration values strictly below) / N,
      p = min(c, 1 − c);
  2 → per layer, Simes over the D features: min_i (D / i) · p_(i);
  3 → Fisher over the L+1 layers: −2 Σ log(p + 1e-8);
and the example's p-value is 1 − ecdf_cal(Fisher statistic), against the calibration examples'
Fisher statistics computed in-sample (each calibration example against all N, itself included).

Three implementations give bit-identical p-values:
- :class:`MaSFCalibration`: Numba kernels (sorted calibration columns + binary search), the one to use;
- :func:`masf_oracle_p_values`: NumPy, counts by direct comparison (the test oracle);
- :func:`masf_numpy_p_values`: NumPy, counts by np.searchsorted (the benchmark baseline).
All three compute every float64 value with the same operations in the same order (a minimum is exact
in any order), and all take logarithms through the C library's log (Numba's math.log, Python's
math.log), because np.log's SIMD version differs from it in the last bit for some inputs.
Signals are compared as float32 (other dtypes are converted).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numba
import numpy as np
from numba import prange

from fmm_fast.errors import UserError

MIN_CALIBRATION_EXAMPLES = 20
FISHER_EPSILON = 1e-8  # keeps log finite for p = 0
IN_DISTRIBUTION_LEVEL = 0.05
SHARE_THRESHOLDS = ("0.001", "0.005", "0.01", "0.05", "0.1")
# Examples per parallel work item: each sorted calibration column is reused by this many lookups while in L1,
# the block's level indices (rows × features intp) stay cache-resident, and a few hundred test signals still
# make several work items for the threads.
KERNEL_BLOCK_ROWS = 128


# ---------------------------------------------------------------------------------------------- validation


def _check_signals(signals: np.ndarray, what: str) -> np.ndarray:
    """Any (N, L+1, D) array-like -> C-contiguous (N, L+1, D) float32; UserError on bad shape or values."""
    array = np.asarray(signals)
    if array.ndim != 3:
        raise UserError(
            f"{what} signals must be a 3-D array (examples, layers+1, hidden size), got shape {array.shape}; "
            "pass the output of MaskBatchEngine.signals"
        )
    if array.shape[0] == 0 or array.shape[1] == 0 or array.shape[2] == 0:
        raise UserError(f"{what} signals are empty (shape {array.shape}); pass at least one example")
    array = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(array).all():
        raise UserError(f"{what} signals contain NaN or inf; check the model's hidden states for overflow")
    return array


def _check_calibration(calibration_signals: np.ndarray) -> np.ndarray:
    calibration = _check_signals(calibration_signals, "calibration")
    if calibration.shape[0] < MIN_CALIBRATION_EXAMPLES:
        raise UserError(
            f"MaSF needs at least {MIN_CALIBRATION_EXAMPLES} calibration examples, got "
            f"{calibration.shape[0]}; use a larger validation split"
        )
    return calibration


def _check_test(test_signals: np.ndarray, signal_shape: tuple[int, int]) -> np.ndarray:
    test = _check_signals(test_signals, "test")
    if test.shape[1:] != signal_shape:
        raise UserError(
            f"test signals have shape (layers+1, hidden size) = {test.shape[1:]} but the calibration signals "
            f"have {signal_shape}; score test data with the same model that produced the calibration signals"
        )
    return test


# ------------------------------------------------------------------------------------------- Numba kernels


@numba.njit(cache=True)
def _count_below_each(sorted_values, queries):  # pragma: no cover - compiled
    """(N,) ascending, (Q,) -> (Q,) intp: #(sorted_values < query) for each query (searchsorted side='left').

    Branch-free lower bound, all queries in lockstep: the halving schedule depends only on N, so each
    level advances every query once, and the Q independent load chains overlap instead of waiting on
    each other. The step is an indexed load of (0, half), not `if value < query: base += half`,
    because LLVM's x86 cmov converter turns that select back into a branch that mispredicts half the
    time (measured 2-3x slower).
    """
    below = np.zeros(queries.shape[0], dtype=np.intp)
    step_choices = np.zeros(2, dtype=np.intp)
    length = sorted_values.shape[0]
    while length > 1:
        half = length >> 1
        step_choices[1] = half
        for query in range(queries.shape[0]):
            base = below[query]
            below[query] = base + step_choices[np.intp(sorted_values[base + half] < queries[query])]
        length -= half
    for query in range(queries.shape[0]):
        below[query] += np.intp(sorted_values[below[query]] < queries[query])
    return below


@numba.njit(parallel=True, cache=True)
def _sorted_feature_columns(calibration):  # pragma: no cover - compiled
    """(N, L+1, D) float32 -> (F, N) float32, F = (L+1)·D: each feature's calibration values, ascending."""
    n_examples, n_layers, hidden = calibration.shape
    columns = np.empty((n_layers * hidden, n_examples), dtype=calibration.dtype)
    for feature in prange(n_layers * hidden):
        layer = feature // hidden
        dim = feature - layer * hidden
        column = calibration[:, layer, dim].copy()
        column.sort()
        columns[feature] = column
    return columns


@numba.njit(parallel=True, cache=True)
def _fisher_statistics(signals, sorted_columns, level_of_count, level_values):  # pragma: no cover - compiled
    """Level-3 Fisher statistic of each signal.

    signals: (M, L+1, D) float32; sorted_columns: (F, N) float32 from _sorted_feature_columns;
    level_of_count: (N+1,) intp and level_values: (V,) float64 from _p_value_levels.
    Returns (M,) float64.
    """
    n_signals, n_layers, hidden = signals.shape
    n_features = sorted_columns.shape[0]
    statistics = np.empty(n_signals, dtype=np.float64)
    n_blocks = (n_signals + KERNEL_BLOCK_ROWS - 1) // KERNEL_BLOCK_ROWS
    # One parallel region over independent row blocks (no barrier per step); call it through
    # _fisher_statistics_dynamic so the blocks are handed out one at a time.
    for block in prange(n_blocks):
        start = block * KERNEL_BLOCK_ROWS
        n_rows = min(KERNEL_BLOCK_ROWS, n_signals - start)
        # Level 1, feature-major: one sorted column (N float32) stays in L1 while the block looks it up.
        levels = np.empty((n_rows, n_features), dtype=np.intp)
        for feature in range(n_features):
            layer = feature // hidden
            dim = feature - layer * hidden
            below = _count_below_each(
                sorted_columns[feature], signals[start : start + n_rows, layer, dim].copy()
            )
            for row in range(n_rows):
                levels[row, feature] = level_of_count[below[row]]
        # Levels 2 and 3, example-major. Simes needs each layer's D p-values in ascending order; they take
        # only V ≈ N/2 distinct values, so a counting sort over the levels replaces a comparison sort.
        level_counts = np.zeros(level_values.shape[0], dtype=np.intp)
        for row in range(n_rows):
            log_sum = 0.0
            for layer in range(n_layers):
                layer_levels = levels[row, layer * hidden : (layer + 1) * hidden]
                lowest = level_values.shape[0]
                for level in layer_levels:
                    level_counts[level] += 1
                    lowest = min(lowest, level)
                # Simes = min over ranks i of (D / i) · p_(i). Within a run of equal p the last rank gives
                # the smallest product, and once p ≥ the best so far no later rank can beat it
                # ((D / i) · p ≥ p since i ≤ D).
                simes = np.inf
                rank = 0
                level = lowest
                while rank < hidden:
                    if level_counts[level] > 0:
                        value = level_values[level]
                        if value >= simes:
                            break
                        rank += level_counts[level]
                        simes = min(simes, (hidden / rank) * value)
                    level += 1
                for level in layer_levels:
                    level_counts[level] = 0
                # Sequential sum over layers, the order the NumPy versions use.
                log_sum += math.log(simes + FISHER_EPSILON)
            statistics[start + row] = -2.0 * log_sum
    return statistics


def _fisher_statistics_dynamic(
    signals: np.ndarray, sorted_columns: np.ndarray, levels: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """_fisher_statistics with dynamic scheduling: a thread slowed by other work on a shared machine
    does not hold the others up. (Set here, not inside the kernel, because set_parallel_chunksize in
    jitted code makes the function uncacheable.)
    """
    with numba.parallel_chunksize(1):
        return _fisher_statistics(signals, sorted_columns, *levels)


@numba.njit(cache=True)
def _right_tail_p_values(statistics, sorted_calibration_statistics):  # pragma: no cover - compiled
    """(M,) float64 statistics, (N,) ascending float64 -> (M,) float64: 1 − #(calibration < s) / N."""
    n_calibration = sorted_calibration_statistics.shape[0]
    return 1.0 - _count_below_each(sorted_calibration_statistics, statistics) / n_calibration


def _p_value_levels(n_calibration: int) -> tuple[np.ndarray, np.ndarray]:
    """The level-1 p-value of a feature as a function of its count k of calibration values below it.

    Returns level_of_count (N+1,) intp, the rank of p(k) among the distinct values, and level_values
    (V,) float64 ascending, with p(k) = min(k / N, 1 − k / N) computed exactly as the NumPy versions do.
    """
    below = np.arange(n_calibration + 1) / n_calibration
    level_values, level_of_count = np.unique(np.minimum(below, 1.0 - below), return_inverse=True)
    return level_of_count.astype(np.intp), level_values


class MaSFCalibration:
    """Calibration signals reduced to what scoring needs; fit once, score many test sets.

    sorted_columns: (F, N) float32, F = (L+1)·D, each feature's calibration values ascending.
    sorted_fisher: (N,) float64, the calibration examples' in-sample Fisher statistics ascending.
    levels: _p_value_levels(N). signal_shape: (L+1, D).
    """

    def __init__(
        self,
        sorted_columns: np.ndarray,
        sorted_fisher: np.ndarray,
        levels: tuple[np.ndarray, np.ndarray],
        signal_shape: tuple[int, int],
    ):
        self.sorted_columns = sorted_columns
        self.sorted_fisher = sorted_fisher
        self.levels = levels
        self.signal_shape = signal_shape

    @property
    def n_calibration(self) -> int:
        return int(self.sorted_fisher.shape[0])

    @property
    def p_value_floor(self) -> float:
        """The smallest p-value any test example can get: the share of calibration examples tied at the
        largest Fisher statistic. With few calibration examples many of them are a feature's extreme
        in-sample (p 0 there), every layer's Simes p hits 0 and the statistic saturates at its cap; a
        floor above the test's level (0.05) means the test can never call an input out of distribution."""
        return float(np.count_nonzero(self.sorted_fisher == self.sorted_fisher[-1]) / self.n_calibration)

    @classmethod
    def fit(cls, calibration_signals: np.ndarray) -> MaSFCalibration:
        """calibration_signals: (N, L+1, D) float32, N ≥ 20."""
        calibration = _check_calibration(calibration_signals)
        sorted_columns = _sorted_feature_columns(calibration)
        levels = _p_value_levels(len(calibration))
        in_sample_fisher = _fisher_statistics_dynamic(calibration, sorted_columns, levels)
        return cls(sorted_columns, np.sort(in_sample_fisher), levels, calibration.shape[1:])

    def p_values(self, test_signals: np.ndarray) -> np.ndarray:
        """(N_test, L+1, D) float32 -> (N_test,) float64 right-sided MaSF p-values."""
        test = _check_test(test_signals, self.signal_shape)
        return _right_tail_p_values(
            _fisher_statistics_dynamic(test, self.sorted_columns, self.levels), self.sorted_fisher
        )


# -------------------------------------------------------------------------------------- NumPy references

CountBelow = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _count_below_by_comparison(reference: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """reference (N, K), queries (M, K) -> (M, K) int64: #(reference[:, k] < queries[m, k]), brute force."""
    counts = np.empty(queries.shape, dtype=np.int64)
    for row, query in enumerate(queries):
        counts[row] = np.count_nonzero(reference < query, axis=0)
    return counts


def _count_below_by_searchsorted(reference: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Same contract as _count_below_by_comparison, by sorting each column once and binary search."""
    sorted_reference = np.sort(reference, axis=0)
    counts = np.empty(queries.shape, dtype=np.int64)
    for column in range(reference.shape[1]):
        counts[:, column] = np.searchsorted(sorted_reference[:, column], queries[:, column], side="left")
    return counts


def _fisher_from_counts(counts: np.ndarray, n_calibration: int) -> np.ndarray:
    """counts (M, L+1, D) int64 of calibration values strictly below -> (M,) float64 Fisher statistics."""
    hidden = counts.shape[2]
    below = counts / n_calibration
    feature_p = np.sort(np.minimum(below, 1.0 - below), axis=2)
    simes = ((hidden / np.arange(1, hidden + 1)) * feature_p).min(axis=2)
    libm_log = np.frompyfunc(math.log, 1, 1)  # the C library's log, as in the Numba kernel
    log_sum = np.zeros(counts.shape[0], dtype=np.float64)
    for layer in range(counts.shape[1]):  # sequential, in the kernel's order
        log_sum += libm_log(simes[:, layer] + FISHER_EPSILON).astype(np.float64)
    return -2.0 * log_sum


def _numpy_p_values(
    calibration_signals: np.ndarray, test_signals: np.ndarray, count_below: CountBelow
) -> np.ndarray:
    """MaSF p-values (N_test,) float64 in NumPy, with the given level-1 and level-3 counting method."""
    calibration = _check_calibration(calibration_signals)
    n_calibration, n_layers, hidden = calibration.shape
    test = _check_test(test_signals, (n_layers, hidden))
    reference = calibration.reshape(n_calibration, -1)
    # Calibration (in-sample) and test rows in one pass, so searchsorted sorts the reference once.
    queries = np.concatenate([reference, test.reshape(test.shape[0], -1)])
    fisher = _fisher_from_counts(count_below(reference, queries).reshape(-1, n_layers, hidden), n_calibration)
    calibration_fisher, test_fisher = fisher[:n_calibration], fisher[n_calibration:]
    below = count_below(calibration_fisher[:, None], test_fisher[:, None])[:, 0]
    return 1.0 - below / n_calibration


def masf_oracle_p_values(calibration_signals: np.ndarray, test_signals: np.ndarray) -> np.ndarray:
    """(N_cal, L+1, D), (N_test, L+1, D) float32 -> (N_test,) float64; counts by direct comparison."""
    return _numpy_p_values(calibration_signals, test_signals, _count_below_by_comparison)


def masf_numpy_p_values(calibration_signals: np.ndarray, test_signals: np.ndarray) -> np.ndarray:
    """(N_cal, L+1, D), (N_test, L+1, D) float32 -> (N_test,) float64; counts by np.searchsorted."""
    return _numpy_p_values(calibration_signals, test_signals, _count_below_by_searchsorted)


# ------------------------------------------------------------------------------------ dataset-level summary


def summarize_p_values(p_values: np.ndarray) -> dict:
    """(N,) float64 test p-values -> Simes summary, share below each threshold, in-distribution verdict.

    simes = min_i (N / i) · p_(i); share_below[t] = fraction of p-values strictly below t;
    in_distribution = simes > 0.05.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise UserError(
            f"p-values must be a non-empty 1-D array, got shape {p.shape}; pass p_values(...)'s output"
        )
    n = p.size
    simes = float(((n / np.arange(1, n + 1)) * np.sort(p)).min())
    return {
        "simes": simes,
        "share_below": {threshold: float(np.mean(p < float(threshold))) for threshold in SHARE_THRESHOLDS},
        "in_distribution": simes > IN_DISTRIBUTION_LEVEL,
        "n": int(n),
    }

"""MaSF in-distribution test (Max-Simes-Fisher, docs/method.md §6) on MaSF signals.

A signal is one example's (L+1, D) float32 matrix (per-layer max over its non-pad hidden states).
With ecdf(sample, s) = #(sample values strictly below s) / |sample| and two_sided(c) = min(c, 1 − c):
  1 → per feature (layer, dim): p1 = two_sided(ecdf(level-1 reference values of the feature, value));
  2 → per layer: Simes s2 = min_i (D / i) · p1_(i), calibrated: p2 = two_sided(ecdf(reference s2 of the
      layer, s2));
  3 → Fisher over the L+1 layers: f = −2 Σ log(p2 + 1e-8), and the example's p-value from the
      reference Fisher statistics.
Exact ties: every p-value at levels 1 and 2 is a count share m / N, so s2 is computed as
(D / N) · min_i (m_(i) / i) and p2 as min(b, K − b) / K, one correctly rounded division per term: examples
whose statistics are mathematically equal (1/1 and 3/3) compare equal at the next level, whatever the
product order (the paper's float32 (n / i) · p splits such ties by rounding).
Two calibration methods (CALIBRATION_METHODS):
- "in-sample" (the paper's): every level's reference is all N calibration examples, whose own levels 2
  and 3 are computed in-sample (each against all N, itself included); p = 1 − ecdf(reference f, f).
  Not a valid p-value: fresh examples of the calibration distribution score too low (docs/method.md §6).
- "split" (conformal): a seeded half A is the level-1 reference, with conformal level-1
  p-values p1 = (1 + m) / (|A| + 1) that are never 0; by default every signal is first reduced to the first
  r principal components per layer fitted on half A (reduction.py; components = 0: none); the other half B,
  scored against A like a test example, calibrates levels 2 and 3 full-conformally: for a test example x,
  levels 2 and 3 of every member of the bag B ∪ {x} are computed against the whole bag, and
  p = #{z in the bag: f_z ≥ f_x} / (|B| + 1). The bag is exchangeable when x comes from the calibration
  distribution (the reduction is a function of A alone), so p is a valid p-value, and its floor is
  1 / (|B| + 1) (measured against other variants in bench_masf_calibration.py).

Three implementations give bit-identical p-values:
- :class:`MaSFCalibration`: Numba kernels (sorted reference columns + binary search), the one to use;
- :func:`masf_oracle_p_values`: a plain transcription that counts by direct comparison (the test oracle);
- :func:`masf_numpy_p_values`: NumPy, counts by np.searchsorted (the benchmark baseline).
All three compute every float64 value with the same operations (a minimum is exact in any order, the
Fisher sum runs over layers in order), and all take logarithms through the C library's log (Numba's
math.log, Python's math.log), because np.log's SIMD version differs from it in the last bit for some
inputs. Signals are compared as float32 (other dtypes are converted); the split's reduction projects
them once, to float32, before any of the three sees them (LayerProjection.apply gives every signal the same
bits whatever else it is projected with).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
from numba import prange

from fmm_fast.core.errors import UserError
from fmm_fast.protocols.masf.components import DEFAULT_SPLIT_COMPONENTS, check_components
from fmm_fast.protocols.masf.reduction import LayerProjection, project_numpy

MIN_CALIBRATION_EXAMPLES = 20  # per reference set: all N in-sample, each half for split
CALIBRATION_METHODS = ("in-sample", "split")
Projector = Callable[[LayerProjection, np.ndarray], np.ndarray]  # (projection, (M, L+1, D)) -> (M, L+1, r)


def calibration_variant(method: str, components: int = DEFAULT_SPLIT_COMPONENTS) -> str:
    """What `method` computes with `components` principal components per layer (split only; 0 = none),
    recorded with its results as "variant". Records without it predate exact ties and the conformal split
    (whose level-1 p-values m / |A| saturated, with levels 2-3 in-sample on B); records whose split variant
    names no reduction predate it."""
    if method == "in-sample":
        return "the paper's, with exact ties"
    reduction = f"PCA {components} per layer fitted on half A; " if components else ""
    return (
        f"{reduction}conformal level 1 on half A, full-conformal levels 2-3 on half B plus the test example"
    )


FISHER_EPSILON = 1e-8  # keeps log finite for p = 0
IN_DISTRIBUTION_LEVEL = 0.05
SHARE_THRESHOLDS = ("0.001", "0.005", "0.01", "0.05", "0.1")
# Examples per parallel work item: each sorted calibration column is reused by this many lookups while in L1,
# the block's level indices (rows × features intp) stay cache-resident, and a few hundred test signals still
# make several work items for the threads.
KERNEL_BLOCK_ROWS = 128
# The share of half B's members, by the spread of their bounds, that _full_conformal_p_values walks through as
# sorted "narrow" ones; the rest are checked one by one for every test example.
WIDE_BOUNDS_QUANTILE = 0.9


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


def _check_test(
    test_signals: np.ndarray,
    signal_shape: tuple[int, int],
    projection: LayerProjection | None,
    project: Projector = LayerProjection.apply,
) -> np.ndarray:
    """Test signals (M, L+1, D) checked against the calibration's (L+1, D) -> float32 (M, L+1, D), or
    (M, L+1, r) projected (by `project`) when the calibration reduces its signals."""
    test = _check_signals(test_signals, "test")
    if test.shape[1:] != signal_shape:
        raise UserError(
            f"test signals have shape (layers+1, hidden size) = {test.shape[1:]} but the calibration signals "
            f"have {signal_shape}; score test data with the same model that produced the calibration signals"
        )
    return test if projection is None else project(projection, test)


@dataclass(frozen=True)
class ReferenceSets:
    """The calibration examples each level compares against, per docs/method.md §6.

    level_1: (N1, L+1, R) float32, the per-feature ECDFs' sample; calibrated: (N2, L+1, R) float32, the
    examples whose Simes statistics form the level-2 ECDFs and whose Fisher statistics calibrate level 3
    (in-sample: both are all N; split: halves A and B); projection: the split's reduction to R principal
    components per layer (None: R = D, the signals as they are); signal_shape: (L+1, D) before it.
    """

    method: str
    seed: int | None  # the split's seed; None in-sample
    level_1: np.ndarray
    calibrated: np.ndarray
    projection: LayerProjection | None
    signal_shape: tuple[int, int]
    project: Projector = LayerProjection.apply

    def test(self, test_signals: np.ndarray) -> np.ndarray:
        """(M, L+1, D) test signals -> checked (M, L+1, R) float32, reduced as the calibration is."""
        return _check_test(test_signals, self.signal_shape, self.projection, self.project)


def calibration_halves(n_calibration: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The split method's halves: (⌊N/2⌋,) indices of A and (⌈N/2⌉,) of B, ascending, seeded."""
    order = np.random.default_rng(seed).permutation(n_calibration)
    half = n_calibration // 2
    return np.sort(order[:half]), np.sort(order[half:])


def check_calibration_method(method: str) -> None:
    """UserError unless method is one of CALIBRATION_METHODS."""
    if method not in CALIBRATION_METHODS:
        raise UserError(
            f"unknown MaSF calibration method {method!r}; use one of {', '.join(CALIBRATION_METHODS)}"
        )


def min_calibration_examples(method: str, components: int = DEFAULT_SPLIT_COMPONENTS) -> int:
    """The fewest calibration examples check_calibration_size accepts for `method` (of a hidden size above
    `components`): MIN_CALIBRATION_EXAMPLES per reference set, and for split a half A of more than
    `components` examples."""
    if method != "split":
        return MIN_CALIBRATION_EXAMPLES
    return 2 * max(MIN_CALIBRATION_EXAMPLES, components + 1)


def split_components_for(n_calibration: int, hidden: int, components: int = DEFAULT_SPLIT_COMPONENTS) -> int:
    """`components`, or fewer where the split of N calibration examples of hidden size D needs it: the most
    check_calibration_size accepts (half A of ⌊N/2⌋ examples varies in ⌊N/2⌋ − 1 directions, and fewer
    than D reduce anything); 0 (no reduction) when none fits."""
    return max(0, min(components, n_calibration // 2 - 1, hidden - 1))


def check_calibration_size(method: str, n_calibration: int, hidden: int, components: int) -> None:
    """UserError unless N calibration examples of hidden size D suffice for `method` (and, for split, for
    `components` principal components per layer of half A): checked before any signal is computed too."""
    check_calibration_method(method)
    needed = min_calibration_examples(method, 0)
    if n_calibration < needed:
        per_half = f" ({MIN_CALIBRATION_EXAMPLES} per half)" if method == "split" else ""
        raise UserError(
            f"MaSF {method} calibration needs at least {needed} calibration examples{per_half}, got "
            f"{n_calibration}; use a larger validation split"
        )
    if method == "split":
        check_components(components, hidden, n_calibration // 2)


def reference_sets(
    calibration_signals: np.ndarray,
    method: str,
    seed: int = 0,
    components: int = DEFAULT_SPLIT_COMPONENTS,
    project: Projector = LayerProjection.apply,
) -> ReferenceSets:
    """Checked calibration signals (N, L+1, D) -> the reference sets of `method` (split: reduced to
    `components` per layer, 0 = not, by `project`: the compiled projection or its NumPy twin, the same
    bits); UserError if unusable."""
    calibration = _check_signals(calibration_signals, "calibration")
    n_calibration, n_layers, hidden = calibration.shape
    check_calibration_size(method, n_calibration, hidden, components)
    if method == "in-sample":
        return ReferenceSets(method, None, calibration, calibration, None, (n_layers, hidden))
    half_a, half_b = calibration_halves(n_calibration, seed)
    level_1, calibrated = calibration[half_a], calibration[half_b]
    if not components:
        return ReferenceSets(method, seed, level_1, calibrated, None, (n_layers, hidden))
    # Fitted on half A only, then applied to A, B and every test example alike: given A it is one fixed map,
    # so B ∪ {test example} stays exchangeable and the full-conformal p-value stays valid.
    projection = LayerProjection.fit(level_1, components)
    return ReferenceSets(
        method,
        seed,
        project(projection, level_1),
        project(projection, calibrated),
        projection,
        (n_layers, hidden),
        project,
    )


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
def _sorted_feature_columns(reference):  # pragma: no cover - compiled
    """(N, L+1, D) float32 -> (F, N) float32, F = (L+1)·D: each feature's reference values, ascending."""
    n_examples, n_layers, hidden = reference.shape
    columns = np.empty((n_layers * hidden, n_examples), dtype=reference.dtype)
    for feature in prange(n_layers * hidden):
        layer = feature // hidden
        dim = feature - layer * hidden
        column = reference[:, layer, dim].copy()
        column.sort()
        columns[feature] = column
    return columns


@numba.njit(parallel=True, cache=True)
def _simes_statistics(signals, sorted_columns, numerator_of_count, scale):  # pragma: no cover - compiled
    """Level 1 and the level-2 Simes statistic of each signal and layer, with exact ties.

    signals: (M, L+1, D) float32; sorted_columns: (F, N) float32 from _sorted_feature_columns;
    numerator_of_count: (N+1,) intp, the level-1 p-value's integer numerator m(k) of a feature with k
    reference values below it (p1 = m(k) / denominator); scale: D / denominator. Returns (M, L+1) float64
    scale · min_i (m_(i) / i): one correctly rounded division per term, so equal fractions compare equal.
    """
    n_signals, n_layers, hidden = signals.shape
    n_features = sorted_columns.shape[0]
    n_numerators = numerator_of_count.max() + 1
    statistics = np.empty((n_signals, n_layers), dtype=np.float64)
    n_blocks = (n_signals + KERNEL_BLOCK_ROWS - 1) // KERNEL_BLOCK_ROWS
    # One parallel region over independent row blocks (no barrier per step); call it through
    # _simes_statistics_dynamic so the blocks are handed out one at a time.
    for block in prange(n_blocks):
        start = block * KERNEL_BLOCK_ROWS
        n_rows = min(KERNEL_BLOCK_ROWS, n_signals - start)
        # Level 1, feature-major: one sorted column (N float32) stays in L1 while the block looks it up.
        numerators = np.empty((n_rows, n_features), dtype=np.intp)
        for feature in range(n_features):
            layer = feature // hidden
            dim = feature - layer * hidden
            below = _count_below_each(
                sorted_columns[feature], signals[start : start + n_rows, layer, dim].copy()
            )
            for row in range(n_rows):
                numerators[row, feature] = numerator_of_count[below[row]]
        # Level 2, example-major. Simes needs each layer's D numerators in ascending order; they take only
        # about N/2 distinct values, so a counting sort replaces a comparison sort.
        counts = np.zeros(n_numerators, dtype=np.intp)
        for row in range(n_rows):
            for layer in range(n_layers):
                layer_numerators = numerators[row, layer * hidden : (layer + 1) * hidden]
                lowest = n_numerators
                for numerator in layer_numerators:
                    counts[numerator] += 1
                    lowest = min(lowest, numerator)
                # min over ranks i of m_(i) / i. Within a run of equal m the last rank gives the smallest
                # term, and once m / D ≥ the best so far no later rank can beat it (m' / i ≥ m / D for
                # m' ≥ m, i ≤ D, and correct rounding keeps that order).
                best = np.inf
                rank = 0
                numerator = lowest
                while rank < hidden:
                    if counts[numerator] > 0:
                        if numerator / hidden >= best:
                            break
                        rank += counts[numerator]
                        best = min(best, numerator / rank)
                    numerator += 1
                for numerator in layer_numerators:
                    counts[numerator] = 0
                statistics[start + row, layer] = scale * best
    return statistics


def _simes_statistics_dynamic(
    signals: np.ndarray, sorted_columns: np.ndarray, level_1: tuple[np.ndarray, float]
) -> np.ndarray:
    """_simes_statistics with dynamic scheduling: a thread slowed by other work on a shared machine
    does not hold the others up. (Set here, not inside the kernel, because set_parallel_chunksize in
    jitted code makes the function uncacheable.)
    """
    with numba.parallel_chunksize(1):
        return _simes_statistics(signals, sorted_columns, *level_1)


@numba.njit(parallel=True, cache=True)
def _fisher_statistics(simes, sorted_reference_simes, n_reference):  # pragma: no cover - compiled
    """Level 2's calibration and level 3's Fisher statistic of each example.

    simes: (M, L+1) float64; sorted_reference_simes: (L+1, K) float64, each layer's reference Simes
    statistics ascending; n_reference: the level-2 sample size, K (in-sample) or K + 1 (a full-conformal bag
    of the K and the example). p2 = min(b, n − b) / n with b = #(reference < s2): one division, so equal
    shares tie exactly (min(c, 1 − c) would not: 1 − 7/10 ≠ 3/10 in floating point). Returns (M,) float64.
    """
    n_signals, n_layers = simes.shape
    below = np.empty((n_layers, n_signals), dtype=np.intp)
    for layer in prange(n_layers):
        below[layer] = _count_below_each(sorted_reference_simes[layer], simes[:, layer].copy())
    statistics = np.empty(n_signals, dtype=np.float64)
    for row in prange(n_signals):
        log_sum = 0.0
        for layer in range(n_layers):  # sequential, the order the NumPy versions use
            count = below[layer, row]
            log_sum += math.log(min(count, n_reference - count) / n_reference + FISHER_EPSILON)
        statistics[row] = -2.0 * log_sum
    return statistics


@numba.njit(cache=True)
def _bag_logs(below, n_bag):  # pragma: no cover - compiled
    """Level 2 of the calibrating members of a full-conformal bag, precomputed for both cases.

    below: (K, L+1) intp, each member's count of other members with a smaller Simes statistic, per layer;
    n_bag = K + 1. Returns (2, K, L+1) float64: log(p2 + 1e-8), p2 = min(b, n_bag − b) / n_bag, with
    b = below (index 0: the test example is not below the member) and below + 1 (index 1: it is).
    """
    n_members, n_layers = below.shape
    logs = np.empty((2, n_members, n_layers), dtype=np.float64)
    for test_below in range(2):
        for member in range(n_members):
            for layer in range(n_layers):
                count = below[member, layer] + test_below
                logs[test_below, member, layer] = math.log(min(count, n_bag - count) / n_bag + FISHER_EPSILON)
    return logs


@numba.njit(cache=True)
def _bag_fisher_bounds(reference_logs):  # pragma: no cover - compiled
    """(2, K, L+1) float64 from _bag_logs -> (2, K) float64: each member's lowest and highest Fisher statistic
    in a bag, over every test example (every pattern of layers in which the test example is below it).

    The lowest sums the larger log of each layer, the highest the smaller, in the order and with the
    operations of _full_conformal_p_values: rounding to nearest is monotone, so a sum of terms each no larger
    than another's rounds to no more, and the bounds hold exactly, not merely up to rounding.
    """
    n_members, n_layers = reference_logs.shape[1:]
    bounds = np.empty((2, n_members), dtype=np.float64)
    for member in range(n_members):
        larger = 0.0
        smaller = 0.0
        for layer in range(n_layers):
            larger += max(reference_logs[0, member, layer], reference_logs[1, member, layer])
            smaller += min(reference_logs[0, member, layer], reference_logs[1, member, layer])
        bounds[0, member] = -2.0 * larger
        bounds[1, member] = -2.0 * smaller
    return bounds


@numba.njit(cache=True)
def _member_fisher(simes_row, member, reference_simes, reference_logs):  # pragma: no cover - compiled
    """A member's Fisher statistic in the bag of the K members and one test example of Simes statistics
    simes_row (L+1,): its level 2 counts the test example where it is below the member."""
    member_sum = 0.0
    for layer in range(simes_row.shape[0]):
        test_below = np.intp(simes_row[layer] < reference_simes[member, layer])
        member_sum += reference_logs[test_below, member, layer]
    return -2.0 * member_sum


@numba.njit(parallel=True, cache=True)
def _full_conformal_p_values(
    simes, fisher, reference_simes, reference_logs, sorted_lowest, narrow, wide
):  # pragma: no cover - compiled
    """Level 3 of each test example in the bag of the K calibrating members and itself.

    simes: (M, L+1) float64 test Simes statistics; fisher: (M,) their Fisher statistics in the bag
    (_fisher_statistics with n_reference K + 1); reference_simes: (K, L+1) the members' statistics;
    reference_logs: _bag_logs; sorted_lowest: (K,) every member's lowest bag Fisher statistic
    (_bag_fisher_bounds), ascending; narrow: (3, Kn) float64 of the members whose bounds are close, ordered
    by lowest bound: their index, lowest bound, and the running maximum of their highest bound in that
    order; wide: (3, Kw) float64 of the others: index, lowest and highest bound.
    p = #(bag members with Fisher f ≥ the test's f) / (K + 1). Returns (M,) float64.

    A member whose lowest bound is ≥ f counts and one whose highest is < f does not, whatever the test
    example; only the few in between are computed, which turns K·(L+1) steps per test example into a
    binary search and a handful of members (the bounds are exact, so the count is the one every member's
    own statistic gives, tests/test_masf.py).
    """
    n_signals = simes.shape[0]
    n_members = reference_simes.shape[0]
    p_values = np.empty(n_signals, dtype=np.float64)
    for row in prange(n_signals):
        threshold = fisher[row]
        # the test example itself, and every member whose lowest bound is at or above it
        at_or_above = 1 + n_members - _count_below_each(sorted_lowest, fisher[row : row + 1])[0]
        # narrow members below their lowest bound's cut: walk down while one of them can still reach it
        position = _count_below_each(narrow[1], fisher[row : row + 1])[0] - 1
        while position >= 0 and narrow[2, position] >= threshold:
            member = np.intp(narrow[0, position])
            at_or_above += np.intp(
                _member_fisher(simes[row], member, reference_simes, reference_logs) >= threshold
            )
            position -= 1
        for position in range(wide.shape[1]):
            if wide[1, position] < threshold <= wide[2, position]:
                member = np.intp(wide[0, position])
                at_or_above += np.intp(
                    _member_fisher(simes[row], member, reference_simes, reference_logs) >= threshold
                )
        p_values[row] = at_or_above / (n_members + 1)
    return p_values


def _level_1_p_values(n_reference: int, hidden: int, conformal: bool) -> tuple[np.ndarray, float]:
    """The level-1 p-value of a feature as a function of its count k of reference values below it, with
    the integer m(k) = min(k, N − k): p1(k) = m(k) / N, or conformal (1 + m(k)) / (N + 1).

    Returns numerator_of_count (N+1,) intp and the Simes scale D / denominator (see _simes_statistics).
    """
    counts = np.arange(n_reference + 1, dtype=np.intp)
    numerators = np.minimum(counts, n_reference - counts)
    if conformal:
        return numerators + 1, hidden / (n_reference + 1)
    return numerators, hidden / n_reference


def _below_each_other(reference_simes: np.ndarray, sorted_simes: np.ndarray) -> np.ndarray:
    """(K, L+1) Simes statistics, (L+1, K) the same sorted per layer -> (K, L+1) intp: per layer, how many
    of the K have a strictly smaller statistic than each."""
    return np.stack(
        [
            _count_below_each(sorted_simes[layer], reference_simes[:, layer].copy())
            for layer in range(len(sorted_simes))
        ],
        axis=1,
    )


@dataclass(frozen=True)
class InSampleLevels:
    """Levels 2 and 3 of the in-sample calibration: sorted_simes (L+1, N) float64, each layer's calibration
    Simes statistics ascending; sorted_fisher (N,) float64, their in-sample Fisher statistics ascending."""

    sorted_simes: np.ndarray
    sorted_fisher: np.ndarray

    @classmethod
    def fit(cls, reference_simes: np.ndarray) -> InSampleLevels:
        """(N, L+1) float64 calibration Simes statistics."""
        sorted_simes = np.ascontiguousarray(np.sort(reference_simes, axis=0).T)
        return cls(
            sorted_simes, np.sort(_fisher_statistics(reference_simes, sorted_simes, len(reference_simes)))
        )

    @property
    def n(self) -> int:
        return int(self.sorted_fisher.shape[0])

    def p_values(self, simes: np.ndarray) -> np.ndarray:
        """(M, L+1) float64 -> (M,) float64: 1 − #(calibration Fisher statistics below f) / N."""
        below = _count_below_each(self.sorted_fisher, _fisher_statistics(simes, self.sorted_simes, self.n))
        return 1.0 - below / self.n


@dataclass(frozen=True)
class FullConformalLevels:
    """Levels 2 and 3 of the split calibration, full-conformal over half B: sorted_simes (L+1, K) float64,
    B's Simes statistics ascending per layer; reference_simes (K, L+1) the same per member;
    reference_logs (2, K, L+1) from _bag_logs; sorted_lowest, narrow, wide: each member's bounds on its
    bag Fisher statistic, arranged for _full_conformal_p_values."""

    sorted_simes: np.ndarray
    reference_simes: np.ndarray
    reference_logs: np.ndarray
    sorted_lowest: np.ndarray
    narrow: np.ndarray
    wide: np.ndarray

    @classmethod
    def fit(cls, reference_simes: np.ndarray) -> FullConformalLevels:
        """(K, L+1) float64 Simes statistics of half B against half A."""
        sorted_simes = np.ascontiguousarray(np.sort(reference_simes, axis=0).T)
        reference_simes = np.ascontiguousarray(reference_simes)
        below = _below_each_other(reference_simes, sorted_simes)
        logs = _bag_logs(below, len(reference_simes) + 1)
        lowest, highest = _bag_fisher_bounds(logs)
        # A member is computed only for test examples between its bounds; most bounds are close (one count
        # more in a layer moves its p2 by 1 / (K + 1)), those of members at a layer's extreme are far apart
        # (p2 = 0 against 1 / (K + 1)): the widest tenth is checked on its own, so that the walk down the
        # narrow ones stops soon after it starts.
        width = highest - lowest
        is_wide = width > np.quantile(width, WIDE_BOUNDS_QUANTILE)
        narrow_members = np.flatnonzero(~is_wide)
        narrow_members = narrow_members[np.argsort(lowest[narrow_members], kind="stable")]
        narrow = np.stack(
            [narrow_members, lowest[narrow_members], np.maximum.accumulate(highest[narrow_members])]
        ).astype(np.float64)
        wide_members = np.flatnonzero(is_wide)
        wide = np.stack([wide_members, lowest[wide_members], highest[wide_members]]).astype(np.float64)
        return cls(sorted_simes, reference_simes, logs, np.sort(lowest), narrow, wide)

    @property
    def n(self) -> int:
        return int(self.reference_simes.shape[0])

    def p_values(self, simes: np.ndarray) -> np.ndarray:
        """(M, L+1) float64 -> (M,) float64 full-conformal p-values, at least 1 / (K + 1)."""
        fisher = _fisher_statistics(simes, self.sorted_simes, self.n + 1)
        return _full_conformal_p_values(
            simes,
            fisher,
            self.reference_simes,
            self.reference_logs,
            self.sorted_lowest,
            self.narrow,
            self.wide,
        )


class MaSFCalibration:
    """Calibration signals reduced to what scoring needs; fit once, score many test sets.

    sorted_columns: (F, N1) float32, F = (L+1)·R, each feature's level-1 reference values ascending;
    level_1: _level_1_p_values(N1, R, conformal); levels: levels 2 and 3 (InSampleLevels or
    FullConformalLevels over N2 calibrating examples); method: "in-sample" or "split", seed: the split's
    seed (None in-sample); projection: the split's reduction to R features per layer (None: R = D);
    signal_shape: the signals' (L+1, D). N1 = N2 = N in-sample; |A| and |B| for split.
    """

    def __init__(
        self,
        sorted_columns: np.ndarray,
        level_1: tuple[np.ndarray, float],
        levels: InSampleLevels | FullConformalLevels,
        method: str,
        seed: int | None,
        projection: LayerProjection | None,
        signal_shape: tuple[int, int],
    ):
        self.sorted_columns = sorted_columns
        self.level_1 = level_1
        self.levels = levels
        self.method = method
        self.seed = seed
        self.projection = projection
        self.signal_shape = signal_shape

    @property
    def components(self) -> int:
        """Principal components per layer of the split's reduction; 0 when the signals are not reduced."""
        return 0 if self.projection is None else self.projection.components

    @property
    def n_level_1(self) -> int:
        """Examples of the level-1 reference (N in-sample, |A| for split)."""
        return int(self.sorted_columns.shape[1])

    @property
    def n_calibration(self) -> int:
        """Examples that calibrate levels 2 and 3 (N in-sample, |B| for split)."""
        return self.levels.n

    @property
    def p_value_floor(self) -> float:
        """The smallest p-value any test example can get: that of a Simes statistic below every calibrating
        one in every layer (the largest Fisher statistic). In-sample, a Simes statistic is 0 once a feature
        lies outside the calibration's range, and the floor is the share of calibration examples saturated
        at that statistic: with few calibration examples many are, and a floor above the test's level
        (0.05) means the test can never call an input out of distribution. Split: 1 / (|B| + 1)."""
        simes_zero = np.zeros((1, self.signal_shape[0]), dtype=np.float64)
        return float(self.levels.p_values(simes_zero)[0])

    def describe(self) -> dict:
        """JSON-ready: the method, its variant, the split's seed and reduction (components per layer, 0 =
        none), the reference sizes, the p-value floor."""
        return {
            "method": self.method,
            "variant": calibration_variant(self.method, self.components),
            "seed": self.seed,
            "components": self.components,
            "n_level_1": self.n_level_1,
            "n": self.n_calibration,
            "p_value_floor": self.p_value_floor,
        }

    @classmethod
    def fit(
        cls,
        calibration_signals: np.ndarray,
        method: str = "in-sample",
        seed: int = 0,
        components: int = DEFAULT_SPLIT_COMPONENTS,
    ) -> MaSFCalibration:
        """calibration_signals: (N, L+1, D) float32, N ≥ 20 (split: ≥ 40); method in CALIBRATION_METHODS;
        seed: which half is A, components: principal components per layer fitted on half A, 0 < components
        < min(D, |A|), or 0 for none (both split only)."""
        sets = reference_sets(calibration_signals, method, seed, components)
        sorted_columns = _sorted_feature_columns(sets.level_1)
        level_1 = _level_1_p_values(*sets.level_1.shape[::2], conformal=method == "split")
        reference_simes = _simes_statistics_dynamic(sets.calibrated, sorted_columns, level_1)
        levels = (FullConformalLevels if method == "split" else InSampleLevels).fit(reference_simes)
        return cls(
            sorted_columns, level_1, levels, sets.method, sets.seed, sets.projection, sets.signal_shape
        )

    def p_values(self, test_signals: np.ndarray) -> np.ndarray:
        """(N_test, L+1, D) float32 -> (N_test,) float64 right-sided MaSF p-values."""
        test = _check_test(test_signals, self.signal_shape, self.projection)
        return self.levels.p_values(_simes_statistics_dynamic(test, self.sorted_columns, self.level_1))


# -------------------------------------------------------------------------------------- NumPy references


def masf_oracle_p_values(
    calibration_signals: np.ndarray,
    test_signals: np.ndarray,
    method: str = "in-sample",
    seed: int = 0,
    components: int = DEFAULT_SPLIT_COMPONENTS,
) -> np.ndarray:
    """(N_cal, L+1, D), (N_test, L+1, D) float32 -> (N_test,) float64: method.md §6 level by level,
    every ECDF a direct count over the whole reference (O(N²) comparisons); split: each test example's
    bag is half B and itself, so each member's count gains 1 where the test example is below it."""
    sets = reference_sets(calibration_signals, method, seed, components)
    n_level_1, n_layers, hidden = sets.level_1.shape
    test = sets.test(test_signals)
    offset = int(method == "split")  # conformal level 1: (1 + m) / (N1 + 1)
    ranks = np.arange(1, hidden + 1)

    def simes_statistics(signal: np.ndarray) -> list[float]:
        """(L+1, D) -> L+1 Simes statistics of level-1 p-values against the level-1 reference."""
        below = np.count_nonzero(sets.level_1 < signal, axis=0)  # (L+1, D)
        numerators = np.sort(offset + np.minimum(below, n_level_1 - below), axis=1)
        scale = hidden / (n_level_1 + offset)  # p1 = numerator / (N1 + offset)
        return [float(scale * (numerators[layer] / ranks).min()) for layer in range(n_layers)]

    def counts_below(simes: list[float], reference: list[list[float]]) -> list[int]:
        return [sum(other[layer] < simes[layer] for other in reference) for layer in range(n_layers)]

    def fisher_statistic(counts: list[int], n: int) -> float:
        """Level 2 (p2 = min(b, n − b) / n per layer) and Fisher over the layers."""
        log_sum = 0.0
        for count in counts:
            log_sum += math.log(min(count, n - count) / n + FISHER_EPSILON)
        return -2.0 * log_sum

    reference_simes = [simes_statistics(signal) for signal in sets.calibrated]
    reference_counts = [counts_below(simes, reference_simes) for simes in reference_simes]
    n_reference = len(reference_simes)
    reference_fisher = [fisher_statistic(counts, n_reference) for counts in reference_counts]  # in-sample
    p_values = []
    for signal in test:
        simes = simes_statistics(signal)
        if method == "split":
            fisher = fisher_statistic(counts_below(simes, reference_simes), n_reference + 1)
            at_or_above = 1  # the test example itself
            for member, counts in zip(reference_simes, reference_counts, strict=True):
                bag_counts = [count + (simes[layer] < member[layer]) for layer, count in enumerate(counts)]
                at_or_above += fisher_statistic(bag_counts, n_reference + 1) >= fisher
            p_values.append(at_or_above / (n_reference + 1))
        else:
            fisher = fisher_statistic(counts_below(simes, reference_simes), n_reference)
            p_values.append(1.0 - sum(reference < fisher for reference in reference_fisher) / n_reference)
    return np.array(p_values, dtype=np.float64)


def masf_numpy_p_values(
    calibration_signals: np.ndarray,
    test_signals: np.ndarray,
    method: str = "in-sample",
    seed: int = 0,
    components: int = DEFAULT_SPLIT_COMPONENTS,
) -> np.ndarray:
    """(N_cal, L+1, D), (N_test, L+1, D) float32 -> (N_test,) float64; every ECDF by np.searchsorted, the
    split's reduction by NumPy too (project_numpy)."""
    sets = reference_sets(calibration_signals, method, seed, components, project_numpy)
    n_level_1, n_layers, hidden = sets.level_1.shape
    test = sets.test(test_signals)
    sorted_level_1 = np.sort(sets.level_1.reshape(n_level_1, -1), axis=0)  # (N1, F)
    offset = int(method == "split")  # conformal level 1: (1 + m) / (N1 + 1)
    ranks = np.arange(1, hidden + 1)
    libm_log = np.frompyfunc(math.log, 1, 1)  # the C library's log, as in the Numba kernel

    def simes_statistics(signals: np.ndarray) -> np.ndarray:
        """(M, L+1, D) -> (M, L+1) float64."""
        flat = signals.reshape(len(signals), -1)
        below = np.empty(flat.shape, dtype=np.int64)
        for feature in range(flat.shape[1]):
            below[:, feature] = np.searchsorted(sorted_level_1[:, feature], flat[:, feature], side="left")
        below = below.reshape(signals.shape)
        numerators = np.sort(offset + np.minimum(below, n_level_1 - below), axis=2)
        return (hidden / (n_level_1 + offset)) * (numerators / ranks).min(axis=2)

    reference_simes = simes_statistics(sets.calibrated)
    sorted_simes = np.sort(reference_simes, axis=0)  # (K, L+1)
    n_bag = len(reference_simes) + offset  # split: B and the test example

    def counts_below(simes: np.ndarray) -> np.ndarray:
        """(M, L+1) -> (M, L+1) int: reference statistics strictly below, per layer."""
        return np.stack(
            [
                np.searchsorted(sorted_simes[:, layer], simes[:, layer], side="left")
                for layer in range(n_layers)
            ],
            axis=1,
        )

    def layer_logs(counts: np.ndarray) -> np.ndarray:
        """Level-2 counts -> log(p2 + 1e-8), p2 = min(b, n − b) / n, n = n_bag."""
        return libm_log(np.minimum(counts, n_bag - counts) / n_bag + FISHER_EPSILON).astype(np.float64)

    def fisher_statistics(counts: np.ndarray) -> np.ndarray:
        """(M, L+1) level-2 counts -> (M,) float64."""
        log_sum = np.zeros(len(counts), dtype=np.float64)
        for layer in range(n_layers):  # sequential, in the kernel's order
            log_sum += layer_logs(counts[:, layer])
        return -2.0 * log_sum

    test_simes = simes_statistics(test)
    test_fisher = fisher_statistics(counts_below(test_simes))
    reference_counts = counts_below(reference_simes)
    if method == "in-sample":
        below = np.searchsorted(np.sort(fisher_statistics(reference_counts)), test_fisher, side="left")
        return 1.0 - below / len(reference_simes)
    logs = np.stack([layer_logs(reference_counts), layer_logs(reference_counts + 1)])  # (2, K, L+1)
    members = np.arange(len(reference_simes))
    p_values = np.empty(len(test), dtype=np.float64)
    for row, (simes, fisher) in enumerate(zip(test_simes, test_fisher, strict=True)):
        member_sum = np.zeros(len(members), dtype=np.float64)
        for layer in range(n_layers):
            member_sum += logs[(simes[layer] < reference_simes[:, layer]).astype(np.intp), members, layer]
        p_values[row] = (1 + np.count_nonzero(-2.0 * member_sum >= fisher)) / n_bag
    return p_values


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

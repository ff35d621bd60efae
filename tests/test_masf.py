"""MaSF statistics (docs/method.md §6): Numba kernels vs the counting oracle, calibration behaviour, summary,
errors."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from fmm_fast.core.errors import UserError
from fmm_fast.protocols.masf.reduction import LayerProjection, project_numpy
from fmm_fast.protocols.masf.statistic import (
    IN_DISTRIBUTION_LEVEL,
    KERNEL_BLOCK_ROWS,
    MaSFCalibration,
    _count_below_each,
    calibration_halves,
    calibration_variant,
    masf_numpy_p_values,
    masf_oracle_p_values,
    min_calibration_examples,
    reference_sets,
    split_components_for,
    summarize_p_values,
)

# (method, principal components per layer): in-sample, the split on the signals as they are, and the split
# reduced to half the hidden size (REDUCED, resolved per test: it must stay below the hidden size).
REDUCED = -1
CALIBRATIONS = [("in-sample", 0), ("split", 0), ("split", REDUCED)]
CALIBRATION_IDS = ["in-sample", "split", "split-pca"]


def components_for(components: int, hidden: int) -> int:
    """REDUCED -> hidden // 2 (at least 1); any other value as it is."""
    return max(hidden // 2, 1) if components == REDUCED else components


def tied_signals(rng: np.random.Generator, n: int, layers: int, hidden: int) -> np.ndarray:
    """(n, layers, hidden) float32 of small integers (many ties), with some -0.0 next to the 0.0 values."""
    signals = rng.integers(-2, 3, size=(n, layers, hidden)).astype(np.float32)
    signals[(signals == 0) & (rng.random(signals.shape) < 0.5)] = -0.0
    return signals


@pytest.mark.parametrize(("method", "components"), CALIBRATIONS, ids=CALIBRATION_IDS)
@pytest.mark.parametrize(
    ("n_calibration", "layers", "hidden", "n_fresh"),
    [(40, 1, 1, 9), (41, 3, 5, 40), (64, 2, 16, 33), (45, 2, 3, KERNEL_BLOCK_ROWS + 17)],
)
def test_kernels_and_numpy_match_oracle_exactly_on_tied_data(
    n_calibration, layers, hidden, n_fresh, method, components
):
    if components == REDUCED and hidden == 1:
        pytest.skip("one feature per layer: nothing to reduce")
    components = components_for(components, hidden)
    rng = np.random.default_rng(n_calibration * 1000 + hidden)
    calibration = tied_signals(rng, n_calibration, layers, hidden)
    calibration[:, 0, 0] = 1.0  # a constant feature: p1 = 0 for every calibration example
    # Fresh tied rows, exact copies of calibration rows, and values outside the calibration range.
    test = np.concatenate(
        [
            tied_signals(rng, n_fresh, layers, hidden),
            calibration[rng.integers(0, n_calibration, size=5)],
            calibration[:3] + np.float32(3.0),
            calibration[:3] - np.float32(3.0),
        ]
    )
    oracle = masf_oracle_p_values(calibration, test, method, seed=3, components=components)
    fit = MaSFCalibration.fit(calibration, method, seed=3, components=components)
    np.testing.assert_array_equal(fit.p_values(test), oracle)
    np.testing.assert_array_equal(
        masf_numpy_p_values(calibration, test, method, seed=3, components=components), oracle
    )
    # The oracle itself is a right-sided p-value on its grid: 1 − k/N in-sample, (1 + k)/(|B| + 1) split.
    grid = fit.n_calibration + (method == "split")
    assert np.all((oracle >= 0) & (oracle <= 1))
    np.testing.assert_allclose(oracle * grid, np.round(oracle * grid), atol=1e-9)


@pytest.mark.parametrize(("method", "components"), CALIBRATIONS, ids=CALIBRATION_IDS)
def test_kernels_match_oracle_on_continuous_data_with_repeated_calibration_values(method, components):
    components = components_for(components, 24)
    rng = np.random.default_rng(7)
    calibration = rng.standard_normal((50, 4, 24)).astype(np.float32)
    calibration[10:20] = calibration[0]  # ten identical calibration examples
    test = np.concatenate([rng.standard_normal((60, 4, 24)).astype(np.float32), calibration[::7]])
    calibration_fit = MaSFCalibration.fit(calibration, method, components=components)
    oracle = masf_oracle_p_values(calibration, test, method, components=components)
    np.testing.assert_array_equal(calibration_fit.p_values(test), oracle)
    np.testing.assert_array_equal(
        masf_numpy_p_values(calibration, test, method, components=components), oracle
    )
    # Reusing one fit for a second test set gives that set's oracle p-values too; float64 signals are
    # compared as float32 (before the reduction, in all three).
    second = rng.standard_normal((11, 4, 24)) * 2
    oracle = masf_oracle_p_values(calibration, second, method, components=components)
    np.testing.assert_array_equal(calibration_fit.p_values(second), oracle)
    np.testing.assert_array_equal(calibration_fit.p_values(second.astype(np.float32)), oracle)
    np.testing.assert_array_equal(
        masf_numpy_p_values(calibration, second, method, components=components), oracle
    )


@pytest.mark.parametrize("size", [1, 2, 3, 20, 33, 64])
def test_count_below_each_is_searchsorted_left(size):
    rng = np.random.default_rng(size)
    sorted_values = np.sort(rng.integers(0, 6, size=size)).astype(np.float64)
    queries = np.array([-1.0, 0.0, 0.5, 2.0, 3.0, 5.0, 6.0, *sorted_values])
    np.testing.assert_array_equal(
        _count_below_each(sorted_values, queries), np.searchsorted(sorted_values, queries, side="left")
    )


def exact_p_values(
    calibration: np.ndarray, test: np.ndarray, method: str = "in-sample", seed: int = 0, components: int = 0
) -> np.ndarray:
    """method.md §6 in exact rational arithmetic (fractions.Fraction) up to the Fisher sum: p1, s2 and p2 are
    Fractions, so mathematically equal statistics are equal; log takes float(p2), correctly rounded.
    split: p1 = (1 + m) / (|A| + 1), and levels 2-3 over the bag of half B and the test example, recomputed
    from scratch for every test example; components: the split's reduction (the same float32 projection)."""
    sets = reference_sets(calibration, method, seed, components)
    level_1, calibrated, test = sets.level_1, sets.calibrated, sets.test(test)
    n, hidden = len(level_1), level_1.shape[2]
    offset = int(method == "split")

    def simes(signal: np.ndarray) -> list[Fraction]:
        below = np.count_nonzero(level_1 < signal, axis=0)
        p1 = [sorted(Fraction(offset + int(min(k, n - k)), n + offset) for k in layer) for layer in below]
        return [min(hidden * p / rank for rank, p in enumerate(layer, start=1)) for layer in p1]

    def fisher(statistics: list[Fraction], reference: list[list[Fraction]]) -> float:
        log_sum = 0.0
        for layer, s2 in enumerate(statistics):
            below = sum(r[layer] < s2 for r in reference)
            log_sum += math.log(float(Fraction(min(below, len(reference) - below), len(reference))) + 1e-8)
        return -2.0 * log_sum

    calibrating = [simes(signal) for signal in calibrated]
    p_values = []
    for signal in test:
        statistics = simes(signal)
        if method == "split":
            bag = [*calibrating, statistics]
            f = fisher(statistics, bag)
            p_values.append(sum(fisher(member, bag) >= f for member in bag) / len(bag))
        else:
            reference_fisher = [fisher(member, calibrating) for member in calibrating]
            f = fisher(statistics, calibrating)
            p_values.append(1.0 - sum(r < f for r in reference_fisher) / len(calibrating))
    return np.array(p_values)


def float_product_p_values(calibration: np.ndarray, test: np.ndarray) -> np.ndarray:
    """In-sample MaSF with the shares as floats: p = min(k/N, 1 − k/N), s2 = min_i (D / i) · p_(i), as
    fmm-fast computed it before exact ties (the paper's code: the same in float32)."""
    n, _, hidden = calibration.shape

    def simes(signal: np.ndarray) -> np.ndarray:
        share = np.count_nonzero(calibration < signal, axis=0) / n
        return ((hidden / np.arange(1, hidden + 1)) * np.sort(np.minimum(share, 1.0 - share), axis=1)).min(
            axis=1
        )

    reference = [simes(signal) for signal in calibration]

    def fisher(statistics: np.ndarray) -> float:
        shares = [sum(r[layer] < s2 for r in reference) / n for layer, s2 in enumerate(statistics)]
        return -2.0 * sum(math.log(min(c, 1.0 - c) + 1e-8) for c in shares)

    reference_fisher = [fisher(r) for r in reference]
    return np.array([1.0 - sum(r < fisher(simes(signal)) for r in reference_fisher) / n for signal in test])


# 20 calibration examples of one layer, 4 features, example k = (k, k, k, k), except example 10 =
# (2.5, 2.5, 2.5, 10). Against it, TIE_TEST[0] has level-1 numerators m = (1, 9, 9, 10) and TIE_TEST[1]
# m = (3, 3, 3, 10): Simes (4/20) · 1/1 and (4/20) · 3/3, both 1/5, as are calibration examples 3 (4/4 at
# rank 4), 10 (3/3) and 16 (4/4, from k = 16 > N/2). Float products split these: 4 · (1/20) = 0.2 but
# (4/3) · (3/20) = 0.19999999999999998, and 1 − 16/20 = 0.19999999999999996.
TIE_CALIBRATION = np.repeat(np.arange(20, dtype=np.float32), 4).reshape(20, 1, 4)
TIE_CALIBRATION[10, 0, :3] = 2.5
TIE_TEST = np.array([[[0.5, 9.5, 9.5, 9.5]], [[2.5, 2.5, 2.5, 9.5]]], dtype=np.float32)


def test_exact_ties_mathematically_equal_simes_statistics_compare_equal():
    # Exact: 6 calibration Simes statistics are below 1/5 (0, 1/20 twice, 1/10 twice, 3/20), so p2 = 6/20 for
    # both test examples, and their Fisher statistics (hence p-values) are equal.
    exact = exact_p_values(TIE_CALIBRATION, TIE_TEST)
    np.testing.assert_array_equal(exact, [0.7, 0.7])
    for p_values in (
        MaSFCalibration.fit(TIE_CALIBRATION).p_values(TIE_TEST),
        masf_oracle_p_values(TIE_CALIBRATION, TIE_TEST),
        masf_numpy_p_values(TIE_CALIBRATION, TIE_TEST),
    ):
        np.testing.assert_array_equal(p_values, exact)
    # Float products break the tie: the two examples get different p-values, both off the exact one.
    np.testing.assert_allclose(
        float_product_p_values(TIE_CALIBRATION, TIE_TEST), [0.85, 0.75], rtol=0, atol=1e-12
    )


@pytest.mark.parametrize(("method", "components"), CALIBRATIONS, ids=CALIBRATION_IDS)
def test_kernels_match_exact_rational_arithmetic_on_tied_data(method, components):
    components = components_for(components, 6)
    rng = np.random.default_rng(13)
    calibration = tied_signals(rng, 60, 2, 6)
    test = np.concatenate([tied_signals(rng, 40, 2, 6), calibration[:10]])
    exact = exact_p_values(calibration, test, method, seed=1, components=components)
    fit = MaSFCalibration.fit(calibration, method, seed=1, components=components)
    np.testing.assert_array_equal(fit.p_values(test), exact)
    np.testing.assert_array_equal(masf_oracle_p_values(calibration, test, method, 1, components), exact)


def old_text_p_values(calibration: np.ndarray, test: np.ndarray) -> np.ndarray:
    """The earlier MaSF statistic, brute force: Fisher directly on the Simes statistics (no level-2
    calibration)."""
    n, _, hidden = calibration.shape

    def fisher(signal: np.ndarray) -> float:
        share = np.count_nonzero(calibration < signal, axis=0) / n
        feature_p = np.sort(np.minimum(share, 1.0 - share), axis=1)
        simes = ((hidden / np.arange(1, hidden + 1)) * feature_p).min(axis=1)
        return -2.0 * sum(math.log(s + 1e-8) for s in simes)

    reference = [fisher(signal) for signal in calibration]
    return np.array([1.0 - sum(r < fisher(signal) for r in reference) / n for signal in test])


# 32 calibration examples (so every k/32 and 1 − k/32 is exact and equal values tie exactly), one layer, two
# features, both equal to k for example k = 0..31; and four test examples.
HAND_CALIBRATION = np.repeat(np.arange(32, dtype=np.float32), 2).reshape(32, 1, 2)
HAND_TEST = np.array([[[31.5, 31.5]], [[23.5, 7.5]], [[23.5, 15.5]], [[15.5, 15.5]]], dtype=np.float32)


def test_hand_computed_p_values():
    # Calibration example k: both features have p1 = m / 32, m = min(k, 32 − k), so Simes s2 = m / 32.
    # Level 2: the s2 values are m = 0 once, 1..15 twice, 16 once; c2(m) = #(s2 < m/32) / 32 = (2m − 1) / 32
    # for m ≥ 1, and p2 = min(c2, 1 − c2): 0 (m = 0), 1/32 (m = 1, 16), 3/32 (m = 2, 15), ..., 15/32
    # (m = 8, 9): counts 1, 3, then 4 for each of 3/32..15/32. One layer: Fisher falls as p2 rises.
    expected = [
        # p1 = (0, 0), s2 = 0, p2 = 0: the largest Fisher value, tied with k = 0 (not strictly below).
        1 - 31 / 32,
        # p1 = (8/32, 8/32), s2 = 8/32, c2 = 15/32, p2 = 15/32: no calibration p2 above it.
        1.0,
        # p1 = (8/32, 16/32), s2 = min(2 · 8/32, 1 · 16/32) = 16/32, c2 = 31/32, p2 = 1/32: below it are the
        # 28 calibration examples with p2 ≥ 3/32. A Simes statistic too HIGH is out of distribution.
        1 - 28 / 32,
        # p1 = (16/32, 16/32), s2 = 16/32: as above.
        1 - 28 / 32,
    ]
    for p_values in (
        masf_oracle_p_values(HAND_CALIBRATION, HAND_TEST),
        masf_numpy_p_values(HAND_CALIBRATION, HAND_TEST),
        MaSFCalibration.fit(HAND_CALIBRATION).p_values(HAND_TEST),
    ):
        np.testing.assert_allclose(p_values, expected, rtol=0, atol=1e-12)


def test_old_text_without_level_2_calibration_gives_other_p_values():
    # The old text ranks by Simes alone: a high Simes statistic is never suspicious, so the last two tests
    # get p = 1 and the second 1 − 15/32 (calibration examples m = 9..16 have a higher Simes statistic).
    old = old_text_p_values(HAND_CALIBRATION, HAND_TEST)
    np.testing.assert_allclose(old, [1 - 31 / 32, 1 - 15 / 32, 1.0, 1.0], rtol=0, atol=1e-12)
    assert not np.allclose(old, MaSFCalibration.fit(HAND_CALIBRATION).p_values(HAND_TEST), rtol=0, atol=1e-12)
    # And on random Gaussian signals (the issue measured differences up to 0.83 on 60×3×4).
    rng = np.random.default_rng(11)
    calibration = rng.standard_normal((60, 3, 4)).astype(np.float32)
    test = rng.standard_normal((40, 3, 4)).astype(np.float32)
    difference = np.abs(old_text_p_values(calibration, test) - masf_oracle_p_values(calibration, test))
    assert difference.max() > 0.3


def test_calibration_scored_against_itself_is_roughly_uniform():
    rng = np.random.default_rng(0)
    calibration = rng.standard_normal((200, 3, 16)).astype(np.float32)
    p_values = MaSFCalibration.fit(calibration).p_values(calibration)
    # In-sample, p_i = 1 − (rank of example i's Fisher statistic) / N: uniform on the grid up to ties.
    assert stats.kstest(p_values, "uniform").pvalue > 0.01
    assert abs(p_values.mean() - 0.5) < 0.05
    assert summarize_p_values(p_values)["in_distribution"]


@pytest.mark.parametrize(("method", "components"), CALIBRATIONS, ids=CALIBRATION_IDS)
def test_shifted_test_set_is_out_of_distribution(method, components):
    rng = np.random.default_rng(1)
    calibration = rng.standard_normal((200, 3, 16)).astype(np.float32)
    shifted = rng.standard_normal((100, 3, 16)).astype(np.float32) + np.float32(3.0)
    fit = MaSFCalibration.fit(calibration, method, components=components_for(components, 16))
    p_values = fit.p_values(shifted)
    if components == 0:  # every feature of every layer far out: the largest statistic
        np.testing.assert_array_equal(p_values, fit.p_value_floor)
    assert fit.p_value_floor < 0.05
    summary = summarize_p_values(p_values)
    assert summary["simes"] < 0.05
    assert not summary["in_distribution"]
    assert summary["share_below"]["0.05"] == 1.0


def share_below_five_percent(method: str, seed: int) -> tuple[float, float, float]:
    """Fresh same-distribution rows (N_cal 1,000, 2,000 test, 4×16 Gaussian): share of p < 0.05, and the
    99.9% binomial interval of that share around 5%."""
    rng = np.random.default_rng(seed)
    calibration = rng.standard_normal((1000, 4, 16)).astype(np.float32)
    fresh = rng.standard_normal((2000, 4, 16)).astype(np.float32)
    p_values = MaSFCalibration.fit(calibration, method, seed=seed).p_values(fresh)
    low, high = stats.binom.ppf([0.0005, 0.9995], len(fresh), IN_DISTRIBUTION_LEVEL) / len(fresh)
    return float(np.mean(p_values < IN_DISTRIBUTION_LEVEL)), low, high


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng, n: rng.standard_normal((n, 3, 8)),
        lambda rng, n: np.abs(rng.standard_t(3, size=(n, 3, 8))),
    ],
    ids=["gaussian", "heavy-tailed"],
)
def test_split_calibration_is_a_valid_p_value(draw):
    # Validity is over the calibration draw too: for a fresh calibration set (60 rows, |B| = 30) and one
    # fresh row each time, P(p ≤ k / 31) = k / 31 up to ties (the bag of B and the row is exchangeable).
    # One row per draw makes the 2,000 outcomes independent, so a binomial interval applies.
    rng = np.random.default_rng(21)
    p_values = np.array(
        [
            MaSFCalibration.fit(draw(rng, 60), "split", seed=index, components=0).p_values(draw(rng, 1))[0]
            for index in range(2000)
        ]
    )
    for k in (1, 3, 6):
        low, high = stats.binom.ppf([0.0005, 0.9995], len(p_values), k / 31) / len(p_values)
        assert low <= np.mean(p_values <= k / 31 + 1e-12) <= high


def reduced_split_p_values(draw, fit_on_a_only: bool) -> np.ndarray:
    """2,000 independent draws of a 60-row calibration set (2 layers × 24 features, reduced to 20 principal
    components per layer) and one fresh row: the row's split p-value. fit_on_a_only False: the broken
    alternative that fits the reduction on all 60 calibration rows (A and B) but not on the fresh row."""
    rng = np.random.default_rng(21)
    p_values = []
    for index in range(2000):
        calibration, row = draw(rng, 60, 2, 24), draw(rng, 1, 2, 24)
        if fit_on_a_only:
            fit = MaSFCalibration.fit(calibration, "split", seed=index, components=20)
            p_values.append(fit.p_values(row)[0])
        else:
            projection = LayerProjection.fit(calibration.astype(np.float32), 20)
            fit = MaSFCalibration.fit(projection.apply(calibration), "split", seed=index, components=0)
            p_values.append(fit.p_values(projection.apply(row))[0])
    return np.array(p_values)


def valid_at(p_values: np.ndarray, k: int) -> bool:
    """P(p ≤ k / 31) is at most k / 31 (the 99.9% one-sided binomial bound) and not below half of it: the
    split's Fisher statistics tie often (few distinct level-2 counts), which only makes p conservative."""
    high = stats.binom.ppf(0.999, len(p_values), k / 31) / len(p_values)
    return k / 62 <= np.mean(p_values <= k / 31 + 1e-12) <= high


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng, *shape: rng.standard_normal(shape),
        lambda rng, *shape: np.abs(rng.standard_t(3, size=shape)),
    ],
    ids=["gaussian", "heavy-tailed"],
)
def test_reduced_split_calibration_is_valid_and_a_reduction_fitted_on_b_is_not(draw):
    # Fitted on half A only, the reduction is one fixed map for B and the fresh row: still exchangeable.
    valid = reduced_split_p_values(draw, fit_on_a_only=True)
    assert all(valid_at(valid, k) for k in (1, 3, 6))
    # Fitted on A and B, B's rows are in-sample for it and the fresh row is not: B's projections carry more
    # of their variance, and the fresh row is called out of distribution far too often. (A reduction fitted
    # symmetrically on B and the row together would stay valid; the product fits on A alone.)
    broken = reduced_split_p_values(draw, fit_on_a_only=False)
    assert not valid_at(broken, 1) and np.mean(broken <= 1 / 31) > 2 / 31


def test_reduction_is_fitted_on_half_a_only():
    rng = np.random.default_rng(8)
    calibration = rng.standard_normal((80, 3, 12)).astype(np.float32)
    half_a, half_b = calibration_halves(80, seed=5)
    fit = MaSFCalibration.fit(calibration, "split", seed=5, components=4)
    assert fit.projection is not None and fit.projection.axes.shape == (3, 12, 4)
    # Other rows in half B: the same projection, bit for bit (and other p-values: B calibrates levels 2-3).
    other_b = calibration.copy()
    other_b[half_b] = rng.standard_normal((len(half_b), 3, 12)).astype(np.float32) * 3
    refit = MaSFCalibration.fit(other_b, "split", seed=5, components=4)
    assert refit.projection is not None
    np.testing.assert_array_equal(refit.projection.mean, fit.projection.mean)
    np.testing.assert_array_equal(refit.projection.axes, fit.projection.axes)
    test = rng.standard_normal((30, 3, 12)).astype(np.float32)
    assert not np.array_equal(refit.p_values(test), fit.p_values(test))
    # Other rows in half A: another projection.
    other_a = calibration.copy()
    other_a[half_a[:5]] += np.float32(1.0)
    moved = MaSFCalibration.fit(other_a, "split", seed=5, components=4).projection
    assert moved is not None and not np.array_equal(moved.axes, fit.projection.axes)
    # The test rows never reach the fit, and a row projects (and scores) the same whatever shares its call.
    single = np.concatenate([fit.projection.apply(test[i : i + 1]) for i in range(len(test))])
    np.testing.assert_array_equal(fit.projection.apply(test), single)
    np.testing.assert_array_equal(
        fit.p_values(test), np.concatenate([fit.p_values(test[i : i + 1]) for i in range(len(test))])
    )
    # The first component of half A per layer: the direction of its largest variance (numpy's own SVD).
    centred = calibration[half_a].astype(np.float64) - calibration[half_a].astype(np.float64).mean(axis=0)
    for layer in range(3):
        top = np.linalg.svd(centred[:, layer], full_matrices=False)[2][0]
        np.testing.assert_allclose(np.abs(fit.projection.axes[layer, :, 0]), np.abs(top), atol=1e-12)


def test_in_sample_calibration_fails_the_validity_check():
    # The known property of the paper's calibration (docs/method.md §6): fresh examples score too low.
    share, _, high = share_below_five_percent("in-sample", 0)
    assert share > high


@pytest.mark.parametrize("components", [0, 4])
@pytest.mark.parametrize(
    "alter", [lambda s: s * np.float32(2.0), lambda s: s + np.float32(2.0)], ids=["scaled", "shifted"]
)
def test_split_calibration_flags_scaled_and_shifted_signals(alter, components):
    rng = np.random.default_rng(5)
    calibration = rng.standard_normal((1000, 4, 16)).astype(np.float32)
    altered = alter(rng.standard_normal((500, 4, 16)).astype(np.float32))
    p_values = MaSFCalibration.fit(calibration, "split", components=components).p_values(altered)
    assert np.mean(p_values < IN_DISTRIBUTION_LEVEL) > 0.9
    assert not summarize_p_values(p_values)["in_distribution"]


def test_split_is_seeded_and_recorded():
    rng = np.random.default_rng(4)
    calibration = rng.standard_normal((61, 2, 8)).astype(np.float32)
    half_a, half_b = calibration_halves(61, seed=9)
    assert len(half_a) == 30 and len(half_b) == 31
    assert sorted([*half_a, *half_b]) == list(range(61))
    np.testing.assert_array_equal(calibration_halves(61, seed=9)[0], half_a)
    assert not np.array_equal(calibration_halves(61, seed=10)[0], half_a)
    fit = MaSFCalibration.fit(calibration, "split", seed=9, components=3)
    described = fit.describe()
    assert {k: described[k] for k in ("method", "seed", "components", "n_level_1", "n")} == {
        "method": "split", "seed": 9, "components": 3, "n_level_1": 30, "n": 31,
    }  # fmt: skip
    assert (
        described["variant"]
        == calibration_variant("split", 3)
        == (
            "PCA 3 per layer fitted on half A; conformal level 1 on half A, full-conformal levels 2-3 on "
            "half B plus the test example"
        )
    )
    unreduced = MaSFCalibration.fit(calibration, "split", seed=9, components=0).describe()
    assert unreduced["components"] == 0 and unreduced["variant"] == calibration_variant("split", 0)
    assert not calibration_variant("split", 0).startswith("PCA")
    assert calibration_variant("split").startswith("PCA 32 per layer fitted on half A; ")  # the default
    in_sample = MaSFCalibration.fit(calibration).describe()
    assert (in_sample["seed"], in_sample["components"]) == (None, 0)
    assert in_sample["variant"] == calibration_variant("in-sample") != described["variant"]
    # The seed matters: another split scores the same test rows differently.
    test = rng.standard_normal((50, 2, 8)).astype(np.float32)
    assert not np.array_equal(
        fit.p_values(test), MaSFCalibration.fit(calibration, "split", seed=10, components=3).p_values(test)
    )


def test_summary_hand_computed():
    summary = summarize_p_values(np.array([0.01, 0.04, 0.03, 0.5]))
    # Sorted 0.01, 0.03, 0.04, 0.5 -> (4/1)·0.01, (4/2)·0.03, (4/3)·0.04, (4/4)·0.5 = 0.04, 0.06, 0.0533, 0.5.
    assert summary["simes"] == pytest.approx(0.04, abs=1e-15)
    assert summary["share_below"] == {"0.001": 0.0, "0.005": 0.0, "0.01": 0.0, "0.05": 0.75, "0.1": 0.75}
    assert summary["in_distribution"] is False
    assert summary["n"] == 4

    summary = summarize_p_values(np.array([0.9, 0.2, 0.6]))
    # 3 · 0.2, 1.5 · 0.6, 1 · 0.9 -> 0.6.
    assert summary["simes"] == pytest.approx(0.6, abs=1e-15)
    assert summary["share_below"]["0.1"] == 0.0
    assert summary["in_distribution"] is True


@pytest.mark.parametrize(
    ("method", "n", "message"),
    [
        ("in-sample", 19, "MaSF in-sample calibration needs at least 20 calibration examples, got 19"),
        (
            "split",
            39,
            r"MaSF split calibration needs at least 40 calibration examples \(20 per half\), got 39",
        ),
    ],
)
def test_too_few_calibration_examples(method, n, message):
    signals = np.zeros((n, 2, 3), dtype=np.float32)
    with pytest.raises(UserError, match=message + "; use a larger validation split"):
        MaSFCalibration.fit(signals, method)
    with pytest.raises(UserError, match=message):
        masf_oracle_p_values(signals, signals, method)
    MaSFCalibration.fit(np.zeros((n + 1, 2, 3), dtype=np.float32), method, components=0)  # one more is enough


@pytest.mark.parametrize(
    ("components", "message"),
    [
        (-1, r"--split-components must be 0 \(no reduction\) or positive, got -1$"),
        (32, "--split-components 32 must be below the hidden size 32 to reduce it; pass a smaller"),
        (40, "--split-components 40 must be below the hidden size 32"),
        (
            20,
            r"--split-components 20 needs more than 20 examples in half A, got 20 \(half A varies in at most "
            r"19 directions\); pass a smaller --split-components, or 0 for no reduction, or use a larger",
        ),
    ],
)
def test_bad_split_components_are_one_line_user_errors(components, message):
    signals = np.random.default_rng(0).standard_normal((40, 2, 32)).astype(np.float32)
    for call in (
        lambda: MaSFCalibration.fit(signals, "split", components=components),
        lambda: masf_numpy_p_values(signals, signals, "split", components=components),
        lambda: masf_oracle_p_values(signals, signals, "split", components=components),
    ):
        with pytest.raises(UserError, match=message) as raised:
            call()
        assert "\n" not in str(raised.value)
    MaSFCalibration.fit(signals, "split", components=19)  # |A| − 1 directions: fine
    MaSFCalibration.fit(signals, "in-sample", components=max(components, 0))  # the split's option only


@pytest.mark.parametrize(
    ("method", "components"),
    [
        ("in-sample", 0),
        ("in-sample", 32),
        ("split", 0),
        ("split", 5),
        ("split", 19),
        ("split", 20),
        ("split", 32),
    ],
)
def test_the_fewest_calibration_examples_are_accepted_and_one_fewer_is_not(method, components):
    """min_calibration_examples is check_calibration_size's own rule (the benches size calibrations by it)."""
    fewest = min_calibration_examples(method, components)
    signals = np.random.default_rng(1).standard_normal((fewest, 2, 48)).astype(np.float32)
    MaSFCalibration.fit(signals, method, components=components)
    with pytest.raises(UserError):
        MaSFCalibration.fit(signals[:-1], method, components=components)


@pytest.mark.parametrize(
    ("n_calibration", "hidden"), [(40, 48), (56, 48), (65, 48), (66, 48), (200, 48), (200, 20)]
)
def test_split_components_for_a_calibration_are_the_most_it_takes(n_calibration, hidden):
    components = split_components_for(n_calibration, hidden)
    assert components == min(32, n_calibration // 2 - 1, hidden - 1)  # the default where it fits
    signals = np.random.default_rng(2).standard_normal((n_calibration, 2, hidden)).astype(np.float32)
    MaSFCalibration.fit(signals, "split", components=components)
    if components < 32:  # one more would not fit
        with pytest.raises(UserError):
            MaSFCalibration.fit(signals, "split", components=components + 1)


def test_unknown_calibration_method_rejected():
    with pytest.raises(
        UserError, match="unknown MaSF calibration method 'conformal'; use one of in-sample, split"
    ):
        MaSFCalibration.fit(np.zeros((40, 2, 3), dtype=np.float32), "conformal")


def test_shape_mismatch_names_both_shapes():
    calibration_fit = MaSFCalibration.fit(np.zeros((20, 2, 3), dtype=np.float32))
    with pytest.raises(UserError, match=r"\(2, 4\).*\(2, 3\)"):
        calibration_fit.p_values(np.zeros((5, 2, 4), dtype=np.float32))
    with pytest.raises(UserError, match=r"\(3, 3\).*\(2, 3\)"):
        masf_numpy_p_values(np.zeros((20, 2, 3), dtype=np.float32), np.zeros((5, 3, 3), dtype=np.float32))


@pytest.mark.parametrize("bad", [np.zeros((20, 6)), np.zeros((20, 2, 3, 1)), np.zeros(20)])
def test_non_3d_signals_rejected(bad):
    with pytest.raises(UserError, match="3-D"):
        MaSFCalibration.fit(bad)
    calibration_fit = MaSFCalibration.fit(np.zeros((20, 2, 3), dtype=np.float32))
    with pytest.raises(UserError, match="3-D"):
        calibration_fit.p_values(bad)


def test_non_finite_signals_rejected():
    signals = np.zeros((20, 2, 3), dtype=np.float32)
    signals[4, 1, 2] = np.nan
    with pytest.raises(UserError, match="NaN or inf"):
        MaSFCalibration.fit(signals)


def test_summary_rejects_empty():
    with pytest.raises(UserError, match="non-empty 1-D"):
        summarize_p_values(np.array([]))


def test_fisher_epsilon_bounds_the_statistic():
    # One layer, one feature: a value above every calibration value has p1 = 0, Simes 0, p2 = 0 (no
    # calibration Simes statistic is below 0), Fisher = −2 log(1e-8).
    calibration = np.arange(20, dtype=np.float32).reshape(20, 1, 1)
    fit = MaSFCalibration.fit(calibration)
    assert fit.levels.sorted_fisher.max() == pytest.approx(-2 * math.log(1e-8))


def test_small_in_sample_calibration_saturates_and_reports_its_p_value_floor():
    # 60 examples of 7×384 features: most are some feature's extreme (p1 = 0) in every layer, so their
    # Simes statistic is 0, tied at the bottom of level 2 (p2 = 0), and their Fisher statistic sits at the
    # cap 7·(−2 log 1e-8): no test example can score below their share.
    rng = np.random.default_rng(2)
    calibration = rng.standard_normal((60, 7, 384)).astype(np.float32)
    fit = MaSFCalibration.fit(calibration)
    cap = 7 * -2 * math.log(1e-8)
    n_saturated = int(np.sum(np.isclose(fit.levels.sorted_fisher, cap)))
    assert fit.p_value_floor == pytest.approx(n_saturated / fit.n_calibration, abs=1e-15)
    assert fit.p_value_floor > 0.05
    far_away = calibration[:10] + np.float32(10.0)
    np.testing.assert_allclose(fit.p_values(far_away), fit.p_value_floor, rtol=0, atol=1e-15)
    assert summarize_p_values(fit.p_values(far_away))["in_distribution"]  # powerless: the floor says why


def test_small_split_calibration_does_not_saturate():
    # The same 60 examples: conformal level-1 p-values are never 0, so the Simes statistics of half B stay
    # apart (they count the extreme features), and the floor is 1 / (|B| + 1), reached far from the data.
    rng = np.random.default_rng(2)
    calibration = rng.standard_normal((60, 7, 384)).astype(np.float32)
    fit = MaSFCalibration.fit(calibration, "split", components=0)
    assert fit.p_value_floor == pytest.approx(1 / 31, abs=1e-15)
    far_away = calibration[:10] + np.float32(10.0)
    np.testing.assert_allclose(fit.p_values(far_away), 1 / 31, rtol=0, atol=1e-15)
    assert not summarize_p_values(fit.p_values(far_away))["in_distribution"]


@pytest.mark.parametrize(("method", "floor"), [("in-sample", 0.0), ("split", 1 / 201)])
def test_large_calibration_has_a_low_p_value_floor(method, floor):
    # In-sample, a test example beyond every calibration Fisher statistic gets p = 0; split's floor is
    # 1 / (|B| + 1) when no calibration example of B saturates.
    rng = np.random.default_rng(3)
    calibration = rng.standard_normal((400, 3, 16)).astype(np.float32)
    fit = MaSFCalibration.fit(calibration, method, components=0)
    assert fit.p_value_floor == pytest.approx(floor, abs=1e-15)
    np.testing.assert_allclose(fit.p_values(calibration[:5] + np.float32(10.0)), floor, rtol=0, atol=1e-15)


def test_compiled_projection_has_the_bits_of_the_numpy_one():
    # The split's reduction runs compiled in the product and in NumPy in masf_numpy_p_values: the same bits,
    # on signals with a wide range of magnitudes (where a fused multiply-add or reordering would show).
    rng = np.random.default_rng(21)
    half_a = (rng.standard_normal((60, 3, 40)) * np.exp(rng.normal(0, 3, (1, 3, 40)))).astype(np.float32)
    projection = LayerProjection.fit(half_a, 8)
    signals = (rng.standard_normal((50, 3, 40)) * 1e3).astype(np.float32)
    compiled = projection.apply(signals)
    np.testing.assert_array_equal(compiled, project_numpy(projection, signals))
    assert compiled.dtype == np.float32 and compiled.shape == (50, 3, 8) and np.ptp(compiled) > 0

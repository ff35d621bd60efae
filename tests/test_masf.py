"""MaSF statistics (SPEC §6): Numba kernels vs the counting oracle, calibration behaviour, summary, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fmm_fast.errors import UserError
from fmm_fast.masf import (
    KERNEL_BLOCK_ROWS,
    MaSFCalibration,
    _count_below_each,
    masf_numpy_p_values,
    masf_oracle_p_values,
    summarize_p_values,
)


def tied_signals(rng: np.random.Generator, n: int, layers: int, hidden: int) -> np.ndarray:
    """(n, layers, hidden) float32 of small integers (many ties), with some -0.0 next to the 0.0 values."""
    signals = rng.integers(-2, 3, size=(n, layers, hidden)).astype(np.float32)
    signals[(signals == 0) & (rng.random(signals.shape) < 0.5)] = -0.0
    return signals


@pytest.mark.parametrize(
    ("n_calibration", "layers", "hidden", "n_fresh"),
    [(20, 1, 1, 9), (37, 3, 5, 40), (64, 2, 16, 33), (25, 2, 3, KERNEL_BLOCK_ROWS + 17)],
)
def test_kernels_and_numpy_match_oracle_exactly_on_tied_data(n_calibration, layers, hidden, n_fresh):
    rng = np.random.default_rng(n_calibration * 1000 + hidden)
    calibration = tied_signals(rng, n_calibration, layers, hidden)
    # Fresh tied rows, exact copies of calibration rows, and values outside the calibration range.
    test = np.concatenate(
        [
            tied_signals(rng, n_fresh, layers, hidden),
            calibration[rng.integers(0, n_calibration, size=5)],
            calibration[:3] + np.float32(3.0),
            calibration[:3] - np.float32(3.0),
        ]
    )
    oracle = masf_oracle_p_values(calibration, test)
    np.testing.assert_array_equal(MaSFCalibration.fit(calibration).p_values(test), oracle)
    np.testing.assert_array_equal(masf_numpy_p_values(calibration, test), oracle)
    # The oracle itself is a right-sided ECDF p-value on the grid 1 - k/N.
    assert np.all((oracle >= 0) & (oracle <= 1))
    np.testing.assert_allclose(oracle * n_calibration, np.round(oracle * n_calibration), atol=1e-9)


def test_kernels_match_oracle_on_continuous_data_with_repeated_calibration_values():
    rng = np.random.default_rng(7)
    calibration = rng.standard_normal((50, 4, 24)).astype(np.float32)
    calibration[10:20] = calibration[0]  # ten identical calibration examples
    test = np.concatenate([rng.standard_normal((60, 4, 24)).astype(np.float32), calibration[::7]])
    calibration_fit = MaSFCalibration.fit(calibration)
    np.testing.assert_array_equal(calibration_fit.p_values(test), masf_oracle_p_values(calibration, test))
    # Reusing one fit for a second test set gives that set's oracle p-values too.
    second = rng.standard_normal((11, 4, 24)).astype(np.float32) * 2
    np.testing.assert_array_equal(calibration_fit.p_values(second), masf_oracle_p_values(calibration, second))


@pytest.mark.parametrize("size", [1, 2, 3, 20, 33, 64])
def test_count_below_each_is_searchsorted_left(size):
    rng = np.random.default_rng(size)
    sorted_values = np.sort(rng.integers(0, 6, size=size)).astype(np.float64)
    queries = np.array([-1.0, 0.0, 0.5, 2.0, 3.0, 5.0, 6.0, *sorted_values])
    np.testing.assert_array_equal(
        _count_below_each(sorted_values, queries), np.searchsorted(sorted_values, queries, side="left")
    )


def test_hand_computed_p_values():
    # 20 calibration examples, one layer, two features, both equal to k for example k = 0..19. Calibration
    # example k: both features have p = min(k, 20 - k) / 20 and Simes = min(2p, p) = p.
    calibration = np.repeat(np.arange(20, dtype=np.float32), 2).reshape(20, 1, 2)
    test = np.array([[[19.5, 19.5]], [[14.5, 4.5]], [[14.5, 9.5]], [[9.5, 9.5]]], dtype=np.float32)
    expected = [
        # p = (0, 0), Simes 0: the largest Fisher value, tied with calibration k = 0 (not strictly below).
        1 - 19 / 20,
        # p = (0.25, 0.25), Simes 0.25: calibration Fisher values below it are those with p > 0.25, k = 6..14.
        1 - 9 / 20,
        # p = (0.25, 0.5), Simes min(2 · 0.25, 1 · 0.5) = 0.5: no calibration example has p > 0.5.
        1.0,
        # p = (0.5, 0.5), Simes 0.5.
        1.0,
    ]
    np.testing.assert_allclose(masf_oracle_p_values(calibration, test), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(MaSFCalibration.fit(calibration).p_values(test), expected, rtol=0, atol=1e-12)


def test_calibration_scored_against_itself_is_roughly_uniform():
    rng = np.random.default_rng(0)
    calibration = rng.standard_normal((200, 3, 16)).astype(np.float32)
    p_values = MaSFCalibration.fit(calibration).p_values(calibration)
    # In-sample, p_i = 1 − (rank of example i's Fisher statistic) / N: uniform on the grid up to ties.
    assert stats.kstest(p_values, "uniform").pvalue > 0.01
    assert abs(p_values.mean() - 0.5) < 0.05
    assert summarize_p_values(p_values)["in_distribution"]


def test_shifted_test_set_is_out_of_distribution():
    rng = np.random.default_rng(1)
    calibration = rng.standard_normal((200, 3, 16)).astype(np.float32)
    shifted = rng.standard_normal((100, 3, 16)).astype(np.float32) + np.float32(3.0)
    p_values = MaSFCalibration.fit(calibration).p_values(shifted)
    assert p_values.max() <= 0.01
    summary = summarize_p_values(p_values)
    assert summary["simes"] < 0.05
    assert not summary["in_distribution"]
    assert summary["share_below"]["0.05"] == 1.0


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


def test_too_few_calibration_examples():
    signals = np.zeros((19, 2, 3), dtype=np.float32)
    message = "MaSF needs at least 20 calibration examples, got 19; use a larger validation split"
    with pytest.raises(UserError, match=message):
        MaSFCalibration.fit(signals)
    with pytest.raises(UserError, match=message):
        masf_oracle_p_values(signals, signals)


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
    # One layer, one feature: a value above every calibration value has p = 0, Fisher = −2 log(1e-8).
    calibration = np.arange(20, dtype=np.float32).reshape(20, 1, 1)
    fit = MaSFCalibration.fit(calibration)
    assert fit.sorted_fisher.max() == pytest.approx(-2 * math.log(1e-8))


def test_small_calibration_saturates_and_reports_its_p_value_floor():
    # 60 examples of 7×384 features: most are some feature's in-sample extreme in every layer, so their
    # Fisher statistic sits at the cap 7·(−2 log 1e-8) and no test example can score below their share.
    rng = np.random.default_rng(2)
    calibration = rng.standard_normal((60, 7, 384)).astype(np.float32)
    fit = MaSFCalibration.fit(calibration)
    cap = 7 * -2 * math.log(1e-8)
    saturated = float(np.mean(np.isclose(fit.sorted_fisher, cap)))
    assert fit.p_value_floor == pytest.approx(saturated) and fit.p_value_floor > 0.05
    far_away = calibration[:10] + np.float32(10.0)
    np.testing.assert_allclose(fit.p_values(far_away), fit.p_value_floor)
    assert summarize_p_values(fit.p_values(far_away))["in_distribution"]  # powerless: the floor says why


def test_large_calibration_has_a_low_p_value_floor():
    rng = np.random.default_rng(3)
    fit = MaSFCalibration.fit(rng.standard_normal((400, 3, 16)).astype(np.float32))
    assert fit.p_value_floor <= 0.01

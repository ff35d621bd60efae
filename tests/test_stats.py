"""ACU/RACU against hand-computed trapezoids, bootstrap against scipy, CI formatting, convergence."""

import math

import numpy as np
import pytest
import scipy.stats

from fmm_fast.protocols.curve_stats import (
    RATIOS,
    acu_racu,
    bootstrap_ci,
    converged,
    format_ci,
    proportion_interval,
)

# An 11-point baseline falling linearly from 0.9 to b(1) = 0.5: b(r) = 0.9 − 0.4 r.
# Its RACU denominator is ∫ (b(r) − b(1)) dr = ∫ 0.4 (1 − r) dr over [0, 1] = 0.2 (trapezoids are exact
# on a straight line).
LINEAR_BASELINE = 0.9 - 0.4 * RATIOS


def one(measure: np.ndarray, baseline: np.ndarray, ratios: np.ndarray = RATIOS) -> tuple[float, float]:
    acu, racu = acu_racu(measure[None, :], baseline[None, :], ratios)
    return float(acu[0]), float(racu[0])


def test_ratios_are_the_spec_grid():
    assert RATIOS.dtype == np.float64
    assert RATIOS.tolist() == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]


def test_three_point_trapezoid_by_hand():
    # ratios 0, 0.5, 1; b = 0.9, 0.7, 0.5; m = 0.9, 0.5, 0.5 -> b − m = 0, 0.2, 0.
    # ACU = ½(0 + 0.2)·0.5 + ½(0.2 + 0)·0.5 = 0.05 + 0.05 = 0.1
    # b − b(1) = 0.4, 0.2, 0 -> denominator = ½(0.4 + 0.2)·0.5 + ½(0.2 + 0)·0.5 = 0.15 + 0.05 = 0.2
    # RACU = 0.1 / 0.2 = 0.5
    acu, racu = one(np.array([0.9, 0.5, 0.5]), np.array([0.9, 0.7, 0.5]), np.array([0.0, 0.5, 1.0]))
    assert acu == pytest.approx(0.1, abs=1e-15)
    assert racu == pytest.approx(0.5, abs=1e-15)


def test_uneven_ratio_spacing_weights_by_width():
    # ratios 0, 0.2, 1; b = 1, 1, 0; m = 1, 0, 0 -> b − m = 0, 1, 0.
    # ACU = ½(0 + 1)·0.2 + ½(1 + 0)·0.8 = 0.1 + 0.4 = 0.5
    # b − b(1) = 1, 1, 0 -> denominator = ½(1 + 1)·0.2 + ½(1 + 0)·0.8 = 0.2 + 0.4 = 0.6; RACU = 5/6
    acu, racu = one(np.array([1.0, 0.0, 0.0]), np.array([1.0, 1.0, 0.0]), np.array([0.0, 0.2, 1.0]))
    assert acu == pytest.approx(0.5)
    assert racu == pytest.approx(5 / 6)


def test_eleven_point_immediate_drop_to_baseline_end():
    # m = 0.9 at r = 0, then b(1) = 0.5 from r = 0.1 on, so b − m = 0 at r = 0 and 0.4 (1 − r) after.
    # First interval [0, 0.1]: ½(0 + 0.4·0.9)·0.1 = 0.018.
    # Then [0.1, 1]: a straight line, exact: ∫ 0.4 (1 − r) dr = 0.2·0.9² = 0.162.  ACU = 0.18.
    # RACU = 0.18 / 0.2 = 0.9.
    measure = np.full(11, 0.5)
    measure[0] = 0.9
    acu, racu = one(measure, LINEAR_BASELINE)
    assert acu == pytest.approx(0.18)
    assert racu == pytest.approx(0.9)


def test_measure_equal_to_baseline_scores_zero():
    acu, racu = one(LINEAR_BASELINE.copy(), LINEAR_BASELINE)
    assert acu == 0.0
    assert racu == 0.0


def test_reverse_ranking_is_negative():
    # m stays at 0.9 until r = 1 (the least important tokens go first): b − m = −0.4 r for r < 1, 0 at r = 1.
    # [0, 0.9]: ∫ −0.4 r dr = −0.2·0.81 = −0.162; [0.9, 1]: ½(−0.36 + 0)·0.1 = −0.018.  ACU = −0.18.
    measure = np.full(11, 0.9)
    measure[-1] = 0.5
    acu, racu = one(measure, LINEAR_BASELINE)
    assert acu == pytest.approx(-0.18)
    assert racu == pytest.approx(-0.9)


def test_no_clipping_beyond_one():
    # A measure that falls below b(1) gives RACU > 1 (Recursive ROAR would have clipped it to 1).
    measure = np.full(11, 0.2)
    measure[0] = 0.9
    _, racu = one(measure, LINEAR_BASELINE)
    assert racu > 1.0


def test_flat_baseline_gives_nan_racu():
    flat = np.full(11, 0.7)
    acu, racu = one(np.full(11, 0.6), flat)
    assert acu == pytest.approx(0.1)
    assert math.isnan(racu)


def test_a_baseline_whose_rise_and_fall_cancel_is_flat_despite_rounding():
    """rand up 0.125 then down 0.125 encloses no area, but the ratios' unequal float widths (0.2 − 0.1 and
    0.3 − 0.2 differ in the last bit) leave a residue of about 1e-18: RACU is undefined, not 1e16."""
    baseline = np.full(11, 0.625)
    baseline[1:3] = 0.75, 0.5
    acu, racu = one(np.full(11, 0.5), baseline)
    assert acu == pytest.approx(0.125)
    assert math.isnan(racu)


def test_many_curves_at_once_equal_one_at_a_time_and_numpy_trapezoid():
    rng = np.random.default_rng(3)
    measures = rng.uniform(0, 1, size=(40, 11))
    baselines = rng.uniform(0, 1, size=(40, 11))
    acu, racu = acu_racu(measures, baselines, RATIOS)
    assert acu.shape == racu.shape == (40,)
    for k in range(40):
        single_acu, single_racu = one(measures[k], baselines[k])
        assert acu[k] == single_acu and racu[k] == single_racu
        expected_acu = np.trapezoid(baselines[k] - measures[k], RATIOS)
        expected_den = np.trapezoid(baselines[k] - baselines[k, -1], RATIOS)
        assert acu[k] == pytest.approx(expected_acu, rel=1e-12, abs=1e-14)
        assert racu[k] == pytest.approx(expected_acu / expected_den, rel=1e-10)


def test_shape_mismatches_are_rejected():
    with pytest.raises(ValueError, match="both be"):
        acu_racu(np.zeros((2, 11)), np.zeros((3, 11)), RATIOS)
    with pytest.raises(ValueError, match="ratios must be"):
        acu_racu(np.zeros((2, 11)), np.zeros((2, 11)), RATIOS[:5])
    with pytest.raises(ValueError, match="increasing"):
        acu_racu(np.zeros((1, 3)), np.zeros((1, 3)), np.array([0.0, 0.5, 0.5]))


@pytest.mark.parametrize(
    "values", [[0.5, 0.6, 0.7], [0.1, 0.2, 0.3, 0.9], [0.548, 0.531, 0.566, 0.512, 0.58], [-0.1, 0.3]]
)
def test_bootstrap_matches_scipy_bca(values):
    array = np.array(values)
    expected = scipy.stats.bootstrap((array,), np.mean, confidence_level=0.95, method="BCa", rng=0)
    mean, low, high = bootstrap_ci(array)
    assert mean == pytest.approx(np.mean(array))
    assert low == expected.confidence_interval.low
    assert high == expected.confidence_interval.high
    assert low <= mean <= high


def test_bootstrap_seed_and_confidence_are_passed_on():
    array = np.array([0.1, 0.2, 0.35, 0.4, 0.9])
    expected = scipy.stats.bootstrap((array,), np.mean, confidence_level=0.8, method="BCa", rng=7)
    _, low, high = bootstrap_ci(array, confidence=0.8, seed=7)
    assert (low, high) == (expected.confidence_interval.low, expected.confidence_interval.high)
    _, low95, high95 = bootstrap_ci(array, confidence=0.95, seed=7)
    assert low95 < low and high95 > high


def test_bootstrap_degenerate_inputs(recwarn):
    mean, low, high = bootstrap_ci(np.array([0.42]))
    assert mean == 0.42 and math.isnan(low) and math.isnan(high)
    assert bootstrap_ci(np.array([0.3, 0.3, 0.3])) == (0.3, 0.3, 0.3)
    mean, low, high = bootstrap_ci(np.array([0.3, math.nan, 0.5]))
    assert math.isnan(mean) and math.isnan(low) and math.isnan(high)
    assert not [w for w in recwarn if issubclass(w.category, scipy.stats.DegenerateDataWarning)]
    with pytest.raises(ValueError):
        bootstrap_ci(np.array([]))


@pytest.mark.parametrize(
    ("mean", "low", "high", "text"),
    [
        (0.549, 0.528, 0.567, "54.9 (−2.1/+1.8)"),
        (-0.122, -0.13, -0.10, "−12.2 (−0.8/+2.2)"),
        (1.873, 1.80, 1.95, "187.3 (−7.3/+7.7)"),
        (0.3, 0.3, 0.3, "30.0 (−0.0/+0.0)"),
        (0.549, math.nan, math.nan, "54.9"),
        (-0.0001, math.nan, math.nan, "0.0"),
        (math.nan, math.nan, math.nan, "n/a"),
        (0.5, 0.51, 0.6, "50.0 (+1.0/+10.0)"),  # an interval above the mean keeps its sign
    ],
)
def test_format_ci(mean, low, high, text):
    assert format_ci(mean, low, high) == text


@pytest.mark.parametrize(
    ("dataset", "unmasked", "expected"),
    [
        ("babi-2", 0.5, False),
        ("babi-2", 0.31, False),
        ("bAbI-1", 0.51, True),
        ("babi3", 0.4, False),
        ("sst2", 0.3, True),
        ("mnli", 0.5, True),
    ],
)
def test_converged(dataset, unmasked, expected):
    assert converged(dataset, unmasked) is expected


@pytest.mark.parametrize(
    ("proportion", "n", "expected"),
    [
        (0.5, 40, (0.3520, 0.6480)),
        (0.0, 10, (0.0, 0.2775)),  # Wilson's upper bound at 0 successes: z² / (n + z²)
        (0.4, 100, (0.3094, 0.4980)),
    ],
)
def test_proportion_interval(proportion, n, expected):
    assert proportion_interval(proportion, n) == pytest.approx(expected, abs=1e-4)

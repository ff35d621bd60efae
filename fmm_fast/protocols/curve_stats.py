"""ACU/RACU of erasure curves and their aggregation across seeds (docs/method.md §5)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numba
import numpy as np

from fmm_fast.measures.spec import BASELINE

# The masking ratios of method.md §4, rounded so that 0.3 is the float literal 0.3 (not 0.30000000000000004).
RATIOS: np.ndarray = np.round(np.arange(11) / 10, 1)

# A baseline area at most this far from 0 is flat: a rand curve of equal values can sum to a rounding
# residue (about 1e-18) instead of 0, and dividing by it gave RACUs of 1e16. A real area is at least the
# metric's step (1/examples) times a tenth of the ratio range: far above it.
FLAT_BASELINE_AREA = 1e-12

# docs/method.md §5: a bAbI model whose unmasked accuracy is at most this did not converge.
BABI_CONVERGENCE_THRESHOLD = 0.5


@numba.njit(cache=True)
def _acu_racu_kernel(
    measure_curves: np.ndarray, baseline_curves: np.ndarray, ratios: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    n_curves, n_ratios = measure_curves.shape
    acu = np.empty(n_curves)
    racu = np.empty(n_curves)
    for k in range(n_curves):
        baseline_end = baseline_curves[k, n_ratios - 1]
        area = 0.0
        baseline_area = 0.0
        for j in range(n_ratios - 1):
            width = ratios[j + 1] - ratios[j]
            gap_left = baseline_curves[k, j] - measure_curves[k, j]
            gap_right = baseline_curves[k, j + 1] - measure_curves[k, j + 1]
            area += 0.5 * (gap_left + gap_right) * width
            drop_left = baseline_curves[k, j] - baseline_end
            drop_right = baseline_curves[k, j + 1] - baseline_end
            baseline_area += 0.5 * (drop_left + drop_right) * width
        acu[k] = area
        # Explicit test: numba's Python error model would raise ZeroDivisionError instead of giving nan.
        racu[k] = area / baseline_area if abs(baseline_area) > FLAT_BASELINE_AREA else np.nan
    return acu, racu


def acu_racu(
    measure_curves: np.ndarray, baseline_curves: np.ndarray, ratios: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """ACU and RACU of many erasure curves at once, exactly as method.md §5 (trapezoid rule, no clipping).

    measure_curves:  (K, R) float64, the primary metric m(r) of K curves at the R ratios.
    baseline_curves: (K, R) float64, the matching `rand` curves b(r) (same row = same model/dataset/seed).
    ratios:          (R,) float64, strictly increasing masking ratios as fractions (normally RATIOS).

    Returns ACU (K,) float64 = ∫ (b − m) dr and RACU (K,) float64 = ACU / ∫ (b − b(1)) dr, where b(1) is
    the baseline at the last ratio. RACU is nan where that denominator is 0 up to rounding
    (|area| ≤ FLAT_BASELINE_AREA: a flat baseline, random masking did not change the metric, so no relative
    area exists).
    """
    measure_curves = np.ascontiguousarray(measure_curves, dtype=np.float64)
    baseline_curves = np.ascontiguousarray(baseline_curves, dtype=np.float64)
    ratios = np.ascontiguousarray(ratios, dtype=np.float64)
    if measure_curves.ndim != 2 or measure_curves.shape != baseline_curves.shape:
        raise ValueError(
            f"measure and baseline curves must both be (K, R); got {measure_curves.shape} and "
            f"{baseline_curves.shape}"
        )
    if ratios.ndim != 1 or len(ratios) != measure_curves.shape[1] or len(ratios) < 2:
        raise ValueError(f"ratios must be (R,) with R = {measure_curves.shape[1]} >= 2; got {ratios.shape}")
    if np.any(np.diff(ratios) <= 0):
        raise ValueError(f"ratios must be strictly increasing; got {ratios.tolist()}")
    return _acu_racu_kernel(measure_curves, baseline_curves, ratios)


def acu_racu_against_baseline(
    curves: Mapping[str, Sequence[float]], ratios: Sequence[float] = RATIOS
) -> dict[str, tuple[float, float]]:
    """(ACU, RACU) of every named curve against the curve named BASELINE (which gets ACU 0).

    curves: name -> (len(ratios),) the primary metric at each ratio; one of them is BASELINE's.
    RACU is nan where the baseline is flat (see acu_racu); a record keeps it through its non-finite rule.
    Every protocol that draws erasure curves (recursive erasure, the aopc protocol's ranking-once curve,
    Recursive ROAR's retrained curve) scores them here.
    """
    names = list(curves)
    if BASELINE not in curves:
        raise ValueError(f"the curves need the {BASELINE} baseline; got {names}")
    measure_curves = np.asarray([curves[name] for name in names], dtype=np.float64)
    baseline = np.repeat(measure_curves[names.index(BASELINE)][None, :], len(names), axis=0)
    acu, racu = acu_racu(measure_curves, baseline, np.asarray(ratios, dtype=np.float64))
    return {name: (float(acu[i]), float(racu[i])) for i, name in enumerate(names)}


def bootstrap_ci(values: np.ndarray, confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """Mean and BCa bootstrap confidence interval of the mean, as scipy.stats.bootstrap computes it.

    values: (n,) float64, one value per seed. Returns (mean, low, high).
    - one value: (v, nan, nan), an interval needs spread;
    - all values equal: (v, v, v) (scipy's BCa would divide by zero and warn);
    - any non-finite value: (mean, nan, nan), e.g. a nan RACU of a flat baseline;
    - scipy finding the data degenerate in other ways: its nan interval, without the warning.
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    if len(values) == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    mean = float(np.mean(values))
    if len(values) == 1 or not np.all(np.isfinite(values)):
        return mean, math.nan, math.nan
    if np.all(values == values[0]):
        return float(values[0]), float(values[0]), float(values[0])
    import scipy.stats  # a second of imports, for the commands that aggregate seeds (report) only

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        result = scipy.stats.bootstrap(
            (values,), np.mean, confidence_level=confidence, method="BCa", rng=seed
        )
    return mean, float(result.confidence_interval.low), float(result.confidence_interval.high)


def _signed(value: float, zero_sign: str) -> str:
    """One decimal with a unicode minus (docs/method.md §5); a value that rounds to 0 takes `zero_sign`."""
    text = f"{abs(value):.1f}"
    if text.strip("0.") == "":
        return zero_sign + text
    return ("−" if value < 0 else "+") + text


def format_ci(mean: float, low: float, high: float) -> str:
    """A mean and its CI ×100 with one decimal, offsets relative to the mean: "54.9 (−2.1/+1.8)".

    Negative numbers use the unicode minus "−" as method.md §5 writes them. A nan interval prints the mean
    alone ("54.9"); a nan mean prints "n/a".
    """
    if math.isnan(mean):
        return "n/a"
    mean_text = _signed(100 * mean, "").lstrip("+")
    if math.isnan(low) or math.isnan(high):
        return mean_text
    return f"{mean_text} ({_signed(100 * (low - mean), '−')}/{_signed(100 * (high - mean), '+')})"


def proportion_interval(proportion: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (e.g. accuracy) measured on n examples."""
    import scipy.stats  # a second of imports: not for the commands that never need an interval

    z = float(scipy.stats.norm.ppf(0.5 + confidence / 2))
    shrink = 1 + z * z / n
    center = (proportion + z * z / (2 * n)) / shrink
    half = z * math.sqrt(proportion * (1 - proportion) / n + z * z / (4 * n * n)) / shrink
    return center - half, center + half


def converged(dataset: str, unmasked_metric: float) -> bool:
    """False for a bAbI seed (dataset name starting with "babi") whose unmasked metric is <= 0.5.

    Such seeds are dropped before aggregation (docs/method.md §5); other datasets always count as converged.
    """
    return not (dataset.lower().startswith("babi") and unmasked_metric <= BABI_CONVERGENCE_THRESHOLD)

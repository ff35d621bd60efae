"""Benchmark the MaSF p-value implementations for both calibrations (method.md §6): Numba kernels vs NumPy
searchsorted vs the counting oracle.

    .venv/bin/python bench/bench_masf.py [--quick] [--sizes N_CAL N_TEST N_ORACLE] [--repeat N] [--json PATH]

Workload (method.md §6 sizes of a MiniLM-L6-like model): N_cal calibration signals and N_test test signals of
(L+1)×D = 7×384 features, standard-normal float32 with a fixed seed; goal: Numba ≥ 5× NumPy at N_cal 2,000
with 10,000 test rows (the default sizes). Each method is timed on fit + p-values, best of --repeat runs (the
machine may be shared; the best run is the least disturbed), for the in-sample and the split calibration.
The oracle runs on a subset of the test signals; its full-size time is extrapolated by rows scored (each
calibrating and test row costs the same comparisons against the level-1 reference), as the table says.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

from fmm_fast.protocols.masf.components import DEFAULT_SPLIT_COMPONENTS
from fmm_fast.protocols.masf.statistic import (
    CALIBRATION_METHODS,
    MaSFCalibration,
    masf_numpy_p_values,
    masf_oracle_p_values,
    min_calibration_examples,
)

LAYERS, HIDDEN = 7, 384
SEED = 0
GOAL_VS_NUMPY = 5.0
FULL_SIZES = (2_000, 10_000, 500)
# the fewest calibration signals both calibrations take (the split's half A must exceed its components)
SMALLEST_CALIBRATION = max(min_calibration_examples(method) for method in CALIBRATION_METHODS)
QUICK_SIZES = (SMALLEST_CALIBRATION, 40, 5)  # the split calibration costs most per test signal
IDENTICAL_LABELS = {True: "yes", False: "NO", None: "ref"}

PValueMethod = Callable[[np.ndarray, np.ndarray, str], np.ndarray]


def numba_p_values(calibration: np.ndarray, test: np.ndarray, method: str) -> np.ndarray:
    """(N_cal, L+1, D), (N_test, L+1, D) float32 -> (N_test,) float64 via MaSFCalibration."""
    return MaSFCalibration.fit(calibration, method).p_values(test)


def best_time(
    implementation: PValueMethod, calibration, test, method: str, repeat: int
) -> tuple[float, np.ndarray]:
    """Fastest wall time of `repeat` runs of implementation(calibration, test, method), and its p-values."""
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        p_values = implementation(calibration, test, method)
        seconds.append(time.perf_counter() - start)
    return min(seconds), p_values


def bench_calibration(method: str, calibration, test, n_oracle: int, repeat: int) -> dict:
    """One calibration method: the three implementations' times, rates and agreement with the oracle."""
    n_calibrating = len(calibration) if method == "in-sample" else len(calibration) - len(calibration) // 2
    numba_seconds, numba_p = best_time(numba_p_values, calibration, test, method, repeat)
    numpy_seconds, numpy_p = best_time(masf_numpy_p_values, calibration, test, method, repeat)
    subset_seconds, oracle_p = best_time(masf_oracle_p_values, calibration, test[:n_oracle], method, repeat)
    oracle_seconds = subset_seconds * (n_calibrating + len(test)) / (n_calibrating + n_oracle)
    rows = [
        ("numba", numba_seconds, numba_p),
        ("numpy searchsorted", numpy_seconds, numpy_p),
        (f"oracle (run on {n_oracle}, scaled by rows)", oracle_seconds, None),  # the reference itself
    ]
    return {
        "oracle_subset_seconds": subset_seconds,
        "speedup_numba_vs_numpy": numpy_seconds / numba_seconds,
        "goal_met": numpy_seconds / numba_seconds >= GOAL_VS_NUMPY,
        "methods": [
            {
                "method": name,
                "seconds": seconds,
                "signals_per_second": len(test) / seconds,
                "speedup_vs_oracle": oracle_seconds / seconds,
                "speedup_vs_numpy": numpy_seconds / seconds,
                "identical_output": None if p is None else bool(np.array_equal(p[:n_oracle], oracle_p)),
                "max_abs_difference": None if p is None else float(np.abs(p[:n_oracle] - oracle_p).max()),
            }
            for name, seconds, p in rows
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"N_cal {QUICK_SIZES[0]}, N_test {QUICK_SIZES[1]}, oracle {QUICK_SIZES[2]}",
    )
    parser.add_argument(
        "--sizes", nargs=3, type=int, metavar=("N_CAL", "N_TEST", "N_ORACLE"), help="explicit sizes"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per method; the best counts (default 3)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this path")
    args = parser.parse_args()
    n_calibration, n_test, n_oracle = args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)
    n_oracle = min(n_oracle, n_test)
    if n_calibration < SMALLEST_CALIBRATION:  # before any work
        parser.error(
            f"--sizes: N_CAL must be at least {SMALLEST_CALIBRATION} (the split calibration's half A above "
            f"its {DEFAULT_SPLIT_COMPONENTS} principal components per layer), got {n_calibration}"
        )

    rng = np.random.default_rng(SEED)
    calibration = rng.standard_normal((n_calibration, LAYERS, HIDDEN), dtype=np.float32)
    test = rng.standard_normal((n_test, LAYERS, HIDDEN), dtype=np.float32)

    for method in CALIBRATION_METHODS:  # warm-up: compile or load the cached kernels, on the fewest signals
        numba_p_values(calibration[:SMALLEST_CALIBRATION], test[:2], method)
    results = {
        "n_calibration": n_calibration,
        "n_test": n_test,
        "features": f"{LAYERS}x{HIDDEN}",
        "n_oracle_subset": n_oracle,
        "threads": numba.get_num_threads(),
        "repeat": args.repeat,
        "goal": f"numba >= {GOAL_VS_NUMPY:g}x numpy at N_cal 2000, N_test 10000",
        "goal_vs_numpy": GOAL_VS_NUMPY,
        "calibrations": {
            method: bench_calibration(method, calibration, test, n_oracle, args.repeat)
            for method in CALIBRATION_METHODS
        },
    }

    print(
        f"MaSF fit + p-values: N_cal={n_calibration}, N_test={n_test}, (L+1)xD={LAYERS}x{HIDDEN}, "
        f"numba threads={results['threads']}, best of {args.repeat}; identical = equal to the oracle on the "
        f"first {n_oracle} test signals"
    )
    header = (
        f"{'calibration':<11} {'method':<38} {'seconds':>9} {'signals/s':>11} {'vs oracle':>10} "
        f"{'vs numpy':>9} {'identical':>9}"
    )
    print(header)
    print("-" * len(header))
    for method, result in results["calibrations"].items():
        for row in result["methods"]:
            print(
                f"{method:<11} {row['method']:<38} {row['seconds']:>9.3f} {row['signals_per_second']:>11.0f} "
                f"{row['speedup_vs_oracle']:>9.1f}x {row['speedup_vs_numpy']:>8.1f}x "
                f"{IDENTICAL_LABELS[row['identical_output']]:>9}"
            )
    for method, result in results["calibrations"].items():
        verdict = "met" if result["goal_met"] else "NOT met"
        print(
            f"{method}: numba {result['speedup_numba_vs_numpy']:.1f}x numpy "
            f"(goal >= {GOAL_VS_NUMPY:g}x at 2000/10000: {verdict} at these sizes)"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""Benchmark the MaSF p-value implementations: Numba kernels vs NumPy searchsorted vs the counting oracle.

    .venv/bin/python bench/bench_masf.py [--quick] [--repeat N] [--json PATH]

Workload (SPEC §6 sizes of a MiniLM-L6-like model): N_cal calibration signals and N_test test signals of
(L+1)×D = 7×384 features, standard-normal float32 with a fixed seed. Each method is timed on fit +
p-values, best of --repeat runs (the machine may be shared; the best run is the least disturbed). The
oracle runs on a subset of the test signals; its full-size time is extrapolated by rows scored (each
calibration and test row costs the same N_cal·F comparisons), as the table says.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

from fmm_fast.masf import MaSFCalibration, masf_numpy_p_values, masf_oracle_p_values

LAYERS, HIDDEN = 7, 384
SEED = 0
IDENTICAL_LABELS = {True: "yes", False: "NO", None: "ref"}

PValueMethod = Callable[[np.ndarray, np.ndarray], np.ndarray]


def numba_p_values(calibration: np.ndarray, test: np.ndarray) -> np.ndarray:
    """(N_cal, L+1, D), (N_test, L+1, D) float32 -> (N_test,) float64 via MaSFCalibration."""
    return MaSFCalibration.fit(calibration).p_values(test)


def best_time(method: PValueMethod, calibration, test, repeat: int) -> tuple[float, np.ndarray]:
    """Fastest wall time of `repeat` runs of method(calibration, test), and its (N_test,) p-values."""
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        p_values = method(calibration, test)
        seconds.append(time.perf_counter() - start)
    return min(seconds), p_values


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes (N_cal 500, N_test 2,000, oracle 100)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per method; the best counts (default 3)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this path")
    args = parser.parse_args()
    n_calibration, n_test, n_oracle = (500, 2_000, 100) if args.quick else (2_000, 10_000, 500)

    rng = np.random.default_rng(SEED)
    calibration = rng.standard_normal((n_calibration, LAYERS, HIDDEN), dtype=np.float32)
    test = rng.standard_normal((n_test, LAYERS, HIDDEN), dtype=np.float32)
    subset = test[:n_oracle]

    numba_p_values(calibration[:20], subset[:2])  # warm-up: compile or load the cached kernels
    numba_seconds, numba_p = best_time(numba_p_values, calibration, test, args.repeat)
    numpy_seconds, numpy_p = best_time(masf_numpy_p_values, calibration, test, args.repeat)
    oracle_subset_seconds, oracle_p = best_time(masf_oracle_p_values, calibration, subset, args.repeat)
    oracle_seconds = oracle_subset_seconds * (n_calibration + n_test) / (n_calibration + n_oracle)

    rows = [
        ("numba", numba_seconds, bool(np.array_equal(numba_p[:n_oracle], oracle_p))),
        ("numpy searchsorted", numpy_seconds, bool(np.array_equal(numpy_p[:n_oracle], oracle_p))),
        (f"oracle (run on {n_oracle}, scaled by rows)", oracle_seconds, None),  # the reference itself
    ]
    results = {
        "n_calibration": n_calibration,
        "n_test": n_test,
        "features": f"{LAYERS}x{HIDDEN}",
        "n_oracle_subset": n_oracle,
        "oracle_subset_seconds": oracle_subset_seconds,
        "threads": numba.get_num_threads(),
        "repeat": args.repeat,
        "methods": [
            {
                "method": name,
                "seconds": seconds,
                "signals_per_second": n_test / seconds,
                "speedup_vs_oracle": oracle_seconds / seconds,
                "speedup_vs_numpy": numpy_seconds / seconds,
                "identical_output": identical,
            }
            for name, seconds, identical in rows
        ],
    }

    print(
        f"MaSF fit + p-values: N_cal={n_calibration}, N_test={n_test}, (L+1)xD={LAYERS}x{HIDDEN}, "
        f"numba threads={results['threads']}, best of {args.repeat}; identical = equal to the oracle on the "
        f"first {n_oracle} test signals"
    )
    header = (
        f"{'method':<38} {'seconds':>9} {'signals/s':>11} {'vs oracle':>10} {'vs numpy':>9} {'identical':>9}"
    )
    print(header)
    print("-" * len(header))
    for row in results["methods"]:
        print(
            f"{row['method']:<38} {row['seconds']:>9.3f} {row['signals_per_second']:>11.0f} "
            f"{row['speedup_vs_oracle']:>9.1f}x {row['speedup_vs_numpy']:>8.1f}x "
            f"{IDENTICAL_LABELS[row['identical_output']]:>9}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()

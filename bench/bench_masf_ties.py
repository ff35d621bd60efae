"""How far the paper's float32 arithmetic moves MaSF p-values from fmm-fast's exact ties (docs/method.md §6).

    .venv/bin/python bench/bench_masf_ties.py [--quick] [--repeats R] [--n-calibration N] [--n-test M]
                                              [--json PATH]

Workload: N calibration signals (default 917, movie-snippets' validation split) and M fresh and M shifted
test signals (default 300 each) of 7 × 384 heavy-tailed features (|Student t| with 3 degrees of freedom,
like per-layer maxima of hidden states), per repetition a new seed. Both sides are the in-sample calibration
(the paper's). The exact side is MaSFCalibration; the paper's side transcribes ecoroar/ood/masf_slow.py's
arithmetic: every share count / n cast to float32, min(p, 1 − p) and the Simes products (n / i) · p in
float32, the level-2 and level-3 ECDFs compare float32 values, Fisher sums float32 logarithms. Printed: the
largest and mean |Δp|, and how many verdicts at 0.05 differ, per test set. --quick: one repetition of the
fewest calibration signals the in-sample calibration takes and 10 test rows, to check that it runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from fmm_fast.protocols.masf.statistic import (
    FISHER_EPSILON,
    IN_DISTRIBUTION_LEVEL,
    MaSFCalibration,
    min_calibration_examples,
)

LAYERS, HIDDEN = 7, 384
SHIFT_SCALE = np.float32(1.1)  # the shifted test set: signals scaled by 10%
# by --quick: repetitions, calibration signals, test signals per test set
SIZES = {False: (6, 917, 300), True: (1, min_calibration_examples("in-sample"), 10)}


def heavy_tailed(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, LAYERS, HIDDEN) float32 |Student t(3)| values."""
    return np.abs(rng.standard_t(3, size=(n, LAYERS, HIDDEN))).astype(np.float32)


def float32_share(below: np.ndarray, n: int) -> np.ndarray:
    """Counts -> float32 shares, as the paper's _emerical_cdf_scan (counts / n, then cast)."""
    return (below / n).astype(np.float32)


def paper_float32_p_values(calibration: np.ndarray, test: np.ndarray) -> np.ndarray:
    """(N, L+1, D), (M, L+1, D) float32 -> (M,) float64: the paper's in-sample MaSF, float32 arithmetic."""
    n, n_layers, hidden = calibration.shape
    sorted_level_1 = np.sort(calibration.reshape(n, -1), axis=0)
    ratios = (hidden / np.arange(1, hidden + 1)).astype(np.float32)
    one = np.float32(1.0)

    def simes(signals: np.ndarray) -> np.ndarray:
        flat = signals.reshape(len(signals), -1)
        below = np.empty(flat.shape, dtype=np.int64)
        for feature in range(flat.shape[1]):
            below[:, feature] = np.searchsorted(sorted_level_1[:, feature], flat[:, feature], side="left")
        share = float32_share(below, n).reshape(signals.shape)
        return (np.sort(np.minimum(share, one - share), axis=2) * ratios).min(axis=2)  # (M, L+1) float32

    reference_simes = simes(calibration)
    sorted_simes = np.sort(reference_simes, axis=0)

    def fisher(statistics: np.ndarray) -> np.ndarray:
        log_sum = np.zeros(len(statistics), dtype=np.float32)
        for layer in range(n_layers):
            share = float32_share(
                np.searchsorted(sorted_simes[:, layer], statistics[:, layer], side="left"), n
            )
            log_sum += np.log(np.minimum(share, one - share) + np.float32(FISHER_EPSILON))
        return np.float32(-2.0) * log_sum

    sorted_fisher = np.sort(fisher(reference_simes))
    below = np.searchsorted(sorted_fisher, fisher(simes(test)), side="left")
    return (one - float32_share(below, n)).astype(np.float64)


def compare(exact: np.ndarray, paper: np.ndarray) -> dict:
    difference = np.abs(exact - paper)
    flips = (exact < IN_DISTRIBUTION_LEVEL) != (paper < IN_DISTRIBUTION_LEVEL)
    return {
        "max_abs_difference": float(difference.max()),
        "mean_abs_difference": float(difference.mean()),
        "verdict_flips_at_0.05": int(flips.sum()),
        "n": len(exact),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, help=f"default {SIZES[False][0]}")
    parser.add_argument("--n-calibration", type=int, help=f"default {SIZES[False][1]}")
    parser.add_argument("--n-test", type=int, help=f"default {SIZES[False][2]}")
    parser.add_argument("--quick", action="store_true", help="the smallest sizes: checks that it runs")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    defaults = SIZES[args.quick]
    args.repeats = args.repeats or defaults[0]
    args.n_calibration = args.n_calibration or defaults[1]
    args.n_test = args.n_test or defaults[2]
    rows = []
    print(
        f"in-sample MaSF, N={args.n_calibration} calibration, {args.n_test} fresh and {args.n_test} shifted "
        f"(x{SHIFT_SCALE:g}) test rows of {LAYERS}x{HIDDEN} |t(3)|: paper's float32 vs exact ties"
    )
    print(f"{'seed':>4} {'test set':<8} {'max |dp|':>9} {'mean |dp|':>10} {'flips':>6}")
    for seed in range(args.repeats):
        rng = np.random.default_rng(seed)
        calibration = heavy_tailed(rng, args.n_calibration)
        fit = MaSFCalibration.fit(calibration)
        for name, test in (
            ("fresh", heavy_tailed(rng, args.n_test)),
            ("shifted", heavy_tailed(rng, args.n_test) * SHIFT_SCALE),
        ):
            row = {
                "seed": seed,
                "test": name,
                **compare(fit.p_values(test), paper_float32_p_values(calibration, test)),
            }
            rows.append(row)
            print(
                f"{seed:>4} {name:<8} {row['max_abs_difference']:>9.4f} {row['mean_abs_difference']:>10.5f} "
                f"{row['verdict_flips_at_0.05']:>3}/{row['n']}"
            )
    largest = max(row["max_abs_difference"] for row in rows)
    print(f"largest |dp| over all: {largest:.4f}")
    if args.json:
        args.json.write_text(
            json.dumps({"arguments": vars(args) | {"json": str(args.json)}, "rows": rows}, indent=2) + "\n"
        )


if __name__ == "__main__":
    main()

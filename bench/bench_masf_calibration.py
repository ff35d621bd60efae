"""Which split calibration for MaSF: validity, p-value floor and power of candidate variants, measured.

    .venv/bin/python bench/bench_masf_calibration.py [--quick] [--variants NAME ...] [--repeats R]
        [--reproduction DIR --seeds S ...] [--cache DIR] [--json PATH]

e.g. the product's split calibration at r = 0, 16, 32, 64 principal components per layer on the movie-snippets
reproduction's three seeds:

    .venv/bin/python bench/bench_masf_calibration.py --variants split-r0 split-r16 split-r32 split-r64 \
        --reproduction /work/runs/masf/movie --seeds 0 1 2 --cache /work/runs/masf/signals --json OUT.json

Not a timing. The split calibration fits level 1 on a seeded half A of the calibration signals and calibrates
levels 2 and 3 on the other half B. Before this study its level-1 p-values were m / |A| (0 for a value outside
A's range), and with 7 × 384 features nearly every example of B has such a feature in every layer, so its
p-value floor was ≈ 0.2 at N ≈ 900. Candidates (VARIANTS):
  split-before        level 1 m / |A|; levels 2-3 of B in-sample (each member against all of B), level 3
                      conformal: p = (1 + #{f_B ≥ f}) / (|B| + 1);
  conformal-l1        level 1 conformal, (1 + m) / (|A| + 1), never 0; levels 2-3 as split-before;
  split-rR            the product's split calibration, MaSFCalibration.fit(..., "split", seed, components=R):
                      R principal components per layer fitted on half A (R = 0: none), level 1 conformal,
                      levels 2-3 full-conformal over the bag B ∪ {test example} (exactly exchangeable, so
                      valid); split-r0 is the split without the reduction;
  cross-conformal-K   every calibration example at level 1: K folds, each calibrated as split-r0 against
                      the other K − 1 folds, p = (1 + Σ_folds #{f_fold ≥ f}) / (N + 1);
  pca32-split-before  split-before on the product's reduction to 32 principal components per layer.
Measured:
  validity  share of p < 0.05 on fresh same-distribution rows, mean over --repeats calibration draws:
            synthetic N = 917 calibration and 1,000 fresh rows of 7 × 384 Gaussian and |t(3)| features;
            with --reproduction, each model's real validation signals split in two random halves
            (calibrate on one, score the other);
  floor     the p-value of a row far outside the data (synthetic; and each model's whole validation split);
  power     with --reproduction: each model calibrated on its whole validation split (split seed 0, as
            `fmm-fast masf` by default), the Simes summary of the 150 test sentences' p-values per masking
            ratio (in distribution if > 0.05), beside the in-sample calibration's. Goal: the plain model
            flagged at every ratio ≥ 0.8 where in-sample flags it, the masked model in distribution at every
            ratio ≤ 0.8 (printed per variant as "goals").
--reproduction DIR is a `bench/reproduce --scale small --datasets movie-snippets --masf-only` folder
(its onnx/movie-snippets-{plain,masked}-seed-S.onnx); the signals are computed as `fmm-fast masf` computes
them (protocols.masf.run.masf_signals) and cached in --cache.
--quick: one draw of the fewest calibration signals QUICK_VARIANTS (one of each kind) take, and 20 fresh
rows, to check that it runs; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fmm_fast.protocols.masf.reduction import LayerProjection
from fmm_fast.protocols.masf.statistic import (
    IN_DISTRIBUTION_LEVEL,
    FullConformalLevels,
    MaSFCalibration,
    _level_1_p_values,
    _simes_statistics_dynamic,
    _sorted_feature_columns,
    calibration_halves,
    min_calibration_examples,
    summarize_p_values,
)

LAYERS, HIDDEN = 7, 384
PCA_BEFORE = 32  # pca32-split-before's principal components per layer
QUICK_COMPONENTS = 16  # --quick's product split reduction
QUICK_VARIANTS = (
    "split-before",
    "conformal-l1",
    "split-r0",
    f"split-r{QUICK_COMPONENTS}",
    "cross-conformal-2",
    "pca32-split-before",
)  # one of each kind
# synthetic calibration and fresh rows; --quick: the fewest that every quick variant's half A takes
SIZES = {False: (917, 1000), True: (min_calibration_examples("split", max(QUICK_COMPONENTS, PCA_BEFORE)), 20)}
FAR_AWAY = np.float32(1e6)
RATIOS_CHECKED = tuple(f"{0.1 * j:.1f}" for j in range(11))
POWER_SPLIT_SEED = 0  # `fmm-fast masf --calibration-seed`'s default: the halves the README's tables used
FLAGGED_FROM, IN_DISTRIBUTION_UP_TO = 0.8, 0.8  # the power goals' ratios

Variant = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


def simes_against(level_1: np.ndarray, signals: np.ndarray, conformal: bool) -> np.ndarray:
    """(N1, L+1, D) level-1 reference, (M, L+1, D) -> (M, L+1) Simes statistics (the package's kernel)."""
    columns = _sorted_feature_columns(np.ascontiguousarray(level_1))
    level = _level_1_p_values(level_1.shape[0], level_1.shape[2], conformal)
    return _simes_statistics_dynamic(np.ascontiguousarray(signals), columns, level)


def in_sample_b_p_values(simes_b: np.ndarray, simes_test: np.ndarray) -> np.ndarray:
    """split-before's levels 2-3: B's members against all of B, the test against B, conformal level 3."""
    sorted_b = np.sort(simes_b, axis=0)
    n = len(simes_b)

    def fisher(simes: np.ndarray) -> np.ndarray:
        counts = np.stack([np.searchsorted(sorted_b[:, i], simes[:, i]) for i in range(simes.shape[1])], 1)
        return -2.0 * np.log(np.minimum(counts, n - counts) / n + 1e-8).sum(axis=1)

    fisher_b = np.sort(fisher(simes_b))
    at_or_above = n - np.searchsorted(fisher_b, fisher(simes_test), side="left")
    return (1 + at_or_above) / (n + 1)


def halves(calibration: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    half_a, half_b = calibration_halves(len(calibration), seed)
    return calibration[half_a], calibration[half_b]


def split_before(calibration: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
    a, b = halves(calibration, seed)
    return in_sample_b_p_values(simes_against(a, b, False), simes_against(a, test, False))


def conformal_l1(calibration: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
    a, b = halves(calibration, seed)
    return in_sample_b_p_values(simes_against(a, b, True), simes_against(a, test, True))


def product_split(components: int) -> Variant:
    def variant(calibration: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
        return MaSFCalibration.fit(calibration, "split", seed, components).p_values(test)

    return variant


def cross_conformal(folds: int) -> Variant:
    def variant(calibration: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
        order = np.random.default_rng(seed).permutation(len(calibration))
        at_or_above = np.zeros(len(test), dtype=np.int64)
        for fold in np.array_split(order, folds):
            rest = calibration[np.setdiff1d(order, fold)]
            levels = FullConformalLevels.fit(simes_against(rest, calibration[fold], True))
            p_values = levels.p_values(simes_against(rest, test, True))
            at_or_above += np.rint(p_values * (len(fold) + 1)).astype(np.int64) - 1  # the test itself out
        return (1 + at_or_above) / (len(calibration) + 1)

    return variant


def pca32_split_before(calibration: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
    a, b = halves(calibration, seed)
    projection = LayerProjection.fit(a, PCA_BEFORE)
    a, b, test = (projection.apply(x) for x in (a, b, test))
    return in_sample_b_p_values(simes_against(a, b, False), simes_against(a, test, False))


VARIANTS: dict[str, Variant] = {
    "split-before": split_before,
    "conformal-l1": conformal_l1,
    **{f"split-r{components}": product_split(components) for components in (0, 8, 16, 32, 64, 128)},
    "cross-conformal-2": cross_conformal(2),
    "cross-conformal-5": cross_conformal(5),
    "pca32-split-before": pca32_split_before,
}


def floor(variant: Variant, calibration: np.ndarray, seed: int) -> float:
    """The p-value of one row far outside the data in every feature."""
    return float(variant(calibration, np.full((1, *calibration.shape[1:]), FAR_AWAY), seed)[0])


def synthetic(kind: str, rng: np.random.Generator, n: int) -> np.ndarray:
    if kind == "gaussian":
        return rng.standard_normal((n, LAYERS, HIDDEN), dtype=np.float32)
    return np.abs(rng.standard_t(3, size=(n, LAYERS, HIDDEN))).astype(np.float32)


def synthetic_validity(variant: Variant, kind: str, repeats: int, sizes: tuple[int, int]) -> dict:
    """sizes: synthetic calibration and fresh rows."""
    shares, floors = [], []
    for repeat in range(repeats):
        rng = np.random.default_rng(1000 + repeat)
        calibration, fresh = synthetic(kind, rng, sizes[0]), synthetic(kind, rng, sizes[1])
        shares.append(float(np.mean(variant(calibration, fresh, repeat) < IN_DISTRIBUTION_LEVEL)))
        floors.append(floor(variant, calibration, repeat))
    return {
        "share_below_0.05": float(np.mean(shares)),
        "per_repeat": shares,
        "floor": float(np.median(floors)),
    }


def real_validity(variant: Variant, validation: np.ndarray, repeats: int) -> dict:
    """Random halves of the validation signals: calibrate on one, the share of p < 0.05 on the other."""
    shares = []
    for repeat in range(repeats):
        order = np.random.default_rng(2000 + repeat).permutation(len(validation))
        calibration, fresh = validation[order[: len(order) // 2]], validation[order[len(order) // 2 :]]
        shares.append(float(np.mean(variant(calibration, fresh, repeat) < IN_DISTRIBUTION_LEVEL)))
    return {"share_below_0.05": float(np.mean(shares)), "per_repeat": shares}


def model_signals(onnx: Path, seed: int, cache: Path) -> dict[str, np.ndarray]:
    """{"validation": (N, L+1, D), "0.0": ..., "1.0": (150, L+1, D)} float32, as `fmm-fast masf` computes
    them for the reproduction's MaSF step (movie-snippets, test size 300, the first 150 sentences)."""
    path = cache / f"{onnx.stem}.npz"
    if path.is_file():
        return dict(np.load(path))
    from fmm_fast.backends.engine import MaskBatchEngine
    from fmm_fast.backends.loading import load_model
    from fmm_fast.core.settings import MasfSettings
    from fmm_fast.data.options import DataOptions
    from fmm_fast.protocols.masf.run import masf_inputs, masf_signals

    settings = MasfSettings((str(onnx),), DataOptions("movie-snippets", test_size=300, limit=150), seed)
    loaded = load_model(onnx, settings.backend)
    engine = MaskBatchEngine(loaded.backend, token_budget=settings.engine.token_budget, cache_rows=0)
    validation, test_sets = masf_signals(masf_inputs(loaded, settings), engine)
    signals = {"validation": validation, **{f"{ratio:.1f}": s for ratio, s in test_sets}}
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, **signals)
    return signals


def power(variant: Variant | None, signals: dict[str, np.ndarray]) -> dict[str, float]:
    """Simes summary of the test p-values per ratio, calibrated on the whole validation split (None: the
    in-sample calibration)."""
    simes = {}
    for ratio in RATIOS_CHECKED:
        if variant is None:
            p_values = MaSFCalibration.fit(signals["validation"]).p_values(signals[ratio])
        else:
            p_values = variant(signals["validation"], signals[ratio], POWER_SPLIT_SEED)
        simes[ratio] = summarize_p_values(p_values)["simes"]
    return simes


def power_goals(row: dict, in_sample: dict, seeds: list[int]) -> dict[str, bool]:
    """Per seed: plain flagged (Simes ≤ 0.05) at every ratio ≥ 0.8 where in-sample flags it; masked in
    distribution (Simes > 0.05) at every ratio ≤ 0.8."""
    goals = {}
    for seed in seeds:
        plain, masked = f"plain seed {seed}", f"masked seed {seed}"
        goals[f"plain flagged seed {seed}"] = all(
            row[plain]["power"][ratio] <= IN_DISTRIBUTION_LEVEL
            for ratio, simes in in_sample[plain]["power"].items()
            if float(ratio) >= FLAGGED_FROM and simes <= IN_DISTRIBUTION_LEVEL
        )
        goals[f"masked in distribution seed {seed}"] = all(
            simes > IN_DISTRIBUTION_LEVEL
            for ratio, simes in row[masked]["power"].items()
            if float(ratio) <= IN_DISTRIBUTION_UP_TO
        )
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--variants", nargs="+", choices=sorted(VARIANTS), help="default: all (--quick: a few)"
    )
    parser.add_argument(
        "--repeats", type=int, help="calibration draws per validity figure (default 6, --quick 1)"
    )
    parser.add_argument("--quick", action="store_true", help="a few variants, few signals, one draw")
    parser.add_argument("--synthetic", nargs="*", default=["gaussian", "heavy-tailed"])
    parser.add_argument("--reproduction", type=Path, help="a bench/reproduce --masf-only folder")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--cache", type=Path, default=Path("bench/results/masf-calibration-signals"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.variants = args.variants or list(QUICK_VARIANTS if args.quick else VARIANTS)
    args.repeats = args.repeats or (1 if args.quick else 6)
    results: dict = {"arguments": {k: str(v) for k, v in vars(args).items()}, "variants": {}}
    models = {}
    if args.reproduction:
        for seed in args.seeds:
            for strategy in ("plain", "masked"):
                onnx = args.reproduction / "onnx" / f"movie-snippets-{strategy}-seed-{seed}.onnx"
                models[f"{strategy} seed {seed}"] = (model_signals(onnx, seed, args.cache), seed)
        results["in-sample"] = {
            name: {
                "power": power(None, signals),
                "floor": MaSFCalibration.fit(signals["validation"]).p_value_floor,
            }
            for name, (signals, seed) in models.items()
        }
        for name, figures in results["in-sample"].items():
            print(f"in-sample  {name:<15} floor {figures['floor']:.4f}  Simes {_ratios(figures['power'])}")
    for name in args.variants:
        variant = VARIANTS[name]
        row: dict = {
            kind: synthetic_validity(variant, kind, args.repeats, SIZES[args.quick])
            for kind in args.synthetic
        }
        for kind in args.synthetic:
            print(
                f"{name:<19} {kind:<12} share p<0.05 {row[kind]['share_below_0.05']:.4f} "
                f"(per draw {np.round(row[kind]['per_repeat'], 3).tolist()})  floor {row[kind]['floor']:.4f}",
                flush=True,
            )
        for model, (signals, _) in models.items():
            row[model] = {
                **real_validity(variant, signals["validation"], args.repeats),
                "floor": floor(variant, signals["validation"], POWER_SPLIT_SEED),
                "power": power(variant, signals),
            }
            figures = row[model]
            print(
                f"{name:<19} {model:<15} share p<0.05 {figures['share_below_0.05']:.4f}  floor "
                f"{figures['floor']:.4f}  Simes per ratio {_ratios(figures['power'])}",
                flush=True,
            )
        if models:
            row["goals"] = power_goals(row, results["in-sample"], args.seeds)
            print(f"{name:<19} goals {row['goals']}", flush=True)
        results["variants"][name] = row
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def _ratios(simes: dict[str, float]) -> str:
    return " ".join(f"{ratio}:{value:.3g}" for ratio, value in simes.items())


if __name__ == "__main__":
    main()

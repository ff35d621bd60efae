"""MaSF on a model (SPEC §6): calibrate on validation data masked as in training, score masked test sets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from fmm_fast.engine import DEFAULT_TOKEN_BUDGET, MaskBatchEngine
from fmm_fast.errors import UserError
from fmm_fast.loading import LoadedModel
from fmm_fast.masf import MaSFCalibration, check_calibration_method, summarize_p_values
from fmm_fast.masking import STRATEGIES, mask_explained_share, random_masking
from fmm_fast.pipeline import DataOptions, open_split
from fmm_fast.stats import RATIOS
from fmm_fast.types import load_ragged


def calibration_strategy(strategy: str) -> str:
    """Calibrate the way the model was trained; a model of unknown recipe is calibrated unmasked."""
    return strategy if strategy in STRATEGIES else "plain"


def masked_test_sets(
    test_ids: list[np.ndarray], encoded_test, mask_id: int, seed: int, masked_dir: Path | None
) -> dict[float, list[np.ndarray]]:
    """Test sets per masking ratio: random masking of explained tokens, or those an evaluation saved."""
    if masked_dir is None:
        return {
            float(r): mask_explained_share(encoded_test, float(r), mask_id, seed + j)
            for j, r in enumerate(RATIOS)
        }
    sets = {0.0: test_ids}
    for r in RATIOS[1:]:
        path = masked_dir / f"ratio-{r:.1f}.npz"
        if not path.is_file():
            raise UserError(f"no saved masked test set {path}; run `fmm-fast evaluate --save-masked` first")
        sets[float(r)], _ = load_ragged(path)
        if len(sets[float(r)]) != len(test_ids):
            raise UserError(
                f"{path} has {len(sets[float(r)])} examples but the test split has {len(test_ids)}; "
                "use the same --dataset/--limit as the evaluation"
            )
    return sets


def run_masf(
    loaded: LoadedModel,
    data: DataOptions,
    seed: int = 0,
    masked_dir: Path | None = None,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    progress=None,
    calibrations: Sequence[str] = ("in-sample",),
    calibration_seed: int = 0,
) -> dict[str, dict]:
    """Per-ratio Simes summaries and per-example p-values of one model, per calibration method (SPEC §6).

    Every method scores the same signals (one forward pass per example and set); calibration_seed picks
    the split's halves. Returns {method: JSON-ready dict}.
    """
    for method in calibrations:
        check_calibration_method(method)
    engine = MaskBatchEngine(loaded.backend, token_budget=token_budget, cache_rows=0)
    info = loaded.info
    _, validation = open_split(loaded, replace(data, limit=None), "validation")
    _, test = open_split(loaded, data)
    strategy = calibration_strategy(info.strategy)
    calibration_signals = engine.signals(random_masking(validation, strategy, info.mask_id, seed))
    fits = {
        method: MaSFCalibration.fit(calibration_signals, method, calibration_seed) for method in calibrations
    }
    if progress is not None:
        progress.update(1)
    p_values: dict[str, dict[float, np.ndarray]] = {method: {} for method in calibrations}
    for ratio, sequences in masked_test_sets(test.input_ids, test, info.mask_id, seed, masked_dir).items():
        signals = engine.signals(sequences)
        for method, fit in fits.items():
            p_values[method][ratio] = fit.p_values(signals)
        if progress is not None:
            progress.update(1)
    return {
        method: {
            "strategy": info.strategy,
            "calibration": {"strategy": strategy, "split": "validation", **fit.describe()},
            "n_test": len(test),
            "per_ratio": [{"ratio": r, **summarize_p_values(p)} for r, p in p_values[method].items()],
            "p_values": {f"{r:.1f}": p.tolist() for r, p in p_values[method].items()},
            "engine": engine.stats.as_dict(),
        }
        for method, fit in fits.items()
    }

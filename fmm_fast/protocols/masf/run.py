"""MaSF on a model (docs/method.md §6): calibrate on validation data masked as in training, score masked
test sets."""

from __future__ import annotations

import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from fmm_fast import __version__
from fmm_fast.backends.engine import EngineStats
from fmm_fast.backends.loading import LoadedModel
from fmm_fast.core.datatypes import EncodedSplit, load_ragged
from fmm_fast.core.errors import UserError
from fmm_fast.core.machine import machine_record
from fmm_fast.core.records import versions
from fmm_fast.core.settings import MasfSettings
from fmm_fast.data.masking import STRATEGIES, mask_explained_share, random_masking
from fmm_fast.data.options import open_split
from fmm_fast.protocols.curve_stats import RATIOS
from fmm_fast.protocols.fidelity import FidelitySample, Sides, p_value_fidelity
from fmm_fast.protocols.masf.statistic import MaSFCalibration, check_calibration_size, summarize_p_values


class SignalSource(Protocol):
    """What MaSF needs of an engine: MaskBatchEngine, or distributed.signals.ShardedSignals on Ray workers."""

    stats: EngineStats

    def signals(self, sequences: Sequence[np.ndarray], progress=None) -> np.ndarray: ...


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
            raise UserError(f"no saved masked test set {path}; {saved_sets_advice(masked_dir)}")
        try:
            sets[float(r)], _ = load_ragged(path)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:  # what np.load raises
            raise UserError(
                f"{path} is damaged ({error or type(error).__name__}); {saved_sets_advice(masked_dir)}"
            ) from None
        if len(sets[float(r)]) != len(test_ids):
            raise UserError(
                f"{path} has {len(sets[float(r)])} examples but the test split has {len(test_ids)}; "
                "use the same --dataset/--limit as the evaluation"
            )
    return sets


def saved_sets_advice(masked_dir: Path) -> str:
    """How to get the masked sets `fmm-fast evaluate --save-masked` keeps in SEED_DIR/masked/MEASURE
    (masked_dir), naming the folders that hold them: --evaluation is a seed folder, not evaluate's --out."""
    evaluation, measure = masked_dir.parent.parent, masked_dir.name
    seeds = sorted(p.parent.parent for p in evaluation.glob(f"seed-*/masked/{measure}") if p.is_dir())
    if seeds:
        return (
            f"{evaluation} is the --out of an evaluation; its masked sets are in its seed folders: give "
            f"--evaluation {seeds[0]}" + (f" (or {', '.join(map(str, seeds[1:]))})" if seeds[1:] else "")
        )
    if evaluation.name.startswith("seed-"):
        return (
            f"rerun the evaluation that wrote {evaluation} (`fmm-fast evaluate --out {evaluation.parent}` "
            f"with its options) adding --save-masked --measure {measure} --overwrite: it writes them to "
            f"{masked_dir}"
        )
    return (
        f"run `fmm-fast evaluate --save-masked --measure {measure} --out OUT` and give --evaluation "
        "OUT/seed-S, the seed folder that holds them"
    )


@dataclass
class MasfInputs:
    """What MaSF runs through the model: calibration, the whole validation split masked as the model was
    trained; sets, the test split per masking ratio (each a list of (T_i,) arrays); the splits themselves."""

    calibration: list[np.ndarray]
    sets: dict[float, list[np.ndarray]]
    test: EncodedSplit
    validation: EncodedSplit


def masf_inputs(loaded: LoadedModel, settings: MasfSettings) -> MasfInputs:
    """The masked inputs of a MaSF run (no forward pass); a calibration method that cannot be fitted on
    the validation split fails here, before any."""
    info = loaded.info
    _, validation = open_split(loaded, settings.data.select(limit=None), "validation")
    for method in settings.calibrations:
        check_calibration_size(method, len(validation), info.hidden_size, settings.split_components)
    _, test = open_split(loaded, settings.data)
    calibration = random_masking(validation, calibration_strategy(info.strategy), info.mask_id, settings.seed)
    sets = masked_test_sets(test.input_ids, test, info.mask_id, settings.seed, settings.masked_dir())
    return MasfInputs(calibration, sets, test, validation)


def masf_signals(
    inputs: MasfInputs, engine: SignalSource, progress=None
) -> tuple[np.ndarray, Iterator[tuple[float, np.ndarray]]]:
    """The signals MaSF compares: the calibration inputs' (N, L+1, D) float32, then the test split's per
    masking ratio, yielded as (ratio, (N_test, L+1, D)). The test signals are computed one ratio at a time,
    so a caller scores each set before the next is computed."""
    calibration = engine.signals(inputs.calibration)
    if progress is not None:
        progress.update(1)

    def test_signals() -> Iterator[tuple[float, np.ndarray]]:
        for ratio, sequences in inputs.sets.items():
            yield ratio, engine.signals(sequences)
            if progress is not None:
                progress.update(1)

    return calibration, test_signals()


def fit_calibrations(calibration_signals: np.ndarray, settings: MasfSettings) -> dict[str, MaSFCalibration]:
    """Every calibration method of `settings` fitted on the same (N, L+1, D) signals."""
    return {
        method: MaSFCalibration.fit(
            calibration_signals, method, settings.calibration_seed, settings.split_components
        )
        for method in settings.calibrations
    }


def sample_fidelity(
    inputs: MasfInputs, settings: MasfSettings, sides: Sides, p_values: dict[str, dict[float, np.ndarray]]
) -> dict[str, dict]:
    """The fidelity estimate of a reduced-precision MaSF run, per calibration method (protocols.fidelity's
    p_value_fidelity): fp32 calibrates on the whole validation split again (a calibration on fewer examples
    is another statistic) and scores the sample's masked test inputs; the reduced side's p-values are the
    run's own, `p_values` (method -> ratio -> (N_test,)). Every method's estimate records the whole cost."""
    started = time.perf_counter()
    sample = FidelitySample.draw(inputs.test, settings.fidelity_sample, settings.seed)
    fp32 = sides[1].engine
    fits = fit_calibrations(fp32.signals(inputs.calibration), settings)
    signals = {
        ratio: fp32.signals([sequences[i] for i in sample.ids]) for ratio, sequences in inputs.sets.items()
    }
    fp32_p = {
        method: {ratio: fit.p_values(s) for ratio, s in signals.items()} for method, fit in fits.items()
    }
    unmasked = [side.engine.logits(list(sample.split.input_ids)).argmax(axis=1) for side in sides]
    agreement, seconds = float(np.mean(unmasked[0] == unmasked[1])), time.perf_counter() - started
    return {
        method: p_value_fidelity(
            {ratio: p[sample.ids] for ratio, p in p_values[method].items()},
            fp32_p[method],
            agreement,
            sides[0].precision,
            sample.ids,
            settings.seed,
            seconds,
        )
        for method in fits
    }


def run_masf(
    loaded: LoadedModel,
    settings: MasfSettings,
    progress=None,
    engine: SignalSource | None = None,
    sides: Sides | None = None,
) -> dict[str, dict]:
    """Per-ratio Simes summaries and per-example p-values of one model, per calibration method of
    settings.calibrations (docs/method.md §6).

    Every method scores the same signals (one forward pass per example and set); settings.calibration_seed
    picks the split's halves, settings.split_components its reduction. engine: what computes the signals,
    default a MaskBatchEngine on loaded.backend. sides: of a reduced-precision run's fidelity estimate
    (api.seed_runs.fidelity_sides), kept as each method's "fidelity". Returns {method: JSON-ready dict}.
    """
    if engine is None:
        engine = settings.engine.engine_on(loaded.backend, cache_rows=0)
    info = loaded.info
    inputs = masf_inputs(loaded, settings)
    test, validation = inputs.test, inputs.validation
    calibration_signals, test_sets = masf_signals(inputs, engine, progress)
    fits = fit_calibrations(calibration_signals, settings)
    p_values: dict[str, dict[float, np.ndarray]] = {method: {} for method in settings.calibrations}
    for ratio, signals in test_sets:
        for method, fit in fits.items():
            p_values[method][ratio] = fit.p_values(signals)
    strategy = calibration_strategy(info.strategy)
    estimates = {} if sides is None else sample_fidelity(inputs, settings, sides, p_values)
    return {
        method: {
            "strategy": info.strategy,
            "calibration": {
                "strategy": strategy,
                "split": "validation",
                "truncation": validation.truncation(),
                **fit.describe(),
            },
            "n_test": len(test),
            "truncation": test.truncation(),
            "per_ratio": [{"ratio": r, **summarize_p_values(p)} for r, p in p_values[method].items()],
            "p_values": {f"{r:.1f}": p.tolist() for r, p in p_values[method].items()},
            "engine": engine.stats.as_dict(),
            **({"fidelity": estimates[method]} if method in estimates else {}),
        }
        for method, fit in fits.items()
    }


def masf_record(settings: MasfSettings, results: dict[str, dict], seconds: float) -> dict:
    """masf.json: the settings, and each model's result (by label) without its per-example p-values."""
    return {
        "kind": "masf",
        "fmm_fast_version": __version__,
        "arguments": settings.to_dict(),
        "fingerprint": settings.fingerprint(),  # what decides its numbers: report counts equal runs once
        "splits": settings.data.splits_record(),
        "models": {label: {k: v for k, v in r.items() if k != "p_values"} for label, r in results.items()},
        "durations": {"total_seconds": seconds},
        "versions": versions(),
        "machine": machine_record(),
    }

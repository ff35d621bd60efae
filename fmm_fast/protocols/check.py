"""Can erasure be trusted on this model and dataset? The primary metric and the MaSF p-value of the masked
test split at every masking ratio, against the class-majority baseline, and a verdict in words.

The test split is masked as the `rand` erasure curve masks it (docs/method.md §4: recursive erasure by random
scores, i.e. nested uniformly random shares of the explained tokens), and MaSF calibrates on the validation
split masked the way the model was trained, with the valid split calibration (docs/method.md §6). Each
masked set runs through the model once: the engine keeps the signals of the pass that scores the metric.

Verdict rule (VERDICT_RULE): the masked inputs at ratio r are out of distribution when the dataset-level
Simes summary of their MaSF p-values is at most 0.05; the model is "out of distribution from r" at the
smallest such r, and "in distribution under masking" when no ratio is out. The metric against the majority
baseline is shown beside it but does not decide: a model in distribution under masking still loses its
metric as masking removes the evidence (at 100% it should sit near the baseline); that loss is what erasure
measures.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.machine import machine_record
from fmm_fast.core.metrics import compute_metrics, majority_metric
from fmm_fast.core.reading import read_state
from fmm_fast.core.records import split_run_header, versions, write_record
from fmm_fast.core.settings import CheckSettings
from fmm_fast.data.base import TextDataset
from fmm_fast.data.masking import random_masking
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.measures.spec import BASELINE, resolve_measure
from fmm_fast.protocols.erasure import apply_masked, erasure_steps, masked_positions
from fmm_fast.protocols.masf.run import calibration_strategy
from fmm_fast.protocols.masf.statistic import (
    IN_DISTRIBUTION_LEVEL,
    MaSFCalibration,
    check_calibration_size,
    summarize_p_values,
)

RUN_KIND = "check"  # the run marker's kind and the record's
CHECK_FILES = ("state", "check.json", "check.png")  # what a check --out holds
VERDICT_RULE = (
    "out of distribution at ratio r when the MaSF Simes summary of the masked test inputs (split "
    f"calibration) is at most {IN_DISTRIBUTION_LEVEL}; out from the smallest such r; the metric against "
    "the majority baseline is shown, not used"
)
POINT_STATE = {"ratio": float, "metrics": {"*": float}, "p_values": [float]}
STATE_SHAPE = {"calibration": dict, "points": [POINT_STATE], "masked": [[int]]}


@dataclass
class CheckInputs:
    """calibration: the first settings.calibration_size validation examples masked as the model was trained,
    one (T_i,) array each; test: the test split (settings.data), which the check masks; dataset: its data."""

    calibration: list[np.ndarray]
    test: EncodedSplit
    dataset: TextDataset


def check_inputs(loaded: LoadedModel, settings: CheckSettings) -> CheckInputs:
    """The inputs of a check (no forward pass); a calibration that cannot be fitted fails here."""
    info = loaded.info
    validation_data = settings.data.select(split="validation", limit=settings.calibration_size)
    _, validation = open_split(loaded, validation_data)
    check_calibration_size("split", len(validation), info.hidden_size, settings.split_components)
    dataset, test = open_split(loaded, settings.data)
    strategy = calibration_strategy(info.strategy)
    calibration = random_masking(validation, strategy, info.mask_id, settings.seed)
    return CheckInputs(calibration, test, dataset)


def state_path(out: Path) -> Path:
    return out / "state" / "points.json"


def _fits(state: dict, test: EncodedSplit, ratios: tuple[float, ...]) -> bool:
    """Whether a saved state describes this check's test examples and ratios."""
    points = state["points"]
    if len(state["masked"]) != len(test) or len(points) > len(ratios):
        return False
    return all(
        p["ratio"] == r and len(p["p_values"]) == len(test)
        for p, r in zip(points, ratios[: len(points)], strict=True)
    )


def run_check(
    loaded: LoadedModel,
    settings: CheckSettings,
    out: Path,
    inputs: CheckInputs,
    progress: Callable[[int], None] | None = None,
) -> dict:
    """The check's points (ratio, metrics, p-values), saved to out/state/points.json after each ratio and
    resumed from there (a resumed run calibrates again: the same inputs give the same fit); progress(k) is
    told of k finished sets (the calibration is one, each ratio one). Returns the finished state."""
    test, ratios = inputs.test, settings.ratios
    saved = read_state(state_path(out), STATE_SHAPE, lambda state: _fits(state, test, ratios))
    state = saved or {"calibration": {}, "points": [], "masked": [[] for _ in test.input_ids]}
    report = progress or (lambda _: None)
    if len(state["points"]) == len(ratios):
        report(1 + len(ratios))
        return state
    # keeps one masked set: its metric's pass serves its signals, and memory stays one set's signals
    engine = MaskBatchEngine(
        loaded.backend,
        token_budget=settings.engine.token_budget,
        cache_rows=len(test),
        keep_signals=True,
        cache_mb=settings.engine.cache_mb,
    )
    calibration = MaSFCalibration.fit(
        engine.signals(inputs.calibration), "split", settings.calibration_seed, settings.split_components
    )
    state["calibration"] = {
        "strategy": calibration_strategy(loaded.info.strategy),
        "split": "validation",
        **calibration.describe(),
    }
    report(1 + len(state["points"]))
    num_labels, mask_id = loaded.info.num_labels, loaded.info.mask_id

    def add_point(ratio: float, masked: list[np.ndarray]) -> None:
        """Score one masked set (one forward pass serves the metric and the signals) and save the state."""
        predictions = engine.logits(masked).argmax(axis=1)
        state["points"].append(
            {
                "ratio": ratio,
                "metrics": compute_metrics(test.labels, predictions, num_labels),
                "p_values": calibration.p_values(engine.signals(masked)).tolist(),
            }
        )
        state["masked"] = masked_positions(masked, mask_id)
        state_path(out).parent.mkdir(parents=True, exist_ok=True)
        write_record(state_path(out), state)
        report(1)

    if not state["points"]:
        add_point(ratios[0], list(test.input_ids))
    steps = erasure_steps(
        resolve_measure(BASELINE),
        settings.seed,
        test,
        engine,
        apply_masked(test.input_ids, state["masked"], mask_id),
        len(state["points"]),
        settings.engine.explain_batch_rows,
        ratios=ratios,
    )
    for step in steps:
        add_point(ratios[step.step], step.erased)
    state["engine"] = engine.stats.as_dict()
    return state


def masked_training_command(model: str, loaded: LoadedModel, data: DataOptions) -> str:
    """The `fmm-fast train` command that masked-fine-tunes `model` on the check's dataset (its data options,
    not --split/--limit: training uses every split), into NAME-masked beside it. An .onnx file trains from
    the model folder it was exported from."""
    start = loaded.info.source if model.endswith(".onnx") and loaded.info.source else model
    flags = ["--model", start, "--strategy", "masked", "--dataset", data.dataset]
    for name in ("size", "test_size", "text_field", "pair_field", "label_field", "metric"):
        value = getattr(data, name)
        if value is not None:
            flags += [f"--{name.replace('_', '-')}", str(value)]
    if data.label_map:
        flags += ["--label-map", ",".join(f"{a}={b}" for a, b in data.label_map)]
    folder = Path(start)  # `fmm-fast train --out OUT` saves OUT/model: the new one goes beside OUT
    trained = folder.parent if folder.name == "model" and folder.parent.name else folder
    flags += ["--out", str(trained.with_name(f"{trained.name.removesuffix('.onnx')}-masked"))]
    return shlex.join(["fmm-fast", "train", *flags])


def verdict(points: list[dict], strategy: str, fix: str) -> dict:
    """The verdict of the per-ratio summaries `points` ({"ratio", "simes", ...}) under VERDICT_RULE, in
    words; fix: the command that masked-fine-tunes the model."""
    out_ratios = [p["ratio"] for p in points if p["simes"] <= IN_DISTRIBUTION_LEVEL]
    found = {"rule": VERDICT_RULE, "out_ratios": out_ratios, "out_from": None, "fix": None}
    if not out_ratios:
        text = "in distribution under masking at every ratio: erasure measures the explanation"
        return {**found, "in_distribution": True, "text": text}
    first = out_ratios[0]
    simes = next(p["simes"] for p in points if p["ratio"] == first)
    if first == 0:
        text = (
            f"out of distribution even unmasked (MaSF p = {simes:.2g} at 0%): the test split is unlike the "
            "validation split the check calibrates on, so masking cannot be judged; check both splits hold "
            "the same kind of data (--dataset and its options)"
        )
        return {**found, "in_distribution": False, "out_from": first, "text": text}
    again = ""
    if strategy == "masked":
        again = " (it is masked-fine-tuned already: train it longer, e.g. more --epochs)"
    text = (
        f"out of distribution from {first:.0%} masked (MaSF p = {simes:.2g} ≤ {IN_DISTRIBUTION_LEVEL}): "
        f"erasure there measures the model's reaction to masks, not the explanation; masked fine-tuning "
        f"fixes it{again}: {fix}"
    )
    return {**found, "in_distribution": False, "out_from": first, "text": text, "fix": fix}


def check_record(
    loaded: LoadedModel, settings: CheckSettings, inputs: CheckInputs, state: dict, seconds: float
) -> dict:
    """check.json: what ran, on what, the metric and MaSF summary per ratio, the majority baseline and the
    verdict."""
    dataset, test = inputs.dataset, inputs.test
    metric = dataset.metric
    points = [
        {"ratio": p["ratio"], "metrics": p["metrics"], **summarize_p_values(np.asarray(p["p_values"]))}
        for p in state["points"]
    ]
    fix = masked_training_command(settings.model, loaded, settings.data)
    return {
        **split_run_header(RUN_KIND, settings, loaded, dataset, test),
        "metric": metric,
        "majority_baseline": majority_metric(test.labels, metric, loaded.info.num_labels),
        "n_examples": len(test),
        "ratios": list(settings.ratios),
        "points": points,
        "calibration": state["calibration"],
        "verdict": verdict(points, loaded.info.strategy, fix),
        "engine": state.get("engine", {}),
        "durations": {"total_seconds": seconds},
        "versions": versions(),
        "machine": machine_record(),
    }


def summary_lines(record: dict) -> list[str]:
    """The check's table (metric and MaSF p per ratio) and its verdict, as printed."""
    metric, baseline = record["metric"], record["majority_baseline"]
    lines = [
        f"{record['dataset']}/{record['split']}, {record['n_examples']} examples; MaSF split calibration on "
        f"{record['calibration']['n_level_1'] + record['calibration']['n']} validation examples "
        f"(lowest possible p {record['calibration']['p_value_floor']:.2g})",
        f"{'masked':>7}{metric:>12}{'majority':>10}{'MaSF p':>9}{'in-dist':>9}",
    ]
    for point in record["points"]:
        lines.append(
            f"{point['ratio']:>7.0%}{point['metrics'][metric]:>12.3f}{baseline:>10.3f}{point['simes']:>9.3g}"
            f"{'yes' if point['simes'] > IN_DISTRIBUTION_LEVEL else 'no':>9}"
        )
    lines.append(f"verdict: {record['verdict']['text']}")
    return lines


def check_model(
    loaded: LoadedModel,
    settings: CheckSettings,
    out: Path,
    inputs: CheckInputs,
    progress: Callable[[int], None] | None = None,
    started: float | None = None,
) -> dict:
    """run_check, then write and return check.json's record; started: the run's perf_counter() start
    (default: now)."""
    started = time.perf_counter() if started is None else started
    state = run_check(loaded, settings, out, inputs, progress)
    record = check_record(loaded, settings, inputs, state, time.perf_counter() - started)
    write_record(out / "check.json", record)
    return record

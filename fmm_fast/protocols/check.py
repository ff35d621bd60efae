"""Does this model handle masks, so that erasure can be trusted on it? The primary metric, the loss against
the label prior and the MaSF p-value of the masked test split at every masking ratio, and a verdict in words.

The test split is masked as the `rand` erasure curve masks it (docs/method.md §4: recursive erasure by random
scores, i.e. nested uniformly random shares of the explained tokens). MaSF calibrates on the validation split
as it is or masked as masked fine-tuning masks it: `settings.calibration`, one default for every model, never
read from what a model's folder says about its training (docs/method.md, "Does the model handle masks?").
Each masked set runs through the model once: the engine keeps the signals of the pass that scores the metric.

The verdict (VERDICT_RULE, decided by `judge`) rests on the weights only: the same weights give the same
verdict whichever way they arrive.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fmm_fast.backends.loading import LoadedModel
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.machine import machine_record
from fmm_fast.core.metrics import compute_metrics, majority_metric
from fmm_fast.core.reading import read_state
from fmm_fast.core.records import split_run_header, versions, write_record
from fmm_fast.core.settings import CheckSettings
from fmm_fast.data.base import TextDataset
from fmm_fast.data.labels import model_label_indices
from fmm_fast.data.local import LOCAL_EPOCHS, LOCAL_LR
from fmm_fast.data.masking import random_masking
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.measures.spec import BASELINE, resolve_measure
from fmm_fast.protocols.check_statistics import excess_nll, holm, label_prior
from fmm_fast.protocols.check_verdict import judge
from fmm_fast.protocols.erasure import apply_masked, erasure_steps, masked_positions
from fmm_fast.protocols.masf.statistic import (
    IN_DISTRIBUTION_LEVEL,
    MaSFCalibration,
    check_calibration_size,
    split_components_for,
    summarize_p_values,
)
from fmm_fast.report.check import table_rows

RUN_KIND = "check"  # the run marker's kind and the record's
CHECK_FILES = ("state", "check.json", "check.png")  # what a check --out holds
CORRECTION = "holm"  # across the ratios of one check (check_statistics.holm)
POINT_STATE = {
    "ratio": float, "metrics": {"*": float}, "excess_nll": float, "excess_nll_se": float, "p_values": [float]
}
STATE_SHAPE = {"calibration": dict, "points": [POINT_STATE], "masked": [[int]]}


@dataclass
class CheckInputs:
    """calibration: the first settings.calibration_size validation examples, unmasked or masked as masked
    fine-tuning masks them (settings.calibration), one (T_i,) array each; components: the split calibration's
    principal components per layer; test: the test split (settings.data), which the check masks; dataset: its
    data; prior: (C,) the training split's label shares in the model's label order."""

    calibration: list[np.ndarray]
    components: int
    test: EncodedSplit
    dataset: TextDataset
    prior: np.ndarray


def training_prior(loaded: LoadedModel, data: DataOptions) -> np.ndarray:
    """(C,) the label shares of data's train split, in the model's label order (label_prior)."""
    dataset = data.load()
    to_model = model_label_indices(dataset.label_names, loaded.info.label_names, data.label_map)
    return label_prior(to_model[dataset.splits["train"].labels], loaded.info.num_labels)


def check_inputs(loaded: LoadedModel, settings: CheckSettings) -> CheckInputs:
    """The inputs of a check (no forward pass); a calibration that cannot be fitted fails here. Nothing here
    reads the model's training strategy: the calibration is settings.calibration for every model."""
    info = loaded.info
    validation_data = settings.data.select(split="validation", limit=settings.calibration_size)
    _, validation = open_split(loaded, validation_data)
    components = settings.split_components
    if components is None:  # the most the width and half A allow, up to the default
        components = split_components_for(len(validation), info.hidden_size)
    check_calibration_size("split", len(validation), info.hidden_size, components)
    dataset, test = open_split(loaded, settings.data)
    calibration = (
        list(validation.input_ids)
        if settings.calibration == "unmasked"
        else random_masking(validation, "masked", info.mask_id, settings.seed)
    )
    return CheckInputs(calibration, components, test, dataset, training_prior(loaded, settings.data))


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
    engine = settings.engine.engine_on(loaded.backend, cache_rows=len(test), keep_signals=True)
    calibration = MaSFCalibration.fit(
        engine.signals(inputs.calibration), "split", settings.calibration_seed, inputs.components
    )
    state["calibration"] = {"set": settings.calibration, "split": "validation", **calibration.describe()}
    report(1 + len(state["points"]))
    num_labels, mask_id = loaded.info.num_labels, loaded.info.mask_id

    def add_point(ratio: float, masked: list[np.ndarray]) -> None:
        """Score one masked set (one forward pass serves the metric and the signals) and save the state."""
        logits = engine.logits(masked)
        excess, spread = excess_nll(logits, test.labels, inputs.prior)
        state["points"].append(
            {
                "ratio": ratio,
                "metrics": compute_metrics(test.labels, logits.argmax(axis=1), num_labels),
                "excess_nll": excess,
                "excess_nll_se": spread,
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


# The fixing command's training: measured to give a model check calls measurable in 1.5 min on 2 CPU cores
# (docs/results/check-separation.md); the guides train the same way, and so does `train` on a local file
FIX_EPOCHS = LOCAL_EPOCHS
FIX_LR = LOCAL_LR
FIX_SIZE = 2000  # train+validation examples at most


def masked_training_command(model: str, loaded: LoadedModel, data: DataOptions) -> str:
    """The `fmm-fast train` command that masked-fine-tunes `model` on the check's dataset (its data options,
    not --split/--limit: training uses every split), FIX_EPOCHS epochs at FIX_LR on at most FIX_SIZE
    train+validation examples unless the check's --size says fewer, into NAME-masked beside it. An .onnx
    file trains from the model folder it was exported from."""
    start = loaded.info.source if model.endswith(".onnx") and loaded.info.source else model
    flags = ["--model", start, "--strategy", "masked", "--dataset", data.dataset]
    for name in ("test_size", "text_field", "pair_field", "label_field", "metric"):
        value = getattr(data, name)
        if value is not None:
            flags += [f"--{name.replace('_', '-')}", str(value)]
    if data.label_map:
        flags += ["--label-map", ",".join(f"{a}={b}" for a, b in data.label_map)]
    size = FIX_SIZE if data.size is None else min(data.size, FIX_SIZE)
    flags += ["--size", str(size), "--epochs", str(FIX_EPOCHS), "--lr", f"{FIX_LR:g}"]
    folder = Path(start)  # `fmm-fast train --out OUT` saves OUT/model: the new one goes beside OUT
    trained = folder.parent if folder.name == "model" and folder.parent.name else folder
    flags += ["--out", str(trained.with_name(f"{trained.name.removesuffix('.onnx')}-masked"))]
    return shlex.join(["fmm-fast", "train", *flags])


def narrowing_advice(data: DataOptions, used: int) -> str:
    """How to narrow the excess NLL's interval: more of the test split where --limit or --test-size left
    some out, else a larger test set (advising --limit when every example was used would change nothing)."""
    for flag, cap in (("--limit", data.limit), ("--test-size", data.test_size)):
        if cap is not None and used >= cap:
            return f"give more test examples ({flag} above {cap})"
    return f"all {used} test examples were used; only a larger test set narrows it"


def record_points(state_points: list[dict]) -> list[dict]:
    """The record's points: per ratio the metrics, the excess NLL and MaSF's Simes summary, raw ("simes")
    and Holm-corrected across the ratios ("simes_holm", which decides "in_distribution")."""
    summaries = [summarize_p_values(np.asarray(p["p_values"])) for p in state_points]
    corrected = holm([summary["simes"] for summary in summaries])
    return [
        {
            "ratio": p["ratio"],
            "metrics": p["metrics"],
            "excess_nll": p["excess_nll"],
            "excess_nll_se": p["excess_nll_se"],
            **summary,
            "simes_holm": adjusted,
            "in_distribution": adjusted > IN_DISTRIBUTION_LEVEL,
        }
        for p, summary, adjusted in zip(state_points, summaries, corrected, strict=True)
    ]


def check_record(
    loaded: LoadedModel, settings: CheckSettings, inputs: CheckInputs, state: dict, seconds: float
) -> dict:
    """check.json: what ran, on what, the metric, excess NLL and MaSF summary per ratio, the majority
    baseline, the label prior and the verdict."""
    dataset, test = inputs.dataset, inputs.test
    metric = dataset.metric
    points = record_points(state["points"])
    majority = majority_metric(test.labels, metric, loaded.info.num_labels)
    fix = masked_training_command(settings.model, loaded, settings.data)
    return {
        **split_run_header(RUN_KIND, settings, loaded, dataset, test),
        "metric": metric,
        "majority_baseline": majority,
        "label_prior": inputs.prior.tolist(),
        "n_examples": len(test),
        "ratios": list(settings.ratios),
        "correction": CORRECTION,
        "points": points,
        "calibration": state["calibration"],
        "verdict": judge(points, metric, majority, fix, narrower=narrowing_advice(settings.data, len(test))),
        "engine": state.get("engine", {}),
        "durations": {"total_seconds": seconds},
        "versions": versions(),
        "machine": machine_record(),
    }


def _unreachable(floor: float, ratios: int, used: int, asked: int) -> str:
    """A warning where the calibration is too small for MaSF to find any ratio out: Holm multiplies the
    smallest p by the number of ratios, so floor × ratios above the level leaves every ratio "in". used of
    asked (--calibration-size) examples: fewer where the validation split ran out, which no option fixes."""
    if floor * ratios <= IN_DISTRIBUTION_LEVEL:
        return ""
    fix = "raise --calibration-size" if used >= asked else f"the validation split holds only {used}"
    return f"; too few calibration examples for any Holm p to reach {IN_DISTRIBUTION_LEVEL}: {fix}"


def summary_lines(record: dict) -> list[str]:
    """The check's table (table_rows) and its verdict, as printed."""
    calibration = record["calibration"]
    used, ratios = calibration["n_level_1"] + calibration["n"], len(record["points"])
    asked = record["arguments"]["calibration_size"]
    warning = _unreachable(calibration["p_value_floor"], ratios, used, asked)
    lines = [
        f"{record['dataset']}/{record['split']}, {record['n_examples']} examples; MaSF split calibration on "
        f"{used} {calibration['set']} validation examples (lowest possible p "
        f"{calibration['p_value_floor']:.2g}; p Holm-corrected across the {ratios} ratios{warning}); excess "
        "NLL: the gold labels' NLL minus the label prior's, in nats",
        f"{'masked':>7}{record['metric']:>12}{'majority':>10}{'excess NLL':>12}{'MaSF p':>9}{'Holm p':>9}"
        f"{'in-dist':>9}",
    ]
    for row in table_rows(record):
        values = list(row.values())
        lines.append(
            f"{values[0]:>7.0%}{values[1]:>12.3f}{values[2]:>10.3f}{values[3]:>12.3f}{values[4]:>9.3g}"
            f"{values[5]:>9.3g}{'yes' if values[6] else 'no':>9}"
        )
    lines.append(f"calibration: {calibration['set']}; verdict: {record['verdict']['text']}")
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

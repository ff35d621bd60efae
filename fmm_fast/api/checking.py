"""`fmm_fast.check` (the body of `fmm-fast check`): can erasure be trusted on this model and dataset?
Metric and MaSF p-value versus masking ratio, and the verdict."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fmm_fast.api.arguments import checked_arguments
from fmm_fast.api.inputs import model_source, run_folder
from fmm_fast.api.options import backend_arguments, data_arguments, engine_arguments
from fmm_fast.api.results import Check
from fmm_fast.backends.loading import load_model
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import check_directory, claim_directory, finish_run, output_lock
from fmm_fast.core.progress import progress_bar
from fmm_fast.core.settings import (
    DEFAULT_CALIBRATION_SIZE,
    DEFAULT_CHECK_CALIBRATION,
    DEFAULT_CHECK_LIMIT,
    BackendOptions,
    CheckSettings,
    EngineOptions,
)
from fmm_fast.data.options import DataOptions

DEFAULT_RATIOS = "0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1"  # --ratios as its command shows it


def parse_ratios(ratios: str | Sequence[float]) -> tuple[float, ...]:
    """ "0,0.2,0.5,1" (or [0, 0.2, 0.5, 1]) -> (0.0, 0.2, 0.5, 1.0); UserError naming what is not a number."""
    parts = ratios.split(",") if isinstance(ratios, str) else list(ratios)
    try:
        return tuple(float(part) for part in parts)
    except (TypeError, ValueError):
        raise UserError(
            f"--ratios '{ratios}' is not a comma-separated list of numbers; write e.g. 0,0.5,1"
        ) from None


@checked_arguments
@backend_arguments()
@engine_arguments(explain_rows=False)
@data_arguments(limit=DEFAULT_CHECK_LIMIT)
def check(
    model: Any,
    *,
    out: str | Path | None = None,
    data: DataOptions,
    ratios: str | Sequence[float] = DEFAULT_RATIOS,
    calibration: str = DEFAULT_CHECK_CALIBRATION,
    calibration_size: int = DEFAULT_CALIBRATION_SIZE,
    seed: int = 0,
    calibration_seed: int = 0,
    split_components: int | None = None,
    overwrite: bool = False,
    quiet: bool = False,
    engine: EngineOptions,
    backend: BackendOptions,
) -> Check:
    """Does the model handle masks, so that erasure can be trusted on it? The primary metric, the excess NLL
    (against the label prior) and MaSF's split-calibration p-value of the test split masked at each ratio as
    the `rand` erasure curve masks it, and the verdict ("handles masks", "does not handle masks" with the
    `fmm-fast train --strategy masked` command that fixes it, or "cannot tell on this data"): what
    `fmm-fast check` does, with its options. The verdict depends on the weights only: the same model as a
    folder, an .onnx or a (model, tokenizer) pair, with or without fmm-fast's metadata, gets the same one.

    model, dataset, out (by keyword): as for fmm_fast.evaluate; limit: the first N test examples (200 unless
    told). ratios: "0,0.5,1" or [0, 0.5, 1] (0 and 1 always tested). calibration: "unmasked" (default, for
    every model) or "masked": what MaSF calibrates on, the validation split as it is or masked as masked
    fine-tuning masks it. calibration_size: the first N validation examples calibrate MaSF (at least 40).
    split_components: None fits them to the model's width and the calibration size. Returns Check
    (check.json): `.verdict`, `.first_out_ratio`, `.calibration`, `.to_pandas()`.

    Example: `fmm_fast.check("model.onnx", dataset="sst2", ratios=[0, 0.2, 0.5, 1])`
    """
    model = model_source(model)
    out = run_folder(out, "check")
    started = time.perf_counter()
    with output_lock(out):  # before any model loads: a second process on this --out exits at once
        # these load Numba, SciPy and matplotlib: imported on use, so --help starts fast (and after the lock)
        from fmm_fast.measures.base import PassCount
        from fmm_fast.protocols.check import CHECK_FILES, RUN_KIND, check_inputs, check_model, summary_lines
        from fmm_fast.protocols.cost import cost_line, seconds_per_row
        from fmm_fast.report.plots import plot_check

        settings = CheckSettings(
            str(model),
            data,
            parse_ratios(ratios),
            seed,
            calibration_size,
            calibration_seed,
            split_components,
            calibration,
            engine=engine,
            backend=backend,
        )
        check_directory(out, RUN_KIND, settings.fingerprint_fields(), overwrite)
        loaded = load_model(model, settings.backend)
        inputs = check_inputs(loaded, settings)  # a data or calibration mistake fails before the claim
        claim_directory(out, RUN_KIND, settings.fingerprint_fields(), overwrite, files=CHECK_FILES)
        print(f"model {model} on {loaded.backend.name}; MaSF calibration: {settings.calibration} validation")
        # one pass per calibration example and per test example at every ratio
        passes = PassCount(forward=len(inputs.calibration) + len(inputs.test) * len(settings.ratios))
        probe = seconds_per_row(loaded.backend, inputs.test, engine.token_budget)
        print(cost_line("check", [], {}, inputs.test, probe, passes))
        with progress_bar(1 + len(settings.ratios), "check", unit="set", quiet=quiet) as bar:
            record = check_model(loaded, settings, out, inputs, bar.update, started)
        plot_check(record, out / "check.png")
        finish_run(out)
    print("\n".join(summary_lines(record)))
    print(f"wrote {out / 'check.json'}, {out / 'check.png'}")
    return Check(out)

"""`fmm_fast.evaluate` (the body of `fmm-fast evaluate`): recursive erasure curves with ACU/RACU for one
model (resumable)."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fmm_fast.api.arguments import checked_arguments
from fmm_fast.api.inputs import (
    as_list,
    measure_arguments,
    model_source,
    run_folder,
)
from fmm_fast.api.options import backend_arguments, data_arguments, engine_arguments, scale_arguments
from fmm_fast.api.results import Evaluation
from fmm_fast.api.seed_runs import (
    check_outputs,
    claim_container,
    fidelity_sides,
    plan_run,
    print_header,
    seed_directory,
    shared_fields,
)
from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel, load_model
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import finish_run, output_lock
from fmm_fast.core.progress import progress_bar
from fmm_fast.core.settings import (
    DEFAULT_FIDELITY_SAMPLE,
    BackendOptions,
    EngineOptions,
    EvaluationSettings,
)
from fmm_fast.core.writing import replacing
from fmm_fast.data.base import TextDataset
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.distributed.runtime import ScaleOptions, check_scale_out, check_worker_precision

if TYPE_CHECKING:
    from fmm_fast.distributed.pool import WorkerPool
    from fmm_fast.protocols.fidelity import Sides

CURVE_FILES = ("curves.csv", "curves.png")


@checked_arguments
@scale_arguments()
@backend_arguments()
@engine_arguments()
@data_arguments()
def evaluate(
    model: Any,
    data: DataOptions,
    out: str | Path | None = None,
    measure: Any = ("loo-abs",),
    measure_option: Mapping[str, Any] | Sequence[str] = (),
    seed: int | Sequence[int] = (0,),
    save_masked: bool = False,
    fidelity_sample: int = DEFAULT_FIDELITY_SAMPLE,
    overwrite: bool = False,
    quiet: bool = False,
    *,
    engine: EngineOptions,
    backend: BackendOptions,
    scale: ScaleOptions | None,
) -> Evaluation:
    """Recursive erasure at r = 0, 0.1, ..., 1 and ACU/RACU against `rand` (docs/method.md §4, §5): what
    `fmm-fast evaluate` does, with its options (--measure-option is measure_option, and so on).

    model: a checkpoint folder, an .onnx file, a `fmm_fast.train` result, a Hugging Face classifier folder
    or cached Hub name, or a loaded transformers (model, tokenizer) pair (saved once to fmm-fast's cache).
    dataset: a registry name, a local file (with text_field/label_field), or data held in Python: columns
    {"text": [...], "label": [...]} ("pair" optional), a list of such rows, a datasets.Dataset or a pandas
    DataFrame (split 80/10/10 like a file). measure, seed: one or a list. measure_option: {"ig_steps": 50}
    or ["ig_steps=50"].
    out: the folder the command writes (rerunning resumes it); None: a new temporary folder.
    Returns an Evaluation: one result.json per seed; a notebook shows its ACU/RACU table and curves.

    Example: `fmm_fast.evaluate("out/model", dataset="babi-1", measure=["loo-abs", "grad-l2"], limit=50)`
    """
    measures, options = measure_arguments(measure, measure_option)
    seeds = as_list(seed, "seed")
    if not seeds:
        raise UserError("give at least one --seed")
    model = model_source(model)
    settings = EvaluationSettings(
        str(model),
        data,
        tuple(measures),
        seeds[0],
        options,
        save_masked,
        engine,
        backend,
        fidelity_sample,
    )  # a typo in a measure or option fails before any work
    if scale is not None:
        check_scale_out(scale, model, settings.specs)
    runs = {s: replace(settings, seed=s) for s in seeds}
    out = run_folder(out, "evaluate")
    with output_lock(out):  # before the model and data load: a second process on this --out exits at once
        # these load Numba and SciPy: imported on use, so --help starts fast (and after the lock)
        from fmm_fast.distributed.pool import open_pool
        from fmm_fast.protocols.erasure import RUN_KIND

        shared = shared_fields(settings)
        check_outputs(out, RUN_KIND, shared, runs, overwrite)  # before any work
        check_worker_precision(scale, settings.backend.precision)
        loaded = load_model(model, settings.backend)
        text_dataset, encoded = open_split(loaded, data)
        claim_container(out, RUN_KIND, shared, seeds, CURVE_FILES, overwrite)
        mask_engine = engine.engine_on(loaded.backend)
        print_header(
            model, loaded, text_dataset.name, data.split, len(encoded), [s.name for s in settings.specs]
        )
        plan_run("evaluate", settings, encoded, loaded, len(seeds))
        sides = fidelity_sides(model, loaded, settings)
        with open_pool(scale, model, settings.backend.provider, engine) as pool:
            _evaluate_seeds(out, runs, loaded, text_dataset, encoded, mask_engine, pool, quiet, sides)
    return Evaluation(out)


def _evaluate_seeds(
    out: Path,
    runs: dict[int, EvaluationSettings],
    loaded: LoadedModel,
    text_dataset: TextDataset,
    encoded: EncodedSplit,
    engine: MaskBatchEngine,
    pool: WorkerPool | None,
    quiet: bool,
    sides: Sides | None,
) -> None:
    """Every seed's recursive curves into OUT/seed-S (in this process, or on `pool`'s Ray workers), then
    the curves of all seeds as CSV and PNG. sides: of each seed's fidelity estimate (fidelity_sides)."""
    from fmm_fast.distributed.evaluation import evaluate_sharded
    from fmm_fast.protocols.erasure import evaluate_model
    from fmm_fast.protocols.fidelity import FidelitySample, fidelity_estimate
    from fmm_fast.report.plots import plot_run_curves

    rows = []
    progress = None if quiet else progress_bar
    for s, settings in runs.items():
        run_dir = seed_directory(out, s)
        if pool is None:
            estimate = None
            if sides is not None:
                sample = FidelitySample.draw(encoded, settings.fidelity_sample, s)
                arguments = (settings.specs, s, sample, sides, text_dataset.metric)
                estimate = partial(fidelity_estimate, *arguments, settings.engine.explain_batch_rows)
            record = evaluate_model(
                loaded, text_dataset, encoded, settings, run_dir, engine, progress, estimate
            )
        else:
            record = evaluate_sharded(pool, loaded, text_dataset, encoded, settings, run_dir, progress)
        rows += _curve_rows(record)
        _print_summary(record, run_dir)
    _write_csv(out / "curves.csv", rows)
    plot_run_curves([seed_directory(out, s) / "result.json" for s in runs], out / "curves.png")
    finish_run(out)
    print(f"wrote {out / 'curves.csv'}, {out / 'curves.png'}")


def _curve_rows(record: dict) -> list[dict]:
    rows = []
    for name, curve in record["curves"].items():
        for j, ratio in enumerate(record["ratios"]):
            rows.append(
                {
                    "seed": record["seed"],
                    "measure": name,
                    "ratio": ratio,
                    **{metric: values[j] for metric, values in curve.items()},
                }
            )
    return rows


def _write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        raise UserError("no curves were computed")
    with replacing(path) as staged, staged.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _print_summary(record: dict, run_dir: Path) -> None:
    metric = record["metric"]
    print(
        f"\nseed {record['seed']}: {record['dataset']}/{record['split']}, {record['n_examples']} examples, "
        f"primary metric {metric} (majority baseline {record['majority_baseline']:.3f})"
    )
    print(f"{'measure':<16}{'signed':>7}{'r=0':>8}{'r=0.5':>8}{'r=1':>8}{'ACU':>9}{'RACU':>9}{'seconds':>9}")
    undefined = set()
    for name, m in record["measures"].items():
        curve = record["curves"][name][metric]
        racu = "undef.*" if "racu_undefined" in m else f"{100 * m['racu']:.1f}"
        undefined.update([m["racu_undefined"]] if "racu_undefined" in m else [])
        print(
            f"{name:<16}{'yes' if m['signed'] else 'no':>7}{curve[0]:>8.3f}{curve[5]:>8.3f}{curve[-1]:>8.3f}"
            f"{100 * m['acu']:>9.1f}{racu:>9}{m['seconds']:>9.1f}"
        )
    for reason in sorted(undefined):
        print(f"* RACU undefined: {reason}")
    print(
        f"(ACU/RACU ×100; read RACU for unsigned measures, ACU for signed ones) → {run_dir / 'result.json'}"
    )
    if "fidelity" in record:
        from fmm_fast.protocols.fidelity import fidelity_lines

        print("\n".join(fidelity_lines(record["fidelity"])))

"""`fmm_fast.masf` (the body of `fmm-fast masf`): is a masked input in distribution? MaSF p-values versus
masking ratio, for one or more models (each model's result saved as it finishes: resumable)."""

from __future__ import annotations

import csv
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fmm_fast.api.arguments import checked_arguments
from fmm_fast.api.inputs import as_list, model_sources, run_folder
from fmm_fast.api.options import backend_arguments, data_arguments, engine_arguments, scale_arguments
from fmm_fast.api.results import Masf
from fmm_fast.api.seed_runs import fidelity_sides
from fmm_fast.backends.loading import load_model
from fmm_fast.core.outputs import check_directory, claim_directory, finish_run, output_lock
from fmm_fast.core.progress import progress_bar
from fmm_fast.core.reading import read_state
from fmm_fast.core.records import write_record
from fmm_fast.core.settings import DEFAULT_FIDELITY_SAMPLE, BackendOptions, EngineOptions, MasfSettings
from fmm_fast.core.writing import replacing
from fmm_fast.data.options import DataOptions
from fmm_fast.distributed.runtime import ScaleOptions, check_scale_out, check_worker_precision
from fmm_fast.protocols.masf.components import DEFAULT_SPLIT_COMPONENTS

MASF_FILES = ("state", "masf.json", "p_values.csv", "masf.png")  # what a masf --out holds


@checked_arguments
@scale_arguments()
@backend_arguments()
@engine_arguments(explain_rows=False)
@data_arguments()
def masf(
    model: Any,
    out: str | Path | None = None,
    *,
    data: DataOptions,
    measure: str | None = None,
    evaluation: str | Path | None = None,
    seed: int = 0,
    calibration: str | Sequence[str] = ("in-sample",),
    calibration_seed: int = 0,
    split_components: int = DEFAULT_SPLIT_COMPONENTS,
    fidelity_sample: int = DEFAULT_FIDELITY_SAMPLE,
    overwrite: bool = False,
    quiet: bool = False,
    engine: EngineOptions,
    backend: BackendOptions,
    scale: ScaleOptions | None,
) -> Masf:
    """MaSF p-values versus masking ratio: are masked inputs in distribution? (docs/method.md §6) What
    `fmm-fast masf` does, with its options.

    Calibrates on the validation split masked as the model was trained, then tests `split` at masking
    ratios 0, 0.1, ..., 1 (random masking of explained tokens, or the sets `evaluation`, an evaluate
    save_masked=True seed folder, saved for `measure`). "In distribution" = Simes summary above 0.05.
    model: one model or a list (each as for fmm_fast.evaluate). calibration: "in-sample" (the paper's),
    "split" (a valid p-value) or both. dataset, out: as for fmm_fast.evaluate.
    Returns Masf (masf.json); a notebook shows the verdict per model and ratio and the p-value curves.

    Example: `fmm_fast.masf([plain, masked], dataset="babi-1", calibration=["in-sample", "split"])`
    """
    models = model_sources(model)
    out = run_folder(out, "masf")
    started = time.perf_counter()
    with output_lock(out):  # before any model loads: a second process on this --out exits at once
        # these load Numba and SciPy: imported on use, so --help starts fast (and after the lock)
        from fmm_fast.distributed.pool import open_pool
        from fmm_fast.distributed.signals import ShardedSignals
        from fmm_fast.protocols.curve_stats import RATIOS
        from fmm_fast.protocols.masf.run import run_masf

        settings = MasfSettings(
            tuple(str(m) for m in models),
            data,
            seed,
            measure,
            None if evaluation is None else str(evaluation),
            tuple(as_list(calibration, "calibration")),
            calibration_seed,
            split_components,
            engine=engine,
            backend=backend,
            fidelity_sample=fidelity_sample,
        )
        if scale is not None:
            for path in models:
                check_scale_out(scale, path, [])
        check_directory(out, "masf", settings.fingerprint_fields(), overwrite)
        check_worker_precision(scale, settings.backend.precision)
        loaded_models = [load_model(path, settings.backend) for path in models]
        claim_directory(out, "masf", settings.fingerprint_fields(), overwrite, files=MASF_FILES)
        results = {}
        for index, (path, loaded) in enumerate(zip(models, loaded_models, strict=True)):
            print(f"model {path} on {loaded.backend.name}")
            name = f"{loaded.info.strategy} ({path.name})"
            state = out / "state" / f"model-{index}.json"
            by_method = _saved_results(state)
            if by_method is None:
                with (
                    open_pool(scale, path, settings.backend.provider, engine) as pool,
                    progress_bar(len(RATIOS) + 1, name, unit="set", quiet=quiet) as bar,
                ):
                    signals = None if pool is None else ShardedSignals(pool)
                    sides = fidelity_sides(path, loaded, settings)  # None with workers: they run fp32 only
                    computed = run_masf(loaded, settings, bar, signals, sides)
                    if pool is not None:  # saved with the results, so a resumed run reports them too
                        computed = {method: {**r, "workers": pool.record()} for method, r in computed.items()}
                state.parent.mkdir(exist_ok=True)
                write_record(state, computed)
                by_method = _saved_results(state)  # as a resumed run reads it: both write the same record
            for method, result in by_method.items():
                label = _unique_label(name if len(by_method) == 1 else f"{name} {method}", results)
                results[label] = {
                    **result,
                    "model": str(path),
                    "backend": loaded.backend.name,
                }
        _write_outputs(out, settings, results, started)
    return Masf(out)


def _saved_results(state: Path) -> dict | None:
    """One model's results per calibration method that an earlier (killed) run saved, or None (with a
    warning when the file is damaged)."""
    return read_state(state, {"*": {"per_ratio": [dict], "p_values": {"*": [float]}, "calibration": dict}})


def _write_outputs(out: Path, settings: MasfSettings, results: dict, started: float) -> None:
    """masf.json, p_values.csv and masf.png of every model, and the table."""
    from fmm_fast.protocols.masf.run import masf_record
    from fmm_fast.report.plots import plot_p_values

    write_record(out / "masf.json", masf_record(settings, results, time.perf_counter() - started))
    _write_p_values(out / "p_values.csv", results)
    plot_p_values(
        {
            label: ([s["ratio"] for s in r["per_ratio"]], [s["simes"] for s in r["per_ratio"]])
            for label, r in results.items()
        },
        out / "masf.png",
    )
    _print_table(results)
    _print_fidelity(results)
    _warn_saturated_calibrations(results, settings.data.size)
    finish_run(out)
    print(f"wrote {out / 'masf.json'}, {out / 'p_values.csv'}, {out / 'masf.png'}")


def _unique_label(label: str, taken: dict) -> str:
    return label if label not in taken else f"{label} #{len(taken) + 1}"


def _write_p_values(path: Path, results: dict) -> None:
    with replacing(path) as staged, staged.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["model", "ratio", "example", "p_value"])
        for label, result in results.items():
            for ratio, values in result["p_values"].items():
                writer.writerows([label, ratio, i, p] for i, p in enumerate(values))


def _print_table(results: dict) -> None:
    print(f"{'model':<36}{'ratio':>6}{'Simes p':>10}{'<0.05':>8}{'in-dist':>9}")
    for label, result in results.items():
        for s in result["per_ratio"]:
            print(
                f"{label:<36}{s['ratio']:>6.1f}{s['simes']:>10.3g}{s['share_below']['0.05']:>8.2f}"
                f"{'yes' if s['in_distribution'] else 'no':>9}"
            )


def _print_fidelity(results: dict) -> None:
    """Each reduced-precision result's fidelity estimate."""
    from fmm_fast.protocols.fidelity import p_value_fidelity_lines

    for label, result in results.items():
        if "fidelity" in result:
            print("\n".join(p_value_fidelity_lines(label, result["fidelity"])))


def _warn_saturated_calibrations(results: dict, size: int | None) -> None:
    """One warning per model whose calibration cannot produce p-values below the test's level, naming the
    floor and what can lower it: only the in-sample calibration saturates (the split's floor is
    1 / (|B| + 1), below 0.05 from its minimum of 40 examples); more examples help only where --size
    capped the validation split."""
    from fmm_fast.protocols.masf.statistic import IN_DISTRIBUTION_LEVEL

    for label, result in results.items():
        calibration = result["calibration"]
        floor = calibration["p_value_floor"]
        if floor <= IN_DISTRIBUTION_LEVEL:
            continue
        n = calibration["n"]
        split_floor = 1 / (n - n // 2 + 1)
        remedy = f"use --calibration split (valid, and its lowest p-value here is {split_floor:.2g})"
        if size is None:
            remedy += (
                f"; --size cannot help: the whole validation split ({n} examples) already calibrates, and "
                "more calibration examples need a dataset with a larger validation split (a local file)"
            )
        else:
            remedy += (
                f", or calibrate on more examples: leave out --size (it capped the validation split at {n})"
            )
        print(
            f"fmm-fast: warning: {label}: the {calibration['method']} calibration saturates ({n} calibrating "
            f"examples, many at the largest statistic): no p-value can fall below {floor:.2f}, so "
            f"'in distribution' means nothing here; {remedy}",
            file=sys.stderr,
        )

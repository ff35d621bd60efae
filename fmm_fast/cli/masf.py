"""`fmm-fast masf`: is a masked input in distribution? MaSF p-values versus masking ratio."""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

import typer

from fmm_fast.backends.loading import load_model
from fmm_fast.cli.app import app
from fmm_fast.cli.options import (
    FidelitySampleOption,
    OverwriteOption,
    QuietOption,
    backend_options,
    data_options,
    engine_options,
    scale_options,
)
from fmm_fast.cli.seed_runs import fidelity_sides
from fmm_fast.core.outputs import check_directory, claim_directory, finish_run, output_lock
from fmm_fast.core.progress import progress_bar
from fmm_fast.core.reading import read_state
from fmm_fast.core.records import write_record
from fmm_fast.core.settings import DEFAULT_FIDELITY_SAMPLE, BackendOptions, EngineOptions, MasfSettings
from fmm_fast.core.writing import replacing
from fmm_fast.data.options import DataOptions
from fmm_fast.distributed.runtime import ScaleOptions, check_scale_out, check_worker_precision
from fmm_fast.protocols.masf.reduction import DEFAULT_SPLIT_COMPONENTS

MASF_FILES = ("state", "masf.json", "p_values.csv", "masf.png")  # what a masf --out holds


@app.command()
@scale_options()
@backend_options()
@engine_options(explain_rows=False)
@data_options(split_help="Split whose masked copies are tested.")
def masf(
    model: list[Path] = typer.Option(
        ..., "--model", help="Checkpoint dir or ONNX file; repeat to compare (e.g. plain and masked)."
    ),
    out: Path = typer.Option(..., "--out", help="Output directory (masf.json, p_values.csv, masf.png)."),
    *,
    data: DataOptions,
    measure: str | None = typer.Option(
        None, help="Test the masked sets an evaluation saved for this measure (needs --evaluation)."
    ),
    evaluation: Path | None = typer.Option(
        None, help="An `fmm-fast evaluate --save-masked` seed directory (e.g. OUT/seed-0)."
    ),
    seed: int = typer.Option(0, min=0, help="Seed of the calibration and random test masking."),
    calibration: list[str] = typer.Option(
        ["in-sample"],
        "--calibration",
        metavar="in-sample|split",
        help="in-sample: the paper's method (default); split: a valid (conformal) p-value: half the "
        "validation split fits level 1, the other half calibrates levels 2-3 together with each test input, "
        "so p-values reach down to 1/(half + 1). Repeat to score both on the same signals.",
    ),
    calibration_seed: int = typer.Option(0, min=0, help="Seed of the split calibration's halves."),
    split_components: int = typer.Option(
        DEFAULT_SPLIT_COMPONENTS,
        help="The split calibration first reduces each layer's hidden states to this many principal "
        "components, fitted on its level-1 half only (so it stays valid): more power with a few hundred "
        "calibration examples. 0: no reduction.",
    ),
    fidelity_sample: FidelitySampleOption = DEFAULT_FIDELITY_SAMPLE,
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    engine: EngineOptions,
    backend: BackendOptions,
    scale: ScaleOptions | None,
) -> None:
    """MaSF p-values versus masking ratio: are masked inputs in distribution? (docs/method.md §6)

    Calibrates on the validation split masked as the model was trained, then tests the test split at masking
    ratios 0, 0.1, ..., 1 (random masking of explained tokens, or the sets an evaluation saved).
    "In distribution" = Simes summary above 0.05. --calibration in-sample (the paper's) is not a valid
    p-value: fresh in-distribution inputs score too low; --calibration split is (docs/method.md §6).
    --size caps the calibration set too: leave it out to calibrate on the whole validation split,
    which stays disjoint from a capped run's train split; an in-sample calibration of a few hundred
    examples saturates (see the p-value floor it reports), the split one does not. Each model's result is
    saved in OUT/state as it finishes: rerun the same command to resume.
    """
    started = time.perf_counter()
    with output_lock(out):  # before any model loads: a second process on this --out exits at once
        # these load Numba and SciPy: imported on use, so --help starts fast (and after the lock)
        from fmm_fast.distributed.pool import open_pool
        from fmm_fast.distributed.signals import ShardedSignals
        from fmm_fast.protocols.curve_stats import RATIOS
        from fmm_fast.protocols.masf.run import run_masf

        settings = MasfSettings(
            tuple(str(m) for m in model),
            data,
            seed,
            measure,
            None if evaluation is None else str(evaluation),
            tuple(calibration),
            calibration_seed,
            split_components,
            engine=engine,
            backend=backend,
            fidelity_sample=fidelity_sample,
        )
        if scale is not None:
            for path in model:
                check_scale_out(scale, path, [])
        check_directory(out, "masf", settings.fingerprint_fields(), overwrite)
        check_worker_precision(scale, settings.backend.precision)
        loaded_models = [load_model(path, settings.backend) for path in model]
        claim_directory(out, "masf", settings.fingerprint_fields(), overwrite, files=MASF_FILES)
        results = {}
        for index, (path, loaded) in enumerate(zip(model, loaded_models, strict=True)):
            print(f"model {path} on {loaded.backend.name}")
            name = f"{loaded.info.strategy} ({path.name})"
            state = out / "state" / f"model-{index}.json"
            by_method = _saved_results(state)
            if by_method is None:
                with (
                    open_pool(scale, path, settings.backend.provider, engine.token_budget) as pool,
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

"""`fmm-fast masf`: is a masked input in distribution? MaSF p-values versus masking ratio."""

from __future__ import annotations

import csv
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import typer

from fmm_fast import __version__
from fmm_fast.cli.app import app
from fmm_fast.cli.options import (
    DatasetOption,
    DeviceOption,
    LabelFieldOption,
    LimitOption,
    PairFieldOption,
    PrecisionOption,
    SizeOption,
    TestSizeOption,
    TextFieldOption,
    TokenBudgetOption,
)
from fmm_fast.engine import DEFAULT_TOKEN_BUDGET
from fmm_fast.errors import UserError
from fmm_fast.loading import load_model
from fmm_fast.masf import IN_DISTRIBUTION_LEVEL, check_calibration_method
from fmm_fast.masf_run import run_masf
from fmm_fast.pipeline import DataOptions
from fmm_fast.precision import DEFAULT_PRECISION
from fmm_fast.progress import progress_bar
from fmm_fast.report.plots import plot_p_values
from fmm_fast.runrecord import ensure_writable, versions, write_json
from fmm_fast.stats import RATIOS


@app.command()
def masf(
    model: list[Path] = typer.Option(
        ..., "--model", help="Checkpoint dir or ONNX file; repeat to compare (e.g. plain and masked)."
    ),
    out: Path = typer.Option(..., "--out", help="Output directory (masf.json, p_values.csv, masf.png)."),
    dataset: DatasetOption = "movie-snippets",
    split: str = typer.Option("test", help="Split whose masked copies are tested."),
    measure: str | None = typer.Option(
        None, help="Test the masked sets an evaluation saved for this measure (needs --evaluation)."
    ),
    evaluation: Path | None = typer.Option(
        None, help="An `fmm-fast evaluate --save-masked` seed directory (e.g. OUT/seed-0)."
    ),
    limit: LimitOption = None,
    seed: int = typer.Option(0, help="Seed of the calibration and random test masking."),
    device: DeviceOption = "auto",
    precision: PrecisionOption = DEFAULT_PRECISION,
    token_budget: TokenBudgetOption = DEFAULT_TOKEN_BUDGET,
    size: SizeOption = None,
    test_size: TestSizeOption = None,
    text_field: TextFieldOption = None,
    pair_field: PairFieldOption = None,
    label_field: LabelFieldOption = None,
    calibration: list[str] = typer.Option(
        ["in-sample"],
        "--calibration",
        metavar="in-sample|split",
        help="in-sample: the paper's method (default); split: a valid p-value (half the validation split "
        "fits level 1, the other half calibrates, SPEC §6). Repeat to score both on the same signals.",
    ),
    calibration_seed: int = typer.Option(0, help="Seed of the split calibration's halves."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    """MaSF p-values versus masking ratio: are masked inputs in distribution? (SPEC §6)

    Calibrates on the validation split masked as the model was trained, then tests the test split at masking
    ratios 0, 0.1, ..., 1 (random masking of explained tokens, or the sets an evaluation saved).
    "In distribution" = Simes summary above 0.05. --calibration in-sample (the paper's) is not a valid
    p-value: fresh in-distribution inputs score too low; --calibration split is (SPEC §6).
    --size caps the calibration set too: leave it out to calibrate on the whole validation split (SPEC §6),
    which stays disjoint from a capped run's train split; a calibration of a few hundred examples
    saturates (see the p-value floor it reports).
    """
    if (measure is None) != (evaluation is None):
        raise UserError(
            "--measure and --evaluation go together: the masked sets of MEASURE saved in EVALUATION"
        )
    masked_dir = None if evaluation is None else evaluation / "masked" / measure
    methods = list(dict.fromkeys(calibration))  # a repeated method once
    for method in methods:
        check_calibration_method(method)
    ensure_writable(out)
    data = DataOptions(dataset, split, limit, size, test_size, text_field, pair_field, label_field)
    started = time.perf_counter()
    results = {}
    for path in model:
        loaded = load_model(path, device=device, provider=device, precision=precision)
        print(f"model {path} on {loaded.backend.name}")
        name = f"{loaded.info.strategy} ({path.name})"
        with nullcontext() if quiet else progress_bar(len(RATIOS) + 1, name, unit="set") as bar:
            by_method = run_masf(loaded, data, seed, masked_dir, token_budget, bar, methods, calibration_seed)
        for method, result in by_method.items():
            label = _unique_label(name if len(methods) == 1 else f"{name} {method}", results)
            results[label] = {
                **result,
                "model": str(path),
                "backend": loaded.backend.name,
                "precision": loaded.precision.as_dict(),
            }
    record = {
        "kind": "masf",
        "fmm_fast_version": __version__,
        "arguments": {
            "models": [str(m) for m in model],
            "dataset": dataset,
            "split": split,
            "measure": measure,
            "evaluation": None if evaluation is None else str(evaluation),
            "limit": limit,
            "size": size,
            "test_size": test_size,
            "text_field": text_field,
            "pair_field": pair_field,
            "label_field": label_field,
            "seed": seed,
            "calibration": methods,
            "calibration_seed": calibration_seed,
            "precision": precision,
        },
        "models": {label: {k: v for k, v in r.items() if k != "p_values"} for label, r in results.items()},
        "durations": {"total_seconds": time.perf_counter() - started},
        "versions": versions(),
    }
    write_json(out / "masf.json", record)
    _write_p_values(out / "p_values.csv", results)
    plot_p_values(
        {
            label: ([s["ratio"] for s in r["per_ratio"]], [s["simes"] for s in r["per_ratio"]])
            for label, r in results.items()
        },
        out / "masf.png",
    )
    _print_table(results)
    _warn_saturated_calibrations(results)
    print(f"wrote {out / 'masf.json'}, {out / 'p_values.csv'}, {out / 'masf.png'}")


def _unique_label(label: str, taken: dict) -> str:
    return label if label not in taken else f"{label} #{len(taken) + 1}"


def _write_p_values(path: Path, results: dict) -> None:
    with path.open("w", newline="") as handle:
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


def _warn_saturated_calibrations(results: dict) -> None:
    """One warning per model whose calibration cannot produce p-values below the test's level."""
    for label, result in results.items():
        calibration = result["calibration"]
        if calibration["p_value_floor"] > IN_DISTRIBUTION_LEVEL:
            print(
                f"fmm-fast: warning: {label}: the {calibration['method']} calibration saturates "
                f"({calibration['n']} calibrating examples, many at the largest statistic): no p-value can "
                f"fall below {calibration['p_value_floor']:.2f}, so 'in distribution' means nothing here; "
                "calibrate on a larger validation split (--size)",
                file=sys.stderr,
            )

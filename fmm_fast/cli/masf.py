"""`fmm-fast masf`: is a masked input in distribution? MaSF p-values versus masking ratio, on top of
`fmm_fast.masf` (fmm_fast.api.masf)."""

from __future__ import annotations

from pathlib import Path

import typer

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
from fmm_fast.core.settings import DEFAULT_FIDELITY_SAMPLE
from fmm_fast.protocols.masf.components import DEFAULT_SPLIT_COMPONENTS


@app.command()
@scale_options(flags=True)
@backend_options(flags=True)
@engine_options(explain_rows=False, flags=True)
@data_options(split_help="Split whose masked copies are tested.", flags=True)
def masf(
    model: list[Path] = typer.Option(
        ..., "--model", help="Checkpoint dir or ONNX file; repeat to compare (e.g. plain and masked)."
    ),
    out: Path = typer.Option(..., "--out", help="Output directory (masf.json, p_values.csv, masf.png)."),
    *,
    data: dict,
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
    engine: dict,
    backend: dict,
    scale: dict,
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
    from fmm_fast.api.masf import masf as run  # loads NumPy and the backends: not at --help

    run(
        model,
        out=out,
        measure=measure,
        evaluation=evaluation,
        seed=seed,
        calibration=calibration,
        calibration_seed=calibration_seed,
        split_components=split_components,
        fidelity_sample=fidelity_sample,
        overwrite=overwrite,
        quiet=quiet,
        **data,
        **engine,
        **backend,
        **scale,
    )

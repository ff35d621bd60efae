"""`fmm-fast check`: can erasure be trusted on this model and dataset? Metric and MaSF p-value versus masking
ratio, and the verdict, on top of `fmm_fast.check` (fmm_fast.api.checking)."""

from __future__ import annotations

from pathlib import Path

import typer

from fmm_fast.cli.app import app
from fmm_fast.cli.options import (
    ModelOption,
    OverwriteOption,
    QuietOption,
    backend_options,
    data_options,
    engine_options,
)
from fmm_fast.core.settings import DEFAULT_CALIBRATION_SIZE, DEFAULT_CHECK_LIMIT
from fmm_fast.protocols.masf.reduction import DEFAULT_SPLIT_COMPONENTS


@app.command()
@backend_options(flags=True)
@engine_options(explain_rows=False, flags=True)
@data_options(
    split_help="Split whose masked copies are scored and tested.", limit=DEFAULT_CHECK_LIMIT, flags=True
)
def check(
    model: ModelOption,
    out: Path = typer.Option(..., "--out", help="Output directory (check.json, check.png)."),
    *,
    data: dict,
    ratios: str = typer.Option(
        "0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1",  # fmm_fast.api.checking.DEFAULT_RATIOS
        metavar="R,R,...",
        help="Masked shares of the explained tokens to test (0 and 1 are always tested).",
    ),
    calibration_size: int = typer.Option(
        DEFAULT_CALIBRATION_SIZE,
        min=1,
        help="MaSF calibrates on the first N examples of the validation split (at least 40: two halves "
        "of 20; more gives lower possible p-values, 1 / (N/2 + 1)).",
    ),
    seed: int = typer.Option(0, min=0, help="Seed of the random masking (test and calibration)."),
    calibration_seed: int = typer.Option(0, min=0, help="Seed of the split calibration's halves."),
    split_components: int = typer.Option(
        DEFAULT_SPLIT_COMPONENTS,
        help="Principal components per layer the split calibration reduces the hidden states to, fitted on "
        "its first half (below N/2). 0: no reduction.",
    ),
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    engine: dict,
    backend: dict,
) -> None:
    """Can erasure be trusted on this model and dataset? A verdict in minutes.

    Masks the test split at each ratio as the `rand` erasure curve does (a random share of the explained
    tokens, nested from ratio to ratio) and reports the primary metric against the class-majority
    baseline and MaSF's in-distribution p-value, calibrated on validation examples masked the way the model
    was trained (unmasked for a model fmm-fast did not train), with the valid split calibration. Verdict
    rule: the masked inputs at a ratio are out of distribution when the dataset-level Simes summary of their
    MaSF p-values is at most 0.05; the model is "out of distribution from r%" at the smallest such ratio,
    with the `fmm-fast train --strategy masked` command that fixes it, and "in distribution under masking"
    when no ratio is out (erasure then measures the explanation). The metric is shown, not used: losing
    accuracy as masking removes the evidence is what erasure measures. Each ratio is saved as it finishes:
    rerun the same command to resume.
    """
    from fmm_fast.api.checking import check as run  # loads NumPy and the backends: not at --help

    run(
        model,
        out=out,
        ratios=ratios,
        calibration_size=calibration_size,
        seed=seed,
        calibration_seed=calibration_seed,
        split_components=split_components,
        overwrite=overwrite,
        quiet=quiet,
        **data,
        **engine,
        **backend,
    )

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
from fmm_fast.core.settings import (
    CHECK_CALIBRATIONS,
    DEFAULT_CALIBRATION_SIZE,
    DEFAULT_CHECK_CALIBRATION,
    DEFAULT_CHECK_LIMIT,
)


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
    calibration: str = typer.Option(
        DEFAULT_CHECK_CALIBRATION,
        metavar="|".join(CHECK_CALIBRATIONS),
        help="What MaSF calibrates on, the same for every model: the validation split as it is (unmasked), "
        "or masked as masked fine-tuning masks it (masked). Printed with the verdict and recorded.",
    ),
    calibration_size: int = typer.Option(
        DEFAULT_CALIBRATION_SIZE,
        min=1,
        help="MaSF calibrates on the first N examples of the validation split (at least 40: two halves "
        "of 20; more gives lower possible p-values, 1 / (N/2 + 1)).",
    ),
    seed: int = typer.Option(0, min=0, help="Seed of the random masking (test and calibration)."),
    calibration_seed: int = typer.Option(0, min=0, help="Seed of the split calibration's halves."),
    split_components: int | None = typer.Option(
        None,
        show_default=False,
        help="Principal components per layer the split calibration reduces the hidden states to, fitted on "
        "its first half (below N/2 and the hidden size). 0: no reduction. Default: as many as the model's "
        "width and the calibration size allow, at most 32.",
    ),
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    engine: dict,
    backend: dict,
) -> None:
    """Does the model handle masks, so that erasure can be trusted on it? A verdict in minutes.

    Masks the test split at each ratio as the `rand` erasure curve does (a random share of the explained
    tokens, nested from ratio to ratio) and reports the primary metric against the class-majority
    baseline, the excess NLL (the gold labels' NLL minus the label prior's) and MaSF's in-distribution
    p-value (valid split calibration on the --calibration set; Holm-corrected across the ratios). Verdict:
    "does not handle masks" when fully masked inputs get answers more confidently wrong than the label prior
    (with the `fmm-fast train --strategy masked` command that fixes it), "handles masks" when they get about
    the prior from a model whose unmasked answers clearly beat it, "cannot tell on this data" when the test
    cannot decide. It depends on the weights only, not on
    what the model's folder says about its training. Each ratio is saved as it finishes: rerun the same
    command to resume.
    """
    from fmm_fast.api.checking import check as run  # loads NumPy and the backends: not at --help

    run(
        model,
        out=out,
        ratios=ratios,
        calibration=calibration,
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

"""`fmm-fast explain`: importance scores for the examples of a dataset split, as JSON Lines (+ HTML), and the
run record beside them, on top of `fmm_fast.explain` (fmm_fast.api.explaining)."""

from __future__ import annotations

from pathlib import Path

import typer

from fmm_fast.cli.app import app
from fmm_fast.cli.options import (
    FidelitySampleOption,
    MeasureOptionsOption,
    ModelOption,
    OverwriteOption,
    QuietOption,
    SeedOption,
    backend_options,
    data_options,
    engine_options,
    scale_options,
)
from fmm_fast.core.settings import DEFAULT_EXPLAIN_LIMIT, DEFAULT_FIDELITY_SAMPLE


@app.command()
@scale_options(flags=True)
@backend_options(flags=True)
@engine_options(flags=True)
@data_options(split_help="Split to explain.", limit=DEFAULT_EXPLAIN_LIMIT, flags=True)
def explain(
    model: ModelOption,
    data: dict,
    measure: list[str] = typer.Option(
        ...,
        "--measure",
        "-m",
        help="e.g. loo-abs, grad-l2, int-grad-sign, beam (= beam-sign-10); repeat for several measures.",
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        help="Output .jsonl file: one line per example and measure (tokens, their character offsets, label, "
        "prediction, its probability, scores), in example order; its run record (what ran, on what, how "
        "long) goes to OUT with the suffix .run.json.",
    ),
    measure_option: MeasureOptionsOption = [],  # noqa: B006  (typer copies the default)
    seed: SeedOption = 0,
    html: bool = typer.Option(
        False,
        "--html",
        help="Also write OUT.html: every example once, one row per measure, its words coloured by score "
        "(a switch shows the model's tokens).",
    ),
    fidelity_sample: FidelitySampleOption = DEFAULT_FIDELITY_SAMPLE,
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    *,
    engine: dict,
    backend: dict,
    scale: dict,
) -> None:
    """Explain the gold-label logit of each example with one or more importance measures."""
    from fmm_fast.api.explaining import explain as run  # loads NumPy and the backends: not at --help

    run(
        model,
        measure=measure,
        out=out,
        measure_option=measure_option,
        seed=seed,
        html=html,
        fidelity_sample=fidelity_sample,
        overwrite=overwrite,
        quiet=quiet,
        **data,
        **engine,
        **backend,
        **scale,
    )

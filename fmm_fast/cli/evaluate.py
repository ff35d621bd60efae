"""`fmm-fast evaluate`: recursive erasure curves with ACU/RACU for one model (resumable), on top of
`fmm_fast.evaluate` (fmm_fast.api.evaluation). The peer metrics, whose ranking is computed once, are
`fmm-fast aopc`."""

from __future__ import annotations

from pathlib import Path

import typer

from fmm_fast.cli.app import app
from fmm_fast.cli.options import (
    FidelitySampleOption,
    MeasureOptionsOption,
    MeasuresOption,
    ModelOption,
    OverwriteOption,
    QuietOption,
    SeedsOption,
    backend_options,
    data_options,
    engine_options,
    scale_options,
)
from fmm_fast.core.errors import UserError
from fmm_fast.core.settings import DEFAULT_FIDELITY_SAMPLE


@app.command()
@scale_options(flags=True)
@backend_options(flags=True)
@engine_options(flags=True)
@data_options(split_help="Split to erase.", flags=True)
def evaluate(
    model: ModelOption,
    data: dict,
    out: Path = typer.Option(..., "--out", help="Output directory (result.json, curves.csv, curves.png)."),
    measure: MeasuresOption = ["loo-abs"],  # noqa: B006  (typer copies the default)
    measure_option: MeasureOptionsOption = [],  # noqa: B006
    seed: SeedsOption = [0],  # noqa: B006
    save_masked: bool = typer.Option(
        False, help="Save every masked test set (for `fmm-fast masf --measure`)."
    ),
    fidelity_sample: FidelitySampleOption = DEFAULT_FIDELITY_SAMPLE,
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    protocol: str = typer.Option("recursive", hidden=True),  # the peer metrics moved to `fmm-fast aopc`
    *,
    engine: dict,
    backend: dict,
    scale: dict,
) -> None:
    """Recursive erasure at r = 0, 0.1, ..., 1 and ACU/RACU against `rand` (docs/method.md §4, §5).

    Finished steps are saved as they complete: rerun the same command to resume an interrupted run (only
    the same model file content, data options and precision resume). Writes OUT/seed-S/result.json (one per
    seed), OUT/curves.csv and OUT/curves.png. With --workers/--ray-address each Ray worker runs whole
    erasures of a shard of the examples; finished shards are saved, so a rerun resumes too (with the same
    worker count). The peer metrics (AOPC, τ-LOO), and explanations made elsewhere, are `fmm-fast aopc`.
    """
    if protocol != "recursive":
        raise UserError(
            f"--protocol {protocol}: the peer metrics are their own command now; run `fmm-fast aopc` with "
            "the same options (without --protocol)"
        )
    from fmm_fast.api.evaluation import evaluate as run  # loads NumPy and the backends: not at --help

    run(
        model,
        out=out,
        measure=measure,
        measure_option=measure_option,
        seed=seed,
        save_masked=save_masked,
        fidelity_sample=fidelity_sample,
        overwrite=overwrite,
        quiet=quiet,
        **data,
        **engine,
        **backend,
        **scale,
    )

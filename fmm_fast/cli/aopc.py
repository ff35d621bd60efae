"""`fmm-fast aopc`: the peer metrics (AOPC comprehensiveness, AOPC sufficiency, τ-LOO) of built-in measures
and of explanations made elsewhere, with the ranking computed once (resumable), on top of `fmm_fast.aopc`
(fmm_fast.api.peer)."""

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
)
from fmm_fast.core.settings import DEFAULT_FIDELITY_SAMPLE


@app.command()
@backend_options(flags=True)
@engine_options(flags=True)
@data_options(split_help="Split to score.", flags=True)
def aopc(
    model: ModelOption,
    data: dict,
    out: Path = typer.Option(..., "--out", help="Output directory (seed-S/result.json, seed-S/peer.jsonl)."),
    measure: MeasuresOption = ["loo-abs"],  # noqa: B006  (typer copies the default)
    measure_option: MeasureOptionsOption = [],  # noqa: B006
    seed: SeedsOption = [0],  # noqa: B006
    explanations: list[Path] = typer.Option(
        [],
        "--explanations",
        help='A .jsonl of explanations made elsewhere, one line per example: {"index": i, "token_scores": '
        '[...]} or {"index": i, "word_scores": [...]}; repeat for several.',
    ),
    fidelity_sample: FidelitySampleOption = DEFAULT_FIDELITY_SAMPLE,
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    *,
    engine: dict,
    backend: dict,
) -> None:
    """Peer metrics of each explanation, its ranking computed once on the unmasked input (docs/method.md §8).

    Per example: AOPC comprehensiveness, AOPC sufficiency and τ-LOO; per dataset their means with 95%
    bootstrap CIs, and the erasure curve of the fixed ranking with its ACU/RACU against `rand`. Explanations
    made elsewhere (another library, a person, a language model) are scored like the built-in measures.
    Finished measures are saved as they complete: rerun the same command to resume an interrupted run.
    Writes OUT/seed-S/peer.jsonl (per example) and OUT/seed-S/result.json (one per seed).
    """
    from fmm_fast.api.peer import aopc as run  # loads NumPy and the backends: not at --help

    run(
        model,
        out=out,
        measure=measure,
        measure_option=measure_option,
        seed=seed,
        explanations=explanations,
        fidelity_sample=fidelity_sample,
        overwrite=overwrite,
        quiet=quiet,
        **data,
        **engine,
        **backend,
    )

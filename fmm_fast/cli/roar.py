"""`fmm-fast roar`: Recursive ROAR, erasure with retraining at every step, beside the no-retraining curve, on
top of `fmm_fast.roar` (fmm_fast.api.roar)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from fmm_fast.cli.app import app
from fmm_fast.cli.options import (
    TRAINING_PRECISION_HELP,
    MeasureOptionsOption,
    OverwriteOption,
    QuietOption,
    backend_options,
    data_options,
    engine_options,
    scale_options,
    training_options,
)
from fmm_fast.core.settings import ROAR_MAX_STEPS
from fmm_fast.data.masking import STRATEGIES
from fmm_fast.training.base_models import MINILM, TINY_ROBERTA


@app.command()
@scale_options(flags=True)
@backend_options(provider=False, precision=TRAINING_PRECISION_HELP, flags=True)
@engine_options(flags=True)
@training_options()
@data_options(dataset_required=True, flags=True)
def roar(
    data: dict,
    out: Path = typer.Option(
        ...,
        "--out",
        help="Output directory: OUT/result.json, OUT/seed-S/step-000 (the unmasked model), "
        "OUT/seed-S/MEASURE/step-RRR (each step), OUT/seed-S/erasure (the no-retraining curve).",
    ),
    model: str = typer.Option(
        TINY_ROBERTA,
        "--model",
        help=f"The pretrained start every step's model is fine-tuned from: '{MINILM}' (the pretrained "
        f"all-MiniLM-L6-v2, offline; try --lr 5e-5), '{TINY_ROBERTA}' (from scratch, for trials), a Hugging "
        "Face masked language model name or a local model directory.",
    ),
    measure: list[str] = typer.Option(
        ["grad-l2"], "--measure", "-m", help="Importance measure; repeat for several. `rand` always runs."
    ),
    measure_option: MeasureOptionsOption = [],  # noqa: B006  (typer copies the default)
    recursive: bool = typer.Option(
        True,
        help="Rank with the previous step's model on the previous step's data (Recursive ROAR); "
        "--no-recursive ranks once, with the step-0 model on the unmasked data (ROAR).",
    ),
    strategy: str = typer.Option(
        "plain",
        "--strategy",
        help=f"{' | '.join(STRATEGIES)}: how every model is fine-tuned. plain (no masking) is the "
        "reference's; masked shows whether masked fine-tuning makes the retraining unnecessary.",
    ),
    steps: int = typer.Option(
        ROAR_MAX_STEPS,
        "--steps",
        help=f"K (1..{ROAR_MAX_STEPS}): the curve's ratios are j/K, j = 0..K; each step trains a model per "
        "measure, so fewer steps cost less.",
    ),
    seed: list[int] = typer.Option(
        [0], "--seed", min=0, help="Seed of the models, data order and `rand`; repeat for several."
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Use only the first N test examples."),
    erasure: bool = typer.Option(
        True, help="Also the no-retraining recursive erasure of the step-0 model on the test split."
    ),
    step0: list[Path] = typer.Option(
        [],
        "--step0",
        help="A finished `fmm-fast train` output (its --out) to take as a seed's step-0 model instead of "
        "training it again; it must have been trained with this run's data and recipe and --strategy, for "
        "one of its seeds. Repeat for several seeds.",
    ),
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    *,
    training: dict,
    engine: dict,
    backend: dict,
    scale: dict,
) -> None:
    """Recursive ROAR: at every ratio r = j/K, mask the top floor(r·n) explained tokens of every example of
    all three splits (already-masked tokens first), ranked by the measure with the previous step's model on
    the previous step's data, fine-tune a new model from the pretrained start on the result and score it on
    the masked test split. ACU/RACU against `rand` as for erasure (RACU also clipped to [−1, 1], as the
    Recursive ROAR paper reported it).

    Finished steps are kept: rerun the same command to resume. With --workers/--ray-address the chains of
    (seed, measure) run as Ray tasks (OUT on storage every worker sees). See docs/method.md.
    """
    from fmm_fast.api.roar import roar as run  # loads NumPy: not at --help
    from fmm_fast.distributed.roar_chains import ChainsFailed

    try:
        run(
            out=out,
            model=model,
            measure=measure,
            measure_option=measure_option,
            recursive=recursive,
            strategy=strategy,
            steps=steps,
            seed=seed,
            limit=limit,
            erasure=erasure,
            step0=step0,
            overwrite=overwrite,
            quiet=quiet,
            **data,
            **training,
            **engine,
            **backend,
            **scale,
        )
    except ChainsFailed as error:
        print(f"fmm-fast: {error}; rerun the same command to resume", file=sys.stderr)
        raise typer.Exit(1) from None

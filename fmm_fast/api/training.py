"""`fmm_fast.train` (the body of `fmm-fast train`): masked fine-tuning (docs/method.md §2) → a checkpoint
folder and run.json."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fmm_fast.api.arguments import checked_arguments
from fmm_fast.api.inputs import label_names, model_source, run_folder
from fmm_fast.api.options import backend_arguments, data_arguments, training_arguments
from fmm_fast.api.results import Training
from fmm_fast.backends.options import BackendOptions
from fmm_fast.core.optional_deps import TRAIN
from fmm_fast.core.outputs import output_lock
from fmm_fast.core.settings import TrainSettings
from fmm_fast.data.masking import DEFAULT_STRATEGY
from fmm_fast.data.options import DataOptions
from fmm_fast.training.base_models import TINY_ROBERTA


@checked_arguments
@backend_arguments(provider=False)
@training_arguments()
@data_arguments(split=False, dataset_required=True, units=False)
def train(
    data: DataOptions,
    out: str | Path | None = None,
    model: Any = TINY_ROBERTA,
    labels: str | Sequence[str] | None = None,
    strategy: str = DEFAULT_STRATEGY,
    seed: int = 0,
    overwrite: bool = False,
    quiet: bool = False,
    *,
    training: dict,
    backend: BackendOptions,
) -> Training:
    """Fine-tune a classifier with masking, keep the best validation epoch, test it at 0/50/100% masking:
    what `fmm-fast train` does, with its options.

    dataset: as for fmm_fast.evaluate (train/validation/test: a registry's splits, or 80/10/10 of a file
    or of data held in Python). model: the start, "tiny-roberta" (from scratch, seconds; layers × width),
    "minilm" (pretrained, offline; try lr=5e-5), a Hugging Face name or a local folder (a classifier is
    continued with its head), a `fmm_fast.train` result, or a loaded transformers (model, tokenizer) pair.
    strategy: masked
    (the paper's), plain or only-masked. out: the folder the command writes (rerun: resumes after the
    last finished epoch); None: a new temporary folder, kept. Returns Training: run.json and `model_dir`,
    which every other function takes as model= (or give the Training itself).

    Example: `trained = fmm_fast.train(dataset="movie-snippets", size=200, epochs=2, lr=1e-3)`
    """
    names = label_names(labels)
    out = run_folder(out, "train")
    with output_lock(out):  # before PyTorch and the data load: a second process exits at once
        TRAIN.require("training")
        from fmm_fast.training.train import MODEL_DIR, RUN_FILE
        from fmm_fast.training.train import train as run_training

        settings = TrainSettings(
            data,
            model=str(model_source(model)),
            strategy=strategy,
            seed=seed,
            **training,
            backend=backend,
            labels=tuple(names or ()),
        )
        record = run_training(settings, out, progress=not quiet, overwrite=overwrite)
    metric_name = record["dataset"]["metric"]
    best = record["epochs"][record["best_epoch"] - 1]
    print(
        f"{record['dataset']['name']}, {settings.model}, {strategy}, seed {seed}, "
        f"{settings.backend.precision}: best epoch {record['best_epoch']} of {len(record['epochs'])} "
        f"(validation {metric_name} {best['selection_metric']:.4f})"
    )
    test = ", ".join(
        f"{100 * float(ratio):.0f}% {values[metric_name]:.4f}" for ratio, values in record["test"].items()
    )
    print(f"test {metric_name} at explained-token masking {test}")
    print(
        f"majority baseline {record['majority_baseline']:.4f} ({metric_name} of always predicting "
        f"'{record['majority_label']}')"
    )
    print(f"wrote {out / MODEL_DIR} and {out / RUN_FILE}")
    return Training(out)

"""One Recursive ROAR step's files, record and model: trained, or reused from a step of the same seed whose
masked dataset was identical (same digest), so no dataset is trained on twice.

OUT/seed-S/step-000/ and OUT/seed-S/step-100/ are train() output directories (model/, run.json) plus the
step's record.json: the model trained on the unmasked data and the one on the fully masked data, shared by
every measure. OUT/seed-S/MEASURE/step-RRR/ (MEASURE: the measure's path name, measures/path_names.py) holds
record.json, dataset.npz (the masked dataset the next step starts from) and, when this step trained a
model, train/ (model/, run.json).

Every level has a run marker (core.outputs) listing what the run writes there: OUT/seed-S (claim_seed),
OUT/seed-S/MEASURE and its steps (claim_part), the trainings' own (with record.json added), so --overwrite
removes only those and a user's file anywhere in the tree stops it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.digest import content_sha256
from fmm_fast.core.errors import UserError
from fmm_fast.core.machine import machine_record
from fmm_fast.core.outputs import claim_part, list_files, read_marker
from fmm_fast.core.reading import read_state
from fmm_fast.core.records import write_record
from fmm_fast.core.settings import RoarSettings
from fmm_fast.data.base import TextDataset
from fmm_fast.protocols.roar.explaining import Passes
from fmm_fast.protocols.roar.masking import MaskedDataset, as_encoded, token_counts
from fmm_fast.training.checkpoint_layout import TOKENIZER_FILE

ROAR_KIND = "roar"
RECORD = "record.json"
LOGS = "logs"  # OUT/logs/: each Ray chain's output (distributed.roar_chains)
DATASET = "dataset.npz"
TRAIN_DIR = "train"
MODEL_DIR = "model"  # train()'s checkpoint folder


def step_name(ratio: float) -> str:
    """step-RRR, RRR the ratio in percent (3 digits)."""
    return f"step-{round(100 * ratio):03d}"


def seed_dir(out: Path, seed: int) -> Path:
    return out / f"seed-{seed}"


def relative(out: Path, path: Path) -> str:
    return path.relative_to(out).as_posix()


STEP_RECORD = {
    "seed": int,
    "measure": (str, None),
    "ratio": float,
    "model": {"path": str},
    "dataset_digest": str,
    "test_metric": float,
    "seconds": {"*": float},
    "passes": {"forward": int, "backward": int},
    "trained": bool,
}

# What a step reads of train()'s run.json (trained_block, and the result's metric and truncation).
TRAINED_RUN = {
    "arguments": {"batch_size": int, "strategy": str},
    "dataset": {
        "metric": str,
        "sizes": {"train": int, "validation": int, "test": int},
        "truncation": {"test": dict},
    },
    "epochs": [{"steps": int, "selection_metric": float}],
    "best_epoch": int,
    "test": {"0.0": {"*": float}},
    "majority_metrics": {"*": float},
    "durations": {"training": float, "validation": float, "test": float},
}


def read_step(directory: Path) -> dict | None:
    """A finished step's record, None when the step has not finished (or, with a warning, when its record
    is damaged: the step runs again)."""
    return read_state(directory / RECORD, STEP_RECORD)


def find_trained(out: Path, seed: int, digest: str) -> tuple[dict, Path] | None:
    """A finished step of `seed` that trained a model on the masked dataset with `digest`, and its folder."""
    root = seed_dir(out, seed)
    for path in sorted([*root.glob(f"step-*/{RECORD}"), *root.glob(f"*/step-*/{RECORD}")]):
        record = read_step(path.parent)
        if record is not None and record["trained"] and record["dataset_digest"] == digest:
            return record, path.parent
    return None


def training_passes(run: dict[str, Any]) -> Passes:
    """Rows a training ran: each epoch's training rows forward and backward, validation (3 ratios, and the
    masked copy unless plain) and the best checkpoint's test (3 ratios) forward."""
    sizes, arguments = run["dataset"]["sizes"], run["arguments"]
    trained = sum(min(e["steps"] * arguments["batch_size"], sizes["train"]) for e in run["epochs"])
    copies = 3 + (arguments["strategy"] != "plain")
    validated = len(run["epochs"]) * copies * sizes["validation"]
    return Passes(trained + validated + 3 * sizes["test"], trained)


def model_for(
    settings: RoarSettings,
    out: Path,
    seed: int,
    dataset: TextDataset,
    encoded: dict[str, EncodedSplit],
    masked: MaskedDataset,
    digest: str,
    train_dir: Path,
    progress: bool,
) -> dict[str, Any]:
    """The model block of a step's record: an earlier step's model when it trained on the same dataset,
    else a new model from the pretrained start trained on `masked` into `train_dir`."""
    from fmm_fast.training.train import train  # PyTorch: imported on use

    found = find_trained(out, seed, digest)
    if found is not None:
        record, where = found
        return {
            "model": record["model"],
            "test_metric": record["test_metric"],
            "validation_metric": record["validation_metric"],
            **not_trained_here(relative(out, where)),
        }
    run = train(
        settings.training(seed),
        train_dir,
        progress=progress,
        dataset=dataset,
        encoded=as_encoded(encoded, masked),
    )
    check_tokenizer(out, seed, train_dir / MODEL_DIR)
    return trained_block(out, run, train_dir, dataset.metric)


def step_model(out: Path, record: dict[str, Any]) -> Path:
    """The model a finished step's record names, checked against the sha256 the record holds: UserError
    when it changed (a model cannot be recomputed without training the step, and every later step again)."""
    path = out / record["model"]["path"]
    expected = record["model"].get("sha256")
    if expected is not None and (not path.exists() or content_sha256(path) != expected):
        raise UserError(
            f"{path} is not the model its step trained (it is missing, or its content differs from the "
            f"sha256 in the step's record.json); put the model back, or move {path.parent.parent} away and "
            "rerun to train it again"
        )
    return path


def not_trained_here(source: str) -> dict[str, Any]:
    """The cost fields of a model block whose model this run did not train: it took it from `source` (a
    step folder relative to OUT, or a training's absolute path)."""
    return {
        "seconds": {"train": 0.0, "evaluate": 0.0},
        "passes": Passes().as_dict(),
        "trained": False,
        "reused_from": source,
    }


def trained_block(out: Path, run: dict[str, Any], train_dir: Path, metric: str) -> dict[str, Any]:
    """The model block of a step that trained the model of run.json `run` in `train_dir`."""
    model = train_dir / MODEL_DIR
    durations = run["durations"]
    return {
        "model": {"path": relative(out, model), "sha256": content_sha256(model)},
        "test_metric": run["test"]["0.0"][metric],
        "validation_metric": run["epochs"][run["best_epoch"] - 1]["selection_metric"],
        "seconds": {"train": durations["training"] + durations["validation"], "evaluate": durations["test"]},
        "passes": training_passes(run).as_dict(),
        "trained": True,
        "reused_from": None,
    }


def check_tokenizer(out: Path, seed: int, model: Path) -> None:
    """Every model of a seed must tokenize as the step-0 model did: the masked datasets are its token ids
    (a base model that builds its tokenizer from the data must build the same one every time)."""
    first = seed_dir(out, seed) / step_name(0.0) / MODEL_DIR / TOKENIZER_FILE
    if (model / TOKENIZER_FILE).read_bytes() != first.read_bytes():
        raise RuntimeError(f"{model} does not have the step-0 model's tokenizer ({first})")


def step_record(
    seed: int,
    measure: str | None,
    ratio: float,
    digest: str,
    masked: MaskedDataset,
    encoded: dict[str, EncodedSplit],
    mask_id: int,
    metric: str,
    model: dict[str, Any],
    explained_passes: Passes,
    seconds: dict[str, float],
) -> dict[str, Any]:
    """One finished step's record (measure None: a step every measure of the seed shares)."""
    masked_tokens, explained_tokens = token_counts(masked, encoded, mask_id)
    return {
        "seed": seed,
        "measure": measure,
        "ratio": ratio,
        "model": model["model"],
        "dataset_digest": digest,
        "masked_tokens": masked_tokens,
        "explained_tokens": explained_tokens,
        "metric": metric,
        "test_metric": model["test_metric"],
        "validation_metric": model["validation_metric"],
        "seconds": {**seconds, **model["seconds"]},
        "passes": {
            "forward": explained_passes.forward + model["passes"]["forward"],
            "backward": explained_passes.backward + model["passes"]["backward"],
        },
        "trained": model["trained"],
        "reused_from": model["reused_from"],
        "machine": machine_record(),  # where this step's explaining and training ran
    }


def claim_step(directory: Path, seed: int, measure: str | None, ratio: float, files: list[str]) -> None:
    """Claim a step's folder for `files` (a measure's step: record, dataset, training), or, where a
    training claimed it (step 0, the fully masked step), add them to the training's marker."""
    marker = read_marker(directory) if directory.is_dir() else None
    if marker is not None and marker["kind"] == "train":
        list_files(directory, files)
    else:
        claim_part(directory, ROAR_KIND, {"seed": seed, "measure": measure, "ratio": ratio}, files)


def write_step(directory: Path, record: dict[str, Any]) -> None:
    """Write a finished step's record into its (claimed) folder: the step counts as done from here on."""
    claim_step(directory, record["seed"], record["measure"], record["ratio"], [RECORD])
    write_record(directory / RECORD, record)

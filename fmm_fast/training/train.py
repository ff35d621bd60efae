"""Masked fine-tuning (SPEC §2): train a classifier with the `plain`, `masked` or `only-masked` recipe.

The output directory gets `model/` (the checkpoint of the best validation epoch) and `run.json`:
  kind "train"; arguments; dataset {name, metric, label_names, sizes}; model {base, path, ...};
  epochs: per epoch {epoch, steps, train_loss, selection_metric, validation {ratio: metrics}, seconds};
  best_epoch; test {ratio: metrics} of the best checkpoint; majority_baseline (share of the most
  frequent test label); majority_metrics (all four metrics of always predicting it); durations; versions.
Ratios are "0.0", "0.5", "1.0": the share of every example's explained tokens masked uniformly at random,
and "metrics" are compute_metrics' four (accuracy, macro_f1, micro_f1, matthews).
run.json is rewritten after every epoch ("finished": false), so a running job can be followed.
"""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from torch import nn
from tqdm import tqdm

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.torch_backend import TorchBackend, resolve_torch_device
from fmm_fast.core.datatypes import EncodedSplit, ModelInfo, pad_batch
from fmm_fast.core.errors import UserError
from fmm_fast.core.metrics import compute_metrics
from fmm_fast.core.outputs import check_directory, claim_directory
from fmm_fast.core.records import Stopwatch, versions, write_record
from fmm_fast.core.settings import BUCKET_BATCHES, WEIGHT_DECAY, TrainSettings
from fmm_fast.data.base import TextDataset
from fmm_fast.data.masking import (
    mask_explained_share,
    mask_training_batch,
    pad_flags,
    random_masking,
)
from fmm_fast.data.tokenization import encode_split
from fmm_fast.training.base_models import TINY_ROBERTA
from fmm_fast.training.models import (
    SequenceClassifier,
    build_tiny_roberta,
    load_checkpoint,
    load_pretrained,
    quiet_transformers,
    save_checkpoint,
)

RATIOS = (0.0, 0.5, 1.0)  # explained-token masking shares reported per epoch and on test
WARMUP_SHARE = 0.06
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
MODEL_DIR = "model"
RUN_FILE = "run.json"


# ---------------------------------------------------------------------------------------------- optimizer


def optimizer_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW parameter groups: weight decay on everything but biases and LayerNorm weights."""
    decayed: list[nn.Parameter] = []
    exempt: list[nn.Parameter] = []
    seen: set[int] = set()  # tied parameters belong to several modules; give each to one group
    for module in model.modules():
        for name, parameter in module.named_parameters(recurse=False):
            if not parameter.requires_grad or id(parameter) in seen:
                continue
            seen.add(id(parameter))
            no_decay = name == "bias" or isinstance(module, nn.LayerNorm)
            (exempt if no_decay else decayed).append(parameter)
    return [{"params": decayed, "weight_decay": weight_decay}, {"params": exempt, "weight_decay": 0.0}]


def warmup_steps(total_steps: int) -> int:
    return int(WARMUP_SHARE * total_steps)


def linear_warmup_decay(step: int, warmup: int, total_steps: int) -> float:
    """LR factor before optimizer step `step` (0-based): linear 0 → 1 over `warmup` steps, then linear to 0
    at `total_steps`."""
    if step < warmup:
        return step / warmup
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup))


def make_optimizer(
    model: nn.Module, lr: float, total_steps: int, weight_decay: float = WEIGHT_DECAY
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (SPEC §2 defaults) with linear warm-up over 6% of `total_steps`, then linear decay to 0."""
    # foreach: one multi-tensor update instead of a Python loop over parameters (PyTorch only picks it by
    # default on CUDA); about 10× faster steps for MiniLM on a 2-core CPU
    optimizer = torch.optim.AdamW(
        optimizer_groups(model, weight_decay), lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS, foreach=True
    )
    warmup = warmup_steps(total_steps)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: linear_warmup_decay(step, warmup, total_steps)
    )
    return optimizer, schedule


# ---------------------------------------------------------------------------------------------- batches


def epoch_batches(
    lengths: np.ndarray, batch_size: int, rng: np.random.Generator, bucket_batches: int = BUCKET_BATCHES
) -> list[np.ndarray]:
    """One epoch's batches of row indices, lengths (N,) int64.

    The split is shuffled, cut into pools of `bucket_batches` batches, each pool sorted by length and cut
    into batches (less padding); then the rows inside each batch and the batch order are shuffled again,
    so which rows form the untouched first half of a batch stays random. bucket_batches=1: plain shuffle.
    """
    order = rng.permutation(len(lengths))
    pool_rows = batch_size * bucket_batches
    batches = []
    for start in range(0, len(order), pool_rows):
        pool = order[start : start + pool_rows]
        pool = pool[np.argsort(lengths[pool], kind="stable")]
        batches.extend(rng.permutation(pool[i : i + batch_size]) for i in range(0, len(pool), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def training_batch(
    encoded: EncodedSplit,
    rows: np.ndarray,
    info: ModelInfo,
    strategy: str,
    rng: np.random.Generator,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded, masked batch: input_ids (B, T), attention_mask (B, T), labels (B,), all int64 on `device`."""
    input_ids, attention_mask = pad_batch([encoded.input_ids[i] for i in rows], info.pad_id)
    maskable = pad_flags([encoded.maskable[i] for i in rows])
    input_ids = mask_training_batch(input_ids, maskable, strategy, info.mask_id, rng)
    labels = encoded.labels[rows]
    return tuple(torch.from_numpy(array).to(device) for array in (input_ids, attention_mask, labels))


# ---------------------------------------------------------------------------------------------- evaluation


def predict(
    model: SequenceClassifier, info: ModelInfo, device: torch.device, sequences: list[np.ndarray]
) -> np.ndarray:
    """(N,) sequences of (T_i,) int64 -> (N,) int64 predicted labels (eval mode, length-bucketed batches)."""
    engine = MaskBatchEngine(TorchBackend(model, info, device=str(device)), cache_rows=0)
    return engine.logits(sequences).argmax(axis=1).astype(np.int64)


def ratio_key(ratio: float) -> str:
    return f"{ratio:.1f}"


class ShareEvaluator:
    """Metrics of a split at 0%, 50% and 100% explained-token masking; the masked copies are drawn once."""

    def __init__(self, encoded: EncodedSplit, mask_id: int, num_labels: int, seed: int) -> None:
        self.labels = encoded.labels
        self.num_labels = num_labels
        self.copies = {ratio: mask_explained_share(encoded, ratio, mask_id, seed) for ratio in RATIOS}

    def evaluate(
        self, model: SequenceClassifier, info: ModelInfo, device: torch.device
    ) -> tuple[dict[str, dict[str, float]], np.ndarray]:
        """Metrics per ratio key, and the (N,) unmasked predictions."""
        predictions = {ratio: predict(model, info, device, copy) for ratio, copy in self.copies.items()}
        metrics = {
            ratio_key(ratio): compute_metrics(self.labels, predicted, self.num_labels)
            for ratio, predicted in predictions.items()
        }
        return metrics, predictions[0.0]


def selection_metric(
    strategy: str,
    metric: str,
    labels: np.ndarray,
    unmasked_predictions: np.ndarray,
    masked_predictions: np.ndarray | None,
    num_labels: int,
) -> float:
    """The primary metric model selection uses: unmasked (plain), masked copy (only-masked), or both
    concatenated (masked)."""
    parts = {
        "plain": [unmasked_predictions],
        "only-masked": [masked_predictions],
        "masked": [unmasked_predictions, masked_predictions],
    }[strategy]
    y_true = np.concatenate([labels] * len(parts))
    return compute_metrics(y_true, np.concatenate(parts), num_labels)[metric]


# ---------------------------------------------------------------------------------------------- training


def one_class_warning(predictions: np.ndarray, label_names: list[str], epoch: int) -> str | None:
    """The warning for a selected model that predicts one class on the whole validation split, or None.

    predictions: (N,) int64 unmasked validation predictions of the selected epoch.
    """
    predicted = np.unique(predictions)
    if len(predicted) != 1:
        return None
    return (
        f"the selected model (epoch {epoch}) predicts one class ('{label_names[int(predicted[0])]}') for all "
        f"{len(predictions)} validation examples: its erasure curves will be flat and RACU undefined; train "
        "longer or with another --lr (for imbalanced classes, select with --metric macro-f1)"
    )


def build_model(
    model_name: str, dataset: TextDataset, layers: int, width: int, seed: int
) -> tuple[SequenceClassifier, Tokenizer, ModelInfo]:
    """tiny-roberta (tokenizer trained on the train split's text, random weights) or a pretrained encoder."""
    if model_name == TINY_ROBERTA:
        train_split = dataset.splits["train"]
        texts = list(train_split.first) + list(train_split.second or [])
        return build_tiny_roberta(texts, dataset.label_names, layers=layers, width=width, seed=seed)
    torch.manual_seed(seed)  # the fresh classification head
    return load_pretrained(model_name, dataset.label_names)


def run_epoch(
    model: SequenceClassifier,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    bar: tqdm,
) -> list[float]:
    """One pass of optimizer steps over `batches` of (input_ids, attention_mask, labels); the losses."""
    model.train()
    losses = []
    for input_ids, attention_mask, labels in batches:
        logits, _ = model(input_ids, attention_mask)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        bar.update(1)
        bar.set_postfix(loss=f"{losses[-1]:.4f}")
    return losses


def train(
    settings: TrainSettings,
    out_dir: str | Path,
    progress: bool = True,
    dataset: TextDataset | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Fine-tune settings.model on settings.data with masking settings.strategy; write out_dir/model and
    out_dir/run.json.

    dataset: the data itself when it does not come from settings.data (e.g. built in memory); settings.data
    still names it in run.json. The LR schedule spans the steps max_steps caps it to (epochs after the cap
    are not run). out_dir must be new, empty or hold a run of these same settings, which is then trained
    again from the start (overwrite: replace whatever run it holds). Returns the run record (see the module
    docstring).
    """
    total_clock = Stopwatch()
    quiet_transformers()  # save_pretrained's progress bars would interleave with ours
    if settings.backend.device == "cuda" and not torch.cuda.is_available():
        raise UserError(
            "--device cuda was asked for but PyTorch sees no CUDA device; use --device auto or cpu"
        )
    out_dir = Path(out_dir)
    fields = settings.fingerprint_fields()
    check_directory(out_dir, "train", fields, overwrite)  # before any work; claimed once the data loads
    if dataset is None:
        dataset = settings.data.load()
    epochs = dataset.epochs if settings.epochs is None else settings.epochs
    strategy, seed, batch_size = settings.strategy, settings.seed, settings.batch_size
    model_name = settings.model
    model, tokenizer, info = build_model(model_name, dataset, settings.layers, settings.width, seed)
    claim_directory(out_dir, "train", fields, overwrite)
    for stale in (out_dir / RUN_FILE, out_dir / MODEL_DIR):  # a rerun of this same run starts afresh
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink(missing_ok=True)
    # The checkpoint is its own source (load_checkpoint fills its path in); the base model goes in run.json.
    info = replace(info, strategy=strategy, dataset=dataset.name, source="")
    torch_device = resolve_torch_device(settings.backend.device)
    model.to(torch_device)
    torch.manual_seed(seed)  # dropout
    order_rng, mask_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))

    encoded = {name: encode_split(tokenizer, split) for name, split in dataset.splits.items()}
    train_split, validation_split, test_split = encoded["train"], encoded["validation"], encoded["test"]
    num_labels = len(dataset.label_names)
    validation = ShareEvaluator(validation_split, info.mask_id, num_labels, seed)
    # The masked validation copy: every row at its own r ~ U[0, 1), drawn once, fixed across epochs.
    validation_masked = (
        None if strategy == "plain" else random_masking(validation_split, "only-masked", info.mask_id, seed)
    )

    lengths = np.asarray([len(ids) for ids in train_split.input_ids], dtype=np.int64)
    total_steps = epochs * math.ceil(len(train_split) / batch_size)
    if settings.max_steps is not None:
        total_steps = min(total_steps, settings.max_steps)
    optimizer, schedule = make_optimizer(model, settings.lr, total_steps, settings.weight_decay)

    record: dict[str, Any] = {
        "kind": "train",
        "finished": False,
        "arguments": replace(settings, epochs=epochs).to_dict(),
        "dataset": {
            "name": dataset.name,
            "metric": dataset.metric,
            "label_names": list(dataset.label_names),
            "sizes": {name: len(split) for name, split in encoded.items()},
        },
        "model": {
            "base": model_name,
            "path": str(out_dir / MODEL_DIR),
            "device": str(torch_device),
            "num_hidden_layers": info.num_hidden_layers,
            "hidden_size": info.hidden_size,
            "parameters": sum(p.numel() for p in model.parameters()),
        },
        "optimizer": {"total_steps": total_steps, "warmup_steps": warmup_steps(total_steps)},
        "epochs": [],
        "best_epoch": None,
        "versions": versions(),
    }
    best_score = -math.inf
    best_predictions = np.empty(0, dtype=np.int64)
    steps_left = total_steps
    durations = {"training": 0.0, "validation": 0.0}
    bar = tqdm(
        total=total_steps,
        desc=f"train {dataset.name} ({strategy})",
        unit="step",
        disable=None if progress else True,
        dynamic_ncols=True,
    )
    for epoch in range(1, epochs + 1):
        if steps_left == 0:
            break
        rows = epoch_batches(lengths, batch_size, order_rng, settings.bucket_batches)[:steps_left]
        batches = (training_batch(train_split, r, info, strategy, mask_rng, torch_device) for r in rows)
        with Stopwatch() as train_clock:
            losses = run_epoch(model, optimizer, schedule, batches, bar)
        steps_left -= len(losses)
        with Stopwatch() as validation_clock:
            metrics, unmasked_predictions = validation.evaluate(model, info, torch_device)
            masked_predictions = (
                None if validation_masked is None else predict(model, info, torch_device, validation_masked)
            )
            score = selection_metric(
                strategy,
                dataset.metric,
                validation_split.labels,
                unmasked_predictions,
                masked_predictions,
                num_labels,
            )
            if score > best_score:  # among equal epochs the first wins
                best_score = score
                best_predictions = unmasked_predictions
                record["best_epoch"] = epoch
                save_checkpoint(out_dir / MODEL_DIR, model, tokenizer, info)
        durations["training"] += train_clock.seconds
        durations["validation"] += validation_clock.seconds
        record["epochs"].append(
            {
                "epoch": epoch,
                "steps": len(losses),
                "train_loss": float(np.mean(losses)),
                "selection_metric": score,
                "validation": metrics,
                "seconds": train_clock.seconds + validation_clock.seconds,
            }
        )
        bar.set_postfix(epoch=epoch, val=f"{score:.3f}")
        write_record(out_dir / RUN_FILE, record)
    bar.close()

    with Stopwatch() as test_clock:
        best_model, _, best_info = load_checkpoint(out_dir / MODEL_DIR)
        test_metrics, _ = ShareEvaluator(test_split, info.mask_id, num_labels, seed).evaluate(
            best_model, best_info, torch_device
        )
    majority_label = int(np.bincount(test_split.labels, minlength=num_labels).argmax())
    majority_predictions = np.full(len(test_split), majority_label, dtype=np.int64)
    one_class = one_class_warning(best_predictions, dataset.label_names, record["best_epoch"])
    if one_class:
        print(f"fmm-fast: warning: {one_class}", file=sys.stderr)
    record.update(
        {
            "finished": True,
            "one_class_warning": one_class,
            "test": test_metrics,
            "majority_baseline": float(np.mean(test_split.labels == majority_label)),
            "majority_label": dataset.label_names[majority_label],
            "majority_metrics": compute_metrics(test_split.labels, majority_predictions, num_labels),
            "durations": {**durations, "test": test_clock.seconds, "total": total_clock.seconds},
        }
    )
    write_record(out_dir / RUN_FILE, record)
    return record

"""Masked fine-tuning (method.md §2): train a classifier with the `plain`, `masked` or `only-masked` recipe.

The output directory gets `model/` (the checkpoint of the best validation epoch) and `run.json`:
  kind "train"; arguments; dataset {name, metric, label_names, sizes, truncation (per split: examples cut
  to the model's maximum length, tokens kept / total)}; model {base, path, ...};
  epochs: per epoch {epoch, steps, train_loss, selection_metric, validation {ratio: metrics}, seconds};
  best_epoch; test {ratio: metrics} of the best checkpoint; majority_baseline (the primary metric of always
  predicting the most frequent test label); majority_metrics (all four metrics of it); durations (seconds:
  training and validation over every epoch, test, and total: the wall time of every invocation, an
  interrupted one's up to its last finished epoch); versions; machine (core.machine.machine_record: where
  the last invocation ran; a resumed run lists the earlier invocations' in earlier_machines, one per entry of
  resumed_after_epochs).
Ratios are "0.0", "0.5", "1.0": the share of every example's explained tokens masked uniformly at random,
and "metrics" are compute_metrics' four (accuracy, macro_f1, micro_f1, matthews).
Every forward pass of the run (optimizer steps, validation, test) runs in arguments.backend.precision:
fp32, or bf16/fp16 under torch.autocast with fp32 weights and optimizer state (fp16 with loss scaling);
the checkpoint's info records it as trained_precision.
run.json is rewritten after every epoch ("finished": false), so a running job can be followed, and
resume.pt saved, so a killed one resumes after its last finished epoch (fmm_fast.training.loop_state; the
file goes when the run finishes, and run.json's resumed_after_epochs lists where it resumed).
"""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from torch import nn
from tqdm import tqdm

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.torch_backend import TorchBackend, autocast, resolve_torch_device
from fmm_fast.core.datatypes import EncodedSplit, ModelInfo, pad_batch
from fmm_fast.core.errors import UserError
from fmm_fast.core.machine import machine_record
from fmm_fast.core.metrics import compute_metrics, majority_metric
from fmm_fast.core.outputs import check_directory, claim_directory, finish_run
from fmm_fast.core.progress import logged_progress_bar
from fmm_fast.core.records import Stopwatch, versions, write_record
from fmm_fast.core.settings import BUCKET_BATCHES, WEIGHT_DECAY, TrainSettings
from fmm_fast.data.base import TextDataset
from fmm_fast.data.labels import model_label_indices, relabelled
from fmm_fast.data.masking import (
    mask_explained_share,
    mask_training_batch,
    pad_flags,
    random_masking,
)
from fmm_fast.data.tokenization import encode_split
from fmm_fast.training.base_models import TINY_ROBERTA
from fmm_fast.training.hf_import import is_sequence_classifier, load_pretrained, open_classifier
from fmm_fast.training.loop_state import RESUME_FILE, LoopState, read_resume_file, splits_digest
from fmm_fast.training.models import (
    SequenceClassifier,
    build_tiny_roberta,
    load_checkpoint,
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
    """AdamW (method.md §2 defaults) with linear warm-up over 6% of `total_steps`, then linear decay to 0."""
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
    model: SequenceClassifier,
    info: ModelInfo,
    device: torch.device,
    sequences: list[np.ndarray],
    precision: str,
) -> np.ndarray:
    """(N,) sequences of (T_i,) int64 -> (N,) int64 predicted labels (eval mode, length-bucketed batches,
    forward passes in `precision`)."""
    engine = MaskBatchEngine(TorchBackend(model, info, device=str(device), precision=precision), cache_rows=0)
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
        self, model: SequenceClassifier, info: ModelInfo, device: torch.device, precision: str
    ) -> tuple[dict[str, dict[str, float]], np.ndarray]:
        """Metrics per ratio key, and the (N,) unmasked predictions (forward passes in `precision`)."""
        predictions = {
            ratio: predict(model, info, device, copy, precision) for ratio, copy in self.copies.items()
        }
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
    model_name: str,
    dataset: TextDataset,
    layers: int,
    width: int,
    seed: int,
    labels: list[str] | None = None,
) -> tuple[SequenceClassifier, Tokenizer, ModelInfo]:
    """tiny-roberta (tokenizer trained on the train split's text, random weights), a fine-tuned sequence
    classifier to continue from (its head and label names kept; `labels` renames generic ones) or a
    pretrained encoder with a new head for the dataset's labels."""
    if model_name == TINY_ROBERTA:
        train_split = dataset.splits["train"]
        texts = list(train_split.first) + list(train_split.second or [])
        return build_tiny_roberta(texts, dataset.label_names, layers=layers, width=width, seed=seed)
    if is_sequence_classifier(model_name):
        return open_classifier(model_name, labels)
    if labels is not None:
        raise UserError(
            f"--labels names a classifier's labels, and '{model_name}' is no fine-tuned classifier: its new "
            "head gets the dataset's labels; leave --labels out"
        )
    torch.manual_seed(seed)  # the fresh classification head
    return load_pretrained(model_name, dataset.label_names)


def run_epoch(
    model: SequenceClassifier,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    bar: tqdm,
    precision: str,
    scaler: torch.amp.GradScaler,
) -> list[float]:
    """One pass of optimizer steps over `batches` of (input_ids, attention_mask, labels); the losses.

    precision: of the forward passes (autocast; the backward pass follows it). scaler: fp16's loss scaling
    (disabled otherwise: a plain step).
    """
    model.train()
    losses = []
    device = next(model.parameters()).device
    for input_ids, attention_mask, labels in batches:
        with autocast(device, precision):
            logits, _ = model(input_ids, attention_mask)
        loss = F.cross_entropy(logits.float(), labels)  # the softmax in fp32, as autocast would
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        schedule.step()
        losses.append(loss.item())
        bar.update(1)
        bar.set_postfix(loss=f"{losses[-1]:.4f}")
    return losses


@dataclass
class TrainingRun:
    """What the steps of one training share: its settings, output directory, data, model and device."""

    settings: TrainSettings
    out_dir: Path
    dataset: TextDataset
    epochs: int
    model: SequenceClassifier
    tokenizer: Tokenizer
    info: ModelInfo
    device: torch.device
    start: str  # scratch (tiny-roberta) | pretrained (a new head) | classifier (continued: head kept)


@dataclass
class TrainingData:
    """The tokenized splits and what model selection validates on (masked copies drawn once).

    encoded: "train", "validation", "test" splits; validation_masked: the fixed masked validation copy, one
    (T_i,) array per example, None for plain.
    """

    encoded: dict[str, EncodedSplit]
    validation: ShareEvaluator
    validation_masked: list[np.ndarray] | None
    num_labels: int


def start_run(
    settings: TrainSettings, out_dir: Path, dataset: TextDataset | None, overwrite: bool
) -> TrainingRun:
    """Check the device and out_dir, load the data, build the model, claim out_dir (what an earlier run of
    these settings wrote stays for resume_or_clear)."""
    quiet_transformers()  # save_pretrained's progress bars would interleave with ours
    if settings.backend.device == "cuda" and not torch.cuda.is_available():
        raise UserError(
            "--device cuda was asked for but PyTorch sees no CUDA device; use --device auto or cpu"
        )
    fields = settings.fingerprint_fields()
    check_directory(out_dir, "train", fields, overwrite)  # before any work; claimed once the data loads
    if dataset is None:
        dataset = settings.data.load()
    epochs = dataset.epochs if settings.epochs is None else settings.epochs
    labels = list(settings.labels) if settings.labels else None
    model, tokenizer, info = build_model(
        settings.model, dataset, settings.layers, settings.width, settings.seed, labels
    )
    continued = settings.model != TINY_ROBERTA and is_sequence_classifier(settings.model)
    if continued:  # the classifier's labels, in its order: the dataset's are matched to them by name
        to_model = model_label_indices(dataset.label_names, info.label_names, settings.data.label_map)
        dataset = relabelled(dataset, info.label_names, to_model)
    claim_directory(out_dir, "train", fields, overwrite, files=(RUN_FILE, MODEL_DIR, RESUME_FILE))
    # The checkpoint is its own source (load_checkpoint fills its path in); the base model goes in run.json.
    info = replace(
        info,
        strategy=settings.strategy,
        dataset=dataset.name,
        source="",
        trained_precision=settings.backend.precision,
        trained_by="fmm-fast",
    )
    device = resolve_torch_device(settings.backend.device)
    model.to(device)
    start = "classifier" if continued else "scratch" if settings.model == TINY_ROBERTA else "pretrained"
    return TrainingRun(settings, out_dir, dataset, epochs, model, tokenizer, info, device, start)


def training_data(run: TrainingRun, encoded: dict[str, EncodedSplit] | None) -> TrainingData:
    """The splits (tokenized here unless given) and the validation sets model selection scores."""
    if encoded is None:
        data = run.settings.data
        encoded = {
            name: encode_split(run.tokenizer, split, max_length=data.max_length)
            for name, split in run.dataset.splits.items()
        }
    seed, mask_id = run.settings.seed, run.info.mask_id
    num_labels = len(run.dataset.label_names)
    validation_split = encoded["validation"]
    # The masked validation copy: every row at its own r ~ U[0, 1), drawn once, fixed across epochs.
    validation_masked = (
        None
        if run.settings.strategy == "plain"
        else random_masking(validation_split, "only-masked", mask_id, seed)
    )
    validation = ShareEvaluator(validation_split, mask_id, num_labels, seed)
    return TrainingData(encoded, validation, validation_masked, num_labels)


def total_optimizer_steps(settings: TrainSettings, epochs: int, train_rows: int) -> int:
    """Optimizer steps of the run: every epoch's batches, capped at settings.max_steps."""
    total_steps = epochs * math.ceil(train_rows / settings.batch_size)
    return total_steps if settings.max_steps is None else min(total_steps, settings.max_steps)


def new_record(run: TrainingRun, data: TrainingData, total_steps: int) -> dict[str, Any]:
    """run.json before the first epoch (see the module docstring)."""
    return {
        "kind": "train",
        "finished": False,
        "arguments": replace(run.settings, epochs=run.epochs).to_dict(),
        "dataset": {
            "name": run.dataset.name,
            "file": run.dataset.file,
            "splits": run.settings.data.splits_record(),
            "metric": run.dataset.metric,
            "label_names": list(run.dataset.label_names),
            "sizes": {name: len(split) for name, split in data.encoded.items()},
            "truncation": {name: split.truncation() for name, split in data.encoded.items()},
        },
        "model": {
            "base": run.settings.model,
            "start": run.start,
            "path": str(run.out_dir / MODEL_DIR),
            "device": str(run.device),
            "num_hidden_layers": run.info.num_hidden_layers,
            "hidden_size": run.info.hidden_size,
            "parameters": sum(p.numel() for p in run.model.parameters()),
        },
        "optimizer": {"total_steps": total_steps, "warmup_steps": warmup_steps(total_steps)},
        "epochs": [],
        "best_epoch": None,
        "versions": versions(),
        "machine": machine_record(),
    }


def validate(run: TrainingRun, data: TrainingData) -> tuple[dict[str, dict[str, float]], float, np.ndarray]:
    """The validation metrics per ratio key, the selection score and the (N,) unmasked predictions."""
    precision = run.settings.backend.precision
    metrics, unmasked_predictions = data.validation.evaluate(run.model, run.info, run.device, precision)
    masked_predictions = (
        None
        if data.validation_masked is None
        else predict(run.model, run.info, run.device, data.validation_masked, precision)
    )
    score = selection_metric(
        run.settings.strategy,
        run.dataset.metric,
        data.encoded["validation"].labels,
        unmasked_predictions,
        masked_predictions,
        data.num_labels,
    )
    return metrics, score, unmasked_predictions


def epoch_line(run: TrainingRun, epoch: dict[str, Any]) -> str:
    """One finished epoch (an entry of run.json's epochs) as a log line: loss, selection score, wall time."""
    return (
        f"train {run.dataset.name} ({run.settings.strategy}): epoch {epoch['epoch']}/{run.epochs}, "
        f"{epoch['steps']} steps, loss {epoch['train_loss']:.4f}, validation {run.dataset.metric} "
        f"{epoch['selection_metric']:.4f} (model selection), {epoch['seconds'] / 60:.1f} min"
    )


def resume_or_clear(run: TrainingRun, state: LoopState, record: dict[str, Any], digest: str) -> None:
    """Continue an interrupted run of these arguments and splits (digest) from its resume file: `state` and
    `record` take its epochs. Otherwise clear what an earlier run of these settings wrote: a rerun of a
    finished run, or of one on other data, starts afresh."""
    saved = read_resume_file(run.out_dir / RESUME_FILE, digest, record["arguments"])
    if saved is None:
        for stale in (run.out_dir / name for name in (RUN_FILE, MODEL_DIR, RESUME_FILE)):
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink(missing_ok=True)
        return
    earlier = state.restore(saved)
    record.update({**earlier, "machine": record["machine"]})  # where this invocation runs
    record.setdefault("resumed_after_epochs", []).append(state.epoch)
    record.setdefault("earlier_machines", []).append(earlier.get("machine"))  # where the epochs before ran
    print(
        f"fmm-fast: resuming {run.out_dir} after epoch {state.epoch} of {run.epochs} ({RESUME_FILE}); "
        "--overwrite starts afresh",
        file=sys.stderr,
    )


def train_epochs(
    run: TrainingRun,
    data: TrainingData,
    total_steps: int,
    record: dict[str, Any],
    progress: bool,
    total_clock: Stopwatch,
) -> tuple[np.ndarray, dict[str, float]]:
    """Every epoch: optimizer steps, validation, the checkpoint when the selection score improves, run.json,
    the resume file. An interrupted run of the same settings and splits continues after its last epoch
    (`record` then takes the interrupted run's epochs, and `total_clock` the wall time they took).

    Returns the best epoch's (N,) unmasked validation predictions and the training/validation seconds.
    """
    settings = run.settings
    torch.manual_seed(settings.seed)  # dropout
    order_rng, mask_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(settings.seed).spawn(2))
    optimizer, schedule = make_optimizer(run.model, settings.lr, total_steps, settings.weight_decay)
    precision = settings.backend.precision
    scaler = torch.amp.GradScaler(run.device.type, enabled=precision == "fp16")  # bf16 needs no scaling
    state = LoopState(run.model, optimizer, schedule, scaler, order_rng, mask_rng, steps_left=total_steps)
    digest = splits_digest(data.encoded)
    resume_or_clear(run, state, record, digest)
    total_clock.carry(state.durations.pop("total", 0.0))  # the interrupted invocations' time
    train_split = data.encoded["train"]
    lengths = np.asarray([len(ids) for ids in train_split.input_ids], dtype=np.int64)
    bar = logged_progress_bar(  # off a terminal: a line at the first step, then each minute
        total_steps,
        f"train {run.dataset.name} ({settings.strategy})",
        unit="step",
        quiet=not progress,
        initial=total_steps - state.steps_left,
    )
    for epoch in range(state.epoch + 1, run.epochs + 1):
        if state.steps_left == 0:
            break
        rows = epoch_batches(lengths, settings.batch_size, order_rng, settings.bucket_batches)
        rows = rows[: state.steps_left]  # max_steps may end the run inside an epoch
        batches = (
            training_batch(train_split, r, run.info, settings.strategy, mask_rng, run.device) for r in rows
        )
        with Stopwatch() as train_clock:
            losses = run_epoch(run.model, optimizer, schedule, batches, bar, precision, scaler)
        state.steps_left -= len(losses)
        with Stopwatch() as validation_clock:
            metrics, score, unmasked_predictions = validate(run, data)
            if score > state.best_score:  # among equal epochs the first wins
                state.best_score = score
                state.best_predictions = unmasked_predictions
                record["best_epoch"] = epoch
                save_checkpoint(run.out_dir / MODEL_DIR, run.model, run.tokenizer, run.info)
        state.durations["training"] += train_clock.seconds
        state.durations["validation"] += validation_clock.seconds
        state.epoch = epoch
        state.durations["total"] = total_clock.seconds  # what a resumed run carries over
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
        if progress and bar.disable:  # off a terminal (a log, a batch job): one line per epoch instead
            print(epoch_line(run, record["epochs"][-1]), file=sys.stderr, flush=True)
        write_record(run.out_dir / RUN_FILE, record)
        state.save(run.out_dir / RESUME_FILE, record, digest)
    bar.close()
    return state.best_predictions, state.durations


def checkpoint_results(
    run: TrainingRun, data: TrainingData, record: dict[str, Any], best_predictions: np.ndarray
) -> dict[str, Any]:
    """What run.json adds once training ends: the best checkpoint's test metrics and the majority baseline."""
    test_split, num_labels = data.encoded["test"], data.num_labels
    with Stopwatch() as test_clock:
        best_model, _, best_info = load_checkpoint(run.out_dir / MODEL_DIR)
        test_metrics, _ = ShareEvaluator(
            test_split, run.info.mask_id, num_labels, run.settings.seed
        ).evaluate(best_model, best_info, run.device, run.settings.backend.precision)
    majority_label = int(np.bincount(test_split.labels, minlength=num_labels).argmax())
    majority_predictions = np.full(len(test_split), majority_label, dtype=np.int64)
    one_class = one_class_warning(best_predictions, run.dataset.label_names, record["best_epoch"])
    if one_class:
        print(f"fmm-fast: warning: {one_class}", file=sys.stderr)
    return {
        "finished": True,
        "one_class_warning": one_class,
        "test": test_metrics,
        "majority_baseline": majority_metric(test_split.labels, run.dataset.metric, num_labels),
        "majority_label": run.dataset.label_names[majority_label],
        "majority_metrics": compute_metrics(test_split.labels, majority_predictions, num_labels),
        "test_seconds": test_clock.seconds,
    }


def train(
    settings: TrainSettings,
    out_dir: str | Path,
    progress: bool = True,
    dataset: TextDataset | None = None,
    overwrite: bool = False,
    encoded: dict[str, EncodedSplit] | None = None,
) -> dict[str, Any]:
    """Fine-tune settings.model on settings.data with masking settings.strategy; write out_dir/model and
    out_dir/run.json.

    dataset: the data itself when it does not come from settings.data (e.g. built in memory); settings.data
    still names it in run.json. encoded: the "train", "validation" and "test" splits already tokenized by
    this model's tokenizer (e.g. copies with tokens masked, as Recursive ROAR retrains on), used instead of
    tokenizing the dataset's text. The LR schedule spans the steps max_steps caps it to (epochs after the
    cap are not run). out_dir must be new, empty or hold a run of these same settings: an interrupted one
    resumes after its last finished epoch (fmm_fast.training.loop_state), a finished one is trained again
    from the start (overwrite: replace whatever run it holds). Returns the run record (see the module
    docstring).
    """
    total_clock = Stopwatch()
    run = start_run(settings, Path(out_dir), dataset, overwrite)
    if overwrite:  # the same settings keep their directory's claim: only the resume file says to resume
        (run.out_dir / RESUME_FILE).unlink(missing_ok=True)
    data = training_data(run, encoded)
    total_steps = total_optimizer_steps(settings, run.epochs, len(data.encoded["train"]))
    record = new_record(run, data, total_steps)
    best_predictions, durations = train_epochs(run, data, total_steps, record, progress, total_clock)
    results = checkpoint_results(run, data, record, best_predictions)
    test_seconds = results.pop("test_seconds")
    record.update({**results, "durations": {**durations, "test": test_seconds, "total": total_clock.seconds}})
    write_record(run.out_dir / RUN_FILE, record)
    (run.out_dir / RESUME_FILE).unlink(missing_ok=True)
    finish_run(run.out_dir)
    return record

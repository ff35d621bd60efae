"""Worked example: your own importance measure in ten lines, evaluated recursively beside the built-in ones.

    .venv/bin/python examples/your_measure.py --out DIR [--tiny]

`margin_loo` below is the whole measure: leave-one-out, but on the model's margin (the explained label's
logit minus the largest other logit) instead of the logit itself. It asks the engine for the logits of
each example with every explained token masked in turn (the engine batches, deduplicates and caches those
rows), and returns one score per token. Marked with `@fmm_fast.measure(signed=False)`, it goes wherever a
measure name goes: here into `fmm_fast.evaluate` beside `loo-abs`, recursively (it re-explains the masked
input at every erasure step), over three seeds, and then `fmm_fast.report` puts its RACU in the same table
and plot as the built-in measures (DIR/report). The same function from the command line:
`fmm-fast evaluate ... --measure ./examples/your_measure.py:margin_loo`.

1. `fmm_fast.train`: tiny-roberta masked-fine-tuned on movie-snippets (DIR/model);
2. `fmm_fast.evaluate` of margin_loo and loo-abs against rand, seeds 0, 1, 2 (DIR/evaluate);
3. `fmm_fast.report` (DIR/report: table.md, the curves).
--tiny: a few training steps, 8 test sentences and one seed, to show the steps run (the numbers of so small a
run mean nothing).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import fmm_fast


@fmm_fast.measure(signed=False)
def margin_loo(batch: fmm_fast.ExplainBatch, engine) -> np.ndarray:
    """|Δ margin| when token t is masked, margin = logit_y − the largest other logit: (B, T) scores."""
    scores, mask_id = np.zeros(batch.input_ids.shape), engine.info.mask_id
    for row, (ids, label) in enumerate(zip(batch.input_ids, batch.labels, strict=True)):
        length = int(batch.attention_mask[row].sum())
        positions = np.flatnonzero(batch.explained[row, :length] & (ids[:length] != mask_id))
        variants = np.repeat(ids[None, :length], len(positions) + 1, axis=0)  # row 0: the input itself
        variants[np.arange(1, len(positions) + 1), positions] = mask_id
        logits = engine.logits(list(variants))
        margins = logits[:, label] - np.delete(logits, label, axis=1).max(axis=1)
        scores[row, positions] = np.abs(margins[0] - margins[1:])
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="Folder for the model, runs and report.")
    parser.add_argument("--tiny", action="store_true", help="A few steps, 8 sentences, one seed (seconds).")
    args = parser.parse_args(argv)
    training = {"size": 64, "max_steps": 4, "lr": 1e-3} if args.tiny else {"size": 2000, "epochs": 3}
    trained = fmm_fast.train(dataset="movie-snippets", out=args.out / "model", quiet=True, **training)
    evaluation = fmm_fast.evaluate(
        trained,
        dataset="movie-snippets",
        measure=[margin_loo, "loo-abs"],
        seed=[0] if args.tiny else [0, 1, 2],
        limit=8 if args.tiny else 200,
        out=args.out / "evaluate",
        quiet=True,
    )
    report = fmm_fast.report(evaluation, out=args.out / "report")
    print(f"wrote {report.path}")
    return 0


if __name__ == "__main__":  # a Ray worker that loads this file as a measure runs none of this
    raise SystemExit(main())

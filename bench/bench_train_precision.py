"""bf16 against fp32 training: one seeded fine-tuning in both precisions, at the reproduction's small scale.

    .venv/bin/python bench/bench_train_precision.py [--datasets movie-snippets babi-1] [--seeds 0 ...]
                                                    [--strategy masked] [--epochs N] [--out DIR] [--quick]

For each dataset (its plan in bench/reproduce_plan.py's `small` scale: MiniLM, data sizes, epochs, lr) and
seed, `train()` runs twice with the same settings, data order and masks, once with --precision fp32 and once
with bf16 (PyTorch autocast; fp32 weights and optimizer state). Per pair it reports:
  - the primary test metric at 0 / 50 / 100% explained-token masking, as run.json records it (each run's
    forward passes in its own precision), and the bf16 model's test metric re-scored in fp32 (the same
    masked copies), which is how `evaluate` sees it by default: the gap to fp32 is then the model's alone;
  - the seconds of the optimizer steps (the same number of steps in both), validation and the whole run,
    and bf16's training throughput as a ratio against fp32's, measured in the same run.
Goal: every metric within 0.5 points of fp32, and at least 2× fp32's training throughput on a CPU with AMX.
Finished trainings under OUT are reused (the same settings only), so a run interrupted, or one dataset per
invocation, adds up; the table and OUT/train-precision.json (or --json PATH) cover every pair found in OUT.
A CPU without native bf16 is refused (bf16 would be emulated there). --quick: tiny-roberta on a few
examples, to check that it runs; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
from common import RESULTS_DIR, bench_parser, machine_line, print_table, ratio_text, write_record
from reproduce_plan import SCALES, DatasetPlan

from fmm_fast.backends.options import BackendOptions
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import read_marker
from fmm_fast.core.records import read_record
from fmm_fast.core.settings import TrainSettings
from fmm_fast.core.threads import physical_cores
from fmm_fast.data.options import DataOptions
from fmm_fast.data.tokenization import encode_split
from fmm_fast.training.base_models import TINY_ROBERTA
from fmm_fast.training.models import load_checkpoint
from fmm_fast.training.train import MODEL_DIR, RATIOS, RUN_FILE, ShareEvaluator, ratio_key, train

PAIR = ("fp32", "bf16")  # the baseline first
GOAL_POINTS = 0.5
QUICK_PLAN = DatasetPlan(
    "babi-1", TINY_ROBERTA, epochs=1, lr=1e-3, size=120, test_size=30,
    eval_limit=None, beam_limit=None, masf_limit=None, layers=1, width=32,
)  # fmt: skip


def settings_for(plan: DatasetPlan, seed: int, strategy: str, precision: str, device: str) -> TrainSettings:
    """The study's training of `plan` (as bench/reproduce runs it) at `precision`."""
    return TrainSettings(
        DataOptions(plan.dataset, size=plan.size, test_size=plan.test_size),
        model=plan.model,
        strategy=strategy,
        seed=seed,
        epochs=plan.epochs,
        lr=plan.lr,
        layers=plan.layers,
        width=plan.width,
        backend=BackendOptions(device=device, precision=precision),
    )


def trained(settings: TrainSettings, out: Path) -> dict:
    """out's finished run of these settings, or a new training of them into out."""
    marker = read_marker(out) if out.is_dir() else None
    fields = json.loads(json.dumps(settings.fingerprint_fields()))
    if marker is not None and marker["fields"] == fields and (out / RUN_FILE).is_file():
        record = read_record(out / RUN_FILE)
        if record.get("finished"):
            print(f"reused {out / RUN_FILE}", file=sys.stderr)
            return record
    return train(settings, out, progress=sys.stderr.isatty())


def rescored_in_fp32(settings: TrainSettings, out: Path) -> dict[str, dict[str, float]]:
    """The checkpoint's test metrics per ratio key with fp32 forward passes, on the masked copies its run
    scored (ShareEvaluator's, seeded alike)."""
    model, tokenizer, info = load_checkpoint(out / MODEL_DIR)
    encoded = encode_split(tokenizer, settings.data.load().splits["test"])
    evaluator = ShareEvaluator(encoded, info.mask_id, len(info.label_names), settings.seed)
    device = torch.device("cuda" if settings.backend.device == "cuda" else "cpu")
    return evaluator.evaluate(model, info, device, "fp32")[0]


def run_pair(plan: DatasetPlan, seed: int, strategy: str, device: str, root: Path) -> dict:
    """fp32 and bf16 trainings of one dataset and seed, and the bf16 model re-scored in fp32."""
    pair: dict = {"dataset": plan.dataset, "seed": seed, "strategy": strategy, "model": plan.model}
    for precision in PAIR:
        settings = settings_for(plan, seed, strategy, precision, device)
        out = root / plan.dataset / strategy / f"seed-{seed}" / precision
        record = trained(settings, out)
        pair["metric"] = record["dataset"]["metric"]
        pair["epochs"] = len(record["epochs"])
        pair["steps"] = record["optimizer"]["total_steps"]
        pair[precision] = {
            "path": str(out),
            "ran": record["arguments"]["backend"]["precision"],
            "test": record["test"],
            "train_loss": record["epochs"][-1]["train_loss"],
            "best_epoch": record["best_epoch"],
            "durations": record["durations"],
        }
        if precision != "fp32":
            pair[precision]["test_in_fp32"] = rescored_in_fp32(settings, out)
    return pair


def points(metrics: dict[str, dict[str, float]], metric: str) -> list[float]:
    """The metric ×100 at each ratio of RATIOS."""
    return [100 * metrics[ratio_key(ratio)][metric] for ratio in RATIOS]


def summary(pair: dict) -> dict:
    """The pair's comparison: the metric at each ratio, the largest gap to fp32 and the throughput ratio."""
    metric, fp32, bf16 = pair["metric"], pair["fp32"], pair["bf16"]
    baseline = points(fp32["test"], metric)
    own = points(bf16["test"], metric)
    in_fp32 = points(bf16["test_in_fp32"], metric)
    gap = max(abs(a - b) for a, b in zip(baseline + baseline, own + in_fp32, strict=True))
    return {
        "fp32": baseline,
        "bf16": own,
        "bf16_in_fp32": in_fp32,
        "largest_gap_points": gap,
        "within_goal": gap <= GOAL_POINTS,
        "train_seconds": {p: pair[p]["durations"]["training"] for p in PAIR},
        "total_seconds": {p: pair[p]["durations"]["total"] for p in PAIR},
        "throughput_ratio": fp32["durations"]["training"] / bf16["durations"]["training"],
        "total_ratio": fp32["durations"]["total"] / bf16["durations"]["total"],
    }


def report(pairs: list[dict]) -> None:
    header = ["dataset", "seed", "metric ×100 at 0/50/100% masked: fp32", "bf16", "bf16 model in fp32"]
    header += ["max gap", "steps", "train s fp32", "bf16", "throughput", "whole run s fp32", "bf16", "ratio"]
    rows = []
    for pair in pairs:
        s = summary(pair)
        rows.append(
            [
                pair["dataset"],
                str(pair["seed"]),
                " / ".join(f"{v:.1f}" for v in s["fp32"]),
                " / ".join(f"{v:.1f}" for v in s["bf16"]),
                " / ".join(f"{v:.1f}" for v in s["bf16_in_fp32"]),
                f"{s['largest_gap_points']:.1f}" + ("" if s["within_goal"] else " *"),
                str(pair["steps"]),
                f"{s['train_seconds']['fp32']:.0f}",
                f"{s['train_seconds']['bf16']:.0f}",
                ratio_text(s["throughput_ratio"]),
                f"{s['total_seconds']['fp32']:.0f}",
                f"{s['total_seconds']['bf16']:.0f}",
                ratio_text(s["total_ratio"]),
            ]
        )
    print_table(header, rows)
    print(f"* more than {GOAL_POINTS} points from fp32 (the goal). throughput: bf16's optimizer steps per")
    print("second ÷ fp32's (the same steps); whole run: training, validation and test.")


def finished_pairs(root: Path, strategy: str) -> list[dict]:
    """Every pair recorded under root (this invocation's and earlier ones'), in dataset and seed order."""
    found = []
    for path in sorted(root.glob(f"*/{strategy}/seed-*/pair.json")):
        found.append(read_record(path))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser: argparse.ArgumentParser = bench_parser(__doc__.splitlines()[0], repeat=False)
    small = {plan.dataset: plan for plan in SCALES["small"].datasets}
    parser.add_argument("--datasets", nargs="+", choices=sorted(small), default=["movie-snippets", "babi-1"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--strategy", default="masked", help="the masking strategy (default: masked)")
    parser.add_argument("--epochs", type=int, help="instead of the plan's epochs (a shorter run)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "train-precision")
    args = parser.parse_args(argv)
    torch.set_num_threads(physical_cores())  # the cores this process may use (taskset)
    plans = [QUICK_PLAN] if args.quick else [small[name] for name in args.datasets]
    if args.epochs is not None:
        plans = [replace(plan, epochs=args.epochs) for plan in plans]
    root = args.out / "quick" if args.quick else args.out
    print(machine_line())
    try:
        for plan in plans:
            for seed in args.seeds:
                pair = run_pair(plan, seed, args.strategy, args.device, root)
                write_record(root / plan.dataset / args.strategy / f"seed-{seed}" / "pair.json", pair)
    except UserError as error:  # bf16 without native bf16, a bad dataset option
        print(f"bench_train_precision: {error}", file=sys.stderr)
        return 2
    pairs = finished_pairs(root, args.strategy)
    report(pairs)
    record = {"pairs": pairs, "summaries": [summary(p) for p in pairs]}
    write_record(args.json or root / "train-precision.json", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Summarise a finished `fmm-fast roar` run beside a masked model's no-retraining erasure: RACU table, curve
plot, cost table, and the wall time of the run on N Ray workers PREDICTED from its measured step times.

    .venv/bin/python bench/roar_summary.py --roar OUT --masked EVALUATE_OUT/seed-0/result.json \\
        --out DIR [--workers 1 2 4 8]

Writes DIR/summary.json, DIR/summary.md (the tables) and DIR/curves.png (per measure: the Recursive ROAR
curve of the retrained models, and the no-retraining erasure curves of the plain step-0 model and of the
masked model). The prediction schedules the run as `fmm-fast roar --workers N` does: the driver trains each
seed's step-0 and fully masked models, then hands the (seed, measure) chains in order to the first idle
worker, then runs the no-retraining erasure; every chain costs the sum of its steps' measured seconds. It is
a model (one core per worker as fast as the measured one, Ray's start-up and each task's model loading
left out), not a measurement.
"""

from __future__ import annotations

import argparse
import heapq
import json
from pathlib import Path

from common import machine_line

from fmm_fast.core.records import read_record
from fmm_fast.protocols.roar.result import PHASES
from fmm_fast.protocols.roar.steps import read_step, seed_dir, step_name


def chain_seconds(out: Path, seed: int, measure: str, ratios: list[float]) -> float:
    """Measured seconds of every phase of one chain's steps."""
    records = [read_step(seed_dir(out, seed) / measure / step_name(r)) for r in ratios[1:]]
    return sum(sum(r["seconds"].get(p, 0.0) for p in PHASES) for r in records if r is not None)


def driver_seconds(out: Path, seed: int) -> float:
    """The seed's step-0 and fully masked trainings, which the driver runs before the chains."""
    records = [read_step(seed_dir(out, seed) / step_name(r)) for r in (0.0, 1.0)]
    return sum(sum(r["seconds"].get(p, 0.0) for p in PHASES) for r in records if r is not None)


def predicted_seconds(driver: float, chains: list[float], erasure: float, workers: int) -> float:
    """Driver, then the chains in order, each to the first idle of `workers`, then the erasure."""
    finish = [0.0] * workers
    for cost in chains:
        heapq.heappush(finish, heapq.heappop(finish) + cost)
    return driver + max(finish) + erasure


def plot(result: dict, plain: dict | None, masked: dict, path: Path) -> None:
    from matplotlib.figure import Figure

    names = [n for n in result["measures"] if n != "rand"]
    figure = Figure(figsize=(4 * len(names), 3.6), layout="constrained")
    metric = result["metric"]
    for axes, name in zip(figure.subplots(1, len(names), squeeze=False)[0], names, strict=True):
        curves = result["seeds"]["0"]["curves"]
        percent = [100 * r for r in result["ratios"]]
        axes.plot(percent, curves[name], "o-", label="Recursive ROAR (retrained)")
        axes.plot(percent, curves["rand"], "o--", color="grey", label="ROAR rand")
        for label, erasure, style in (
            ("plain, no retraining", plain, "s-"),
            ("masked, no retraining", masked, "^-"),
        ):
            if erasure is not None and name in erasure["curves"]:
                axes.plot(
                    [100 * r for r in erasure["ratios"]], erasure["curves"][name][metric], style, label=label
                )
        axes.axhline(result["majority_baseline"], color="black", linewidth=0.6, linestyle=":")
        axes.set(title=name, xlabel="masked explained tokens (%)", ylabel=metric)
    axes.legend(fontsize=7)
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--roar", type=Path, required=True, help="the `fmm-fast roar` output directory")
    parser.add_argument("--masked", type=Path, required=True, help="a masked model's evaluate result.json")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args()
    result = read_record(args.roar / "result.json")
    masked = read_record(args.masked)
    seed = int(next(iter(result["seeds"])))
    values = result["seeds"][str(seed)]
    plain = read_record(args.roar / values["erasure"]) if values["erasure"] else None
    rows = []
    for name in result["measures"]:
        rows.append(
            {
                "measure": name,
                "roar_racu": values["racu"][name],
                "roar_racu_clipped": values["racu_clipped"][name],
                "plain_no_retraining_racu": plain["measures"][name]["racu"] if plain else None,
                "masked_no_retraining_racu": masked["measures"].get(name, {}).get("racu"),
            }
        )
    chains = [chain_seconds(args.roar, seed, name, result["ratios"]) for name in result["measures"]]
    driver = driver_seconds(args.roar, seed)
    erasure = plain["durations"]["total_seconds"] if plain else 0.0
    masked_train = read_record(args.masked.parents[2] / "train" / "run.json")
    cost = {
        "roar": {**result["cost"], "erasure_seconds": erasure},
        "fmm": {
            "trainings": 1,
            "forward_passes": sum(m["forward_passes"] for m in masked["measures"].values()),
            "train_seconds": masked_train["durations"]["total"],
            "erasure_seconds": masked["durations"]["total_seconds"],
        },
        "chains_seconds": dict(zip(result["measures"], chains, strict=True)),
        "driver_seconds": driver,
        "predicted_seconds": {w: predicted_seconds(driver, chains, erasure, w) for w in args.workers},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {"machine": machine_line(), "racu": rows, "cost": cost}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(result, plain, masked, args.out / "curves.png")
    lines = [
        "| measure | Recursive ROAR RACU | clipped | plain, no retraining | masked, no retraining |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        cells = [
            row[k]
            for k in (
                "roar_racu",
                "roar_racu_clipped",
                "plain_no_retraining_racu",
                "masked_no_retraining_racu",
            )
        ]
        lines.append(
            f"| {row['measure']} | "
            + " | ".join("n/a" if v is None else f"{100 * v:.1f}" for v in cells)
            + " |"
        )
    lines += ["", "| workers | wall time (s) |", "|---|---|"]
    lines += [f"| {w} | {s:.0f} PREDICTED |" for w, s in cost["predicted_seconds"].items()]
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""The wall time of a finished `fmm-fast roar` run on N Ray workers, PREDICTED from its measured step times.

    .venv/bin/python bench/roar_summary.py --roar OUT --out DIR [--workers 1 2 4 8]

Writes DIR/roar-workers.json and DIR/roar-workers.md. The prediction schedules the run as `fmm-fast roar
--workers N` does: the driver trains each seed's step-0 and fully masked models, then hands the
(seed, measure) chains in order to the first idle worker, then runs the no-retraining erasure; every chain
costs the sum of its steps' measured seconds. It is a model (one core per worker as fast as the measured
one; Ray's start-up and each task's data and model loading left out), not a measurement: 1 worker gives the
measured phase time of the run itself. (`fmm-fast report` gives the RACU and cost tables and the figures.)
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

MEASURED = " (the measured phases, summed)"


def step_seconds(record: dict | None) -> float:
    return 0.0 if record is None else sum(record["seconds"].get(phase, 0.0) for phase in PHASES)


def predicted_seconds(driver: float, chains: list[float], erasure: float, workers: int) -> float:
    """Driver, then the chains in order, each to the first idle of `workers`, then the erasure."""
    finish = [0.0] * workers
    for cost in chains:
        heapq.heappush(finish, heapq.heappop(finish) + cost)
    return driver + max(finish) + erasure


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--roar", type=Path, required=True, help="the `fmm-fast roar` output directory")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args()
    result = read_record(args.roar / "result.json")
    driver, erasure, chains = 0.0, 0.0, {}
    for seed, values in result["seeds"].items():
        root = seed_dir(args.roar, int(seed))
        driver += sum(step_seconds(read_step(root / step_name(r))) for r in (0.0, 1.0))
        if values["erasure"]:
            erasure += read_record(args.roar / values["erasure"])["durations"]["total_seconds"]
        for name in result["measures"]:
            steps = [read_step(root / name / step_name(r)) for r in result["ratios"][1:]]
            chains[f"seed {seed} {name}"] = sum(step_seconds(record) for record in steps)
    predicted = {w: predicted_seconds(driver, list(chains.values()), erasure, w) for w in args.workers}
    summary = {
        "machine": machine_line(),
        "driver_seconds": driver,
        "chain_seconds": chains,
        "erasure_seconds": erasure,
        "predicted_seconds": predicted,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "roar-workers.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        f"Driver (step-0 and fully masked trainings) {driver:.0f} s; chains "
        + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in chains.items())
        + f"; no-retraining erasure {erasure:.0f} s.",
        "",
        "| Ray workers | wall time |",
        "|---|---|",
        *(f"| {w} | {s / 60:.1f} min{MEASURED if w == 1 else ' PREDICTED'} |" for w, s in predicted.items()),
    ]
    (args.out / "roar-workers.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

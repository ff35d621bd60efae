"""Benchmark scale-out on Ray: one process against Ray workers at equal cores, and a scaling model.

    .venv/bin/python bench/bench_scale.py [--quick] [--sentences N] [--sweep W ...] [--json PATH]

Throughput (whole erasure curves per second; `rand` runs beside each measure, as in `fmm-fast evaluate`)
of loo-abs and beam-sign-10 on the first N movie-snippets test sentences (default 100), in three layouts
of the same 2 cores:
  1 process × 2 threads   evaluate_model on ONNX Runtime with 2 intra-op threads (no Ray)
  2 Ray workers × 1 thread   evaluate_sharded, a local runtime of 2 CPUs
  1 Ray worker × 2 threads   evaluate_sharded, one actor of 2 CPUs
Each layout first runs untimed on its first WARMUP_SENTENCES sentences, in the process or on the very actors
then timed, so that cold ONNX Runtime sessions and first calls bias no layout.
Ray's cost = time of a Ray layout / time of the single process − 1 (goal: < 10% at equal cores). Also:
Ray start-up (ray.init + actors opening the model) and the scheduling overhead per task (round trip minus
time inside the actor). Every layout must give the single process's curves (RACU within 1e-3).

PREDICTED scaling: from the measured per-example beam-sign-10 cost (2-worker run), the per-task overhead
and the start-up, the wall time of beam-sign-10 on 872 sentences (SST-2 validation size; costs resampled
from the measured sentences) on 8, 32 and 128 workers of 1 CPU each, scheduled as the driver does (small
groups, costliest first, to the first idle worker). These rows are a model, not a measurement.
--sweep 1 2 4 8 (on a machine with that many cores) also measures beam search on W workers × 1 thread.
Needs the `ray` extra. About 30–40 minutes on 2 quiet cores (beam-sign-10 dominates); --quick (the tiny
model, beam-sign-2 on 6 sentences, the 2-worker layout only) takes seconds of work plus one Ray start-up,
and only checks that it runs.
"""

from __future__ import annotations

import heapq
import tempfile
import time
from pathlib import Path

import numpy as np
import ray
from common import (
    DATASET,
    bench_parser,
    default_record_path,
    machine_line,
    model_for,
    print_table,
    test_sentences,
)
from common import write_record as write_bench_record

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel
from fmm_fast.backends.onnx_backend import OnnxBackend
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.records import read_record
from fmm_fast.core.settings import EngineOptions, EvaluationSettings
from fmm_fast.data import load_dataset
from fmm_fast.data.options import DataOptions
from fmm_fast.distributed.evaluation import evaluate_sharded
from fmm_fast.distributed.pool import WorkerPool
from fmm_fast.distributed.runtime import ScaleOptions
from fmm_fast.distributed.sharding import GROUP_SIZE, GROUPS_PER_WORKER
from fmm_fast.protocols.erasure import evaluate_model

MEASURES = ("loo-abs", "beam-sign-10")
QUICK_MEASURES = (
    "beam-sign-2",
)  # beam (the last) is what the scaling model uses; each measure starts Ray twice
SINGLE = "1 process × 2 threads"
RAY_LAYOUTS = {"2 Ray workers × 1 thread": (2, 1), "1 Ray worker × 2 threads": (1, 2)}  # (workers, threads)
QUICK_RAY_LAYOUTS = 1  # --quick: the first only (2 workers: the scaling model's costs), one Ray start
PREDICTED_SENTENCES = 872
PREDICTED_WORKERS = (8, 32, 128)
WARMUP_SENTENCES = 4  # enough for every actor of the 2-worker layout to run each kind of task once


def warm_up_part(split: EncodedSplit) -> EncodedSplit:
    return split.subset(range(min(WARMUP_SENTENCES, len(split))))


def run_single(model_path: Path, dataset, split, measure: str) -> tuple[float, dict]:
    backend = OnnxBackend.from_file(model_path, provider="cpu", threads=2)
    loaded = LoadedModel(backend, backend.tokenizer, str(model_path))
    with tempfile.TemporaryDirectory() as out:
        first = warm_up_part(split)  # untimed, on the same session
        warm_up = settings(model_path, measure, len(first))
        evaluate_model(loaded, dataset, first, warm_up, Path(out) / "warm-up", MaskBatchEngine(backend))
        started = time.perf_counter()
        record = evaluate_model(
            loaded,
            dataset,
            split,
            settings(model_path, measure, len(split)),
            Path(out) / "timed",
            MaskBatchEngine(backend),
        )
        return time.perf_counter() - started, record


def run_ray(
    model_path: Path, dataset, split, measure: str, workers: int, threads: int
) -> tuple[float, dict, float, list]:
    """(seconds of the sharded evaluation, its record, start-up seconds: ray.init + actors opening the model,
    the measured per-example seconds of `measure`: each shard's time spread evenly over its examples)."""
    started = time.perf_counter()
    ray.init(num_cpus=workers * threads, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        options = ScaleOptions(workers=workers, worker_cpus=threads)
        with WorkerPool(ray, options, model_path, "cpu", EngineOptions(token_budget=2048)) as pool:
            startup = time.perf_counter() - started
            backend = OnnxBackend.from_file(model_path, provider="cpu", threads=1)  # tokenizer and info only
            loaded = LoadedModel(backend, backend.tokenizer, str(model_path))
            with tempfile.TemporaryDirectory() as out:
                # untimed, on the actors then timed (evaluate_sharded starts the pool's accounts afresh)
                first = warm_up_part(split)
                warm_up = settings(model_path, measure, len(first))
                evaluate_sharded(pool, loaded, dataset, first, warm_up, Path(out) / "warm-up")
                timed = Path(out) / "timed"
                started = time.perf_counter()
                run_settings = settings(model_path, measure, len(split))
                record = evaluate_sharded(pool, loaded, dataset, split, run_settings, timed)
                seconds = time.perf_counter() - started
                costs = []
                for path in (timed / "state" / "shards").glob("*.json"):
                    shard = read_record(path)
                    if measure in shard["measures"]:
                        share = shard["measures"][measure]["seconds"] / len(shard["indices"])
                        costs += [share] * len(shard["indices"])
                return seconds, record, startup, costs
    finally:
        ray.shutdown()


def settings(model_path: Path, measure: str, limit: int) -> EvaluationSettings:
    return EvaluationSettings(str(model_path), DataOptions(DATASET, "test", limit=limit), (measure,))


def predicted_wall_seconds(costs: np.ndarray, workers: int, startup: float, per_task: float) -> float:
    """Makespan of the driver's schedule: groups of similar cost, costliest first, to the first idle one."""
    size = max(1, min(GROUP_SIZE, len(costs) // (GROUPS_PER_WORKER * workers)))
    ordered = np.sort(costs)[::-1]
    groups = [ordered[i : i + size].sum() + per_task for i in range(0, len(ordered), size)]
    finish = [0.0] * workers
    for cost in groups:
        heapq.heappush(finish, heapq.heappop(finish) + cost)
    return startup + max(finish)


def main() -> None:
    parser = bench_parser(__doc__, repeat=False)
    parser.add_argument("--sentences", type=int, help="sentences per run (default 100, --quick 6)")
    parser.add_argument(
        "--sweep",
        type=int,
        nargs="+",
        metavar="W",
        help="also measure beam search on W Ray workers × 1 thread for each W (e.g. 1 2 4 8 on 16 cores)",
    )
    args = parser.parse_args()
    quick = args.quick
    sentences = args.sentences or (6 if quick else 100)
    measures = QUICK_MEASURES if quick else MEASURES
    model = model_for(args)
    model_path = model.onnx_path("fp32")
    split = test_sentences(model.tokenizer, sentences, short=quick)
    dataset = load_dataset(DATASET)
    print(machine_line())
    print(f"model: {model.description}; {len(split)} sentences; {', '.join(measures)}")
    rows, results, example_costs = [], {}, {}
    startups, per_task = [], []
    for measure in measures:
        base_seconds, base = run_single(model_path, dataset, split, measure)
        results[measure] = {SINGLE: {"seconds": base_seconds, "racu": base["measures"][measure]["racu"]}}
        rows.append([measure, SINGLE, f"{base_seconds:.1f}", f"{len(split) / base_seconds:.2f}", "—", "—"])
        for layout, (workers, threads) in list(RAY_LAYOUTS.items())[: QUICK_RAY_LAYOUTS if quick else None]:
            seconds, record, startup, costs = run_ray(model_path, dataset, split, measure, workers, threads)
            shards = sum(w["tasks"] for w in record["workers"]["per_worker"])
            overhead = record["workers"]["scheduling_overhead_seconds"] / max(1, shards)
            startups.append(startup)
            per_task.append(overhead)
            racu_gap = abs(record["measures"][measure]["racu"] - base["measures"][measure]["racu"])
            results[measure][layout] = {
                "seconds": seconds,
                "ray_cost": seconds / base_seconds - 1,
                "startup_seconds": startup,
                "tasks": shards,
                "overhead_per_task_seconds": overhead,
                "racu_gap": racu_gap,
                "workers": record["workers"],
            }
            if workers == 2:
                example_costs[measure] = costs
            rows.append(
                [
                    measure,
                    layout,
                    f"{seconds:.1f}",
                    f"{len(split) / seconds:.2f}",
                    f"{100 * (seconds / base_seconds - 1):+.1f}%",
                    f"{racu_gap:.1e}",
                ]
            )
    print_table(["measure", "layout", "seconds", "curves/s", "Ray cost", "|ΔRACU|"], rows)
    startup, overhead = float(np.median(startups)), float(np.median(per_task))
    print(
        f"Ray start-up (init + actors opening the model): median {startup:.1f} s; per-task overhead "
        f"median {1000 * overhead:.1f} ms"
    )

    measure = measures[-1]  # beam search
    sample = np.random.default_rng(0).choice(example_costs[measure], size=PREDICTED_SENTENCES, replace=True)
    predicted = {w: predicted_wall_seconds(sample, w, startup, overhead) for w in PREDICTED_WORKERS}
    print(
        f"\nPREDICTED (a model from the measured costs, not a measurement): {measure} on "
        f"{PREDICTED_SENTENCES} sentences, 1-CPU workers; one process would take {sample.sum() / 60:.1f} min"
    )
    print_table(
        ["workers", "PREDICTED wall", "speed-up"],
        [[str(w), f"{s / 60:.1f} min", f"{sample.sum() / s:.1f}×"] for w, s in predicted.items()],
    )
    sweep = {}
    if args.sweep:
        sweep_rows = []
        for workers in args.sweep:
            seconds, record, startup, _ = run_ray(model_path, dataset, split, measure, workers, 1)
            sweep[str(workers)] = {
                "seconds": seconds,
                "startup_seconds": startup,
                "workers": record["workers"],
            }
            speed_up = sweep[str(args.sweep[0])]["seconds"] / seconds
            sweep_rows.append(
                [str(workers), f"{seconds:.1f}", f"{len(split) / seconds:.2f}", f"{speed_up:.2f}×"]
            )
        print(f"\nmeasured: {measure} on {len(split)} sentences, W Ray workers × 1 thread")
        print_table(["workers", "seconds", "curves/s", f"speed-up vs {args.sweep[0]}"], sweep_rows)
    write_bench_record(
        args.json
        or default_record_path(quick).with_name(default_record_path(quick).name.replace("bench-", "scale-")),
        {
            "sentences": len(split),
            "layouts": results,
            "startup_seconds": startup,
            "overhead_per_task_seconds": overhead,
            "predicted": {
                "label": "PREDICTED: a model built from the measured per-example costs and overheads",
                "measure": measure,
                "sentences": PREDICTED_SENTENCES,
                "wall_seconds": {str(w): s for w, s in predicted.items()},
            },
            "sweep": sweep,
        },
    )


if __name__ == "__main__":
    main()

"""int-grad's speed now against an older commit of fmm-fast, on the same batches, in the same run.

    taskset -c 1 .venv/bin/python bench/int_grad_versions.py --old-tree DIR [--sentences N] [--ig-steps K]
        [--rounds R] [--measure NAME] [--json PATH] [--cache DIR] [--quick]

DIR is a checkout of the older commit (`git worktree add --detach /tmp/ig-old 13401b2`; default: this
checkout, against itself). The parent
tokenizes the movie-snippets test sentences once and writes the padded batches (as explain_split makes
them: 32 rows of similar length) to one .npz; each round then starts one process per tree (PYTHONPATH
selects the code; the same interpreter, torch and model) that loads the model, explains every batch with
the measure's default options but `ig_steps`, and reports its seconds (model loading and one warm-up batch
excluded) and its scores. Rows: each tree's best wall and CPU seconds over the rounds, their ratios old/new,
and the largest score difference between the trees (the speed-up must not change the scores). Pin the run
(`taskset -c 1`) on a shared machine: the child processes inherit it; the CPU-time ratio is the one a
busy machine disturbs least. --quick: the tiny model, 8 short sentences, 4 steps, one round, this checkout
against itself unless --old-tree (it only shows that the script runs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def run_child(batches_path: str, model_dir: str, measure_name: str, ig_steps: int, scores_path: str) -> None:
    """Explain every batch of `batches_path` with the code on PYTHONPATH; print {"wall": s, "cpu": s} as JSON
    (the process's CPU time: on a shared machine it leaves out the time other processes had the core).

    Uses only the API that 13401b2 and later share (load_checkpoint, TorchBackend, MaskBatchEngine,
    ExplainBatch, resolve_measure).
    """
    from fmm_fast.backends.engine import MaskBatchEngine
    from fmm_fast.backends.torch_backend import TorchBackend
    from fmm_fast.measures.base import ExplainBatch
    from fmm_fast.measures.spec import resolve_measure
    from fmm_fast.training.models import load_checkpoint

    model, _, info = load_checkpoint(model_dir)
    engine = MaskBatchEngine(TorchBackend(model, info))
    options = {"ig_steps": ig_steps} if "int-grad" in measure_name else {}
    measure = resolve_measure(measure_name, options).build(0)
    stored = np.load(batches_path)
    batches = [
        ExplainBatch(
            stored[f"input_ids_{b}"],
            stored[f"attention_mask_{b}"],
            stored[f"labels_{b}"],
            stored[f"explained_{b}"],
            stored[f"example_ids_{b}"],
        )
        for b in range(int(stored["batches"]))
    ]
    measure.explain(batches[0], engine)  # warm-up: a process's first passes are slower
    started, started_cpu = time.perf_counter(), time.process_time()
    scores = [measure.explain(batch, engine) for batch in batches]
    seconds = {"wall": time.perf_counter() - started, "cpu": time.process_time() - started_cpu}
    np.savez(scores_path, **{f"scores_{b}": s for b, s in enumerate(scores)})
    print(json.dumps(seconds))


def write_batches(path: Path, split, pad_id: int, batch_rows: int = 32) -> None:
    """The split's rows as explain_split batches them (sorted by length, right-padded) into one .npz."""
    from fmm_fast.core.datatypes import pad_batch

    order = np.argsort([len(s) for s in split.input_ids], kind="stable")
    arrays: dict[str, np.ndarray] = {}
    starts = range(0, len(order), batch_rows)
    for b, start in enumerate(starts):
        rows = order[start : start + batch_rows]
        input_ids, attention_mask = pad_batch([split.input_ids[i] for i in rows], pad_id)
        explained = np.zeros(input_ids.shape, dtype=bool)
        for r, i in enumerate(rows):
            explained[r, : len(split.input_ids[i])] = split.explained[i]
        arrays |= {
            f"input_ids_{b}": input_ids,
            f"attention_mask_{b}": attention_mask,
            f"labels_{b}": np.asarray(split.labels)[rows],
            f"explained_{b}": explained,
            f"example_ids_{b}": rows.astype(np.int64),
        }
    np.savez(path, batches=len(starts), **arrays)


def timed_child(tree: Path, batches: Path, model_dir: Path, args, scores: Path) -> dict[str, float]:
    environment = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, __file__, "--child", str(batches), str(model_dir), args.measure]
    command += [str(args.ig_steps), str(scores)]
    output = subprocess.run(command, env=environment, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def max_difference(first: Path, second: Path) -> float:
    a, b = np.load(first), np.load(second)
    return max(float(np.max(np.abs(a[key] - b[key]), initial=0.0)) for key in a.files)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        run_child(*sys.argv[2:5], int(sys.argv[5]), sys.argv[6])
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import bench_parser, machine_line, model_for, test_sentences, write_record

    parser = bench_parser(__doc__, repeat=False)
    parser.add_argument("--old-tree", type=Path, help="a checkout of the older commit (default: this one)")
    parser.add_argument("--sentences", type=int, default=100, help="movie-snippets test sentences (100)")
    parser.add_argument("--ig-steps", type=int, default=20, help="int-grad's K (20, the default)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per tree (3)")
    parser.add_argument("--measure", default="int-grad-abs", help="the measure timed (int-grad-abs)")
    args = parser.parse_args()
    if args.quick:
        args.sentences, args.ig_steps, args.rounds = 8, 4, 1
    model = model_for(args)
    split = test_sentences(model.tokenizer, args.sentences, short=args.quick)
    new_tree = Path(__file__).resolve().parent.parent
    trees = {"old": (args.old_tree or new_tree).resolve(), "new": new_tree}
    seconds: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in trees}
    with tempfile.TemporaryDirectory(prefix="int-grad-versions-") as folder:
        batches = Path(folder) / "batches.npz"
        write_batches(batches, split, model.info.pad_id)
        scores = {name: Path(folder) / f"scores-{name}.npz" for name in trees}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                for clock, value in timed_child(tree, batches, model.checkpoint, args, scores[name]).items():
                    seconds[name][clock].append(value)
        difference = max_difference(scores["old"], scores["new"])
    best = {(name, clock): min(values) for name in trees for clock, values in seconds[name].items()}
    ratios = {clock: best["old", clock] / best["new", clock] for clock in ("wall", "cpu")}
    print(machine_line())
    print(f"{model.description}; {len(split)} sentences, {args.measure}, {args.ig_steps} steps")
    print(f"old tree {trees['old']}, new tree {trees['new']}; rounds {args.rounds}")
    for name in trees:
        wall, cpu = best[name, "wall"], best[name, "cpu"]
        print(f"  {name}: best {wall:.2f} s wall, {cpu:.2f} s CPU  {seconds[name]}")
    print(
        f"old/new: {ratios['wall']:.2f}× (wall), {ratios['cpu']:.2f}× (CPU time); "
        f"largest score difference {difference:.3g}"
    )
    if args.json:
        write_record(
            args.json,
            {
                "trees": {name: str(tree) for name, tree in trees.items()},
                "measure": args.measure,
                "machine": machine_line(),
                "model": model.description,
                "sentences": len(split),
                "ig_steps": args.ig_steps,
                "seconds": seconds,
                "ratio_best": ratios,
                "max_score_difference": difference,
            },
        )


if __name__ == "__main__":
    main()

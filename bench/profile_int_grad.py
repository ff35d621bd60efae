"""Where int-grad's time goes on the PyTorch backend: one profile of `int-grad-abs` (its K interpolation
steps batched, gradient_batch_size (row, step) pairs per forward and backward pass) on movie-snippets
sentences, against loo-abs on the same sentences in the same run.

    .venv/bin/python bench/profile_int_grad.py [--quick] [--sentences N] [--ig-steps K] [--json PATH]
        [--cache DIR]

Rows: the seconds of int-grad-abs and of loo-abs (the ONNX-free engine on the same PyTorch backend, the
same sentences), their ratio, and torch.profiler's self CPU time of int-grad-abs by operator kind: the
matrix products (aten::mm, addmm, bmm, matmul, linear and their backward kernels counted where they run) and
everything else. The share in matrix products bounds what batching or trimming can still win: a run that
spends 80% of its time in matmuls at the model's own shapes cannot get 2× faster without fewer FLOPs.
--quick: the tiny model, 8 short sentences, 4 steps (it only shows that the script runs).
"""

from __future__ import annotations

import time
from collections import Counter

from common import bench_parser, machine_line, model_for, test_sentences, write_record

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.measures.spec import resolve_measure
from fmm_fast.protocols.erasure import explain_split

MATMUL_OPERATORS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation")


def run_measure(name: str, engine: MaskBatchEngine, split, options: dict) -> float:
    """Seconds of one explanation of every example of `split` by the measure `name`."""
    measure = resolve_measure(name, options).build(0)
    started = time.perf_counter()
    explain_split(measure, engine, split.input_ids, split, 32)
    return time.perf_counter() - started


def main() -> None:
    parser = bench_parser(__doc__, repeat=False)
    parser.add_argument("--sentences", type=int, default=64, help="movie-snippets test sentences (64)")
    parser.add_argument("--ig-steps", type=int, default=20, help="int-grad's K (20, the default)")
    args = parser.parse_args()
    if args.quick:
        args.sentences, args.ig_steps = 8, 4
    import torch
    from torch.profiler import ProfilerActivity, profile

    model = model_for(args)
    split = test_sentences(model.tokenizer, args.sentences, short=args.quick)
    engine = MaskBatchEngine(model.torch_backend(), cache_mb=0)  # no cache: loo-abs runs every row
    options = {"ig_steps": args.ig_steps}
    for name in ("loo-abs", "int-grad-abs"):  # warm-up: the first batches of a process are slower
        run_measure(name, engine, split.subset(range(2)), options)
    seconds = {name: run_measure(name, engine, split, options) for name in ("loo-abs", "int-grad-abs")}
    with profile(activities=[ProfilerActivity.CPU]) as profiled:
        profiled_seconds = run_measure("int-grad-abs", engine, split, options)
    by_kind: Counter[str] = Counter()
    for event in profiled.key_averages():
        kind = "matrix products" if event.key in MATMUL_OPERATORS else event.key
        by_kind[kind] += event.self_cpu_time_total
    total = sum(by_kind.values())
    matmul_share = by_kind["matrix products"] / total
    print(machine_line())
    print(
        f"{model.description}; {len(split)} sentences, int-grad-abs with {args.ig_steps} steps, torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads"
    )
    print(
        f"loo-abs {seconds['loo-abs']:.1f} s, int-grad-abs {seconds['int-grad-abs']:.1f} s "
        f"({seconds['int-grad-abs'] / seconds['loo-abs']:.1f}× loo-abs); profiled {profiled_seconds:.1f} s"
    )
    print(f"self CPU time of int-grad-abs: matrix products {matmul_share:.0%}; the rest:")
    for kind, micros in by_kind.most_common(8):
        if kind != "matrix products":
            print(f"  {kind:<40} {micros / total:6.1%}")
    if args.json:
        write_record(
            args.json,
            {
                "machine": machine_line(),
                "model": model.description,
                "sentences": len(split),
                "ig_steps": args.ig_steps,
                "seconds": seconds,
                "profiled_seconds": profiled_seconds,
                "matmul_share": matmul_share,
                "self_cpu_share": {kind: micros / total for kind, micros in by_kind.most_common(12)},
            },
        )


if __name__ == "__main__":
    main()

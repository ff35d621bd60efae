"""Where the bf16 engine's time goes on the LOO workload: OpenVINO bf16 (what `--precision bf16` runs for an
.onnx on CPU) against this CPU's bf16 matmul peak, measured in the same run.

    taskset -c 1 .venv/bin/python bench/bench_bf16_profile.py [--quick] [--sentences N] [--repeat N]
                                                              [--json PATH]

Rows (the LOO workload of bench_occlusion: loo-abs on the first --sentences movie-snippets test sentences
through the engine, as `fmm-fast evaluate` runs it; useful GFLOP/s as common.FLOP_FORMULA counts them):
  - the bf16 matmul peak: the best of torch and OpenVINO at 2048² (common.matmul_peaks) and OpenVINO bf16
    at the model's own GEMM shapes (BUDGET_ROWS tokens × D → I, I → D, D → D);
  - per setting, a cold pass (a freshly compiled model after one small warm-up batch: every batch shape is
    new to the plugin, as in a real run) and the best warm pass (the same shapes again): their difference
    is the plugin's per-shape planning; the distinct (rows, length) shapes the engine ran. Settings: the
    engine's default token budget, other budgets, and lengths padded to buckets (Bucketed), with
    max |Δscore| against the default (bf16 rounding may differ with the padding and the batch shapes);
  - a per-operation profile of one warm pass of the default setting (the plugin's PERF_COUNT): the share
    of the model's time in matrix products (FullyConnected, MatMul) and in every other kind of node.
"""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
from bench_occlusion import engine_loo, loo_row_lengths
from common import (
    bench_parser,
    encoder_flops,
    machine_line,
    matmul_peaks,
    model_for,
    print_table,
    rounds,
    share_text,
    test_sentences,
    write_record,
)

from fmm_fast.backends.engine import DEFAULT_TOKEN_BUDGET, MaskBatchEngine
from fmm_fast.backends.openvino_backend import OpenVinoBackend
from fmm_fast.core.threads import compute_threads
from fmm_fast.measures import get_measure
from fmm_fast.protocols.erasure import explain_split

SETTINGS = {  # name -> (token budget, length bucket)
    "default (budget 2048, no buckets)": (DEFAULT_TOKEN_BUDGET, 1),
    "budget 1024": (1024, 1),
    "budget 4096": (4096, 1),
    "budget 8192": (8192, 1),
    "buckets of 8 tokens": (DEFAULT_TOKEN_BUDGET, 8),
    "buckets of 16 tokens": (DEFAULT_TOKEN_BUDGET, 16),
}
MATMUL_NODES = ("FullyConnected", "MatMul")
BUDGET_ROWS = 2048  # tokens per GEMM at the default token budget


class Bucketed:
    """A backend wrapper that pads each batch's length up to a multiple of `bucket` (the padding is masked
    out), so the plugin meets fewer distinct shapes, and records the (rows, length) shapes it ran."""

    def __init__(self, backend: OpenVinoBackend, bucket: int) -> None:
        self.backend = backend
        self.bucket = bucket
        self.info = backend.info
        self.name = backend.name
        self.shapes: set[tuple[int, int]] = set()

    def forward(self, input_ids: np.ndarray, attention_mask: np.ndarray, with_signals: bool = False):
        extra = -input_ids.shape[1] % self.bucket
        input_ids = np.pad(input_ids, ((0, 0), (0, extra)), constant_values=self.info.pad_id)
        attention_mask = np.pad(attention_mask, ((0, 0), (0, extra)))
        self.shapes.add(input_ids.shape)
        return self.backend.forward(input_ids, attention_mask, with_signals)


def gemm_gflops(rows: int, inner: int, outer: int, repeat: int = 5) -> float:
    """Best GFLOP/s of OpenVINO bf16 on (rows × inner) @ (inner × outer) with a constant weight, as the
    model's FullyConnected nodes run."""
    import openvino
    import openvino.opset13 as ops

    x = ops.parameter([rows, inner], np.float32, name="x")
    weight = ops.constant(np.random.default_rng(0).standard_normal((inner, outer)).astype(np.float32))
    model = openvino.Model([ops.matmul(x, weight, False, False)], [x], "gemm")
    compiled = openvino.Core().compile_model(
        model, "CPU", {"INFERENCE_PRECISION_HINT": "bf16", "INFERENCE_NUM_THREADS": compute_threads()}
    )
    feed = np.random.default_rng(1).standard_normal((rows, inner)).astype(np.float32)
    compiled(feed)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        compiled(feed)
        best = min(best, time.perf_counter() - start)
    return 2 * rows * inner * outer / best / 1e9


def run_setting(path, split, budget: int, bucket: int, repeat: int) -> dict:
    """Cold and warm passes of one setting on a freshly compiled model."""
    backend = Bucketed(OpenVinoBackend(path, "bf16"), bucket)
    warm_up = split.subset([0])
    explain_split(get_measure("loo-abs"), MaskBatchEngine(backend), warm_up.input_ids, warm_up, 32)
    backend.shapes.clear()
    run = engine_runner(backend, split, budget)
    start = time.perf_counter()
    scores = run()
    cold = time.perf_counter() - start
    warm = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        warm.append(time.perf_counter() - start)
    return {"cold": cold, "warm": min(warm), "shapes": len(backend.shapes), "scores": scores}


def engine_runner(backend, split, budget: int):
    """bench_occlusion.engine_loo at another token budget."""

    def run() -> list[np.ndarray]:
        engine = MaskBatchEngine(backend, token_budget=budget)
        return explain_split(get_measure("loo-abs"), engine, split.input_ids, split, 32)

    return run


def node_profile(path, split) -> dict[str, float]:
    """Seconds per node type over one warm pass of the default setting (the plugin's own timings)."""
    backend = OpenVinoBackend(path, "bf16", properties={"PERF_COUNT": True})
    profiled = Profiling(backend)
    run = engine_loo(profiled, split)
    run()
    profiled.seconds.clear()
    run()
    return dict(profiled.seconds.most_common())


class Profiling:
    """A backend wrapper that adds up the plugin's per-node timings of every forward."""

    def __init__(self, backend: OpenVinoBackend) -> None:
        self.backend = backend
        self.info = backend.info
        self.name = backend.name
        self.seconds: Counter[str] = Counter()

    def forward(self, input_ids: np.ndarray, attention_mask: np.ndarray, with_signals: bool = False):
        output = self.backend.forward(input_ids, attention_mask, with_signals)
        for node in self.backend.profiling_info():
            self.seconds[node.node_type] += node.real_time.total_seconds()
        return output


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--sentences", type=int, help="LOO workload sentences (default 100, --quick 5)")
    args = parser.parse_args()
    bench_model = model_for(args)
    print(machine_line())
    print(f"model: {bench_model.description}; threads: {compute_threads()}")
    _, width, intermediate = bench_model.shape
    peaks = matmul_peaks("cpu", "bf16", quick=args.quick)
    if not peaks:
        parser.error("this CPU has no native bf16 (avx512_bf16 / amx_bf16): there is no bf16 peak to profile")
    gemms = {
        f"{BUDGET_ROWS}×{width}→{intermediate}": gemm_gflops(BUDGET_ROWS, width, intermediate),
        f"{BUDGET_ROWS}×{intermediate}→{width}": gemm_gflops(BUDGET_ROWS, intermediate, width),
        f"{BUDGET_ROWS}×{width}→{width}": gemm_gflops(BUDGET_ROWS, width, width),
    }
    # a model-shaped GEMM may outrun the 2048² one (which spills the L2 cache in bf16): the best counts
    peak = max([*peaks.values(), *gemms.values()])
    split = test_sentences(
        bench_model.tokenizer, args.sentences or (5 if args.quick else 100), short=args.quick
    )
    lengths = loo_row_lengths(split, bench_model.info.mask_id)
    gflop = encoder_flops(lengths, bench_model.shape, first_token_last_layer=True) / 1e9
    path = bench_model.onnx_path("fp32")
    settings = {
        name: run_setting(path, split, budget, bucket, rounds(args))
        for name, (budget, bucket) in SETTINGS.items()
    }
    reference = settings[next(iter(SETTINGS))]["scores"]
    for found in settings.values():
        found["max_abs_score_diff"] = max(
            float(np.abs(a - b).max(initial=0.0)) for a, b in zip(found.pop("scores"), reference, strict=True)
        )
    profile = node_profile(path, split)
    total = sum(profile.values())
    matmul = sum(profile.get(name, 0.0) for name in MATMUL_NODES)

    print(
        f"bf16 matmul peak {peak:.0f} GFLOP/s (" + ", ".join(f"{k} {v:.0f}" for k, v in peaks.items()) + ")"
    )
    print("OpenVINO bf16 at the model's GEMM shapes: " + ", ".join(f"{k} {v:.0f}" for k, v in gemms.items()))
    print(f"\nLOO workload: {len(split)} sentences, {len(lengths)} rows, {gflop:.0f} useful GFLOP")
    print_table(
        [
            "setting",
            "cold",
            "warm (best)",
            "shapes",
            "warm GFLOP/s (of the bf16 peak)",
            "cold share",
            "max |Δscore|",
        ],
        [
            [
                name,
                f"{found['cold']:.2f} s",
                f"{found['warm']:.2f} s",
                str(found["shapes"]),
                share_text(gflop / found["warm"], peak),
                share_text(gflop / found["cold"], peak).split(" = ")[-1],
                f"{found['max_abs_score_diff']:.1e}",
            ]
            for name, found in settings.items()
        ],
    )
    print(
        f"\nper-node profile of one warm default pass: {total:.2f} s in the plugin; matrix products "
        f"{100 * matmul / total:.0f}%"
    )
    print_table(
        ["node type", "seconds", "share"],
        [[k, f"{v:.3f}", f"{100 * v / total:.1f}%"] for k, v in profile.items() if v / total >= 0.005],
    )
    if args.json:
        write_record(
            args.json,
            {
                "peaks": peaks,
                "gemms": gemms,
                "gflop": gflop,
                "rows": len(lengths),
                "settings": settings,
                "profile": profile,
            },
        )


if __name__ == "__main__":
    main()

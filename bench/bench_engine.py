"""Benchmark the mask-batch engine's forward throughput on LOO rows, and sweep its settings.

    .venv/bin/python bench/bench_engine.py [--quick] [--device cpu|cuda] [--sentences N] [--repeat N]
                                           [--token-budget N] [--json PATH]

Model: common.prepare_model() (MiniLM-L6, exported fp32 and int8 by `export_onnx`). Workload: the first N
movie-snippets test sentences; per sentence its n + 1 LOO rows (the sentence and its n single-token
maskings of explained tokens). Every row below runs exactly these rows and turns their logits into
loo-abs scores; max |Δscore| is against (1).

Rows: (1) straightforward PyTorch: one batch per sentence (equal lengths: no padding), inference_mode;
(2) the engine on TorchBackend; (3) the engine on ORT fp32; (4) on CPU, the engine on ORT int8 (another
model). The engine runs with --token-budget (the table) and is then swept over token_budget × max_rows,
and on CPU over ORT intra-op threads.

Timing: per chunk of CHUNK_SENTENCES sentences the rows take turns, --repeat rounds (common.best_of_rounds),
and a row's time is the sum of its best chunk times: a burst of load from another process on a shared
machine spoils one run of one chunk, not a whole row; the best runs also have their shapes warm. GFLOP/s
count useful FLOPs only (common.FLOP_FORMULA, non-padding tokens); the peak is common.peak_gflops (on CPU
the best of torch, ONNX Runtime and NumPy matmuls), the best of its measurements between chunks; a share
above 100% is printed as a bench error (common.share_text), never as a figure.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
from bench_occlusion import loo_row_lengths, straightforward_loo
from common import (
    FLOP_FORMULA,
    BenchModel,
    bench_parser,
    best_of_rounds,
    check_device,
    encoder_flops,
    machine_line,
    max_abs_difference,
    model_for,
    peak_gflops,
    peak_share,
    print_table,
    ratio_text,
    rounds,
    share_text,
    test_sentences,
    write_record,
)

from fmm_fast.backends.base import Backend
from fmm_fast.backends.engine import DEFAULT_TOKEN_BUDGET, MaskBatchEngine, mask_positions
from fmm_fast.backends.onnx_backend import OnnxBackend
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.threads import physical_cores

CHUNK_SENTENCES = 10
ENGINE_DEFAULTS = (DEFAULT_TOKEN_BUDGET, 512)  # MaskBatchEngine's token_budget and max_rows
SWEEP_BUDGETS = (512, 1024, 2048, 4096, 8192, 16384)
SWEEP_MAX_ROWS = (32, 512)

LooRunner = Callable[[EncodedSplit], list[np.ndarray]]  # chunk -> per sentence (T_i,) loo-abs scores


def engine_loo(backend: Backend, token_budget: int, max_rows: int) -> LooRunner:
    """The chunk's LOO rows through a fresh engine (no cache carried between runs), scored like (1)."""

    def run(split: EncodedSplit) -> list[np.ndarray]:
        mask_id = backend.info.mask_id
        requests, spans = [], []
        for ids, explained in zip(split.input_ids, split.explained, strict=True):
            positions = np.flatnonzero(explained & (ids != mask_id))
            masks = np.zeros((len(positions) + 1, len(ids)), dtype=bool)
            masks[np.arange(1, len(positions) + 1), positions] = True
            spans.append((len(requests), positions))
            requests.extend(mask_positions(ids, masks, mask_id))
        engine = MaskBatchEngine(backend, token_budget=token_budget, max_rows=max_rows, cache_rows=0)
        logits = engine.logits(requests).astype(np.float64)
        scores = []
        for (start, positions), ids, label in zip(spans, split.input_ids, split.labels, strict=True):
            target = logits[start : start + len(positions) + 1, int(label)]
            sentence = np.zeros(len(ids), dtype=np.float64)
            sentence[positions] = np.abs(target[0] - target[1:])
            scores.append(sentence)
        return scores

    return run


def time_in_chunks(
    runners: dict[str, LooRunner], split: EncodedSplit, repeat: int, chunk: int, device: str, quick: bool
) -> tuple[dict[str, tuple[float, list[np.ndarray]]], float]:
    """Per runner: summed best-of-`repeat` seconds over chunks of `chunk` sentences, and its scores; and the
    best matmul peak (GFLOP/s) measured between chunks (quick: a small matmul's)."""
    seconds = dict.fromkeys(runners, 0.0)
    scores: dict[str, list[np.ndarray]] = {name: [] for name in runners}
    peak = 0.0
    for start in range(0, len(split), chunk):
        part = split.subset(range(start, min(start + chunk, len(split))))
        timed = best_of_rounds(
            {name: (lambda run=run, part=part: run(part)) for name, run in runners.items()}, repeat
        )
        for name, (took, result) in timed.items():
            seconds[name] += took
            scores[name].extend(result)
        peak = max(peak, peak_gflops(device, "fp32", repeat=3, quick=quick))
    return {name: (seconds[name], scores[name]) for name in runners}, peak


def results_table(
    timed: dict[str, tuple[float, list[np.ndarray]]],
    split: EncodedSplit,
    bench_model: BenchModel,
    peak: float,
    straightforward_first: bool,
) -> list[dict]:
    """Throughput per runner; speed-up and max |Δscore| against the first runner.

    straightforward_first: the first runner is the straightforward loop (the full model); every other
    runner is an engine, which runs the first-token last layer (fewer FLOPs for the same logits)."""
    lengths = loo_row_lengths(split, bench_model.info.mask_id)
    flops = {shortcut: encoder_flops(lengths, bench_model.shape, shortcut) for shortcut in (False, True)}
    base_seconds, base_scores = next(iter(timed.values()))
    return [
        {
            "name": name,
            "seconds": seconds,
            "rows_per_s": len(lengths) / seconds,
            "tokens_per_s": float(lengths.sum()) / seconds,
            "gflops": flops[index > 0 or not straightforward_first] / seconds / 1e9,
            "peak_share": peak_share(flops[index > 0 or not straightforward_first] / seconds / 1e9, peak),
            "speedup": base_seconds / seconds,
            "max_abs_score_diff": max_abs_difference(scores, base_scores),
        }
        for index, (name, (seconds, scores)) in enumerate(timed.items())
    ]


def show(results: list[dict], peak: float) -> None:
    print_table(
        [
            "",
            "time",
            "rows/s",
            "tokens/s",
            "GFLOP/s (of the fp32 peak)",
            "speed-up",
            "max |Δscore|",
        ],
        [
            [
                item["name"],
                f"{item['seconds']:.2f} s",
                f"{item['rows_per_s']:.0f}",
                f"{item['tokens_per_s']:.0f}",
                share_text(item["gflops"], peak),
                ratio_text(item["speedup"]),
                f"{item['max_abs_score_diff']:.1e}",
            ]
            for item in results
        ],
    )


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--sentences", type=int, help="sentences in the table (default 200, --quick 20)")
    parser.add_argument(
        "--token-budget", type=int, default=2048, help="the engine's token budget in the table"
    )
    args = parser.parse_args()
    check_device(parser, args.device)
    repeat = rounds(args)
    sentences = args.sentences or (20 if args.quick else 200)
    sweep_sentences = min(sentences, 10 if args.quick else 50)
    bench_model = model_for(args)
    split = test_sentences(bench_model.tokenizer, sentences, short=args.quick)
    lengths = loo_row_lengths(split, bench_model.info.mask_id)
    budget = args.token_budget

    model = bench_model.torch_model(args.device, straightforward=True)
    runners: dict[str, LooRunner] = {
        f"(1) straightforward PyTorch ({args.device})": lambda part: straightforward_loo(
            model, part, bench_model.info.mask_id
        )(),
        f"(2) engine, PyTorch, budget {budget}": engine_loo(
            bench_model.torch_backend(args.device), budget, 512
        ),
        f"(3) engine, ORT fp32, budget {budget}": engine_loo(
            bench_model.ort_backend("fp32", args.device), budget, 512
        ),
    }
    if args.device == "cpu":
        runners[f"(4) engine, ORT int8, budget {budget} (another model)"] = engine_loo(
            bench_model.ort_backend("int8"), budget, 512
        )
    print(machine_line())
    print(
        f"{bench_model.description}; {sentences} sentences → {len(lengths)} LOO rows, {int(lengths.sum())} "
        f"tokens; useful FLOPs: {FLOP_FORMULA}; per {CHUNK_SENTENCES} sentences best of {repeat} rounds"
    )
    timed, peak = time_in_chunks(runners, split, repeat, CHUNK_SENTENCES, args.device, args.quick)
    table = results_table(timed, split, bench_model, peak, straightforward_first=True)
    show(table, peak)

    ort_fp32 = bench_model.ort_backend("fp32", args.device)
    sweep = {
        f"budget {token_budget}, max_rows {max_rows}": engine_loo(ort_fp32, token_budget, max_rows)
        for token_budget in SWEEP_BUDGETS
        for max_rows in SWEEP_MAX_ROWS
    }
    if args.device == "cpu":
        for threads in sorted({1, physical_cores(), os.cpu_count() or 1}):
            backend = OnnxBackend.from_file(bench_model.onnx_path("fp32"), provider="cpu", threads=threads)
            sweep[f"ORT threads {threads}, budget {budget}"] = engine_loo(backend, budget, 512)
    sweep_split = split.subset(range(sweep_sentences))
    print(
        f"\nsweep, engine on ORT fp32 ({args.device}), {sweep_sentences} sentences timed whole, best of "
        f"{repeat}; speed-up vs the first line (engine default: budget {ENGINE_DEFAULTS[0]}, max_rows "
        f"{ENGINE_DEFAULTS[1]}; ORT default threads: {physical_cores()}):"
    )
    sweep_timed, sweep_peak = time_in_chunks(
        sweep, sweep_split, repeat, sweep_sentences, args.device, args.quick
    )
    peak = max(peak, sweep_peak)
    sweeps = results_table(sweep_timed, sweep_split, bench_model, peak, straightforward_first=False)
    show(sweeps, peak)
    if args.json:
        write_record(
            args.json,
            {
                "bench": "engine",
                "model": bench_model.description,
                "device": args.device,
                "sentences": sentences,
                "rows": len(lengths),
                "tokens": int(lengths.sum()),
                "flop_formula": FLOP_FORMULA,
                "peak_gflops": peak,
                "repeat": repeat,
                "table": table,
                "sweeps": sweeps,
            },
        )


if __name__ == "__main__":
    main()

"""The fastest fp32 backend on this CPU: OpenVINO fp32 against ONNX Runtime fp32 on the same exported file.

    taskset -c 1 .venv/bin/python bench/bench_backends.py [--quick] [--sentences N] [--curve-sentences N]
                                                          [--repeat N] [--json PATH]

Both backends open with core.threads' count: the cores this process may run on (pin it, e.g. taskset -c 1
for one thread). Rows:
  - the fp32 matmul peaks: torch, ONNX Runtime, NumPy (common.matmul_peaks) and OpenVINO's own fp32 MatMul;
  - the LOO workload (bench_occlusion's: loo-abs on the first --sentences movie-snippets test sentences
    through the engine, as `fmm-fast evaluate` runs it) on ORT fp32 and OpenVINO fp32, interleaved, every
    round kept: the ratio is of the best rounds, the spread (slowest / fastest round of one backend) is
    the noise; max |Δscore| between the two, and the sentences whose loo-abs order is the same;
  - the recursive loo-abs curve on --curve-sentences sentences with each backend (one run each, rand
    included): time, both curves, and per erasure step the masked inputs that are equal in both.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
from bench_curve import LOO, METRIC, erasure_curves, saved_masked_inputs
from bench_occlusion import engine_loo, loo_row_lengths
from common import (
    bench_parser,
    encoder_flops,
    machine_line,
    matmul_peaks,
    model_for,
    openvino_matmul_gflops,
    print_table,
    ratio_text,
    rounds,
    share_text,
    test_sentences,
    write_record,
)

from fmm_fast.core.threads import compute_threads

SIZES = {False: (100, 100), True: (5, 4)}  # by --quick: LOO sentences, curve sentences


def timed_rounds(runners: dict, repeat: int) -> dict[str, tuple[list[float], object]]:
    """Every runner once per round, interleaved; per runner all its round times and its last result."""
    found: dict[str, tuple[list[float], object]] = {name: ([], None) for name in runners}
    for _ in range(repeat):
        for name, run in runners.items():
            start = time.perf_counter()
            result = run()
            found[name] = ([*found[name][0], time.perf_counter() - start], result)
    return found


def same_order(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(np.argsort(-a, kind="stable"), np.argsort(-b, kind="stable")))


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--sentences", type=int, help="LOO workload sentences (default 100)")
    parser.add_argument("--curve-sentences", type=int, help="recursive curve sentences (default 100)")
    args = parser.parse_args()
    loo_count, curve_count = SIZES[args.quick]
    bench_model = model_for(args)
    print(machine_line())
    print(f"model: {bench_model.description}; threads per backend: {compute_threads()}")

    peaks = matmul_peaks("cpu", "fp32", quick=args.quick) | {
        "openvino": openvino_matmul_gflops("fp32", quick=args.quick)
    }
    peak = max(peaks.values())
    backends = {
        "ORT fp32": bench_model.ort_backend("fp32"),
        "OpenVINO fp32": bench_model.openvino_backend("fp32"),
    }
    split = test_sentences(bench_model.tokenizer, args.sentences or loo_count, short=args.quick)
    timed = timed_rounds(
        {name: engine_loo(backend, split) for name, backend in backends.items()}, rounds(args)
    )
    lengths = loo_row_lengths(split, bench_model.info.mask_id)
    gflop = encoder_flops(lengths, bench_model.shape, first_token_last_layer=True) / 1e9
    (ort_times, ort_scores), (ov_times, ov_scores) = timed["ORT fp32"], timed["OpenVINO fp32"]
    loo = {
        "sentences": len(split),
        "rows": len(lengths),
        "gflop": gflop,
        "seconds": {name: times for name, (times, _) in timed.items()},
        "openvino_over_ort": min(ort_times) / min(ov_times),
        "max_abs_score_diff": max(
            float(np.abs(a - b).max(initial=0.0)) for a, b in zip(ort_scores, ov_scores, strict=True)
        ),
        "same_order": sum(same_order(a, b) for a, b in zip(ort_scores, ov_scores, strict=True)),
    }

    curve_split = test_sentences(bench_model.tokenizer, args.curve_sentences or curve_count, short=args.quick)
    curves, masks = {}, {}
    for name, backend in backends.items():
        with tempfile.TemporaryDirectory(prefix="fmm-bench-backends-") as work:
            seconds, result = erasure_curves(
                bench_model, curve_split, backend, [LOO], Path(work), save_masked=True
            )
            masks[name] = saved_masked_inputs(Path(work), LOO)
        curves[name] = {
            "seconds": seconds,
            "curve": result["curves"][LOO][METRIC],
            "racu": result["measures"][LOO]["racu"],
        }
    equal_per_step = [
        sum(int(np.array_equal(a, b)) for a, b in zip(ort, ov, strict=True))
        for ort, ov in zip(masks["ORT fp32"], masks["OpenVINO fp32"], strict=True)
    ]
    curve = {
        "sentences": len(curve_split),
        "backends": curves,
        "openvino_over_ort": curves["ORT fp32"]["seconds"] / curves["OpenVINO fp32"]["seconds"],
        "identical_curves": curves["ORT fp32"]["curve"] == curves["OpenVINO fp32"]["curve"],
        "equal_masks_per_step": equal_per_step,
    }

    print(
        f"fp32 matmul peak {peak:.0f} GFLOP/s (" + ", ".join(f"{k} {v:.0f}" for k, v in peaks.items()) + ")"
    )
    print(
        f"\nLOO workload: {len(split)} sentences, {len(lengths)} rows, {gflop:.0f} useful GFLOP; "
        f"{rounds(args)} rounds"
    )
    print_table(
        ["backend", "best", "slowest", "GFLOP/s (of peak)", "vs ORT"],
        [
            [
                name,
                f"{min(times):.2f} s",
                f"{max(times):.2f} s",
                share_text(gflop / min(times), peak),
                ratio_text(min(ort_times) / min(times)),
            ]
            for name, (times, _) in timed.items()
        ],
    )
    print(
        f"max |Δscore| OpenVINO vs ORT {loo['max_abs_score_diff']:.1e}; same loo-abs order on "
        f"{loo['same_order']}/{len(split)} sentences"
    )
    print(f"\nrecursive {LOO} curve, {len(curve_split)} sentences (one run each, rand included)")
    print_table(
        ["backend", "time", "vs ORT", f"{METRIC} curve", "RACU"],
        [
            [
                name,
                f"{item['seconds']:.1f} s",
                ratio_text(curves["ORT fp32"]["seconds"] / item["seconds"]),
                " ".join(f"{value:.3f}" for value in item["curve"]),
                f"{item['racu']:.4f}",
            ]
            for name, item in curves.items()
        ],
    )
    print(
        f"identical curves: {curve['identical_curves']}; masked inputs equal per step r=0.1…1: "
        + " ".join(f"{n}/{len(curve_split)}" for n in equal_per_step)
    )
    if args.json:
        write_record(args.json, {"peaks": peaks, "loo": loo, "curve": curve, "threads": compute_threads()})


if __name__ == "__main__":
    main()

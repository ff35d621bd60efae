"""GPU check: the engine, LOO, beam search and a recursive curve on PyTorch CUDA, against the straightforward
per-sentence PyTorch loop on the same GPU (and ONNX Runtime CUDA where onnxruntime-gpu is installed).

    python bench/gpu_check.py [--quick] [--checkpoint DIR] [--sentences N] [--json PATH]

Prints one table; every figure is a ratio against a baseline measured in the same run. Without CUDA it
says so and exits 0 (CI has no GPU). --quick: the tiny model and a few sentences, to check that it runs.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_occlusion import BEAM_SIZE, beam_sentences, engine_loo, explain_batch, straightforward_loo
from common import (
    CACHE_DIR,
    encoder_flops,
    explained_counts,
    machine_line,
    max_abs_difference,
    peak_gflops,
    print_table,
    share_text,
    synchronize,
    test_sentences,
    write_record,
)

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.torch_backend import TorchBackend
from fmm_fast.core.settings import EvaluationSettings
from fmm_fast.data.options import DataOptions
from fmm_fast.measures.beam import BeamSearch, beam_forward_bound
from fmm_fast.protocols.erasure import ErasureRun
from fmm_fast.training.models import load_checkpoint

SIZES = {False: (400, 40, 872), True: (5, 2, 4)}  # by --quick: LOO, beam and curve sentences
PAPER_V100_MINUTES = {"loo curve": 15.0, "beam-10 curve": 22.0}  # method.md §7, RoBERTa-base, SST2 test (872)


def timed(run, device: str):
    synchronize(device)
    start = time.perf_counter()
    result = run()
    synchronize(device)
    return time.perf_counter() - start, result


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", type=Path, default=None, help="default: bench/common's model")
    parser.add_argument("--sentences", type=int, help=f"LOO sentences (default {SIZES[False][0]})")
    parser.add_argument("--beam-sentences", type=int, help=f"default {SIZES[False][1]}")
    parser.add_argument("--curve-sentences", type=int, help=f"default {SIZES[False][2]}")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--device", default="cuda", help="cpu only to dry-run this script")
    parser.add_argument(
        "--quick", action="store_true", help="the tiny model, a few sentences: checks it runs"
    )
    parser.add_argument(
        "--cache", type=Path, default=CACHE_DIR, help="the bench model's folder (no --checkpoint)"
    )
    args = parser.parse_args()
    defaults = SIZES[args.quick]
    args.sentences = args.sentences or defaults[0]
    args.beam_sentences = args.beam_sentences or defaults[1]
    args.curve_sentences = args.curve_sentences or defaults[2]
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: skipped, PyTorch sees no CUDA device")
        return
    if args.checkpoint is None:
        from common import prepare_model

        args.checkpoint = prepare_model(args.quick, args.cache).checkpoint
    model, tokenizer, info = load_checkpoint(args.checkpoint)
    model = model.float()
    shape = (
        model.hf_model.config.num_hidden_layers,
        model.hf_model.config.hidden_size,
        model.hf_model.config.intermediate_size,
    )
    split = test_sentences(tokenizer)
    loo_split = split.subset(range(min(args.sentences, len(split))))
    peak = {precision: peak_gflops(device, precision, quick=args.quick) for precision in ("fp32", "fp16")}
    rows, record = [], {"machine": machine_line(), "checkpoint": str(args.checkpoint), "peak_gflops": peak}

    # LOO: straightforward loop vs the engine (fp32, fp16), same GPU; scores checked against the CPU engine
    cuda_model = model.to(device).eval()
    lengths = np.concatenate(
        [
            [len(ids)] * (int(n) + 1)
            for ids, n in zip(loo_split.input_ids, explained_counts(loo_split), strict=True)
        ]
    )
    flops = encoder_flops(lengths, shape, first_token_last_layer=False)
    engine_flops = encoder_flops(lengths, shape, first_token_last_layer=True)
    full_model = load_checkpoint(args.checkpoint)[0].float().to(device).eval()
    # the baseline: every layer in full, as Hugging Face runs it
    full_model.use_first_token_last_layer = False
    straightforward = straightforward_loo(full_model, loo_split, info.mask_id)
    straightforward()  # warm-up (CUDA context, kernels)
    base_seconds, base_scores = timed(straightforward, device)
    engines = {"fp32": TorchBackend(cuda_model, info, device=device)}
    half_model, _, _ = load_checkpoint(args.checkpoint)
    engines["fp16"] = TorchBackend(half_model.half(), info, device=device)
    cpu_reference = engine_loo(
        TorchBackend(load_checkpoint(args.checkpoint)[0].float(), info, "cpu"),
        loo_split.subset(range(min(50, len(loo_split)))),
    )()
    rows.append(
        [
            "LOO, straightforward loop (fp32)",
            f"{len(loo_split) / base_seconds:.1f} expl/s",
            f"{flops / base_seconds / 1e9:.0f}",
            "1.00×",
            "ref",
        ]
    )
    record["loo"] = {"sentences": len(loo_split), "straightforward_seconds": base_seconds}
    for precision, backend in engines.items():
        run = engine_loo(backend, loo_split)
        run()
        seconds, scores = timed(run, device)
        difference = max_abs_difference(scores, base_scores)
        cpu_difference = max_abs_difference(scores[: len(cpu_reference)], cpu_reference)
        rows.append(
            [
                f"LOO, engine PyTorch {device} {precision}",
                f"{len(loo_split) / seconds:.1f} expl/s",
                f"{engine_flops / seconds / 1e9:.0f} "
                f"({share_text(engine_flops / seconds / 1e9, peak[precision])})",
                f"{base_seconds / seconds:.2f}×",
                f"Δ {difference:.1e} (vs CPU {cpu_difference:.1e})",
            ]
        )
        record["loo"][precision] = {
            "seconds": seconds,
            "max_diff": difference,
            "max_diff_cpu": cpu_difference,
        }

    # beam-sign-10, all sentences in lock-step on the GPU
    subset = beam_sentences(split, args.beam_sentences, (10, 25))
    batch = explain_batch(subset, info.pad_id)
    measure = BeamSearch(BEAM_SIZE)
    seconds, _ = timed(lambda: measure.explain(batch, MaskBatchEngine(engines["fp32"])), device)
    stats = measure.last_stats
    bound = int(sum(beam_forward_bound(int(n), BEAM_SIZE) for n in stats.maskable))
    rows.append(
        [
            f"beam-sign-10, {len(subset)} sentences, n 10–25",
            f"{len(subset) / seconds:.2f} expl/s",
            f"{int(stats.forward_passes.sum())} passes ≤ {bound}",
            "",
            f"bookkeeping {100 * stats.bookkeeping_seconds / seconds:.1f}%",
        ]
    )
    record["beam"] = {
        "sentences": len(subset),
        "seconds": seconds,
        "passes": int(stats.forward_passes.sum()),
        "bound": bound,
        "bookkeeping_share": stats.bookkeeping_seconds / seconds,
    }

    # whole recursive curves on the SST2-sized test set: LOO measured, beam extrapolated per sentence
    curve_split = split.subset(range(min(args.curve_sentences, len(split))))
    with tempfile.TemporaryDirectory() as folder:
        settings = EvaluationSettings("gpu", DataOptions("movie-snippets"), ("loo-abs",))
        engine = MaskBatchEngine(engines["fp32"])
        curve_seconds, result = timed(
            lambda: ErasureRun(settings, curve_split, engine, Path(folder), "accuracy").run(), device
        )
    loo_minutes = result["measures"]["loo-abs"]["seconds"] / 60
    beam_minutes = seconds / len(subset) * len(curve_split) / 60
    for name, minutes in [("loo curve", loo_minutes), ("beam-10 curve", beam_minutes)]:
        paper = PAPER_V100_MINUTES[name]
        note = "measured" if name == "loo curve" else f"extrapolated from {len(subset)} sentences"
        rows.append(
            [
                f"{name}, {len(curve_split)} sentences",
                f"{minutes:.2f} min",
                note,
                f"{paper / minutes:.0f}× vs paper V100",
                f"paper {paper:.0f} min (RoBERTa-base)",
            ]
        )
    record["curves"] = {
        "sentences": len(curve_split),
        "loo_minutes": loo_minutes,
        "beam_minutes": beam_minutes,
        "total_seconds": curve_seconds,
    }

    import onnxruntime

    providers = onnxruntime.get_available_providers()
    record["onnxruntime_providers"] = providers
    if "CUDAExecutionProvider" not in providers:
        rows.append(["ONNX Runtime CUDA", "skipped", f"providers here: {', '.join(providers)}", "", ""])
    print(machine_line())
    print(f"model {args.checkpoint}; matmul peak fp32 {peak['fp32']:.0f} GFLOP/s, fp16 {peak['fp16']:.0f}")
    print_table(["row", "throughput", "GFLOP/s (useful)", "ratio", "check"], rows)
    if args.json:
        write_record(args.json, record)


if __name__ == "__main__":
    main()

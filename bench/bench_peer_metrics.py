"""Benchmark the docs/method.md §8 peer metrics (AOPC comprehensiveness, AOPC sufficiency, τ-LOO) of loo-abs.

    .venv/bin/python bench/bench_peer_metrics.py [--quick] [--device cpu|cuda] [--sentences N]
                                                 [--repeat N] [--json PATH]

On the first N movie-snippets test sentences (default 872, the size of SST2's test split), the whole job —
explain with loo-abs, then the 10 comprehensiveness and 10 sufficiency maskings and the leave-one-out rows
of τ-LOO — runs three ways in the same run:
- fmm-fast on ONNX Runtime and on PyTorch: `explain_split` and `peer_metrics` through one MaskBatchEngine
  (each sentence's variants in one request, duplicates dropped, the LOO rows of the explanation reused
  for τ-LOO from the engine's cache), as `fmm-fast aopc` runs them (without its
  erasure-curve rows);
- the straightforward per-threshold loop on PyTorch (the model exactly as Hugging Face computes it):
  loo-abs per sentence in one batch (common.straightforward_loo_abs), then `peer_metrics_reference`, one
  forward pass per masked input, the LOO rows of τ-LOO run again.
Reported: wall time (best of --repeat interleaved rounds), forward passes (rows through the model), the
ratio to the loop, and the largest difference of the per-sentence AOPC and τ values (float noise only:
batching with padding and fmm-fast's first-token last layer change the last digits).
"""

from __future__ import annotations

import numpy as np
from common import (
    BenchModel,
    bench_parser,
    best_of_rounds,
    check_device,
    machine_line,
    model_for,
    print_table,
    ratio_text,
    rounds,
    straightforward_loo_abs,
    test_sentences,
    write_record,
)

from fmm_fast.backends.base import Backend
from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.torch_backend import TorchBackend
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.settings import EngineOptions
from fmm_fast.measures import get_measure
from fmm_fast.protocols.aopc_metrics import peer_metrics, peer_metrics_reference
from fmm_fast.protocols.erasure import explain_split

MEASURE = "loo-abs"
SENTENCES = {True: 5, False: 872}  # by --quick
EXPLAIN_BATCH_ROWS = EngineOptions.explain_batch_rows  # what `fmm-fast evaluate` uses
KEYS = ("aopc_comprehensiveness", "aopc_sufficiency", "tau_loo")

Outcome = tuple[dict[str, np.ndarray], int]  # per key (N,) values, forward passes


def engine_run(backend: Backend, split: EncodedSplit) -> Outcome:
    """fmm-fast's path; a fresh engine per call, so no round reuses another's cached rows."""
    engine = MaskBatchEngine(backend)
    scores = explain_split(get_measure(MEASURE), engine, split.input_ids, split, EXPLAIN_BATCH_ROWS)
    results = peer_metrics(engine, split, scores, ratios=())
    values = {key: np.array([getattr(r, key) for r in results]) for key in KEYS}
    return values, engine.stats.forward_rows


def straightforward_run(model: BenchModel, split: EncodedSplit, device: str) -> Outcome:
    """The obvious loop: per-sentence LOO, then one forward pass per masked input and threshold."""
    torch_model = model.torch_model(device, straightforward=True)
    mask_id = model.info.mask_id
    scores = [
        straightforward_loo_abs(torch_model, ids, explained, int(label), mask_id)
        for ids, explained, label in zip(split.input_ids, split.explained, split.labels, strict=True)
    ]
    loo_rows = sum(
        int(np.count_nonzero(e & (ids != mask_id))) + 1
        for ids, e in zip(split.input_ids, split.explained, strict=True)
    )
    backend = TorchBackend(torch_model, model.info, device=device)
    reference, passes = peer_metrics_reference(backend, split, scores)
    values = {
        "aopc_comprehensiveness": np.array([np.mean(r["comprehensiveness"]) for r in reference]),
        "aopc_sufficiency": np.array([np.mean(r["sufficiency"]) for r in reference]),
        "tau_loo": np.array([r["tau_loo"] for r in reference]),
    }
    return values, loo_rows + passes


def largest_difference(values: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> float:
    """max |a − b| over the keys and sentences (nan where both are undefined counts as equal)."""
    differences = [np.nan_to_num(np.abs(values[k] - reference[k]), nan=0.0).max(initial=0.0) for k in KEYS]
    undefined_differs = any(np.any(np.isnan(values[k]) != np.isnan(reference[k])) for k in KEYS)
    return float("inf") if undefined_differs else float(max(differences))


def run(model: BenchModel, quick: bool, device: str, sentences: int | None, repeat: int) -> dict:
    split = test_sentences(model.tokenizer, sentences or SENTENCES[quick], short=quick)
    ort, torch_backend = model.ort_backend("fp32", device), model.torch_backend(device)  # set up untimed
    runners = {
        "fmm-fast, ONNX Runtime": lambda: engine_run(ort, split),
        "fmm-fast, PyTorch": lambda: engine_run(torch_backend, split),
        "straightforward loop, PyTorch": lambda: straightforward_run(model, split, device),
    }
    best = best_of_rounds(runners, repeat)
    loop_seconds, (loop_values, loop_passes) = best["straightforward loop, PyTorch"]
    rows = {}
    for name, (seconds, (values, passes)) in best.items():
        rows[name] = {
            "seconds": seconds,
            "forward_passes": passes,
            "sentences_per_second": len(split) / seconds,
            "speedup": loop_seconds / seconds,
            "pass_ratio": loop_passes / passes,
            "max_abs_difference": largest_difference(values, loop_values),
            "means": {k: float(np.nanmean(values[k])) for k in KEYS},
        }
    return {
        "model": model.description,
        "measure": MEASURE,
        "sentences": len(split),
        "device": device,
        "rows": rows,
    }


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--sentences", type=int, help="test sentences (default 872, --quick 5)")
    args = parser.parse_args()
    check_device(parser, args.device)
    print(machine_line())
    result = run(model_for(args), args.quick, args.device, args.sentences, rounds(args))
    print(
        f"model: {result['model']}; {MEASURE} on {result['sentences']} sentences, device {result['device']}"
    )
    header = [
        "implementation",
        "seconds",
        "forward passes",
        "sentences/s",
        "vs loop (time)",
        "vs loop (passes)",
        "max |Δ| AOPC/τ",
        "AOPC comp",
        "AOPC suff",
        "τ-LOO",
    ]
    print_table(
        header,
        [
            [
                name,
                f"{r['seconds']:.1f}",
                f"{r['forward_passes']:,}",
                f"{r['sentences_per_second']:.1f}",
                ratio_text(r["speedup"]),
                ratio_text(r["pass_ratio"]),
                f"{r['max_abs_difference']:.1e}",
                *(f"{100 * r['means'][k]:.1f}" for k in KEYS),
            ]
            for name, r in result["rows"].items()
        ],
    )
    if args.json:
        write_record(args.json, result)


if __name__ == "__main__":
    main()

"""Benchmark the occlusion measures: explanations/s of loo-abs and beam-sign-10 against plain versions.

    .venv/bin/python bench/bench_occlusion.py [--quick] [--device cpu|cuda] [--sentences N]
                                              [--beam-sentences N] [--reference-sentences N]
                                              [--repeat N] [--json PATH]

LOO (loo-abs on the first N movie-snippets test sentences): fmm-fast's batched LOO (`get_measure("loo-abs")`
through a MaskBatchEngine with its default settings, 32 sentences per explain call as `fmm-fast evaluate`
does) on ONNX Runtime and on PyTorch, against the straightforward PyTorch version (per sentence one batch:
the sentence and its n single-token maskings, inference_mode) and, when installed, Captum's
FeatureAblation. Every implementation runs the same rows, so rows/s, tokens/s and useful GFLOP/s (see
common.FLOP_FORMULA) compare like for like; the peak is the best large matmul measured in the same run
(common.matmul_peaks: fp32 the best of torch, ONNX Runtime and NumPy; bf16 of torch and OpenVINO). On a CPU
with native bf16 the engine also runs in bf16 (OpenVINO on the export, PyTorch autocast), against the bf16
peak. Scores must agree with the baseline up to float noise (max |Δ| is printed; ORT int8 and the bf16
rows are other arithmetic: their |Δ| is their rounding).

Beam (beam-sign-10 on sentences with 10–20 explained tokens): fmm-fast's lock-step beam on ORT against
`beam_search_reference` with one PyTorch forward per child (no batching, pairwise duplicate checks). The
reference runs on the first few of those sentences only; its time is scaled to all of them by forward
passes (identical in both: the same algorithm). Orders must be identical on the sentences both ran.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from common import (
    BenchModel,
    bench_parser,
    best_of_rounds,
    check_device,
    encoder_flops,
    explained_counts,
    machine_line,
    matmul_peaks,
    max_abs_difference,
    model_for,
    peak_share,
    print_table,
    ratio_text,
    rounds,
    share_text,
    straightforward_loo_abs,
    test_sentences,
    write_record,
    yes_no,
)

from fmm_fast.backends.base import Backend
from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.precision import cpu_has_native_bf16
from fmm_fast.core.datatypes import EncodedSplit, pad_batch
from fmm_fast.core.settings import DEFAULT_EXPLAIN_BATCH_ROWS
from fmm_fast.data.masking import pad_flags
from fmm_fast.measures import get_measure
from fmm_fast.measures.base import ExplainBatch
from fmm_fast.measures.beam import BeamSearch, beam_forward_bound, beam_search_reference
from fmm_fast.protocols.erasure import explain_split
from fmm_fast.training.models import SequenceClassifier

LOO_MEASURE = "loo-abs"
BEAM_SIZE = 10
EXPLAIN_BATCH_ROWS = DEFAULT_EXPLAIN_BATCH_ROWS  # what `fmm-fast evaluate` uses
GOALS = {"loo": 3.0, "beam": 10.0, "beam_bookkeeping_share": 0.15}


@dataclass(frozen=True)
class Sizes:
    loo_sentences: int
    beam_sentences: int
    reference_sentences: int  # of the beam sentences, those the reference runs on
    beam_tokens: tuple[int, int]  # explained tokens of a beam sentence, inclusive


SIZES = {True: Sizes(5, 2, 1, (5, 7)), False: Sizes(100, 10, 3, (10, 20))}  # by --quick

LooRunner = Callable[[], list[np.ndarray]]  # -> per sentence (T_i,) float64 loo-abs scores


@dataclass
class LooImplementation:
    name: str
    run: LooRunner
    peak_gflops: float  # the matmul peak its GFLOP/s are compared with
    runtime: str  # straightforward | ort | torch | openvino | captum
    precision: str = "fp32"


# ------------------------------------------------------------------------------------------------ LOO
def engine_loo(backend: Backend, split: EncodedSplit) -> LooRunner:
    """fmm-fast's LOO as `fmm-fast evaluate` runs it; a fresh engine per call, so no round reuses another's
    cached rows."""

    def run() -> list[np.ndarray]:
        engine = MaskBatchEngine(backend)
        return explain_split(get_measure(LOO_MEASURE), engine, split.input_ids, split, EXPLAIN_BATCH_ROWS)

    return run


def straightforward_loo(model: SequenceClassifier, split: EncodedSplit, mask_id: int) -> LooRunner:
    def run() -> list[np.ndarray]:
        return [
            straightforward_loo_abs(model, ids, explained, int(label), mask_id)
            for ids, explained, label in zip(split.input_ids, split.explained, split.labels, strict=True)
        ]

    return run


def captum_loo(model: SequenceClassifier, split: EncodedSplit, mask_id: int) -> LooRunner:
    """Captum's FeatureAblation per sentence: its features are the explained tokens (baseline: the mask id);
    one forward of the sentence, then all n ablations in one batch (perturbations_per_eval = n)."""
    from captum.attr import FeatureAblation

    device = next(model.parameters()).device

    def sentence_scores(ids: np.ndarray, explained: np.ndarray, label: int) -> np.ndarray:
        positions = np.flatnonzero(explained & (ids != mask_id))
        scores = np.zeros(len(ids), dtype=np.float64)
        if len(positions) == 0:
            return scores
        template = torch.from_numpy(ids).to(device)
        index = torch.from_numpy(positions).to(device)

        def forward(visible: torch.Tensor) -> torch.Tensor:
            """visible: (B, n) ids at the explained positions -> (B, C) logits of the full sentences."""
            batch = template.repeat(len(visible), 1)
            batch[:, index] = visible
            return model(batch, torch.ones_like(batch))[0]

        attribution = FeatureAblation(forward).attribute(
            template[index][None, :], baselines=mask_id, target=label, perturbations_per_eval=len(positions)
        )
        scores[positions] = np.abs(attribution[0].double().cpu().numpy())
        return scores

    def run() -> list[np.ndarray]:
        return [
            sentence_scores(ids, explained, int(label))
            for ids, explained, label in zip(split.input_ids, split.explained, split.labels, strict=True)
        ]

    return run


def loo_row_lengths(split: EncodedSplit, mask_id: int) -> np.ndarray:
    """(R,) int64 row lengths of the LOO workload: per sentence of T tokens, n + 1 rows of T."""
    counts = [
        int((explained & (ids != mask_id)).sum()) + 1
        for ids, explained in zip(split.input_ids, split.explained, strict=True)
    ]
    return np.repeat([len(ids) for ids in split.input_ids], counts).astype(np.int64)


def loo_implementations(
    bench_model: BenchModel, split: EncodedSplit, device: str, peaks: dict[str, float]
) -> list[LooImplementation]:
    """The baseline first (straightforward PyTorch on `device`), then fmm-fast's engines and Captum.

    peaks: the best matmul GFLOP/s per precision (fp32; bf16 where the CPU has it; fp16 on CUDA)."""
    mask_id = bench_model.info.mask_id
    model = bench_model.torch_model(device, straightforward=True)
    peak32 = peaks["fp32"]
    implementations = [
        LooImplementation(
            f"straightforward PyTorch ({device}), per sentence",
            straightforward_loo(model, split, mask_id),
            peak32,
            "straightforward",
        ),
        LooImplementation(
            f"fmm-fast, ORT fp32 ({device})",
            engine_loo(bench_model.ort_backend("fp32", device), split),
            peak32,
            "ort",
        ),
        LooImplementation(
            f"fmm-fast, PyTorch ({device})",
            engine_loo(bench_model.torch_backend(device), split),
            peak32,
            "torch",
        ),
    ]
    if device == "cpu":
        implementations.append(
            LooImplementation(
                "fmm-fast, ORT int8 (cpu; another model)",
                engine_loo(bench_model.ort_backend("int8", device), split),
                peak32,  # int8 kernels have a higher peak of their own: the share is an upper bound
                "ort",
                "int8",
            )
        )
        if "bf16" in peaks:
            implementations += bf16_implementations(bench_model, split, peaks["bf16"])
        if importlib.util.find_spec("captum") is not None:
            implementations.append(
                LooImplementation(
                    "Captum FeatureAblation (cpu)", captum_loo(model, split, mask_id), peak32, "captum"
                )
            )
    else:
        implementations.append(
            LooImplementation(
                f"fmm-fast, ORT fp16 ({device}; another model)",
                engine_loo(bench_model.ort_backend("fp16", device), split),
                peaks["fp16"],
                "ort",
                "fp16",
            )
        )
    return implementations


def bf16_implementations(
    bench_model: BenchModel, split: EncodedSplit, peak: float
) -> list[LooImplementation]:
    """fmm-fast's LOO as `--precision bf16` runs it on CPU: OpenVINO on the export (when installed), and
    PyTorch under bf16 autocast."""
    implementations = []
    if importlib.util.find_spec("openvino") is not None:
        implementations.append(
            LooImplementation(
                "fmm-fast, OpenVINO bf16 (cpu)",
                engine_loo(bench_model.openvino_backend("bf16"), split),
                peak,
                "openvino",
                "bf16",
            )
        )
    implementations.append(
        LooImplementation(
            "fmm-fast, PyTorch bf16 autocast (cpu)",
            engine_loo(bench_model.torch_backend("cpu", "bf16"), split),
            peak,
            "torch",
            "bf16",
        )
    )
    return implementations


def measured_peaks(device: str, quick: bool) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """(best GFLOP/s per precision, every kernel's GFLOP/s per precision) for `device`'s precisions."""
    precisions = ("fp32", "fp16") if device == "cuda" else ("fp32", "bf16")
    kernels = {precision: matmul_peaks(device, precision, quick=quick) for precision in precisions}
    kernels = {precision: found for precision, found in kernels.items() if found}
    return {precision: max(found.values()) for precision, found in kernels.items()}, kernels


def run_loo(
    bench_model: BenchModel, split: EncodedSplit, device: str, repeat: int, quick: bool = False
) -> dict:
    """Time every LOO implementation (best of `repeat` interleaved rounds) on `split`; the first is the
    baseline of the ratios and of max |Δscore| (quick: against a small matmul's peak)."""
    peaks, kernels = measured_peaks(device, quick)
    implementations = loo_implementations(bench_model, split, device, peaks)
    timed = best_of_rounds({item.name: item.run for item in implementations}, repeat)
    lengths = loo_row_lengths(split, bench_model.info.mask_id)
    # fmm-fast's engines run the first-token last layer: fewer FLOPs for the same logits
    flops = {shortcut: encoder_flops(lengths, bench_model.shape, shortcut) for shortcut in (False, True)}
    base_seconds, base_scores = timed[implementations[0].name]
    rows = []
    for item in implementations:
        seconds, scores = timed[item.name]
        item_flops = flops[item.runtime in ("ort", "torch", "openvino")]
        rows.append(
            {
                "name": item.name,
                "runtime": item.runtime,
                "precision": item.precision,
                "seconds": seconds,
                "explanations_per_s": len(split) / seconds,
                "rows_per_s": len(lengths) / seconds,
                "tokens_per_s": float(lengths.sum()) / seconds,
                "gflop": item_flops / 1e9,
                "gflops": item_flops / seconds / 1e9,
                "peak_gflops": item.peak_gflops,
                "peak_share": peak_share(item_flops / seconds / 1e9, item.peak_gflops),  # None: bench error
                "speedup": base_seconds / seconds,
                "max_abs_score_diff": max_abs_difference(scores, base_scores),
            }
        )
    return {
        "device": device,
        "sentences": len(split),
        "rows": len(lengths),
        "tokens": int(lengths.sum()),
        "useful_gflop": flops[False] / 1e9,  # of the full model; each row has its own "gflop"
        "repeat": repeat,
        "peaks": peaks,
        "peak_kernels": kernels,
        "captum": "installed" if importlib.util.find_spec("captum") else "not installed",
        "implementations": rows,
        "goal_speedup": GOALS["loo"],
    }


def print_loo(result: dict) -> None:
    print(
        f"\nLOO ({LOO_MEASURE}) on {result['sentences']} sentences, {result['device']}: "
        f"{result['rows']} rows, {result['tokens']} tokens, {result['useful_gflop']:.0f} useful GFLOP; "
        f"best of {result['repeat']}; goal: fmm-fast ≥ {GOALS['loo']:.0f}× the straightforward version on CPU"
    )
    rows = [
        [
            item["name"],
            f"{item['seconds']:.2f} s",
            f"{item['explanations_per_s']:.1f}",
            f"{item['rows_per_s']:.0f}",
            f"{item['tokens_per_s']:.0f}",
            share_text(item["gflops"], item["peak_gflops"]),
            ratio_text(item["speedup"]),
            f"{item['max_abs_score_diff']:.1e}",
        ]
        for item in result["implementations"]
    ]
    if result["device"] == "cpu" and result["captum"] == "not installed":
        rows.append(["Captum FeatureAblation", "captum not installed", "", "", "", "", "", ""])
    print_table(
        [
            "implementation",
            "time",
            "expl/s",
            "rows/s",
            "tokens/s",
            "GFLOP/s (of peak)",
            "speed-up",
            "max |Δ|",
        ],
        rows,
    )


# ----------------------------------------------------------------------------------------------- beam
class PerChildForward:
    """The reference's score_fn: one PyTorch forward per call, (T,) int64 ids -> (C,) logits; counts calls."""

    def __init__(self, model: SequenceClassifier) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.calls = 0

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        self.calls += 1
        batch = torch.from_numpy(np.asarray(ids, dtype=np.int64)[None, :]).to(self.device)
        with torch.inference_mode():
            logits, _ = self.model(batch, torch.ones_like(batch))
        return logits[0].float().cpu().numpy()


def beam_sentences(split: EncodedSplit, count: int, tokens: tuple[int, int]) -> EncodedSplit:
    """The first `count` sentences whose explained-token count lies in `tokens` (inclusive)."""
    counts = explained_counts(split)
    chosen = np.flatnonzero((counts >= tokens[0]) & (counts <= tokens[1]))[:count]
    return split.subset(chosen)


def explain_batch(split: EncodedSplit, pad_id: int) -> ExplainBatch:
    input_ids, attention_mask = pad_batch(split.input_ids, pad_id)
    return ExplainBatch(input_ids, attention_mask, split.labels, pad_flags(split.explained))


def run_beam(
    bench_model: BenchModel, subset: EncodedSplit, device: str, reference_count: int, repeat: int
) -> dict:
    """fmm-fast's beam (ORT fp32 on `device`, all sentences in one lock-step call) against the reference
    with per-child PyTorch forwards on its first `reference_count` sentences; on a CPU with native bf16
    also fmm-fast's beam on OpenVINO bf16 (result["bf16"], against the same fp32 reference)."""
    info = bench_model.info
    batch = explain_batch(subset, info.pad_id)
    seconds, (scores, measure, engine) = time_beam(bench_model.ort_backend("fp32", device), batch, repeat)
    stats = measure.last_stats
    assert stats is not None

    forward = PerChildForward(bench_model.torch_model(device, straightforward=True))
    reference_passes, identical = [], []
    reference_seconds = 0.0
    for row in range(reference_count):
        ids, explained, label = subset.input_ids[row], subset.explained[row], int(subset.labels[row])
        calls_before = forward.calls
        started = time.perf_counter()
        expected = beam_search_reference(forward, ids, explained, label, info.mask_id, BEAM_SIZE)
        reference_seconds += time.perf_counter() - started
        reference_passes.append(forward.calls - calls_before)
        identical.append(bool(np.array_equal(scores[row, : len(ids)], expected)))
    passes = stats.forward_passes
    # the reference does the same passes per sentence, so its time scales with them
    reference_scaled = reference_seconds * passes.sum() / passes[:reference_count].sum()
    return {
        "device": device,
        "beam_size": BEAM_SIZE,
        "sentences": len(subset),
        "explained_tokens": stats.maskable.tolist(),
        "reference_sentences": reference_count,
        "repeat": repeat,
        "seconds": seconds,
        "explanations_per_s": len(subset) / seconds,
        "reference_seconds_measured": reference_seconds,
        "reference_seconds_scaled": reference_scaled,
        "reference_explanations_per_s": len(subset) / reference_scaled,
        "speedup": reference_scaled / seconds,
        "goal_speedup": GOALS["beam"],
        "identical_orders": all(identical),
        "identical_sentences": f"{sum(identical)}/{reference_count}",
        "forward_passes": int(passes.sum()),
        "forward_bound": int(sum(beam_forward_bound(int(n), BEAM_SIZE) for n in stats.maskable)),
        "forward_passes_equal_reference": reference_passes == passes[:reference_count].tolist(),
        "duplicates_dropped": int(stats.duplicates.sum()),
        "engine_forward_rows": engine.stats.forward_rows,
        "bookkeeping_share": stats.bookkeeping_seconds / seconds,
        "goal_bookkeeping_share": GOALS["beam_bookkeeping_share"],
        "outside_model_share": 1 - engine.stats.model_seconds / seconds,
    } | bf16_beam(bench_model, batch, device, scores, reference_scaled, repeat)


def time_beam(
    backend: Backend, batch: ExplainBatch, repeat: int
) -> tuple[float, tuple[np.ndarray, BeamSearch, MaskBatchEngine]]:
    """Best seconds of fmm-fast's lock-step beam over `batch` on `backend`, and that round's
    (scores, measure, engine)."""

    def fast() -> tuple[np.ndarray, BeamSearch, MaskBatchEngine]:
        measure, engine = BeamSearch(BEAM_SIZE), MaskBatchEngine(backend)
        return measure.explain(batch, engine), measure, engine

    return best_of_rounds({"fast": fast}, repeat)["fast"]


def bf16_beam(
    bench_model: BenchModel,
    batch: ExplainBatch,
    device: str,
    fp32_scores: np.ndarray,
    reference_seconds: float,
    repeat: int,
) -> dict:
    """{"bf16": ...}: the beam on OpenVINO bf16 against the fp32 reference's (scaled) time, and the share
    of sentences whose removal order equals fp32's; {} off CPU or without native bf16 and openvino."""
    if device != "cpu" or not cpu_has_native_bf16() or importlib.util.find_spec("openvino") is None:
        return {}
    seconds, (scores, _, _) = time_beam(bench_model.openvino_backend("bf16"), batch, repeat)
    same = [bool(np.array_equal(a, b)) for a, b in zip(scores, fp32_scores, strict=True)]
    return {
        "bf16": {
            "backend": "OpenVINO bf16",
            "seconds": seconds,
            "explanations_per_s": len(scores) / seconds,
            "speedup": reference_seconds / seconds,
            "identical_orders_vs_fp32": f"{sum(same)}/{len(same)}",
        }
    }


def print_beam(result: dict) -> None:
    tokens = result["explained_tokens"]
    print(
        f"\nbeam-sign-{result['beam_size']} on {result['sentences']} sentences of "
        f"{min(tokens)}–{max(tokens)} explained tokens, {result['device']}; "
        f"fmm-fast best of {result['repeat']}; the reference ran on {result['reference_sentences']} of "
        f"them, its time scaled to all {result['sentences']} by forward passes"
    )
    print_table(
        ["implementation", "time", "expl/s", "speed-up", "goal"],
        [
            [
                f"reference, per-child PyTorch ({result['device']})",
                f"{result['reference_seconds_scaled']:.2f} s",
                f"{result['reference_explanations_per_s']:.2f}",
                ratio_text(1.0),
                "",
            ],
            [
                f"fmm-fast, lock-step beam, ORT fp32 ({result['device']})",
                f"{result['seconds']:.2f} s",
                f"{result['explanations_per_s']:.2f}",
                ratio_text(result["speedup"]),
                f"≥ {result['goal_speedup']:.0f}×",
            ],
            *(
                [
                    [
                        f"fmm-fast, lock-step beam, {result['bf16']['backend']} (cpu)",
                        f"{result['bf16']['seconds']:.2f} s",
                        f"{result['bf16']['explanations_per_s']:.2f}",
                        ratio_text(result["bf16"]["speedup"]),
                        f"≥ {result['goal_speedup']:.0f}×; orders = fp32's: "
                        f"{result['bf16']['identical_orders_vs_fp32']}",
                    ]
                ]
                if "bf16" in result
                else []
            ),
        ],
    )
    print(
        f"identical orders: {yes_no(result['identical_orders'])} ({result['identical_sentences']} "
        f"sentences); forward passes {result['forward_passes']} of the bound 1 + B·n(n+1)/2 = "
        f"{result['forward_bound']} ({result['duplicates_dropped']} duplicates dropped; equal to the "
        f"reference's: {yes_no(result['forward_passes_equal_reference'])}); bookkeeping "
        f"{100 * result['bookkeeping_share']:.1f}% of wall time "
        f"(goal < {100 * result['goal_bookkeeping_share']:.0f}%), outside model inference "
        f"{100 * result['outside_model_share']:.1f}%"
    )


# ------------------------------------------------------------------------------------------------ run
def run(
    bench_model: BenchModel,
    quick: bool,
    device: str = "cpu",
    sentences: int | None = None,
    beam_count: int | None = None,
    reference_count: int | None = None,
    repeat: int | None = None,
) -> dict:
    """LOO and beam results on `device` (cpu | cuda); sizes not given come from SIZES[quick]."""
    sizes = SIZES[quick]
    repeat = repeat or (1 if quick else 3)
    split = test_sentences(bench_model.tokenizer, short=quick)
    subset = beam_sentences(split, beam_count or sizes.beam_sentences, sizes.beam_tokens)
    reference_count = min(len(subset), reference_count or sizes.reference_sentences)
    loo_split = test_sentences(bench_model.tokenizer, sentences or sizes.loo_sentences, short=quick)
    return {
        "model": bench_model.description,
        "loo": run_loo(bench_model, loo_split, device, repeat, quick),
        "beam": run_beam(bench_model, subset, device, reference_count, repeat),
    }


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--sentences", type=int, help="LOO sentences (default 100, --quick 5)")
    parser.add_argument("--beam-sentences", type=int, help="beam sentences (default 10, --quick 2)")
    parser.add_argument("--reference-sentences", type=int, help="of those, run by the reference (default 3)")
    args = parser.parse_args()
    check_device(parser, args.device)
    print(machine_line())
    result = run(
        model_for(args),
        args.quick,
        args.device,
        args.sentences,
        args.beam_sentences,
        args.reference_sentences,
        rounds(args),
    )
    print(f"model: {result['model']}")
    print_loo(result["loo"])
    print_beam(result["beam"])
    if args.json:
        write_record(args.json, result)


if __name__ == "__main__":
    main()

"""Benchmark whole recursive-erasure curves (method.md §4): wall time per measure, and the LOO curve against a
straightforward PyTorch version of the same curve.

    .venv/bin/python bench/bench_curve.py [--quick] [--limit N] [--beam-sentences N]
                                          [--comparison-sentences N] [--measures M ...] [--json PATH]

Per measure: `protocols.erasure.ErasureRun` (in a temporary directory) on the first N movie-snippets test
sentences (default 872, the size of SST2's test split), occlusion on ONNX Runtime fp32, gradient measures
on the PyTorch checkpoint, as `fmm-fast evaluate` runs them. Beam runs on a seeded random subset and its
time is extrapolated to N per sentence. LOO and beam are set beside the reference implementation's
per-seed times on one V100 (docs/method.md §7: SST2 LOO curve 15 min, beam-10 22 min; RoBERTa-base, 12
layers of 768, about 8× the FLOPs per token of MiniLM-L6): a ratio of wall times, not a like-for-like
comparison.

Then the recursive LOO curve on 200 sentences (one run each, no repeats: they take minutes): fmm-fast on
ORT fp32 (its time includes the `rand` baseline curve every run computes) against the straightforward
version (per sentence per step one batch of its single-token maskings, scoring in padded batches of 32,
no de-duplication or caching). The curves and the masked inputs at every step must be identical. Also the
same curve on the ORT int8 export: its LOO RACU beside fp32's (int8 is another model); on a CPU with
native bf16, the same curve in bf16 (OpenVINO, as `--precision bf16` runs it): its time and RACU.
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from common import (
    DATASET,
    SEED,
    BenchModel,
    bench_parser,
    check_device,
    explained_counts,
    machine_line,
    model_for,
    print_table,
    ratio_text,
    straightforward_loo_abs,
    test_sentences,
    write_record,
    yes_no,
)

from fmm_fast.backends.base import Backend
from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.precision import cpu_has_native_bf16
from fmm_fast.core.datatypes import EncodedSplit, load_ragged, pad_batch
from fmm_fast.core.metrics import accuracy
from fmm_fast.core.settings import EvaluationSettings
from fmm_fast.data.masking import masked_count
from fmm_fast.data.options import DataOptions
from fmm_fast.data.registry import DATASETS
from fmm_fast.protocols.curve_stats import RATIOS
from fmm_fast.protocols.erasure import ErasureRun, erase_top
from fmm_fast.training.models import SequenceClassifier

# One of each cost profile: a -sign variant runs the same passes as its -abs twin (only the ranking differs).
MEASURES = ["rand", "grad-l1", "grad-l2", "inp-grad-abs", "int-grad-abs", "loo-abs"]
BEAM = "beam-sign-10"
LOO = "loo-abs"
METRIC = DATASETS[DATASET].metric
SST2_TEST_SIZE = 872
# method.md §7: the reference code's wall time per seed on one V100, RoBERTa-base, SST2 test (872 sentences)
REFERENCE_V100_SECONDS = {LOO: 15 * 60, BEAM: 22 * 60}
SCORING_BATCH = 32  # rows per scoring batch of the straightforward curve


@dataclass(frozen=True)
class Sizes:
    limit: int  # sentences per curve
    beam_sentences: int  # beam's random subset of them
    comparison_sentences: int  # the LOO curve comparison


SIZES = {True: Sizes(4, 1, 4), False: Sizes(SST2_TEST_SIZE, 20, 200)}  # by --quick


# ----------------------------------------------------------------------------------------- fmm-fast
def erasure_curves(
    bench_model: BenchModel,
    split: EncodedSplit,
    backend: Backend,
    measures: list[str],
    out_dir: Path,
    device: str = "cpu",
    save_masked: bool = False,
) -> tuple[float, dict]:
    """Run every measure's curve with ErasureRun into out_dir (`rand` always comes first, as in every run);
    returns (wall seconds, result).

    backend serves the forward passes; gradient measures get the PyTorch checkpoint on `device`.
    save_masked also writes the masked inputs of every step (see saved_masked_inputs).
    """
    settings = EvaluationSettings(
        model=str(bench_model.checkpoint),
        data=DataOptions(DATASET, "test", limit=len(split)),
        measures=tuple(measures),
        seed=SEED,
        save_masked=save_masked,
    )
    erasure = ErasureRun(
        settings,
        split,
        MaskBatchEngine(backend),
        out_dir,
        METRIC,
        gradient_engine=lambda: MaskBatchEngine(bench_model.torch_backend(device)),
    )
    started = time.perf_counter()
    result = erasure.run()
    return time.perf_counter() - started, result


def saved_masked_inputs(run_dir: Path, measure: str) -> list[list[np.ndarray]]:
    """Per step 1..10, the masked inputs ErasureRun saved ((T_i,) int64 arrays)."""
    return [load_ragged(run_dir / "masked" / measure / f"ratio-{ratio:.1f}.npz")[0] for ratio in RATIOS[1:]]


# -------------------------------------------------------------------------------- the plain version
def predictions(model: SequenceClassifier, sequences: list[np.ndarray], pad_id: int) -> np.ndarray:
    """(N,) int64 predicted labels, scored in order in padded batches of SCORING_BATCH."""
    device = next(model.parameters()).device
    found = []
    for start in range(0, len(sequences), SCORING_BATCH):
        input_ids, attention_mask = pad_batch(sequences[start : start + SCORING_BATCH], pad_id)
        with torch.inference_mode():
            logits, _ = model(
                torch.from_numpy(input_ids).to(device), torch.from_numpy(attention_mask).to(device)
            )
        found.append(logits.argmax(dim=1).cpu().numpy())
    return np.concatenate(found)


def straightforward_loo_curve(
    model: SequenceClassifier, split: EncodedSplit, mask_id: int, pad_id: int
) -> tuple[list[float], list[list[np.ndarray]]]:
    """The recursive loo-abs curve written plainly: (accuracy per ratio, per step 1..10 the masked inputs)."""
    counts = explained_counts(split)
    current = list(split.input_ids)
    curve = [accuracy(split.labels, predictions(model, current, pad_id))]
    steps = []
    for step, ratio in enumerate(RATIOS[1:], start=1):
        if step == len(RATIOS) - 1:  # r = 1: every explained token masked, no measure computed
            erased = [
                np.where(e, mask_id, ids) for ids, e in zip(split.input_ids, split.explained, strict=True)
            ]
        else:
            erased = [
                erase_top(
                    ids,
                    explained,
                    straightforward_loo_abs(model, ids, explained, int(label), mask_id),
                    int(masked_count(float(ratio), int(n))),
                    mask_id,
                )
                for ids, explained, label, n in zip(
                    current, split.explained, split.labels, counts, strict=True
                )
            ]
        curve.append(accuracy(split.labels, predictions(model, erased, pad_id)))
        steps.append(erased)
        current = erased
    return curve, steps


# ------------------------------------------------------------------------------------------ benches
def measure_times(
    bench_model: BenchModel, split: EncodedSplit, measures: list[str], beam_count: int, device: str
) -> dict:
    """Seconds per measure for whole curves on `split`; beam on a seeded random subset, extrapolated."""
    backend = bench_model.ort_backend("fp32", device)
    table = []
    names = [m for m in measures if m != BEAM]
    if names:
        with tempfile.TemporaryDirectory(prefix="fmm-bench-curve-") as work:
            _, result = erasure_curves(bench_model, split, backend, names, Path(work), device)
        for name in names:
            table.append({"measure": name, "sentences": len(split), **_timing(result, name, len(split))})
    if BEAM in measures:
        rng = np.random.default_rng(SEED)
        subset = split.subset(
            np.sort(rng.choice(len(split), size=min(beam_count, len(split)), replace=False))
        )
        with tempfile.TemporaryDirectory(prefix="fmm-bench-curve-") as work:
            _, result = erasure_curves(bench_model, subset, backend, [BEAM], Path(work), device)
        table.append({"measure": BEAM, "sentences": len(subset), **_timing(result, BEAM, len(split))})
    return {"device": device, "sentences": len(split), "model": bench_model.description, "measures": table}


def _timing(result: dict, name: str, target_sentences: int) -> dict:
    """A measure's seconds from `result`, scaled per sentence to `target_sentences` and to SST2's 872, with
    the ratio to the reference's V100 time where docs/method.md §7 gives one."""
    measured = result["measures"][name]["seconds"]
    per_sentence = measured / result["n_examples"]
    reference = REFERENCE_V100_SECONDS.get(name)
    return {
        "seconds_measured": measured,
        "seconds": per_sentence * target_sentences,
        "extrapolated": result["n_examples"] != target_sentences,
        "seconds_per_872": per_sentence * SST2_TEST_SIZE,
        "reference_v100_seconds": reference,
        "ratio_vs_reference": None if reference is None else reference / (per_sentence * SST2_TEST_SIZE),
        "forward_passes": result["measures"][name]["forward_passes"],
        "racu": result["measures"][name]["racu"],
    }


def loo_curve_comparison(bench_model: BenchModel, split: EncodedSplit, device: str) -> dict:
    """fmm-fast's recursive LOO curve (ORT fp32) against the straightforward one; then int8's RACU and
    the bf16 curve's time and RACU."""
    info = bench_model.info
    with tempfile.TemporaryDirectory(prefix="fmm-bench-loo-") as work:
        seconds, result = erasure_curves(
            bench_model, split, bench_model.ort_backend("fp32", device), [LOO], Path(work), device, True
        )
        fast_steps = saved_masked_inputs(Path(work), LOO)
    started = time.perf_counter()
    plain_curve, plain_steps = straightforward_loo_curve(
        bench_model.torch_model(device, straightforward=True), split, info.mask_id, info.pad_id
    )
    plain_seconds = time.perf_counter() - started
    same_inputs = sum(
        int(np.array_equal(a, b))
        for fast, plain in zip(fast_steps, plain_steps, strict=True)
        for a, b in zip(fast, plain, strict=True)
    )
    comparison = {
        "device": device,
        "sentences": len(split),
        "seconds": seconds,
        "straightforward_seconds": plain_seconds,
        "speedup": plain_seconds / seconds,
        "identical_curves": result["curves"][LOO][METRIC] == plain_curve,
        "identical_masked_inputs": f"{same_inputs}/{len(split) * len(fast_steps)}",
        "curve": result["curves"][LOO][METRIC],
        "straightforward_curve": plain_curve,
        "racu_fp32": result["measures"][LOO]["racu"],
    }
    if device == "cpu":
        with tempfile.TemporaryDirectory(prefix="fmm-bench-loo-") as work:
            int8_seconds, int8_result = erasure_curves(
                bench_model, split, bench_model.ort_backend("int8", device), [LOO], Path(work), device
            )
        comparison |= {
            "int8_seconds": int8_seconds,
            "racu_int8": int8_result["measures"][LOO]["racu"],
            "racu_int8_minus_fp32": int8_result["measures"][LOO]["racu"] - comparison["racu_fp32"],
            "int8_curve": int8_result["curves"][LOO][METRIC],
        }
        comparison |= bf16_loo_curve(bench_model, split, fast_steps, comparison)
    return comparison


def bf16_loo_curve(
    bench_model: BenchModel, split: EncodedSplit, fp32_steps: list[list[np.ndarray]], fp32: dict
) -> dict:
    """The same LOO curve with `--precision bf16` (OpenVINO bf16): its time against the straightforward
    fp32 loop, its RACU beside fp32's, and how many masked inputs equal fp32's. {} without native bf16 or
    openvino."""
    if not cpu_has_native_bf16() or importlib.util.find_spec("openvino") is None:
        return {}
    with tempfile.TemporaryDirectory(prefix="fmm-bench-loo-") as work:
        seconds, result = erasure_curves(
            bench_model, split, bench_model.openvino_backend("bf16"), [LOO], Path(work), "cpu", True
        )
        steps = saved_masked_inputs(Path(work), LOO)
    same_inputs = sum(
        int(np.array_equal(a, b))
        for low, high in zip(steps, fp32_steps, strict=True)
        for a, b in zip(low, high, strict=True)
    )
    return {
        "bf16_seconds": seconds,
        "bf16_speedup": fp32["straightforward_seconds"] / seconds,
        "racu_bf16": result["measures"][LOO]["racu"],
        "racu_bf16_minus_fp32": result["measures"][LOO]["racu"] - fp32["racu_fp32"],
        "bf16_masked_inputs_equal_fp32": f"{same_inputs}/{len(split) * len(steps)}",
        "bf16_curve": result["curves"][LOO][METRIC],
    }


def run(
    bench_model: BenchModel,
    quick: bool,
    device: str = "cpu",
    limit: int | None = None,
    beam_count: int | None = None,
    comparison_sentences: int | None = None,
    measures: list[str] | None = None,
) -> dict:
    """Per-measure curve times on `limit` sentences and the 200-sentence LOO curve comparison; sizes not
    given come from SIZES[quick]. measures=[] skips the per-measure times."""
    sizes = SIZES[quick]
    if measures is None:
        measures = [*MEASURES, BEAM]
    record: dict = {"model": bench_model.description}
    if measures:
        curve_split = test_sentences(bench_model.tokenizer, limit or sizes.limit, short=quick)
        record["times"] = measure_times(
            bench_model, curve_split, measures, beam_count or sizes.beam_sentences, device
        )
    comparison_split = test_sentences(
        bench_model.tokenizer, comparison_sentences or sizes.comparison_sentences, short=quick
    )
    record["loo_curve"] = loo_curve_comparison(bench_model, comparison_split, device)
    return record


def print_times(times: dict) -> None:
    print(
        f"\nwhole curves (11 ratios) on {times['sentences']} sentences, {times['device']}; the reference: "
        f"the paper's code, one V100, RoBERTa-base, SST2 (872); ratio = reference time / ours scaled to 872"
    )
    rows = []
    for item in times["measures"]:
        note = f"run on {item['sentences']}, extrapolated per sentence" if item["extrapolated"] else ""
        reference = item["reference_v100_seconds"]
        rows.append(
            [
                item["measure"],
                f"{item['seconds']:.1f} s",
                f"{item['seconds_per_872'] / 60:.2f} min",
                "—" if reference is None else f"{reference / 60:.0f} min",
                ratio_text(item["ratio_vs_reference"]),
                str(item["forward_passes"]),
                note,
            ]
        )
    print_table(["measure", "time", "per 872", "reference V100", "ratio", "engine rows", "note"], rows)
    print("engine rows: rows through the ORT engine (scoring and occlusion; gradient passes not counted)")


def print_loo_curve(comparison: dict) -> None:
    print(
        f"\nrecursive {LOO} curve on {comparison['sentences']} sentences, {comparison['device']} "
        "(one run each; fmm-fast's time includes its rand baseline curve)"
    )
    rows = [
        [
            "straightforward PyTorch, per sentence per step",
            f"{comparison['straightforward_seconds']:.1f} s",
            "1.0×",
        ],
        [
            "fmm-fast ErasureRun, ORT fp32",
            f"{comparison['seconds']:.1f} s",
            ratio_text(comparison["speedup"]),
        ],
    ]
    if "int8_seconds" in comparison:
        rows.append(
            [
                "fmm-fast ErasureRun, ORT int8 (another model)",
                f"{comparison['int8_seconds']:.1f} s",
                ratio_text(comparison["straightforward_seconds"] / comparison["int8_seconds"]),
            ]
        )
    if "bf16_seconds" in comparison:
        rows.append(
            [
                "fmm-fast ErasureRun, OpenVINO bf16 (--precision bf16)",
                f"{comparison['bf16_seconds']:.1f} s",
                ratio_text(comparison["bf16_speedup"]),
            ]
        )
    print_table(["implementation", "time", "speed-up"], rows)
    if "bf16_seconds" in comparison:
        print(
            f"bf16: LOO RACU {comparison['racu_bf16']:.4f} (bf16 − fp32 = "
            f"{comparison['racu_bf16_minus_fp32']:+.4f}); masked inputs equal to fp32's: "
            f"{comparison['bf16_masked_inputs_equal_fp32']}"
        )
    print(
        f"identical curves: {yes_no(comparison['identical_curves'])}; identical masked inputs: "
        f"{comparison['identical_masked_inputs']} (sentence, step) pairs; "
        f"LOO RACU fp32 {comparison['racu_fp32']:.4f}"
        + (
            f", int8 {comparison['racu_int8']:.4f} (int8 − fp32 = {comparison['racu_int8_minus_fp32']:+.4f})"
            if "racu_int8" in comparison
            else ""
        )
    )


def main() -> None:
    parser = bench_parser(__doc__, repeat=False)
    parser.add_argument(
        "--limit", type=int, help=f"sentences per curve (default {SST2_TEST_SIZE}, --quick 4)"
    )
    parser.add_argument("--beam-sentences", type=int, help="beam's subset (default 20, --quick 1)")
    parser.add_argument("--comparison-sentences", type=int, help="LOO curve comparison (default 200)")
    parser.add_argument(
        "--measures", nargs="*", help=f"measures to time (default {' '.join([*MEASURES, BEAM])}; none: skip)"
    )
    args = parser.parse_args()
    check_device(parser, args.device)
    print(machine_line())
    record = run(
        model_for(args),
        args.quick,
        args.device,
        args.limit,
        args.beam_sentences,
        args.comparison_sentences,
        args.measures,
    )
    print(f"model: {record['model']}")
    if "times" in record:
        print_times(record["times"])
    print_loo_curve(record["loo_curve"])
    if args.json:
        write_record(args.json, record)


if __name__ == "__main__":
    main()

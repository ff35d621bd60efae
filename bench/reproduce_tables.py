"""The tables of the reproduction study's README-tables.md (or README-masf.md), read from the records its
steps wrote."""

from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict
from pathlib import Path

from reproduce_plan import MASF_CALIBRATIONS, MASF_STRATEGIES, DatasetPlan, Scale, Study
from reproduce_steps import Step, Timings

from fmm_fast.core.records import read_record
from fmm_fast.core.writing import write_bytes, write_text
from fmm_fast.measures.registry import PAPER_BEAM
from fmm_fast.protocols.curve_stats import converged
from fmm_fast.protocols.masf.statistic import IN_DISTRIBUTION_LEVEL
from fmm_fast.report.aggregate import Estimate
from fmm_fast.report.identity import count_once, run_identity
from fmm_fast.report.load import load_result
from fmm_fast.report.order import CANONICAL_STRATEGIES
from fmm_fast.report.tables import markdown_table
from fmm_fast.report.write import COST_TABLE, ROAR_TABLE
from fmm_fast.training.base_models import MINILM
from fmm_fast.training.train import RATIOS as TRAIN_RATIOS
from fmm_fast.training.train import ratio_key

MASF_TABLE_RATIOS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
TRAIN_RATIO_KEYS = [ratio_key(r) for r in TRAIN_RATIOS]  # "0.0", "0.5", "1.0" in run.json's test
README = "README-tables.md"
MASF_README = "README-masf.md"


def _percent(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{100 * value:.1f}"


def _seed_records(paths: list[Path]) -> list[dict]:
    """The records of one run per seed, a folder that holds a copy of another seed's run counted once (with
    a warning: report.identity)."""
    return [read_record(path) for path in count_once(paths, lambda p: run_identity(p, None, ()), str)]


def performance_table(study: Study) -> str:
    """(a) test metric at 0/50/100% masking per strategy and dataset vs the majority baseline (run.json)."""
    rows = []
    for plan in study.scale.datasets:
        for strategy in CANONICAL_STRATEGIES:
            runs = [study.train_dir(plan.dataset, strategy, s) / "run.json" for s in study.scale.seeds]
            records = _seed_records(runs)
            metric = records[0]["dataset"]["metric"]
            at = {key: Estimate.of(r["test"][key][metric] for r in records) for key in TRAIN_RATIO_KEYS}
            majority = statistics.fmean(r["majority_metrics"][metric] for r in records)
            kept = sum(converged(plan.dataset, v) for v in at[ratio_key(0.0)].values)
            rows.append(
                [
                    plan.dataset,
                    strategy,
                    metric,
                    f"{len(records)} ({kept})",
                    *(estimate.formatted() for estimate in at.values()),
                    _percent(majority),
                    _versus_baseline(at[ratio_key(1.0)], majority),
                ]
            )
    header = ["Dataset", "Strategy", "Metric", "Seeds (converged)", "Unmasked", "50% masked", "100% masked",
              "Majority baseline", "100% masked vs baseline"]  # fmt: skip
    caption = (
        "Test-split primary metric ×100 of the best checkpoint (train's run.json; explained tokens masked "
        "uniformly at random at 50% and 100%): mean over seeds and 95% BCa bootstrap CI. Majority baseline: "
        "the metric of always predicting the most frequent test label. Converged: bAbI seeds whose unmasked "
        "metric here is above 50 (docs/method.md §5). Tables (b) and (d) apply the rule as `fmm-fast report` "
        "does, to the unmasked metric of the examples the curves ran on: with few of them a seed that "
        "converged here can be dropped there (listed under (b)). 100% masked vs baseline: above or below "
        "when the CI excludes the baseline, else 'at (CI covers it)'."
    )
    return f"{caption}\n\n{markdown_table(header, rows)}"


def _versus_baseline(estimate: Estimate, baseline: float) -> str:
    """'above' / 'below' when the CI excludes the baseline, else 'at (CI covers it)'."""
    if math.isnan(estimate.low):  # one seed: no interval
        return ("above" if estimate.mean >= baseline else "below") + " (no CI)"
    if estimate.low > baseline:
        return "above"
    if estimate.high < baseline:
        return "below"
    return "at (CI covers it)"


def masf_table(study: Study) -> str:
    """(c) Simes p-value per masking ratio and calibration method: median over seeds, and how many seeds
    were in distribution."""
    rows = []
    for plan in study.scale.datasets:
        records = _seed_records([study.masf_dir(plan.dataset, s) / "masf.json" for s in study.scale.seeds])
        for strategy in MASF_STRATEGIES:
            for method in MASF_CALIBRATIONS:
                models = [
                    model
                    for record in records
                    for model in record["models"].values()
                    if model["strategy"] == strategy and model["calibration"]["method"] == method
                ]
                per_seed = [{round(entry["ratio"], 1): entry for entry in m["per_ratio"]} for m in models]
                cells = []
                for ratio in MASF_TABLE_RATIOS:
                    simes = [seed[ratio]["simes"] for seed in per_seed]
                    inside = sum(seed[ratio]["in_distribution"] for seed in per_seed)
                    cells.append(f"{statistics.median(simes):.3g} ({inside}/{len(simes)})")
                floor = statistics.median(m["calibration"]["p_value_floor"] for m in models)
                calibrating = models[0]["calibration"]["n"]
                rows.append([plan.dataset, strategy, method, *cells, f"{calibrating}, {floor:.3g}"])
    header = [
        "Dataset",
        "Strategy",
        "Calibration",
        *[f"{100 * r:.0f}% masked" for r in MASF_TABLE_RATIOS],
        "Calibrating N, p floor",
    ]
    caption = (
        "MaSF Simes p-value of the test examples (explained tokens masked uniformly at random at each ratio; "
        "calibrated on the validation split masked as the model was trained): median over seeds, and in "
        f"parentheses the seeds whose p-value is above {IN_DISTRIBUTION_LEVEL} (in distribution). "
        "Both with exact ties. Calibration: in-sample is the paper's (not a valid p-value: fresh "
        "in-distribution inputs score too low); split reduces each layer to its first principal components "
        "fitted on a seeded half of the validation split (how many: masf.json's calibration.variant), fits "
        "level 1 on that half with conformal p-values and calibrates levels 2-3 on the other half together "
        "with each test example (valid). The last column: the calibrating examples (split: the second "
        "half) and the median p-value floor (`MaSFCalibration.p_value_floor`, the smallest p-value the "
        "calibration allows); a floor above 0.05 means the test cannot detect anything."
    )
    return f"{caption}\n\n{markdown_table(header, rows)}"


def converged_seeds(study: Study, plan: DatasetPlan) -> list[int]:
    """Seeds whose masked model converged on the evaluated examples (the report's rule, docs/method.md §5)."""
    kept = []
    for seed in study.scale.seeds:
        result = load_result(study.evaluation(plan.dataset, seed, "curves") / f"seed-{seed}" / "result.json")
        if result is not None and converged(plan.dataset, result.unmasked):
            kept.append(seed)
    return kept


def _mean_cell(entries: list[dict], kind: str, k: int) -> str:
    """Mean ×100 of entries[*][kind][k] ("overlap" or "chance"), or n/a without entries."""
    return _percent(statistics.fmean(e[kind][str(k)] for e in entries)) if entries else "n/a"


def _plausibility_cells(entries: list[dict], ks: tuple[int, ...]) -> list[str]:
    """Mean ×100 over seeds of ferret's token-F1@k, IOU@k and AUPRC; n/a for records made before them."""
    found = [e["plausibility"] for e in entries if "plausibility" in e]
    if not found or len(found) < len(entries):
        return ["n/a"] * (2 * len(ks) + 1)
    cells = [
        _percent(statistics.fmean(p[name][str(k)] for p in found)) for name in ("token_f1", "iou") for k in ks
    ]
    return [*cells, _percent(statistics.fmean(p["auprc"] for p in found))]


def supporting_table(study: Study) -> str:
    """(d) share of each measure's top-k on supporting-fact tokens, mean over converged seeds."""
    ks = study.scale.supporting_ks
    header = ["Measure"]
    cells: dict[str, list[str]] = defaultdict(list)  # row label -> its cells, dataset after dataset
    notes = []
    for plan in (plan for plan in study.scale.datasets if plan.has_supporting_facts):
        seeds = converged_seeds(study, plan)
        header += [f"{plan.dataset} k={k} (n={len(seeds)})" for k in ks]
        header += [f"token-F1 k={k}" for k in ks] + [f"IOU k={k}" for k in ks] + ["AUPRC"]
        files = [study.supporting_file(plan.dataset, s) for s in seeds]
        records = [record["measures"] for record in _seed_records(files)]
        for measure, _ in study.supporting_plan(plan):
            cells[measure] += [_mean_cell([r[measure] for r in records], "overlap", k) for k in ks]
            cells[measure] += _plausibility_cells([r[measure] for r in records], ks)
        # The expected overlap of a random ranking, on the curves' examples and on beam's fewer ones.
        for label, measure in (
            ("chance (expected)", "rand"),
            (f"chance (expected), {PAPER_BEAM} examples", PAPER_BEAM),
        ):
            cells[label] += [_mean_cell([r[measure] for r in records], "chance", k) for k in ks]
            cells[label] += [""] * (2 * len(ks) + 1)
        if records:
            rand, beam = records[0]["rand"], records[0][PAPER_BEAM]
            notes.append(
                f"{plan.dataset}: {rand['n_examples']} test examples "
                f"({beam['n_examples']} for {PAPER_BEAM}); "
                f"{rand['supporting_tokens_mean']:.1f} supporting of {rand['explained_tokens_mean']:.1f} "
                "explained tokens per example"
            )
    caption = (
        "Share ×100 of each measure's top-k explained tokens (descending score, ties to the earlier "
        "token; signed measures rank by signed score) that lie in a supporting-fact sentence, divided by "
        "min(k, supporting tokens); mean over examples, then over converged seeds of the masked model. "
        "Explanations of the unmasked input, gold label. token-F1, IOU (top-k as the hard rationale) and "
        "AUPRC (soft scores) against the same supporting tokens, as ferret defines them."
    )
    table = markdown_table(header, [[label, *row] for label, row in cells.items()])
    return "\n\n".join([caption, table, "\n".join(f"- {note}" for note in notes)]).strip()


def timing_table(timings: Timings, steps: list[Step]) -> str:
    rows = []
    for step in steps:
        entry = timings.steps.get(step.name, {})
        seconds = entry.get("seconds")
        shown = "" if seconds is None else f"{seconds:.1f}"
        rows.append([step.name, shown, "this run" if entry.get("status") == "ran" else "earlier run"])
    total = sum(timings.steps.get(s.name, {}).get("seconds") or 0.0 for s in steps)
    table = markdown_table(["Step", "Wall time (s)", "Measured in"], rows)
    return f"{table}\n\nSum of the step times: {total / 60:.1f} min."


def settings_table(scale: Scale) -> str:
    header = ["Dataset", "Model", "Epochs", "LR", "Train+validation", "Test", "Curves on", "Beam on",
              "MaSF on"]  # fmt: skip

    def count(value: int | None, whole: str) -> str:
        return whole if value is None else str(value)

    rows = [
        [
            plan.dataset,
            "pretrained MiniLM (all-MiniLM-L6-v2)"
            if plan.model == MINILM
            else f"{plan.model}, {plan.layers} layers, width {plan.width}",
            str(plan.epochs),
            f"{plan.lr:g}",
            count(plan.size, "default"),
            count(plan.test_size, "default"),
            count(plan.eval_limit, "all"),
            count(plan.beam_limit, "all"),
            count(plan.masf_limit, "all"),
        ]
        for plan in scale.datasets
    ]
    return (
        f"Seeds {', '.join(map(str, scale.seeds))}; batch 16; top-k for the overlap k = "
        f"{', '.join(map(str, scale.supporting_ks))}. Test examples are the first N of the test split.\n\n"
        + markdown_table(header, rows)
    )


def ran_roar(study: Study) -> bool:
    """Whether any chain's ROAR step wrote its result and the report its ROAR tables."""
    return (study.report_dir / ROAR_TABLE).is_file() and any(study.roar_root.glob("*/seed-*/result.json"))


def roar_section(study: Study, command: str) -> list[str]:
    """(f) the report's ROAR tables (aggregated over seeds as everywhere in the report) with what ran; where
    no ROAR step ran, the command that runs it."""
    roar = study.scale.roar
    if not ran_roar(study):
        rerun = " ".join(word for word in command.split() if word != "--no-roar")
        return [
            f"Recursive ROAR has not run in this study. `{rerun}` runs it as the last step of every chain "
            "(it reuses everything above); see the scale's cost estimate in the README."
        ]
    measures = ", ".join(roar.measures)
    epochs = "the dataset's epochs"
    if roar.epochs is not None:
        epochs = f"{roar.epochs} epoch{'s' * (roar.epochs != 1)}"
    return [
        f"`fmm-fast roar` per dataset × seed: {measures} and `rand` as the baseline, {roar.steps} steps "
        f"(ratios j/{roar.steps}), every model fine-tuned plainly (as the Recursive ROAR reference does) "
        f"from the pretrained start with the recipe of (e) for {epochs}, scored on the whole test split of "
        "(e). Beside it each measure's erasure without retraining: of the ROAR run's own plain step-0 "
        "model, and of the chain's masked model (`fmm-fast evaluate` of (b), on its fewer test examples). "
        "The paper (RoBERTa-base, Grad-L2 RACU ×100): Recursive ROAR 57.8 on bAbI-2 and 26.1 on "
        "SST2; masked fine-tuning without retraining 96.3 and 40.4.",
        (study.report_dir / ROAR_TABLE).read_text().strip(),
        (study.report_dir / COST_TABLE).read_text().strip(),
    ]


def copy_plots(study: Study, masf_only: bool = False) -> list[str]:
    """The report's curve and ROAR plots (unless masf_only) and every MaSF plot, next to the README; their
    names."""
    copied = []
    report_plots = [*study.report_dir.glob("curves-*.png"), *study.report_dir.glob("roar-*.png")]
    for plot in [] if masf_only else sorted(report_plots):
        write_bytes(study.root / plot.name, plot.read_bytes())
        copied.append(plot.name)
    for plan in study.scale.datasets:
        for seed in study.scale.seeds:
            name = f"masf-{plan.dataset}-seed-{seed}.png"
            write_bytes(study.root / name, (study.masf_dir(plan.dataset, seed) / "masf.png").read_bytes())
            copied.append(name)
    return copied


def write_readme(
    study: Study, command: str, timings: Timings, steps: list[Step], seconds: float, masf_only: bool = False
) -> Path:
    """README-tables.md with tables (a)-(f); masf_only: README-masf.md with (c) and (e)."""
    plots = copy_plots(study, masf_only)
    sections = [
        f"# Reproduction study, scale `{study.scale.name}`" + (", MaSF only" if masf_only else ""),
        f"Written by `{command}` on {time.strftime('%Y-%m-%d %H:%M')} "
        f"(this invocation: {seconds / 60:.1f} min).",
    ]
    if not masf_only:
        sections += [
            "## (a) Performance: unmasked, masked and the majority baseline",
            performance_table(study),
            "## (b) Faithfulness: RACU/ACU of the masked models (`fmm-fast report`)",
            f"Curves on the first test examples of the settings below; {PAPER_BEAM} on fewer (its own `rand` "
            "baseline, same examples).",
            (study.report_dir / "table.md").read_text().strip(),
            "Seconds and forward passes per measure and evaluation run:",
            (study.report_dir / "timing.md").read_text().strip(),
        ]
    sections += ["## (c) MaSF: is the masked input in distribution?", masf_table(study)]
    if not masf_only:
        sections += ["## (d) bAbI: top-k on supporting-fact tokens", supporting_table(study)]
    sections += [
        "## (e) Command, settings and wall time",
        f"```\n{command}\n```",
        settings_table(study.scale),
        timing_table(timings, steps),
        "Every step's exact command is in steps.json. Plots: " + ", ".join(plots) + ".",
    ]
    if not masf_only:
        sections += ["## (f) Recursive ROAR: a new model at every step, beside no retraining"]
        sections += roar_section(study, command)
    path = study.root / (MASF_README if masf_only else README)
    write_text(path, "\n\n".join(sections) + "\n")
    return path

"""RACU and ACU of every measure side by side, from a finished `fmm-fast report`, with each perturbation
measure compared to LOO and beam by its confidence interval.

    .venv/bin/python bench/racu_table.py --report REPORT_DIR --out DIR

`fmm-fast report`'s table.md shows one score per measure (RACU for unsigned measures, ACU for signed ones);
its report.json holds both for every measure. This prints both, over seeds (mean and 95% BCa CI ×100, as
report computes them), with the seconds and forward passes per run, and writes DIR/racu.md and DIR/racu.csv.
The comparison tables (by ACU and by RACU) put each perturbation measure against the references of its kind
(a signed one against loo-sign and beam-sign-10, an unsigned one against loo-abs) and read the CIs only:
"higher" or "lower" where the two 95% CIs do not overlap, else "CIs overlap: no claim". It adds nothing to
report's numbers.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
from pathlib import Path

from fmm_fast.core.records import read_record
from fmm_fast.core.writing import write_text
from fmm_fast.measures.registry import perturbation_names
from fmm_fast.protocols.curve_stats import format_ci

CSV_FIELDS = [
    "dataset", "examples", "measure", "signed", "seeds", "racu_mean", "racu_ci_low", "racu_ci_high",
    "acu_mean", "acu_ci_low", "acu_ci_high", "seconds_per_run", "forward_passes_per_run",
]  # fmt: skip
REFERENCES = ("loo-sign", "loo-abs", "beam-sign-10")  # what the perturbation measures are compared with


def _number(value: float | None) -> float:
    """report.json writes a non-finite number as null."""
    return math.nan if value is None else float(value)


def _estimate(measure: dict, score: str) -> tuple[float, float, float]:
    entry = measure[score]
    return _number(entry["mean"]), _number(entry["ci_low"]), _number(entry["ci_high"])


def compared(mine: tuple[float, float, float], reference: tuple[float, float, float]) -> str:
    """'higher' / 'lower' where the 95% CIs are disjoint, else no claim (also without a CI: one seed)."""
    if any(math.isnan(bound) for bound in (*mine[1:], *reference[1:])):
        return "no CI: no claim"
    if mine[1] > reference[2]:
        return "higher"
    if mine[2] < reference[1]:
        return "lower"
    return "CIs overlap: no claim"


def is_perturbation(name: str) -> bool:
    return name in perturbation_names() or name.startswith("occlusion-")


def group_tables(group: dict) -> tuple[str, list[dict]]:
    """One report group -> (its Markdown section, its CSV rows)."""
    measures = group["measures"]
    rows, lines = [], []
    seeds, examples = len(group["seeds"]), group["n_examples"]
    title = f"{group['dataset']}, {group['strategy']}: {seeds} seeds × {examples} examples"
    lines += [
        f"### {title}",
        "",
        "| Measure | Signed | RACU | ACU | RACU per seed | Seconds per run | Forward passes per run |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, measure in measures.items():
        racu, acu = _estimate(measure, "racu"), _estimate(measure, "acu")
        per_seed = ", ".join(format_ci(_number(v), math.nan, math.nan) for v in measure["racu"]["values"])
        seconds, passes = measure.get("seconds_mean"), measure.get("forward_passes_mean")
        lines.append(
            f"| {name} | {'yes' if measure['signed'] else 'no'} | {format_ci(*racu)} | {format_ci(*acu)} | "
            f"{per_seed} | {'' if seconds is None else f'{seconds:.1f}'} | "
            f"{'' if passes is None else f'{passes:,.0f}'} |"
        )
        rows.append(
            {
                "dataset": group["dataset"],
                "examples": group["n_examples"],
                "measure": name,
                "signed": measure["signed"],
                "seeds": len(measure["seeds"]),
                "racu_mean": racu[0],
                "racu_ci_low": racu[1],
                "racu_ci_high": racu[2],
                "acu_mean": acu[0],
                "acu_ci_low": acu[1],
                "acu_ci_high": acu[2],
                "seconds_per_run": seconds,
                "forward_passes_per_run": passes,
            }
        )
    references = [r for r in REFERENCES if r in measures]
    for score in ("acu", "racu"):
        lines += [
            "",
            f"{score.upper()} of each perturbation measure against {', '.join(references)} (95% CIs):",
            "",
            "| Measure | " + " | ".join(f"vs {r}" for r in references) + " |",
            "|---|" + "---|" * len(references),
        ]
        for name in (n for n in measures if is_perturbation(n)):
            mine = _estimate(measures[name], score)
            verdicts = [
                compared(mine, _estimate(measures[r], score))
                if measures[r]["signed"] == measures[name]["signed"]
                else "(other kind)"
                for r in references
            ]
            lines.append(f"| {name} | " + " | ".join(verdicts) + " |")
    return "\n".join(lines) + "\n", rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--report", type=Path, required=True, help="a `fmm-fast report` output directory")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    report = read_record(args.report / "report.json")
    args.out.mkdir(parents=True, exist_ok=True)
    sections, rows = [], []
    for group in report["groups"]:
        section, group_rows = group_tables(group)
        sections.append(section)
        rows += group_rows
    text = (
        "RACU and ACU ×100: mean over seeds and 95% BCa bootstrap CI (`fmm-fast report`'s report.json).\n\n"
    )
    text += "\n".join(sections)
    if not sections:  # e.g. the quick run's tiny bAbI model, whose one seed report drops as not converged
        dropped = len(report.get("dropped_seeds", []))
        text += f"No erasure results to tabulate ({dropped} seeds dropped by the report as not converged).\n"
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=CSV_FIELDS)
    writer.writeheader()
    writer.writerows(rows)
    write_text(args.out / "racu.md", text)
    write_text(args.out / "racu.csv", table.getvalue())
    print(text)


if __name__ == "__main__":
    main()

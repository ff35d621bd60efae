"""The report's check section: the verdicts of `fmm-fast check` runs (check.json) as one table.

Per check one row: the model, its training strategy as its folder records it ("elsewhere": not trained by
fmm-fast; shown, never used by the verdict), the dataset, the primary metric unmasked and fully masked against
the majority baseline, the excess NLL at 100% masked, MaSF's calibration and first out-of-distribution ratio,
and the verdict: handles masks, does not handle masks, or cannot tell on this data.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fmm_fast.core.errors import UserError
from fmm_fast.core.reading import read_checked
from fmm_fast.report.markdown_text import Markdown, markdown
from fmm_fast.report.tables import markdown_table

CHECK_FILE = "check.json"
CHECK_TABLE = "check.md"
_POINT = {
    "ratio": float,
    "metrics": {"*": float},
    "excess_nll": float,
    "simes": float,
    "simes_holm": float,
    "in_distribution": bool,
}
CHECK_RECORD = {
    "kind": str,
    "dataset": str,
    "split": str,
    "n_examples": int,
    "metric": str,
    "majority_baseline": float,
    "model": {"path": str, "strategy": str},
    "points": [_POINT],
    "calibration": {"set": str},
    "verdict": {"verdict": str, "first_out_ratio": (float, None), "fix": (str, None)},
}


def load_checks(dirs: Sequence[Path]) -> list[dict]:
    """Every check.json under `dirs` (a check.json path itself also counts), sorted by path, each with
    its "path" added; UserError naming a file that is damaged or of the wrong shape."""
    found = {d for d in dirs if d.is_file() and d.name == CHECK_FILE}
    found.update(p for d in dirs if d.is_dir() for p in d.rglob(CHECK_FILE))
    records = []
    for path in sorted(found):
        record = read_checked(path, CHECK_RECORD, "rerun `fmm-fast check` for it")
        if not record["points"] or any(record["metric"] not in p["metrics"] for p in record["points"]):
            raise UserError(
                f"{path} is damaged: its points do not all hold its metric '{record['metric']}'; rerun "
                "`fmm-fast check` for it"
            )
        records.append({**record, "path": str(path)})
    return records


def trained(model: dict) -> str:
    """The model's training strategy, or "elsewhere" for a model fmm-fast did not train."""
    return model["strategy"] if model.get("trained_by", "fmm-fast") == "fmm-fast" else "elsewhere"


def table_rows(record: dict) -> list[dict]:
    """A check's table, one row per ratio, as `fmm-fast check` prints it and Check.to_pandas() gives it:
    ratio, the primary metric, the majority baseline, the excess NLL, MaSF's Simes p raw and Holm-corrected,
    and whether that ratio is in distribution."""
    metric = record["metric"]
    return [
        {
            "ratio": point["ratio"],
            metric: point["metrics"][metric],
            "majority": record["majority_baseline"],
            "excess_nll": point["excess_nll"],
            "simes": point["simes"],
            "simes_holm": point["simes_holm"],
            "in_distribution": point["in_distribution"],
        }
        for point in record["points"]
    ]


def first_out_cell(record: dict) -> str:
    """MaSF's calibration and its first out-of-distribution ratio, e.g. "unmasked: out from 90%"."""
    first = record["verdict"]["first_out_ratio"]
    found = "in at every ratio" if first is None else f"out from {first:.0%}"
    return f"{record['calibration']['set']}: {found}"


def verdict_cell(verdict: dict) -> str:
    """The verdict (and the fixing command)."""
    fix = markdown("; fix: {fix:code}", fix=verdict["fix"]) if verdict["fix"] else Markdown("")
    return markdown("{verdict}{fix}", verdict=verdict["verdict"], fix=fix)


def render_check_markdown(records: list[dict]) -> str:
    """One row per check: can erasure be trusted on that model and dataset?"""
    rows = []
    for record in records:
        metric, points = record["metric"], record["points"]
        rows.append(
            [
                record["model"]["path"],
                trained(record["model"]),
                f"{record['dataset']}/{record['split']} ({record['n_examples']} examples)",
                metric,
                f"{100 * points[0]['metrics'][metric]:.1f}",
                f"{100 * points[-1]['metrics'][metric]:.1f}",
                f"{100 * record['majority_baseline']:.1f}",
                f"{points[-1]['excess_nll']:.2f}",
                first_out_cell(record),
                verdict_cell(record["verdict"]),
            ]
        )
    header = [
        "Model", "Trained", "Data", "Metric", "Unmasked", "100% masked", "Majority", "Excess NLL", "MaSF",
        "Verdict",
    ]  # fmt: skip
    caption = (
        "`fmm-fast check`: does the model handle masks? Metric ×100 on the masked test split; excess NLL: "
        "the gold labels' NLL at 100% masked minus the label prior's, in nats; MaSF: its calibration set and "
        "the first ratio whose Simes p (split calibration, Holm-corrected across ratios) is at most 0.05."
    )
    return "\n\n".join([caption, markdown_table(header, rows)]) + "\n"

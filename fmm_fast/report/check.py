"""The report's check section: the verdicts of `fmm-fast check` runs (check.json) as one table.

Per check one row: the model, its training strategy ("elsewhere": not trained by fmm-fast), the dataset,
the primary metric unmasked and fully masked against the majority baseline, and the verdict: in
distribution under masking, or out from r%.
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
_POINT = {"ratio": float, "metrics": {"*": float}, "simes": float}
CHECK_RECORD = {
    "kind": str,
    "dataset": str,
    "split": str,
    "n_examples": int,
    "metric": str,
    "majority_baseline": float,
    "model": {"path": str, "strategy": str},
    "points": [_POINT],
    "verdict": {"in_distribution": bool, "out_from": (float, None), "fix": (str, None)},
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


def verdict_cell(verdict: dict) -> str:
    """ "in distribution" or "out from r%" (and the fixing command)."""
    if verdict["in_distribution"]:
        return "in distribution under masking"
    fix = markdown("; fix: {fix:code}", fix=verdict["fix"]) if verdict["fix"] else Markdown("")
    return markdown("out of distribution from {ratio:.0%} masked{fix}", ratio=verdict["out_from"], fix=fix)


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
                verdict_cell(record["verdict"]),
            ]
        )
    header = ["Model", "Trained", "Data", "Metric", "Unmasked", "100% masked", "Majority", "Verdict"]
    caption = (
        "`fmm-fast check`: can erasure be trusted? Metric ×100 on the masked test split; out of distribution "
        "where the MaSF Simes p-value (split calibration) is at most 0.05."
    )
    return "\n\n".join([caption, markdown_table(header, rows)]) + "\n"

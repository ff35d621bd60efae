"""The report's peer-metrics section (docs/method.md §8): `fmm-fast aopc` results as a table.

Per (dataset, strategy) one row per measure: AOPC comprehensiveness, AOPC sufficiency, τ-LOO and the
ACU/RACU of the ranking-once erasure curve. With one seed the cell is that run's mean over examples and
its 95% BCa CI over examples; with several seeds, the mean of the seeds' means and the BCa CI over seeds
(as docs/method.md §5 aggregates ACU/RACU).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from fmm_fast.core.errors import UserError
from fmm_fast.core.reading import READ_ERRORS, shape_error
from fmm_fast.core.records import read_record
from fmm_fast.data.local import display_name
from fmm_fast.protocols.aopc import RECORD_KIND, SUMMARIES, summary_cell
from fmm_fast.protocols.curve_stats import bootstrap_ci, format_ci
from fmm_fast.report.aggregate import seeds_text
from fmm_fast.report.identity import count_once, run_identity
from fmm_fast.report.load import find_result_files, load_run
from fmm_fast.report.markdown_text import markdown
from fmm_fast.report.order import measure_sort_key
from fmm_fast.report.tables import markdown_table

PEER_TABLE = "peer-metrics.md"


_NUMBER = (float, None)
_SUMMARY = {"mean": _NUMBER, "ci_low": _NUMBER, "ci_high": _NUMBER, "n": int, "undefined": int}
PEER_RECORD = {
    "dataset": str,
    "split": str,
    "n_examples": int,
    "model": {"strategy": str},
    "measures": {
        "*": {"signed": bool, "acu": _NUMBER, "racu": _NUMBER, **{key: _SUMMARY for key, _ in SUMMARIES}}
    },
}


def load_peer_records(dirs: Sequence[Path]) -> list[dict]:
    """Every peer-metrics result.json under `dirs`, each with its "path" added, each run once (see
    report.identity); UserError naming a file that is damaged or of the wrong shape."""
    records = []
    for path in find_result_files(dirs):
        try:
            record = read_record(path)
            if record.get("kind") == RECORD_KIND and (error := shape_error(record, PEER_RECORD)):
                raise ValueError(error)
        except READ_ERRORS as error:
            raise UserError(
                f"malformed result file {path}: {error}; rerun the command that wrote it"
            ) from None
        if record.get("kind") == RECORD_KIND:
            records.append({**record, "path": str(path)})
    return count_once(  # a copied or symlinked run is one seed, not two
        records,
        lambda r: run_identity(Path(r["path"]), r.get("seed"), r["measures"]),
        lambda r: r["path"],
    )


def has_recursive_results(dirs: Sequence[Path]) -> bool:
    """True when `dirs` hold at least one recursive-protocol evaluation result or ROAR run."""
    return any(load_run(path) is not None for path in find_result_files(dirs))


def _cell(entries: list[dict]) -> str:
    """One run: its CI over examples; several: the BCa CI over the runs' means."""
    if len(entries) == 1:
        return summary_cell(entries[0])
    means = [e["mean"] for e in entries]
    if any(m is None for m in means):
        return "n/a"
    return format_ci(*bootstrap_ci(means))


def _score_cell(runs: list[dict]) -> str:
    key = "acu" if runs[0]["signed"] else "racu"
    values = [r[key] for r in runs]
    if any(v is None for v in values):
        return "n/a"
    return f"{'ACU' if key == 'acu' else 'RACU'} {format_ci(*bootstrap_ci(values))}"


def render_peer_markdown(records: list[dict]) -> str:
    """One table per (dataset, strategy, split): measures × (AOPC comp, AOPC suff, τ-LOO, ACU/RACU)."""
    groups: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for record in records:
        # display_name: older records hold a local file's path
        groups[(display_name(record["dataset"]), record["model"]["strategy"], record["split"])].append(record)
    parts = [
        "Peer metrics (`fmm-fast aopc`, docs/method.md §8), ×100: ranking computed once on the unmasked "
        "input; one seed: mean over examples and 95% BCa CI over examples; several: mean over seeds and BCa "
        "CI over seeds. Last column: the ranking-once erasure curve against rand (RACU unsigned, ACU signed)."
    ]
    for (dataset, strategy, split), runs in sorted(groups.items()):
        names = sorted({n for r in runs for n in r["measures"]}, key=measure_sort_key)
        header = ["Measure", *(title for _, title in SUMMARIES), "Erasure curve"]
        rows = []
        for name in names:
            holders = [r["measures"][name] for r in runs if name in r["measures"]]
            cells = [_cell([h[key] for h in holders]) for key, _ in SUMMARIES]
            fewer = len(holders) != len(runs)
            label = markdown("{name} [{seeds}]", name=name, seeds=seeds_text(len(holders))) if fewer else name
            rows.append([label, *cells, _score_cell(holders)])
        examples = sorted({r["n_examples"] for r in runs})
        sizes = ", ".join(map(str, examples))
        title = markdown(
            "### {dataset} / {strategy} ({split}; {runs} seed(s), {sizes} examples)",
            dataset=dataset,
            strategy=strategy,
            split=split,
            runs=len(runs),
            sizes=sizes,
        )
        parts += [title, markdown_table(header, rows)]
    return "\n\n".join(parts) + "\n"

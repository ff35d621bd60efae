"""`fmm-fast aopc`: peer metrics (docs/method.md §8) for built-in measures and external explanations.

Every explanation is computed (or read) once on the unmasked inputs. Per example it gets AOPC
comprehensiveness, AOPC sufficiency and τ-LOO and the masking of its top floor(r·n) tokens at every
erasure ratio, which gives a non-recursive erasure curve with ACU/RACU against `rand` ranked the same way
(docs/method.md §5). Each finished measure is saved in <run_dir>/state/, so a killed run resumes; the
directory is claimed with the run's fingerprint (fmm_fast.core.outputs), so only the same run resumes.
Writes <run_dir>/peer.jsonl (one line per measure and example) and <run_dir>/result.json (kind
"peer-metrics": dataset means with 95% BCa bootstrap CIs over examples).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.errors import UserError
from fmm_fast.core.machine import machine_record
from fmm_fast.core.metrics import compute_metrics, majority_metric
from fmm_fast.core.outputs import claim_directory, finish_run
from fmm_fast.core.reading import read_state
from fmm_fast.core.records import split_run_header, versions, write_record
from fmm_fast.core.settings import AopcSettings
from fmm_fast.core.writing import replacing
from fmm_fast.data.base import TextDataset
from fmm_fast.measures.base import Measure, row_unit_totals
from fmm_fast.measures.external import ExternalExplanation
from fmm_fast.measures.spec import MeasureSpec
from fmm_fast.protocols.aopc_metrics import THRESHOLDS, PeerScores, peer_metrics
from fmm_fast.protocols.curve_stats import (
    RATIOS,
    acu_racu_against_baseline,
    bootstrap_ci,
    format_ci,
)
from fmm_fast.protocols.erasure import engine_chooser, explain_split, measure_state_path

RUN_KIND = "aopc"
RECORD_KIND = "peer-metrics"
PEER_FILE = "peer.jsonl"
RESULT_FILE = "result.json"
RUN_FILES = ("state", PEER_FILE, RESULT_FILE)
# a finished measure's saved state (PeerScores.to_state per example)
MEASURE_STATE = {
    "examples": [
        {
            "n": int,
            "label": int,
            "probability": float,
            "top_counts": [int],
            "comprehensiveness": [float],
            "sufficiency": [float],
            "tau_loo": float,
            "curve_predictions": [int],
        }
    ],
    "about": dict,
}
# (key in the record, column title); ↑ higher is more faithful, ↓ lower is.
SUMMARIES = (
    ("aopc_comprehensiveness", "AOPC comp ↑"),
    ("aopc_sufficiency", "AOPC suff ↓"),
    ("tau_loo", "τ-LOO ↑"),
)


def summarize(values: Sequence[float]) -> dict:
    """Mean and 95% BCa bootstrap CI over the examples where the value is defined (nan = undefined)."""
    array = np.asarray(values, dtype=np.float64)
    defined = array[np.isfinite(array)]
    if len(defined) == 0:
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0, "undefined": len(array)}
    mean, low, high = bootstrap_ci(defined)

    def number(value: float) -> float | None:
        return None if np.isnan(value) else float(value)

    return {
        "mean": mean,
        "ci_low": number(low),
        "ci_high": number(high),
        "n": len(defined),
        "undefined": len(array) - len(defined),
    }


def fixed_ranking(
    spec: MeasureSpec,
    seed: int,
    engine_for: Callable[[Measure], MaskBatchEngine],
    split: EncodedSplit,
    rows: int,
    on_batch: Callable[[int], None] | None = None,
    example_ids: np.ndarray | None = None,
) -> tuple[list[np.ndarray], bool]:
    """The scores ((T_i,) per example) that rank `split` once, on the unmasked input, by `spec` in a run
    seeded `seed`, and whether the measure is signed. example_ids: as explain_split's."""
    measure = spec.build(seed, 1)  # the recursive protocol's first step: `rand` draws the same first ranking
    explaining = engine_for(measure)
    scores = explain_split(measure, explaining, list(split.input_ids), split, rows, on_batch, example_ids)
    return scores, bool(measure.signed)


def external_unit_scores(scores: Sequence[np.ndarray], split: EncodedSplit) -> list[np.ndarray]:
    """An explanation file's per-token scores with every token of a unit of `split` holding the sum of its
    unit's tokens' scores (as a built-in measure that scores tokens); the scores as given for token units."""
    return [
        np.asarray(row) if split.example_units(i) is None else row_unit_totals(row, split.example_units(i))
        for i, row in enumerate(scores)
    ]


def run_peer_evaluation(
    loaded: LoadedModel,
    dataset: TextDataset,
    split: EncodedSplit,
    settings: AopcSettings,
    run_dir: Path,
    engine: MaskBatchEngine,
    external: Sequence[ExternalExplanation] = (),
    progress_factory: Callable[..., object] | None = None,
    fidelity: Callable[[], dict] | None = None,
) -> dict:
    """All measures of one seed (rand first, then settings.measures, then the external files) on `split`
    (settings.data's split of `dataset`); resumes from run_dir's saved measures; writes and returns
    run_dir/result.json's record. fidelity: the reduced-precision fidelity estimate of the seed
    (protocols.fidelity), computed once the measures are, kept in the record as "fidelity"."""
    started = time.perf_counter()
    num_labels = engine.info.num_labels
    if num_labels <= int(split.labels.max(initial=0)):
        raise UserError(
            f"the model has {num_labels} labels but the dataset uses label index {int(split.labels.max())}; "
            "evaluate a model trained on this dataset"
        )
    claim_directory(run_dir, RUN_KIND, settings.fingerprint_fields(), files=RUN_FILES)
    engine_for = engine_chooser(loaded, settings.backend, engine)
    specs = {spec.name: spec for spec in settings.specs}  # rand first
    per_measure: dict[str, tuple[list[PeerScores], dict]] = {}
    for name in [*specs, *(e.name for e in external)]:
        state_path = measure_state_path(run_dir, name)
        saved = read_state(state_path, MEASURE_STATE, lambda state: len(state["examples"]) == len(split))
        if saved is not None:
            per_measure[name] = ([PeerScores.from_state(e) for e in saved["examples"]], saved["about"])
            continue
        measure_started, rows_before = time.perf_counter(), engine.stats.forward_rows
        progress = None if progress_factory is None else progress_factory(total=2 * len(split), desc=name)
        advance = None if progress is None else progress.update
        fixed = next((e for e in external if e.name == name), None)
        if fixed is None:
            rows = settings.engine.explain_batch_rows
            scores, signed = fixed_ranking(specs[name], settings.seed, engine_for, split, rows, advance)
            about = {"signed": signed, "source": specs[name].source.record()}
        else:
            scores = external_unit_scores(fixed.scores, split)
            about = {"signed": fixed.signed, "source": str(fixed.path)}
            if advance is not None:
                advance(len(split))
        results = peer_metrics(engine, split, scores, RATIOS, on_chunk=advance)
        if progress is not None:
            progress.close()
        about["seconds"] = time.perf_counter() - measure_started
        about["forward_passes"] = engine.stats.forward_rows - rows_before
        state_path.parent.mkdir(parents=True, exist_ok=True)
        write_record(state_path, {"about": about, "examples": [r.to_state() for r in results]})
        per_measure[name] = (results, about)
    summary = _summary(per_measure, split.labels, num_labels, dataset.metric)
    _write_examples(run_dir / PEER_FILE, per_measure)
    record = {
        **split_run_header(RECORD_KIND, settings, loaded, dataset, split),
        "fingerprint": settings.fingerprint(),  # what decides its numbers: report counts equal runs once
        "protocol": "aopc",
        "n_examples": len(split),
        **summary,
        "per_example_file": PEER_FILE,
        "engine": engine.stats.as_dict(),
        "versions": versions(),
        "machine": machine_record(),
    }
    if fidelity is not None:
        record["fidelity"] = fidelity()
    record["durations"] = {"total_seconds": time.perf_counter() - started}
    write_record(run_dir / RESULT_FILE, record)
    finish_run(run_dir)
    return record


def _summary(
    per_measure: dict[str, tuple[list[PeerScores], dict]], labels: np.ndarray, num_labels: int, metric: str
) -> dict:
    """Curves, ACU/RACU against rand, and the dataset means with their CIs."""
    curves = {}
    for name, (results, _) in per_measure.items():
        points = [
            compute_metrics(labels, np.array([r.curve_predictions[j] for r in results]), num_labels)
            for j in range(len(RATIOS))
        ]
        curves[name] = {m: [p[m] for p in points] for m in points[0]}
    scores = acu_racu_against_baseline({name: curve[metric] for name, curve in curves.items()})
    measures = {}
    for name, (results, about) in per_measure.items():
        acu, racu = scores[name]
        measures[name] = {
            **about,
            **{key: summarize([getattr(r, key) for r in results]) for key, _ in SUMMARIES},
            "acu": acu,
            "racu": racu,  # nan over a flat baseline: the record's non-finite rule keeps it
        }
    return {
        "metric": metric,
        "majority_baseline": majority_metric(labels, metric, num_labels),
        "thresholds": THRESHOLDS.tolist(),
        "ratios": RATIOS.tolist(),
        "curves": curves,
        "measures": measures,
    }


def _write_examples(path: Path, per_measure: dict[str, tuple[list[PeerScores], dict]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as staged, staged.open("w", encoding="utf-8") as handle:
        for name, (results, _) in per_measure.items():
            for index, result in enumerate(results):
                handle.write(json.dumps({"measure": name, "index": index, **result.to_json()}) + "\n")


def summary_cell(summary: dict) -> str:
    """×100 mean with its CI, e.g. "12.3 (−1.0/+1.1)"; "n/a" when no example defines the value."""
    if summary["mean"] is None:
        return "n/a"
    low = np.nan if summary["ci_low"] is None else summary["ci_low"]
    high = np.nan if summary["ci_high"] is None else summary["ci_high"]
    return format_ci(summary["mean"], low, high)


def render_peer_table(record: dict) -> str:
    """The printed table of one peer-metrics record: one line per measure."""
    header = f"{'measure':<18}{'signed':>7}" + "".join(f"{title:>22}" for _, title in SUMMARIES)
    header += f"{'ACU':>8}{'RACU':>8}{'seconds':>9}"
    lines = [header]
    for name, m in record["measures"].items():
        racu = "n/a" if math.isnan(m["racu"]) else f"{100 * m['racu']:.1f}"
        lines.append(
            f"{name:<18}{'yes' if m['signed'] else 'no':>7}"
            + "".join(f"{summary_cell(m[key]):>22}" for key, _ in SUMMARIES)
            + f"{100 * m['acu']:>8.1f}{racu:>8}{m['seconds']:>9.1f}"
        )
    undefined = {name: m["tau_loo"]["undefined"] for name, m in record["measures"].items()}
    note = (
        "(×100; mean over examples and 95% BCa bootstrap CI; ranking computed once on the unmasked input; "
        "ACU/RACU of the non-recursive erasure curve against rand ranked once — read RACU for unsigned "
        "measures, ACU for signed ones"
    )
    if any(undefined.values()):
        note += f"; τ-LOO undefined on up to {max(undefined.values())} examples (n < 2 or constant)"
    return "\n".join([*lines, note + ")"])

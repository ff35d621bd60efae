"""result.json of a Recursive ROAR run, built from the step records on disk (so a resumed or scaled-out run
writes the same file): curves, ACU/RACU against `rand` (and RACU clipped to [−1, 1] as the Recursive ROAR
paper reported it), and the cost totals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fmm_fast.core.machine import machine_record
from fmm_fast.core.records import versions
from fmm_fast.core.settings import RoarSettings
from fmm_fast.measures.path_names import measure_entry
from fmm_fast.measures.spec import BASELINE
from fmm_fast.protocols.curve_stats import acu_racu_against_baseline
from fmm_fast.protocols.roar.steps import read_step, seed_dir, step_name

PHASES = ("train", "explain", "mask", "evaluate")
ERASURE_DIR = "erasure"


def seed_records(
    settings: RoarSettings, out: Path, seed: int, names: list[str]
) -> dict[str, list[dict | None]]:
    """Per measure, the record of each ratio (None where the step has not finished); ratio 0 is step 0."""
    root = seed_dir(out, seed)
    first = read_step(root / step_name(0.0))
    return {
        name: [first, *(read_step(measure_entry(root, name) / step_name(r)) for r in settings.ratios()[1:])]
        for name in names
    }


def curve_scores(
    curves: dict[str, list[float | None]], ratios: list[float]
) -> dict[str, dict[str, float | None]]:
    """ACU, RACU and clipped RACU of every complete curve against the complete `rand` curve (else None)."""
    baseline = curves[BASELINE]
    complete = {name: c for name, c in curves.items() if None not in c and None not in baseline}
    scored = acu_racu_against_baseline(complete, ratios) if complete else {}
    scores: dict[str, dict[str, float | None]] = {"acu": {}, "racu": {}, "racu_clipped": {}}
    for name in curves:
        acu, racu = scored.get(name, (None, None))
        scores["acu"][name] = acu
        scores["racu"][name] = racu
        # clipped to [-1, 1] as the Recursive ROAR paper reported it; nan stays nan
        scores["racu_clipped"][name] = None if racu is None else float(np.clip(racu, -1.0, 1.0))
    return scores


def roar_result(settings: RoarSettings, out: Path, metric: str, majority: float) -> dict[str, Any]:
    """The whole run's result.json record (see /docs/method.md's Recursive ROAR section for the protocol)."""
    names = [spec.name for spec in settings.specs]  # rand first
    seeds: dict[str, Any] = {}
    cost = {"trainings": 0, "forward_passes": 0, "backward_passes": 0, "seconds": dict.fromkeys(PHASES, 0.0)}
    counted: set[str] = set()
    complete = True
    for seed in settings.seeds:
        records = seed_records(settings, out, seed, names)
        curves = {
            name: [None if r is None else r["test_metric"] for r in steps] for name, steps in records.items()
        }
        complete &= all(None not in curve for curve in curves.values())
        erasure = seed_dir(out, seed) / ERASURE_DIR / "result.json"
        seeds[str(seed)] = {
            "curves": curves,
            **curve_scores(curves, settings.ratios()),
            "erasure": erasure.relative_to(out).as_posix() if erasure.is_file() else None,
        }
        shared = [read_step(seed_dir(out, seed) / step_name(1.0))]  # trained once, before the chains
        for record in [r for steps in records.values() for r in steps] + shared:
            key = f"{record['seed']}/{record['measure']}/{record['ratio']}" if record else ""
            if record is None or key in counted:  # step 0 stands in every curve: count it once
                continue
            counted.add(key)
            cost["trainings"] += int(record["trained"])
            cost["forward_passes"] += record["passes"]["forward"]
            cost["backward_passes"] += record["passes"]["backward"]
            for phase in PHASES:
                cost["seconds"][phase] += record["seconds"].get(phase, 0.0)
    # what the folder holds: an earlier run's erasure stays (and counts) when a rerun leaves it out
    erasure = settings.erasure or all(seeds[str(s)]["erasure"] is not None for s in settings.seeds)
    complete &= not settings.erasure or all(seeds[str(s)]["erasure"] is not None for s in settings.seeds)
    cost["seconds"]["total"] = sum(cost["seconds"][phase] for phase in PHASES)
    return {
        "protocol": "roar",
        "arguments": {**settings.to_dict(), "erasure": erasure},
        "fingerprint": settings.fingerprint(),  # of every seed (the seeds are left out): see report.identity
        "dataset": settings.data.dataset,
        "splits": settings.data.splits_record(),
        "metric": metric,
        "majority_baseline": majority,
        "strategy": settings.strategy,
        "recursive": settings.recursive,
        "ratios": settings.ratios(),
        "measures": names,
        # what report reads without importing a measure (a plug-in need not be installed where it runs)
        "signed": {spec.name: spec.signed for spec in settings.specs},
        "sources": {spec.name: spec.source.record() for spec in settings.specs},
        "complete": complete,
        "seeds": seeds,
        "cost": cost,
        "versions": versions(),
        "machine": machine_record(),
    }

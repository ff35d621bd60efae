"""Which result files hold the same run, so that the report counts a run once however many copies of it
(a copied or symlinked folder, the same command rerun elsewhere) it is given.

A run's identity is the content digest its record holds: "fingerprint", the sha256 of the fingerprint
fields (the settings that decide its numbers, with each input model's and data file's content digest,
core.digest), with the seed and the measures it holds. A record older than that field is identified by
the run marker of its folder (the same fields), and without one by the file's own content (a copy is
byte-identical).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from fmm_fast.core.digest import content_sha256
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import read_marker
from fmm_fast.core.reading import READ_ERRORS
from fmm_fast.core.records import read_record

if TYPE_CHECKING:
    from fmm_fast.report.load import EvaluationResult, RoarResult

Run = TypeVar("Run")


def run_identity(path: Path, seed: int | None, measures: Collection[str]) -> str:
    """The identity (sha256 hex) of the run of result file `path`: its seed `seed` (None: a file of
    several seeds' models, as masf.json) holding `measures`."""
    try:
        fingerprint = read_record(path).get("fingerprint")
    except READ_ERRORS:  # the caller has read it already: a file that changed since is its own run
        fingerprint = None
    if not isinstance(fingerprint, str):
        try:
            marker = read_marker(path.parent)
        except UserError:  # a damaged marker says nothing about the run
            marker = None
        fingerprint = (
            json.dumps([marker["kind"], marker["fields"]], sort_keys=True)
            if marker is not None
            else f"file:{content_sha256(path)}"
        )
    key = json.dumps([fingerprint, seed, sorted(measures)])
    return hashlib.sha256(key.encode()).hexdigest()


def count_once(
    runs: Sequence[Run], identity: Callable[[Run], str], name: Callable[[Run], object]
) -> list[Run]:
    """`runs` without those whose identity an earlier one has (in the order given), with one warning line
    naming them and the run each repeats."""
    first: dict[str, Run] = {}
    repeats = []
    for run in runs:
        kept = first.setdefault(identity(run), run)
        if kept is not run:
            repeats.append(f"{name(run)} (= {name(kept)})")
    if repeats:
        print(
            f"fmm-fast: warning: counted once: {len(repeats)} result(s) repeat a run given already, with the "
            f"same settings, inputs and seed: {'; '.join(repeats)}",
            file=sys.stderr,
        )
    return list(first.values())


def distinct_evaluations(evaluations: dict[Path, EvaluationResult]) -> dict[Path, EvaluationResult]:
    """The evaluation results (by resolved path), each run once (count_once)."""
    kept = count_once(
        list(evaluations.items()),
        lambda item: run_identity(item[1].path, item[1].seed, item[1].measures),
        lambda item: item[1].path,
    )
    return dict(kept)


def distinct_roar(runs: Sequence[RoarResult]) -> list[RoarResult]:
    """The ROAR runs, each seed of a run once (count_once): a run whose every seed repeats goes."""
    pairs = [(run, seed) for run in runs for seed in run.seeds]
    kept = count_once(
        pairs,
        lambda pair: run_identity(pair[0].path, pair[1], pair[0].seeds[pair[1]].curves),
        lambda pair: f"{pair[0].path} seed {pair[1]}",
    )
    ids = {(id(run), seed) for run, seed in kept}
    thinned = [
        replace(run, seeds={s: v for s, v in run.seeds.items() if (id(run), s) in ids}) for run in runs
    ]
    return [run for run in thinned if run.seeds]

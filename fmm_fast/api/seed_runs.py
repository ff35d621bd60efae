"""What the commands that write one run per seed share (evaluate, aopc): OUT holds a seed-S directory per
seed, each claimed by its own run, and OUT itself carries a marker with the fields its seeds share, listing
what the command wrote there (fmm_fast.core.outputs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fmm_fast.backends.loading import LoadedModel, load_model
from fmm_fast.core.datatypes import EncodedSplit, trained_in
from fmm_fast.core.outputs import check_directory, claim_directory
from fmm_fast.core.settings import (
    AopcSettings,
    EvaluationSettings,
    ExplainSettings,
    MasfSettings,
    ResumableSettings,
)
from fmm_fast.measures.spec import BASELINE

if TYPE_CHECKING:
    from fmm_fast.protocols.fidelity import Sides


def seed_directory(out: Path, seed: int) -> Path:
    return out / f"seed-{seed}"


def shared_fields(settings: ResumableSettings, **extra: Any) -> dict[str, Any]:
    """The fingerprint fields every seed of OUT shares (OUT's own marker): a seed's, less its seed, with
    `extra` (e.g. the content of each explanations file)."""
    fields = {key: value for key, value in settings.fingerprint_fields().items() if key != "seed"}
    return {**fields, **extra}


def check_outputs(
    out: Path,
    kind: str,
    shared: dict[str, Any],
    runs: Mapping[int, ResumableSettings],
    overwrite: bool,
) -> None:
    """OUT (the seeds' container) and each seed directory may take this run, or --overwrite replaces what
    they hold. Reads only: call it before any work."""
    check_directory(out, kind, shared, overwrite)
    for seed, run in runs.items():
        check_directory(seed_directory(out, seed), kind, run.fingerprint_fields(), overwrite)


def claim_container(
    out: Path, kind: str, shared: dict[str, Any], seeds: Sequence[int], files: Sequence[str], overwrite: bool
) -> None:
    """Make OUT this command's container: its marker lists the seed directories and `files` it writes."""
    entries = [*files, *(seed_directory(out, seed).name for seed in seeds)]
    claim_directory(out, kind, shared, overwrite, files=entries)


def fidelity_sides(
    model: Path,
    loaded: LoadedModel,
    settings: EvaluationSettings | ExplainSettings | AopcSettings | MasfSettings,
) -> Sides | None:
    """Both sides of a reduced-precision run's fidelity estimate (protocols.fidelity): the run's model, and
    it in fp32; None for an fp32 run or --fidelity-sample 0."""
    if settings.backend.precision == "fp32" or settings.fidelity_sample == 0:
        return None
    from fmm_fast.protocols.fidelity import precision_run  # loads Numba: not at --help

    fp32 = replace(settings.backend, precision="fp32")
    budget = settings.engine.token_budget
    fp32_side = precision_run(load_model(model, fp32), fp32, budget)
    return precision_run(loaded, settings.backend, budget), fp32_side


def plan_run(
    command: str,
    settings: EvaluationSettings | AopcSettings | ExplainSettings,
    encoded: EncodedSplit,
    loaded: LoadedModel,
    runs: int = 1,
) -> str:
    """Print and return the line with the passes `runs` runs (seeds) of `command` (evaluate | aopc |
    explain) will ask for and their estimated time (protocols.cost), before the long part starts."""
    from fmm_fast.protocols.cost import announce_cost  # NumPy work: not at CLI start-up
    from fmm_fast.protocols.curve_stats import RATIOS

    measures = [spec.build(settings.seed, 1) for spec in settings.specs]
    budget = settings.engine.token_budget
    return announce_cost(command, measures, encoded, RATIOS, loaded.backend, budget, runs)


def print_header(
    model: Path, loaded: LoadedModel, dataset: str, split: str, n: int, measures: Sequence[str]
) -> None:
    """The first printed line: the model, the backend, the split and the measures (`rand` first)."""
    names = ", ".join([BASELINE, *[m for m in measures if m != BASELINE]])
    print(
        f"model {model}{trained_in(loaded.info)} on {loaded.backend.name}; {dataset}/{split}: {n} examples; "
        f"measures: {names}"
    )

"""What the commands that write one run per seed share (evaluate, aopc): OUT holds a seed-S directory per
seed, each claimed by its own run (fmm_fast.core.outputs), and the files the command writes beside them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from fmm_fast.backends.loading import LoadedModel
from fmm_fast.core.outputs import check_directory
from fmm_fast.core.settings import ResumableSettings


def seed_directory(out: Path, seed: int) -> Path:
    return out / f"seed-{seed}"


def own_entries(files: Iterable[str] = ()) -> Callable[[str], bool]:
    """Whether an entry of OUT is the command's: a seed directory or one of `files`."""
    names = frozenset(files)
    return lambda name: name.startswith("seed-") or name in names


def check_seed_directories(
    out: Path, runs: Mapping[int, ResumableSettings], kind: str, precision: str, overwrite: bool
) -> None:
    """Before any work: each seed directory is new, or resumes this very run (in the precision that runs)."""
    for seed, run in runs.items():
        fields = run.ran_in(precision).fingerprint_fields()
        check_directory(seed_directory(out, seed), kind, fields, overwrite)


def print_header(
    model: Path, loaded: LoadedModel, dataset: str, split: str, n: int, measures: Sequence[str]
) -> None:
    """The first printed line: the model, the backend, the split and the measures (`rand` first)."""
    from fmm_fast.protocols.curve_stats import BASELINE  # loads Numba: not at --help

    names = ", ".join([BASELINE, *[m for m in measures if m != BASELINE]])
    print(f"model {model} on {loaded.backend.name}; {dataset}/{split}: {n} examples; measures: {names}")

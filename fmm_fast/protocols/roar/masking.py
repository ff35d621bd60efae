"""One Recursive ROAR step's masking of a dataset by an importance ranking, its digest and its file.

A masked dataset is, per split ("train", "validation", "test"), one (T_i,) int64 input per example: the
split's tokens with some explained tokens replaced by the mask id. Every step masks floor(r·n) of each
example's n explained units (tokens by default, or words or sentences), ranked as recursive erasure ranks
them (already-masked units first, then by descending score, ties to the earlier unit; padding, specials and
the second segment never).
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from fmm_fast.core.datatypes import EncodedSplit, load_ragged, save_ragged
from fmm_fast.data.base import SPLIT_NAMES
from fmm_fast.protocols.erasure import erase_split, fully_masked

MaskedDataset = dict[str, list[np.ndarray]]
# what load_arrays raises for a file that is missing, empty, truncated or not what save_arrays wrote
DATASET_ERRORS = (OSError, ValueError, KeyError, IndexError, EOFError, zipfile.BadZipFile)


def unmasked(encoded: dict[str, EncodedSplit]) -> MaskedDataset:
    return {name: list(encoded[name].input_ids) for name in SPLIT_NAMES}


def all_masked(encoded: dict[str, EncodedSplit], mask_id: int) -> MaskedDataset:
    """Every explained token of every split masked (ratio 1: the same for every measure)."""
    return {name: fully_masked(encoded[name], mask_id) for name in SPLIT_NAMES}


def mask_split(
    split: EncodedSplit, current: list[np.ndarray], scores: list[np.ndarray], ratio: float, mask_id: int
) -> list[np.ndarray]:
    """The inputs `current` of `split` with the top floor(ratio·n) explained units of each masked.

    current, scores: one (T_i,) array per example (scores from the measure on `current`).
    """
    return erase_split(split, current, scores, ratio, mask_id)


def mask_dataset(
    encoded: dict[str, EncodedSplit],
    current: MaskedDataset,
    scores: dict[str, list[np.ndarray]],
    ratio: float,
    mask_id: int,
) -> MaskedDataset:
    return {
        name: mask_split(encoded[name], current[name], scores[name], ratio, mask_id) for name in SPLIT_NAMES
    }


def as_encoded(encoded: dict[str, EncodedSplit], dataset: MaskedDataset) -> dict[str, EncodedSplit]:
    """The splits with their inputs replaced by the masked ones (flags and labels unchanged)."""
    return {name: replace(encoded[name], input_ids=dataset[name]) for name in SPLIT_NAMES}


def dataset_digest(dataset: MaskedDataset, encoded: dict[str, EncodedSplit]) -> str:
    """sha256 of every split's inputs and labels: equal digests, equal training data."""
    digest = hashlib.sha256()
    for name in SPLIT_NAMES:
        digest.update(f"{name}:{len(dataset[name])};".encode())
        for ids in dataset[name]:
            digest.update(np.int64(len(ids)).tobytes())
            digest.update(np.ascontiguousarray(ids, dtype=np.int64).tobytes())
        digest.update(np.ascontiguousarray(encoded[name].labels, dtype=np.int64).tobytes())
    return digest.hexdigest()


def token_counts(
    dataset: MaskedDataset, encoded: dict[str, EncodedSplit], mask_id: int
) -> tuple[dict[str, int], dict[str, int]]:
    """(masked explained tokens, explained tokens) per split."""
    masked, explained = {}, {}
    for name in SPLIT_NAMES:
        flags = encoded[name].explained
        masked[name] = sum(
            int(np.sum(e & (ids == mask_id))) for ids, e in zip(dataset[name], flags, strict=True)
        )
        explained[name] = sum(int(e.sum()) for e in flags)
    return masked, explained


def save_arrays(path: Path, arrays: MaskedDataset) -> None:
    """Every split's ragged arrays in one .npz, written atomically (a killed write leaves no file)."""
    everything = [a for name in SPLIT_NAMES for a in arrays[name]]
    sizes = np.asarray([len(arrays[name]) for name in SPLIT_NAMES], dtype=np.int64)
    save_ragged(path, everything, split_sizes=sizes)


def load_arrays(path: Path) -> MaskedDataset:
    """Inverse of save_arrays."""
    everything, extra = load_ragged(path)
    bounds = np.concatenate([[0], np.cumsum(extra["split_sizes"])])
    return {name: everything[bounds[i] : bounds[i + 1]] for i, name in enumerate(SPLIT_NAMES)}

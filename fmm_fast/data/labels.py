"""Matching a dataset's label names to a model's: by name (or the user's --label-map), never by position."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from fmm_fast.core.errors import UserError
from fmm_fast.data.base import TextDataset

GENERIC_LABEL = re.compile(r"LABEL_\d+")


def generic_labels(label_names: list[str]) -> bool:
    """Whether the names are transformers' placeholders LABEL_0, LABEL_1, ... (nothing to match by)."""
    return all(GENERIC_LABEL.fullmatch(name) for name in label_names)


def parse_label_names(text: str | None) -> list[str] | None:
    """ "negative,positive" -> ["negative", "positive"] (--labels); None for no text."""
    if not text:
        return None
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise UserError(f"--labels '{text}' has an empty name; write e.g. --labels negative,positive")
    return names


def parse_label_map(text: str | None) -> tuple[tuple[str, str], ...]:
    """ "a=negative,b=positive" -> (("a", "negative"), ("b", "positive")); UserError when malformed."""
    if not text:
        return ()
    pairs = []
    for item in text.split(","):
        dataset_name, equals, model_name = (part.strip() for part in item.partition("="))
        if not equals or not dataset_name or not model_name:
            raise UserError(
                f"--label-map item {item.strip()!r} is not DATASET_LABEL=MODEL_LABEL; "
                "write e.g. --label-map a=negative,b=positive"
            )
        pairs.append((dataset_name, model_name))
    sources = [source for source, _ in pairs]
    if len(set(sources)) != len(sources):
        raise UserError(f"--label-map maps a dataset label twice ({text}); give each label once")
    return tuple(pairs)


def model_label_indices(
    dataset_names: list[str], model_names: list[str], label_map: tuple[tuple[str, str], ...] = ()
) -> np.ndarray:
    """(K_dataset,) int64: the model's index of each dataset label, matched by name after `label_map`.

    UserError listing both label sets when a dataset label has no model label of that name, when the map
    names a label the dataset or the model does not have, or when two dataset labels meet in one.
    """
    mapping = dict(label_map)
    unknown = [name for name in mapping if name not in dataset_names]
    if unknown:
        raise UserError(
            f"--label-map names {unknown} but the dataset's labels are {dataset_names}; map those labels"
        )
    wanted = [mapping.get(name, name) for name in dataset_names]
    missing = [name for name in wanted if name not in model_names]
    if missing:
        hint = ",".join(f"{d}={m}" for d, m in zip(dataset_names, model_names, strict=False))
        if generic_labels(model_names):  # never paired by position unless the user says so
            raise UserError(
                f"the model's labels {model_names} are generic names, not the dataset's {dataset_names}; "
                f"say which is which with --label-map (by position: --label-map {hint}), or name them once "
                "with `fmm-fast export --labels ...`"
            )
        raise UserError(
            f"the dataset's labels {dataset_names} are not the model's labels {model_names}; say which is "
            f"which with --label-map (e.g. --label-map {hint}) or use a model trained on this dataset"
        )
    if len(set(wanted)) != len(wanted):
        raise UserError(
            f"--label-map sends two of the dataset's labels {dataset_names} to one model label ({wanted}); "
            "map each to a different one"
        )
    return np.asarray([model_names.index(name) for name in wanted], dtype=np.int64)


def relabelled(dataset: TextDataset, model_names: list[str], to_model: np.ndarray) -> TextDataset:
    """The dataset in a model's labels: `model_names`, every split's labels mapped by `to_model`
    ((K_dataset,) int64 model index of each dataset label: model_label_indices)."""
    splits = {name: replace(split, labels=to_model[split.labels]) for name, split in dataset.splits.items()}
    return replace(dataset, label_names=list(model_names), splits=splits)

"""Raw-text dataset types and the split helpers every loader shares (tokenization happens elsewhere)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from fmm_fast.core.digest import stream_sha256
from fmm_fast.core.errors import UserError

SPLIT_NAMES = ("train", "validation", "test")


@dataclass
class TextSplit:
    """One split as raw text.

    first:      (N,) explained segment (passage, premise, sentence, review, bAbI story so far).
    second:     (N,) question / hypothesis segment, or None for single-segment datasets.
    labels:     (N,) int64 label index into TextDataset.label_names.
    supporting: per example, [start, end) character spans in `first` of the supporting-fact sentences
                (bAbI only), else None.
    """

    first: list[str]
    second: list[str] | None
    labels: np.ndarray
    supporting: list[list[tuple[int, int]]] | None = None

    def __post_init__(self) -> None:
        self.labels = np.asarray(self.labels, dtype=np.int64).reshape(-1)
        count = len(self.first)
        for field_name, values in (
            ("second", self.second),
            ("labels", self.labels),
            ("supporting", self.supporting),
        ):
            if values is not None and len(values) != count:
                raise ValueError(f"TextSplit.{field_name} has {len(values)} entries but first has {count}")

    def __len__(self) -> int:
        return len(self.first)

    def subset(self, indices: np.ndarray | list[int]) -> TextSplit:
        """The examples at `indices` (any order, repeats allowed)."""
        idx = [int(i) for i in indices]
        return TextSplit(
            first=[self.first[i] for i in idx],
            second=None if self.second is None else [self.second[i] for i in idx],
            labels=self.labels[np.asarray(idx, dtype=np.int64)],
            supporting=None if self.supporting is None else [self.supporting[i] for i in idx],
        )


@dataclass
class TextDataset:
    """A classification dataset: label vocabulary, primary metric, paper epochs and the three splits.

    name: what a person reads (the registry name, or a local file's stem: see data.local.display_name);
    file: a local file's {"path", "sha256"} for the records, None for a registry dataset.
    """

    name: str
    label_names: list[str]
    metric: str  # primary metric: "accuracy" | "macro_f1" | "micro_f1" | "matthews"
    epochs: int  # the paper's default number of fine-tuning epochs
    splits: dict[str, TextSplit]  # keys exactly "train", "validation", "test"
    file: dict[str, str] | None = None

    @property
    def num_labels(self) -> int:
        return len(self.label_names)


@dataclass(frozen=True)
class DatasetSpec:
    """A registry entry. hub_path None means the data does not come from the Hugging Face hub."""

    name: str
    label_names: tuple[str, ...]
    metric: str
    epochs: int
    hub_path: str | None = None
    hub_config: str | None = None
    first_field: str = "sentence"  # explained segment
    second_field: str | None = None
    label_field: str = "label"
    test_split: str = "validation"  # official split used as our test split
    # Reorder the official train split with a fixed permutation before the 80/20 cut, for hub copies
    # sorted by label (the paper's tfds copies are shuffled, so its first 80% holds every class).
    shuffle_official_train: bool = False


def splits_content_id(splits: dict[str, TextSplit]) -> str:
    """ "sha256:<hex>" of the splits' content: each split's name, then one JSON line per example (its
    texts and label), splits in name order, so that any edited text or label, or a moved example, changes
    it."""

    def lines() -> Iterator[bytes]:
        for name in sorted(splits):
            split = splits[name]
            yield json.dumps(name).encode() + b"\n"
            second = split.second if split.second is not None else [None] * len(split)
            for first, pair, label in zip(split.first, second, split.labels.tolist(), strict=True):
                yield json.dumps([first, pair, label]).encode() + b"\n"

    return f"sha256:{stream_sha256(lines())}"


def check_sizes(size: int | None, test_size: int | None) -> None:
    """UserError unless size ≥ 2 (one train, one validation example) and test_size ≥ 1, when given."""
    if size is not None and size < 2:
        raise UserError(f"size {size} is too small; give at least 2 (train + validation examples)")
    if test_size is not None and test_size < 1:
        raise UserError(f"test size {test_size} is too small; give at least 1")


def validation_count(size: int) -> int:
    """How many of `size` train+validation examples go to validation: 20%, at least one."""
    return min(size - 1, max(1, round(0.2 * size)))


def cap_splits(
    splits: dict[str, TextSplit], *, seed: int, size: int | None, test_size: int | None
) -> dict[str, TextSplit]:
    """Random subsets (seeded) of at most `size` train+validation and `test_size` test examples.

    Train and validation shrink together, keeping their ratio; None keeps a split whole.
    """
    rng = np.random.default_rng(seed)
    capped = dict(splits)
    pool = len(splits["train"]) + len(splits["validation"])
    if size is not None and size < pool:
        keep_validation = max(1, round(size * len(splits["validation"]) / pool))
        keep = {"train": size - keep_validation, "validation": keep_validation}
        for name, count in keep.items():
            capped[name] = splits[name].subset(rng.permutation(len(splits[name]))[:count])
    if test_size is not None and test_size < len(splits["test"]):
        capped["test"] = splits["test"].subset(rng.permutation(len(splits["test"]))[:test_size])
    return capped


def stratified_split(labels: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Row indices for a train 80% / validation 10% / test 10% split, stratified by label.

    labels: (N,) int64. Every class is shuffled and spread evenly along one ordering (class k's r-th
    member sits at (r + ½) / n_k), which is then cut at 10% and 20%: each split holds each class within
    one example of its proportional share. Each split's indices come back shuffled.
    """
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels, dtype=np.int64)
    count = len(labels)
    position = np.empty(count, dtype=np.float64)
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        position[members] = (np.arange(len(members)) + 0.5) / len(members)
    order = np.lexsort((rng.random(count), position))  # random tie-break between classes
    test_count = max(1, round(0.1 * count))
    validation_end = test_count + max(1, round(0.1 * count))
    if validation_end >= count:
        raise UserError(f"only {count} examples; a train/validation/test split needs at least 3")
    parts = {
        "test": order[:test_count],
        "validation": order[test_count:validation_end],
        "train": order[validation_end:],
    }
    return {name: rng.permutation(parts[name]) for name in SPLIT_NAMES}

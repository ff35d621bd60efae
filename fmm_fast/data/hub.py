"""Paper datasets from the Hugging Face hub via `datasets.load_dataset` (its cache, its offline rules)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from fmm_fast.core.errors import UserError
from fmm_fast.core.optional_deps import HUB
from fmm_fast.data.base import DatasetSpec, TextSplit, cap_splits

if TYPE_CHECKING:
    import datasets

SPLIT_SHUFFLE_SEED = 0  # fixed, so the train/validation split is the same for every run seed


def to_text_split(dataset: datasets.Dataset, spec: DatasetSpec) -> TextSplit:
    """A `datasets.Dataset` -> TextSplit, dropping rows without a gold label (SNLI marks them -1)."""
    table = dataset.with_format("arrow")  # columns as Arrow arrays: fast even for MNLI's 393k rows
    labels = np.asarray(table[spec.label_field].to_numpy(), dtype=np.int64)  # bool labels -> 0/1
    keep = np.flatnonzero((labels >= 0) & (labels < len(spec.label_names)))

    def texts(field: str) -> list[str]:
        values = table[field].to_pylist()
        return [values[i] for i in keep]

    return TextSplit(
        first=texts(spec.first_field),
        second=texts(spec.second_field) if spec.second_field else None,
        labels=labels[keep],
    )


def hub_splits(
    spec: DatasetSpec, *, seed: int, size: int | None, test_size: int | None, offline_names: Sequence[str]
) -> dict[str, TextSplit]:
    """train = first 80% of the official train split, validation = its last 20%, test = spec.test_split.

    size / test_size take seeded random subsets. When the hub is unreachable and the data not cached,
    UserError suggests a local file or one of `offline_names`.
    """
    HUB.require(f"dataset {spec.name} (from the Hugging Face hub)", f"; offline: {', '.join(offline_names)}")
    import datasets  # slow to import; only hub datasets need it

    try:
        official_train, official_test = datasets.load_dataset(
            spec.hub_path, spec.hub_config, split=["train", spec.test_split]
        )
    except (ConnectionError, datasets.exceptions.DatasetNotFoundError) as error:
        raise UserError(
            f"dataset {spec.name} needs network access to the Hugging Face hub; use a local file "
            f"(--text-field/--label-field) or an offline dataset: {', '.join(offline_names)}"
        ) from error
    except RuntimeError as error:  # e.g. a hub dataset that still relies on a loading script
        raise UserError(
            f"dataset {spec.name} could not be loaded from the hub ({str(error).splitlines()[0]}); "
            "export it to a local .jsonl/.csv/.parquet file and pass it with --text-field/--label-field"
        ) from error
    train = to_text_split(official_train, spec)
    if spec.shuffle_official_train:
        train = train.subset(np.random.default_rng(SPLIT_SHUFFLE_SEED).permutation(len(train)))
    cut = round(0.8 * len(train))
    splits = {
        "train": train.subset(range(cut)),
        "validation": train.subset(range(cut, len(train))),
        "test": to_text_split(official_test, spec),
    }
    return cap_splits(splits, seed=seed, size=size, test_size=test_size)

"""Your own splits: --dataset TRAIN,VALIDATION,TEST, three local files read as they are (no 80/10/10 split),
so that a model trained elsewhere is evaluated on the examples it was not trained on."""

from __future__ import annotations

from pathlib import Path

from fmm_fast.core.errors import UserError
from fmm_fast.data.base import SPLIT_NAMES, TextSplit
from fmm_fast.data.local import Table, file_columns, label_indices, read_table


def given_file_splits(
    names: list[str],
    *,
    text_field: str | None,
    pair_field: str | None,
    label_field: str | None,
    label_names: list[str] | None,
) -> tuple[dict[str, TextSplit], list[str]]:
    """The splits of the train, validation and test files `names` (split_file_names' order) and the label
    names: the train file's labels (sorted as for one file) unless label_names are given.

    UserError naming --dataset and the split when a file is missing, empty or unreadable, when the files'
    columns differ, or when validation or test hold a label the train file lacks (no model learns it)."""
    paths = dict(zip(SPLIT_NAMES, map(Path, names), strict=True))
    tables = {split: _read_split(split, path) for split, path in paths.items()}
    _check_same_columns(tables, paths)
    columns = {
        split: file_columns(tables[split], path, text_field, pair_field, label_field)
        for split, path in paths.items()
    }
    _, names_found = label_indices(columns["train"].labels, label_names, paths["train"])
    learned = {str(value) for value in columns["train"].labels}
    for split in SPLIT_NAMES[1:]:
        unseen = next((str(value) for value in columns[split].labels if str(value) not in learned), None)
        if unseen is not None:
            raise UserError(
                f"--dataset: the {split} file {paths[split]} has the label {unseen!r}, which the train file "
                f"{paths['train']} does not (no model learns it); add train examples of it or drop those rows"
            )
    splits = {}
    for split, path in paths.items():
        labels, _ = label_indices(columns[split].labels, names_found, path)
        splits[split] = TextSplit(first=columns[split].first, second=columns[split].second, labels=labels)
    return splits, names_found


def _read_split(split: str, path: Path) -> Table:
    """One split's file as columns; its UserError (missing, empty, no rows, unreadable) names the split."""
    try:
        return read_table(path)
    except UserError as error:
        raise UserError(f"--dataset's {split} file: {error}") from error


def _check_same_columns(tables: dict[str, Table], paths: dict[str, Path]) -> None:
    """UserError naming the first file whose columns differ from the train file's (in any order)."""
    train = list(tables["train"].columns)
    for split in SPLIT_NAMES[1:]:
        other = list(tables[split].columns)
        if set(other) != set(train):
            raise UserError(
                f"--dataset: the {split} file {paths[split]} has the columns {', '.join(other)}, the train "
                f"file {paths['train']} {', '.join(train)}; give the three files the same columns"
            )

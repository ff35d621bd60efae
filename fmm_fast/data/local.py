"""A user's own labelled text file (.csv, .jsonl / .json lines, .parquet), split 80/10/10 by label."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv
import pyarrow.json
import pyarrow.parquet

from fmm_fast.data.base import TextSplit, stratified_split
from fmm_fast.errors import UserError

READERS = {
    ".csv": pyarrow.csv.read_csv,
    ".jsonl": pyarrow.json.read_json,  # one JSON object per line
    ".json": pyarrow.json.read_json,
    ".parquet": pyarrow.parquet.read_table,
}
LOCAL_METRIC = "accuracy"
# --metric for local files: accuracy for balanced classes, macro-F1 (the paper's choice) for imbalanced ones
LOCAL_METRICS = {"accuracy": "accuracy", "macro-f1": "macro_f1"}
LOCAL_EPOCHS = 10


def is_local_file_name(name: str) -> bool:
    """Whether `name` names a data file by its extension (it may not exist)."""
    return Path(name).suffix.lower() in READERS


def read_table(path: Path) -> pa.Table:
    """The file as an Arrow table; UserError if it is missing, empty or unreadable."""
    suffix = path.suffix.lower()
    if suffix not in READERS:
        raise UserError(f"{path}: unsupported file type {suffix!r}; use one of {', '.join(READERS)}")
    if not path.is_file():
        raise UserError(f"{path}: no such file; check the path")
    if path.stat().st_size == 0:
        raise UserError(f"{path} is empty; give a file with a header/fields and labelled rows")
    try:
        table = READERS[suffix](path)
    except (pa.ArrowInvalid, OSError) as error:
        reason = re.sub(r"[^\x20-\x7e]+", "?", str(error))[:160]  # a binary file's bytes: not in the line
        raise UserError(
            f"{path}: cannot read it as {suffix[1:]} ({reason}); fix the file "
            "(JSON files need one object per line)"
        ) from error
    if table.num_rows == 0:
        raise UserError(f"{path} has no rows; give a file with labelled rows")
    return table


def column_values(table: pa.Table, field: str, path: Path, option: str) -> list:
    """One column as Python values; UserError naming the columns if absent, or the row of a missing value."""
    if field not in table.column_names:
        raise UserError(
            f"{path} has no field {field!r}; available: {', '.join(table.column_names)}; fix {option}"
        )
    values = table.column(field).to_pylist()
    missing = next((row for row, value in enumerate(values) if value is None), None)
    if missing is not None:
        raise UserError(f"{path}: row {missing} has no value for {field!r}; fill or drop that row")
    return values


def label_indices(values: list, label_names: list[str] | None, path: Path) -> tuple[np.ndarray, list[str]]:
    """(N,) int64 label indices and the label names.

    Without label_names the names are the distinct values, sorted by value (so 0..10 stay in numeric
    order), as strings. With label_names, a value outside them is a UserError.
    """
    if label_names is None:
        label_names = [str(value) for value in sorted(set(values))]
    index = {name: i for i, name in enumerate(label_names)}
    if len(index) != len(label_names):
        raise UserError(f"label names {label_names} repeat a name; give each label once")
    unknown = next((str(value) for value in values if str(value) not in index), None)
    if unknown is not None:
        raise UserError(
            f"{path}: label {unknown!r} is not one of the given label names {label_names}; "
            "add it to the label names or fix the file"
        )
    if len(label_names) < 2:
        raise UserError(f"{path}: found only the label {label_names}; classification needs at least two")
    return np.asarray([index[str(value)] for value in values], dtype=np.int64), label_names


def local_file_splits(
    path: Path,
    *,
    seed: int,
    text_field: str | None,
    pair_field: str | None,
    label_field: str | None,
    label_names: list[str] | None,
) -> tuple[dict[str, TextSplit], list[str]]:
    """The file's train/validation/test splits (80/10/10, stratified, by seed) and its label names."""
    table = read_table(path)
    if text_field is None or label_field is None:
        raise UserError(
            f"{path} is a local file; name its columns with --text-field and --label-field "
            f"(available: {', '.join(table.column_names)})"
        )
    first = [str(value) for value in column_values(table, text_field, path, "--text-field")]
    second = None
    if pair_field is not None:
        second = [str(value) for value in column_values(table, pair_field, path, "--pair-field")]
    labels, names = label_indices(column_values(table, label_field, path, "--label-field"), label_names, path)
    whole = TextSplit(first=first, second=second, labels=labels)
    splits = {name: whole.subset(rows) for name, rows in stratified_split(labels, seed).items()}
    return splits, names

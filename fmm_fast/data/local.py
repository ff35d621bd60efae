"""A user's own labelled text file (.csv, .jsonl / .json lines, .parquet), split 80/10/10 by label, or
the user's own three split files (--dataset TRAIN,VALIDATION,TEST: data.given_splits reads them).

Cells are read as the file states them: every CSV cell is text ("003" stays "003", labels "01".."06" stay
"01".."06"); JSON and Parquet keep their own types (a number there is declared numeric by the file). A
UTF-8 byte-order mark is skipped, and a column name given twice is an error, never a silent choice.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path

import numpy as np

from fmm_fast.core.digest import file_sha256
from fmm_fast.core.errors import UserError
from fmm_fast.core.optional_deps import PARQUET
from fmm_fast.core.reading import json_lines
from fmm_fast.data.base import SPLIT_NAMES, TextSplit, stratified_split
from fmm_fast.data.blank import BLANK_REASON, is_blank

SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")  # .json: one JSON object per line, like .jsonl
LOCAL_METRIC = "accuracy"
# --metric for local files: accuracy for balanced classes, macro-F1 (the paper's choice) for imbalanced ones
LOCAL_METRICS = {"accuracy": "accuracy", "macro-f1": "macro_f1"}
LOCAL_EPOCHS = 2  # what the guides train with: a model in minutes; pass --epochs for more
LOCAL_LR = 5e-5  # what the guides fine-tune a pretrained encoder with in those 2 epochs (paper: 2e-5, 10+)
NESTED = {list: "list", dict: "JSON object"}  # what a JSON or Parquet cell may hold instead of one value
SPLIT_SEPARATOR = ","  # --dataset train.csv,validation.csv,test.csv: your own splits
NAME_SEPARATORS = " -_."  # what separates the words of a file's stem ("sms-train")


@dataclass
class Table:
    """A file's rows by column: columns[name][row] is a str (every CSV cell), a JSON/Parquet int, float or
    bool, or None (missing)."""

    columns: dict[str, list]


def is_local_file_name(name: str) -> bool:
    """Whether `name` names a data file by its extension (it may not exist)."""
    return Path(name).suffix.lower() in SUFFIXES


def is_local_dataset(dataset: str) -> bool:
    """Whether --dataset names the user's own data: one file or three split files (no registry name)."""
    return is_local_file_name(dataset) or split_file_names(dataset) is not None


def split_file_names(dataset: str) -> list[str] | None:
    """The train, validation and test files of --dataset TRAIN,VALIDATION,TEST (your own splits, in that
    order); None for one name: a registry name or one file (also an existing file whose name holds a comma).
    UserError, before any work, unless the commas separate three different data files."""
    if SPLIT_SEPARATOR not in dataset or Path(dataset).is_file():
        return None
    names = [name.strip() for name in dataset.split(SPLIT_SEPARATOR)]
    order = SPLIT_SEPARATOR.join(SPLIT_NAMES)
    if len(names) != len(SPLIT_NAMES) or not all(names):
        raise UserError(
            f"--dataset {dataset!r} names {len([n for n in names if n])} files; give your own splits as "
            f"three files, {order} (e.g. --dataset train.csv,validation.csv,test.csv), or one file to split "
            "80/10/10"
        )
    other = next((name for name in names if not is_local_file_name(name)), None)
    if other is not None:
        raise UserError(
            f"--dataset: {other!r} is not a {'/'.join(SUFFIXES)} file; your own splits are three data files, "
            f"{order}"
        )
    if len(set(names)) < len(names):
        twice = next(name for i, name in enumerate(names) if name in names[:i])
        raise UserError(f"--dataset names the file {twice} twice; give three different files, {order}")
    return names


def display_name(dataset: str) -> str:
    """The name a person reads for a dataset (tables, headings, plot titles, file names): a local file's
    stem ("/data/x/sms.csv" -> "sms"), a registry name as it is; your own splits: what their files' stems
    begin with ("sms-train", "sms-test", ... -> "sms"), else their folder's name, else the train file's
    stem. Paths and digests go in the records (local_file_record), never a user's directory layout in what
    is shown. Never raises: a record's dataset that is no valid --dataset is shown as it is."""
    try:
        files = split_file_names(dataset)
    except UserError:  # a record written by hand or damaged: its text, which the pages escape
        return dataset
    if files is not None:
        paths = [Path(name) for name in files]
        stems = [path.stem for path in paths]
        columns = zip(*stems, strict=False)  # as far as the shortest stem
        shared = "".join(column[0] for column in takewhile(lambda column: len(set(column)) == 1, columns))
        if shared not in stems:  # "sms-t" of "sms-train", "sms-test": up to the last separator, "sms"
            shared = shared[: max(shared.rfind(mark) for mark in NAME_SEPARATORS) + 1]
        return shared.strip(NAME_SEPARATORS) or paths[0].parent.name or stems[0]
    return Path(dataset).stem if is_local_file_name(dataset) else dataset


def local_file_record(path: Path) -> dict[str, str]:
    """A local data file as the records keep it: the path as given and its content's sha256."""
    return {"path": str(path), "sha256": file_sha256(path, {})}


def read_table(path: Path) -> Table:
    """The file as columns; UserError if it is missing, empty or unreadable."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise UserError(f"{path}: unsupported file type {suffix!r}; use one of {', '.join(SUFFIXES)}")
    if not path.is_file():
        raise UserError(f"{path}: no such file; check the path")
    if path.stat().st_size == 0:
        raise UserError(f"{path} is empty; give a file with a header/fields and labelled rows")
    try:
        if suffix == ".csv":
            rows = _csv_rows(path)
        elif suffix == ".parquet":
            rows = _parquet_rows(path)
        else:
            rows = _json_lines(path)
    except (ValueError, OSError, csv.Error) as error:  # JSONDecodeError is a ValueError
        reason = re.sub(r"[^\x20-\x7e]+", "?", str(error))[:160]  # a binary file's bytes: not in the line
        raise UserError(
            f"{path}: cannot read it as {suffix[1:]} ({reason}); fix the file "
            "(JSON files need one object per line)"
        ) from error
    if not rows:
        raise UserError(f"{path} has no rows; give a file with labelled rows")
    names = list(dict.fromkeys(name for row in rows for name in row))  # first-seen order
    return Table({name: [row.get(name) for row in rows] for name in names})


def _csv_rows(path: Path) -> list[dict]:
    """Rows of a CSV file with a header, every cell as text; an empty or absent cell is missing."""
    with path.open(newline="", encoding="utf-8-sig") as handle:  # -sig: a leading BOM is not a name
        reader = csv.DictReader(handle)  # cells beyond the header land under the key None
        _check_unique(reader.fieldnames or [], "the header")
        rows = []
        for row in reader:
            if None in row:
                raise ValueError(
                    f"line {reader.line_num} has {len(reader.fieldnames or []) + len(row[None])} fields, "
                    f"the header {len(reader.fieldnames or [])}"
                )
            rows.append({name: cell or None for name, cell in row.items()})
    return rows


def _check_unique(names: list[str], where: str) -> None:
    """ValueError naming the first column name that `names` holds twice."""
    repeated = next((name for i, name in enumerate(names) if name in names[:i]), None)
    if repeated is not None:
        raise ValueError(f"{where} names the column {repeated!r} twice; give each column its own name")


def _json_lines(path: Path) -> list[dict]:
    rows = []
    for number, row in json_lines(path):
        if not isinstance(row, dict):
            raise ValueError(f"line {number} is a JSON {type(row).__name__}, not an object")
        rows.append(row)
    return rows


def _parquet_rows(path: Path) -> list[dict]:
    PARQUET.require(f"reading {path.name}", " (or save the file as .csv or .jsonl)")
    import pyarrow
    import pyarrow.parquet

    try:
        table = pyarrow.parquet.read_table(path)
        _check_unique(table.column_names, "the schema")
        return table.to_pylist()
    except pyarrow.ArrowInvalid as error:
        raise ValueError(str(error)) from error


def column_values(table: Table, field: str, path: Path, option: str) -> list[str | int | float | bool]:
    """One column as Python values; UserError naming the columns if absent, or the row of a missing value
    or of one that is a JSON list or object (a cell holds one text or label)."""
    if field not in table.columns:
        raise UserError(f"{path} has no field {field!r}; available: {', '.join(table.columns)}; fix {option}")
    values = table.columns[field]
    missing = next((row for row, value in enumerate(values) if value is None), None)
    if missing is not None:
        raise UserError(f"{path}: row {missing} has no value for {field!r}; fill or drop that row")
    nested = next((row for row, value in enumerate(values) if not isinstance(value, str | int | float)), None)
    if nested is not None:
        kind = NESTED.get(type(values[nested]), "value of another kind")
        raise UserError(
            f"{path}: row {nested}'s {field!r} is a {kind}, not one text, number or true/false; fix that row"
        )
    return values


def text_values(table: Table, field: str, path: Path, option: str) -> list[str]:
    """A text column as strings; UserError naming the first row whose text shows nothing (see blank)."""
    texts = [str(value) for value in column_values(table, field, path, option)]
    blank = next((row for row, text in enumerate(texts) if is_blank(text)), None)
    if blank is not None:
        raise UserError(f"{path}: row {blank}'s {field!r} {BLANK_REASON}; fill or drop that row")
    return texts


def label_indices(values: list, label_names: list[str] | None, path: Path) -> tuple[np.ndarray, list[str]]:
    """(N,) int64 label indices and the label names.

    Without label_names the names are the distinct values as strings, as written ("01" stays "01"),
    ordered by number where a value reads as one (so 1, 2, 10 keep numeric order), then as text. With
    label_names, a value outside them is a UserError.
    """
    if label_names is None:
        label_names = [str(value) for value in sorted(set(values), key=_label_order)]
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


def _label_order(value: object) -> tuple:
    """Values that read as numbers first, by number (the text breaks ties: "1" before "01"), then the
    rest as text. Only the order: a name is always the value as written."""
    try:
        number = float(str(value))
    except ValueError:
        return (1, 0.0, str(value))
    return (0, number, str(value)) if math.isfinite(number) else (1, 0.0, str(value))


@dataclass
class FileColumns:
    """What a file holds for a dataset: (N,) texts, (N,) second segments or None, (N,) label values."""

    first: list[str]
    second: list[str] | None
    labels: list[str | int | float | bool]


def file_columns(
    table: Table, path: Path, text_field: str | None, pair_field: str | None, label_field: str | None
) -> FileColumns:
    """The dataset's columns of a file's table; UserError when --text-field or --label-field is not given
    (naming the columns there are), or a column is missing or holds a missing, blank or nested value."""
    if text_field is None or label_field is None:
        raise UserError(
            f"{path} is a local file; name its columns with --text-field and --label-field "
            f"(available: {', '.join(table.columns)})"
        )
    return FileColumns(
        first=text_values(table, text_field, path, "--text-field"),
        second=None if pair_field is None else text_values(table, pair_field, path, "--pair-field"),
        labels=column_values(table, label_field, path, "--label-field"),
    )


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
    columns = file_columns(read_table(path), path, text_field, pair_field, label_field)
    labels, names = label_indices(columns.labels, label_names, path)
    whole = TextSplit(first=columns.first, second=columns.second, labels=labels)
    splits = {name: whole.subset(rows) for name, rows in stratified_split(labels, seed).items()}
    return splits, names

"""Inputs as Python users hold them, turned into what the commands take: a model source, a dataset name or
file, a list option, an output folder."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fmm_fast.core.digest import cache_directory
from fmm_fast.core.errors import UserError
from fmm_fast.core.writing import write_text
from fmm_fast.data.base import SPLIT_NAMES
from fmm_fast.data.labels import parse_label_names
from fmm_fast.data.local import SPLIT_SEPARATOR
from fmm_fast.data.options import DataOptions
from fmm_fast.training.checkpoint_layout import typed_as_path

# the columns a dataset given as Python data is read by, where no --text-field etc. names others
TEXT, PAIR, LABEL = "text", "pair", "label"

DatasetLike = str | Path | Mapping[str, Any] | Sequence[Mapping[str, Any]]
"""A registry name, a local .csv/.jsonl/.parquet file, your own split files "train.csv,validation.csv,
test.csv", columns {"text": [...], "label": [...], "pair": [...]} (pair optional), rows [{"text": ...,
"label": ...}, ...], a `datasets.Dataset`, a pandas DataFrame, or your own splits: a
`datasets.DatasetDict` or a dict {"train": ..., "validation": ..., "test": ...} of any of these but a
name."""


def model_source(model: Any) -> Any:
    """What the loader takes for `model`: a path for a path or name, the model folder of a training result
    (`fmm_fast.train(...)`), the saved folder of a loaded Hugging Face (model, tokenizer) pair; anything
    else goes to the loader as it is."""
    if isinstance(model, str) and typed_as_path(model) and not Path(model).expanduser().exists():
        # Path() would drop a leading ./ and the name would read as a Hugging Face Hub name
        raise UserError(
            f"model '{model}' does not exist (a path, never a Hub name); give an existing checkpoint or "
            "model folder, or an .onnx file"
        )
    if isinstance(model, str | Path):
        return Path(model)
    if is_loaded_pair(model):
        return saved_pair(*model)
    folder = getattr(model, "model_dir", None)  # a Training result
    return Path(folder) if folder is not None else model


def model_sources(model: Any) -> list[Any]:
    """model_source of each model of a repeatable --model: one model, or a list or tuple of them."""
    several = isinstance(model, list | tuple) and not is_loaded_pair(model)
    return [model_source(m) for m in (model if several else [model])]


def is_loaded_pair(model: Any) -> bool:
    """Whether `model` is (a transformers model, its tokenizer): two objects that save_pretrained."""
    return (
        isinstance(model, tuple)
        and len(model) == 2
        and all(hasattr(part, "save_pretrained") for part in model)
    )


def saved_pair(model: Any, tokenizer: Any) -> Path:
    """A loaded (sequence-classification model, fast tokenizer) pair as the folder every command takes:
    saved once with save_pretrained into fmm-fast's cache folder, named by the content of its files, so the
    same pair given again is the same model (a run resumes) and a changed one another. The folder is then
    read like any save_pretrained folder (labels, special tokens, pair encoding from it; a slow tokenizer
    is refused there with one line)."""
    _check_pair_fits(model, tokenizer)
    models = cache_directory() / "models"
    models.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=models))
    try:
        model.save_pretrained(staging)  # staging: a new folder renamed into place whole
        tokenizer.save_pretrained(staging)  # staging
        digest = hashlib.sha256()
        for path in sorted(p for p in staging.rglob("*") if p.is_file()):
            digest.update(path.relative_to(staging).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        folder = models / f"model-{digest.hexdigest()[:16]}"
        if not folder.exists():
            staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _check_pair_fits(model: Any, tokenizer: Any) -> None:
    """UserError when the tokenizer of a (model, tokenizer) pair has ids the model has no embedding for
    (another model's tokenizer): every command would index past the embedding."""
    embeddings = getattr(model, "get_input_embeddings", lambda: None)()
    rows = getattr(embeddings, "num_embeddings", None)
    if rows is not None and len(tokenizer) > rows:
        raise UserError(
            f"model=: the pair's tokenizer has {len(tokenizer)} tokens, but its model embeds only {rows}; "
            "give the tokenizer the model was trained with, as (model, tokenizer)"
        )


def label_names(labels: str | Sequence[str] | None) -> list[str] | None:
    """--labels as names: "negative,positive" or ["negative", "positive"]; None for none."""
    return parse_label_names(labels if labels is None or isinstance(labels, str) else ",".join(labels))


def as_list(value: Any, option: str) -> list:
    """A repeatable option given once (a string, a path, a number) or as a sequence, as a list."""
    if value is None:
        return []
    if isinstance(value, str | Path | int | float):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, Mapping):
        return list(value)
    raise UserError(f"{option}: give one value or a list of values, not {type(value).__name__}")


def measure_arguments(
    measure: Any, measure_option: Mapping[str, Any] | Sequence[str] | str | None
) -> tuple[list[str], dict[str, Any]]:
    """measure= and measure_option= as the settings take them: the measures as names (a Measure class or
    instance, or a function marked with fmm_fast.measure, becomes its locator: measures.plugins) and the
    options as a dict, from a mapping {"ig_steps": 50} (values as given) or KEY=VALUE strings (text). An
    instance's own options join them; UserError when one differs from an option given."""
    from fmm_fast.measures.plugins import given_measure  # loads NumPy: not at import
    from fmm_fast.measures.registry import parse_measure_options

    if isinstance(measure_option, Mapping):
        options = {str(key): value for key, value in measure_option.items()}
    else:
        options = parse_measure_options([str(pair) for pair in as_list(measure_option, "measure_option")])
    if measure is None:
        measure = []
    elif isinstance(measure, str | Path) or not isinstance(measure, Iterable):
        measure = [measure]
    names = []
    for item in measure:
        if isinstance(item, str | Path):
            names.append(str(item))
            continue
        name, held = given_measure(item)
        clash = [key for key, value in held.items() if key in options and options[key] != value]
        if clash:
            raise UserError(
                f"measure_option {clash[0]}={options[clash[0]]!r} differs from the {clash[0]}="
                f"{held[clash[0]]!r} of the instance given; give it once"
            )
        names.append(name)
        options.update(held)
    return names, options


def run_folder(out: str | Path | None, prefix: str) -> Path:
    """OUT as a path; None: a new temporary folder, kept after the run (its result names it, and a trained
    model or saved masked sets there stay usable)."""
    return Path(tempfile.mkdtemp(prefix=f"fmm-fast-{prefix}-")) if out is None else Path(out)


def dataset_fields(
    dataset: DatasetLike, text_field: str | None, pair_field: str | None, label_field: str | None
) -> tuple[str, str | None, str | None, str | None]:
    """(--dataset, --text-field, --pair-field, --label-field) for `dataset`: a name or file as given; data
    held in Python written once to a JSON Lines file named by its content (under fmm-fast's cache folder),
    so that the same data given again resumes a run in the same OUT, with the columns text/pair/label
    unless the fields name others; your own splits (a DatasetDict, a dict of splits) as the three files
    "TRAIN,VALIDATION,TEST" that --dataset takes."""
    if isinstance(dataset, str | Path):
        return str(dataset), text_field, pair_field, label_field
    if is_split_mapping(dataset):
        _check_split_names(dataset)
        parts = [dataset_fields(dataset[name], text_field, pair_field, label_field) for name in SPLIT_NAMES]
        return SPLIT_SEPARATOR.join(part[0] for part in parts), *parts[0][1:]
    columns = _columns(dataset)
    text, label = text_field or TEXT, label_field or LABEL
    pair = pair_field or (PAIR if PAIR in columns else None)
    missing = [name for name in (text, label, pair) if name is not None and name not in columns]
    if missing:
        raise UserError(
            f"dataset has no column {', '.join(map(repr, missing))} (it has {', '.join(columns)}); name the "
            "columns with text_field= and label_field= (pair_field= for the second segment)"
        )
    lengths = {name: len(columns[name]) for name in (text, label, pair) if name is not None}
    if len(set(lengths.values())) != 1:
        raise UserError(f"the dataset's columns differ in length ({lengths}); give one value per example")
    rows = [{name: _plain(columns[name][i]) for name in lengths} for i in range(next(iter(lengths.values())))]
    text_lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path = cache_directory() / "data" / f"data-{hashlib.sha256(text_lines.encode()).hexdigest()[:12]}.jsonl"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text_lines)
    return str(path), text, pair, label


def is_split_mapping(dataset: Any) -> bool:
    """Whether `dataset` is your own splits: a mapping (a `datasets.DatasetDict` is one) with a key train,
    validation or test whose values are each data (a file, a Dataset, a DataFrame, columns or rows), not
    a column's values."""
    if not isinstance(dataset, Mapping) or not set(dataset) & set(SPLIT_NAMES):
        return False
    return all(
        isinstance(value, str | Path | Mapping)
        or hasattr(value, "to_dict")
        or (isinstance(value, Sequence) and bool(value) and all(isinstance(row, Mapping) for row in value))
        for value in dataset.values()
    )


def _check_split_names(splits: Mapping[str, Any]) -> None:
    """UserError naming dataset= unless the splits are exactly train, validation and test."""
    missing = [name for name in SPLIT_NAMES if name not in splits]
    extra = [str(name) for name in splits if name not in SPLIT_NAMES]
    if missing or extra:
        wrong = f"lacks {', '.join(missing)}" if missing else f"also holds {', '.join(extra)}"
        raise UserError(
            f"dataset= holds the splits {', '.join(map(str, splits))}: it {wrong}; give exactly train, "
            "validation and test (split one of them yourself, e.g. with datasets' train_test_split)"
        )


def data_options(
    dataset: DatasetLike,
    *,
    text_field: str | None,
    pair_field: str | None,
    label_field: str | None,
    label_map: str | Mapping[str, str] | None,
    **flags: Any,
) -> DataOptions:
    """The data options of a function's data arguments, as the command builds them from its flags.

    label_map: "a=negative,b=positive" or {"a": "negative", "b": "positive"}."""
    if isinstance(label_map, Mapping):
        label_map = ",".join(f"{source}={target}" for source, target in label_map.items())
    name, text_field, pair_field, label_field = dataset_fields(dataset, text_field, pair_field, label_field)
    return DataOptions.from_flags(
        dataset=name,
        text_field=text_field,
        pair_field=pair_field,
        label_field=label_field,
        label_map=label_map,
        **flags,
    )


def _columns(dataset: Any) -> dict[str, list]:
    """Columns of a mapping, a list of row mappings, a `datasets.Dataset` or a pandas DataFrame."""
    if hasattr(dataset, "to_dict") and hasattr(dataset, "column_names"):  # datasets.Dataset
        return {name: list(values) for name, values in dataset.to_dict().items()}
    if hasattr(dataset, "to_dict") and hasattr(dataset, "columns"):  # pandas.DataFrame
        return {str(name): list(values) for name, values in dataset.to_dict("list").items()}
    if isinstance(dataset, Mapping):
        return {str(name): list(values) for name, values in dataset.items()}
    if isinstance(dataset, Sequence) and dataset and all(isinstance(row, Mapping) for row in dataset):
        names = list(dict.fromkeys(name for row in dataset for name in row))
        return {str(name): [row.get(name) for row in dataset] for name in names}
    raise UserError(
        f"dataset= takes a registry name, a data file, columns {{'text': [...], 'label': [...]}}, a list of "
        f"rows, a datasets.Dataset or a pandas DataFrame, not {type(dataset).__name__}"
    )


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value JSON writes."""
    return value.item() if hasattr(value, "item") else value

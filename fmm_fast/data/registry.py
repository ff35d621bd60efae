"""The dataset registry (docs/method.md §2) and `load_dataset`, which also reads a user's local file."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from fmm_fast.core.errors import UserError
from fmm_fast.data.babi import LOCATIONS, MAX_GENERATED, TRAIN_SIZE, babi_splits
from fmm_fast.data.base import SPLIT_NAMES, DatasetSpec, TextDataset, TextSplit, cap_splits, check_sizes
from fmm_fast.data.given_splits import given_file_splits
from fmm_fast.data.hub import hub_splits
from fmm_fast.data.local import (
    LOCAL_EPOCHS,
    LOCAL_METRIC,
    LOCAL_METRICS,
    display_name,
    is_local_file_name,
    local_file_record,
    local_file_splits,
    split_file_names,
)
from fmm_fast.data.movie_snippets import LABEL_NAMES as SNIPPET_LABELS
from fmm_fast.data.movie_snippets import movie_snippet_splits

_NLI3 = ("entailment", "neutral", "contradiction")
_NLI2 = ("entailment", "not_entailment")
_GLUE = "nyu-mll/glue"
_MIMIC = ("negative", "positive")

_SPECS = [
    DatasetSpec("babi-1", LOCATIONS, "micro_f1", 20),
    DatasetSpec("babi-2", LOCATIONS, "micro_f1", 20),
    DatasetSpec("babi-3", LOCATIONS, "micro_f1", 20),
    DatasetSpec(
        "boolq", ("False", "True"), "accuracy", 15,
        hub_path="google/boolq", first_field="passage", second_field="question", label_field="answer",
    ),
    DatasetSpec(
        "cb", ("entailment", "contradiction", "neutral"), "macro_f1", 50,
        hub_path="aps/super_glue", hub_config="cb", first_field="premise", second_field="hypothesis",
    ),
    DatasetSpec("cola", ("unacceptable", "acceptable"), "matthews", 15, hub_path=_GLUE, hub_config="cola"),
    DatasetSpec(
        "imdb", ("neg", "pos"), "macro_f1", 10,
        hub_path="stanfordnlp/imdb", hub_config="plain_text", first_field="text", test_split="test",
        shuffle_official_train=True,
    ),
    # MIMIC-III is credentialed (PhysioNet): no hub copy. Field names as in the paper's builder.
    DatasetSpec("mimic-a", _MIMIC, "macro_f1", 20, first_field="text", label_field="diagnosis"),
    DatasetSpec("mimic-d", _MIMIC, "macro_f1", 20, first_field="text", label_field="diagnosis"),
    DatasetSpec(
        "mnli", _NLI3, "accuracy", 10,
        hub_path=_GLUE, hub_config="mnli", first_field="premise", second_field="hypothesis",
        test_split="validation_matched",
    ),
    DatasetSpec(
        "mrpc", ("not_equivalent", "equivalent"), "macro_f1", 20,
        hub_path=_GLUE, hub_config="mrpc", first_field="sentence1", second_field="sentence2",
    ),
    # QNLI explains the sentence (which may hold the answer), not the question.
    DatasetSpec(
        "qnli", _NLI2, "accuracy", 20,
        hub_path=_GLUE, hub_config="qnli", first_field="sentence", second_field="question",
    ),
    DatasetSpec(
        "qqp", ("not_duplicate", "duplicate"), "macro_f1", 10,
        hub_path=_GLUE, hub_config="qqp", first_field="question1", second_field="question2",
    ),
    DatasetSpec(
        "rte", _NLI2, "accuracy", 30,
        hub_path=_GLUE, hub_config="rte", first_field="sentence1", second_field="sentence2",
    ),
    DatasetSpec(
        "snli", _NLI3, "accuracy", 10,
        hub_path="stanfordnlp/snli", hub_config="plain_text", first_field="premise",
        second_field="hypothesis", test_split="test",
    ),
    DatasetSpec("sst2", ("negative", "positive"), "accuracy", 10, hub_path=_GLUE, hub_config="sst2"),
    DatasetSpec("movie-snippets", SNIPPET_LABELS, "accuracy", 10),
]  # fmt: skip
DATASETS: dict[str, DatasetSpec] = {spec.name: spec for spec in _SPECS}

# Datasets built without the hub: (seed, size, test_size) -> splits.
_OFFLINE: dict[str, Callable[..., dict[str, TextSplit]]] = {
    "babi-1": partial(babi_splits, 1),
    "babi-2": partial(babi_splits, 2),
    "babi-3": partial(babi_splits, 3),
    "movie-snippets": movie_snippet_splits,
}


_GENERATED = ("babi-1", "babi-2", "babi-3")  # drawn by our generator: a size is how many it generates
# how the splits of a dataset are made, as its records say (splits_record)
STRATIFIED = "one set split 80/10/10 into train/validation/test, stratified by label"
GIVEN = "given: the train, validation and test files as they are"


def dataset_names() -> list[str]:
    """Every registry name: the paper's 16 and the offline extras."""
    return list(DATASETS)


def is_hub_dataset(name: str) -> bool:
    """Whether registry dataset `name` is read from the Hugging Face hub (its cache)."""
    spec = DATASETS.get(name)
    return spec is not None and spec.hub_path is not None and name not in _OFFLINE


def load_dataset(
    name: str,
    *,
    seed: int = 0,
    size: int | None = None,
    test_size: int | None = None,
    text_field: str | None = None,
    pair_field: str | None = None,
    label_field: str | None = None,
    label_names: list[str] | None = None,
    metric: str | None = None,
) -> TextDataset:
    """A registry dataset, a local .csv/.jsonl/.json/.parquet file (split 80/10/10, stratified by label),
    or your own splits as three such files "TRAIN,VALIDATION,TEST" (for local files text_field and
    label_field are required, pair_field optional).

    seed drives generation (bAbI), local splits and size-capped subsets; size caps train+validation,
    test_size the test split. Local files: label names are the sorted distinct values unless given, and
    metric (accuracy | macro-f1) is the primary metric (default accuracy); registry datasets fix theirs.
    """
    if seed < 0:
        raise UserError(f"seed {seed} is negative; use a seed ≥ 0")
    check_data_sizes(name, size, test_size)
    spec = DATASETS.get(name)
    files = split_file_names(name)
    if files is not None or (spec is None and is_local_file_name(name)):
        fields = {
            "text_field": text_field,
            "pair_field": pair_field,
            "label_field": label_field,
            "label_names": label_names,
        }
        if files is not None:  # your own splits, read as they are
            splits, names = given_file_splits(files, **fields)
            file = None  # their files are in the records' "splits" (splits_record)
        else:
            splits, names = local_file_splits(Path(name), seed=seed, **fields)
            file = local_file_record(Path(name))
        splits = cap_splits(splits, seed=seed, size=size, test_size=test_size)
        return TextDataset(display_name(name), names, local_metric(metric), LOCAL_EPOCHS, splits, file)
    if spec is None:
        raise UserError(
            f"unknown dataset {name!r}; use one of {', '.join(DATASETS)} "
            "or a path to a .csv/.jsonl/.json/.parquet file"
        )

    local_options = {
        "--text-field": text_field,
        "--pair-field": pair_field,
        "--label-field": label_field,
        "--label-names": label_names,
        "--metric": metric,
    }
    given = [option for option, value in local_options.items() if value is not None]
    if given:
        raise UserError(
            f"options {', '.join(given)} are for local files only; drop them for dataset {name} "
            f"(its metric is {spec.metric}, as in the paper)"
        )
    if name in _OFFLINE:
        splits = _OFFLINE[name](seed=seed, size=size, test_size=test_size)
    elif spec.hub_path is None:
        raise UserError(
            f"dataset {name} comes from MIMIC-III, which is not public (PhysioNet credentialed access); "
            "export it to a .csv/.jsonl/.parquet file and pass that path with "
            f"--text-field {spec.first_field} --label-field {spec.label_field}"
        )
    else:
        splits = hub_splits(spec, seed=seed, size=size, test_size=test_size, offline_names=list(_OFFLINE))
    return TextDataset(spec.name, list(spec.label_names), spec.metric, spec.epochs, splits)


def splits_record(name: str, seed: int) -> dict:
    """How the splits of dataset `name` (as load_dataset takes it) are made, for every run's record: "made"
    in words, with the seed that drew them, or your own split files with their content's sha256. Read
    from the name (a hub dataset is not loaded again); --size/--test-size subsets are in the arguments."""
    files = split_file_names(name)
    if files is not None:
        return {
            "made": GIVEN,
            "files": {split: local_file_record(Path(f)) for split, f in zip(SPLIT_NAMES, files, strict=True)},
        }
    if is_local_file_name(name) or name == "movie-snippets":
        return {"made": STRATIFIED, "seed": seed}
    if name in _GENERATED:
        return {"made": "generated: each split drawn by the bAbI generator from its own stream", "seed": seed}
    spec = DATASETS[name]
    return {
        "made": f"train: the first 80% of the official train split, validation: the rest, test: the official "
        f"{spec.test_split} split"
    }


def check_data_sizes(name: str, size: int | None, test_size: int | None) -> None:
    """UserError before any work when --size / --test-size ask for fewer examples than a split needs, or
    for more than a generated dataset generates (a cap on a file or hub dataset just keeps it whole)."""
    check_sizes(size, test_size)
    if name in _GENERATED:
        for option, value in (("--size", size), ("--test-size", test_size)):
            if value is not None and value > MAX_GENERATED:
                raise UserError(
                    f"{option} {value}: {name} generates at most {MAX_GENERATED:,} questions per split "
                    f"(bAbI-10k has {TRAIN_SIZE:,}); give at most {MAX_GENERATED}"
                )


def local_metric(metric: str | None) -> str:
    """The primary-metric key of --metric for a local file (accuracy when not given)."""
    if metric is None:
        return LOCAL_METRIC
    if metric not in LOCAL_METRICS:
        raise UserError(f"unknown --metric {metric!r}; use {' or '.join(LOCAL_METRICS)}")
    return LOCAL_METRICS[metric]

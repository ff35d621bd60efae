"""Your own splits: --dataset TRAIN,VALIDATION,TEST and, in Python, a DatasetDict or a dict of splits; the
automatic 80/10/10 split they replace (unchanged); how the splits were made in every run record; a run
resumed with other splits refused with one line; one line naming --dataset / dataset= for bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import fmm_fast
from fmm_fast.api.inputs import data_options
from fmm_fast.cli import main
from fmm_fast.core.errors import UserError
from fmm_fast.core.records import read_record
from fmm_fast.data import load_dataset
from fmm_fast.data.base import splits_content_id
from fmm_fast.data.options import DataOptions
from fmm_fast.data.registry import GIVEN, STRATIFIED

FIELDS = {"text_field": "text", "label_field": "label"}
NO_FIELDS = {"text_field": None, "pair_field": None, "label_field": None, "label_map": None}
# The automatic split of ONE_FILE_ROWS, taken on main d95a488 (before your own splits existed): the same
# file must keep splitting into the same rows, so that today's results reproduce and their runs resume.
PINNED_SPLITS = {
    0: "sha256:da43e72e8efb73af22e2cf9d78ae0135b90f60e18d4380b3d30b7f58911ff16e",
    1: "sha256:dd004176b167fc35f000eebd8c94ffa75e4c8bb977d6a30d5f3b4a174a4c3cf9",
}
ONE_FILE_ROWS = [{"text": f"example number {i}", "label": "abc"[i * 7 % 3]} for i in range(50)]
# what a local file's data options put in a run's fingerprint on main d95a488
PINNED_FINGERPRINT_KEYS = {
    "dataset", "split", "limit", "size", "test_size", "text_field", "pair_field", "label_field", "data_seed",
    "label_map", "metric", "content",
}  # fmt: skip
OWN = {
    "train": [{"text": f"train text {i}", "label": "ab"[i % 2]} for i in range(8)],
    "validation": [
        {"text": "validation text one", "label": "b"},
        {"text": "validation text two", "label": "a"},
    ],
    "test": [{"text": "test text one", "label": "a"}, {"text": "test text two", "label": "a"}],
}


def write_csv(path: Path, rows: list[dict], columns: tuple[str, ...] = ("text", "label")) -> str:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, list(columns))
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


def own_files(folder: Path, splits: dict[str, list[dict]] = OWN, prefix: str = "sms-") -> str:
    """--dataset for `splits` written as prefixTRAIN.csv, ... in `folder`."""
    return ",".join(write_csv(folder / f"{prefix}{name}.csv", rows) for name, rows in splits.items())


def test_the_automatic_split_of_one_file_is_unchanged(tmp_path):
    path = write_csv(tmp_path / "all.csv", ONE_FILE_ROWS)
    for seed, digest in PINNED_SPLITS.items():
        dataset = load_dataset(path, seed=seed, **FIELDS)
        assert splits_content_id(dataset.splits) == digest
        assert [len(dataset.splits[name]) for name in ("train", "validation", "test")] == [40, 5, 5]
    options = DataOptions(path, **FIELDS)
    assert set(options.fingerprint_fields()) == PINNED_FINGERPRINT_KEYS  # a run made before resumes
    assert options.splits_record() == {"made": STRATIFIED, "seed": 0}


def test_own_splits_are_read_as_they_are(tmp_path):
    dataset = load_dataset(own_files(tmp_path), **FIELDS)
    for name, rows in OWN.items():  # every row, in the file's order: no 80/10/10 split
        assert dataset.splits[name].first == [row["text"] for row in rows]
        assert [dataset.label_names[i] for i in dataset.splits[name].labels] == [row["label"] for row in rows]
    assert dataset.name == "sms"  # what the three stems begin with
    assert dataset.label_names == ["a", "b"]
    record = DataOptions(own_files(tmp_path), **FIELDS).splits_record()
    assert record["made"] == GIVEN
    assert {name: Path(file["path"]).name for name, file in record["files"].items()} == {
        name: f"sms-{name}.csv" for name in OWN
    }
    # --size caps your own splits as it caps the automatic ones: a seeded subset
    assert len(load_dataset(own_files(tmp_path), size=4, **FIELDS).splits["train"]) == 3


def test_a_file_whose_name_holds_a_comma_is_one_file(tmp_path):
    path = write_csv(tmp_path / "a,b.csv", ONE_FILE_ROWS)
    assert len(load_dataset(path, **FIELDS).splits["test"]) == 5


def _bad(folder: Path, case: str) -> str:
    """--dataset of one bad case."""
    files = {name: folder / f"{name}.csv" for name in OWN}
    rows = dict(OWN)
    if case == "a test label the train file lacks":
        rows["test"] = [*OWN["test"], {"text": "test text three", "label": "c"}]
    if case == "a validation label the train file lacks":
        rows["validation"] = [{"text": "validation text", "label": "c"}]
    for name, path in files.items():
        write_csv(path, rows[name])
    if case == "different columns":
        write_csv(
            files["validation"],
            [{**row, "source": "web"} for row in OWN["validation"]],
            ("text", "label", "source"),
        )
    if case == "an empty split":
        write_csv(files["test"], [])
    if case == "a missing file":
        files["test"].unlink()
    names = [str(path) for path in files.values()]
    return {
        "two files": ",".join(names[:2]),
        "one file twice": ",".join([names[0], names[0], names[2]]),
        "a name that is not a data file": ",".join([names[0], names[1], "test.txt"]),
    }.get(case, ",".join(names))


BAD = [
    ("two files", "names 2 files"),
    ("one file twice", "twice"),
    ("a name that is not a data file", "'test.txt'"),
    ("a missing file", "test file"),
    ("an empty split", "test file"),
    ("different columns", "same columns"),
    ("a test label the train file lacks", "'c'"),
    ("a validation label the train file lacks", "validation file"),
]


@pytest.mark.parametrize(("case", "expected"), BAD, ids=[case for case, _ in BAD])
def test_bad_own_splits_are_one_line_naming_the_dataset(tmp_path, case, expected):
    with pytest.raises(UserError) as raised:
        DataOptions(_bad(tmp_path, case), **FIELDS).load()
    message = str(raised.value)
    assert "--dataset" in message and expected in message and "\n" not in message


def test_python_splits_are_the_files_splits(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # where data held in Python is written
    files = load_dataset(own_files(tmp_path), **FIELDS).splits
    as_rows = data_options(OWN, **NO_FIELDS)
    as_columns = data_options(
        {
            name: {"text": [r["text"] for r in rows], "label": [r["label"] for r in rows]}
            for name, rows in OWN.items()
        },
        **NO_FIELDS,
    )
    for options in (as_rows, as_columns):
        assert splits_content_id(options.load().splits) == splits_content_id(files)
        assert options.splits_record()["made"] == GIVEN
    datasets = pytest.importorskip("datasets")
    splits = datasets.DatasetDict({name: datasets.Dataset.from_list(rows) for name, rows in OWN.items()})
    assert splits_content_id(data_options(splits, **NO_FIELDS).load().splits) == splits_content_id(files)
    with pytest.raises(UserError, match=r"dataset=.*lacks validation"):
        data_options(datasets.DatasetDict({"train": splits["train"], "test": splits["test"]}), **NO_FIELDS)


def _babi_rows(tiny_babi) -> dict[str, list[dict]]:
    """A few examples of each split of the data tiny_babi was trained on, as rows with its label names."""
    data = load_dataset("babi-1", **tiny_babi[2])
    counts = {"train": len(data.splits["train"]), "validation": 6, "test": 5}  # train: every location
    return {
        name: [
            {"text": split.first[i], "question": split.second[i], "label": data.label_names[split.labels[i]]}
            for i in range(counts[name])
        ]
        for name, split in data.splits.items()
    }


def test_cli_and_python_give_the_same_result_on_the_same_splits(tiny_babi, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _, onnx, _ = tiny_babi
    rows = _babi_rows(tiny_babi)
    columns = ("text", "question", "label")
    files = ",".join(write_csv(tmp_path / f"{name}.csv", split, columns) for name, split in rows.items())
    fields = ["--text-field", "text", "--pair-field", "question", "--label-field", "label"]
    cli = tmp_path / "cli"
    common = ["--model", str(onnx), "--limit", "4", "--quiet", "--out", str(cli)]
    assert main(["evaluate", "--dataset", files, *fields, *common]) == 0
    python = tmp_path / "python"
    fmm_fast.evaluate(onnx, dataset=rows, pair_field="question", limit=4, quiet=True, out=python)
    results = [read_record(folder / "seed-0" / "result.json") for folder in (cli, python)]
    for field in ("curves", "metric", "majority_baseline", "n_examples", "truncation"):
        assert results[0][field] == results[1][field], field  # number for number
    # the same explanations, score for score (loo-abs reads every token of the test examples)
    explained = [tmp_path / "cli.jsonl", tmp_path / "python.jsonl"]
    assert (
        main(["explain", "--dataset", files, *fields, *common[:-1], str(explained[0]), "-m", "loo-abs"]) == 0
    )
    fmm_fast.explain(
        onnx, dataset=rows, pair_field="question", measure="loo-abs", limit=4, quiet=True, out=explained[1]
    )
    lines = [path.read_text().splitlines() for path in explained]
    assert len(lines[0]) == 4 and lines[0] == lines[1]
    for result in results:
        assert result["splits"]["made"] == GIVEN
    cli_files = results[0]["splits"]["files"]
    assert {name: Path(file["path"]).name for name, file in cli_files.items()} == {
        n: f"{n}.csv" for n in rows
    }
    # resumed with other splits (the automatic split of the same examples in one file): refused, one line
    write_csv(tmp_path / "all.csv", [row for split in rows.values() for row in split], columns)
    capfd.readouterr()
    assert main(["evaluate", "--dataset", str(tmp_path / "all.csv"), *fields, *common]) == 2
    error = capfd.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "data.dataset" in error, error
    assert json.loads((cli / "seed-0" / "result.json").read_text())["splits"]["made"] == GIVEN  # kept


def test_every_run_record_says_how_its_splits_were_made(tiny_babi):
    """The training record of the session's model (generated bAbI); the other records through
    split_run_header, as the test above reads evaluate's."""
    record = read_record(tiny_babi[0].parent / "run.json")
    assert record["dataset"]["splits"] == {
        "made": "generated: each split drawn by the bAbI generator from its own stream",
        "seed": 0,
    }


def test_a_dataset_name_that_is_no_valid_dataset_is_shown_as_it_is():
    """report reads datasets from records, which a hand or a damaged file may have written: a name that
    --dataset would refuse (two files, a file twice) is shown as its text, not raised."""
    from fmm_fast.data.local import display_name

    for name in ("a.csv,b.csv", "x.csv,x.csv,x.csv", "<b>,</b>"):
        assert display_name(name) == name
    assert display_name("/d/sms-train.csv,/d/sms-validation.csv,/d/sms-test.csv") == "sms"

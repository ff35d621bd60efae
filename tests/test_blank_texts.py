"""A text that shows nothing (empty, only whitespace, only invisible characters) is refused alike wherever
user texts enter: a local data file's text and pair columns (explain, evaluate, train read them through
load_dataset) and fmm_fast.api.explain_texts."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from fmm_fast.api import explain_texts
from fmm_fast.core.errors import UserError
from fmm_fast.data import load_dataset
from fmm_fast.data.blank import is_blank

# "" is a missing cell in a CSV file, an empty string in a JSON one
BLANKS = ["", "   ", "\t\n", "\u200b", "\u200b \u200d\u2060", "\ufeff", "\u00a0\u3000", "\x00"]
SHOWN = ["a", " ok ", "\u200bx", "é", "\u0301", "0", "🙂"]


def test_blank_is_nothing_to_show():
    assert all(is_blank(text) for text in BLANKS)
    assert not any(is_blank(text) for text in SHOWN)


def write_rows(path: Path, rows: list[dict]) -> None:
    if path.suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def rows_with(field: str, value: object, row: int = 7) -> list[dict]:
    rows = [{"text": f"text {i}", "question": f"q {i}", "label": i % 2} for i in range(20)]
    rows[row][field] = value
    return rows


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
@pytest.mark.parametrize("field", ["text", "question"])
@pytest.mark.parametrize("blank", BLANKS)
def test_a_blank_text_in_a_local_file_is_refused_like_an_empty_one(tmp_path, suffix, field, blank):
    path = tmp_path / f"reviews{suffix}"
    write_rows(path, rows_with(field, blank))
    with pytest.raises(UserError) as refused:
        load_dataset(str(path), text_field="text", pair_field="question", label_field="label")
    message = str(refused.value)
    assert "\n" not in message and str(path) in message and "row 7" in message and repr(field) in message


def test_a_local_file_with_shown_texts_loads(tmp_path):
    path = tmp_path / "reviews.jsonl"
    write_rows(path, rows_with("text", "\u200bzero-width first, then words"))
    dataset = load_dataset(str(path), text_field="text", pair_field="question", label_field="label")
    texts = [t for split in dataset.splits.values() for t in split.first]
    assert "\u200bzero-width first, then words" in texts and len(texts) == 20


@pytest.mark.parametrize(("field", "value"), [("text", ["a", "b"]), ("label", {"x": 1}), ("question", [])])
def test_a_list_or_object_cell_is_refused(tmp_path, field, value):
    path = tmp_path / "reviews.jsonl"
    write_rows(path, rows_with(field, value))
    with pytest.raises(UserError, match=rf"row 7's '{field}' is a (list|JSON object), not one text"):
        load_dataset(str(path), text_field="text", pair_field="question", label_field="label")


@pytest.mark.parametrize("blank", BLANKS)
def test_explain_texts_refuses_a_blank_text_or_pair(tmp_path, blank):
    model = tmp_path / "no-model-needed"  # the texts are checked before the model is loaded
    with pytest.raises(UserError, match=r"^text 1 is empty or holds only whitespace"):
        explain_texts(model, ["fine", blank])
    with pytest.raises(UserError, match=r"^pair 0 is empty or holds only whitespace"):
        explain_texts(model, ["fine"], pairs=[blank])
    with pytest.raises(UserError, match="text 0 is a int, not a string"):
        explain_texts(model, [3])

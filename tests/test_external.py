"""External explanations: word → token mapping, and every bad file ends in one line naming the example."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.pre_tokenizers import BertPreTokenizer
from tokenizers.processors import TemplateProcessing

from fmm_fast.core.errors import UserError
from fmm_fast.data.tokenization import encode_texts
from fmm_fast.measures.external import load_explanations, word_token_scores

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "play", "##ing", "##s", "is", "?", "who"]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    """A WordPiece tokenizer that splits "playing" into play ##ing, with BERT's [CLS] A [SEP] B [SEP]."""
    tok = Tokenizer(WordPiece({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.pre_tokenizer = BertPreTokenizer()
    tok.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    return tok


@pytest.fixture
def split(tokenizer):
    first = ["the cat is playing", "cats playing"]
    return encode_texts(tokenizer, first, ["who ?", "who ?"], np.array([0, 1]))


def write(tmp_path, lines: list) -> object:
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def test_word_scores_are_shared_by_the_words_tokens(tokenizer):
    scores = word_token_scores(tokenizer, "the cat is playing", "who ?", [0.1, 0.2, 0.3, 0.4])
    tokens = tokenizer.encode("the cat is playing", "who ?").tokens
    assert tokens == ["[CLS]", "the", "cat", "is", "play", "##ing", "[SEP]", "who", "?", "[SEP]"]
    assert scores.tolist() == [0, 0.1, 0.2, 0.3, 0.4, 0.4, 0, 0, 0, 0]


def test_a_good_file_loads_in_split_order(tmp_path, tokenizer, split):
    lengths = [len(ids) for ids in split.input_ids]
    path = write(
        tmp_path,
        [
            {"index": 1, "word_scores": [-1.0, 2.0]},
            {"index": 0, "token_scores": list(range(lengths[0]))},
        ],
    )
    loaded = load_explanations(path, split, tokenizer)
    assert loaded.name == "mine" and loaded.signed  # a negative explained score
    assert loaded.scores[0].tolist() == list(range(lengths[0]))
    # "cats playing" → cat ##s play ##ing
    assert loaded.scores[1][1:5].tolist() == [-1.0, -1.0, 2.0, 2.0]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            [{"index": 0, "word_scores": [1, 2, 3, 4]}],
            "explains 1 of the 2 evaluated examples: example 1 missing",
        ),
        (
            ['{"index": 0, "word_scores": [1, 2, 3, 4]', {"index": 1, "word_scores": [1, 2]}],
            "line 1: Expecting ',' delimiter",
        ),
        (  # the file's own line number, past blank lines and a string holding U+2028
            ['{"index": 0, "word_scores": [1, 2, 3, 4], "note": "a\u2028b"}', "", '{"index": 1,'],
            "line 3: Expecting",
        ),
        ([{"index": 0, "word_scores": [1, 2, 3, 4]}, '{"index": 1, "word_scores": [1, 1e400]}'], "is inf"),
        (
            [{"index": 0, "word_scores": [1, 2, 3, 4]}, f'{{"index": 1, "word_scores": [1, {"9" * 400}]}}'],
            "(400 digits), not a finite 64-bit float",
        ),
        (
            [{"index": 0, "word_scores": [1, 2, 3]}, {"index": 1, "word_scores": [1, 2]}],
            "(example 0): 3 word",
        ),
        (
            [{"index": 0, "token_scores": [1, 2]}, {"index": 1, "word_scores": [1, 2]}],
            "(example 0): 2 token_scores",
        ),
        (['{"index": 1, "word_scores": [1, NaN]}', {"index": 0, "word_scores": [1, 2, 3, 4]}], "(example 1)"),
        ([{"index": 7, "word_scores": [1, 2]}], "example 7 is not in the evaluated split"),
        ([{"index": 1, "word_scores": [1, 2]}, {"index": 1, "word_scores": [1, 2]}], "already has"),
        ([{"index": 0, "word_scores": [1, 2, 3, 4], "token_scores": [1]}], "exactly one of"),
        ([{"word_scores": [1, 2]}], '"index" must be'),
        ([{"index": 0, "word_scores": [1, "a", 3, 4]}], "list of numbers"),
    ],
)
def test_bad_files_name_the_example(tmp_path, tokenizer, split, lines, message):
    with pytest.raises(UserError, match=None) as error:
        load_explanations(write(tmp_path, lines), split, tokenizer)
    text = str(error.value)
    assert message in text and "\n" not in text


def test_a_file_named_like_a_measure_is_refused(tmp_path, tokenizer, split):
    path = tmp_path / "loo-abs.jsonl"
    path.write_text("")
    with pytest.raises(UserError, match="rename it"):
        load_explanations(path, split, tokenizer)

"""Tokenizing many long texts keeps memory flat: texts are encoded ENCODE_CHUNK at a time (a cut text's
encoding keeps all its overflowing tokens, and the heap keeps what one call for every text took), each
chunk turned into compact arrays before the next, with the same result as encoding each text on its own."""

from typing import ClassVar

import numpy as np
import pytest
from tokenizers import Tokenizer

import fmm_fast.data.tokenization as tokenization
from fmm_fast.data.tokenization import ENCODE_CHUNK, cut_to, encode_texts
from fmm_fast.protocols.explanations import token_offsets
from fmm_fast.training.models import train_tiny_tokenizer

SENTENCES = ["the cat sat on the mat.", "Mary went to the kitchen.", "where is the ball? it is here."]
TEXTS = [" ".join(SENTENCES[(i + k) % 3] for k in range(i % 7 + 1)) for i in range(2 * ENCODE_CHUNK + 5)]


class CountingTokenizer:
    """A Tokenizer that records how many inputs each encode_batch call got (the rest passes through)."""

    calls: ClassVar[list[int]] = []

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def encode_batch(self, inputs: list) -> list:
        CountingTokenizer.calls.append(len(inputs))
        return self.tokenizer.encode_batch(inputs)

    def __getattr__(self, name: str):
        return getattr(self.tokenizer, name)

    @staticmethod
    def from_str(text: str) -> "CountingTokenizer":
        return CountingTokenizer(Tokenizer.from_str(text))


@pytest.fixture(scope="module")
def short_cut() -> Tokenizer:
    """A tiny BPE tokenizer cutting at 12 tokens: most TEXTS are cut, so the uncut count runs too."""
    return cut_to(train_tiny_tokenizer(SENTENCES * 20, vocab_size=300), 12)


@pytest.fixture
def counting(monkeypatch) -> type[CountingTokenizer]:
    monkeypatch.setattr(tokenization, "Tokenizer", CountingTokenizer)  # the uncut copy for token_totals
    CountingTokenizer.calls = []
    return CountingTokenizer


def test_encode_texts_tokenizes_in_chunks_with_the_same_result(short_cut, counting):
    labels = np.zeros(len(TEXTS), dtype=np.int64)
    encoded = encode_texts(counting(short_cut), TEXTS, None, labels, unit="sentence")

    cut = [len(short_cut.encode(text).ids) == 12 for text in TEXTS]
    assert sum(cut) > ENCODE_CHUNK  # the uncut count also runs in more than one chunk
    assert max(counting.calls) <= ENCODE_CHUNK
    assert sum(counting.calls) == len(TEXTS) + sum(cut)  # every text once, every cut one once more uncut
    uncut = Tokenizer.from_str(short_cut.to_str())
    uncut.no_truncation()
    for i, text in enumerate(TEXTS):
        alone = short_cut.encode(text)
        assert encoded.input_ids[i].tolist() == alone.ids
        assert encoded.explained[i].tolist() == [not s for s in alone.special_tokens_mask]
        assert encoded.tokens_total(i) == len(uncut.encode(text).ids)


def test_the_encoded_split_holds_compact_arrays(short_cut):
    encoded = encode_texts(short_cut, TEXTS, None, np.zeros(len(TEXTS), dtype=np.int64), unit="word")
    for field, dtype in (("input_ids", np.int64), ("explained", np.bool_), ("maskable", np.bool_)):
        assert all(isinstance(row, np.ndarray) and row.dtype == dtype for row in getattr(encoded, field))
    assert all(isinstance(row, np.ndarray) and row.dtype == np.int64 for row in encoded.units)
    assert encoded.token_totals.dtype == np.int64


def test_token_offsets_encode_in_chunks(short_cut, counting):
    encoded = encode_texts(short_cut, TEXTS, None, np.zeros(len(TEXTS), dtype=np.int64))
    counting.calls = []
    located = token_offsets(counting(short_cut), encoded.texts, encoded.input_ids)

    assert max(counting.calls) <= ENCODE_CHUNK and sum(counting.calls) == len(TEXTS)
    for (offsets, _), text in zip(located, TEXTS, strict=True):
        assert offsets == [list(span) for span in short_cut.encode(text).offsets]

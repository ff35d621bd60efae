"""Erasure units (--unit token|word|sentence): how texts become units, that token units reproduce the
token code paths bit for bit for every measure, and that word and sentence units mask whole units."""

from dataclasses import replace

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import gradient_backend, load_model
from fmm_fast.backends.options import BackendOptions
from fmm_fast.core.errors import UserError
from fmm_fast.data.masking import mask_explained_share
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.data.tokenization import encode_texts
from fmm_fast.data.units import check_unit
from fmm_fast.measures.registry import measure_names
from fmm_fast.measures.spec import resolve_measure
from fmm_fast.protocols.aopc_metrics import peer_metrics
from fmm_fast.protocols.cost import cost_line, erasure_passes
from fmm_fast.protocols.curve_stats import RATIOS
from fmm_fast.protocols.erasure import erasure_steps, explain_split
from fmm_fast.training.models import train_tiny_tokenizer

TEXTS = [
    "Mary  went to the kitchen. Johnny's naïve, ok!",
    "Dr. Smith arrived at 5 p.m. on Jan. 3rd. He left.",
]
CORPUS = [*TEXTS, "the cat sat on the mat. Where is Mary?"] * 30
SPECIALS = ["<s>", "</s>", "<pad>", "<mask>", "<unk>"]
TEMPLATE = processors.TemplateProcessing(
    single="<s> $A </s>", pair="<s> $A </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 1)]
)


def unigram() -> Tokenizer:
    """A Unigram (SentencePiece-like, Metaspace) tokenizer: lone `▁` tokens and word-internal pieces."""
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.train_from_iterator(
        CORPUS, trainers.UnigramTrainer(vocab_size=80, special_tokens=SPECIALS, unk_token="<unk>")
    )
    tokenizer.post_processor = TEMPLATE
    return tokenizer


def wordpiece() -> Tokenizer:
    """A BERT-like WordPiece tokenizer: its own words split punctuation off."""
    tokenizer = Tokenizer(models.WordPiece(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=120, special_tokens=SPECIALS))
    tokenizer.post_processor = TEMPLATE
    return tokenizer


def unit_texts(tokenizer: Tokenizer, unit: str) -> list[list[str]]:
    """Each example's units as the text between their first and last token's characters."""
    encoded = encode_texts(tokenizer, TEXTS, ["Where?"] * len(TEXTS), np.zeros(2, dtype=np.int64), unit=unit)
    result = []
    encodings = tokenizer.encode_batch(list(zip(TEXTS, ["Where?"] * len(TEXTS), strict=True)))
    for text, units, encoding in zip(TEXTS, encoded.units, encodings, strict=True):
        offsets = np.asarray(encoding.offsets)
        spans = [offsets[units == u] for u in range(int(units.max()) + 1)]
        result.append([text[int(s[:, 0].min()) : int(s[:, 1].max())].strip() for s in spans])
    return result


@pytest.mark.parametrize("make", [lambda: train_tiny_tokenizer(CORPUS, 300), unigram, wordpiece])
def test_words_and_sentences_are_the_same_for_every_tokenizer(make):
    tokenizer = make()
    assert unit_texts(tokenizer, "word") == [
        ["Mary", "went", "to", "the", "kitchen.", "Johnny's", "naïve,", "ok!"],
        ["Dr.", "Smith", "arrived", "at", "5", "p.m.", "on", "Jan.", "3rd.", "He", "left."],
    ]
    # pysbd keeps "Dr." and "Jan." inside their sentence, where a split at every full stop would not
    assert unit_texts(tokenizer, "sentence") == [
        ["Mary  went to the kitchen.", "Johnny's naïve, ok!"],
        ["Dr. Smith arrived at 5 p.m. on Jan. 3rd.", "He left."],
    ]


def test_units_cover_exactly_the_explained_tokens_in_order():
    encoded = encode_texts(unigram(), TEXTS, ["Where is Mary?"] * 2, np.zeros(2, dtype=np.int64), unit="word")
    for units, explained in zip(encoded.units, encoded.explained, strict=True):
        assert np.array_equal(units >= 0, explained)  # the second segment and the specials: no unit
        inside = units[explained]
        assert inside[0] == 0 and np.all(np.diff(inside) >= 0) and np.all(np.diff(inside) <= 1)
    assert encode_texts(unigram(), TEXTS, None, np.zeros(2, dtype=np.int64)).units == []  # token units


def test_an_unknown_unit_or_a_short_max_length_is_refused_naming_the_option():
    with pytest.raises(UserError, match="--unit 'letter'"):
        check_unit("letter")
    with pytest.raises(UserError, match="--unit"):
        DataOptions("babi-1", unit="paragraph")
    with pytest.raises(UserError, match="--max-length"):
        DataOptions("babi-1", max_length=2)


def test_unit_and_max_length_change_the_fingerprint_only_when_given():
    plain = DataOptions("babi-1").fingerprint_fields()
    assert "unit" not in plain and "max_length" not in plain  # runs made before the options resume
    assert DataOptions("babi-1", unit="word").fingerprint_fields()["unit"] == "word"
    assert DataOptions("babi-1", max_length=64).fingerprint_fields()["max_length"] == 64


@pytest.fixture(scope="module")
def babi_split(tiny_babi):
    """(loaded model, its test split at token units: 6 examples)."""
    checkpoint, _, data = tiny_babi
    loaded = load_model(checkpoint, BackendOptions())
    _, split = open_split(loaded, DataOptions("babi-1", **data, limit=6))
    return loaded, split


def curves(loaded, split, name: str) -> list[list[np.ndarray]]:
    """Every erasure step's masked inputs of measure `name` on `split` (seed 3)."""
    engine = MaskBatchEngine(loaded.backend)
    gradients = MaskBatchEngine(gradient_backend(loaded)) if resolve_measure(name).needs_gradients else engine
    steps = erasure_steps(
        resolve_measure(name), 3, split, engine, list(split.input_ids), 1, 4, engine_for=lambda _: gradients
    )
    return [step.erased for step in steps]


@pytest.mark.parametrize("name", measure_names())
def test_token_units_given_as_units_reproduce_the_token_path_bit_for_bit(babi_split, name, one_torch_thread):
    """The unit code paths (units arrays, visible_units, unit ranking) with one unit per explained token give
    exactly the masks of the token code path (units=None), which is main's: every measure, every step."""
    loaded, split = babi_split
    as_units = replace(split, units=[np.where(e, np.cumsum(e) - 1, -1) for e in split.explained])
    for tokens, units in zip(curves(loaded, split, name), curves(loaded, as_units, name), strict=True):
        assert all(np.array_equal(a, b) for a, b in zip(tokens, units, strict=True))


@pytest.fixture(scope="module")
def babi_words(tiny_babi):
    checkpoint, _, data = tiny_babi
    loaded = load_model(checkpoint, BackendOptions())
    _, split = open_split(loaded, DataOptions("babi-1", **data, limit=4, unit="word"))
    return loaded, split


@pytest.mark.parametrize("name", ["rand", "loo-abs", "grad-l2", "beam-sign-2"])
def test_word_units_mask_whole_words_and_the_ratio_counts_words(babi_words, name, one_torch_thread):
    loaded, split = babi_words
    mask_id = loaded.info.mask_id
    for step, erased in enumerate(curves(loaded, split, name), start=1):
        for units, x in zip(split.units, erased, strict=True):
            masked_units = np.unique(units[(x == mask_id) & (units >= 0)])
            assert all(np.all(x[units == u] == mask_id) for u in masked_units)  # whole words only
            assert len(masked_units) == int(np.floor(np.float32(step / 10) * np.float32(units.max() + 1)))


def test_loo_at_word_units_is_the_drop_of_masking_the_whole_word(babi_words):
    loaded, split = babi_words
    engine = MaskBatchEngine(loaded.backend)
    scores = explain_split(resolve_measure("loo-sign").build(0), engine, list(split.input_ids), split, 4)
    x, units, label = split.input_ids[0], split.units[0], int(split.labels[0])
    reference = engine.logits([x])[0, label]
    for u in range(int(units.max()) + 1):
        occluded = np.where(units == u, loaded.info.mask_id, x)
        expected = float(reference) - float(engine.logits([occluded])[0, label])
        assert np.allclose(scores[0][units == u], expected, atol=1e-5)


def test_gradient_scores_of_a_unit_are_the_sum_of_its_tokens(babi_words, one_torch_thread):
    loaded, split = babi_words
    engine = MaskBatchEngine(gradient_backend(loaded))
    measure = resolve_measure("grad-l2").build(0)
    tokens = explain_split(measure, engine, list(split.input_ids), replace(split, units=[]), 4)
    words = explain_split(measure, engine, list(split.input_ids), split, 4)
    for token_scores, word_scores, units in zip(tokens, words, split.units, strict=True):
        for u in range(int(units.max()) + 1):
            assert np.allclose(word_scores[units == u], token_scores[units == u].sum())


def test_random_masking_and_aopc_follow_units(babi_words):
    loaded, split = babi_words
    mask_id = loaded.info.mask_id
    for x, units in zip(mask_explained_share(split, 0.5, mask_id, seed=1), split.units, strict=True):
        chosen = np.unique(units[(x == mask_id) & (units >= 0)])
        assert len(chosen) == (units.max() + 1) // 2
        assert all(np.all(x[units == u] == mask_id) for u in chosen)
    scores = [np.where(u >= 0, u, 0).astype(float) for u in split.units]  # later words score higher
    results = peer_metrics(MaskBatchEngine(loaded.backend), split, scores)
    assert [r.n for r in results] == [int(u.max()) + 1 for u in split.units]  # k_q and LOO count words


@pytest.mark.parametrize("unit", ["token", "word"])
def test_the_cost_line_counts_the_loo_passes_the_engine_runs_without_its_cache(tiny_babi, unit):
    """The planned passes are those the run asks for; with the cache off the engine runs every one of
    them (its cache can only make fewer run)."""
    checkpoint, _, data = tiny_babi
    loaded = load_model(checkpoint, BackendOptions())
    _, split = open_split(loaded, DataOptions("babi-1", **data, limit=6, unit=unit))
    engine = MaskBatchEngine(loaded.backend, cache_rows=0)
    for _ in erasure_steps(resolve_measure("loo-abs"), 0, split, engine, list(split.input_ids), 1, 4):
        pass
    measure = resolve_measure("loo-abs").build(0, 1)
    planned = erasure_passes([measure], split, RATIOS, loaded.info.mask_id)["loo-abs"]
    assert planned.exact and planned.backward == 0
    assert planned.forward == engine.stats.forward_rows
    line = cost_line("evaluate", [measure], {"loo-abs": planned}, split, (0.001, 40.0))
    assert f"evaluate: {planned.forward:,} forward passes (loo-abs {planned.forward:,})" in line
    assert ("--unit word or sentence" if unit == "token" else "--unit sentence") in line


def test_max_length_cuts_every_example_warns_and_records_the_cut(tiny_babi, capsys):
    checkpoint, _, data = tiny_babi
    loaded = load_model(checkpoint, BackendOptions())
    _, full = open_split(loaded, DataOptions("babi-1", **data, limit=4))
    capsys.readouterr()
    _, cut = open_split(loaded, DataOptions("babi-1", **data, limit=4, max_length=24, unit="word"))
    assert max(len(ids) for ids in cut.input_ids) == 24 < max(len(ids) for ids in full.input_ids)
    assert "longer than --max-length of 24 tokens and were cut" in capsys.readouterr().err
    truncation = cut.truncation()
    assert truncation["max_length"] == 24 and truncation["tokens_total"] == sum(map(len, full.input_ids))
    # the kept tokens keep their words, numbered from 0 (the last word may be cut short)
    assert all(int(u.max()) + 1 == len(np.unique(u[u >= 0])) for u in cut.units)

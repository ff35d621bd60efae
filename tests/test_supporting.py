"""Supporting-fact overlap: top-k ranking, the overlap ratio, its chance level, token flags and the runner."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from fmm_fast.cli import main
from fmm_fast.core.errors import UserError
from fmm_fast.data.babi import LOCATIONS
from fmm_fast.data.options import DataOptions
from fmm_fast.data.tokenization import encode_texts, overlaps_any
from fmm_fast.protocols.erasure import saved_unmasked_scores
from fmm_fast.protocols.supporting_facts import (
    chance_overlap,
    overlap_per_example,
    run_supporting_overlap,
    supporting_overlap,
    top_k_positions,
)
from fmm_fast.training.models import build_tiny_roberta, save_checkpoint


def flags(text: str) -> np.ndarray:
    """'.SS.' -> [False, True, True, False]: one character per token."""
    return np.asarray([c != "." for c in text], dtype=bool)


# ---------------------------------------------------------------------------------------------- ranking


def test_top_k_breaks_ties_to_the_earlier_position_and_skips_unexplained_tokens():
    scores = np.array([9.0, 1.0, 3.0, 3.0, 3.0, 7.0])
    explained = flags(".EEEE.")  # positions 0 and 5 score highest but are not explained
    assert top_k_positions(scores, explained, 3).tolist() == [2, 3, 4]
    assert top_k_positions(scores, explained, 10).tolist() == [2, 3, 4, 1]  # only 4 explained tokens


def test_top_k_ranks_by_signed_score_not_by_magnitude():
    scores = np.array([-5.0, 0.5, -0.1, 2.0])
    assert top_k_positions(scores, np.ones(4, dtype=bool), 2).tolist() == [3, 1]


# ---------------------------------------------------------------------------------------------- overlap


def test_overlap_of_hand_built_examples():
    # [CLS] a b c d [SEP]: supporting = b, c; scores rank a > b = c > d
    scores = [np.array([0.0, 5.0, 3.0, 3.0, 1.0, 0.0])]
    supporting = [flags("..SS..")]
    explained = [flags(".EEEE.")]
    assert supporting_overlap(scores, supporting, explained, 1) == 0.0  # top-1 = a
    assert supporting_overlap(scores, supporting, explained, 2) == 0.5  # a, b (b beats c on the tie)
    assert supporting_overlap(scores, supporting, explained, 3) == 1.0  # a, b, c: both of min(3, 2)
    assert supporting_overlap(scores, supporting, explained, 4) == 1.0


def test_overlap_is_the_mean_over_examples_that_have_supporting_tokens():
    scores = [np.array([2.0, 1.0, 0.0]), np.array([2.0, 1.0, 0.0]), np.array([1.0, 2.0])]
    supporting = [flags("S.."), flags(".S."), flags("..")]  # the third has none: left out
    explained = [np.ones(3, bool), np.ones(3, bool), np.ones(2, bool)]
    per_example = overlap_per_example(scores, supporting, explained, 1)
    assert per_example[:2].tolist() == [1.0, 0.0] and np.isnan(per_example[2])
    assert supporting_overlap(scores, supporting, explained, 1) == 0.5


def test_supporting_tokens_outside_the_explained_segment_do_not_count():
    scores = [np.array([9.0, 1.0, 2.0, 0.0])]
    supporting = [flags("SS..")]  # position 0 is supporting but not explained (e.g. a special token)
    explained = [flags(".EEE")]
    # |S ∩ explained| = 1 (position 1); top-1 is position 2, top-2 adds position 1
    assert supporting_overlap(scores, supporting, explained, 1) == 0.0
    assert supporting_overlap(scores, supporting, explained, 2) == 1.0


def test_without_any_supporting_tokens_the_overlap_is_a_user_error():
    with pytest.raises(UserError, match="supporting facts"):
        supporting_overlap([np.zeros(3)], [np.zeros(3, bool)], [np.ones(3, bool)], 2)


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_k_must_be_a_positive_integer(k):
    with pytest.raises(UserError, match="k must be an integer"):
        supporting_overlap([np.zeros(2)], [np.ones(2, bool)], [np.ones(2, bool)], k)


def test_chance_level_equals_the_average_over_every_ranking():
    supporting = [flags("..S.S"), flags("S.S.S")]
    explained = [flags(".EEEE"), flags("EEEEE")]
    for k in (1, 2, 3, 5):
        averages = []
        for row in range(2):
            n = len(explained[row])
            rankings = [np.asarray(p, dtype=np.float64) for p in itertools.permutations(range(n))]
            averages.append(
                np.mean([supporting_overlap([r], [supporting[row]], [explained[row]], k) for r in rankings])
            )
        assert chance_overlap(supporting, explained, k) == pytest.approx(np.mean(averages))


# ---------------------------------------------------------------------------------------------- token flags

TEXTS = [
    "Mary went to the kitchen. John moved to the garden. Mary travelled to the office.",
    "Sandra got the apple there. Sandra went back to the hallway.",
]
QUESTIONS = ["Where is Mary?", "Where is the apple?"]


@pytest.fixture(scope="module")
def tiny_model():
    return build_tiny_roberta(TEXTS * 3 + QUESTIONS, list(LOCATIONS), layers=1, width=32)


def sentence_span(text: str, sentence: str) -> tuple[int, int]:
    start = text.index(sentence)
    return start, start + len(sentence)


def test_tokenization_flags_the_first_segment_tokens_inside_supporting_spans(tiny_model):
    _, tokenizer, _ = tiny_model
    spans = [
        [sentence_span(TEXTS[0], "Mary travelled to the office.")],
        [sentence_span(TEXTS[1], "Sandra got the apple there."), sentence_span(TEXTS[1], "hallway.")],
    ]
    encoded = encode_texts(tokenizer, TEXTS, QUESTIONS, np.zeros(2, np.int64), spans)
    words = [
        tokenizer.decode([int(t) for t in ids[flags]]).split()
        for ids, flags in zip(encoded.input_ids, encoded.supporting, strict=True)
    ]
    # The question's offsets (counted in the question) overlap the spans' character range: never flagged.
    assert words == [
        ["Mary", "travelled", "to", "the", "office."],
        ["Sandra", "got", "the", "apple", "there.", "hallway."],
    ]
    assert all(not (s & ~e).any() for s, e in zip(encoded.supporting, encoded.explained, strict=True))
    assert [s.tolist() for s in encoded.subset([1]).supporting] == [encoded.supporting[1].tolist()]


def test_overlap_with_character_spans_is_half_open():
    offsets = np.array([[0, 4], [4, 8], [8, 9], [9, 12]])
    assert overlaps_any(offsets, [(4, 8)]).tolist() == [False, True, False, False]
    assert overlaps_any(offsets, [(3, 5), (11, 20)]).tolist() == [True, True, False, True]
    assert overlaps_any(offsets, []).tolist() == [False] * 4


def test_tokenization_without_spans_leaves_supporting_empty(tiny_model):
    _, tokenizer, _ = tiny_model
    encoded = encode_texts(tokenizer, TEXTS, QUESTIONS, np.zeros(2, np.int64))
    assert encoded.supporting == [] and encoded.subset([0]).supporting == []


# ---------------------------------------------------------------------------------------------- runner


def test_runner_scores_each_measure_once_and_resumes(tiny_model, tmp_path):
    model, tokenizer, info = tiny_model
    save_checkpoint(tmp_path / "model", model, tokenizer, info)
    data = DataOptions("babi-1", size=20, test_size=6)
    out = tmp_path / "overlap.json"
    plan = [("rand", 6), ("loo-abs", 3)]
    record = run_supporting_overlap(tmp_path / "model", data, plan, [1, 5], out)
    assert set(record["measures"]) == {"rand", "loo-abs"}
    assert [record["measures"][m]["n_examples"] for m in ("rand", "loo-abs")] == [6, 3]
    for entry in record["measures"].values():
        assert set(entry["overlap"]) == {"1", "5"}
        assert all(0.0 <= v <= 1.0 for v in entry["overlap"].values())
        assert all(0.0 < v <= 1.0 for v in entry["chance"].values())
        plausible = entry["plausibility"]
        assert set(plausible["token_f1"]) == set(plausible["iou"]) == {"1", "5"}
        assert all(0.0 <= v <= 1.0 for v in [*plausible["token_f1"].values(), plausible["auprc"]])
    assert json.loads(out.read_text()) == record

    rerun = run_supporting_overlap(tmp_path / "model", data, plan, [1, 5], out)
    assert rerun["measures"]["loo-abs"]["seconds"] == record["measures"]["loo-abs"]["seconds"]  # not rerun
    with pytest.raises(UserError, match="other settings"):
        run_supporting_overlap(tmp_path / "model", data, plan, [2], out)


def test_runner_reuses_an_evaluations_beam_ranking_and_gets_the_same_overlap(tiny_babi, tmp_path):
    _, onnx_path, data_kwargs = tiny_babi
    flags = ["--dataset", "babi-1", "--size", str(data_kwargs["size"]), "--test-size", "40"]
    evaluation = tmp_path / "eval"
    arguments = ["evaluate", "--model", str(onnx_path), *flags, "--limit", "4", "-m", "beam-sign-2"]
    assert main([*arguments, "--out", str(evaluation), "--quiet"]) == 0
    beam = saved_unmasked_scores(evaluation / "seed-0", "beam-sign-2")
    assert beam is not None and len(beam) == 4
    assert saved_unmasked_scores(evaluation / "seed-0", "loo-abs") is None  # not run there
    data = DataOptions("babi-1", **data_kwargs)
    plan = [("beam-sign-2", 3)]

    searched = run_supporting_overlap(onnx_path, data, plan, [1, 3], tmp_path / "searched.json")
    known = {"beam-sign-2": beam}
    reused = run_supporting_overlap(
        onnx_path, data, plan, [1, 3], tmp_path / "reused.json", known_scores=known
    )
    entries = searched["measures"]["beam-sign-2"], reused["measures"]["beam-sign-2"]
    assert [e["reused"] for e in entries] == [False, True]
    for field in ("n_examples", "overlap", "chance", "plausibility"):
        assert entries[0][field] == entries[1][field]

    other = {"beam-sign-2": [np.zeros(len(s) + 1) for s in beam]}
    with pytest.raises(UserError, match="do not fit the test examples"):
        run_supporting_overlap(onnx_path, data, plan, [1], tmp_path / "other.json", known_scores=other)
    few = {"beam-sign-2": beam[:2]}  # covering fewer examples than the plan: explained again
    again = run_supporting_overlap(onnx_path, data, plan, [1, 3], tmp_path / "few.json", known_scores=few)
    assert again["measures"]["beam-sign-2"]["reused"] is False


@pytest.mark.parametrize(
    ("plan", "ks", "message"),
    [
        ([("loo-absolute", 5)], [1], "unknown measure"),
        ([("rand", 5)], [0], "k must be"),
        ([], [1], "no measure"),
    ],
)
def test_runner_rejects_a_bad_plan_before_loading_the_model(tmp_path, plan, ks, message):
    with pytest.raises(UserError, match=message):
        run_supporting_overlap(
            tmp_path / "missing-model", DataOptions("babi-1"), plan, ks, tmp_path / "o.json"
        )

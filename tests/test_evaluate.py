"""Recursive erasure: ranking rules, float32 counts, curves on a model with a known decisive token, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
from doubles import LookupBackend

from fmm_fast.backends.base import ForwardOutput
from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.datatypes import EncodedSplit, ModelInfo
from fmm_fast.core.errors import UserError
from fmm_fast.core.settings import EvaluationSettings
from fmm_fast.data.options import DataOptions
from fmm_fast.protocols.erasure import ErasureRun, erase_top

MASK, PAD, CLS, SEP, KEY = 1, 0, 2, 3, 4


def test_erase_top_ranks_already_masked_first_then_score_then_position():
    ids = np.array([CLS, 10, MASK, 11, 12, 13, SEP])
    explained = np.array([False, True, True, True, True, True, False])
    scores = np.array([99.0, 0.5, -5.0, 0.9, 0.5, 0.1, 99.0])  # specials score high but are never erased
    # the pre-masked position 2 comes first, then 0.9 (pos 3), then the 0.5 tie → earlier position 1
    assert erase_top(ids, explained, scores, 3, MASK).tolist() == [CLS, MASK, MASK, MASK, 12, 13, SEP]
    everything = erase_top(ids, explained, scores, 5, MASK)
    assert everything.tolist() == [CLS, MASK, MASK, MASK, MASK, MASK, SEP]


class KeyTokenBackend:
    """Predicts class 1 exactly when the KEY token is visible: the decision depends on one known token."""

    name = "key-token"

    def __init__(self) -> None:
        self.info = ModelInfo(["no", "yes"], MASK, PAD, [PAD, MASK, CLS, SEP], 64, 1, 4)

    def forward(self, input_ids, attention_mask, with_signals=False):
        visible = ((input_ids == KEY) & (attention_mask == 1)).any(axis=1)
        logits = np.stack([np.where(visible, -1.0, 1.0), np.where(visible, 1.0, -1.0)], axis=1)
        return ForwardOutput(logits.astype(np.float32))


def key_token_split(n_examples: int = 60, seed: int = 0) -> EncodedSplit:
    rng = np.random.default_rng(seed)
    input_ids, explained = [], []
    for _ in range(n_examples):
        n = int(rng.integers(10, 20))
        body = rng.integers(10, 50, size=n)
        body[rng.integers(0, n)] = KEY
        input_ids.append(np.concatenate([[CLS], body, [SEP, 60, 61, SEP]]).astype(np.int64))
        explained.append(np.concatenate([[False], np.ones(n, bool), [False] * 4]))
    return EncodedSplit(input_ids, explained, [e.copy() for e in explained], np.ones(n_examples, np.int64))


def run_erasure(tmp_path, measures, engine=None, split=None):
    split = split or key_token_split()
    settings = EvaluationSettings("key-token", DataOptions("synthetic"), tuple(measures))
    engine = engine or MaskBatchEngine(KeyTokenBackend())
    return ErasureRun(settings, split, engine, tmp_path, "accuracy").run()


def test_occlusion_curves_fall_faster_than_random_on_a_known_decisive_token(tmp_path):
    result = run_erasure(tmp_path, ["loo-abs", "loo-sign", "beam-sign-3"])
    curves = result["curves"]
    assert curves["rand"]["accuracy"][0] == 1.0 and curves["rand"]["accuracy"][-1] == 0.0
    for name in ["loo-abs", "loo-sign", "beam-sign-3"]:
        # n ≥ 10 explained tokens, so the 10% step already erases the decisive token everywhere
        assert curves[name]["accuracy"][1:] == [0.0] * 10
        assert result["measures"][name]["racu"] > 0.8
    rand = np.asarray(curves["rand"]["accuracy"])
    assert np.all(np.diff(rand) <= 0) and rand[5] > 0.2  # random erasure only falls gradually
    assert result["measures"]["rand"]["acu"] == 0.0
    assert result["measures"]["loo-sign"]["signed"] and not result["measures"]["loo-abs"]["signed"]


class MisleadingKeyTokenBackend(KeyTokenBackend):
    """KEY visible: logits (-3, -1) → predicts the gold class 1; KEY hidden: (1, 0) → predicts class 0.

    Hiding KEY *raises* the gold logit (−1 → 0), so loo-sign scores KEY negative and ranks it last,
    although it is the token the prediction depends on: a ranking in reverse.
    """

    def forward(self, input_ids, attention_mask, with_signals=False):
        visible = ((input_ids == KEY) & (attention_mask == 1)).any(axis=1)
        logits = np.stack([np.where(visible, -3.0, 1.0), np.where(visible, -1.0, 0.0)], axis=1)
        return ForwardOutput(logits.astype(np.float32))


def test_a_measure_that_ranks_in_reverse_gets_negative_acu(tmp_path):
    result = run_erasure(tmp_path, ["loo-sign"], MaskBatchEngine(MisleadingKeyTokenBackend()))
    # KEY is erased last, so accuracy stays 1 until r = 1: the curve lies above rand
    assert result["curves"]["loo-sign"]["accuracy"][:10] == [1.0] * 10
    assert result["measures"]["loo-sign"]["acu"] < 0


def test_scoring_pass_is_reused_as_the_next_loo_reference(tmp_path):
    engine = MaskBatchEngine(KeyTokenBackend())
    split = key_token_split(20)
    result = run_erasure(tmp_path, ["loo-abs"], engine, split)
    explained_total = sum(int(e.sum()) for e in split.explained)
    # LOO at step j needs every single-token masking of the r_{j-1} input plus that input itself; the input
    # was already scored, so it never runs twice. Upper bound: all maskings at all 9 measured steps.
    assert result["measures"]["loo-abs"]["forward_passes"] <= 9 * explained_total + 10 * len(split)
    assert engine.stats.forward_rows < engine.stats.requested_rows


class FailingEngine(MaskBatchEngine):
    """Raises after a number of logits calls, like a run killed mid-way."""

    def __init__(self, backend, calls_before_failure):
        super().__init__(backend)
        self.calls_left = calls_before_failure

    def logits(self, sequences, progress=None):
        if self.calls_left == 0:
            raise KeyboardInterrupt
        self.calls_left -= 1
        return super().logits(sequences, progress)


def test_resume_after_a_kill_gives_the_same_result(tmp_path):
    measures = ["loo-abs", "beam-sign-2"]
    uninterrupted = run_erasure(tmp_path / "a", measures)
    with pytest.raises(KeyboardInterrupt):
        run_erasure(tmp_path / "b", measures, FailingEngine(KeyTokenBackend(), 25))
    saved = json.loads((tmp_path / "b" / "state" / "rand.json").read_text())
    assert len(saved["curve"]) > 1  # finished steps were kept
    resumed = run_erasure(tmp_path / "b", measures)
    assert resumed["curves"] == uninterrupted["curves"]
    for name in ["rand", *measures]:
        assert resumed["measures"][name]["acu"] == uninterrupted["measures"][name]["acu"]


def test_resume_refuses_a_directory_of_another_run(tmp_path):
    run_erasure(tmp_path, ["loo-abs"])
    settings = EvaluationSettings("other-model", DataOptions("synthetic"), ("loo-abs",))
    run = ErasureRun(settings, key_token_split(), MaskBatchEngine(KeyTokenBackend()), tmp_path, "accuracy")
    with pytest.raises(UserError, match=r"differs in model \("):
        run.run()


def test_a_damaged_state_file_is_recomputed_with_a_warning(tmp_path, capsys):
    uninterrupted = run_erasure(tmp_path / "a", ["loo-abs"])
    run_erasure(tmp_path / "b", ["loo-abs"])
    state = tmp_path / "b" / "state" / "loo-abs.json"
    state.write_text(state.read_text()[:40])  # truncated, as a full disk might leave it
    resumed = run_erasure(tmp_path / "b", ["loo-abs"])
    assert f"{state} is damaged" in capsys.readouterr().err
    assert resumed["curves"] == uninterrupted["curves"]


def test_results_use_canonical_measure_names(tmp_path):
    result = run_erasure(tmp_path, ["beam-sign-10", "beam", "rand"])
    assert list(result["curves"]) == ["rand", "beam-sign-10"]  # "beam" is beam-sign-10, run once


def test_degenerate_racu_is_explained_not_a_bare_nan(tmp_path):
    constant = LookupBackend(lambda ids: np.array([0.0, 1.0]))  # always label1
    settings = EvaluationSettings("constant", DataOptions("synthetic"), ("loo-abs",))
    result = ErasureRun(settings, key_token_split(), MaskBatchEngine(constant), tmp_path, "accuracy").run()
    assert np.isnan(result["measures"]["loo-abs"]["racu"])
    reason = "the model predicts one class ('label1' for all 60 examples)"
    assert result["measures"]["loo-abs"]["racu_undefined"] == reason
    assert result["measures"]["rand"]["racu_undefined"] == reason

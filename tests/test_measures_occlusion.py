"""Forward-only measures (leave-one-out, rand) and the measure registry."""

from __future__ import annotations

import numpy as np
import pytest
from doubles import MASK_ID, LookupBackend, interaction_model, random_batch

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.datatypes import unpad
from fmm_fast.core.errors import UserError
from fmm_fast.measures import get_measure, measure_names
from fmm_fast.measures.beam import BeamSearch
from fmm_fast.measures.gradient import GradL1, GradL2, InputGradAbs, InputGradSign, IntGradAbs, IntGradSign
from fmm_fast.measures.occlusion import LeaveOneOutAbs, LeaveOneOutSign
from fmm_fast.measures.random import RandomMeasure


class CountingEngine(MaskBatchEngine):
    """Counts engine.logits calls."""

    calls = 0

    def logits(self, sequences, progress=None):
        self.calls += 1
        return super().logits(sequences, progress)


def brute_force_loo(backend: LookupBackend, batch) -> np.ndarray:
    """Per example, per explained token not already masked: one forward pass of the masked copy."""
    out = np.zeros(batch.input_ids.shape)
    for row, x in enumerate(unpad(batch.input_ids, batch.attention_mask)):
        label = batch.labels[row]
        reference = float(backend.score(x)[label])
        for t in range(len(x)):
            if batch.explained[row, t] and x[t] != MASK_ID:
                masked = x.copy()
                masked[t] = MASK_ID
                out[row, t] = reference - float(backend.score(masked)[label])
    return out


def test_loo_matches_brute_force_in_one_engine_call() -> None:
    backend = LookupBackend(interaction_model(5, num_labels=3), num_labels=3)
    batch = random_batch(7, [5, 1, 0, 8, 3], premasked=2, num_labels=3)
    assert (batch.input_ids == MASK_ID).any() and (batch.attention_mask == 0).any()
    expected = brute_force_loo(backend, batch)
    engine = CountingEngine(backend, token_budget=40)
    signed = LeaveOneOutSign().explain(batch, engine)
    assert engine.calls == 1
    np.testing.assert_array_equal(signed, expected)
    # not vacuous: most explained, visible tokens moved the target logit
    visible = batch.explained & (batch.input_ids != MASK_ID)
    assert (signed[visible] != 0).mean() > 0.8 and (signed[~visible] == 0).all()
    np.testing.assert_array_equal(LeaveOneOutAbs().explain(batch, engine), np.abs(expected))
    assert (signed < 0).any()  # so the abs test above is not vacuous either


def test_loo_reuses_cached_rows() -> None:
    backend = LookupBackend(interaction_model(1))
    batch = random_batch(2, [4, 6], premasked=0)
    engine = MaskBatchEngine(backend)
    first = LeaveOneOutSign().explain(batch, engine)
    rows_run = engine.stats.forward_rows
    assert rows_run == 2 + 4 + 6
    np.testing.assert_array_equal(LeaveOneOutSign().explain(batch, engine), first)
    assert engine.stats.forward_rows == rows_run


def test_rand_reproducible_redrawn_and_zero_outside_explained() -> None:
    batch = random_batch(3, [6, 2, 4])
    engine = MaskBatchEngine(LookupBackend(interaction_model(0)))
    first = RandomMeasure(seed=11)
    second = RandomMeasure(seed=11)
    a1, a2 = first.explain(batch, engine), first.explain(batch, engine)
    np.testing.assert_array_equal(a1, second.explain(batch, engine))
    np.testing.assert_array_equal(a2, second.explain(batch, engine))
    assert not np.array_equal(a1[batch.explained], a2[batch.explained])
    assert not np.array_equal(a1, RandomMeasure(seed=12).explain(batch, engine))
    assert (a1[~batch.explained] == 0).all()
    assert ((a1[batch.explained] >= 0) & (a1[batch.explained] < 1)).all()
    assert (a1[batch.explained] > 0).all()
    assert engine.stats.requested_rows == 0
    np.testing.assert_array_equal(get_measure("rand", seed=11).explain(batch, engine), a1)


EXPECTED = {
    "rand": (RandomMeasure, False),
    "grad-l1": (GradL1, False),
    "grad-l2": (GradL2, False),
    "inp-grad-sign": (InputGradSign, True),
    "inp-grad-abs": (InputGradAbs, False),
    "int-grad-sign": (IntGradSign, True),
    "int-grad-abs": (IntGradAbs, False),
    "loo-sign": (LeaveOneOutSign, True),
    "loo-abs": (LeaveOneOutAbs, False),
    "beam-sign-10": (BeamSearch, True),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_registry_builds_each_measure(name: str) -> None:
    measure = get_measure(name)
    cls, signed = EXPECTED[name]
    assert type(measure) is cls and measure.name == name and measure.signed is signed
    assert measure.needs_gradients is ("grad" in name)
    assert measure.recursive is (not name.startswith("beam"))


def test_registry_names_and_options() -> None:
    assert sorted(measure_names()) == sorted(EXPECTED)
    measure = get_measure("int-grad-abs", ig_steps=3, gradient_batch_size=7, beam_size=4, vocab_chunk=9)
    assert (measure.ig_steps, measure.gradient_batch_size) == (3, 7)  # irrelevant knobs are ignored
    assert get_measure("grad-l1", vocab_chunk=5).vocab_chunk == 5
    assert get_measure("beam-sign-1").beam_size == 1
    assert get_measure("beam-sign-10", beam_size=10).beam_size == 10


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("saliency", {}, "unknown measure 'saliency'; valid names: rand, grad-l1"),
        ("beam-sign-0", {}, "must be an integer >= 1"),
        ("beam-sign-2.5", {}, "must be an integer >= 1"),
        ("beam-sign-x", {}, "must be an integer >= 1"),
        ("beam-sign--3", {}, "must be an integer >= 1"),
        ("beam", {"beam_size": 0}, "beam_size must be an integer >= 1"),
        ("beam", {"beam_size": 2.5}, "beam_size must be an integer >= 1"),
        ("beam-sign-3", {"beam_size": 4}, "conflicts with beam_size=4"),
        ("int-grad-sign", {"ig_steps": 0}, "ig_steps must be an integer >= 1"),
        ("grad-l2", {"gradient_batch_size": -1}, "gradient_batch_size must be an integer >= 1"),
        ("loo-abs", {"ig_step": 3}, "unknown measure option(s) ig_step"),
    ],
)
def test_registry_errors(name: str, options: dict, message: str) -> None:
    with pytest.raises(UserError) as error:
        get_measure(name, **options)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_loo_scores_are_the_same_with_a_tiny_cache() -> None:
    backend = LookupBackend(interaction_model(3))
    batch = random_batch(4, [6, 9, 3], premasked=1)
    large = MaskBatchEngine(backend)
    tiny = MaskBatchEngine(backend, cache_mb=2e-3)  # a handful of rows
    for _ in range(2):  # the second round reads the large cache and re-runs what the tiny one evicted
        np.testing.assert_array_equal(
            LeaveOneOutSign().explain(batch, tiny), LeaveOneOutSign().explain(batch, large)
        )
    assert tiny.cache_bytes <= tiny.cache_budget and tiny.stats.forward_rows > large.stats.forward_rows

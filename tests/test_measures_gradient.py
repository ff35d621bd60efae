"""Gradient measures against autograd written out here, on a tiny random BERT."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from doubles import SEP_ID, LookupBackend, TinyBertBackend, interaction_model, random_batch

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.datatypes import unpad
from fmm_fast.core.errors import UserError
from fmm_fast.measures import get_measure

GRADIENT_MEASURES = ["grad-l1", "grad-l2", "inp-grad-sign", "inp-grad-abs", "int-grad-sign", "int-grad-abs"]


@pytest.fixture(scope="module")
def backend() -> TinyBertBackend:
    return TinyBertBackend(seed=0)


@pytest.fixture(scope="module")
def batch():
    # padded rows of different lengths, pre-masked tokens, a second segment; labels mixed
    made = random_batch(21, [6, 2, 9, 4], premasked=1)
    made.labels[:] = [0, 1, 1, 0]
    return made


def one_hot_gradients(
    backend: TinyBertBackend, x: np.ndarray, label: int, scale: float = 1.0
) -> torch.Tensor:
    """(T, V): ∂ logit_label / ∂ one-hot input, for one unpadded row, embeddings scaled along the IG path
    with the pad-embedding baseline: z = b + scale·(X W − b)."""
    weights = backend.embedding_matrix().detach()
    one_hot = torch.nn.functional.one_hot(torch.from_numpy(x), weights.shape[0]).float().requires_grad_(True)
    baseline = weights[backend.info.pad_id]
    embeddings = baseline + scale * (one_hot @ weights - baseline)
    ids = torch.from_numpy(x)[None]
    logits = backend.logits_from_embeddings(embeddings[None], torch.ones_like(ids), ids)
    (gradient,) = torch.autograd.grad(logits[0, label], one_hot)
    return gradient


def autograd_oracle(backend: TinyBertBackend, batch, name: str, ig_steps: int = 3) -> np.ndarray:
    """Per row, per explained token: the formula of method.md §3 evaluated from the one-hot gradient g Wᵀ."""
    out = np.zeros(batch.input_ids.shape)
    for row, x in enumerate(unpad(batch.input_ids, batch.attention_mask)):
        label = int(batch.labels[row])
        positions = np.flatnonzero(batch.explained[row, : len(x)])
        if name.startswith("int-grad"):
            # z_k = b + (k/K)(X W − b) gives ∂f/∂X = (k/K) ∂f/∂z_k Wᵀ, whose entry [t, x_t] is
            # (k/K) ∇f(z_k)_t · W[x_t]: IG is (1/K) Σ_k of those entries
            total = sum(one_hot_gradients(backend, x, label, k / ig_steps) for k in range(1, ig_steps + 1))
            values = (total / ig_steps)[positions, x[positions]]
        else:
            one_hot = one_hot_gradients(backend, x, label)[positions]
            values = {
                "grad-l1": one_hot.abs().sum(dim=1),
                "grad-l2": one_hot.norm(dim=1),
                "inp-grad-sign": one_hot[np.arange(len(positions)), x[positions]],
            }[name.replace("inp-grad-abs", "inp-grad-sign")]
        values = values.double().numpy()
        out[row, positions] = values if name.endswith("sign") or name.startswith("grad") else np.abs(values)
    return out


@pytest.mark.parametrize("name", GRADIENT_MEASURES)
@pytest.mark.parametrize("gradient_batch_size", [1, 3, 64])
def test_matches_autograd(backend, batch, name: str, gradient_batch_size: int) -> None:
    measure = get_measure(name, gradient_batch_size=gradient_batch_size, ig_steps=3, vocab_chunk=7)
    scores = measure.explain(batch, MaskBatchEngine(backend))
    expected = autograd_oracle(backend, batch, name)
    # float32 sums in another order: a score 1000× below the largest is off by a few of the largest's ulps
    np.testing.assert_allclose(scores, expected, rtol=2e-4, atol=1e-6 * np.abs(expected).max())
    assert (scores[~batch.explained] == 0).all()
    assert (np.abs(scores[batch.explained]) > 0).all()
    if not measure.signed:
        assert (scores >= 0).all()
    else:
        assert (scores < 0).any() and (scores > 0).any()


def test_int_grad_with_one_step_is_input_gradient(backend, batch) -> None:
    engine = MaskBatchEngine(backend)
    int_grad = get_measure("int-grad-sign", ig_steps=1).explain(batch, engine)
    np.testing.assert_array_equal(int_grad, get_measure("inp-grad-sign").explain(batch, engine))
    twenty = get_measure("int-grad-sign").explain(batch, engine)
    assert get_measure("int-grad-sign").ig_steps == 20
    assert not np.allclose(twenty, int_grad, rtol=1e-2)  # the path matters on this model


def test_gram_cache_follows_in_place_weight_changes() -> None:
    backend = TinyBertBackend(seed=1)
    batch = random_batch(3, [5, 3])
    engine = MaskBatchEngine(backend)
    measure = get_measure("grad-l2")
    before = measure.explain(batch, engine)
    np.testing.assert_array_equal(measure.explain(batch, engine), before)
    with torch.no_grad():
        backend.embedding_matrix()[10:].mul_(3.0)  # changes W but not its storage
    after = measure.explain(batch, engine)
    np.testing.assert_allclose(after, autograd_oracle(backend, batch, "grad-l2"), rtol=2e-4)
    assert not np.allclose(after, before, rtol=1e-3)


def test_runs_on_the_torch_backend() -> None:
    """The same numbers through fmm_fast's own TorchBackend (single-segment rows: token types all 0)."""
    from fmm_fast.backends.torch_backend import TorchBackend
    from fmm_fast.training.models import SequenceClassifier

    double = TinyBertBackend(seed=2)
    real = TorchBackend(SequenceClassifier(double.model, sep_id=SEP_ID), double.info)
    batch = random_batch(5, [4, 7], premasked=1, second_segment=0)
    for name in ["grad-l2", "int-grad-sign"]:
        np.testing.assert_allclose(
            get_measure(name, ig_steps=4).explain(batch, MaskBatchEngine(real)),
            get_measure(name, ig_steps=4).explain(batch, MaskBatchEngine(double)),
            rtol=1e-5,
        )


@pytest.mark.parametrize("name", GRADIENT_MEASURES)
def test_needs_a_gradient_backend(name: str) -> None:
    engine = MaskBatchEngine(LookupBackend(interaction_model(0)))
    with pytest.raises(UserError, match=f"measure {name} needs gradients: give a PyTorch checkpoint"):
        get_measure(name).explain(random_batch(0, [3]), engine)

"""The first-token last layer: the same logits and signals as the full Hugging Face model, less work."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DistilBertConfig,
    DistilBertForSequenceClassification,
)

from fmm_fast.backends.onnx_backend import OnnxBackend, _logits_only_graph
from fmm_fast.core.datatypes import pad_batch
from fmm_fast.export.first_token import FirstTokenLastLayer
from fmm_fast.export.onnx_export import export_onnx
from fmm_fast.training.models import SequenceClassifier, build_tiny_roberta, save_checkpoint

TEXTS = ["a warm and funny film", "the plot is thin", "boring from start to finish, and long"]
SEP_ID = 3


def tiny_bert() -> SequenceClassifier:
    config = BertConfig(
        vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
        max_position_embeddings=64, type_vocab_size=2, num_labels=3, initializer_range=0.2,
    )  # fmt: skip
    torch.manual_seed(0)
    return SequenceClassifier(BertForSequenceClassification(config), sep_id=SEP_ID).eval()


def tiny_roberta() -> SequenceClassifier:
    model, _, _ = build_tiny_roberta(TEXTS * 5, ["negative", "positive"], layers=2, width=64)
    return model.eval()


def padded_batch(pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Three rows of 5-13 ids, one with a separator in the middle (a BERT pair), right-padded."""
    rng = np.random.default_rng(0)
    rows = [rng.integers(5, 60, size=length) for length in (13, 5, 9)]
    rows[2][4] = SEP_ID
    input_ids, attention_mask = pad_batch(rows, pad_id)
    return torch.from_numpy(input_ids), torch.from_numpy(attention_mask)


def hugging_face_outputs(model: SequenceClassifier, input_ids, attention_mask, inputs_embeds=None):
    """Logits and per-layer max signals of the unmodified model, computed the plain way."""
    extra = {"token_type_ids": model.token_types(input_ids, model.sep_id)} if model.sep_id is not None else {}
    output = model.hf_model(
        input_ids=None if inputs_embeds is not None else input_ids,
        inputs_embeds=inputs_embeds,
        attention_mask=attention_mask,
        output_hidden_states=True,
        **extra,
    )
    hidden = torch.stack(output.hidden_states, dim=1)
    hidden = hidden.masked_fill(~attention_mask[:, None, :, None].bool(), torch.finfo(hidden.dtype).min)
    return output.logits, hidden.amax(dim=2)


@pytest.mark.parametrize("build", [tiny_roberta, tiny_bert], ids=["roberta", "bert"])
def test_same_logits_and_signals_as_the_full_model(build) -> None:
    model = build()
    assert model.first_token_last_layer.available
    input_ids, attention_mask = padded_batch(pad_id=1)
    with torch.no_grad():
        expected_logits, expected_signals = hugging_face_outputs(model, input_ids, attention_mask)
        logits, none = model(input_ids, attention_mask)
        logits_with_signals, signals = model(input_ids, attention_mask, with_signals=True)
        embeds = model.word_embeddings(input_ids)
        logits_from_embeds, _ = model(input_ids, attention_mask, inputs_embeds=embeds)
    assert none is None
    for got in (logits, logits_with_signals, logits_from_embeds):
        torch.testing.assert_close(got, expected_logits, atol=1e-6, rtol=0)
    torch.testing.assert_close(signals, expected_signals, atol=1e-6, rtol=0)
    assert "forward" not in vars(model.first_token_last_layer.layer)  # the patch is gone afterwards


def test_gradients_through_the_first_token_layer_match() -> None:
    model = tiny_roberta()
    input_ids, attention_mask = padded_batch(pad_id=1)
    embeds = model.word_embeddings(input_ids).detach().requires_grad_(True)
    model(input_ids, attention_mask, inputs_embeds=embeds)[0][:, 1].sum().backward()
    got = embeds.grad.clone()
    embeds.grad = None
    hugging_face_outputs(model, input_ids, attention_mask, inputs_embeds=embeds)[0][:, 1].sum().backward()
    torch.testing.assert_close(got, embeds.grad, atol=1e-6, rtol=0)


def test_training_runs_the_full_model(monkeypatch) -> None:
    model = tiny_roberta().train()

    def refuse(*args, **kwargs):
        raise AssertionError("the first-token shortcut must not run in training")

    monkeypatch.setattr(FirstTokenLastLayer, "active", refuse)
    input_ids, attention_mask = padded_batch(pad_id=1)
    logits, _ = model(input_ids, attention_mask)
    assert logits.shape == (3, 2)


def test_other_architectures_run_in_full() -> None:
    config = DistilBertConfig(vocab_size=100, dim=32, n_layers=1, n_heads=2, hidden_dim=64, num_labels=2)
    model = SequenceClassifier(DistilBertForSequenceClassification(config), sep_id=None).eval()
    assert not model.first_token_last_layer.available
    input_ids, attention_mask = padded_batch(pad_id=0)
    logits, signals = model(input_ids, attention_mask, with_signals=True)
    assert logits.shape == (3, 2) and signals.shape == (3, 2, 32)


def test_onnx_logits_only_cut_skips_the_full_last_layer(tmp_path) -> None:
    model, tokenizer, info = build_tiny_roberta(TEXTS * 5, ["negative", "positive"], layers=2, width=64)
    save_checkpoint(tmp_path / "checkpoint", model, tokenizer, info)
    path = tmp_path / "model.onnx"
    export_onnx(tmp_path / "checkpoint", path)
    whole = onnx.load(str(path))
    cut = onnx.load_from_string(_logits_only_graph(path))
    assert [value.name for value in cut.graph.output] == ["logits"]
    # The first-token layer costs a few nodes; the full last layer it replaces costs more.
    assert len(cut.graph.node) < len(whole.graph.node) - 10
    backend = OnnxBackend.from_file(path, provider="cpu", threads=1)
    rows = [np.asarray(encoding.ids) for encoding in tokenizer.encode_batch(TEXTS)]
    input_ids, attention_mask = pad_batch(rows, info.pad_id)
    logits_only = backend.forward(input_ids, attention_mask).logits
    with_signals = backend.forward(input_ids, attention_mask, with_signals=True)
    np.testing.assert_allclose(logits_only, with_signals.logits, atol=1e-6)
    expected_logits, expected_signals = hugging_face_outputs(
        model.eval(), torch.from_numpy(input_ids), torch.from_numpy(attention_mask)
    )
    np.testing.assert_allclose(logits_only, expected_logits.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(with_signals.signals, expected_signals.detach().numpy(), atol=1e-5)

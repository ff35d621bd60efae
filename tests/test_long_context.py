"""Long-context encoders transformers has (ModernBERT and GTE, 8,192 tokens) as Hugging Face classifiers in
fmm-fast: each exports within 1e-4 of transformers' own logits and runs an erasure, as the architectures of
test_hf_import.py do. (transformers' NomicBERT is not among them: its tiny random classifier fails inside
transformers' forward on fmm-fast's inputs, an index out of range.)

Every model is a tiny random one (2 layers, width 64) saved with save_pretrained, with a tokenizer trained
here (WordPiece, the BERT specials these models use).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import test_hf_import
import torch
from test_hf_import import BERT_SPECIALS, LABELS, _wordpiece

from fmm_fast.training.models import quiet_transformers

pairs_csv = test_hf_import.pairs_csv  # the same (text, question) data set, a fixture used by name
SIZES = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128}
# architecture: (its context in the released checkpoints, config overrides for the tiny random one)
LONG_CONTEXT = {
    # global attention every second layer, the other a 16-token sliding window (released: 128)
    "modernbert": (8192, {"global_attn_every_n_layers": 2, "local_attention": 16}),
    "gte": (8192, {"type_vocab_size": 2}),  # the pair template types its second segment
}


def save_long_context_classifier(folder: Path, architecture: str) -> Path:
    """A tiny random `architecture` sequence classifier with a WordPiece tokenizer, saved with
    save_pretrained."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, PreTrainedTokenizerFast

    quiet_transformers()
    tokenizer, specials = _wordpiece()
    context, overrides = LONG_CONTEXT[architecture]
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        model_max_length=context,
        model_input_names=["input_ids", "attention_mask"],
        **specials,
    ).save_pretrained(folder)
    special_ids = {
        f"{role}_token_id": tokenizer.token_to_id(BERT_SPECIALS[f"{token}_token"])
        for role, token in (("cls", "cls"), ("sep", "sep"), ("bos", "cls"), ("eos", "sep"))
    }
    config = AutoConfig.for_model(
        architecture,
        vocab_size=tokenizer.get_vocab_size(),
        max_position_embeddings=context,
        pad_token_id=tokenizer.token_to_id(BERT_SPECIALS["pad_token"]),
        num_labels=2,
        id2label=LABELS,
        label2id={name: index for index, name in LABELS.items()},
        initializer_range=0.2,  # logits that differ between inputs: erasure curves that move
        **special_ids,
        **SIZES,
        **overrides,
    )
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("architecture", list(LONG_CONTEXT))
def test_long_context_encoder_exports_within_tolerance_and_erases(
    architecture, pairs_csv, tmp_path, capsys, one_torch_thread
):
    # test_hf_import's check of every architecture, on this one's classifier
    folder = save_long_context_classifier(tmp_path / architecture, architecture)
    test_hf_import.test_architecture_exports_within_tolerance_and_erases(
        architecture, lambda _: folder, pairs_csv, tmp_path, capsys, one_torch_thread
    )

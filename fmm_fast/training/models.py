"""Models: one PyTorch wrapper used for training, the PyTorch backend and ONNX export.

A checkpoint directory holds a Hugging Face model (`config.json`, weights), the tokenizer as
`tokenizer.json` (a `tokenizers.Tokenizer`, the only tokenizer fmm-fast uses) and `fmm_info.json`
(:class:`fmm_fast.core.datatypes.ModelInfo`); see fmm_fast.training.checkpoint_layout.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import torch
from tokenizers import Tokenizer
from torch import nn

from fmm_fast.core.datatypes import ModelInfo
from fmm_fast.core.disk_errors import naming
from fmm_fast.core.errors import UserError
from fmm_fast.core.reading import read_checked
from fmm_fast.core.writing import STAGING_MARK, replacing, write_text
from fmm_fast.export.first_token import FirstTokenLastLayer
from fmm_fast.export.onnx_format import configure_tokenizer
from fmm_fast.training.base_models import TINY_ROBERTA
from fmm_fast.training.checkpoint_layout import (
    INFO_FILE,
    TOKENIZER_CONFIG_FILE,
    TOKENIZER_FILE,
    is_checkpoint,
)
from fmm_fast.training.tokenizer_files import tokenizer_config


def quiet_transformers() -> None:
    """Silence transformers' load reports and weight-loading progress bars (fmm-fast shows its own)."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


class SequenceClassifier(nn.Module):
    """A Hugging Face sequence classifier with fmm-fast's calling convention.

    forward(input_ids (B, T) int64, attention_mask (B, T) int64, with_signals, inputs_embeds (B, T, E) | None)
    -> logits (B, C) and, with signals, (B, L+1, D): per hidden state, the max over non-pad positions.
    Token types (BERT pairs) are derived from input_ids: 1 after the first separator, so a backend never
    needs them as an input. In eval mode the last encoder layer runs for the first token only where the
    architecture allows it (export.first_token: same logits, less work); training runs the full model.
    """

    def __init__(self, hf_model: nn.Module, sep_id: int | None) -> None:
        super().__init__()
        self.hf_model = hf_model
        uses_token_types = getattr(hf_model.config, "type_vocab_size", 1) > 1
        self.sep_id = sep_id if uses_token_types else None
        self.first_token_last_layer = FirstTokenLastLayer(hf_model)
        self.use_first_token_last_layer = True  # off: eval runs the full model too (fused ONNX export)

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.hf_model.get_input_embeddings()

    @staticmethod
    def token_types(input_ids: torch.Tensor, sep_id: int) -> torch.Tensor:
        """input_ids (B, T) -> token types (B, T) int64: 0 up to the first `sep_id`, 1 after it."""
        is_sep = (input_ids == sep_id).long()
        # the first separator itself belongs to segment 0, everything after it to segment 1
        return ((torch.cumsum(is_sep, dim=1) - is_sep) > 0).long()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        with_signals: bool = False,
        inputs_embeds: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        extra = {}
        if self.sep_id is not None:
            extra["token_type_ids"] = self.token_types(input_ids, self.sep_id)
        inputs = {
            "input_ids": None if inputs_embeds is not None else input_ids,
            "inputs_embeds": inputs_embeds,
            "attention_mask": attention_mask,
            "output_hidden_states": with_signals,
            **extra,
        }
        shortcut = self.use_first_token_last_layer and self.first_token_last_layer.available
        if self.training or not shortcut:
            output = self.hf_model(**inputs)
            hidden_states = output.hidden_states
        else:
            # Logits from the first-token last layer; signals (if asked) from the full one, same input.
            with self.first_token_last_layer.active(keep_full=with_signals) as last_layer:
                output = self.hf_model(**inputs)
                hidden_states = (*output.hidden_states[:-1], last_layer.full) if with_signals else None
        if not with_signals:
            return output.logits, None
        hidden = torch.stack(hidden_states, dim=1)  # (B, L+1, T, D)
        real = attention_mask[:, None, :, None].bool()
        lowest = torch.finfo(hidden.dtype).min
        return output.logits, hidden.masked_fill(~real, lowest).amax(dim=2)


def train_tiny_tokenizer(texts: list[str], vocab_size: int = 4000) -> Tokenizer:
    """A byte-level BPE tokenizer with RoBERTa's specials and pair template, trained in seconds."""
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>"))
    )
    return tokenizer


def build_tiny_roberta(
    texts: list[str], label_names: list[str], layers: int = 2, width: int = 64, seed: int = 0
) -> tuple[SequenceClassifier, Tokenizer, ModelInfo]:
    """A small RoBERTa trained from scratch: BPE tokenizer on `texts`, random weights from `seed`."""
    from transformers import RobertaConfig, RobertaForSequenceClassification

    tokenizer = train_tiny_tokenizer(texts)
    max_length = 512
    config = RobertaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=max(1, width // 32),
        intermediate_size=width * 4,
        max_position_embeddings=max_length + 2,
        type_vocab_size=1,
        pad_token_id=tokenizer.token_to_id("<pad>"),
        bos_token_id=tokenizer.token_to_id("<s>"),
        eos_token_id=tokenizer.token_to_id("</s>"),
        num_labels=len(label_names),
        id2label=dict(enumerate(label_names)),
        label2id={name: i for i, name in enumerate(label_names)},
    )
    torch.manual_seed(seed)
    hf_model = RobertaForSequenceClassification(config)
    info = ModelInfo(
        label_names=list(label_names),
        mask_id=tokenizer.token_to_id("<mask>"),
        pad_id=tokenizer.token_to_id("<pad>"),
        special_ids=sorted(tokenizer.token_to_id(t) for t in ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]),
        max_length=max_length,
        num_hidden_layers=layers,
        hidden_size=width,
        source=TINY_ROBERTA,
    )
    return SequenceClassifier(hf_model, sep_id=None), configure_tokenizer(tokenizer, max_length), info


def save_checkpoint(
    directory: Path, model: SequenceClassifier, tokenizer: Tokenizer, info: ModelInfo
) -> None:
    """Write a self-contained checkpoint directory (HF model + tokenizer.json and tokenizer_config.json +
    fmm_info.json)."""
    directory.mkdir(parents=True, exist_ok=True)
    with (
        naming(directory, directory),  # what the savers fail to write in it: the checkpoint's folder
        tempfile.TemporaryDirectory(prefix=".", suffix=STAGING_MARK, dir=directory) as staging,
    ):
        model.hf_model.save_pretrained(staging)  # its files, then each moved in through core.writing
        for saved in sorted(Path(staging).iterdir()):
            with replacing(directory / saved.name) as staged:
                os.replace(saved, staged)
    with replacing(directory / TOKENIZER_FILE) as staged:
        tokenizer.save(str(staged))
    write_text(directory / TOKENIZER_CONFIG_FILE, tokenizer_config(tokenizer, info))
    extra = {"sep_id": model.sep_id}
    write_text(directory / INFO_FILE, json.dumps({"info": json.loads(info.to_json()), **extra}, indent=2))


def load_checkpoint(directory: str | Path) -> tuple[SequenceClassifier, Tokenizer, ModelInfo]:
    """Load a checkpoint written by save_checkpoint (eval mode, float32)."""
    from transformers import AutoModelForSequenceClassification

    quiet_transformers()
    directory = Path(directory)
    if not is_checkpoint(directory):
        raise UserError(
            f"'{directory}' is not an fmm-fast checkpoint (no {INFO_FILE}); train one with `fmm-fast train` "
            "or export one to ONNX"
        )
    record = read_checked(
        directory / INFO_FILE, {"info": dict}, "re-train the checkpoint with `fmm-fast train`"
    )
    try:
        info = ModelInfo.from_dict(record["info"])
        hf_model = AutoModelForSequenceClassification.from_pretrained(
            directory, trust_remote_code=False, use_safetensors=True
        )
        tokenizer = Tokenizer.from_file(str(directory / TOKENIZER_FILE))
    except Exception as error:  # damaged weights or tokenizer: transformers, safetensors and tokenizers
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(
            f"checkpoint '{directory}' cannot be loaded ({reason}); re-train it with `fmm-fast train`"
        ) from error
    hf_model.eval()
    model = SequenceClassifier(hf_model, sep_id=record.get("sep_id"))
    model.eval()
    if not info.source:
        info = replace(info, source=str(directory))
    return model, configure_tokenizer(tokenizer, info.max_length), info

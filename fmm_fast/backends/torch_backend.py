"""PyTorch backend: forward passes and gradients for a SequenceClassifier, in fp32 or under autocast."""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from fmm_fast.backends.base import ForwardOutput
from fmm_fast.core.datatypes import ModelInfo
from fmm_fast.training.models import SequenceClassifier


def resolve_torch_device(device: str) -> torch.device:
    """'auto' takes CUDA when present; 'cuda' without CUDA is a user error upstream, here it falls to CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


# Precisions that run under torch.autocast (weights stay fp32; autocast picks the ops that go low).
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """torch.autocast to `precision` (a key of AUTOCAST_DTYPES) on `device`; no context for fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=AUTOCAST_DTYPES[precision])


class TorchBackend:
    """Implements Backend and GradientBackend on a SequenceClassifier (eval mode).

    precision fp32 runs the model as it is; bf16 or fp16 run forward passes and gradients under
    torch.autocast with that dtype (fp16 on CUDA only): a precision backends.precision resolved.
    """

    def __init__(
        self, model: SequenceClassifier, info: ModelInfo, device: str = "cpu", precision: str = "fp32"
    ) -> None:
        self.device = resolve_torch_device(device)
        self.model = model.to(self.device).eval()
        self.info = info
        self.precision = precision
        self.name = f"torch:{self.device.type}" + ("" if precision == "fp32" else f" {precision}-autocast")

    def forward(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, with_signals: bool = False
    ) -> ForwardOutput:
        ids = torch.from_numpy(np.ascontiguousarray(input_ids, dtype=np.int64)).to(self.device)
        mask = torch.from_numpy(np.ascontiguousarray(attention_mask, dtype=np.int64)).to(self.device)
        with torch.inference_mode(), autocast(self.device, self.precision):
            logits, signals = self.model(ids, mask, with_signals=with_signals)
        return ForwardOutput(
            logits=logits.float().cpu().numpy(),
            signals=None if signals is None else signals.float().cpu().numpy(),
        )

    def embedding_matrix(self) -> torch.Tensor:
        return self.model.word_embeddings.weight.detach()

    def logits_from_embeddings(
        self, embeddings: torch.Tensor, attention_mask: torch.Tensor, input_ids: torch.Tensor
    ) -> torch.Tensor:
        with autocast(self.device, self.precision):
            logits, _ = self.model(
                input_ids.to(self.device), attention_mask.to(self.device), inputs_embeds=embeddings
            )
        return logits.float()

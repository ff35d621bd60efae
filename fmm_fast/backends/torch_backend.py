"""PyTorch backend: forward passes and gradients for a SequenceClassifier."""

from __future__ import annotations

import numpy as np
import torch

from fmm_fast.backends.base import ForwardOutput
from fmm_fast.models import SequenceClassifier
from fmm_fast.types import ModelInfo


def resolve_torch_device(device: str) -> torch.device:
    """'auto' takes CUDA when present; 'cuda' without CUDA is a user error upstream, here it falls to CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


class TorchBackend:
    """Implements Backend and GradientBackend on a SequenceClassifier (eval mode)."""

    def __init__(self, model: SequenceClassifier, info: ModelInfo, device: str = "cpu") -> None:
        self.device = resolve_torch_device(device)
        self.model = model.to(self.device).eval()
        self.info = info
        self.name = f"torch:{self.device.type}"

    def forward(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, with_signals: bool = False
    ) -> ForwardOutput:
        ids = torch.from_numpy(np.ascontiguousarray(input_ids, dtype=np.int64)).to(self.device)
        mask = torch.from_numpy(np.ascontiguousarray(attention_mask, dtype=np.int64)).to(self.device)
        with torch.inference_mode():
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
        logits, _ = self.model(
            input_ids.to(self.device), attention_mask.to(self.device), inputs_embeds=embeddings
        )
        return logits

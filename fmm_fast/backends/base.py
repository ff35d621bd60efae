"""The backend protocol: anything that turns token ids into logits (and MaSF signals).

PyTorch and ONNX Runtime implement it; so can a custom scorer. Measures, evaluation and MaSF only
talk to this protocol (usually through :class:`fmm_fast.backends.engine.MaskBatchEngine`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from fmm_fast.core.datatypes import ModelInfo


@dataclass
class ForwardOutput:
    """logits: (B, C) float32. signals: (B, L+1, D) float32 per-layer max over non-pad tokens, or None."""

    logits: np.ndarray
    signals: np.ndarray | None = None


@runtime_checkable
class Backend(Protocol):
    """Minimal scorer protocol. A custom scorer needs `info`, `name` and `forward`.

    forward(input_ids (B, T) int64, attention_mask (B, T) int64, with_signals) -> ForwardOutput.
    Inputs are right-padded; attention_mask is 1 on real tokens. `with_signals=True` may raise
    UserError when the model has no hidden-state output.
    """

    info: ModelInfo
    name: str

    def forward(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, with_signals: bool = False
    ) -> ForwardOutput: ...


@runtime_checkable
class GradientBackend(Backend, Protocol):
    """A backend that also gives autograd access (PyTorch). Gradient measures need it.

    embedding_matrix() -> (V, E) torch tensor: the word-embedding matrix W.
    logits_from_embeddings(embeddings (B, T, E), attention_mask (B, T), input_ids (B, T)) -> (B, C) logits,
    differentiable w.r.t. `embeddings`, which replace W[input_ids] (position / type embeddings are still added
    inside the model; input_ids is given for models whose token types derive from it).
    """

    def embedding_matrix(self) -> Any: ...

    def logits_from_embeddings(self, embeddings: Any, attention_mask: Any, input_ids: Any) -> Any: ...

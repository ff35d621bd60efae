"""Gradient measures (docs/method.md §3): grad-l1, grad-l2, inp-grad-{sign,abs}, int-grad-{sign,abs}.

All of them reduce the gradient g_t = ∂ logit_y / ∂ e_t of the gold-label logit with respect to the input
word embedding e_t = W[x_t]. One helper, :func:`path_gradients`, computes g (or its integrated-gradients
average along the path from the pad-token baseline); each measure only differs in how it reduces g.
PyTorch is imported inside the functions that run: the registry lists these classes in the evaluation
install too, which has no PyTorch.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING

import numpy as np

from fmm_fast.backends.base import GradientBackend
from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.errors import UserError
from fmm_fast.measures.base import ExplainBatch, Measure, PassCount, check_positive

if TYPE_CHECKING:
    from torch import Tensor

DEFAULT_GRADIENT_BATCH_SIZE = 32
DEFAULT_IG_STEPS = 20
DEFAULT_VOCAB_CHUNK = 8192


def require_gradient_backend(engine: MaskBatchEngine, measure_name: str) -> GradientBackend:
    backend = engine.backend
    if not isinstance(backend, GradientBackend):
        raise UserError(
            f"measure {measure_name} needs gradients: give a PyTorch checkpoint (--model DIR) instead of an "
            "ONNX file"
        )
    return backend


def path_gradients(
    backend: GradientBackend,
    batch: ExplainBatch,
    alphas: np.ndarray,
    weights: np.ndarray,
    rows_per_pass: int,
) -> Tensor:
    """Σ_k weights[k] · ∇_z logit_y(z_k), z_k = alphas[k]·e + (1 − alphas[k])·b, per row of the batch.

    alphas, weights: (K,) float64. e = W[input_ids]; b = W[pad_id] at every position.
    Returns (B, T, E) float64 on the embedding matrix's device.
    With alphas = weights = [1] this is the plain gradient g (z_1 == e exactly: 0·b adds nothing).
    The B·K (row, step) pairs run rows_per_pass at a time, sorted by length and trimmed to the longest
    row of each pass, so short rows do not pay for long ones.
    """
    import torch

    embedding = backend.embedding_matrix().detach()
    device = embedding.device
    input_ids = torch.from_numpy(np.ascontiguousarray(batch.input_ids, dtype=np.int64)).to(device)
    attention_mask = torch.from_numpy(np.ascontiguousarray(batch.attention_mask, dtype=np.int64)).to(device)
    labels = torch.from_numpy(np.ascontiguousarray(batch.labels, dtype=np.int64)).to(device)
    baseline = embedding[backend.info.pad_id]
    alphas_t = torch.as_tensor(alphas, dtype=embedding.dtype, device=device)
    weights_t = torch.as_tensor(weights, dtype=torch.float64, device=device)

    lengths = batch.attention_mask.astype(bool).sum(axis=1)
    by_length = np.argsort(lengths, kind="stable")
    job_rows = np.repeat(by_length, len(alphas))
    job_steps = np.tile(np.arange(len(alphas)), len(by_length))

    rows_count, width_all = batch.input_ids.shape
    total = torch.zeros((rows_count, width_all, embedding.shape[1]), dtype=torch.float64, device=device)
    for start in range(0, len(job_rows), rows_per_pass):
        rows_np = job_rows[start : start + rows_per_pass]
        width = int(lengths[rows_np].max())
        rows = torch.from_numpy(rows_np).to(device)
        steps = torch.from_numpy(job_steps[start : start + rows_per_pass]).to(device)
        ids = input_ids[rows, :width]
        alpha = alphas_t[steps].view(-1, 1, 1)
        path_point = (alpha * embedding[ids] + (1 - alpha) * baseline).requires_grad_(True)
        with torch.enable_grad():
            logits = backend.logits_from_embeddings(path_point, attention_mask[rows, :width], ids)
            # rows are independent, so the gradient of the sum is each row's own gradient
            target = logits.gather(1, labels[rows].view(-1, 1)).sum()
            (gradient,) = torch.autograd.grad(target, path_point)
        weighted = gradient.to(torch.float64) * weights_t[steps].view(-1, 1, 1)
        total[:, :width].index_add_(0, rows, weighted)
    return total


class GradientMeasure(Measure):
    """Base of the gradient measures: compute g along `path()`, reduce it per explained token.

    gradient_batch_size: (row, path point) pairs per backward pass.
    """

    needs_gradients = True

    def __init__(self, gradient_batch_size: int = DEFAULT_GRADIENT_BATCH_SIZE) -> None:
        self.gradient_batch_size = check_positive("gradient_batch_size", gradient_batch_size)

    def path(self) -> tuple[np.ndarray, np.ndarray]:
        """(alphas, weights), each (K,) float64; the plain gradient by default."""
        return np.ones(1), np.ones(1)

    @abstractmethod
    def reduce(self, gradients: Tensor, token_ids: Tensor, embedding: Tensor) -> Tensor:
        """gradients (N, E) float64, token_ids (N,) int64 of the explained tokens; W (V, E) -> (N,) scores."""

    def planned_passes(self, units: int) -> PassCount:
        return PassCount(backward=len(self.path()[0]))  # one per point of the path, whatever the units

    def explain(self, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray:
        import torch

        backend = require_gradient_backend(engine, self.name)
        alphas, weights = self.path()
        gradients = path_gradients(backend, batch, alphas, weights, self.gradient_batch_size)
        embedding = backend.embedding_matrix().detach()
        rows, cols = np.nonzero(batch.explained)
        scores = np.zeros(batch.input_ids.shape, dtype=np.float64)
        if len(rows) == 0:
            return scores
        device = embedding.device
        token_ids = torch.from_numpy(batch.input_ids[rows, cols].astype(np.int64)).to(device)
        with torch.no_grad():
            explained = gradients[torch.from_numpy(rows).to(device), torch.from_numpy(cols).to(device)]
            values = self.reduce(explained, token_ids, embedding).cpu().numpy()
        scores[rows, cols] = values if self.signed else np.abs(values)
        return scores


class VocabularyNormMeasure(GradientMeasure):
    """A norm of g_t Wᵀ (the gradient w.r.t. the one-hot input); vocab_chunk bounds the V-sized work."""

    def __init__(
        self, gradient_batch_size: int = DEFAULT_GRADIENT_BATCH_SIZE, vocab_chunk: int = DEFAULT_VOCAB_CHUNK
    ) -> None:
        super().__init__(gradient_batch_size)
        self.vocab_chunk = check_positive("vocab_chunk", vocab_chunk)


class GradL1(VocabularyNormMeasure):
    """‖g_t Wᵀ‖₁, the L1 norm of the gradient w.r.t. the one-hot input, chunked over the vocabulary."""

    name = "grad-l1"
    signed = False

    def reduce(self, gradients: Tensor, token_ids: Tensor, embedding: Tensor) -> Tensor:
        import torch

        # the (N, V) product is the big one: run it in the model's dtype, sum the chunks in float64
        compact = gradients.to(embedding.dtype)
        norm = torch.zeros(len(gradients), dtype=torch.float64, device=gradients.device)
        for start in range(0, embedding.shape[0], self.vocab_chunk):
            chunk = embedding[start : start + self.vocab_chunk]
            norm += (compact @ chunk.T).abs().sum(dim=1, dtype=torch.float64)
        return norm


class _GramCache:
    """The latest WᵀW, shared by every GradL2 instance: an erasure run makes a fresh measure per step."""

    key: tuple | None = None
    source: Tensor | None = None  # held so its storage cannot be reused by another W
    gram: Tensor | None = None


def gram_matrix(embedding: Tensor, vocab_chunk: int = DEFAULT_VOCAB_CHUNK) -> Tensor:
    """(E, E) float64 WᵀW, accumulated over vocabulary chunks to bound memory; cached for the latest W."""
    import torch

    # backends may hand out a fresh detached view per call: key on storage and in-place version
    key = (
        embedding.data_ptr(),
        tuple(embedding.shape),
        embedding.dtype,
        embedding.device,
        embedding._version,
    )
    if key != _GramCache.key:
        gram = torch.zeros((embedding.shape[1],) * 2, dtype=torch.float64, device=embedding.device)
        for start in range(0, embedding.shape[0], vocab_chunk):
            chunk = embedding[start : start + vocab_chunk].to(torch.float64)
            gram += chunk.T @ chunk
        _GramCache.key, _GramCache.source, _GramCache.gram = key, embedding, gram
    assert _GramCache.gram is not None
    return _GramCache.gram


class GradL2(VocabularyNormMeasure):
    """‖g_t Wᵀ‖₂ = sqrt(g G gᵀ) with the E×E Gram matrix G = WᵀW (float64, cached per embedding matrix)."""

    name = "grad-l2"
    signed = False

    def gram(self, embedding: Tensor) -> Tensor:
        return gram_matrix(embedding, self.vocab_chunk)

    def reduce(self, gradients: Tensor, token_ids: Tensor, embedding: Tensor) -> Tensor:
        squared = ((gradients @ self.gram(embedding)) * gradients).sum(dim=1)
        return squared.clamp_min(0.0).sqrt()  # rounding can push a true 0 slightly below 0


class InputGradSign(GradientMeasure):
    """g_t · W[x_t] (input × gradient)."""

    name = "inp-grad-sign"
    signed = True

    def reduce(self, gradients: Tensor, token_ids: Tensor, embedding: Tensor) -> Tensor:
        import torch

        return (gradients * embedding[token_ids].to(torch.float64)).sum(dim=1)


class InputGradAbs(InputGradSign):
    name = "inp-grad-abs"
    signed = False


class IntGradSign(InputGradSign):
    """(1/K) Σ_k (k/K) ∇f(z_k)_t · W[x_t], z_k = b + (k/K)(e − b), b = pad embedding at every position.

    This is the paper code's variant (right Riemann sum, extra k/K factor, times W[x_t] instead of e − b).
    """

    name = "int-grad-sign"
    signed = True

    def __init__(
        self, gradient_batch_size: int = DEFAULT_GRADIENT_BATCH_SIZE, ig_steps: int = DEFAULT_IG_STEPS
    ) -> None:
        super().__init__(gradient_batch_size)
        self.ig_steps = check_positive("ig_steps", ig_steps)

    def path(self) -> tuple[np.ndarray, np.ndarray]:
        alphas = np.arange(1, self.ig_steps + 1, dtype=np.float64) / self.ig_steps
        return alphas, alphas / self.ig_steps


class IntGradAbs(IntGradSign):
    name = "int-grad-abs"
    signed = False

"""Open a model by path: a PyTorch checkpoint directory or a self-describing ONNX file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from fmm_fast.backends.base import Backend, GradientBackend
from fmm_fast.errors import UserError
from fmm_fast.models import is_checkpoint, load_checkpoint
from fmm_fast.types import ModelInfo


@dataclass
class LoadedModel:
    backend: Backend
    tokenizer: Tokenizer
    path: str

    @property
    def info(self) -> ModelInfo:
        return self.backend.info


def load_model(path: str | Path, device: str = "auto", provider: str = "auto") -> LoadedModel:
    """A checkpoint directory → PyTorch backend; a `.onnx` file → ONNX Runtime backend.

    device: auto|cpu|cuda for PyTorch; provider: auto|cpu|cuda|tensorrt for ONNX Runtime.
    """
    path = Path(path)
    if path.suffix == ".onnx" or (path.is_file() and not is_checkpoint(path)):
        if not path.is_file():
            raise UserError(f"ONNX model '{path}' does not exist; create it with `fmm-fast export`")
        from fmm_fast.backends.onnx_backend import OnnxBackend

        backend = OnnxBackend.from_file(path, provider=provider)
        return LoadedModel(backend, backend.tokenizer, str(path))
    if not path.exists():
        raise UserError(
            f"model '{path}' does not exist; give a checkpoint directory from `fmm-fast train` "
            "or an ONNX file from `fmm-fast export`"
        )
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UserError(
                "--device cuda was asked for but PyTorch sees no CUDA device; use --device auto or cpu"
            )
    from fmm_fast.backends.torch_backend import TorchBackend

    model, tokenizer, info = load_checkpoint(path)
    return LoadedModel(TorchBackend(model, info, device=device), tokenizer, str(path))


def gradient_backend(loaded: LoadedModel, device: str = "auto") -> GradientBackend:
    """The backend gradient measures run on: the model itself, or the checkpoint an ONNX file came from."""
    if isinstance(loaded.backend, GradientBackend):
        return loaded.backend
    source = loaded.info.source
    if source and is_checkpoint(source):
        return load_model(source, device=device).backend  # type: ignore[return-value]
    raise UserError(
        f"gradient measures need the PyTorch checkpoint of '{loaded.path}' (its recorded source "
        f"'{source or 'none'}' is not available); pass --model CHECKPOINT_DIR"
    )

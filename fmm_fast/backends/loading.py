"""Open a model by path: a PyTorch checkpoint directory or a self-describing ONNX file, at a precision."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from tokenizers import Tokenizer

from fmm_fast.backends.base import Backend, GradientBackend
from fmm_fast.backends.options import BackendOptions
from fmm_fast.backends.precision import Precision, resolve_precision
from fmm_fast.core.datatypes import ModelInfo
from fmm_fast.core.errors import UserError
from fmm_fast.core.optional_deps import TRAIN
from fmm_fast.training.checkpoint_layout import is_checkpoint


@dataclass
class LoadedModel:
    """A backend with its tokenizer; precision is what was asked for and what runs (run records keep it)."""

    backend: Backend
    tokenizer: Tokenizer
    path: str
    precision: Precision = field(default_factory=lambda: Precision("fp32", "fp32"))

    @property
    def info(self) -> ModelInfo:
        return self.backend.info

    def describe(self, path: str) -> dict:
        """The "model" block of a run record: where it came from and what ran it."""
        return {
            "path": path,
            "strategy": self.info.strategy,
            "trained_precision": self.info.trained_precision,
            "source": self.info.source,
            "backend": self.backend.name,
            "precision": self.precision.as_dict(),
        }


def load_model(path: str | Path, options: BackendOptions = BackendOptions()) -> LoadedModel:
    """A checkpoint directory → PyTorch backend on options.device; a `.onnx` file → ONNX Runtime backend
    on options.provider (fp32), or OpenVINO (bf16 on CPU).

    options.precision: fp32|bf16|auto (backends.precision). A note on what runs instead of the request
    goes to stderr.
    """
    path = Path(path)
    if path.suffix == ".onnx" and path.is_dir() and not is_checkpoint(path):
        raise UserError(
            f"'{path}' is a directory, not an ONNX file; pass the .onnx file `fmm-fast export` wrote or a "
            "checkpoint directory from `fmm-fast train`"
        )
    if path.suffix == ".onnx" or (path.is_file() and not is_checkpoint(path)):
        if not path.is_file():
            raise UserError(f"ONNX model '{path}' does not exist; create it with `fmm-fast export`")
        loaded = _load_onnx(path, options.provider, options.precision)
    else:
        loaded = _load_checkpoint(path, options.device, options.precision)
    if loaded.precision.note:
        print(f"fmm-fast: note: {loaded.precision.note}", file=sys.stderr)
    return loaded


def _load_onnx(path: Path, provider: str, precision: str) -> LoadedModel:
    """fp32 on ONNX Runtime (any provider); bf16 on CPU through OpenVINO, which reads the same file."""
    from fmm_fast.backends.onnx_backend import OnnxBackend

    on_cuda = provider in ("cuda", "tensorrt") or (provider == "auto" and _ort_has_cuda())
    chosen = resolve_precision(precision, on_cuda)
    if chosen.used == "fp16":  # auto on a GPU: ONNX Runtime runs the file's own precision
        chosen = Precision(
            chosen.requested,
            "fp32",
            f"ONNX Runtime runs '{path}' in the precision it was exported in; for fp16 on the GPU export "
            "it with `fmm-fast export --fp16`",
        )
    if chosen.used == "bf16":
        if on_cuda and provider != "auto":
            raise UserError(
                f"--precision bf16 for an ONNX model runs on the CPU (OpenVINO), not on {provider}; "
                "use --provider cpu, or a checkpoint directory for bf16 on the GPU"
            )
        backend = _openvino_backend(path, chosen)
        if backend is not None:
            return LoadedModel(backend, backend.tokenizer, str(path), _runs_as_chosen(backend, chosen))
        chosen = Precision(
            chosen.requested,
            "fp32",
            "bf16 on CPU for an ONNX model runs on OpenVINO, which is not installed "
            "(`pip install 'fmm-fast[openvino]'`), so auto runs fp32",
        )
    onnx_backend = OnnxBackend.from_file(path, provider=provider)
    return LoadedModel(onnx_backend, onnx_backend.tokenizer, str(path), chosen)


def _openvino_backend(path: Path, chosen: Precision):
    """OpenVINO bf16 on `path`; None when openvino is missing and `auto` may fall back to fp32."""
    from fmm_fast.backends.openvino_backend import OpenVinoBackend, import_openvino

    if chosen.requested == "auto":
        try:
            import_openvino()
        except UserError:
            return None
    return OpenVinoBackend(path, precision="bf16")


def _runs_as_chosen(backend, chosen: Precision) -> Precision:
    """The precision record corrected to what OpenVINO reports it runs (it keeps f32 without native bf16)."""
    if backend.precision == chosen.used:
        return chosen
    note = f"OpenVINO runs {backend.precision} on this CPU, not {chosen.used}"
    return Precision(chosen.requested, backend.precision, note)


def _ort_has_cuda() -> bool:
    import onnxruntime

    from fmm_fast.backends.onnx_backend import PROVIDERS

    return PROVIDERS["cuda"] in onnxruntime.get_available_providers()


def _load_checkpoint(path: Path, device: str, precision: str) -> LoadedModel:
    """PyTorch on `device`, under autocast for bf16 / fp16."""
    if not path.exists():
        raise UserError(
            f"model '{path}' does not exist; give a checkpoint directory from `fmm-fast train` "
            "or an ONNX file from `fmm-fast export`"
        )
    TRAIN.require(f"the PyTorch checkpoint '{path}'", ", or pass an .onnx file from `fmm-fast export`")
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(
            "--device cuda was asked for but PyTorch sees no CUDA device; use --device auto or cpu"
        )
    from fmm_fast.backends.torch_backend import TorchBackend, resolve_torch_device
    from fmm_fast.training.models import load_checkpoint

    chosen = resolve_precision(precision, resolve_torch_device(device).type == "cuda")
    model, tokenizer, info = load_checkpoint(path)
    backend = TorchBackend(model, info, device=device, precision=chosen.used)
    return LoadedModel(backend, tokenizer, str(path), chosen)


def gradient_backend(loaded: LoadedModel, options: BackendOptions = BackendOptions()) -> GradientBackend:
    """The backend gradient measures run on: the model itself, or the checkpoint an ONNX file came from
    (on options.device, in the loaded model's precision: PyTorch autocast for bf16)."""
    if isinstance(loaded.backend, GradientBackend):
        return loaded.backend
    source = loaded.info.source
    if source and is_checkpoint(source):
        checkpoint = load_model(source, replace(options, precision=loaded.precision.used))
        return checkpoint.backend  # type: ignore[return-value]
    raise UserError(
        f"gradient measures need the PyTorch checkpoint of '{loaded.path}' (its recorded source "
        f"'{source or 'none'}' is not available); pass --model CHECKPOINT_DIR"
    )

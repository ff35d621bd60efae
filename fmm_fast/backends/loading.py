"""Open a model by path: a PyTorch model folder (an fmm-fast checkpoint, a Hugging Face classifier folder or
Hub name) or a self-describing ONNX file, at a precision."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tokenizers import Tokenizer

from fmm_fast.backends.base import Backend, GradientBackend
from fmm_fast.backends.options import BackendOptions
from fmm_fast.backends.precision import Precision, cpu_has_native_bf16, no_native_bf16, resolve_precision
from fmm_fast.core.datatypes import ModelInfo
from fmm_fast.core.digest import content_sha256
from fmm_fast.core.errors import UserError
from fmm_fast.core.optional_deps import TRAIN
from fmm_fast.training.checkpoint_layout import is_model_folder


@dataclass
class LoadedModel:
    """A backend with its tokenizer; precision is what runs (resolved: fp32, bf16 or fp16)."""

    backend: Backend
    tokenizer: Tokenizer
    path: str
    precision: str = "fp32"

    @property
    def info(self) -> ModelInfo:
        return self.backend.info

    def describe(self, path: str) -> dict:
        """The "model" block of a run record: where it came from and what ran it (the precision is the
        record's arguments.backend.precision)."""
        return {
            "path": path,
            "strategy": self.info.strategy,
            "trained_by": self.info.trained_by,
            "trained_precision": self.info.trained_precision,
            "source": self.info.source,
            "backend": self.backend.name,
        }


def resolve_backend(models: Sequence[str | Path], options: BackendOptions) -> BackendOptions:
    """options with options.precision resolved to what every model of `models` runs in (a note on stderr
    where that is not what was asked for), decided before anything loads: settings hold it from the start.
    UserError when the models would run in different precisions. A resolved precision resolves to itself."""
    chosen = [model_precision(Path(model), options) for model in models]
    used = sorted({c.used for c in chosen})
    if len(used) > 1:
        raise UserError(
            f"--precision {options.precision} runs these models in different precisions ({', '.join(used)}); "
            "give --precision fp32 to run them alike"
        )
    for note in dict.fromkeys(c.note for c in chosen if c.note):
        print(f"fmm-fast: note: {note}", file=sys.stderr)
    return replace(options, precision=used[0]) if used else options


def model_precision(path: Path, options: BackendOptions) -> Precision:
    """The precision load_model runs the model at `path` in: ONNX Runtime (fp32, the file's own), OpenVINO
    (bf16 on a CPU with native bf16) or PyTorch (fp32, or bf16/fp16 autocast)."""
    if _is_onnx(path):
        return _onnx_precision(options.provider, options.precision)
    _require_torch(path)
    import torch

    on_cuda = options.device != "cpu" and torch.cuda.is_available()
    return resolve_precision(options.precision, on_cuda)


def _is_onnx(path: Path) -> bool:
    """Whether `path` names an ONNX file (a checkpoint directory otherwise); UserError for a directory
    named like one."""
    if path.suffix == ".onnx" and path.is_dir() and not is_model_folder(path):
        raise UserError(
            f"'{path}' is a directory, not an ONNX file; pass the .onnx file `fmm-fast export` wrote or a "
            "checkpoint directory from `fmm-fast train`"
        )
    return path.suffix == ".onnx" or (path.is_file() and not is_model_folder(path))


def _onnx_precision(provider: str, requested: str) -> Precision:
    """fp32 on ONNX Runtime (any provider); bf16 on CPU through OpenVINO, which reads the same file."""
    on_cuda = provider in ("cuda", "tensorrt") or (provider == "auto" and _ort_has_cuda())
    chosen = resolve_precision(requested, on_cuda)
    if chosen.used == "fp16":  # auto on a GPU: ONNX Runtime runs the file's own precision
        return Precision(
            requested,
            "fp32",
            "ONNX Runtime runs an .onnx model in the precision it was exported in; for fp16 on the GPU "
            "export it with `fmm-fast export --fp16`",
        )
    if chosen.used != "bf16":
        return chosen
    if on_cuda and provider != "auto":
        raise UserError(
            f"--precision bf16 for an ONNX model runs on the CPU (OpenVINO), not on {provider}; "
            "use --provider cpu, or a checkpoint directory for bf16 on the GPU"
        )
    from fmm_fast.backends.openvino_backend import import_openvino

    try:
        import_openvino()
    except UserError:
        if requested != "auto":
            raise
        return Precision(
            requested,
            "fp32",
            "bf16 on CPU for an ONNX model runs on OpenVINO, which is not installed "
            "(`pip install 'fmm-fast[openvino]'`), so auto runs fp32",
        )
    if not cpu_has_native_bf16():  # OpenVINO's CPU plugin keeps f32 there
        return Precision(
            requested, "fp32", f"{no_native_bf16()}, so OpenVINO would run it in fp32: fp32 runs"
        )
    return chosen


def load_model(path: str | Path, options: BackendOptions = BackendOptions()) -> LoadedModel:
    """A checkpoint directory, Hugging Face classifier folder or Hub name → PyTorch backend on
    options.device; a `.onnx` file → ONNX Runtime backend on options.provider (fp32), or OpenVINO (bf16 on
    CPU).

    options.precision: fp32|bf16|auto, resolved by resolve_backend unless it was already.
    """
    path = Path(path)
    precision = resolve_backend([path], options).precision
    if _is_onnx(path):
        if not path.is_file():
            raise UserError(f"ONNX model '{path}' does not exist; create it with `fmm-fast export`")
        return _load_onnx(path, options.provider, precision)
    return _load_checkpoint(path, options.device, precision)


def _load_onnx(path: Path, provider: str, precision: str) -> LoadedModel:
    """fp32 on ONNX Runtime (any provider); bf16 on OpenVINO's CPU plugin."""
    if precision == "bf16":
        from fmm_fast.backends.openvino_backend import OpenVinoBackend

        backend = OpenVinoBackend(path, precision="bf16")
        if backend.precision != "bf16":  # resolution expected bf16 on this CPU: never record what did not run
            raise UserError(
                f"OpenVINO runs {backend.precision} on this CPU, not bf16; run with --precision fp32"
            )
        return LoadedModel(backend, backend.tokenizer, str(path), precision)
    from fmm_fast.backends.onnx_backend import OnnxBackend

    onnx_backend = OnnxBackend.from_file(path, provider=provider)
    return LoadedModel(onnx_backend, onnx_backend.tokenizer, str(path), precision)


def _ort_has_cuda() -> bool:
    import onnxruntime

    from fmm_fast.backends.onnx_backend import PROVIDERS

    return PROVIDERS["cuda"] in onnxruntime.get_available_providers()


def _require_torch(path: Path) -> None:
    TRAIN.require(f"the PyTorch checkpoint '{path}'", ", or pass an .onnx file from `fmm-fast export`")


def _load_checkpoint(path: Path, device: str, precision: str) -> LoadedModel:
    """PyTorch on `device`, under autocast for bf16 / fp16."""
    _require_torch(path)
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(
            "--device cuda was asked for but PyTorch sees no CUDA device; use --device auto or cpu"
        )
    from fmm_fast.backends.torch_backend import TorchBackend
    from fmm_fast.training.hf_import import open_classifier

    model, tokenizer, info = open_classifier(path)
    backend = TorchBackend(model, info, device=device, precision=precision)
    return LoadedModel(backend, tokenizer, str(path), precision)


def check_unchanged_source(loaded: LoadedModel) -> None:
    """UserError when the checkpoint folder an .onnx file was exported from holds another model now (its
    content digest differs from the one the export stored): its gradients would not be the .onnx file's
    model's. An export older than the digest is taken on trust."""
    stored, source = loaded.info.source_digest, loaded.info.source
    if stored and content_sha256(source) != stored:
        raise UserError(
            f"'{loaded.path}' was exported from '{source}', which has changed since (another model was saved "
            f"there): re-export it with `fmm-fast export --model {source}`, or pass --model {source} itself"
        )


def gradient_backend(loaded: LoadedModel, options: BackendOptions = BackendOptions()) -> GradientBackend:
    """The backend gradient measures run on: the model itself, or the model folder an ONNX file came from
    (on options.device, in the loaded model's precision: PyTorch autocast for bf16)."""
    if isinstance(loaded.backend, GradientBackend):
        return loaded.backend
    source = loaded.info.source
    if source and is_model_folder(source):
        check_unchanged_source(loaded)
        checkpoint = load_model(source, replace(options, precision=loaded.precision))
        return checkpoint.backend  # type: ignore[return-value]
    raise UserError(
        f"gradient measures need the PyTorch checkpoint of '{loaded.path}' (its recorded source "
        f"'{source or 'none'}' is not available); pass --model CHECKPOINT_DIR"
    )

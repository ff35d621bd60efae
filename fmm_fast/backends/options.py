"""Where and how a model's forward passes run: one options object for every backend."""

from __future__ import annotations

from dataclasses import dataclass

from fmm_fast.backends.precision import DEFAULT_PRECISION
from fmm_fast.core.errors import UserError

DEVICES = ("auto", "cpu", "cuda")
PROVIDERS = ("auto", "cpu", "cuda", "tensorrt")


def check(checks: list[tuple[bool, str]]) -> None:
    """UserError with the message of the first (ok, message) pair that is not ok."""
    for ok, message in checks:
        if not ok:
            raise UserError(message)


@dataclass(frozen=True)
class BackendOptions:
    """Where forward passes run.

    device: the PyTorch device (auto|cpu|cuda) of checkpoint models and gradient measures;
    provider: the ONNX Runtime execution provider (auto|cpu|cuda|tensorrt) of .onnx models;
    precision: fp32|bf16|auto as asked for; every settings object holds it resolved (fp32|bf16|fp16, what
    runs: backends.loading.resolve_backend, or for training backends.precision.resolve_training_precision),
    which also checks it (backends.precision.check_precision: the one check).
    """

    device: str = "auto"
    provider: str = "auto"
    precision: str = DEFAULT_PRECISION

    def __post_init__(self) -> None:
        check(
            [
                (self.device in DEVICES, f"unknown device '{self.device}'; use {', '.join(DEVICES)}"),
                (
                    self.provider in PROVIDERS,
                    f"unknown ONNX Runtime provider '{self.provider}'; use {', '.join(PROVIDERS)}",
                ),
            ]
        )

"""Which floating-point precision a run's forward passes use: --precision fp32|bf16|auto resolved once.

`auto` takes the fastest precision the hardware runs natively: on CUDA fp16, on a CPU with native bf16
(AVX512_BF16 or AMX-BF16 in /proc/cpuinfo's flags) bf16, else fp32 with a note saying why.
Training resolves its own way (resolve_training_precision): reduced precision there changes the model, so
bf16 is refused where it would be emulated, and CUDA prefers bf16 (no loss scaling) to fp16.
Both resolve a resolved value to itself, and check_precision is the one check of a precision's name.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmm_fast.core import machine
from fmm_fast.core.errors import UserError

PRECISIONS = ("fp32", "bf16", "auto")  # what --precision takes
RAN_PRECISIONS = ("fp32", "bf16", "fp16")  # what a precision resolves to (fp16: CUDA only)
DEFAULT_PRECISION = "fp32"  # until bench/bench_precision.py's fidelity report says otherwise
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@dataclass(frozen=True)
class Precision:
    """requested: fp32|bf16|auto as given; used: fp32|bf16|fp16, what runs; note: why they differ, if so."""

    requested: str
    used: str
    note: str | None = None


def cpu_has_native_bf16() -> bool:
    return any(flag in machine.cpu_flags() for flag in NATIVE_BF16_FLAGS)


def no_native_bf16() -> str:
    """Why a CPU without native bf16 runs otherwise (the start of a note or error)."""
    flags = ", ".join(NATIVE_BF16_FLAGS)
    return f"this CPU has no native bf16 (none of {flags} in {machine.CPUINFO}'s flags)"


def check_precision(value: str, on_cuda: bool) -> None:
    """UserError unless `value` names a precision to ask for (PRECISIONS) or one that resolved on this
    device (RAN_PRECISIONS; fp16 on CUDA only): the one check of a precision's name."""
    if value == "fp16" and not on_cuda:
        raise UserError("fp16 runs on CUDA only; on the CPU use --precision fp32, bf16 or auto")
    if value not in (*PRECISIONS, *RAN_PRECISIONS):
        raise UserError(f"unknown precision '{value}'; use one of {', '.join(PRECISIONS)}")


def resolve_precision(requested: str, on_cuda: bool) -> Precision:
    """A forward pass's precision fp32|bf16|auto (or a resolved one) on CUDA or a CPU -> what runs."""
    check_precision(requested, on_cuda)
    if requested != "auto":
        return Precision(requested, requested)
    if on_cuda:
        return Precision(requested, "fp16")
    if cpu_has_native_bf16():
        return Precision(requested, "bf16")
    return Precision(requested, "fp32", f"{no_native_bf16()}, so auto runs fp32")


def resolve_training_precision(requested: str, on_cuda: bool) -> Precision:
    """The precision the forward passes of a training run under autocast (weights and optimizer state stay
    fp32): fp32; bf16 on a CPU with native bf16 or a CUDA device that supports it; fp16 (with loss scaling)
    on a CUDA device without bf16. `auto` picks the reduced one where it is native, else fp32."""
    check_precision(requested, on_cuda)
    if requested == "fp32":
        return Precision(requested, "fp32")
    if on_cuda:
        import torch  # only where a reduced precision is asked for: --help stays fast

        bf16 = torch.cuda.is_bf16_supported()
        if requested == "bf16" and not bf16:
            raise UserError(
                "this CUDA device has no bf16; train with --precision auto (fp16 with loss scaling) or fp32"
            )
        return Precision(requested, "bf16" if bf16 and requested != "fp16" else "fp16")
    if cpu_has_native_bf16():
        return Precision(requested, "bf16")
    if requested == "bf16":
        raise UserError(
            f"{no_native_bf16()}, where bf16 training is slower than fp32; use --precision fp32 or auto"
        )
    return Precision(requested, "fp32", f"{no_native_bf16()}, so auto trains in fp32")

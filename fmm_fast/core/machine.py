"""The machine a run computed on, recorded beside its times: a duration means little without the CPU, the
threads it ran and, on a shared machine, how busy the machine was."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path
from typing import Any

from fmm_fast.core.threads import compute_threads, physical_cores

CPUINFO = Path("/proc/cpuinfo")
# The instruction sets that decide fp32 and bf16 speed: name shown -> /proc/cpuinfo flag.
ISA_FLAGS = {"AVX2": "avx2", "AVX-512": "avx512f", "AVX512_BF16": "avx512_bf16", "AMX": "amx_tile"}


def _cpuinfo() -> str:
    try:
        return CPUINFO.read_text()
    except OSError:  # not Linux
        return ""


def cpu_flags() -> frozenset[str]:
    """The ISA flags of the first CPU in /proc/cpuinfo (empty where there is none, e.g. not Linux)."""
    for line in _cpuinfo().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo with its family and model numbers where given (a virtual
    machine may name only "AMD EPYC": the numbers tell Zen 4 from Zen 5), else what platform says."""
    text = _cpuinfo()
    fields = {
        key: re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        for key in ("model name", "cpu family", "model")
    }
    if fields["model name"] is None:
        return platform.processor() or platform.machine()
    name = fields["model name"].group(1).strip()
    if fields["cpu family"] is None or fields["model"] is None:
        return name
    return f"{name} (family {fields['cpu family'].group(1).strip()} model {fields['model'].group(1).strip()})"


def isa_extensions() -> list[str]:
    """Those of ISA_FLAGS the CPU has."""
    flags = cpu_flags()
    return [name for name, flag in ISA_FLAGS.items() if flag in flags]


def machine_record() -> dict[str, Any]:
    """What a run record says of the machine its invocation computed on: cpu (cpu_model), isa, cores (the
    physical cores it may run on), threads (what its models, PyTorch and Numba compute on: --threads or the
    cores) and load_average (1, 5 and 15 minutes, when the record was written: above `threads`, something
    else was running too)."""
    try:
        load = [round(value, 2) for value in os.getloadavg()]
    except OSError:  # not available on this platform
        load = None
    return {
        "cpu": cpu_model(),
        "isa": isa_extensions(),
        "cores": physical_cores(),
        "threads": compute_threads(),
        "load_average": load,
    }

"""How many threads this process computes on: its physical cores, or fewer inside `limited_threads`.

A Ray task that reserved K CPUs must compute on K threads. Ray sets OMP_NUM_THREADS for it, but only
where unset and only at the worker's start, ONNX Runtime and OpenVINO ignore it, and PyTorch and Numba
read it once: so the block sets each library's count itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_limit: int | None = None  # set by limited_threads


def physical_cores() -> int:
    """CPU cores this process may run on, hyper-threads of one core counted once."""
    try:
        cpus = os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
    cores = set()
    for cpu in cpus:
        try:
            cores.add(Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text())
        except OSError:
            return len(cpus)
    return max(1, len(cores))


def compute_threads() -> int:
    """Intra-op threads of an ONNX Runtime or OpenVINO model opened without an explicit count."""
    return _limit or physical_cores()


@contextmanager
def limited_threads(count: int) -> Iterator[None]:
    """In the block, ONNX Runtime and OpenVINO models opened, PyTorch and Numba's parallel loops run
    `count` threads; the earlier counts come back after it."""
    import numba

    global _limit
    torch = _torch_if_installed()
    before = (_limit, numba.get_num_threads(), torch.get_num_threads() if torch else None)
    _limit = count
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    if torch:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        _limit = before[0]
        numba.set_num_threads(before[1])
        if torch:
            torch.set_num_threads(before[2])


def _torch_if_installed():
    """torch, or None in the evaluation install (no `train` extra)."""
    try:
        import torch
    except ImportError:
        return None
    return torch

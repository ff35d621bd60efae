"""Handing freed heap memory back to the operating system (glibc only; a no-op elsewhere).

A forward pass on long rows allocates and frees buffers of megabytes. glibc serves allocations below its mmap
threshold from the heap and raises that threshold (up to 32 MiB) each time a larger mapped block is freed, so
after the first long batch every activation buffer comes from the heap, and the pages of freed buffers stay
resident: a 2,000-token leave-one-out run kept growing past 1.8 GB while its live data stayed near 450 MB
(bench/bench_memory.py; with the threshold fixed at 64 KiB its peak was 452 MB instead of 655 MB at 600
tokens). malloc_trim(0) returns the free pages, in the middle of the heap too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none (macOS, musl, Windows)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None


def release_free_heap() -> None:
    """Return the heap's free pages to the operating system; nothing where the C library cannot."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)

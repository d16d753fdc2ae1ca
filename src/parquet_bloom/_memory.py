"""Handing freed memory back to the operating system, where peak memory is a promise.

Both allocators a large job goes through keep freed memory for reuse: Arrow's pool (mimalloc or
jemalloc) and glibc's malloc, which numpy and Python's large objects use, and which after a
large free serves later blocks of up to 32 MiB from its heap instead of fresh mappings, then
trims that heap only when much of its top is free. So memory freed between two steps of a job
still counts in the process's resident set. A call costs a few milliseconds, and the page
faults of memory later taken back: call it after large steps, not small ones.
"""

from __future__ import annotations

import sys
from collections.abc import Callable


def _glibc_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None under another C library."""
    import ctypes

    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    return trim


_MALLOC_TRIM = _glibc_malloc_trim() if sys.platform.startswith("linux") else None


def release_freed_memory() -> None:
    """Hand memory freed since the last call, in Arrow's pool and in glibc's heap, back."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)

"""Thread pools shared by every rewrite in the process.

A rewrite copies its unchanged bytes on one thread while others build its filters
(:mod:`parquet_bloom._rewrite`). Starting those threads for every file made each file wait
about 6 ms on a busy machine (a new thread must be scheduled before ``start`` returns: 2 ms
each, three a file, measured over a table of 200 files of 5 MB), so they are started once and
kept. Sharing also bounds the work of many rewrites at once (a table's files, several at a
time): at most :data:`BUILD_THREADS` chunks are being hashed in the process, whatever the
number of files in flight (each rewrite in flight may also keep, until it ends, one spare hash
buffer per build thread that built one of its chunks).

A pool belongs to the process that made it: a forked child (a Spark worker, a multiprocessing
pool) inherits the pool object but not its threads, so it makes its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = [
    "BUILD_THREADS",
    "COPY_THREADS",
    "PROBE_THREADS",
    "READ_THREADS",
    "build_pool",
    "copy_pool",
    "prune_pool",
    "read_pool",
    "shared_map",
]

_T = TypeVar("_T")
_R = TypeVar("_R")


def _cores() -> int:
    """The cores this process may run on (its affinity where the OS says, else the count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


# Threads building filters, each a whole chunk at a time (read, hash, insert): one per core,
# at least two (numpy's passes, pyarrow's decompression and the compiled loops release the
# GIL), at most 32. Each holds one chunk's hashes, 8 bytes a value.
BUILD_THREADS = min(max(_cores(), 2), 32)
# Threads copying unchanged bytes (waiting on the disk or the store, not on the CPU): one per
# file being rewritten at once (a thread is started only when none is idle), up to this many;
# more files wait for a free one.
COPY_THREADS = 64
# Threads reading many files' footers and filters at once (the Bloom index's build and its
# lookups of files it does not know): they wait on the store, so many hide its latency.
READ_THREADS = 32
# Threads of the compiled point lookup of many local files (_kernels_probe.c's own, holding no
# GIL): the work is the CPU's (reads from the page cache, footer walks), one a core, at most 8.
PROBE_THREADS = min(_cores(), 8)

_pools: dict[str, tuple[int, ThreadPoolExecutor]] = {}
_lock = threading.Lock()


def _pool(name: str, workers: int) -> ThreadPoolExecutor:
    pid = os.getpid()
    with _lock:
        made = _pools.get(name)
        if made is None or made[0] != pid:
            made = (pid, ThreadPoolExecutor(workers, thread_name_prefix=f"parquet-bloom-{name}"))
            _pools[name] = made
        return made[1]


def build_pool() -> ThreadPoolExecutor:
    """The pool whose threads build filters."""
    return _pool("build", BUILD_THREADS)


def copy_pool() -> ThreadPoolExecutor:
    """The pool whose threads copy unchanged bytes into a rewrite's output."""
    return _pool("copy", COPY_THREADS)


def read_pool() -> ThreadPoolExecutor:
    """The pool whose threads read many files' tails at once."""
    return _pool("read", READ_THREADS)


def prune_pool(workers: int) -> ThreadPoolExecutor:
    """A pool of ``workers`` threads pruning files, kept for the next prune that asks for as
    many: starting 16 threads took a third of a point lookup over 200 files."""
    return _pool(f"prune-{workers}", workers)


def shared_map(
    function: Callable[[_T], _R], items: Sequence[_T], pool: ThreadPoolExecutor, workers: int
) -> list[_R]:
    """``[function(item) for item in items]``, by ``workers`` threads: the calling thread and
    ``workers - 1`` of ``pool``'s, each taking the next item when it has done one. One task a
    thread, not one an item: a future costs 10-20 us, as much as pruning a local file with
    the compiled lookup. Once every thread has stopped taking items, the error of the first
    item that failed is raised, as the list comprehension would: items are taken in order and
    each one taken is done, so every item before it was done too (whichever failed first)."""
    shared = iter(enumerate(items))  # next() on it holds the GIL: each item taken once
    failed: list[tuple[int, BaseException]] = []

    def work() -> list[tuple[int, _R]]:
        done = []
        for i, item in shared:
            if failed:
                break
            try:
                done.append((i, function(item)))
            except BaseException as err:
                failed.append((i, err))
                break
        return done

    helpers = [pool.submit(work) for _ in range(min(workers, len(items)) - 1)]
    results: list[tuple[int, _R]] = []
    try:
        results += work()
    finally:  # every helper stopped before this returns or raises
        for helper in helpers:
            try:
                results += helper.result()
            except BaseException as err:  # the pool's own (work() raises nothing)
                failed.append((len(items), err))
    if failed:
        raise min(failed, key=lambda f: f[0])[1]
    out: list[_R] = [None] * len(items)  # type: ignore[list-item]
    for i, result in results:
        out[i] = result
    return out

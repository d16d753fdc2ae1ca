"""The thread pools every rewrite shares (parquet_bloom._threads): made once per process, and
made again in a forked child, which inherits the pool objects but not their threads."""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom import _threads, rewrite_bloom_filters
from parquet_bloom.testing import assert_bloom_filters_valid


def test_a_pool_is_made_once_per_process() -> None:
    assert _threads.build_pool() is _threads.build_pool()
    assert _threads.copy_pool() is _threads.copy_pool()
    assert _threads.build_pool() is not _threads.copy_pool()
    assert _threads.BUILD_THREADS >= 2


def _rewrite_in_child(src: str, dst: str) -> None:
    rewrite_bloom_filters(src, dst, columns=["id"])


@pytest.mark.skipif(sys.platform != "linux", reason="fork is the start method under test")
def test_a_forked_child_rewrites_with_pools_of_its_own(tmp_path: Path) -> None:
    # The parent's pools have threads (a rewrite ran); the child's copies of them have none,
    # and work submitted to them would wait forever: the child must make its own.
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"id": np.arange(5000)}), src)
    rewrite_bloom_filters(src, tmp_path / "parent.parquet", columns=["id"])
    parent_pool = _threads.build_pool()
    child = multiprocessing.get_context("fork").Process(
        target=_rewrite_in_child, args=(str(src), str(tmp_path / "child.parquet"))
    )
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child's rewrite did not finish: it waited on the parent's pools")
    assert child.exitcode == 0
    assert_bloom_filters_valid(tmp_path / "child.parquet")
    assert (tmp_path / "child.parquet").read_bytes() == (tmp_path / "parent.parquet").read_bytes()
    assert _threads.build_pool() is parent_pool


def test_shared_map_gives_each_result_in_order_with_the_calling_thread_working_too() -> None:
    import threading

    pool = _threads.prune_pool(3)
    seen: set[str] = set()

    def square(x: int) -> int:
        seen.add(threading.current_thread().name)
        threading.Event().wait(0.001)  # let the other threads take items too
        return x * x

    assert _threads.shared_map(square, list(range(200)), pool, 3) == [x * x for x in range(200)]
    assert threading.current_thread().name in seen and len(seen) >= 2
    assert _threads.shared_map(square, [], pool, 3) == []
    assert _threads.shared_map(square, [7], pool, 3) == [49]


def test_shared_map_raises_the_first_error_once_every_thread_stopped() -> None:
    pool = _threads.prune_pool(2)
    calls: list[int] = []

    def fail_at_five(x: int) -> int:
        calls.append(x)
        if x == 5:
            raise ValueError("five")
        return x

    with pytest.raises(ValueError, match="five"):
        _threads.shared_map(fail_at_five, list(range(1000)), pool, 2)
    assert len(calls) < 1000  # the threads stopped taking items after the error
    assert not pool._work_queue.qsize()  # nothing of it left queued


def test_shared_map_raises_the_error_of_the_first_item_that_failed_not_the_first_in_time() -> None:
    """As ``[function(item) for item in items]`` would: the error of the lowest item that
    failed (every item before it was taken, so done), whichever thread failed first."""
    import threading

    pool = _threads.prune_pool(3)
    two_failing, one_failing = threading.Event(), threading.Event()

    def item(x: int) -> int:
        if x == 2:
            two_failing.set()
            raise ValueError("two")
        if x == 1:
            two_failing.wait(10)
            threading.Event().wait(0.05)  # "two" recorded first
            one_failing.set()
            raise ValueError("one")
        one_failing.wait(10)
        threading.Event().wait(0.05)
        return x

    for _ in range(3):
        with pytest.raises(ValueError, match="one"):
            _threads.shared_map(item, [0, 1, 2], pool, 3)
        two_failing.clear(), one_failing.clear()

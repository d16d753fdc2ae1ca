"""parquet_bloom.spark._slices without Spark: the map, reduce and driver steps of the
distributed build run in this process over Arrow batches, and must give, byte for byte, the
filter a local SplitBlockBloomFilter builds from the same values, however the values are
split into tasks, whether tasks send hashes or bits, and however the filter is sliced."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquet_bloom._sbbf import SplitBlockBloomFilter
from parquet_bloom.spark import _slices as slices
from parquet_bloom.spark._types import SparkLayout

LAYOUT = SparkLayout("INT96", False)


def plans_with(
    monkeypatch: pytest.MonkeyPatch, sizes: list[int], slice_bytes: int, hash_factor: float
) -> list[slices.SlicePlan]:
    monkeypatch.setattr(slices, "SLICE_BYTES", slice_bytes)
    monkeypatch.setattr(slices, "HASH_BYTES_PER_FILTER_BYTE", hash_factor)
    return slices.slice_plans(sizes)


def map_rows(task: list[pa.RecordBatch], plans: list[slices.SlicePlan]) -> list[pa.RecordBatch]:
    rows = list(slices.partition_slices(iter(task), plans, LAYOUT))
    for batch in rows:
        assert batch.schema == pa.schema(
            [("slice", pa.int32()), ("hashes", pa.bool_()), ("payload", pa.binary())]
        )
    return rows


def build(
    tasks: list[list[pa.RecordBatch]], plans: list[slices.SlicePlan], reducers: int = 3
) -> tuple[list[SplitBlockBloomFilter], list[pa.RecordBatch]]:
    """The three steps, shuffling by hand: each map task's rows go to reducer ``slice %
    reducers`` (as repartitionById sends them); returns the filters and what the driver got."""
    shuffled: list[list[pa.RecordBatch]] = [[] for _ in range(reducers)]
    for task in tasks:
        for rows in map_rows(task, plans):
            keys = np.asarray(rows["slice"].to_pylist())
            for r in range(reducers):
                if (keys % reducers == r).any():
                    shuffled[r].append(rows.filter(pa.array(keys % reducers == r)))
    received = [batch for part in shuffled for batch in slices.or_slices(iter(part), plans)]
    return slices.assemble(list(received), plans), received


def batches_of(values: pa.Array, rows_per_batch: int) -> list[pa.RecordBatch]:
    return [
        pa.RecordBatch.from_arrays([values.slice(start, rows_per_batch)], names=["c0"])
        for start in range(0, len(values), rows_per_batch)
    ]


def local(values: pa.Array, num_bytes: int, physical_type: str) -> SplitBlockBloomFilter:
    bloom_filter = SplitBlockBloomFilter(num_bytes)
    bloom_filter.insert(values, physical_type)  # nulls skipped
    return bloom_filter


def longs(n: int, seed: int = 3) -> pa.Array:
    rng = np.random.default_rng(seed)
    values = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64, endpoint=True)
    return pa.array(values, mask=np.arange(n) % 7 == 3)


def test_slice_plans_number_the_slices_of_every_column(monkeypatch: pytest.MonkeyPatch) -> None:
    plans = plans_with(monkeypatch, [32, 4096, 1024], 1024, 1.0)
    assert [(p.num_slices, p.slice_bytes, p.first) for p in plans] == [
        (1, 32, 0),
        (4, 1024, 1),
        (1, 1024, 5),
    ]
    assert [p.max_hashes for p in plans] == [4, 512, 128]  # as many hash bytes as filter bytes


@settings(max_examples=60, deadline=None)
@given(
    log_blocks=st.integers(0, 10),
    slice_bits=st.integers(0, 10),
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 3000),
)
def test_a_slice_is_the_filter_of_its_hashes(
    log_blocks: int, slice_bits: int, seed: int, n: int
) -> None:
    slice_bits = min(slice_bits, log_blocks)
    hashes = np.random.default_rng(seed).integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    whole = SplitBlockBloomFilter(32 << log_blocks)
    whole.insert_hashes(hashes)
    slice_bytes = whole.num_bytes >> slice_bits
    top = hashes >> np.uint64(64 - slice_bits) if slice_bits else np.zeros_like(hashes)
    for s in range(1 << slice_bits):
        part = SplitBlockBloomFilter(slice_bytes)
        part.insert_hashes(slices.in_slice(hashes[top == s], slice_bits))
        assert part.to_bytes() == whole.to_bytes()[s * slice_bytes : (s + 1) * slice_bytes]


@pytest.mark.parametrize("hash_factor", [0.0, 1.0, 1e9], ids=["bits", "either", "hashes"])
@pytest.mark.parametrize("slice_bytes", [32, 512, 1 << 20])
def test_skewed_tasks_combine_to_the_local_filter(
    monkeypatch: pytest.MonkeyPatch, hash_factor: float, slice_bytes: int
) -> None:
    values = longs(5000)
    # One task with most of the values, in several batches; empty tasks (an empty batch, no
    # batch at all); a task with one value; a task with only nulls.
    tasks = [
        batches_of(values.slice(0, 3500), 1000),
        batches_of(values.slice(3500, 0), 1),
        [],
        batches_of(values.slice(3500, 1), 1),
        batches_of(values.slice(3501, 1499), 700),
        batches_of(pa.nulls(10, pa.int64()), 4),
    ]
    plans = plans_with(monkeypatch, [4096], slice_bytes, hash_factor)
    (built,), received = build(tasks, plans)
    assert built == local(values, 4096, "INT64")
    keys = [k for batch in received for k in batch["slice"].to_pylist()]
    assert sorted(keys) == list(range(plans[0].num_slices))  # each slice received once
    assert sum(len(b) for batch in received for b in batch["bitset"].to_pylist()) == 4096


def test_columns_of_different_sizes_in_one_build(monkeypatch: pytest.MonkeyPatch) -> None:
    values = longs(3000, seed=5)
    strings = pa.array([f"s{i % 1000}" if i % 11 else None for i in range(3000)])
    # Per task, the 64-byte filter's hashes outgrow it (bits) while the 64 KiB one's do not.
    plans = plans_with(monkeypatch, [64, 1 << 16, 2048], 1024, 1.0)
    tasks = [
        [
            pa.RecordBatch.from_arrays(
                [values.slice(lo, 500), strings.slice(lo, 500), values.slice(lo, 500)],
                names=["c0", "c1", "c2"],
            )
        ]
        for lo in range(0, 3000, 500)
    ]
    sent = {
        key: hashes
        for rows in map_rows(tasks[0], plans)
        for key, hashes in zip(rows["slice"].to_pylist(), rows["hashes"].to_pylist(), strict=True)
    }
    assert sent[0] is False  # the 64-byte filter: slice 0
    assert {sent[key] for key in sent if 1 <= key <= 64} == {True}  # the 64 KiB one: 1-64
    assert {sent[key] for key in sent if key > 64} == {False}  # the 2 KiB one: 65 and 66
    built, _ = build(tasks, plans, reducers=4)
    assert built == [
        local(values, 64, "INT64"),
        local(strings, 1 << 16, "BYTE_ARRAY"),
        local(values, 2048, "INT64"),
    ]


def test_a_task_sends_hashes_while_they_are_smaller_than_its_filter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plans = plans_with(monkeypatch, [4096], 128, 1.0)  # 32 slices; 512 hashes fit
    values = longs(100)
    (few,) = map_rows(batches_of(values, 40), plans)
    assert set(few["hashes"].to_pylist()) == {True}
    assert sum(len(p) for p in few["payload"].to_pylist()) == 8 * (100 - values.null_count)
    (many,) = map_rows(batches_of(longs(2000), 300), plans)  # 1714 hashes
    assert many["hashes"].to_pylist() == [False] * 32


def test_a_task_in_bits_sends_only_the_slices_it_set(monkeypatch: pytest.MonkeyPatch) -> None:
    plans = plans_with(monkeypatch, [1 << 16], 1024, 0.0)  # 64 slices, always bits
    (rows,) = map_rows(batches_of(pa.array([1, 2, 3], pa.int64()), 3), plans)
    assert rows["hashes"].to_pylist() == [False] * rows.num_rows
    assert 1 <= rows.num_rows <= 3
    assert [len(p) for p in rows["payload"].to_pylist()] == [1024] * rows.num_rows
    whole = local(pa.array([1, 2, 3], pa.int64()), 1 << 16, "INT64").to_bytes()
    for key, payload in zip(rows["slice"].to_pylist(), rows["payload"].to_pylist(), strict=True):
        assert payload == whole[key * 1024 : (key + 1) * 1024]
    unsent = set(range(64)) - set(rows["slice"].to_pylist())
    assert all(whole[s * 1024 : (s + 1) * 1024] == bytes(1024) for s in unsent)


def test_assemble_reads_each_batch_once_and_leaves_missing_slices_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plans = plans_with(monkeypatch, [256, 32], 64, 1.0)  # slices 0-3, then 4
    ones = np.full(8, 0xFFFFFFFF_FFFFFFFF, np.uint64)
    received = [
        pa.RecordBatch.from_arrays(
            [pa.array([2, 4], pa.int32()), slices.binary_array([64, 32], [ones, ones[:4]])],
            names=["slice", "bitset"],
        )
    ]
    first, second = slices.assemble(received, plans)
    assert received == []
    assert first.to_bytes() == bytes(128) + b"\xff" * 64 + bytes(64)
    assert second.to_bytes() == b"\xff" * 32
    assert slices.assemble([], plans) == [SplitBlockBloomFilter(256), SplitBlockBloomFilter(32)]

"""Partial filters of a Spark build, combined on the executors by a reduce-scatter.

Every filter is cut into slices, ranges of whole blocks of :data:`SLICE_BYTES`: since a hash's
block is the top bits of its high half (the filter's size is a power of two), slice ``s`` of a
filter with ``2**k`` slices holds exactly the hashes whose top ``k`` bits are ``s``, and a slice
is itself a filter, of the slice's size, of those hashes with the ``k`` bits taken out
(:func:`in_slice`). So the build runs in three steps:

1. Each map task (:func:`partition_slices`) hashes its values and sends, per slice, either the
   slice's hashes (while the task has fewer hash bytes than the filter has bytes) or the slice's
   bits, skipping the slices it has nothing for: at most ``min(8 x its values, the filter)``
   bytes a column.
2. Spark shuffles the rows by slice index, and each reduce task (:func:`or_slices`) ORs the bits
   and inserts the hashes of the slices it was given into one bitset per slice. With as many
   map tasks as reduce tasks, a reduce task receives at most one filter's bytes.
3. The driver receives each slice once and lays them side by side (:func:`assemble`).

The result is bit for bit the filter a local :class:`SplitBlockBloomFilter` of that size holds
after inserting the same values: OR-ing bitsets and inserting hashes commute, and every value's
bits land in the one slice its hash names. docs/spark.md gives the figures behind each choice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from parquet_bloom._memory import release_freed_memory
from parquet_bloom._sbbf import SplitBlockBloomFilter, group_by_page
from parquet_bloom.spark._types import SparkLayout, arrow_hashes

if TYPE_CHECKING:
    import numpy.typing as npt

# The size of the slices filters are cut into, and so of a unit of work of the reduce tasks.
# Larger filters have more slices (a 32 MiB filter has 32), smaller ones are one slice.
SLICE_BYTES = 1 << 20

# A map task sends its hashes (8 bytes each) while they take fewer than this many times the
# filter's bytes, and the filter's bits otherwise. At 1 a task never ships more bytes than the
# smaller of the two.
HASH_BYTES_PER_FILTER_BYTE = 1.0

# Hashes gathered from Arrow batches before one insert: inserting into a large filter has a
# fixed cost per call (see SplitBlockBloomFilter's dense path), which 4 Mi hashes amortise.
INSERT_BATCH = 1 << 22

# The rows map tasks send (one per column and slice they have values for) and reduce tasks
# return (one per slice that any value reached).
SLICES_SCHEMA = "slice int, hashes boolean, payload binary"
MERGED_SCHEMA = "slice int, bitset binary"

_HASH_BYTES = 8
_LOW_HALF = np.uint64(0xFFFFFFFF)
_HIGH_HALF = np.uint64(0xFFFFFFFF_00000000)


@dataclass(frozen=True)
class SlicePlan:
    """How one column's filter is cut: ``2**slice_bits`` slices of ``slice_bytes``, known to the
    shuffle as ``first``, ``first + 1``, ... (one numbering for all the columns of a build)."""

    num_bytes: int
    slice_bits: int
    first: int
    max_hashes: int  # a map task holding more hashes than this switches to bits

    @property
    def num_slices(self) -> int:
        return 1 << self.slice_bits

    @property
    def slice_bytes(self) -> int:
        return self.num_bytes >> self.slice_bits


def slice_plans(sizes: Sequence[int]) -> list[SlicePlan]:
    """The plans of filters of ``sizes`` bytes, numbered one after another."""
    plans = []
    first = 0
    for num_bytes in sizes:
        num_slices = max(num_bytes // SLICE_BYTES, 1)
        max_hashes = int(num_bytes * HASH_BYTES_PER_FILTER_BYTE) // _HASH_BYTES
        plans.append(SlicePlan(num_bytes, num_slices.bit_length() - 1, first, max_hashes))
        first += num_slices
    return plans


def slice_range_partition(reducers: int, num_slices: int) -> Any:
    """The reduce task of each row of SLICES_SCHEMA: ``slice * reducers // num_slices``, so that
    each task ORs a range of slices. The driver receives the tasks' slices in order, and fills
    its filters front to back: with slices dealt round-robin instead, the first task's would
    touch every 2 MiB of the filters, which transparent huge pages then make resident whole,
    before the batches that filled them are given back."""
    from pyspark.sql import functions as F

    return F.expr(f"cast(slice * {reducers} div {num_slices} as int)")


def in_slice(hashes: npt.NDArray[np.uint64], slice_bits: int) -> npt.NDArray[np.uint64]:
    """``hashes`` (changed in place) as the filter of their slice sees them: the high half
    without its top ``slice_bits`` bits, which name the slice, so that the bits after them name
    the block within the slice; the low half, which picks the bits in a block, unchanged."""
    if slice_bits:
        low = hashes & _LOW_HALF
        hashes <<= np.uint64(slice_bits)
        hashes &= _HIGH_HALF
        hashes |= low
    return hashes


class PartialFilter:
    """Map side: one column's values in one task, kept as hashes while they are few, as a
    filter of the full size once they are not, and sent as slices (:meth:`batches`)."""

    def __init__(self, plan: SlicePlan) -> None:
        self.plan = plan
        self.hashes: list[npt.NDArray[np.uint64]] = []
        self.num_hashes = 0
        self.filter: SplitBlockBloomFilter | None = None

    def add(self, hashes: npt.NDArray[np.uint64]) -> None:
        if self.filter is not None:
            self.filter.insert_hashes(hashes)
            return
        self.hashes.append(hashes)
        self.num_hashes += hashes.size
        if self.num_hashes > self.plan.max_hashes:
            self.filter = SplitBlockBloomFilter(self.plan.num_bytes)
            for held in self.hashes:
                self.filter.insert_hashes(held)
            self.hashes = []

    def batches(self) -> Iterator[pa.RecordBatch]:
        plan = self.plan
        if self.filter is not None:
            words = self.filter.words.reshape(plan.num_slices, -1)
            used = np.flatnonzero(words.any(axis=1)).tolist()
            parts = [words] if len(used) == plan.num_slices else [words[s] for s in used]
            yield _slice_rows(plan, used, False, [plan.slice_bytes] * len(used), parts)
        elif self.hashes:
            held = self.hashes[0] if len(self.hashes) == 1 else np.concatenate(self.hashes)
            self.hashes = []
            if plan.slice_bits:
                held, bounds = group_by_page(held, plan.slice_bits)
                in_slice(held, plan.slice_bits)
            else:
                bounds = [0, held.size]
            counts = np.diff(bounds)
            used = np.flatnonzero(counts).tolist()
            lengths = (counts[used] * _HASH_BYTES).tolist()
            yield _slice_rows(plan, used, True, lengths, [held])


def _slice_rows(
    plan: SlicePlan,
    used: list[int],
    hashes: bool,
    lengths: list[int],
    parts: Sequence[npt.NDArray[Any]],
) -> pa.RecordBatch:
    keys = pa.array([plan.first + s for s in used], pa.int32())
    kinds = pa.array([hashes] * len(used), pa.bool_())
    payloads = binary_array(lengths, parts)
    return pa.RecordBatch.from_arrays([keys, kinds, payloads], names=["slice", "hashes", "payload"])


def binary_array(lengths: Sequence[int], parts: Sequence[npt.NDArray[Any]]) -> pa.Array:
    """A binary array of values of ``lengths`` bytes, ``parts`` laid end to end (not copied when
    there is one part)."""
    data = parts[0] if len(parts) == 1 else np.concatenate([p.reshape(-1) for p in parts])
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def partition_slices(
    batches: Iterator[Any], plans: Sequence[SlicePlan], layout: SparkLayout
) -> Iterator[pa.RecordBatch]:
    """Map side: a task's Arrow batches (one column per plan) -> its rows of SLICES_SCHEMA."""
    partials = [PartialFilter(plan) for plan in plans]
    pending: list[list[npt.NDArray[np.uint64]]] = [[] for _ in plans]
    num_pending = 0

    def flush() -> None:
        for partial, hashes in zip(partials, pending, strict=True):
            if hashes:
                partial.add(hashes[0] if len(hashes) == 1 else np.concatenate(hashes))
                hashes.clear()

    for batch in batches:
        for i in range(batch.num_columns):
            hashes = arrow_hashes(batch.column(i), layout)
            if hashes.size:
                pending[i].append(hashes)
                num_pending += hashes.size
        if num_pending >= INSERT_BATCH:
            flush()
            num_pending = 0
    flush()
    for partial in partials:
        yield from partial.batches()


class _MergedSlice:
    """Reduce side: one slice's bits so far, and hashes not inserted yet."""

    def __init__(self, num_bytes: int) -> None:
        self.num_bytes = num_bytes
        self.bits: npt.NDArray[np.uint64] | None = None
        self.filter: SplitBlockBloomFilter | None = None
        self.hashes: list[npt.NDArray[np.uint64]] = []
        self.num_hashes = 0

    def add_bits(self, bits: npt.NDArray[np.uint64]) -> None:
        if self.bits is None:
            self.bits = bits.copy()
        else:
            np.bitwise_or(self.bits, bits, out=self.bits)

    def add_hashes(self, hashes: npt.NDArray[np.uint64]) -> None:
        # Inserted a slice's worth at a time: an insert costs about a pass over the filter on
        # numpy alone (its dense path), however few the hashes.
        self.hashes.append(hashes)
        self.num_hashes += hashes.size
        if self.num_hashes * _HASH_BYTES >= self.num_bytes:
            self._insert()

    def _insert(self) -> None:
        if self.filter is None:
            self.filter = SplitBlockBloomFilter(self.num_bytes)
        for hashes in self.hashes:
            self.filter.insert_hashes(hashes)
        self.hashes = []
        self.num_hashes = 0

    def bitset(self) -> npt.NDArray[np.uint64]:
        if self.hashes:
            self._insert()
        if self.filter is None:
            assert self.bits is not None  # a slice exists because a row reached it
            return self.bits
        words = self.filter.words.reshape(-1).view(np.uint64)
        return words if self.bits is None else np.bitwise_or(self.bits, words)


def or_slices(batches: Iterator[Any], plans: Sequence[SlicePlan]) -> Iterator[pa.RecordBatch]:
    """Reduce side: rows of SLICES_SCHEMA -> one row of MERGED_SCHEMA per slice among them."""
    slice_bytes = [plan.slice_bytes for plan in plans for _ in range(plan.num_slices)]
    merged: dict[int, _MergedSlice] = {}
    for rows in batches:
        keys = rows.column(0).to_pylist()
        kinds = rows.column(1).to_pylist()
        for key, is_hashes, payload in zip(keys, kinds, rows.column(2), strict=True):
            state = merged.get(key)
            if state is None:
                state = merged[key] = _MergedSlice(slice_bytes[key])
            values = np.frombuffer(payload.as_buffer(), dtype=np.uint64)
            if is_hashes:
                state.add_hashes(values)
            else:
                state.add_bits(values)
    if merged:
        done = sorted(merged)
        parts = [merged.pop(key).bitset() for key in done]
        bitsets = binary_array([part.nbytes for part in parts], parts)
        yield pa.RecordBatch.from_arrays(
            [pa.array(done, pa.int32()), bitsets], names=["slice", "bitset"]
        )


def assemble(
    batches: Iterable[pa.RecordBatch], plans: Sequence[SlicePlan]
) -> list[SplitBlockBloomFilter]:
    """Driver side: the rows of MERGED_SCHEMA -> one filter per plan. A slice no row names is
    empty. ``batches`` may be a list, which is emptied as its batches are read.

    The slices are copied into the filters' own words, which take memory only as they are
    written (zeroed pages come from the OS as they are touched), while each batch is given back
    once copied: the driver holds about one copy of the filters' bytes, plus a batch.
    """
    owner = [(i, s) for i, plan in enumerate(plans) for s in range(plan.num_slices)]
    filters = [SplitBlockBloomFilter(plan.num_bytes) for plan in plans]
    bitsets = [f._words.reshape(-1).view(np.uint8) for f in filters]  # little-endian words
    pending = batches if isinstance(batches, list) else list(batches)
    pending.reverse()
    while pending:
        _copy_slices(pending.pop(), owner, plans, bitsets)
        # The allocators keep what a batch held, for reuse: give it back now, or it would
        # count as a second copy.
        release_freed_memory()
    return filters


def _copy_slices(
    batch: pa.RecordBatch,
    owner: list[tuple[int, int]],
    plans: Sequence[SlicePlan],
    bitsets: list[npt.NDArray[np.uint8]],
) -> None:
    for key, bitset in zip(batch.column(0).to_pylist(), batch.column(1), strict=True):
        i, s = owner[key]
        size = plans[i].slice_bytes
        bitsets[i][s * size : (s + 1) * size] = np.frombuffer(bitset.as_buffer(), np.uint8)

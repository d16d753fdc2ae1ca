"""Building the new filters: one per chosen column chunk, sized for the chunk, on the build threads.

A chunk's values are hashed as the file stores them, straight from its pages
(:mod:`parquet_bloom._pages`, reading through the rewrite's one
:class:`~parquet_bloom._io.source.ByteSource`); what that module does not read is read with
pyarrow, a chunk at a time (:mod:`parquet_bloom._arrow_chunks`). The filter is sized for the
chunk's own distinct count, which is mostly estimated from a filter built at a size the count
cannot exceed and folded down (:func:`chunk_filter`); counted exactly only where the estimate
cannot tell two sizes apart. Memory stays bounded by one chunk's hashes per thread.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from concurrent.futures import Future, wait
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from parquet_bloom import _arrow_chunks as arrow_chunks
from parquet_bloom import _format as fmt
from parquet_bloom import _pages as pages
from parquet_bloom._io.source import ByteSource
from parquet_bloom._memory import release_freed_memory
from parquet_bloom._sbbf import (
    BITS_PER_BLOCK,
    BYTES_PER_BLOCK,
    MAX_NUM_BYTES,
    MIN_NUM_BYTES,
    SplitBlockBloomFilter,
    bits_per_value,
    optimal_num_bytes,
)
from parquet_bloom._threads import BUILD_THREADS, build_pool
from parquet_bloom.errors import BloomFilterError

if TYPE_CHECKING:
    from parquet_bloom._rewrite.encryption import EncryptedRewrite

__all__ = [
    "BUILD_THREADS",
    "ESTIMATE_FPP",
    "FilterBuilds",
    "Ndv",
    "Sizing",
    "check_sizing",
    "chunk_filter",
    "count_distinct",
    "estimate_margin",
    "ndv_bounds",
]

# Hashes inserted per call (see _insert), and at least this many per block of the filter. An
# insert's temporaries are 9-14 bytes a hash, so this bounds them (14 MiB); fewer, larger calls
# mean fewer, larger numpy passes, which is what lets the two build threads overlap (they hand
# the GIL over between passes; docs/performance.md, the rewrite).
INSERT_PART_SIZE = 1024 * 1024
_HASHES_PER_BLOCK_PER_INSERT = 4

# ndv="exact" without counting (see chunk_filter): the filter the count is estimated from is
# built for every value being distinct at least at this rate, i.e. about 1.2 bits per value in
# each lane, where linear counting is accurate (t = n / m <= 0.83; Whang et al. 1990).
ESTIMATE_FPP = 0.01
# Standard deviations of the estimate allowed before it is trusted to pick the size. The normal
# tail beyond 12 sigma is below 1e-32; the bound on the deviation is itself an overestimate.
_ESTIMATE_SIGMAS = 12.0
# Rounds of ndv_bounds' fixed-point search: each closes most of the remaining gap.
_MARGIN_ROUNDS = 16
# Below this many values, counting exactly (a sort) costs less than a millisecond: no estimate.
_ESTIMATE_MIN_VALUES = 16 * 1024
# Flavors whose size never decreases as the NDV grows, so that two NDVs of the same size
# bracket only NDVs of that size. parquet-java's rounding (`& ~BITS_PER_BLOCK`, see
# sizing._parquet_java) is not monotone: its chunks are always counted exactly.
_MONOTONE_FLAVORS = frozenset({None, "spec", "arrow-cpp", "arrow-rs", "duckdb", "clickhouse"})


Ndv = int | Literal["exact"]


@dataclass(frozen=True)
class Sizing:
    """How big each chunk's filter is to be (checked options: see :func:`check_sizing`)."""

    fpp: float
    ndv: Ndv
    num_bytes: int | None
    flavor: str | None

    @property
    def needs_ndv(self) -> bool:
        return self.num_bytes is None and self.ndv == "exact"

    def num_bytes_for(self, chunk_ndv: int | None) -> int:
        if self.num_bytes is not None:
            return self.num_bytes
        ndv = self.ndv if isinstance(self.ndv, int) else chunk_ndv
        assert ndv is not None  # counted whenever needs_ndv
        if self.flavor is None:
            return optimal_num_bytes(ndv, self.fpp)
        from parquet_bloom import _sizing as sizing  # only flavored sizing needs it

        # DuckDB's rounding has no upper bound; readers refuse more than MAX_NUM_BYTES.
        num_bytes = min(int(sizing.expected_num_bytes(ndv, self.fpp, self.flavor)), MAX_NUM_BYTES)
        if not (num_bytes >= MIN_NUM_BYTES and num_bytes & (num_bytes - 1) == 0):
            raise ValueError(
                f"flavor {self.flavor!r} sizes {ndv} values at fpp {self.fpp} as {num_bytes} "
                "bytes, which is not a filter size (a power of two from "
                f"{MIN_NUM_BYTES} to {MAX_NUM_BYTES})"
            )
        return num_bytes


def check_sizing(fpp: float, ndv: Ndv, num_bytes: int | None, flavor: str | None) -> Sizing:
    """The sizing the options ask for; raises for options no chunk could take."""
    if isinstance(fpp, bool) or not isinstance(fpp, int | float | np.floating):
        raise TypeError(f"fpp must be a float, not {type(fpp).__name__}")
    bits_per_value(float(fpp))  # raises ValueError unless 0 < fpp < 1
    if ndv != "exact":
        if isinstance(ndv, bool) or not isinstance(ndv, int | np.integer):
            raise TypeError(f'ndv must be "exact" or an int, not {ndv!r}')
        if ndv < 1:
            raise ValueError(
                f"ndv={ndv} sizes every filter for no value at all (32 bytes, whatever the "
                "chunk holds): give the number of distinct values to size for (at least 1), "
                "or leave ndv out to size each chunk for its own count"
            )
        ndv = int(ndv)
        if ndv * bits_per_value(float(fpp)) / 8 > MAX_NUM_BYTES:
            raise ValueError(
                f"ndv={ndv} distinct values at fpp {float(fpp):g} need more than the "
                f"{MAX_NUM_BYTES} bytes a filter may have: give a larger fpp or a smaller ndv"
            )
    if num_bytes is not None:
        if isinstance(num_bytes, bool) or not isinstance(num_bytes, int | np.integer):
            raise TypeError(f"num_bytes must be an int, not {type(num_bytes).__name__}")
        n = int(num_bytes)
        if not (MIN_NUM_BYTES <= n <= MAX_NUM_BYTES and n & (n - 1) == 0):
            raise ValueError(
                f"num_bytes must be a power of two from {MIN_NUM_BYTES} to {MAX_NUM_BYTES}, "
                f"got {num_bytes}"
            )
        if flavor is not None:
            raise ValueError("pass num_bytes or flavor, not both")
        if ndv != "exact" and n < optimal_num_bytes(ndv, float(fpp)):
            raise ValueError(
                f"num_bytes={n} cannot hold ndv={ndv} distinct values at fpp {float(fpp):g}: "
                f"that needs {optimal_num_bytes(ndv, float(fpp))} bytes; give the larger "
                "size, a larger fpp, or num_bytes or ndv alone"
            )
        num_bytes = n
    if flavor is not None and not isinstance(flavor, str):
        raise TypeError(f"flavor must be a string, not {type(flavor).__name__}")
    sizing = Sizing(float(fpp), ndv, num_bytes, flavor)
    if flavor is not None:
        sizing.num_bytes_for(1)  # an unknown flavor fails now, before any work
    return sizing


def count_distinct(hashes: np.ndarray) -> int:
    """The exact number of distinct hashes (sorts ``hashes`` in place)."""
    if hashes.size == 0:
        return 0
    hashes.sort()
    return int(hashes.size - np.count_nonzero(hashes[1:] == hashes[:-1]))


def estimate_margin(ndv: float, num_bytes: int) -> float:
    """How far :meth:`SplitBlockBloomFilter.estimate_ndv` of a ``num_bytes`` filter may, beyond
    doubt, lie from ``ndv``, the true count of distinct hashes inserted.

    Each lane position (word ``i`` of every block) is a linear-counting bitmap of ``m = 32 z``
    bits: a hash sets exactly one of its bits, uniformly (the block from the high half, the bit
    from ``key * SALT[i]``, a bijection of the key). Linear counting of ``n`` values in ``m``
    bits has ``Var(n_hat) ~ m (e^t - t - 1)``, ``t = n / m`` (Whang, Vander-Zanden and Taylor,
    "A linear-time probabilistic counting algorithm", 1990), growing with ``n``; the estimate
    averages the eight lanes, whose variance is at most a single lane's whatever their
    correlation. So take one lane and allow :data:`_ESTIMATE_SIGMAS` standard deviations, plus
    the estimator's bias (about ``(e^t - t - 1) / 2``) and one for rounding.
    """
    m = BITS_PER_BLOCK // 8 * (num_bytes // BYTES_PER_BLOCK)
    t = ndv / m
    excess = math.expm1(t) - t
    return _ESTIMATE_SIGMAS * math.sqrt(m * excess) + excess + 1.0


def ndv_bounds(estimate: float, num_values: int, num_bytes: int) -> tuple[int, int]:
    """The range in which the true NDV lies, beyond doubt, given its estimate from a
    ``num_bytes`` filter of ``num_values`` hashes.

    The margin grows with the true NDV, so it is taken at the top of the range: the smallest
    ``high`` with ``high >= estimate + margin(high)`` (found by iterating; the margin grows like
    a square root, so a few rounds settle it). A larger NDV would put the estimate more than the
    margin below it; a smaller one has a smaller margin.
    """
    high = float(min(estimate, num_values))
    for _ in range(_MARGIN_ROUNDS):
        next_high = min(estimate + estimate_margin(high, num_bytes), num_values)
        settled = next_high - high < 1.0
        high = next_high
        if settled:
            break
    else:
        high = num_values  # did not settle: no upper bound but the hash count
    margin = estimate_margin(high, num_bytes)
    return max(math.floor(estimate - margin), 1), min(math.ceil(high), num_values)


def _insert(bloom_filter: SplitBlockBloomFilter, hashes: np.ndarray) -> None:
    """Insert ``hashes`` a part at a time: on numpy alone (without the compiled kernels, which
    need no temporaries), an insert's temporaries are 9-14 bytes a hash
    (sbbf keeps each hash's key and block as two 32-bit numbers, and groups the hashes by
    filter page for a filter of over 2 MiB), which for a large chunk would be more than its
    hashes (8 bytes each). Each call also unpacks and repacks the filter, so parts hold a few
    hashes per block."""
    part = max(INSERT_PART_SIZE, _HASHES_PER_BLOCK_PER_INSERT * bloom_filter.num_blocks)
    for start in range(0, hashes.size, part):
        bloom_filter.insert_hashes(hashes[start : start + part])


def chunk_filter(
    hashes: np.ndarray, sizing: Sizing, guess: int | None = None
) -> SplitBlockBloomFilter:
    """The filter of ``hashes`` at the size ``sizing`` gives the chunk; may reorder ``hashes``.

    With ``ndv="exact"`` the size depends on the exact count of distinct hashes, which takes a
    sort (70-90 ns a value, more than hashing and inserting together). The count only has to
    choose a power of two, so instead the filter is built at a size that the count cannot
    exceed (sized for every hash being distinct), the count is estimated from that filter's
    fill, and the filter is folded down to the size for the estimate (folding is exact: the
    folded filter is bit for bit the filter built at that size). Only when the estimate lies
    too close to the edge between two sizes for its error to rule out either are the hashes
    counted exactly.

    ``guess`` is a size the chunk's filter probably does not exceed (twice the size of the
    column's previous chunk): built at that size first, a chunk of few distinct values is
    inserted into a filter that fits in cache. If its estimate cannot rule out a larger size,
    the filter is built again at the size that cannot be exceeded.
    """
    if not sizing.needs_ndv:
        bloom_filter = SplitBlockBloomFilter(sizing.num_bytes_for(None))
        _insert(bloom_filter, hashes)
        return bloom_filter
    num_values = int(hashes.size)
    upper: int | None = None
    if num_values >= _ESTIMATE_MIN_VALUES and sizing.flavor in _MONOTONE_FLAVORS:
        with suppress(ValueError):  # a flavor that cannot size this many: count exactly
            upper = max(
                sizing.num_bytes_for(num_values),
                optimal_num_bytes(num_values, ESTIMATE_FPP),
            )
    if upper is None:
        ndv = count_distinct(hashes)
        bloom_filter = SplitBlockBloomFilter(sizing.num_bytes_for(ndv))
        _insert(bloom_filter, hashes)
        return bloom_filter
    sizes = [upper]
    if guess is not None and MIN_NUM_BYTES <= guess < upper:
        sizes.insert(0, guess)
    for size in sizes:
        bloom_filter = SplitBlockBloomFilter(size)
        _insert(bloom_filter, hashes)
        low, high = ndv_bounds(bloom_filter.estimate_ndv(), num_values, size)
        if low <= high and sizing.num_bytes_for(low) == sizing.num_bytes_for(high):
            num_bytes = sizing.num_bytes_for(low)
        elif size == upper or (low <= high and sizing.num_bytes_for(high) <= size):
            num_bytes = sizing.num_bytes_for(count_distinct(hashes))
        else:
            continue  # this filter is too small to tell: build the one that cannot be
        if num_bytes <= size:
            return bloom_filter.fold(num_bytes) if num_bytes < size else bloom_filter
    raise AssertionError("a filter of the size for every hash distinct holds them all")


# Chunks of fewer values than this leave freed memory with the allocators (see
# release_freed_memory): several such chunks' worth is a few megabytes, and handing it back
# after each small file only makes the next one fault it in again (a sixth of a table
# rewrite's CPU time over 200 files of 125,000 rows; docs/performance.md, the table rewrite).
RELEASE_MIN_VALUES = 1 << 20


# Chunks of fewer values are built in the thread that asks for their filter, not on the build
# threads (FilterBuilds.__enter__): measured on 10,000 chunks of 1,000 values, the threaded
# builds took twice the CPU of the same work on one thread, whose switches between them and the
# writing thread outweighed their parallelism.
INLINE_MAX_VALUES = 4096


class FilterBuilds:
    """Builds one filter per target chunk, sized for the chunk, with every value in it; use as
    a context manager and take the filters with :meth:`result`, in order.

    Chunks are built on the process's BUILD_THREADS build threads, shared by every rewrite
    (:mod:`parquet_bloom._threads`), each reading, hashing and inserting a whole chunk (numpy,
    pyarrow, the compiled loops and the file reads release the GIL), so at most that many
    chunks are hashed at once (each thread that built one of this file's chunks keeps its hash
    buffer for the next, until the file is done). A chunk's values are hashed from its pages
    (:mod:`parquet_bloom._pages`) or, for what that module does not read, through pyarrow, one
    chunk at a time: pyarrow's decoded batches are what memory is spent on, and two in flight
    would double it. Row groups tend to look alike, so each chunk's filter is first tried at
    twice the size of its column's last one (see :func:`chunk_filter`).
    """

    def __init__(
        self,
        source: ByteSource,
        targets: Sequence[fmt.ColumnChunkInfo],
        leaves: Sequence[fmt.SchemaLeaf],
        md: Any,
        sizing: Sizing,
        encrypted: EncryptedRewrite | None = None,
        arrow_decryption: Any | None = None,
    ) -> None:
        """``encrypted``: an encrypted file's rewrite, which hashes its encrypted chunks from
        their pages decrypted; ``arrow_decryption``: pyarrow's decryption properties, for the
        plaintext chunks of a file with an encrypted footer that only pyarrow reads."""
        self._source = source
        self._encrypted = encrypted
        # The encrypted chunks, by (row group, column index): the rewrite's own dict, asked
        # directly for each chunk built.
        self._encrypted_chunks = {} if encrypted is None else encrypted.chunks
        self._targets = targets
        self._leaves = leaves
        self._md = md
        self._sizing = sizing
        self._sizes: dict[int, int] = {}  # the size of each column's last filter
        self._arrow_columns: set[int] = set()  # columns with pages that only pyarrow reads
        self._arrow_lock = threading.Lock()
        # pyarrow parses the footer again: it opens the file only when a chunk needs it.
        byte_arrays = sorted({c.path for c in targets if c.physical_type == "BYTE_ARRAY"})
        self._arrow_reader = arrow_chunks.ChunkReader(source, byte_arrays, arrow_decryption)
        # Each thread's hashes buffer, reused from chunk to chunk: a fresh one of megabytes for
        # every chunk costs page faults, and freed ones linger in each thread's malloc arena.
        self._scratch = threading.local()
        self._release = any(c.num_values >= RELEASE_MIN_VALUES for c in targets)
        self._futures: dict[tuple[int, int], Future[SplitBlockBloomFilter]] = {}
        self._submitted: list[Future[SplitBlockBloomFilter]] = []
        self._inline: dict[tuple[int, int], fmt.ColumnChunkInfo] = {}  # built when asked for

    def __enter__(self) -> FilterBuilds:
        # All at once: a chunk waiting for a thread holds nothing, a finished one its filter.
        # A small chunk is built where its filter is asked for instead: its build is mostly
        # Python between short calls that release the GIL, and build threads handing the GIL
        # to each other (and to the thread writing) at each of those cost more than they ran
        # in parallel (docs/performance.md, "the encrypted rewrite's own costs").
        pool = build_pool()
        for chunk in self._targets:
            key = (chunk.row_group, chunk.column_index)
            if chunk.num_values < INLINE_MAX_VALUES:
                self._inline[key] = chunk
                continue
            future = pool.submit(self._build, chunk)
            self._futures[key] = future
            self._submitted.append(future)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        # On an error, start nothing more; either way, wait for the builds running (they read
        # the source, which is closed next).
        for future in self._submitted:
            future.cancel()
        wait(self._submitted)
        self._arrow_reader.close()
        if self._release:
            release_freed_memory()

    def __contains__(self, key: tuple[int, int]) -> bool:
        return key in self._futures or key in self._inline

    def peek(self, key: tuple[int, int]) -> SplitBlockBloomFilter:
        """The filter of the chunk at (row group, column index), once built, kept for
        :meth:`result`."""
        chunk = self._inline.get(key)
        if chunk is not None:  # built here, now, and kept as a done future
            done: Future[SplitBlockBloomFilter] = Future()
            done.set_result(self._build(chunk))
            del self._inline[key]
            self._futures[key] = done
        return self._futures[key].result()

    def result(self, key: tuple[int, int]) -> SplitBlockBloomFilter:
        """The filter of the chunk at (row group, column index), once built (then forgotten
        here, so that a filter written out can be freed)."""
        chunk = self._inline.pop(key, None)
        if chunk is not None:
            return self._build(chunk)
        return self._futures.pop(key).result()

    def _build(self, chunk: fmt.ColumnChunkInfo) -> SplitBlockBloomFilter:
        meta = self._md.row_groups[chunk.row_group].columns[chunk.column_index].meta_data
        buffer = getattr(self._scratch, "hashes", None)
        try:
            hashes = None
            key = (chunk.row_group, chunk.column_index)
            if key in self._encrypted_chunks:
                assert self._encrypted is not None
                leaf = self._leaves[chunk.column_index]
                hashes = self._encrypted.chunk_hashes(self._source, meta, leaf, key, buffer)
            elif chunk.column_index not in self._arrow_columns:
                hashes = self._hashes_from_pages(chunk, meta, buffer)
            if hashes is None:
                hashes = self._hashes_with_arrow(chunk, meta, buffer)
            if hashes.base is not buffer:  # a larger buffer: keep it instead
                self._scratch.hashes = hashes.base
            previous = self._sizes.get(chunk.column_index)
            guess = None if previous is None else 2 * previous
            bloom_filter = chunk_filter(hashes, self._sizing, guess)
        except BloomFilterError as err:
            raise err.located(
                source=self._source.name, row_group=chunk.row_group, column=chunk.path
            ) from err.__cause__
        self._sizes[chunk.column_index] = bloom_filter.num_bytes
        return bloom_filter

    def _hashes_from_pages(
        self, chunk: fmt.ColumnChunkInfo, meta: Any, buffer: np.ndarray | None
    ) -> np.ndarray | None:
        try:
            return pages.chunk_hashes(self._source, meta, self._leaves[chunk.column_index], buffer)
        except pages.NeedsArrow:
            self._arrow_columns.add(chunk.column_index)  # its other chunks likely too
            return None

    def _hashes_with_arrow(
        self, chunk: fmt.ColumnChunkInfo, meta: Any, buffer: np.ndarray | None
    ) -> np.ndarray:
        with self._arrow_lock:
            leaf = self._leaves[chunk.column_index]
            hashes = arrow_chunks.chunk_hashes(self._arrow_reader, chunk, leaf, meta, buffer)
            if chunk.num_values >= RELEASE_MIN_VALUES:
                release_freed_memory()  # the batches' buffers
        return hashes

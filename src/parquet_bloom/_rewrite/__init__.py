"""Add, resize and remove the Bloom filters of an existing Parquet file without re-encoding it.

Most Parquet files were written without Bloom filters, or with filters of the wrong size (a
1 MiB filter on a chunk of 300 values; one sized for a million values on a chunk of fifty
million). Rewriting the data with another writer fixes that at the price of decoding and
re-encoding every page. Here the pages stay as they are, byte for byte; only the filters and
the footer change:

1. The footer is decoded with every field (``format.decode_file_metadata(full=True)``) and must
   re-encode to exactly its own bytes: a field our parquet.thrift does not know would otherwise
   be dropped silently, so such a footer is refused unless the caller passes ``force=True``.
2. Each chosen column chunk's values are hashed as the file stores them, straight from its
   pages (:mod:`parquet_bloom._pages`; what that module does not read, pyarrow reads, a chunk at
   a time, for :func:`parquet_bloom._logical.column_hashes`), and a filter is sized for the
   chunk's own distinct count. Chunks are built on two threads; memory stays bounded by a
   chunk's hashes per thread.
3. The new file is the old one minus the old filters' byte ranges (wherever the writer put them:
   arrow-rs after each row group, Arrow C++ between the data and the page index, DuckDB before
   the footer), then every filter, kept or new, together, then the new footer. A reader fetches
   all filters in one read. The unchanged bytes are copied on a thread of their own while
   the filters are built: long runs around the page cache (direct I/O), the rest by the kernel
   where it can (``copy_file_range``).
4. Removing bytes moves what came after them. Every absolute offset is relocated: in the footer
   (page, index and filter offsets of each column chunk, row group ``file_offset``) and in the
   page index, whose ``PageLocation.offset`` is "the offset of the page in the file"
   (parquet.thrift): an OffsetIndex whose pages moved is re-encoded in place.
5. The output appears only when complete: it is written to a temporary file next to ``dst``,
   fsynced and renamed over ``dst``. ``src`` is only ever opened for reading.

The plan (which bytes go, which move, which offsets change) is computed from the footer before
any output is written; :class:`Relocation` is pure and tested without files.
"""

from __future__ import annotations

import bisect
import copy
import errno
import io
import itertools
import math
import mmap
import os
import secrets
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from parquet_bloom import _format as fmt
from parquet_bloom._sbbf import (
    BITS_PER_BLOCK,
    BYTES_PER_BLOCK,
    MAX_NUM_BYTES,
    MIN_NUM_BYTES,
    SplitBlockBloomFilter,
    bits_per_value,
    optimal_num_bytes,
)
from parquet_bloom.errors import BloomFilterError, CorruptFileError, UnsupportedFileError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "Relocation",
    "RewriteReport",
    "Splice",
    "rewrite_bloom_filters",
    "rewrite_files",
    "serialize_bloom_filter",
    "set_bloom_filter_location",
]

# Bytes copied per read and write when copying the unchanged part of the file: large enough that
# system calls cost nothing next to the copy (a few microseconds against ~100), small enough not
# to matter for memory (8 MiB cost the benchmark's rewrite about 5 MiB of peak RSS).
COPY_BUFFER_SIZE = 1024 * 1024

# pyarrow reads a column chunk through a buffer of this size (ParquetFile(buffer_size=...)):
# large enough for sequential reads to cost nothing extra, small next to a chunk.
READ_BUFFER_SIZE = 1024 * 1024

# Rows pyarrow decodes at a time: a chunk's values are hashed a batch at a time, never all in
# memory at once. Large enough that per-batch costs vanish, small next to a chunk.
READ_BATCH_SIZE = 64 * 1024

# Hashes inserted per call (see _insert), and at least this many per block of the filter. An
# insert's temporaries are 9-14 bytes a hash, so this bounds them (14 MiB); fewer, larger calls
# mean fewer, larger numpy passes, which is what lets the two build threads overlap (they hand
# the GIL over between passes): the benchmark's 11 row groups built in 2.65-3.21 s, against
# 3.24-3.81 s with parts of 256 Ki.
INSERT_PART_SIZE = 1024 * 1024
_HASHES_PER_BLOCK_PER_INSERT = 4

# Threads building filters, each a whole chunk at a time (read, hash, insert): enough for two
# cores, whose numpy passes release the GIL. Each holds one chunk's hashes, 8 bytes a value.
BUILD_THREADS = 2

# Values hashed per call: the hashing's temporaries are a few times this many words, so they
# stay a small fraction of a chunk while the per-call overhead stays negligible.
HASH_BATCH_SIZE = 64 * 1024

# ndv="exact" without counting (see _chunk_filter): the filter the count is estimated from is
# built for every value being distinct at least at this rate, i.e. about 1.2 bits per value in
# each lane, where linear counting is accurate (t = n / m <= 0.83; Whang et al. 1990).
_ESTIMATE_FPP = 0.01
# Standard deviations of the estimate allowed before it is trusted to pick the size. The normal
# tail beyond 12 sigma is below 1e-32; the bound on the deviation is itself an overestimate.
_ESTIMATE_SIGMAS = 12.0
# Rounds of _ndv_bounds' fixed-point search: each closes most of the remaining gap.
_MARGIN_ROUNDS = 16
# Below this many values, counting exactly (a sort) costs less than a millisecond: no estimate.
_ESTIMATE_MIN_VALUES = 16 * 1024
# Flavors whose size never decreases as the NDV grows, so that two NDVs of the same size
# bracket only NDVs of that size. parquet-java's rounding (`& ~BITS_PER_BLOCK`, see
# sizing._parquet_java) is not monotone: its chunks are always counted exactly.
_MONOTONE_FLAVORS = frozenset({None, "spec", "arrow-cpp", "arrow-rs", "duckdb"})

# A filter whose footer entry lacks bloom_filter_length (files from before format 2.10): read this
# much at its offset to decode the header, which says how long the bitset is. Headers are 15 to
# 19 bytes; the limit is the one format.parse_bloom_filter_header applies to unknown fields.
HEADER_READ_SIZE = fmt.MAX_BLOOM_FILTER_HEADER_SIZE

# Re-encoding an OffsetIndex can shrink it (smaller offsets have shorter varints), which moves
# what follows it and may change other indexes in turn. Offsets only ever decrease, so this
# settles in one or two rounds; the bound only guards against a bug looping forever.
_MAX_RELOCATION_ROUNDS = 32

# parquet-format README, "File format": the data starts after the 4-byte leading magic.
_FIRST_DATA_OFFSET = len(fmt.MAGIC)
_INT32_MAX = 2**31 - 1

# Writers disagree on BOOLEAN filters (SPEC_FACTS: parquet-java writes an empty one, Arrow C++
# refuses, arrow-rs hashes one byte), so no reader can rely on one: we do not write them.
_UNFILTERABLE_TYPES = frozenset({"BOOLEAN"})

Ndv = int | Literal["exact"]


# =============================================================================================
# Low-level pieces, for people writing their own writers
# =============================================================================================


def serialize_bloom_filter(bloom_filter: SplitBlockBloomFilter) -> bytes:
    """A filter as a Parquet file stores it: the Thrift compact ``BloomFilterHeader`` (BLOCK,
    XXHASH, UNCOMPRESSED) followed by the bitset (parquet-format BloomFilter.md, "File Format").

    ``len()`` of the result is what goes into ``bloom_filter_length``.
    """
    if not isinstance(bloom_filter, SplitBlockBloomFilter):
        raise TypeError(f"expected a SplitBlockBloomFilter, not {type(bloom_filter).__name__}")
    return fmt.encode_bloom_filter_header(bloom_filter.num_bytes) + bloom_filter.to_bytes()


def set_bloom_filter_location(
    column_meta_data: Any, offset: int | None, length: int | None
) -> None:
    """Point a generated ``ColumnMetaData`` at a filter, or at none.

    Sets field 14 ``bloom_filter_offset`` (absolute file offset of the header) and field 15
    ``bloom_filter_length`` (header + bitset, the length of :func:`serialize_bloom_filter`'s
    result). ``offset=None, length=None`` clears both: the chunk then has no filter.
    """
    if not isinstance(column_meta_data, fmt.ColumnMetaData):
        raise TypeError(f"expected a parquet ColumnMetaData, not {type(column_meta_data).__name__}")
    if offset is None or length is None:
        if offset is not None or length is not None:
            raise ValueError("offset and length are both None (no filter) or both ints")
        column_meta_data.bloom_filter_offset = None
        column_meta_data.bloom_filter_length = None
        return
    for name, value in (("offset", offset), ("length", length)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if offset < _FIRST_DATA_OFFSET:
        raise ValueError(
            f"offset {offset} lies in the leading magic; filters start at "
            f"{_FIRST_DATA_OFFSET} or later"
        )
    if not 0 < length <= _INT32_MAX:
        raise ValueError(f"length must be in [1, {_INT32_MAX}] (a Thrift i32), got {length}")
    column_meta_data.bloom_filter_offset = int(offset)
    column_meta_data.bloom_filter_length = int(length)


# =============================================================================================
# Relocation: which bytes change, and where everything after them lands
# =============================================================================================


class Splice(NamedTuple):
    """The new file holds ``replacement`` where the old one held ``[start, end)``."""

    start: int
    end: int
    replacement: bytes = b""

    @property
    def growth(self) -> int:
        return len(self.replacement) - (self.end - self.start)


class Relocation:
    """Maps offsets of the old file to the new one, given non-overlapping splices.

    An offset before every splice stays; one after a splice moves by the splice's growth; one
    inside a spliced range maps to where the replacement starts (only deprecated, unchecked
    fields such as ``ColumnChunk.file_offset`` can point there).
    """

    def __init__(self, splices: Iterable[Splice]) -> None:
        ordered = sorted(splices)
        for before, after in itertools.pairwise(ordered):
            if after.start < before.end:
                raise ValueError(f"splices {before[:2]} and {after[:2]} overlap")
        for splice in ordered:
            if not 0 <= splice.start <= splice.end:
                raise ValueError(f"splice {splice[:2]} is not a range of the file")
        self.splices: tuple[Splice, ...] = tuple(ordered)
        self._starts = [s.start for s in ordered]
        self._growth_through: list[int] = []  # total growth of splices[0..i]
        total = 0
        for splice in ordered:
            total += splice.growth
            self._growth_through.append(total)

    def __call__(self, offset: int) -> int:
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            return offset
        splice = self.splices[i]
        if offset >= splice.end:
            return offset + self._growth_through[i]
        before = self._growth_through[i - 1] if i else 0
        return splice.start + before

    def __repr__(self) -> str:
        return f"Relocation({list(self.splices)!r})"


# =============================================================================================
# The report
# =============================================================================================


@dataclass
class RewriteReport:
    """What :func:`rewrite_bloom_filters` did to one file."""

    src: str
    dst: str
    filters_written: list[tuple[int, str, int]] = field(default_factory=list)
    """(row_group, column, num_bytes) of every filter built, in file order."""
    filters_kept: int = 0
    """Filters copied unchanged from ``src``."""
    filters_removed: int = 0
    """Filters of ``src`` that ``dst`` no longer has (a rebuilt filter is not counted)."""
    bytes_before: int = 0
    bytes_after: int = 0


# =============================================================================================
# Arguments
# =============================================================================================


@dataclass(frozen=True)
class _Sizing:
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


def _check_sizing(fpp: float, ndv: Ndv, num_bytes: int | None, flavor: str | None) -> _Sizing:
    if isinstance(fpp, bool) or not isinstance(fpp, int | float | np.floating):
        raise TypeError(f"fpp must be a float, not {type(fpp).__name__}")
    bits_per_value(float(fpp))  # raises ValueError unless 0 < fpp < 1
    if ndv != "exact":
        if isinstance(ndv, bool) or not isinstance(ndv, int | np.integer):
            raise TypeError(f'ndv must be "exact" or an int, not {ndv!r}')
        if ndv < 0:
            raise ValueError(f"ndv must be >= 0, got {ndv}")
        ndv = int(ndv)
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
        num_bytes = n
    if flavor is not None and not isinstance(flavor, str):
        raise TypeError(f"flavor must be a string, not {type(flavor).__name__}")
    sizing = _Sizing(float(fpp), ndv, num_bytes, flavor)
    if flavor is not None:
        sizing.num_bytes_for(1)  # an unknown flavor fails now, before any work
    return sizing


def _check_options(
    columns: object, remove: object, fpp: float, ndv: Ndv, num_bytes: int | None, flavor: str | None
) -> _Sizing:
    """Raise for options that no file could take; the sizing they ask for."""
    sizing = _check_sizing(fpp, ndv, num_bytes, flavor)
    if isinstance(remove, str) and remove != "all":
        raise TypeError(f'remove must be a list of column paths or "all", not {remove!r}')
    if isinstance(columns, str) and columns != "existing":
        raise TypeError(
            f'columns must be a list of column paths, "existing" or None, not {columns!r}'
        )
    return sizing


def _column_list(value: object, what: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"{what} must be a list of column paths, not {value!r}")
    columns = list(value)
    for column in columns:
        if not isinstance(column, str):
            raise TypeError(f"{what} must hold dotted column paths (str), not {column!r}")
    return columns


def _check_columns(columns: list[str], leaves: dict[str, fmt.SchemaLeaf], source: str) -> None:
    for column in columns:
        if column in leaves:
            continue
        under = [path for path in leaves if path.startswith(column + ".")]
        hint = (
            f"it is a group; its leaf columns are {', '.join(map(repr, under))}"
            if under
            else f"its columns are {', '.join(map(repr, leaves))}"
        )
        raise ValueError(f"no leaf column {column!r} in {source}: {hint}")


# =============================================================================================
# Reading the source
# =============================================================================================


def _read_exact(file: IO[bytes], offset: int, length: int, source: str) -> bytes:
    file.seek(offset)
    data = file.read(length)
    if len(data) != length:
        raise CorruptFileError(
            f"short read: expected {length} bytes, got {len(data)}", source=source, offset=offset
        )
    return data


def _read_footer(file: IO[bytes], file_size: int, source: str) -> tuple[bytes, int]:
    """The footer bytes (without trailer) and the offset where they start."""
    if file_size < _FIRST_DATA_OFFSET + fmt.FOOTER_TRAILER_SIZE:
        raise CorruptFileError(f"file of {file_size} bytes is too short to be Parquet")
    trailer = _read_exact(
        file, file_size - fmt.FOOTER_TRAILER_SIZE, fmt.FOOTER_TRAILER_SIZE, source
    )
    footer_len = fmt.parse_footer_trailer(trailer, file_size=file_size)
    footer_start = file_size - fmt.FOOTER_TRAILER_SIZE - footer_len
    head = _read_exact(file, 0, _FIRST_DATA_OFFSET, source)
    if head != fmt.MAGIC:
        raise CorruptFileError(
            f"not a Parquet file: leading magic is {head!r}, expected {fmt.MAGIC!r}", offset=0
        )
    return _read_exact(file, footer_start, footer_len, source), footer_start


def _first_difference(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    mismatch = np.flatnonzero(np.frombuffer(a, np.uint8, n) != np.frombuffer(b, np.uint8, n))
    return int(mismatch[0]) if mismatch.size else n


def _check_lossless(
    original: bytes, decoded: Any, encode: Callable[[Any], bytes], what: str
) -> None:
    again = encode(decoded)
    if again != original:
        at = _first_difference(original, again)
        raise UnsupportedFileError(
            f"{what} does not re-encode to its own bytes (first difference at byte {at} of "
            f"{len(original)}): it has fields this library's parquet.thrift does not know, or "
            "a non-canonical Thrift encoding; pass force=True (parquet-bloom --force) to "
            "rewrite it anyway, dropping what is not known"
        )


def _check_supported(md: Any) -> None:
    if md.encryption_algorithm is not None:
        raise UnsupportedFileError(
            "encrypted Parquet files (plaintext footer mode) are not supported: their "
            "filters and page indexes are encrypted, and the footer is signed"
        )
    for i, rg in enumerate(md.row_groups):
        for chunk in rg.columns:
            path = chunk.meta_data.path_in_schema if chunk.meta_data else None
            column = ".".join(path) if path else None  # a missing path is reported later
            if chunk.crypto_metadata is not None or chunk.encrypted_column_metadata is not None:
                raise UnsupportedFileError(
                    "encrypted column chunks are not supported", row_group=i, column=column
                )
            if chunk.file_path is not None:
                raise UnsupportedFileError(
                    f"the column chunk's data lives in another file ({chunk.file_path!r}); "
                    "only self-contained files can be rewritten",
                    row_group=i,
                    column=column,
                )


class _Range(NamedTuple):
    start: int
    end: int
    what: str


def _layout_ranges(md: Any, footer_start: int, source: str) -> list[_Range]:
    """Everything the footer points at that must survive the rewrite byte for byte: each
    chunk's pages, column index and offset index, checked to lie inside the data region."""
    ranges: list[_Range] = []
    for i, rg in enumerate(md.row_groups):
        for chunk in rg.columns:
            meta = chunk.meta_data
            column = ".".join(meta.path_in_schema)
            start = fmt.chunk_start(meta)
            candidates = [(start, int(meta.total_compressed_size), "pages")]
            for kind in ("column_index", "offset_index"):
                offset = getattr(chunk, f"{kind}_offset")
                length = getattr(chunk, f"{kind}_length")
                if offset is not None and length is not None:
                    candidates.append((int(offset), int(length), kind.replace("_", " ")))
            for offset, length, what in candidates:
                if length == 0:  # nothing to keep (Arrow C++ gives a chunk without pages offset 0)
                    continue
                if not (
                    offset >= _FIRST_DATA_OFFSET and length > 0 and offset + length <= footer_start
                ):
                    raise CorruptFileError(
                        f"the {what} of {length} bytes at offset {offset} lie outside the data "
                        f"region [{_FIRST_DATA_OFFSET}, {footer_start})",
                        source=source,
                        row_group=i,
                        column=column,
                        offset=offset,
                    )
                ranges.append(
                    _Range(offset, offset + length, f"{what} of row group {i}, column {column!r}")
                )
    return ranges


@dataclass(frozen=True)
class _OldFilter:
    row_group: int
    column_index: int
    column: str
    offset: int
    length: int  # header + bitset, as the footer says or as the header tells


def _locate_old_filters(
    file: IO[bytes], chunks: Sequence[fmt.ColumnChunkInfo], footer_start: int, source: str
) -> dict[tuple[int, int], _OldFilter]:
    """The byte range of every filter in the file, from the footer or, without
    bloom_filter_length, from the filter's own header."""
    found: dict[tuple[int, int], _OldFilter] = {}
    for chunk in chunks:
        offset = chunk.bloom_filter_offset
        if offset is None:
            continue
        where: dict[str, Any] = {
            "source": source,
            "row_group": chunk.row_group,
            "column": chunk.path,
            "offset": offset,
        }
        if not _FIRST_DATA_OFFSET <= offset < footer_start:
            raise CorruptFileError(
                f"bloom_filter_offset {offset} is outside the data region "
                f"[{_FIRST_DATA_OFFSET}, {footer_start})",
                **where,
            )
        length = chunk.bloom_filter_length
        if length is None:
            head = _read_exact(file, offset, min(HEADER_READ_SIZE, footer_start - offset), source)
            try:
                header, header_len = fmt.parse_bloom_filter_header(head)
            except BloomFilterError as err:
                raise err.located(**where) from err.__cause__
            length = header_len + header.num_bytes
        if length <= 0 or offset + length > footer_start:
            raise CorruptFileError(
                f"the Bloom filter of {length} bytes at offset {offset} does not end before "
                f"the footer, which starts at {footer_start}",
                **where,
            )
        found[(chunk.row_group, chunk.column_index)] = _OldFilter(
            chunk.row_group, chunk.column_index, chunk.path, offset, length
        )
    return found


def _merge(ranges: Iterable[_Range]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for r in sorted(ranges):
        if r.start == r.end:
            continue
        if merged and r.start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], r.end))
        else:
            merged.append((r.start, r.end))
    return merged


def _filter_splices(
    old_filters: Iterable[_OldFilter], protected: Sequence[_Range], source: str
) -> list[Splice]:
    """Splices that cut every old filter out, after checking that cutting them cannot cut
    into pages or page indexes (a footer that says otherwise is corrupt)."""
    spans: dict[tuple[int, int], _OldFilter] = {}
    for old in old_filters:
        spans.setdefault((old.offset, old.offset + old.length), old)  # a shared filter: cut once
    ordered = sorted(spans)
    for (_, end), later in itertools.pairwise(ordered):
        if later[0] < end:
            old = spans[later]
            raise CorruptFileError(
                "two Bloom filters overlap",
                source=source,
                row_group=old.row_group,
                column=old.column,
                offset=later[0],
            )
    merged = _merge(protected)
    merged_starts = [start for start, _ in merged]
    for start, end in ordered:
        # Protected spans are merged, so only the last one starting before `end` can overlap.
        i = bisect.bisect_left(merged_starts, end) - 1
        if i >= 0 and merged[i][1] > start:
            old = spans[(start, end)]
            hit = next(r for r in protected if r.start < end and start < r.end)
            raise CorruptFileError(
                f"the Bloom filter [{start}, {end}) overlaps the {hit.what} "
                f"[{hit.start}, {hit.end})",
                source=source,
                row_group=old.row_group,
                column=old.column,
                offset=start,
            )
    return [Splice(start, end) for start, end in ordered]


@dataclass
class _OffsetIndexEntry:
    row_group: int
    column: str
    offset: int
    length: int
    raw: bytes
    decoded: Any


def _offset_index_entries(
    file: IO[bytes], md: Any, first_cut: int, source: str
) -> list[_OffsetIndexEntry]:
    """The offset indexes of the chunks whose pages may move: those ending after the first
    byte that is cut. Pages before it never move, so their indexes need not even be read."""
    entries: dict[int, _OffsetIndexEntry] = {}
    for i, rg in enumerate(md.row_groups):
        for chunk in rg.columns:
            offset, length = chunk.offset_index_offset, chunk.offset_index_length
            meta = chunk.meta_data
            start = fmt.chunk_start(meta)
            end = start + int(meta.total_compressed_size)
            if offset is None or length is None or end <= first_cut or offset in entries:
                continue
            column = ".".join(meta.path_in_schema)
            raw = _read_exact(file, offset, length, source)
            try:
                decoded = fmt.decode_offset_index(raw)
            except BloomFilterError as err:
                raise err.located(
                    source=source, row_group=i, column=column, offset=offset
                ) from err.__cause__
            for k, location in enumerate(decoded.page_locations):
                if not start <= location.offset < end:
                    raise CorruptFileError(
                        f"page {k} of the OffsetIndex is at offset {location.offset}, outside "
                        f"its column chunk [{start}, {end})",
                        source=source,
                        row_group=i,
                        column=column,
                        offset=offset,
                    )
            entries[offset] = _OffsetIndexEntry(i, column, offset, length, raw, decoded)
    return list(entries.values())


def _plan_relocation(
    file: IO[bytes], md: Any, filter_splices: list[Splice], force: bool, source: str
) -> Relocation:
    """Cut the old filters and re-encode every OffsetIndex whose pages moved, until stable."""
    if not filter_splices:
        return Relocation([])
    entries = _offset_index_entries(file, md, min(s.start for s in filter_splices), source)
    index_splices: dict[int, Splice] = {}
    checked: set[int] = set()
    for _ in range(_MAX_RELOCATION_ROUNDS):
        try:
            relocation = Relocation([*filter_splices, *index_splices.values()])
        except ValueError as err:  # an OffsetIndex overlapping another one
            raise CorruptFileError(f"page indexes overlap: {err}", source=source) from None
        updated: dict[int, Splice] = {}
        for entry in entries:
            locations = entry.decoded.page_locations
            moved = [relocation(location.offset) for location in locations]
            if all(new == location.offset for new, location in zip(moved, locations, strict=True)):
                continue
            if not force and entry.offset not in checked:
                try:
                    _check_lossless(
                        entry.raw, entry.decoded, fmt.encode_offset_index, "the OffsetIndex"
                    )
                except BloomFilterError as err:
                    raise err.located(
                        source=source,
                        row_group=entry.row_group,
                        column=entry.column,
                        offset=entry.offset,
                    ) from None
                checked.add(entry.offset)
            relocated = copy.deepcopy(entry.decoded)
            for location, new in zip(relocated.page_locations, moved, strict=True):
                location.offset = new
            end = entry.offset + entry.length
            updated[entry.offset] = Splice(entry.offset, end, fmt.encode_offset_index(relocated))
        if updated == index_splices:
            return relocation
        index_splices = updated
    raise AssertionError(f"page index relocation did not settle in {_MAX_RELOCATION_ROUNDS} rounds")


# =============================================================================================
# Building filters
# =============================================================================================


def _all_pages_dictionary_encoded(meta: Any) -> bool:
    """Whether the footer's encoding_stats show every data page dictionary-encoded (the writer
    never fell back to plain), i.e. the chunk has at most a dictionary page's worth of values."""
    stats = meta.encoding_stats
    if not stats:
        return False
    data_pages = (fmt.PageType.DATA_PAGE, fmt.PageType.DATA_PAGE_V2)
    dictionary = (fmt.Encoding.PLAIN_DICTIONARY, fmt.Encoding.RLE_DICTIONARY)
    pages = [s for s in stats if s.page_type in data_pages and s.count]
    return bool(pages) and all(s.encoding in dictionary for s in pages)


def _leaf_array(arr: pa.Array, leaf: fmt.SchemaLeaf) -> pa.Array:
    """The leaf values of a one-leaf Arrow array read from Parquet: struct fields and list
    elements are unwrapped (nulls stay; the hashing skips them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    while True:
        t = arr.type
        if pa.types.is_struct(t):
            if t.num_fields != 1:
                raise AssertionError(f"reading one leaf gave a struct of {t.num_fields} fields")
            arr = pc.struct_field(arr, [0])
        elif pa.types.is_map(t):
            name = leaf.path_in_schema[-1]
            arr = arr.keys if name == t.key_field.name else arr.items
        elif (
            pa.types.is_list(t)
            or pa.types.is_large_list(t)
            or pa.types.is_fixed_size_list(t)
            or pa.types.is_list_view(t)
            or pa.types.is_large_list_view(t)
        ):
            arr = pc.list_flatten(arr)
        else:
            return arr


def _distinct_values(arr: pa.Array) -> pa.Array:
    """The distinct values of one Arrow array (nulls may remain), compared bit for bit.

    Floats are compared as their bit patterns: Bloom filters hash raw IEEE bits, so -0.0 and
    +0.0, and NaNs with different payloads, are different values here.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    while isinstance(arr.type, pa.BaseExtensionType):  # e.g. arrow.uuid: stored as its storage
        arr = arr.storage
    t = arr.type
    if pa.types.is_dictionary(t):
        used = pc.unique(arr.indices)
        return arr.dictionary.take(used)
    if pa.types.is_floating(t):
        bits = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[t.bit_width]
        return pc.unique(arr.view(bits)).view(t)
    return pc.unique(arr)


class _ChunkReader:
    """Reads one column chunk at a time with pyarrow, a batch of rows at a time.

    Two readers over the same file: one decodes to plain arrays, the other keeps BYTE_ARRAY
    columns dictionary-encoded, which for a chunk whose pages are all dictionary-encoded costs
    a copy of the indices instead of one string per value.
    """

    def __init__(self, path: str, dictionary_columns: Sequence[str]) -> None:
        import pyarrow.parquet as pq

        # Stream each chunk through a small buffer rather than reading it whole first: the
        # compressed chunk then never sits in memory next to its decoded values.
        options: dict[str, Any] = {"pre_buffer": False, "buffer_size": READ_BUFFER_SIZE}
        with _pyarrow_errors():  # pyarrow parses the footer again, and may refuse it
            self._plain = pq.ParquetFile(path, **options)
            try:
                self._dictionary = (
                    pq.ParquetFile(path, read_dictionary=list(dictionary_columns), **options)
                    if dictionary_columns
                    else None
                )
            except BaseException:
                self._plain.close()
                raise

    def batches(self, row_group: int, column_index: int, *, dictionary: bool) -> Iterator[Any]:
        """The chunk's values as one-column record batches of READ_BATCH_SIZE rows."""
        parquet_file = self._dictionary if dictionary and self._dictionary else self._plain
        batches: Iterator[Any] = parquet_file.reader.iter_batches(
            READ_BATCH_SIZE, [row_group], column_indices=[column_index], use_threads=False
        )
        return batches

    def close(self) -> None:
        self._plain.close()
        if self._dictionary is not None:
            self._dictionary.close()


def _chunk_hashes(
    reader: _ChunkReader,
    chunk: fmt.ColumnChunkInfo,
    leaf: fmt.SchemaLeaf,
    meta: Any,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The hashes of a chunk's non-null values (duplicates possible), in no particular order,
    read with pyarrow (into ``out`` if it has room, as :func:`parquet_bloom._pages.chunk_hashes`).

    The chunk is read and hashed a batch of rows at a time, so its decoded values are never
    all in memory: what it takes is 8 bytes a value for the hashes plus one batch. A chunk
    whose pages are all dictionary-encoded has few distinct values: each batch's are found
    first (a hash table over the values) and only they are hashed.
    """
    from parquet_bloom import _logical as logical
    from parquet_bloom._pages import HashBuffer

    _check_arrow_codec(meta)
    few_distinct = _all_pages_dictionary_encoded(meta)
    dictionary = few_distinct and leaf.physical_type == "BYTE_ARRAY"
    hashes = HashBuffer(int(chunk.num_values), out)
    with _pyarrow_errors():
        for batch in reader.batches(chunk.row_group, chunk.column_index, dictionary=dictionary):
            arr = _leaf_array(batch.column(0), leaf)
            del batch
            if few_distinct:
                arr = _distinct_values(arr)
            for start in range(0, len(arr), HASH_BATCH_SIZE):
                hashes.add(logical.column_hashes(arr.slice(start, HASH_BATCH_SIZE), leaf))
    return hashes.hashes()


def _check_arrow_codec(meta: Any) -> None:
    """Refuse a chunk compressed with a codec pyarrow lacks (LZO always; others where pyarrow
    was built without them): pyarrow reports it as an OSError, which would read as corrupt."""
    import pyarrow as pa

    from parquet_bloom._pages import ARROW_CODECS

    if meta.codec == fmt.CompressionCodec.UNCOMPRESSED:
        return
    name = ARROW_CODECS.get(meta.codec)
    if name is None or not pa.Codec.is_available(name):
        codec = fmt.CompressionCodec._VALUES_TO_NAMES.get(meta.codec, f"codec {meta.codec}")
        raise UnsupportedFileError(
            f"the column chunk is compressed with {codec}, which pyarrow cannot decompress"
        )


@contextmanager
def _pyarrow_errors() -> Iterator[None]:
    """pyarrow's and the hashing's complaints about the source file as BloomFilterErrors.

    pyarrow raises OSError for undecodable pages ("Couldn't deserialize thrift"): the file was
    opened and read already, so that is what an OSError while decoding means.
    """
    import pyarrow as pa

    try:
        yield
    except pa.ArrowNotImplementedError as err:
        raise UnsupportedFileError(f"pyarrow cannot read this column chunk: {err}") from err
    except (pa.ArrowInvalid, OSError) as err:
        raise CorruptFileError(f"pyarrow cannot read this column chunk: {err}") from err
    except BloomFilterError:
        raise
    except (TypeError, ValueError) as err:
        raise UnsupportedFileError(f"cannot hash this column chunk's values: {err}") from err


def _count_distinct(hashes: np.ndarray) -> int:
    """The exact number of distinct hashes (sorts ``hashes`` in place)."""
    if hashes.size == 0:
        return 0
    hashes.sort()
    return int(hashes.size - np.count_nonzero(hashes[1:] == hashes[:-1]))


def _estimate_margin(ndv: float, num_bytes: int) -> float:
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


def _ndv_bounds(estimate: float, num_values: int, num_bytes: int) -> tuple[int, int]:
    """The range in which the true NDV lies, beyond doubt, given its estimate from a
    ``num_bytes`` filter of ``num_values`` hashes.

    The margin grows with the true NDV, so it is taken at the top of the range: the smallest
    ``high`` with ``high >= estimate + margin(high)`` (found by iterating; the margin grows like
    a square root, so a few rounds settle it). A larger NDV would put the estimate more than the
    margin below it; a smaller one has a smaller margin.
    """
    high = float(min(estimate, num_values))
    for _ in range(_MARGIN_ROUNDS):
        next_high = min(estimate + _estimate_margin(high, num_bytes), num_values)
        settled = next_high - high < 1.0
        high = next_high
        if settled:
            break
    else:
        high = num_values  # did not settle: no upper bound but the hash count
    margin = _estimate_margin(high, num_bytes)
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


def _chunk_filter(
    hashes: np.ndarray, sizing: _Sizing, guess: int | None = None
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
                optimal_num_bytes(num_values, _ESTIMATE_FPP),
            )
    if upper is None:
        ndv = _count_distinct(hashes)
        bloom_filter = SplitBlockBloomFilter(sizing.num_bytes_for(ndv))
        _insert(bloom_filter, hashes)
        return bloom_filter
    sizes = [upper]
    if guess is not None and MIN_NUM_BYTES <= guess < upper:
        sizes.insert(0, guess)
    for size in sizes:
        bloom_filter = SplitBlockBloomFilter(size)
        _insert(bloom_filter, hashes)
        low, high = _ndv_bounds(bloom_filter.estimate_ndv(), num_values, size)
        if low <= high and sizing.num_bytes_for(low) == sizing.num_bytes_for(high):
            num_bytes = sizing.num_bytes_for(low)
        elif size == upper or (low <= high and sizing.num_bytes_for(high) <= size):
            num_bytes = sizing.num_bytes_for(_count_distinct(hashes))
        else:
            continue  # this filter is too small to tell: build the one that cannot be
        if num_bytes <= size:
            return bloom_filter.fold(num_bytes) if num_bytes < size else bloom_filter
    raise AssertionError("a filter of the size for every hash distinct holds them all")


def _glibc_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None under another C library."""
    import ctypes

    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    return trim


def _release_freed_memory() -> None:
    """Hand memory freed since the last call back to the operating system.

    Each chunk allocates and frees megabytes (Arrow's batches through its mimalloc pool, the
    hashes and the inserts' temporaries through glibc for numpy); both allocators keep freed
    memory for reuse, and a chunk's blocks, of other sizes than the last one's, often cannot
    reuse it, so without this the peak RSS grows by several chunks' worth. A few milliseconds
    a chunk.
    """
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


_MALLOC_TRIM = _glibc_malloc_trim() if sys.platform.startswith("linux") else None


class _FilterBuilds:
    """Builds one filter per target chunk, sized for the chunk, with every value in it; use as
    a context manager and take the filters with :meth:`result`, in order.

    Chunks are built on BUILD_THREADS threads, each reading, hashing and inserting a whole
    chunk (numpy, pyarrow and the file reads release the GIL), so at most that many chunks'
    hashes are alive at once. A chunk's values are hashed from its pages
    (:mod:`parquet_bloom._pages`) or, for what that module does not read, through pyarrow, one
    chunk at a time: pyarrow's decoded batches are what memory is spent on, and two in flight
    would double it. Row groups tend to look alike, so each chunk's filter is first tried at
    twice the size of its column's last one (see :func:`_chunk_filter`).
    """

    def __init__(
        self,
        source: str,
        targets: Sequence[fmt.ColumnChunkInfo],
        leaves: Sequence[fmt.SchemaLeaf],
        md: Any,
        sizing: _Sizing,
    ) -> None:
        self._source = source
        self._targets = targets
        self._leaves = leaves
        self._md = md
        self._sizing = sizing
        self._sizes: dict[int, int] = {}  # the size of each column's last filter
        self._arrow_columns: set[int] = set()  # columns with pages that only pyarrow reads
        self._arrow_lock = threading.Lock()
        self._arrow_reader: _ChunkReader | None = None  # opened on first use
        # Each thread's hashes buffer, reused from chunk to chunk: a fresh one of megabytes for
        # every chunk costs page faults, and freed ones linger in each thread's malloc arena.
        self._scratch = threading.local()
        self._pool = ThreadPoolExecutor(BUILD_THREADS, thread_name_prefix="parquet-bloom-build")
        self._futures: dict[tuple[int, int], Future[SplitBlockBloomFilter]] = {}

    def __enter__(self) -> _FilterBuilds:
        # All at once: a chunk waiting for a thread holds nothing, a finished one its filter.
        for chunk in self._targets:
            self._futures[(chunk.row_group, chunk.column_index)] = self._pool.submit(
                self._build, chunk
            )
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)  # on an error, start nothing more
        if self._arrow_reader is not None:
            self._arrow_reader.close()
        _release_freed_memory()

    def __contains__(self, key: tuple[int, int]) -> bool:
        return key in self._futures

    def result(self, key: tuple[int, int]) -> SplitBlockBloomFilter:
        """The filter of the chunk at (row group, column index), once built (then forgotten
        here, so that a filter written out can be freed)."""
        return self._futures.pop(key).result()

    def _build(self, chunk: fmt.ColumnChunkInfo) -> SplitBlockBloomFilter:
        meta = self._md.row_groups[chunk.row_group].columns[chunk.column_index].meta_data
        buffer = getattr(self._scratch, "hashes", None)
        try:
            hashes = None
            if chunk.column_index not in self._arrow_columns:
                hashes = self._hashes_from_pages(chunk, meta, buffer)
            if hashes is None:
                hashes = self._hashes_with_arrow(chunk, meta, buffer)
            if hashes.base is not buffer:  # a larger buffer: keep it instead
                self._scratch.hashes = hashes.base
            previous = self._sizes.get(chunk.column_index)
            guess = None if previous is None else 2 * previous
            bloom_filter = _chunk_filter(hashes, self._sizing, guess)
        except BloomFilterError as err:
            raise err.located(
                source=self._source, row_group=chunk.row_group, column=chunk.path
            ) from err.__cause__
        self._sizes[chunk.column_index] = bloom_filter.num_bytes
        return bloom_filter

    def _hashes_from_pages(
        self, chunk: fmt.ColumnChunkInfo, meta: Any, buffer: np.ndarray | None
    ) -> np.ndarray | None:
        from parquet_bloom import _pages as pages

        try:
            with open(self._source, "rb") as file:
                return pages.chunk_hashes(file, meta, self._leaves[chunk.column_index], buffer)
        except pages.NeedsArrow:
            self._arrow_columns.add(chunk.column_index)  # its other chunks likely too
            return None

    def _hashes_with_arrow(
        self, chunk: fmt.ColumnChunkInfo, meta: Any, buffer: np.ndarray | None
    ) -> np.ndarray:
        with self._arrow_lock:
            if self._arrow_reader is None:  # it parses the footer again: only when needed
                byte_arrays = {c.path for c in self._targets if c.physical_type == "BYTE_ARRAY"}
                self._arrow_reader = _ChunkReader(self._source, sorted(byte_arrays))
            leaf = self._leaves[chunk.column_index]
            hashes = _chunk_hashes(self._arrow_reader, chunk, leaf, meta, buffer)
            _release_freed_memory()  # the batches' buffers
        return hashes


# =============================================================================================
# Writing
# =============================================================================================


def _open_temporary(directory: str, name: str) -> tuple[str, IO[bytes]]:
    """Create a new file next to the destination (a rename within one directory is atomic)
    and open it for writing. Mode 0o666 less the umask, as for any new file."""
    for _ in range(100):
        path = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666
            )
        except FileExistsError:
            continue
        return path, os.fdopen(fd, "wb", buffering=0)
    raise FileExistsError(f"cannot create a temporary file in {directory}")


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable (POSIX); not possible, nor needed, on Windows."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def _atomic_output(target: str, like: os.stat_result | None) -> Iterator[IO[bytes]]:
    """A file that becomes ``target`` only when the block completes: written to a temporary
    file in the same directory, flushed, fsynced and renamed over ``target``. On any exception
    (KeyboardInterrupt included) the temporary file is removed and ``target`` is untouched.

    ``like``: the stat of the file being replaced, whose permissions the new file takes, and
    its owner and group where we may give them (root may; anyone may keep their own)."""
    directory = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(directory):  # else the error would name our temporary file
        raise FileNotFoundError(errno.ENOENT, f"no directory to write {target!r} in", directory)
    tmp_path, out = _open_temporary(directory, os.path.basename(target))
    try:
        try:
            yield out
            out.flush()
            os.fsync(out.fileno())
        finally:
            out.close()
        if like is not None:
            _take_ownership_and_mode(tmp_path, like)
        os.replace(tmp_path, target)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp_path)
        raise
    _fsync_directory(directory)


def _take_ownership_and_mode(path: str, like: os.stat_result) -> None:
    if hasattr(os, "chown"):
        current = os.stat(path)
        if (current.st_uid, current.st_gid) != (like.st_uid, like.st_gid):
            # Not allowed unless root (or the group is one of ours): the file is then ours.
            with suppress(PermissionError):
                os.chown(path, like.st_uid, like.st_gid)
    # After chown, which may clear the set-id bits.
    os.chmod(path, stat.S_IMODE(like.st_mode))


class _Cancelled(Exception):
    """Internal: the body copy was told to stop because the rewrite failed elsewhere."""


def _copy_range(
    src: io.BufferedIOBase,
    out: IO[bytes],
    start: int,
    end: int,
    source: str,
    cancel: threading.Event | None = None,
    *,
    direct: bool = False,
) -> None:
    """Copy ``src[start:end]`` to the end of ``out``: with ``direct``, its long aligned runs
    around the page cache (see :data:`DIRECT_COPY_MIN`); the rest in the kernel where it can
    (``copy_file_range``: no bytes through user space, a fifth of the CPU time of read and
    write, measured on a 1 GB copy), else through one reused buffer."""
    position = start
    if isinstance(out, io.FileIO):  # unbuffered: the kernel may write to its descriptor
        if direct and _O_DIRECT is not None:
            position = _copy_direct(src, out, start, end, source, cancel)
        if _COPY_FILE_RANGE is not None:
            position = _copy_in_kernel(src, out, position, end, cancel)
    if position < end:
        _copy_through_buffer(src, out, position, end, source, cancel)


# copy_file_range(2): Linux and FreeBSD; elsewhere, or where the kernel or file system says it
# cannot (these errnos), the copy goes through user space.
_COPY_FILE_RANGE = getattr(os, "copy_file_range", None)
_CANNOT_COPY_IN_KERNEL = frozenset(
    {errno.ENOSYS, errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF, errno.EPERM}
)
# Bytes per copy_file_range call: the copy can be cancelled between calls.
KERNEL_COPY_SIZE = 64 * 1024 * 1024


def _copy_in_kernel(
    src: io.BufferedIOBase, out: io.FileIO, start: int, end: int, cancel: threading.Event | None
) -> int:
    """Copy what the kernel will of ``src[start:end]``; returns where it stopped (``end``, or
    earlier when the file ended or the kernel cannot, for the buffered copy to go on from)."""
    assert _COPY_FILE_RANGE is not None
    position = start
    while position < end:
        if cancel is not None and cancel.is_set():
            raise _Cancelled
        try:
            copied = _COPY_FILE_RANGE(
                src.fileno(), out.fileno(), min(KERNEL_COPY_SIZE, end - position), position
            )
        except OSError as err:
            if err.errno in _CANNOT_COPY_IN_KERNEL and position == start:
                return position
            raise
        if copied == 0:  # the source ended early: the buffered copy reports it
            return position
        position += copied
    return position


# Long runs of unchanged bytes are written around the page cache (O_DIRECT), read into one
# buffer: copy_file_range on a file system that cannot share extents (ext4) copies every byte
# into new page-cache pages, which must then be written back. Measured on the benchmark's 0.93
# GB body: 0.3 s of CPU (up to 2.3 s when new pages are slow to come by) against 0.12-0.16 s,
# which the filter builds on the other threads get back: the rewrite 0.16 s faster on average
# over 6 runs each (0.2-0.7 s when new pages are slow). The copy is then not in the page cache:
# a reader of the new file reads it from the disk.
# Direct I/O wants file offsets, lengths and memory aligned to the device's logical block: 4 KiB
# is a multiple of the common ones (512 B, 4 KiB); a larger one refuses the writes (EINVAL) and
# the kernel's copy takes over. The buffer, an anonymous mapping, starts on a page.
DIRECT_COPY_ALIGN = 4096
# Shorter runs are not worth the set-up (changing the file's flags, the buffer).
DIRECT_COPY_MIN = 8 * 1024 * 1024
# Bytes read and written at a time: the buffer's size. The 0.93 GB body took 0.45-0.49 s with 8
# MiB, as with 4 MiB (0.43-0.47 s), and 0.53 s with 1 MiB.
DIRECT_COPY_WINDOW = 8 * 1024 * 1024
_O_DIRECT: int | None = getattr(os, "O_DIRECT", None)
# Errors that say "not here" (a file system without direct I/O, a block larger than we align
# to): the copy goes on through copy_file_range.
_CANNOT_WRITE_DIRECT = frozenset({errno.EINVAL, errno.EOPNOTSUPP})
# write(2) for direct I/O, under a name of its own so that tests can make it fail.
_write_direct = os.write


def _copy_direct(
    src: io.BufferedIOBase,
    out: io.FileIO,
    start: int,
    end: int,
    source: str,
    cancel: threading.Event | None,
) -> int:
    """Copy most of ``src[start:end]`` to the end of ``out`` with direct I/O: all but the head
    (up to where ``out`` reaches an aligned offset, copied here first the usual way) and the
    tail (less than a block). Returns where it stopped, for the usual copy to go on from:
    ``start`` when the run is too short for direct I/O, else the tail's start, or wherever
    direct I/O was refused."""
    import fcntl

    assert _O_DIRECT is not None
    first = start + -out.tell() % DIRECT_COPY_ALIGN  # where the output is aligned
    last = first + (end - first) // DIRECT_COPY_ALIGN * DIRECT_COPY_ALIGN
    if last - first < max(DIRECT_COPY_MIN, DIRECT_COPY_ALIGN):
        return start
    _copy_range(src, out, start, first, source, cancel)
    fd = out.fileno()
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | _O_DIRECT)
    except OSError as err:
        if err.errno in _CANNOT_WRITE_DIRECT:
            return first
        raise
    try:
        # Anonymous mappings are page-aligned, as direct I/O wants its memory.
        with mmap.mmap(-1, min(DIRECT_COPY_WINDOW, last - first)) as buffer:
            return _write_direct_windows(src.fileno(), fd, buffer, first, last, cancel)
    finally:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)


def _write_direct_windows(
    src_fd: int, fd: int, buffer: mmap.mmap, start: int, end: int, cancel: threading.Event | None
) -> int:
    """Copy ``src[start:end]`` (aligned) through ``buffer`` to ``fd`` (opened for direct I/O);
    returns where it stopped."""
    position = start
    # Views are released on the way out, whatever still holds them (a traceback may): else the
    # buffer could not be closed.
    with memoryview(buffer) as whole:
        while position < end:
            if cancel is not None and cancel.is_set():
                raise _Cancelled
            length = min(len(whole), end - position)
            with whole[:length] as window:
                if os.preadv(src_fd, [window], position) < length:
                    return position  # the source ended early: the buffered copy reports it
            done = 0
            while done < length:
                with whole[done:length] as rest:
                    try:
                        written = _write_direct(fd, rest)
                    except OSError as err:
                        if err.errno in _CANNOT_WRITE_DIRECT:
                            return position + done
                        raise
                done += written
                if written % DIRECT_COPY_ALIGN:  # a short write left the output unaligned
                    return position + done
            position += length
    return position


def _copy_through_buffer(
    src: io.BufferedIOBase,
    out: IO[bytes],
    start: int,
    end: int,
    source: str,
    cancel: threading.Event | None,
) -> None:
    src.seek(start)
    buffer = memoryview(bytearray(min(COPY_BUFFER_SIZE, end - start)))
    remaining = end - start
    while remaining > 0:
        if cancel is not None and cancel.is_set():
            raise _Cancelled
        n = src.readinto(buffer[: min(len(buffer), remaining)])
        if not n:
            raise CorruptFileError(
                f"short read: the file ended {remaining} bytes early", source=source, offset=end
            )
        _write_all(out, buffer[:n])
        remaining -= n


def _write_all(out: IO[bytes], data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = out.write(view)
        if written is None:  # a non-blocking raw file that could not write; ours never is
            raise OSError("the output file accepted no bytes")
        view = view[written:]


class _BodyCopy:
    """Copies the part of the file before the old footer, spliced, into the output on a
    background thread and fsyncs it, while the calling thread builds the filters: the copy waits
    on the disk, the build on the CPU, so they overlap.

    :meth:`finish` waits for the copy and raises its error, if any. Leaving the ``with`` block
    on an exception stops the copy after its current block and waits for it.
    """

    def __init__(self, source: str, out: IO[bytes], relocation: Relocation, end: int) -> None:
        self._source = source
        self._out = out
        self._relocation = relocation
        self._end = end
        self._cancel = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="parquet-bloom-copy", daemon=True)

    def _run(self) -> None:
        try:
            with open(self._source, "rb") as file:
                position = 0
                for splice in self._relocation.splices:
                    self._copy(file, position, splice.start)
                    _write_all(self._out, splice.replacement)
                    position = splice.end
                self._copy(file, position, self._end)
            self._out.flush()
            os.fsync(self._out.fileno())  # most of the file reaches the disk during the build
        except BaseException as err:  # handed to the calling thread by finish()
            self._error = err

    def _copy(self, file: io.BufferedIOBase, start: int, end: int) -> None:
        _copy_range(file, self._out, start, end, self._source, self._cancel, direct=True)

    def finish(self) -> None:
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def __enter__(self) -> _BodyCopy:
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.finish()
            return
        self._cancel.set()
        self._thread.join()


# =============================================================================================
# The rewrite
# =============================================================================================


def _resolve_targets(
    chunks: Sequence[fmt.ColumnChunkInfo],
    leaves: dict[str, fmt.SchemaLeaf],
    columns: Sequence[str] | Literal["existing"] | None,
    remove: Sequence[str] | Literal["all"],
    source: str,
) -> tuple[list[fmt.ColumnChunkInfo], set[str]]:
    """The chunks to build filters for and the columns whose filters go."""
    if remove == "all":
        removed = set(leaves)
    else:
        removed_list = _column_list(remove, "remove")
        _check_columns(removed_list, leaves, source)
        removed = set(removed_list)
    if columns is None:
        return [], removed
    if columns == "existing":
        targets = [
            c
            for c in chunks
            if c.bloom_filter_offset is not None
            and c.path not in removed
            and c.physical_type not in _UNFILTERABLE_TYPES
        ]
        return targets, removed
    wanted = _column_list(columns, "columns")
    _check_columns(wanted, leaves, source)
    both = sorted(removed.intersection(wanted)) if remove != "all" else []
    if both:
        raise ValueError(f"columns {both} are both to be given filters and to lose them")
    if remove == "all" and wanted:
        raise ValueError('remove="all" removes every filter; it cannot be combined with columns')
    for column in wanted:
        if leaves[column].physical_type in _UNFILTERABLE_TYPES:
            raise ValueError(
                f"column {column!r} is {leaves[column].physical_type}: writers disagree on how "
                "its values are hashed (parquet-java writes an empty filter, Arrow C++ refuses, "
                "arrow-rs hashes one byte), so no reader can use such a filter"
            )
    chosen = set(wanted)
    return [c for c in chunks if c.path in chosen], removed


def _relocate_footer(
    md: Any,
    relocation: Relocation,
    footer_start: int,
    placements: dict[tuple[int, int], tuple[int, int]],
) -> None:
    """Move every offset the footer holds to where its bytes are in the new file."""
    rewritten = {s.start: len(s.replacement) for s in relocation.splices if s.replacement}

    def loose(offset: int | None) -> int | None:
        # Deprecated or optional offsets some writers fill with 0 or junk: move only those that
        # point into the data region.
        if offset is None or not 0 < offset <= footer_start:
            return offset
        return relocation(offset)

    for i, rg in enumerate(md.row_groups):
        rg.file_offset = loose(rg.file_offset)
        for j, chunk in enumerate(rg.columns):
            meta = chunk.meta_data
            meta.data_page_offset = relocation(meta.data_page_offset)
            meta.dictionary_page_offset = loose(meta.dictionary_page_offset)
            meta.index_page_offset = loose(meta.index_page_offset)
            chunk.file_offset = loose(chunk.file_offset)
            if chunk.column_index_offset is not None:
                chunk.column_index_offset = relocation(chunk.column_index_offset)
            if chunk.offset_index_offset is not None:
                old = chunk.offset_index_offset
                chunk.offset_index_offset = relocation(old)
                if old in rewritten:
                    chunk.offset_index_length = rewritten[old]
            offset, length = placements.get((i, j), (None, None))
            set_bloom_filter_location(meta, offset, length)


def rewrite_bloom_filters(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str] | None = None,
    *,
    columns: Sequence[str] | Literal["existing"] | None = None,
    fpp: float = 0.01,
    ndv: Ndv = "exact",
    num_bytes: int | None = None,
    flavor: str | None = None,
    remove: Sequence[str] | Literal["all"] = (),
    in_place: bool = False,
    force: bool = False,
) -> RewriteReport:
    """Write ``src`` to ``dst`` with Bloom filters added, re-sized or removed; the pages are
    copied byte for byte, only the filters and the footer change.

    ``columns``: dotted leaf paths to build filters for (replacing any they have), ``None`` to
    build none (only ``remove``), or ``"existing"`` to rebuild every filter the file already
    has, sized for its chunk. ``remove``: dotted leaf paths whose filters go, or ``"all"``.
    Every other filter is copied unchanged.

    Sizing, per chunk: ``num_bytes`` if given; else for ``ndv`` distinct values (``"exact"``:
    the chunk's own count of distinct hashes) at false-positive rate ``fpp``, rounded as
    ``flavor`` rounds (see :func:`parquet_bloom._sizing.expected_num_bytes`; default the spec's
    :func:`parquet_bloom._sbbf.optimal_num_bytes`).

    ``dst`` appears only once complete (temporary file, fsync, rename) and is replaced if it
    exists; ``src`` is only read. ``in_place=True`` (with ``dst`` None) replaces ``src`` the
    same way (the file a symlink names, not the link), keeping its permissions and, where
    allowed, its owner; other hard links to it keep the old file. The footer must re-encode to
    its exact bytes, else :class:`~parquet_bloom.errors.UnsupportedFileError` unless
    ``force=True``. Encrypted files and files whose chunks live in other files are refused.
    """
    source = os.fspath(src)
    if in_place:
        if dst is not None and os.path.abspath(os.fspath(dst)) != os.path.abspath(source):
            raise ValueError("in_place=True rewrites src itself; pass no dst")
        target = os.path.realpath(source)  # through symlinks: the file itself
    else:
        if dst is None:
            raise ValueError("pass dst, or in_place=True to replace src")
        target = os.fspath(dst)
        if os.path.exists(target) and os.path.samefile(source, target):
            raise ValueError(f"dst {target!r} is src; pass in_place=True to replace src")
        if os.path.isdir(target):  # found now, not by the rename after all the work
            raise IsADirectoryError(errno.EISDIR, "dst is a directory, not a file path", target)
    sizing = _check_options(columns, remove, fpp, ndv, num_bytes, flavor)

    with open(source, "rb") as file:
        file_size = os.fstat(file.fileno()).st_size
        try:
            footer, footer_start = _read_footer(file, file_size, source)
            md = fmt.decode_file_metadata(footer, full=True)
            _check_supported(md)
            if not force:
                _check_lossless(footer, md, fmt.encode_file_metadata, "the footer")
        except BloomFilterError as err:
            raise err.located(source=source) from err.__cause__
        leaf_list = fmt.schema_leaves(md)
        chunks = fmt.column_chunks(md, leaf_list)
        leaves = {leaf.path: leaf for leaf in leaf_list}
        targets, removed = _resolve_targets(chunks, leaves, columns, remove, source)

        protected = _layout_ranges(md, footer_start, source)
        old_filters = _locate_old_filters(file, chunks, footer_start, source)
        relocation = _plan_relocation(
            file, md, _filter_splices(old_filters.values(), protected, source), force, source
        )
        # The body is copied (IO) on a thread while others build the filters (CPU); each
        # filter is written out as soon as it and those before it are done.
        replaced = os.fstat(file.fileno()) if in_place else None
        with (
            _atomic_output(target, replaced) as out,
            _BodyCopy(source, out, relocation, footer_start) as body,
            _FilterBuilds(source, targets, leaf_list, md, sizing) as builds,
        ):
            # The filters, kept and new, together after the body in (row group, column) order.
            report = RewriteReport(source, source if in_place else target, bytes_before=file_size)
            placements: dict[tuple[int, int], tuple[int, int]] = {}
            at = relocation(footer_start)
            body.finish()  # the builds go on meanwhile, on their own threads
            for chunk in chunks:
                key = (chunk.row_group, chunk.column_index)
                if key in builds:
                    bloom_filter = builds.result(key)
                    header = fmt.encode_bloom_filter_header(bloom_filter.num_bytes)
                    # serialize_bloom_filter's bytes, written from the filter's own words.
                    _write_all(out, header)
                    _write_all(out, bloom_filter.words.data.cast("B"))
                    length = len(header) + bloom_filter.num_bytes
                    report.filters_written.append(
                        (chunk.row_group, chunk.path, bloom_filter.num_bytes)
                    )
                    del bloom_filter
                elif key in old_filters and chunk.path not in removed:
                    old = old_filters[key]
                    _copy_range(file, out, old.offset, old.offset + old.length, source)
                    length = old.length
                    report.filters_kept += 1
                else:
                    report.filters_removed += key in old_filters
                    continue
                placements[key] = (at, length)
                at += length
            _relocate_footer(md, relocation, footer_start, placements)
            new_footer = fmt.encode_file_metadata(md)
            _write_all(out, new_footer)
            _write_all(out, len(new_footer).to_bytes(4, "little") + fmt.MAGIC)
            report.bytes_after = at + len(new_footer) + fmt.FOOTER_TRAILER_SIZE
    return report


def rewrite_files(
    jobs: Iterable[tuple[str | os.PathLike[str], str | os.PathLike[str] | None]],
    *,
    columns: Sequence[str] | Literal["existing"] | None = None,
    fpp: float = 0.01,
    ndv: Ndv = "exact",
    num_bytes: int | None = None,
    flavor: str | None = None,
    remove: Sequence[str] | Literal["all"] = (),
    in_place: bool = False,
    force: bool = False,
    progress: Callable[[RewriteReport], None] | None = None,
    on_error: Callable[[str, Exception], None] | None = None,
) -> list[RewriteReport]:
    """:func:`rewrite_bloom_filters` over many ``(src, dst)`` pairs (``dst`` None with
    ``in_place=True``), one file at a time, with the same options for all.

    Options that no file could take raise before any file is read. ``progress(report)`` is
    called after each file that was rewritten. Without ``on_error`` the first failure is raised
    (the files before it are done, the rest untouched); with it, a file that fails with a
    :class:`BloomFilterError`, an ``OSError`` or a ``ValueError`` (a column it lacks, a dst that
    is its src) is passed to ``on_error(src, error)`` and the others go on. Returns the reports
    of the files rewritten.
    """
    _check_options(columns, remove, fpp, ndv, num_bytes, flavor)
    reports: list[RewriteReport] = []
    for src, dst in jobs:
        try:
            report = rewrite_bloom_filters(
                src,
                dst,
                columns=columns,
                fpp=fpp,
                ndv=ndv,
                num_bytes=num_bytes,
                flavor=flavor,
                remove=remove,
                in_place=in_place,
                force=force,
            )
        except (BloomFilterError, OSError, ValueError) as err:
            if on_error is None:
                raise
            on_error(os.fspath(src), err)
            continue
        reports.append(report)
        if progress is not None:
            progress(report)
    return reports

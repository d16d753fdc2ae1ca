"""The rewrite's plan: which bytes of the old file go, which change, where the rest lands.

Everything here is pure: metadata and bytes already read go in, ranges and splices come out;
nothing opens a file. Planning runs in two rounds, each asking for the bytes it needs as
ranges (:func:`header_ranges`, :func:`offset_index_ranges`) that the caller reads and hands
back (a :class:`~parquet_bloom._io.ranges.ReadBuffer`):

1. :func:`filter_locations` checks every old filter's place with the reader's rules
   (:func:`parquet_bloom._locate.locate_filter`), :func:`old_filters` learns the length of
   those whose footer entry has none from their headers, and :func:`filter_splices` cuts them
   out, refusing a cut into pages or page indexes (:func:`layout_ranges`).
2. Removing bytes moves what came after them: :func:`relocation` re-encodes every OffsetIndex
   whose pages moved, until the splices settle, and :func:`relocate_footer` moves every
   offset the footer holds (docs/format-notes.md, page index).
"""

from __future__ import annotations

import bisect
import copy
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from parquet_bloom import _format as fmt
from parquet_bloom._io.ranges import ByteRange, ReadBuffer
from parquet_bloom._locate import FilterLocation, check_header, locate_filter
from parquet_bloom._sbbf import SplitBlockBloomFilter
from parquet_bloom.errors import BloomFilterError, CorruptFileError, UnsupportedFileError

__all__ = [
    "HEADER_READ_SIZE",
    "LayoutRange",
    "OldFilter",
    "Relocation",
    "Splice",
    "check_lossless",
    "filter_locations",
    "filter_splices",
    "header_ranges",
    "layout_ranges",
    "offset_index_ranges",
    "old_filters",
    "relocate_footer",
    "relocation",
    "serialize_bloom_filter",
    "set_bloom_filter_location",
]

# A filter whose footer entry lacks bloom_filter_length (files from before format 2.10): read this
# much at its offset to decode the header, which says how long the bitset is. Headers are 15 to
# 19 bytes; the limit is the one format.parse_bloom_filter_header applies to unknown fields.
HEADER_READ_SIZE = fmt.MAX_BLOOM_FILTER_HEADER_SIZE

# Re-encoding an OffsetIndex can shrink it (smaller offsets have shorter varints), which moves
# what follows it and may change other indexes in turn. Offsets only ever decrease, so this
# settles in one or two rounds; the bound only guards against a bug looping forever.
_MAX_RELOCATION_ROUNDS = 32

# The data starts after the 4-byte leading magic (docs/format-notes.md, file layout).
_FIRST_DATA_OFFSET = len(fmt.MAGIC)
_INT32_MAX = 2**31 - 1


# =============================================================================================
# Low-level pieces, for people writing their own writers
# =============================================================================================


def serialize_bloom_filter(bloom_filter: SplitBlockBloomFilter) -> bytes:
    """A filter as a Parquet file stores it: the Thrift compact ``BloomFilterHeader`` (BLOCK,
    XXHASH, UNCOMPRESSED) followed by the bitset (docs/format-notes.md, Bloom filter header).

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
# The footer must say what it means
# =============================================================================================


def _first_difference(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    mismatch = np.flatnonzero(np.frombuffer(a, np.uint8, n) != np.frombuffer(b, np.uint8, n))
    return int(mismatch[0]) if mismatch.size else n


def check_lossless(
    original: bytes, decoded: Any, encode: Callable[[Any], bytes], what: str
) -> None:
    """Refuse a Thrift struct that does not re-encode to its own bytes: re-encoding it would
    drop what our parquet.thrift does not know."""
    again = encode(decoded)
    if again != original:
        at = _first_difference(original, again)
        raise UnsupportedFileError(
            f"{what} does not re-encode to its own bytes (first difference at byte {at} of "
            f"{len(original)}): it has fields this library's parquet.thrift does not know, or "
            "a non-canonical Thrift encoding; pass force=True (parquet-bloom --force) to "
            "rewrite it anyway, dropping what is not known"
        )


class LayoutRange(NamedTuple):
    start: int
    end: int
    what: str


def layout_ranges(md: Any, footer_start: int, source: str) -> list[LayoutRange]:
    """Everything the footer points at that must survive the rewrite byte for byte: each
    chunk's pages, column index and offset index, checked to lie inside the data region."""
    ranges: list[LayoutRange] = []
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
                    LayoutRange(
                        offset, offset + length, f"{what} of row group {i}, column {column!r}"
                    )
                )
    return ranges


# =============================================================================================
# The old filters
# =============================================================================================


@dataclass(frozen=True)
class OldFilter:
    row_group: int
    column_index: int
    column: str
    offset: int
    length: int  # header + bitset, as the footer says or as the header tells


def filter_locations(
    chunks: Sequence[fmt.ColumnChunkInfo], footer_start: int, source: str
) -> list[FilterLocation]:
    """Where every old filter lies, as far as the footer tells, checked by the reader's rules
    (a place in the data region, a length that can hold a header and a bitset)."""
    locations = []
    for chunk in chunks:
        location = locate_filter(chunk, footer_start=footer_start, source=source)
        if location is not None:
            locations.append(location)
    return locations


def header_ranges(locations: Iterable[FilterLocation], footer_start: int) -> list[ByteRange]:
    """The bytes to read for the headers of the filters whose length the footer does not give."""
    return [
        ByteRange(loc.offset, min(HEADER_READ_SIZE, footer_start - loc.offset))
        for loc in locations
        if loc.length is None
    ]


def old_filters(
    locations: Iterable[FilterLocation], headers: ReadBuffer, footer_start: int, source: str
) -> dict[tuple[int, int], OldFilter]:
    """The byte range of every old filter, keyed by (row group, column index): from the footer
    or, without bloom_filter_length, from the filter's header (read as :func:`header_ranges`
    asked, and checked by the reader's rules)."""
    found: dict[tuple[int, int], OldFilter] = {}
    for loc in locations:
        chunk = loc.chunk
        length = loc.length
        if length is None:
            head = headers.get(header_ranges([loc], footer_start)[0])
            try:
                header, header_len = fmt.parse_bloom_filter_header(head)
                check_header(header, header_len, loc, footer_start=footer_start, source=source)
            except BloomFilterError as err:
                raise err.located(
                    source=source, row_group=chunk.row_group, column=chunk.path, offset=loc.offset
                ) from err.__cause__
            length = header_len + header.num_bytes
        found[(chunk.row_group, chunk.column_index)] = OldFilter(
            chunk.row_group, chunk.column_index, chunk.path, loc.offset, length
        )
    return found


def _merge(ranges: Iterable[LayoutRange]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for r in sorted(ranges):
        if r.start == r.end:
            continue
        if merged and r.start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], r.end))
        else:
            merged.append((r.start, r.end))
    return merged


def filter_splices(
    filters: Iterable[OldFilter], protected: Sequence[LayoutRange], source: str
) -> list[Splice]:
    """Splices that cut every old filter out, after checking that cutting them cannot cut
    into pages or page indexes (a footer that says otherwise is corrupt)."""
    spans: dict[tuple[int, int], OldFilter] = {}
    for old in filters:
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


# =============================================================================================
# Offset indexes, whose page offsets move with the pages
# =============================================================================================


@dataclass
class _OffsetIndexEntry:
    row_group: int
    column: str
    offset: int
    length: int
    raw: bytes
    decoded: Any


def _moving_offset_indexes(md: Any, cuts: Sequence[Splice]) -> Iterable[tuple[int, Any]]:
    """(row group, column chunk) of the chunks whose pages may move, with an offset index:
    those ending after the first byte that is cut. Pages before it never move, so their
    indexes need not even be read."""
    if not cuts:
        return
    first_cut = min(s.start for s in cuts)
    for i, rg in enumerate(md.row_groups):
        for chunk in rg.columns:
            meta = chunk.meta_data
            end = fmt.chunk_start(meta) + int(meta.total_compressed_size)
            offset, length = chunk.offset_index_offset, chunk.offset_index_length
            if offset is not None and length is not None and end > first_cut:
                yield i, chunk


def offset_index_ranges(md: Any, cuts: Sequence[Splice]) -> list[ByteRange]:
    """The offset indexes :func:`relocation` needs read, given the splices cutting the old
    filters (:func:`filter_splices`)."""
    # The first chunk naming an offset is the one _offset_index_entries decodes there.
    ranges: dict[int, ByteRange] = {}
    for _, chunk in _moving_offset_indexes(md, cuts):
        offset = chunk.offset_index_offset
        ranges.setdefault(offset, ByteRange(offset, chunk.offset_index_length))
    return list(ranges.values())


def _offset_index_entries(
    md: Any, cuts: Sequence[Splice], indexes: ReadBuffer, source: str
) -> list[_OffsetIndexEntry]:
    """The offset indexes of the chunks whose pages may move, decoded and checked."""
    entries: dict[int, _OffsetIndexEntry] = {}
    for i, chunk in _moving_offset_indexes(md, cuts):
        offset, length = chunk.offset_index_offset, chunk.offset_index_length
        if offset in entries:
            continue
        meta = chunk.meta_data
        start = fmt.chunk_start(meta)
        end = start + int(meta.total_compressed_size)
        column = ".".join(meta.path_in_schema)
        raw = indexes.get(ByteRange(offset, length))
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


def relocation(
    md: Any, cuts: list[Splice], indexes: ReadBuffer, force: bool, source: str
) -> Relocation:
    """Cut the old filters (``cuts``) and re-encode every OffsetIndex whose pages moved, until
    stable. ``indexes`` holds the bytes of :func:`offset_index_ranges`."""
    if not cuts:
        return Relocation([])
    entries = _offset_index_entries(md, cuts, indexes, source)
    index_splices: dict[int, Splice] = {}
    checked: set[int] = set()
    for _ in range(_MAX_RELOCATION_ROUNDS):
        try:
            moves = Relocation([*cuts, *index_splices.values()])
        except ValueError as err:  # an OffsetIndex overlapping another one
            raise CorruptFileError(f"page indexes overlap: {err}", source=source) from None
        updated: dict[int, Splice] = {}
        for entry in entries:
            locations = entry.decoded.page_locations
            moved = [moves(location.offset) for location in locations]
            if all(new == location.offset for new, location in zip(moved, locations, strict=True)):
                continue
            if not force and entry.offset not in checked:
                try:
                    check_lossless(
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
            return moves
        index_splices = updated
    raise AssertionError(f"page index relocation did not settle in {_MAX_RELOCATION_ROUNDS} rounds")


def relocate_footer(
    md: Any,
    moves: Relocation,
    footer_start: int,
    placements: dict[tuple[int, int], tuple[int, int]],
) -> None:
    """Move every offset the footer holds to where its bytes are in the new file, and point
    each chunk at its filter's (offset, length) in ``placements`` (no entry: no filter)."""
    rewritten = {s.start: len(s.replacement) for s in moves.splices if s.replacement}

    def loose(offset: int | None) -> int | None:
        # Deprecated or optional offsets some writers fill with 0 or junk: move only those that
        # point into the data region.
        if offset is None or not 0 < offset <= footer_start:
            return offset
        return moves(offset)

    for i, rg in enumerate(md.row_groups):
        rg.file_offset = loose(rg.file_offset)
        for j, chunk in enumerate(rg.columns):
            meta = chunk.meta_data
            meta.data_page_offset = moves(meta.data_page_offset)
            meta.dictionary_page_offset = loose(meta.dictionary_page_offset)
            meta.index_page_offset = loose(meta.index_page_offset)
            chunk.file_offset = loose(chunk.file_offset)
            if chunk.column_index_offset is not None:
                chunk.column_index_offset = moves(chunk.column_index_offset)
            if chunk.offset_index_offset is not None:
                old = chunk.offset_index_offset
                chunk.offset_index_offset = moves(old)
                if old in rewritten:
                    chunk.offset_index_length = rewritten[old]
            offset, length = placements.get((i, j), (None, None))
            set_bloom_filter_location(meta, offset, length)

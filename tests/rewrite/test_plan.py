"""The plan, without files where it can be: the low-level pieces for writers, relocation, and
where the old filters lie (the reader's rules).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import parquet_bloom as pb
from parquet_bloom import _format as fmt
from parquet_bloom._io.ranges import ByteRange, ReadBuffer
from parquet_bloom._rewrite import plan
from parquet_bloom._rewrite.plan import (
    Relocation,
    Splice,
    serialize_bloom_filter,
    set_bloom_filter_location,
)
from parquet_bloom._sbbf import SplitBlockBloomFilter

# -- low-level pieces ----------------------------------------------------------------------------


def test_serialize_bloom_filter_is_what_pyarrow_writes(sources: dict[str, Path]) -> None:
    path = sources["pyarrow-filters"]
    data = path.read_bytes()
    with pb.BloomFilterReader(path) as reader:
        for (rg, column), bloom_filter in reader.filters().items():
            chunk = reader.column_chunk(rg, column)
            offset, length = chunk.bloom_filter_offset, chunk.bloom_filter_length
            assert offset is not None and length is not None
            assert serialize_bloom_filter(bloom_filter) == data[offset : offset + length]


def test_serialize_bloom_filter_round_trips() -> None:
    bloom_filter = SplitBlockBloomFilter(1024)
    bloom_filter.insert(np.arange(100))
    data = serialize_bloom_filter(bloom_filter)
    header, header_len = fmt.parse_bloom_filter_header(data)
    assert header == fmt.BloomFilterHeader(1024, "BLOCK", "XXHASH", "UNCOMPRESSED")
    assert len(data) == header_len + 1024
    assert SplitBlockBloomFilter.from_bytes(data[header_len:]) == bloom_filter
    with pytest.raises(TypeError):
        serialize_bloom_filter(b"bits")  # type: ignore[arg-type]


def test_set_bloom_filter_location() -> None:
    meta = fmt.ColumnMetaData()
    set_bloom_filter_location(meta, 1234, 4112)
    assert (meta.bloom_filter_offset, meta.bloom_filter_length) == (1234, 4112)
    set_bloom_filter_location(meta, None, None)
    assert (meta.bloom_filter_offset, meta.bloom_filter_length) == (None, None)
    with pytest.raises(ValueError, match="both"):
        set_bloom_filter_location(meta, 1234, None)
    with pytest.raises(ValueError, match="leading magic"):
        set_bloom_filter_location(meta, 2, 100)
    with pytest.raises(ValueError, match="i32"):
        set_bloom_filter_location(meta, 100, 2**31)
    with pytest.raises(TypeError, match="int"):
        set_bloom_filter_location(meta, 100.0, 10)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ColumnMetaData"):
        set_bloom_filter_location(fmt.ColumnChunk(), 100, 10)


# -- relocation (pure) ---------------------------------------------------------------------------


def test_relocation_examples() -> None:
    relocation = Relocation([Splice(10, 20), Splice(30, 35, b"abcdefgh")])
    assert [relocation(o) for o in (0, 9, 10, 15, 20, 29, 30, 33, 35, 100)] == [
        0, 9, 10, 10, 10, 19, 20, 20, 28, 93,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="overlap"):
        Relocation([Splice(10, 20), Splice(15, 25)])


@st.composite
def splices(draw: st.DrawFn) -> tuple[int, list[Splice]]:
    size = draw(st.integers(0, 200))
    cuts = sorted(draw(st.lists(st.integers(0, size), max_size=12)))
    pieces = []
    for start, end in zip(cuts[::2], cuts[1::2], strict=False):
        pieces.append(Splice(start, end, draw(st.binary(max_size=6))))
    return size, pieces


@given(splices())
def test_relocation_matches_applying_the_splices(case: tuple[int, list[Splice]]) -> None:
    size, pieces = case
    # Apply the splices to a file whose byte i is "old offset i"; then every surviving old byte
    # must be where the relocation says.
    new: list[int | None] = []
    position = 0
    for splice in pieces:
        new.extend(range(position, splice.start))
        new.extend([None] * len(splice.replacement))
        position = splice.end
    new.extend(range(position, size))
    relocation = Relocation(reversed(pieces))
    for new_offset, old_offset in enumerate(new):
        if old_offset is not None:
            assert relocation(old_offset) == new_offset
    moved = [relocation(o) for o in range(size + 1)]
    assert moved == sorted(moved)  # order is kept
    assert relocation(size) == len(new)


# -- where the old filters lie (pure: the reader's rules) ----------------------------------------

FOOTER_START = 100_000


def chunk_info(
    offset: int | None, length: int | None, *, encrypted: bool = False
) -> fmt.ColumnChunkInfo:
    """Row group 2's chunk of column "code", whose filter the footer puts at offset/length."""
    return fmt.ColumnChunkInfo(
        row_group=2,
        column_index=1,
        path="code",
        physical_type="INT32",
        type_length=None,
        logical_type=None,
        converted_type=None,
        scale=None,
        precision=None,
        num_values=10,
        data_page_offset=4,
        dictionary_page_offset=None,
        total_compressed_size=100,
        bloom_filter_offset=offset,
        bloom_filter_length=length,
        encrypted=encrypted,
        path_in_schema=("code",),
    )


@pytest.mark.parametrize(
    ("offset", "length", "message"),
    [
        # Too short for a header and a bitset: the reader refuses these, and so does the rewrite.
        (5_000, 1, "cannot hold a header and a bitset"),
        (5_000, 17, "cannot hold a header and a bitset"),
        (5_000, 32, "cannot hold a header and a bitset"),
        (5_000, 0, "cannot hold a header and a bitset"),
        (5_000, -7, "cannot hold a header and a bitset"),
        # Outside the data region: in the leading magic, at or past the footer.
        (0, 1_000, "outside the data region"),
        (3, 1_000, "outside the data region"),
        (3, None, "outside the data region"),
        (FOOTER_START, 1_000, "outside the data region"),
        (FOOTER_START - 1_000, 1_001, "runs past the footer"),
    ],
)
def test_old_filters_are_located_by_the_readers_rules(
    offset: int, length: int | None, message: str
) -> None:
    with pytest.raises(pb.CorruptFileError, match=message) as info:
        plan.filter_locations([chunk_info(offset, length)], FOOTER_START, "f.parquet")
    error = info.value
    assert (error.source, error.row_group, error.column, error.offset) == (
        "f.parquet",
        2,
        "code",
        offset,
    )


def test_filters_of_encrypted_columns_are_unsupported() -> None:
    with pytest.raises(pb.UnsupportedFileError, match="encrypted"):
        plan.filter_locations([chunk_info(5_000, 1_000, encrypted=True)], FOOTER_START, "f")


def test_only_filters_without_a_length_have_their_headers_read() -> None:
    chunks = [chunk_info(None, None), chunk_info(5_000, 1_000), chunk_info(FOOTER_START - 10, None)]
    locations = plan.filter_locations(chunks, FOOTER_START, "f")
    assert len(locations) == 2  # the chunk without an offset has no filter
    assert plan.header_ranges(locations, FOOTER_START) == [
        ByteRange(FOOTER_START - 10, 10)  # clamped to the footer
    ]


def test_lengths_missing_from_the_footer_come_from_the_headers() -> None:
    header = fmt.encode_bloom_filter_header(1024)
    (location,) = plan.filter_locations([chunk_info(5_000, None)], FOOTER_START, "f")
    (wanted,) = plan.header_ranges([location], FOOTER_START)
    headers = ReadBuffer()
    headers.add(wanted.offset, (header + bytes(1024)).ljust(wanted.length, b"\0"))
    assert plan.old_filters([location], headers, FOOTER_START, "f") == {
        (2, 1): plan.OldFilter(2, 1, "code", 5_000, len(header) + 1024)
    }


@pytest.mark.parametrize(
    ("num_bytes", "offset", "error", "message"),
    [
        (1 << 20, FOOTER_START - 5_000, pb.CorruptFileError, "past the footer"),
        (1000, 5_000, pb.CorruptFileError, "not a power of two"),
    ],
)
def test_headers_read_are_checked_by_the_readers_rules(
    num_bytes: int, offset: int, error: type[pb.BloomFilterError], message: str
) -> None:
    (location,) = plan.filter_locations([chunk_info(offset, None)], FOOTER_START, "f")
    (wanted,) = plan.header_ranges([location], FOOTER_START)
    headers = ReadBuffer()
    headers.add(wanted.offset, fmt.encode_bloom_filter_header(num_bytes).ljust(wanted.length))
    with pytest.raises(error, match=message) as info:
        plan.old_filters([location], headers, FOOTER_START, "f")
    assert (info.value.source, info.value.row_group, info.value.offset) == ("f", 2, offset)


def test_cutting_filters_that_overlap_the_pages_is_refused() -> None:
    old = [plan.OldFilter(0, 0, "id", 40, 60), plan.OldFilter(1, 0, "id", 200, 50)]
    protected = [plan.LayoutRange(4, 40, "pages"), plan.LayoutRange(100, 210, "pages of rg 1")]
    with pytest.raises(pb.CorruptFileError, match="overlaps the pages of rg 1") as info:
        plan.filter_splices(old, protected, "f")
    assert (info.value.row_group, info.value.offset) == (1, 200)
    assert plan.filter_splices(old[:1], protected, "f") == [Splice(40, 100)]


# -- offset indexes, planned from metadata and the bytes asked for ------------------------------


def parquet_bytes() -> bytes:
    """Two row groups of several pages each, with a page index, written into memory."""
    sink = pa.BufferOutputStream()
    table = pa.table({"id": pa.array(range(4_000)), "name": [f"n{i % 300}" for i in range(4_000)]})
    pq.write_table(table, sink, row_group_size=2_000, data_page_size=1024, write_page_index=True)
    return bytes(sink.getvalue())


def test_offset_indexes_of_moved_pages_are_re_encoded_without_a_file() -> None:
    data = parquet_bytes()
    footer_len = int.from_bytes(data[-8:-4], "little")
    footer_start = len(data) - 8 - footer_len
    md = fmt.decode_file_metadata(data[footer_start:-8], full=True)
    # Four bytes inserted where row group 1 starts: its pages move, row group 0's do not.
    start = fmt.chunk_start(md.row_groups[1].columns[0].meta_data)
    cuts = [Splice(start, start, b"ABCD")]
    wanted = plan.offset_index_ranges(md, cuts)
    assert sorted(wanted) == sorted(
        ByteRange(c.offset_index_offset, c.offset_index_length) for c in md.row_groups[1].columns
    )
    indexes = ReadBuffer()
    for r in wanted:
        indexes.add(r.offset, data[r.offset : r.end])
    moves = plan.relocation(md, cuts, indexes, False, "f")
    rewritten = {s.start: s for s in moves.splices if s not in cuts}
    assert set(rewritten) == {r.offset for r in wanted}
    for r in wanted:
        old = fmt.decode_offset_index(data[r.offset : r.end])
        new = fmt.decode_offset_index(rewritten[r.offset].replacement)
        assert [p.offset + 4 for p in old.page_locations] == [p.offset for p in new.page_locations]
    assert plan.relocation(md, [], ReadBuffer(), False, "f").splices == ()

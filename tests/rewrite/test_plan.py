"""The plan, without files where it can be: the low-level pieces for writers, relocation, and
where the old filters lie (the reader's rules).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import parquet_bloom as pb
from parquet_bloom import _format as fmt
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

"""Tests for parquet_bloom._format.offset_index: an OffsetIndex written by pyarrow re-encodes
to its own bytes, and a corrupt one is a CorruptFileError."""

from __future__ import annotations

from pathlib import Path

import pytest

from parquet_bloom import _format as fmt
from parquet_bloom.errors import CorruptFileError
from tests.format.helpers import footer_of, only_corrupt


def _offset_index_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    chunk = fmt.decode_file_metadata(footer_of(path)).row_groups[0].columns[0]
    start, length = chunk.offset_index_offset, chunk.offset_index_length
    return data[start : start + length]


def test_offset_index_round_trips_byte_for_byte(rich_file: Path) -> None:
    raw = _offset_index_bytes(rich_file)
    offset_index = fmt.decode_offset_index(memoryview(raw))
    assert offset_index.page_locations
    assert offset_index.page_locations[0].first_row_index == 0
    assert fmt.encode_offset_index(offset_index) == raw


def test_corrupt_offset_index_is_a_corrupt_file(rich_file: Path) -> None:
    raw = _offset_index_bytes(rich_file)
    for end in range(len(raw)):
        only_corrupt(fmt.decode_offset_index, raw[:end])
    with pytest.raises(CorruptFileError, match="cannot decode the OffsetIndex"):
        fmt.decode_offset_index(b"\x19\xfc")  # a list of 15+ structs that is not there
    offset_index = fmt.decode_offset_index(raw)
    offset_index.page_locations[-1].compressed_page_size = None
    with pytest.raises(
        CorruptFileError, match=r"page location \d+ of the OffsetIndex has no compressed"
    ):
        fmt.decode_offset_index(fmt.encode_offset_index(offset_index))

"""Tests for parquet_bloom._format._compact through the footer decode: the pure-Python
protocol stands in for the C decoder with the same results, hostile lengths are refused, and
deep nesting and invalid UTF-8 are handled alike by both."""

from __future__ import annotations

import time

import pytest

from parquet_bloom import _format as fmt
from parquet_bloom._format import _compact as compact
from parquet_bloom.errors import CorruptFileError


def test_pure_python_fallback_matches_the_c_decoder(
    rich_footer: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = fmt.decode_file_metadata(rich_footer)
    full = fmt.decode_file_metadata(rich_footer, full=True)
    monkeypatch.setattr(compact, "fastbinary", None)
    slow_full = fmt.decode_file_metadata(rich_footer, full=True)
    assert slow_full == full
    assert fmt.encode_file_metadata(slow_full) == rich_footer
    assert fmt.column_chunks(fmt.decode_file_metadata(rich_footer)) == fmt.column_chunks(fast)
    for cut in range(0, len(rich_footer), 97):
        with pytest.raises(CorruptFileError, match="cannot decode the Parquet footer"):
            fmt.decode_file_metadata(rich_footer[:cut])


# version=1 (0x15 0x02), then field 2 (schema) or field 4 (row_groups) as a list of 2**30
# structs, or an unknown field 15 as a list of 2**30 i64.
HOSTILE_LISTS = {
    "schema": b"\x15\x02" + b"\x19\xfc" + compact.varint(2**30) + b"\x00" * 16,
    "row_groups": b"\x15\x02" + b"\x39\xfc" + compact.varint(2**30) + b"\x00" * 16,
    "unknown_field": b"\xf9\xf6" + compact.varint(2**30) + b"\x00" * 16,
    "string": b"\x15\x02\x58" + compact.varint(2**31 - 1) + b"\x00" * 16,  # created_by (field 6)
}


@pytest.mark.parametrize("name", sorted(HOSTILE_LISTS))
@pytest.mark.parametrize("full", [False, True])
def test_hostile_lengths_fail_fast(name: str, full: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    for fastbinary in (compact.fastbinary, None):
        monkeypatch.setattr(compact, "fastbinary", fastbinary)
        start = time.perf_counter()
        with pytest.raises(CorruptFileError, match="cannot decode the Parquet footer"):
            fmt.decode_file_metadata(HOSTILE_LISTS[name], full=full)
        assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deeply_nested_unknown_field(depth: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Field 15 holding a struct whose field 1 holds a struct whose field 1 ...
    data = b"\xfc" + b"\x1c" * depth + b"\x00" * (depth + 1)
    for fastbinary in (compact.fastbinary, None):
        monkeypatch.setattr(compact, "fastbinary", fastbinary)
        with pytest.raises(CorruptFileError, match="cannot decode the Parquet footer"):
            fmt.decode_file_metadata(data)


def test_invalid_utf8_in_a_string_field(
    rich_footer: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thrift `string` fields (names, created_by) with invalid UTF-8 decode with U+FFFD,
    the C decoder's behaviour, which the pure-Python fallback is made to share."""
    at = rich_footer.index(b"parquet-cpp-arrow")
    bad = rich_footer[:at] + b"\xff" + rich_footer[at + 1 :]
    for fastbinary in (compact.fastbinary, None):
        monkeypatch.setattr(compact, "fastbinary", fastbinary)
        for full in (False, True):
            md = fmt.decode_file_metadata(bad, full=full)
            assert md.created_by.startswith("\ufffdarquet-cpp-arrow")

"""Tests for parquet_bloom._format.bloom_header: headers written by pyarrow, byte-exact
encoding, unknown members and fields, and malformed headers that must raise CorruptFileError
without walking the bytes after them."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom import _format as fmt
from parquet_bloom._format import _compact as compact
from parquet_bloom.errors import CorruptFileError
from tests.format.helpers import BLOOM_COLUMNS, only_corrupt, write

# --------------------------------------------------------------------------------------------
# Bloom filter header
# --------------------------------------------------------------------------------------------

HEADER_1024 = bytes.fromhex("15 8010 1c1c0000 1c1c0000 1c1c0000 00")


def test_bloom_filter_headers_written_by_pyarrow(rich_file: Path) -> None:
    data = rich_file.read_bytes()
    arrow = pq.ParquetFile(rich_file).metadata
    seen = 0
    for i in range(arrow.num_row_groups):
        for j in range(arrow.num_columns):
            col = arrow.row_group(i).column(j)
            if col.bloom_filter_offset is None:
                continue
            seen += 1
            blob = data[col.bloom_filter_offset : col.bloom_filter_offset + col.bloom_filter_length]
            header, size = fmt.parse_bloom_filter_header(blob)
            assert header == fmt.BloomFilterHeader(
                num_bytes=header.num_bytes,
                algorithm="BLOCK",
                hash="XXHASH",
                compression="UNCOMPRESSED",
            )
            assert size + header.num_bytes == col.bloom_filter_length
            assert fmt.encode_bloom_filter_header(header.num_bytes) == blob[:size]
    assert seen == len(BLOOM_COLUMNS) * arrow.num_row_groups


def test_encode_1024_matches_pyarrow(tmp_path: Path) -> None:
    path = write(
        tmp_path / "bf.parquet",
        pa.table({"col": pa.array(range(1000), pa.int64())}),
        bloom_filter_options={"col": {"ndv": 500, "fpp": 0.01}},
    )
    col = pq.ParquetFile(path).metadata.row_group(0).column(0)
    data = path.read_bytes()
    blob = data[col.bloom_filter_offset : col.bloom_filter_offset + col.bloom_filter_length]
    assert fmt.encode_bloom_filter_header(1024) == HEADER_1024 == blob[: len(HEADER_1024)]
    header, size = fmt.parse_bloom_filter_header(memoryview(data)[col.bloom_filter_offset :])
    assert (header.num_bytes, size) == (1024, len(HEADER_1024))


@pytest.mark.parametrize("num_bytes", [0, 32, 127, 128, 2**20, 2**31 - 1])
def test_bloom_header_round_trip(num_bytes: int) -> None:
    blob = fmt.encode_bloom_filter_header(num_bytes)
    assert fmt.parse_bloom_filter_header(blob + b"trailing padding") == (
        fmt.BloomFilterHeader(num_bytes, "BLOCK", "XXHASH", "UNCOMPRESSED"),
        len(blob),
    )


@pytest.mark.parametrize("bad", [-1, 2**31, 1.0, True, "8"])
def test_encode_bloom_header_rejects_bad_sizes(bad: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        fmt.encode_bloom_filter_header(bad)


def test_bloom_header_truncated_at_every_offset() -> None:
    for cut in range(len(HEADER_1024)):
        with pytest.raises(CorruptFileError, match="cannot decode the Bloom filter header"):
            fmt.parse_bloom_filter_header(HEADER_1024[:cut])


def test_bloom_header_every_byte_every_value() -> None:
    for pos in range(len(HEADER_1024)):
        for value in range(256):
            bad = bytearray(HEADER_1024)
            bad[pos] = value
            result = only_corrupt(fmt.parse_bloom_filter_header, bytes(bad))
            if result is not None:
                header, size = result
                assert 0 < size <= len(bad)
                assert header.num_bytes >= 0


def _union(member_id: int, payload: bytes = b"\x00", ctype: int = 0x0C) -> bytes:
    """A union struct holding member ``member_id`` (short field header form if possible)."""
    head = (
        bytes([member_id << 4 | ctype])
        if member_id <= 15
        else bytes([ctype]) + compact.varint(member_id << 1)
    )
    return head + payload + b"\x00"


def _header(
    algorithm: bytes = b"\x1c\x00\x00",
    hash_: bytes = b"\x1c\x00\x00",
    compression: bytes = b"\x1c\x00\x00",
    num_bytes: int = 1024,
    extra: bytes = b"",
) -> bytes:
    return (
        b"\x15"
        + compact.varint(num_bytes << 1 if num_bytes >= 0 else (-num_bytes << 1) - 1)
        + b"\x1c"
        + algorithm
        + b"\x1c"
        + hash_
        + b"\x1c"
        + compression
        + extra
        + b"\x00"
    )


def test_bloom_header_builder_matches_encoder() -> None:
    assert _header() == HEADER_1024


def test_unknown_union_members_decode_as_unknown() -> None:
    blob = _header(algorithm=_union(2), hash_=_union(7), compression=_union(300))
    header, size = fmt.parse_bloom_filter_header(blob)
    assert header == fmt.BloomFilterHeader(1024, "UNKNOWN(2)", "UNKNOWN(7)", "UNKNOWN(300)")
    assert size == len(blob)


def test_unknown_member_with_payload_and_other_type() -> None:
    # A newer algorithm whose struct has fields, and a hash member that is an i32.
    algorithm = _union(3, payload=b"\x15\x04\x18\x03abc\x00")
    hash_ = _union(2, payload=b"\x08", ctype=0x05)
    header, _ = fmt.parse_bloom_filter_header(_header(algorithm=algorithm, hash_=hash_))
    assert (header.algorithm, header.hash) == ("UNKNOWN(3)", "UNKNOWN(2)")


def test_unknown_header_fields_are_skipped() -> None:
    # field 5 binary, 6 list<i32> of 3, 7 bool true, 8 map<i32, i32> of 1, 9 double
    extra = (
        b"\x18\x05hello"
        + b"\x19\x35\x02\x04\x06"
        + b"\x11"
        + b"\x1b\x01\x55\x02\x04"
        + b"\x17"
        + struct.pack("<d", 1.5)
    )
    blob = _header(extra=extra)
    header, size = fmt.parse_bloom_filter_header(blob + b"\xff" * 40)
    assert header.algorithm == "BLOCK" and header.num_bytes == 1024
    assert size == len(blob)


def test_known_member_inner_fields_are_skipped() -> None:
    header, _ = fmt.parse_bloom_filter_header(_header(algorithm=_union(1, payload=b"\x15\x02\x00")))
    assert header.algorithm == "BLOCK"


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (_header(algorithm=b"\x00"), "algorithm union has no member"),
        (_header(hash_=b"\x1c\x00\x1c\x00\x00"), "hash union has more than one member"),
        (_header(compression=_union(1, payload=b"", ctype=0x01)), "member UNCOMPRESSED"),
        (b"\x15\x80\x10\x00", "algorithm, hash, compression missing"),
        (_header(num_bytes=-32), "numBytes is negative"),
        (b"\x15" + compact.varint(2**33) + b"\x00", "not an i32"),
        (b"\x1e\x00", "invalid wire type 14"),
        (b"\x15" + b"\xff" * 11, "varint longer than 10 bytes"),
        (b"\x18" + compact.varint(2**40) + b"\x00", "do not fit|declared"),
        (b"\x19\xf6" + compact.varint(2**30) + b"\x00", "do not fit"),
        (b"\x1b" + compact.varint(2**30) + b"\x66\x00", "do not fit"),
        (b"\x1c" * 100 + b"\x00" * 101, "nesting deeper"),
        (b"\x0c" + compact.varint(2**20) + b"\x00", "out of i16 range"),
    ],
)
def test_malformed_bloom_headers(
    blob: bytes, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In a file more bytes follow (the bitset, the next chunk): the header is refused where it
    # goes wrong, without walking what its lengths and counts claim.
    readers: list[compact.CompactReader] = []

    class Recording(compact.CompactReader):
        def __init__(self, data: memoryview) -> None:
            super().__init__(data)
            readers.append(self)

    with monkeypatch.context() as patch:
        patch.setattr(compact, "CompactReader", Recording)
        with pytest.raises(CorruptFileError):
            fmt.parse_bloom_filter_header(blob + b"\x00" * 4096)
    (reader,) = readers
    assert reader.pos <= len(blob)
    with pytest.raises(CorruptFileError, match=message):
        fmt.parse_bloom_filter_header(blob)


def test_bloom_header_longer_than_the_limit() -> None:
    # An unknown binary field padding the header past MAX_BLOOM_FILTER_HEADER_SIZE.
    pad = fmt.MAX_BLOOM_FILTER_HEADER_SIZE
    blob = b"\x58" + compact.varint(pad) + b"\x00" * pad + HEADER_1024
    with pytest.raises(CorruptFileError, match="longer than"):
        fmt.parse_bloom_filter_header(blob)


def test_bloom_header_from_a_wider_memoryview() -> None:
    import array

    words = array.array("I", HEADER_1024 + b"\x00" * 4)  # 20 bytes as five uint32
    header, size = fmt.parse_bloom_filter_header(memoryview(words))
    assert (header.num_bytes, size) == (1024, 16)

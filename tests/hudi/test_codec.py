"""The serialised filter: what Hudi writes round-trips byte for byte, and hostile values (bad
Base64, truncation anywhere, flipped bytes, sizes that the bytes cannot hold) are located
errors raised within bounded memory, never a crash or an allocation of the size they claim."""

from __future__ import annotations

import base64
import struct
import tracemalloc

import pytest

from parquet_bloom import hudi
from parquet_bloom._hudi import codec
from parquet_bloom.errors import BloomFilterError, CorruptFileError, UnsupportedFileError
from tests.hudi import reference as ref


def _small(kind: str, keys: int = 40) -> hudi.HudiBloomFilter:
    return hudi.build_bloom_filter(
        [f"key-{i}" for i in range(keys)], kind, num_entries=15, fpp=0.05, max_entries=40
    )


@pytest.mark.parametrize("kind", hudi.TYPES)
def test_a_value_round_trips_byte_for_byte(kind: str) -> None:
    f = _small(kind)
    value = f.to_footer_value()
    g = hudi.HudiBloomFilter.from_footer_value(value, kind if kind != "SIMPLE" else None)
    assert g.to_footer_value() == value
    assert (g.type, g.num_hashes, g.vector_size, g.rows) == (
        f.type,
        f.num_hashes,
        f.vector_size,
        f.rows,
    )
    probes = [f"key-{i}" for i in range(200)]
    assert (g.might_contain_many(probes) == f.might_contain_many(probes)).all()


def test_the_bytes_are_the_references() -> None:
    # The layout written from Hudi's write() methods (tests/hudi/reference.py).
    keys = [f"key-{i}".encode() for i in range(40)]
    simple = ref.Row(113, 4)
    dynamic = ref.Dynamic(113, 4, 15, 40)
    for k in keys:
        simple.add(k)
        dynamic.add(k)
    f = hudi.HudiBloomFilter("SIMPLE", 4, 113)
    f.add_many(keys)
    g = hudi.HudiBloomFilter("DYNAMIC_V0", 4, 113, keys_per_row=15, max_entries=40)
    g.add_many(keys)
    assert f.to_bytes() == simple.write()
    assert g.to_bytes() == dynamic.write()


def test_type_codes_compare_ignoring_case() -> None:
    value = _small("DYNAMIC_V0").to_footer_value()
    assert hudi.HudiBloomFilter.from_footer_value(value, "dynamic_v0").type == "DYNAMIC_V0"
    with pytest.raises(UnsupportedFileError, match="unknown Hudi Bloom filter type"):
        hudi.HudiBloomFilter.from_footer_value(value, "DYNAMIC_V1")


def test_bits_past_the_vector_are_cleared_as_hudi_rewrites_them() -> None:
    f = _small("SIMPLE")  # 113 bits: 7 spare bits in the last byte
    raw = bytearray(f.to_bytes())
    assert f.vector_size % 8
    raw[-1] |= 0xFF & ~(0xFF >> (8 - f.vector_size % 8))
    g = hudi.HudiBloomFilter.from_bytes(bytes(raw), "SIMPLE")
    assert g.to_bytes() == f.to_bytes()


# -- hostile values ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", hudi.TYPES)
def test_every_truncation_is_a_located_error(kind: str) -> None:
    raw = _small(kind).to_bytes()
    for end in range(len(raw)):
        with pytest.raises(CorruptFileError) as caught:
            hudi.HudiBloomFilter.from_bytes(raw[:end], kind, source="f.parquet")
        assert caught.value.source == "f.parquet"
        assert caught.value.offset is not None


@pytest.mark.parametrize("kind", hudi.TYPES)
def test_bytes_left_over_are_an_error(kind: str) -> None:
    raw = _small(kind).to_bytes()
    with pytest.raises(CorruptFileError, match="needs"):
        hudi.HudiBloomFilter.from_bytes(raw + b"\0", kind)


@pytest.mark.parametrize("kind", hudi.TYPES)
def test_flipped_bytes_decode_or_fail_cleanly(kind: str) -> None:
    raw = _small(kind).to_bytes()
    head = codec.HEADER_SIZE + (12 + codec.HEADER_SIZE if kind == "DYNAMIC_V0" else 0)
    for at in range(min(len(raw), head + 8)):
        for flip in (0x01, 0x80, 0xFF):
            damaged = bytearray(raw)
            damaged[at] ^= flip
            try:
                f = hudi.HudiBloomFilter.from_bytes(bytes(damaged), kind)
            except BloomFilterError:
                continue
            f.might_contain_many(["key-1", "other"])  # whatever it says, it answers


def _value(*parts: bytes) -> str:
    return base64.b64encode(b"".join(parts)).decode()


HEADER = struct.Struct(">iibi")


@pytest.mark.parametrize(
    ("raw", "kind", "error", "match"),
    [
        (HEADER.pack(-1, 30, 1, 2**31 - 1) + b"\0" * 16, "SIMPLE", CorruptFileError, "needs"),
        (HEADER.pack(-1, 30, 1, 0), "SIMPLE", CorruptFileError, "vector of 0 bits"),
        (HEADER.pack(-1, 30, 1, -8) + b"\0", "SIMPLE", CorruptFileError, "vector of -8"),
        (HEADER.pack(-1, 0, 1, 8) + b"\0", "SIMPLE", CorruptFileError, "0 hash functions"),
        (HEADER.pack(-1, -3, 1, 8) + b"\0", "SIMPLE", CorruptFileError, "-3 hash functions"),
        (HEADER.pack(-1, 2**31 - 1, 1, 8) + b"\0", "SIMPLE", CorruptFileError, "hash functions"),
        (HEADER.pack(-1, 3, 0, 8) + b"\0", "SIMPLE", UnsupportedFileError, "Jenkins"),
        (HEADER.pack(-1, 3, 7, 8) + b"\0", "SIMPLE", CorruptFileError, "hash type 7"),
        (struct.pack(">ii", 3, 8) + b"\0", "SIMPLE", UnsupportedFileError, "unversioned"),
        (HEADER.pack(-2, 3, 1, 8) + b"\0", "SIMPLE", UnsupportedFileError, "version -2"),
        (
            HEADER.pack(-1, 3, 1, 8) + struct.pack(">iii", 10, 1, 10**9) + b"\0" * 64,
            "DYNAMIC_V0",
            CorruptFileError,
            "1000000000 rows",
        ),
        (
            HEADER.pack(-1, 3, 1, 2**31 - 1) + struct.pack(">iii", 10, 1, 2**31 - 1),
            "DYNAMIC_V0",
            CorruptFileError,
            "rows",
        ),
        (
            HEADER.pack(-1, 3, 1, 8) + struct.pack(">iii", 10, 1, 0),
            "DYNAMIC_V0",
            CorruptFileError,
            "0 rows",
        ),
        (
            HEADER.pack(-1, 3, 1, 8)
            + struct.pack(">iii", 10, 1, 1)
            + HEADER.pack(-1, 4, 1, 8)
            + b"\0",
            "DYNAMIC_V0",
            CorruptFileError,
            "row 0 has 4 hashes",
        ),
        (HEADER.pack(-1, 3, 1, 8)[:9], "SIMPLE", CorruptFileError, "header"),
    ],
)
def test_hostile_values(raw: bytes, kind: str, error: type[Exception], match: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(error, match=match) as caught:
            hudi.HudiBloomFilter.from_footer_value(_value(raw), kind, source="x.parquet")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.source == "x.parquet"  # type: ignore[attr-defined]
    assert peak < 1 << 20, f"{peak:,} bytes allocated for a {len(raw)}-byte value"


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("not base64!", "character 3"),
        ("/////wAAAB", "Incorrect padding|number of data characters"),
        ("////\n////", "character 4"),
        ("é", "character 0"),
    ],
)
def test_bad_base64(value: str, match: str) -> None:
    with pytest.raises(CorruptFileError, match=match) as caught:
        hudi.HudiBloomFilter.from_footer_value(value, source="y.parquet")
    assert caught.value.source == "y.parquet"


def test_millions_of_rows_cost_only_their_bytes() -> None:
    # A value with many rows is decoded in memory proportional to its own bytes.
    row = HEADER.pack(-1, 2, 1, 8) + b"\xff"
    raw = HEADER.pack(-1, 2, 1, 8) + struct.pack(">iii", 1, 1, 200_000) + row * 200_000
    tracemalloc.start()
    try:
        f = hudi.HudiBloomFilter.from_bytes(raw, "DYNAMIC_V0")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f.rows == 200_000
    assert peak < 8 * len(raw)
    assert f.might_contain("anything")

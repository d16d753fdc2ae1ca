"""Tests for parquet_bloom.hashing.

Every expected hash here is ``xxhash.xxh64_intdigest`` of bytes built in this file with
``struct``/``int.to_bytes``, independently of the module's encoders. The Arrow type mapping
is checked against what pyarrow.parquet really writes: the physical type and width from the
file's metadata, and the file's own Bloom filter, which must contain every hash we compute
(a hash of the wrong bytes would be missed with near certainty).
"""

from __future__ import annotations

import datetime
import decimal
import io
import itertools
import math
import struct
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from parquet_bloom._format import Type
from parquet_bloom._plain import (
    PHYSICAL_TYPES,
    hash_value,
    hash_values,
    plain_encode,
    xxh64_fixed,
    xxh64_variable,
)
from tests.reference import ReferenceFilter

# Every test here runs with the compiled kernels and on numpy alone (see conftest.py).
pytestmark = pytest.mark.usefixtures("implementation")

SETTINGS = settings(max_examples=150, deadline=None)


def xx(blob: bytes) -> int:
    return xxhash.xxh64_intdigest(blob, seed=0)


def xxs(blobs: list[bytes]) -> list[int]:
    return [xx(b) for b in blobs]


def encode(physical_type: str, value: Any, type_length: int | None = None) -> bytes:
    """The PLAIN bytes of one stored value, built the obvious way (no module code)."""
    if physical_type == "INT32":
        return struct.pack("<I", value & 0xFFFFFFFF)
    if physical_type == "INT64":
        return struct.pack("<Q", value & 0xFFFFFFFFFFFFFFFF)
    if physical_type == "FLOAT":
        return struct.pack("<f", value)
    if physical_type == "DOUBLE":
        return struct.pack("<d", value)
    if physical_type == "BYTE_ARRAY":
        return value.encode() if isinstance(value, str) else bytes(value)
    if physical_type in ("FIXED_LEN_BYTE_ARRAY", "INT96"):
        assert len(value) == (12 if physical_type == "INT96" else type_length)
        return bytes(value)
    raise AssertionError(physical_type)


def as_list(hashes: np.ndarray) -> list[int]:
    assert hashes.dtype == np.uint64
    return [int(h) for h in hashes]


# ---- the XXH64 kernels -------------------------------------------------------------------


@SETTINGS
@given(st.data())
def test_xxh64_fixed_matches_xxhash(data: st.DataObject) -> None:
    width = data.draw(st.integers(0, 40))
    rows = data.draw(st.lists(st.binary(min_size=width, max_size=width), max_size=12))
    matrix = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), width)
    assert as_list(xxh64_fixed(matrix)) == xxs(rows)


@SETTINGS
@given(
    st.lists(st.binary(max_size=200), max_size=25),
    st.binary(max_size=9),
    st.binary(max_size=9),
    st.sampled_from([np.int32, np.int64]),
)
def test_xxh64_variable_matches_xxhash(
    values: list[bytes], before: bytes, after: bytes, dtype: type
) -> None:
    lengths = [len(v) for v in values]
    offsets = np.cumsum([len(before), *lengths]).astype(dtype)
    buffer = before + b"".join(values) + after
    assert as_list(xxh64_variable(buffer, offsets)) == xxs(values)
    as_array = np.frombuffer(buffer, dtype=np.uint8)
    assert as_list(xxh64_variable(as_array, offsets)) == xxs(values)


def test_xxh64_variable_many_lengths_and_chunks() -> None:
    # More values than one internal chunk, every tail length, stripes, and values long
    # enough to take the one-call-per-value path (4 KiB and up).
    rng = np.random.default_rng(7)
    lengths = np.concatenate(
        [rng.integers(0, 80, 40_000), [4095, 4096, 5000, 70_000, 31, 32, 33, 0]]
    )
    rng.shuffle(lengths)
    buffer = rng.integers(0, 256, int(lengths.sum()) + 3, dtype=np.uint8)
    offsets = np.concatenate([[3], 3 + np.cumsum(lengths)])
    got = xxh64_variable(buffer, offsets)
    raw = buffer.tobytes()
    assert as_list(got) == [xx(raw[a:b]) for a, b in itertools.pairwise(offsets)]


@pytest.mark.parametrize("width", [1, 2, 4, 8, 12, 16, 33, 70])
def test_xxh64_fixed_many_rows(width: int) -> None:
    rows = np.random.default_rng(width).integers(0, 256, (70_001, width), dtype=np.uint8)
    got = xxh64_fixed(rows)
    check = range(0, 70_001, 997)
    assert [int(got[i]) for i in check] == [xx(rows[i].tobytes()) for i in check]
    strided = np.asfortranarray(rows[:100])
    assert as_list(xxh64_fixed(strided)) == xxs([r.tobytes() for r in rows[:100]])
    # As a page of length-prefixed strings of one length lays them out: a row every 4 + width
    # bytes, over many of the parts the rows are copied to lanes in.
    framed = np.zeros((70_001, 4 + width), dtype=np.uint8)
    framed[:, 4:] = rows
    assert (xxh64_fixed(framed[:, 4:]) == got).all()


@SETTINGS
@given(st.data())
def test_xxh64_fixed_rows_in_any_layout_match_xxhash(data: st.DataObject) -> None:
    # Rows a stride apart inside a larger buffer (as a page of strings of one length lays them
    # out), reversed, or with a column step: each is hashed where it lies or copied first.
    width = data.draw(st.integers(0, 70))
    count = data.draw(st.integers(0, 20))
    gap = data.draw(st.integers(0, 9))
    offset = data.draw(st.integers(0, 7))
    stride = width + gap
    raw = data.draw(st.binary(min_size=offset + count * stride, max_size=offset + count * stride))
    buffer = np.frombuffer(raw + b"\0" * width, dtype=np.uint8)
    rows = np.ndarray((count, width), np.uint8, buffer=buffer, offset=offset, strides=(stride, 1))
    expected = xxs([r.tobytes() for r in rows])
    assert as_list(xxh64_fixed(rows)) == expected
    assert as_list(xxh64_fixed(rows[::-1])) == expected[::-1]
    assert as_list(xxh64_fixed(rows[:, ::2])) == xxs([r.tobytes() for r in rows[:, ::2]])


def test_kernel_argument_errors() -> None:
    with pytest.raises(TypeError, match="2-D uint8"):
        xxh64_fixed(np.zeros(4, dtype=np.uint8))
    with pytest.raises(TypeError, match="2-D uint8"):
        xxh64_fixed(np.zeros((2, 2), dtype=np.int8))
    with pytest.raises(ValueError, match="non-decreasing"):
        xxh64_variable(b"abc", np.array([0, 2, 1]))
    with pytest.raises(ValueError, match="within"):
        xxh64_variable(b"abc", np.array([0, 4]))
    assert xxh64_variable(b"", np.array([0])).shape == (0,)


# ---- each physical type, from Python, numpy and pyarrow ----------------------------------

INT32_VALUES = [0, 1, -1, 2**31 - 1, -(2**31), 2**32 - 1, 123456789]
INT64_VALUES = [0, 1, -1, 2**63 - 1, -(2**63), 2**64 - 1, 2**40 + 3]
FLOATS = [0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, 3.4e38, 1e-45]


def test_int32_from_python_numpy_and_arrow() -> None:
    want = xxs([encode("INT32", v) for v in INT32_VALUES])
    assert as_list(hash_values(INT32_VALUES, "INT32")) == want
    assert as_list(hash_values(np.array(INT32_VALUES, dtype=np.int64), "INT32")) == want
    in_int32 = [v for v in INT32_VALUES if v < 2**31]
    want32 = xxs([encode("INT32", v) for v in in_int32])
    for dtype in (np.int32, ">i4"):
        assert as_list(hash_values(np.array(in_int32, dtype=dtype))) == want32
    assert as_list(hash_values(pa.array(in_int32, pa.int32()))) == want32
    assert as_list(hash_values(pa.array(INT32_VALUES, pa.int64()), "INT32")) == want


@pytest.mark.parametrize(
    ("dtype", "values"),
    [
        (np.int8, [-128, -1, 0, 127]),
        (np.int16, [-32768, -1, 0, 32767]),
        (np.uint8, [0, 1, 255]),
        (np.uint16, [0, 1, 65535]),
        (np.uint32, [0, 2**31, 2**32 - 1]),
    ],
)
def test_narrow_integers_widen_to_int32(dtype: type, values: list[int]) -> None:
    # Sign-extended when signed, zero-extended when unsigned; uint32 by bit pattern.
    want = xxs([encode("INT32", v) for v in values])
    assert as_list(hash_values(np.array(values, dtype=dtype))) == want
    assert as_list(hash_values(np.array(values, dtype=dtype), "INT32")) == want
    assert as_list(hash_values([dtype(v) for v in values])) == want
    want64 = xxs([encode("INT64", v) for v in values])
    assert as_list(hash_values(np.array(values, dtype=dtype), "INT64")) == want64


def test_int64_from_python_numpy_and_arrow() -> None:
    want = xxs([encode("INT64", v) for v in INT64_VALUES])
    assert as_list(hash_values(INT64_VALUES)) == want
    assert as_list(hash_values(INT64_VALUES, "int64")) == want
    signed = [v for v in INT64_VALUES if v < 2**63]
    unsigned = [v for v in INT64_VALUES if v >= 0]
    assert as_list(hash_values(np.array(signed))) == xxs([encode("INT64", v) for v in signed])
    got = hash_values(np.array(unsigned, dtype=np.uint64))
    assert as_list(got) == xxs([encode("INT64", v) for v in unsigned])
    got = hash_values(pa.array(unsigned, pa.uint64()))
    assert as_list(got) == xxs([encode("INT64", v) for v in unsigned])
    assert as_list(hash_values(pa.array([5, None, -7], pa.int32()), "INT64")) == xxs(
        [encode("INT64", 5), encode("INT64", -7)]
    )


def test_strided_and_multidimensional_numpy() -> None:
    base = np.arange(-50, 50, dtype=np.int64)
    want = xxs([encode("INT64", v) for v in range(-50, 50, 3)])
    assert as_list(hash_values(base[::3])) == want
    grid = base.reshape(10, 10)
    assert as_list(hash_values(grid.T)) == xxs([encode("INT64", int(v)) for v in grid.T.ravel()])
    text = np.array([["ab", "c"], ["", "déf"]])
    assert as_list(hash_values(text[:, ::-1])) == xxs([b"c", b"ab", "déf".encode(), b""])


def test_float_and_double() -> None:
    double = xxs([encode("DOUBLE", v) for v in FLOATS])
    single = xxs([encode("FLOAT", v) for v in FLOATS])
    assert as_list(hash_values(FLOATS)) == double
    assert as_list(hash_values(FLOATS, "DOUBLE")) == double
    assert as_list(hash_values(np.array(FLOATS))) == double
    assert as_list(hash_values(np.array(FLOATS, dtype=">f8"))) == double
    assert as_list(hash_values(FLOATS, "FLOAT")) == single
    assert as_list(hash_values(np.array(FLOATS, dtype=np.float32))) == single
    assert as_list(hash_values(pa.array(FLOATS, pa.float32()))) == single
    assert as_list(hash_values(pa.array(FLOATS, pa.float64()))) == double
    # -0.0 and +0.0 are different bits, so different hashes.
    assert hash_value(0.0) != hash_value(-0.0)
    # Integers are accepted for floating columns, converted as float(value).
    assert as_list(hash_values([3, -1], "DOUBLE")) == xxs(
        [encode("DOUBLE", 3.0), encode("DOUBLE", -1.0)]
    )
    assert as_list(hash_values(np.array([3], np.int16), "FLOAT")) == xxs([encode("FLOAT", 3.0)])


def test_nan_bits_are_kept() -> None:
    quiet = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    negative = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]
    want = xxs([struct.pack("<d", quiet), struct.pack("<d", negative)])
    assert as_list(hash_values([quiet, negative])) == want
    assert as_list(hash_values(np.array([quiet, negative]))) == want
    half_nan = np.array([0x7E01], dtype=np.uint16).view(np.float16)
    assert as_list(hash_values(half_nan)) == [xx(b"\x01\x7e")]


def test_byte_array_from_python() -> None:
    values = ["", "a", "héllo wörld", "日本語", "😀 emoji", "x" * 100, "nul\x00inside"]
    want = xxs([v.encode() for v in values])
    assert as_list(hash_values(values)) == want
    assert as_list(hash_values(values, "BYTE_ARRAY")) == want
    raw = [b"", b"\x00", b"\xff" * 40, b"abc\x00"]
    want_raw = xxs(raw)
    assert as_list(hash_values(raw)) == want_raw
    assert as_list(hash_values([bytearray(b) for b in raw])) == want_raw
    assert as_list(hash_values([memoryview(b) for b in raw])) == want_raw
    assert as_list(hash_values([np.bytes_(b"ab"), np.str_("cd")])) == xxs([b"ab", b"cd"])
    assert as_list(hash_values(memoryview(b"one value"))) == [xx(b"one value")]
    assert as_list(hash_values("one value")) == [xx(b"one value")]


def test_byte_array_from_numpy() -> None:
    text = ["", "a", "héllo", "日本語", "😀", "mid\x00nul", "trailing\x00"]
    # numpy's own semantics: a 'U'/'S' value ends before its trailing NULs.
    want = xxs([t.rstrip("\x00").encode() for t in text])
    assert as_list(hash_values(np.array(text))) == want
    assert as_list(hash_values(np.array(text, dtype=">U12"))) == want
    # Python strings in an object array keep every character.
    assert as_list(hash_values(np.array(text, dtype=object))) == xxs([t.encode() for t in text])
    assert as_list(hash_values(np.array(["abc", "de"]), "BYTE_ARRAY")) == xxs([b"abc", b"de"])
    raw = [b"", b"a", b"a\x00b", b"trail\x00\x00", b"\xff\xfe"]
    want_raw = xxs([r.rstrip(b"\x00") for r in raw])
    assert as_list(hash_values(np.array(raw))) == want_raw
    wide = np.array(raw, dtype="S300")  # far apart: hashed without copying the padding
    assert as_list(hash_values(wide)) == want_raw
    assert as_list(hash_values(np.array(["x", None, "y"], dtype=object))) == xxs([b"x", b"y"])


@pytest.mark.parametrize(
    "arrow_type",
    [
        pa.string(),
        pa.large_string(),
        pa.string_view(),
        pa.binary(),
        pa.large_binary(),
        pa.binary_view(),
    ],
)
def test_byte_array_from_arrow(arrow_type: pa.DataType) -> None:
    text = ["a", None, "héllo", "", "a string longer than twelve bytes", None, "日本語"] * 3
    is_text = arrow_type in (pa.string(), pa.large_string(), pa.string_view())
    values = [t.encode() if t is not None and not is_text else t for t in text]
    arr = pa.array(values, arrow_type)
    expected = [t.encode() for t in text if t is not None]
    assert as_list(hash_values(arr)) == xxs(expected)
    sliced = arr.slice(2, 13)
    assert as_list(hash_values(sliced)) == xxs([t.encode() for t in text[2:15] if t is not None])
    chunked = pa.chunked_array([arr.slice(0, 4), arr.slice(4), arr.slice(0, 0)])
    assert as_list(hash_values(chunked)) == xxs(expected)


def test_fixed_len_byte_array() -> None:
    values = [b"abcd", b"\x00\x00\x00\x00", b"\xff\x00\xff\x00"]
    want = xxs(values)
    assert as_list(hash_values(values, "FIXED_LEN_BYTE_ARRAY", type_length=4)) == want
    # Fixed width keeps every byte of an 'S' value, trailing NULs included.
    assert (
        as_list(hash_values(np.array(values, dtype="S4"), "FIXED_LEN_BYTE_ARRAY", type_length=4))
        == want
    )
    rows = np.frombuffer(b"".join(values), dtype=np.uint8).reshape(3, 4)
    assert as_list(hash_values(rows, "FIXED_LEN_BYTE_ARRAY", type_length=4)) == want
    arr = pa.array([values[0], None, values[1], values[2]], pa.binary(4))
    assert as_list(hash_values(arr)) == want
    assert as_list(hash_values(arr.slice(2))) == want[1:]
    assert as_list(hash_values(arr, "FIXED_LEN_BYTE_ARRAY", type_length=4)) == want
    assert as_list(hash_values(["wxyz"], "FIXED_LEN_BYTE_ARRAY", type_length=4)) == [xx(b"wxyz")]
    width16 = [bytes(range(i, i + 16)) for i in range(5)]
    got = hash_values(width16, "fixed_len_byte_array", type_length=16)
    assert as_list(got) == xxs(width16)


def test_int96() -> None:
    values = [bytes(range(12)), b"\x00" * 12, b"\xff" * 12]
    want = xxs(values)
    assert as_list(hash_values(values, "INT96")) == want
    assert as_list(hash_values(np.array(values, dtype="S12"), "INT96")) == want
    assert as_list(hash_values(pa.array(values, pa.binary(12)), "INT96")) == want


def test_dictionary_arrays() -> None:
    words = ["b", "a", None, "c", "a", "b", None, "a"]
    arr = pa.array(words).dictionary_encode()
    assert as_list(hash_values(arr)) == xxs([w.encode() for w in words if w is not None])
    assert as_list(hash_values(arr.slice(3, 4))) == xxs([b"c", b"a", b"b"])
    # A dictionary holding a null entry, referenced by an index.
    with_null = pa.DictionaryArray.from_arrays(
        pa.array([0, 1, 2, None, 1], pa.int8()), pa.array(["x", None, "z"])
    )
    assert as_list(hash_values(with_null)) == xxs([b"x", b"z"])
    ints = pa.array([7, 7, -1, None], pa.int64()).dictionary_encode()
    assert as_list(hash_values(ints)) == xxs([encode("INT64", v) for v in (7, 7, -1)])
    assert as_list(hash_values(ints, "INT32")) == xxs([encode("INT32", v) for v in (7, 7, -1)])
    chunked = pa.chunked_array([arr, arr.slice(5)])
    assert len(hash_values(chunked)) == 6 + 2


def test_nulls_and_empties() -> None:
    assert hash_values([]).shape == (0,)
    assert hash_values([None, None], "INT64").shape == (0,)
    assert hash_values(None).shape == (0,)
    assert hash_values(np.array([], dtype=np.int64)).shape == (0,)
    assert hash_values(pa.array([None, None], pa.null())).shape == (0,)
    assert hash_values(pa.array([], pa.string())).shape == (0,)
    assert hash_values(pa.chunked_array([], pa.int32())).shape == (0,)
    assert as_list(hash_values(pa.array([None, 3, None], pa.int64()))) == [xx(encode("INT64", 3))]


def test_pandas_series_hash_as_pyarrow_writes_them() -> None:
    import pandas as pd

    # pyarrow.parquet writes pandas' missing values (None, NaN) as nulls: not hashed.
    assert as_list(hash_values(pd.Series(["a", None, "b"]))) == xxs([b"a", b"b"])
    assert as_list(hash_values(pd.Series([1.5, math.nan]))) == [xx(encode("DOUBLE", 1.5))]
    assert as_list(hash_values(pd.Series([1, 2], dtype="int32"))) == xxs(
        [encode("INT32", 1), encode("INT32", 2)]
    )


def test_mixed_python_values_keep_their_order() -> None:
    values = [1, "a", None, 2.5, b"b", np.int32(3), np.float32(1.5), None, 7]
    present = [v for v in values if v is not None]
    assert as_list(hash_values(values)) == [hash_value(v) for v in present]
    assert hash_value(np.int32(3)) == xx(encode("INT32", 3))
    assert hash_value(np.float32(1.5)) == xx(encode("FLOAT", 1.5))
    assert hash_value(np.float16(1.5)) == xx(struct.pack("<e", 1.5))
    assert as_list(hash_values(v for v in (1, 2))) == xxs([encode("INT64", 1), encode("INT64", 2)])


# ---- the Arrow type mapping, checked against files pyarrow writes --------------------------


def bloom_contains(bitset: bytes, h: int) -> bool:
    return ReferenceFilter.from_bytes(bitset).find(h)


def written(arr: pa.Array | pa.ChunkedArray, **options: Any) -> tuple[str, int | None, bytes]:
    """Write ``arr`` with a Bloom filter; return its physical type, width and filter bits."""
    sink = io.BytesIO()
    bloom = {"c": {"ndv": 1000, "fpp": 0.001}}
    pq.write_table(pa.table({"c": arr}), sink, bloom_filter_options=bloom, **options)
    raw = sink.getvalue()
    meta = pq.ParquetFile(io.BytesIO(raw))
    column = meta.metadata.row_group(0).column(0)
    physical = column.physical_type
    width = meta.schema.column(0).length if physical == "FIXED_LEN_BYTE_ARRAY" else None
    start, length = column.bloom_filter_offset, column.bloom_filter_length
    # The filter is a small Thrift header then a power-of-two bitset (>= 32 bytes).
    bits = 1 << (length.bit_length() - 1)
    return physical, width, raw[start + length - bits : start + length]


def _ints(arr: pa.Array, to: pa.DataType) -> list[int]:
    return [v for v in arr.cast(to).to_pylist() if v is not None]


def stored(arr: pa.Array, width: int | None) -> list[Any]:
    """The values as pyarrow.parquet stores them, derived here without the module."""
    t = arr.type
    if isinstance(t, pa.BaseExtensionType):
        return stored(arr.storage, width)
    if pa.types.is_dictionary(t):
        return stored(arr.dictionary_decode(), width)
    if pa.types.is_float16(t):
        return [struct.pack("<e", v) for v in arr.to_pylist() if v is not None]
    if pa.types.is_decimal(t):
        assert width is not None
        exact = decimal.Context(prec=100)
        unscaled = [int(v.scaleb(t.scale, exact)) for v in arr.to_pylist() if v is not None]
        return [u.to_bytes(width, "big", signed=True) for u in unscaled]
    if pa.types.is_date32(t):
        epoch = datetime.date(1970, 1, 1)
        return [(v - epoch).days for v in arr.to_pylist() if v is not None]
    if pa.types.is_date64(t):
        day = 86_400_000
        return [abs(ms) // day * (1 if ms >= 0 else -1) for ms in _ints(arr, pa.int64())]
    if pa.types.is_time32(t):
        return [v * (1000 if t.unit == "s" else 1) for v in _ints(arr, pa.int32())]
    if pa.types.is_timestamp(t):
        return [v * (1000 if t.unit == "s" else 1) for v in _ints(arr, pa.int64())]
    if pa.types.is_time64(t) or pa.types.is_duration(t):
        return _ints(arr, pa.int64())
    return [v for v in arr.to_pylist() if v is not None]


def _decimal(unscaled: int, scale: int) -> decimal.Decimal:
    """unscaled * 10**-scale, exactly (Decimal arithmetic would round to 28 digits)."""
    return decimal.Decimal(unscaled).scaleb(-scale, decimal.Context(prec=100))


ARROW_CASES: list[tuple[str, Callable[[], pa.Array]]] = [
    ("int8", lambda: pa.array([-128, -1, None, 0, 5, 127], pa.int8())),
    ("int16", lambda: pa.array([-32768, -1, None, 300, 32767], pa.int16())),
    ("int32", lambda: pa.array([-(2**31), -1, None, 7, 2**31 - 1], pa.int32())),
    ("int64", lambda: pa.array([-(2**63), -1, None, 7, 2**63 - 1], pa.int64())),
    ("uint8", lambda: pa.array([0, 1, None, 200, 255], pa.uint8())),
    ("uint16", lambda: pa.array([0, 1, None, 40000, 65535], pa.uint16())),
    ("uint32", lambda: pa.array([0, 1, None, 2**31, 2**32 - 1], pa.uint32())),
    ("uint64", lambda: pa.array([0, 1, None, 2**63, 2**64 - 1], pa.uint64())),
    ("float16", lambda: pa.array(np.array([0.5, -0.0, 1.0, 65504.0, -2.5], np.float16))),
    ("float32", lambda: pa.array([1.5, -0.0, None, 3.0e38, 1e-45], pa.float32())),
    ("float64", lambda: pa.array([1.5, -0.0, None, math.inf, 5e-324], pa.float64())),
    ("date32", lambda: pa.array([0, -1, None, 19000, -719162], pa.date32())),
    (
        "date64",
        lambda: pa.array(
            [0, 86_400_000, 129_600_000, -1, -86_400_000, -86_400_001, None], pa.date64()
        ),
    ),
    ("time32[s]", lambda: pa.array([0, 1, None, 86399], pa.time32("s"))),
    ("time32[ms]", lambda: pa.array([0, 1, None, 86_399_999], pa.time32("ms"))),
    ("time64[us]", lambda: pa.array([0, 1, None, 86_399_999_999], pa.time64("us"))),
    ("time64[ns]", lambda: pa.array([0, 1, None, 86_399_999_999_999], pa.time64("ns"))),
    *[
        (
            f"timestamp[{unit}, {tz}]",
            lambda unit=unit, tz=tz: pa.array(
                [0, 1, -1, None, 1_700_000_000, -2_000_000_000], pa.timestamp(unit, tz)
            ),
        )
        for unit in ("s", "ms", "us", "ns")
        for tz in (None, "UTC", "Asia/Tokyo")
    ],
    *[
        (
            f"duration[{unit}]",
            lambda unit=unit: pa.array([0, 1, -1, None, 10**12], pa.duration(unit)),
        )
        for unit in ("s", "ms", "us", "ns")
    ],
    *[
        (
            f"decimal{bits}({precision}, {scale})",
            lambda make=make, precision=precision, scale=scale: pa.array(
                [
                    _decimal(10**precision - 1, scale),
                    _decimal(-(10**precision) + 1, scale),
                    _decimal(0, scale),
                    None,
                    _decimal(-1, scale),
                    _decimal(min(12, 10**precision - 1), scale),
                ],
                make(precision, scale),
            ),
        )
        for bits, make, precisions in (
            (32, pa.decimal32, (1, 5, 9)),
            (64, pa.decimal64, (3, 10, 18)),
            (128, pa.decimal128, (1, 2, 3, 4, 9, 10, 18, 19, 20, 30, 38)),
            (256, pa.decimal256, (10, 39, 40, 60, 76)),
        )
        for precision in precisions
        for scale in (0, min(2, precision))
    ],
    ("string", lambda: pa.array(["a", None, "héllo", "", "x" * 40], pa.string())),
    ("large_string", lambda: pa.array(["a", None, "héllo", ""], pa.large_string())),
    (
        "string_view",
        lambda: pa.array(["a", None, "longer than twelve bytes", ""], pa.string_view()),
    ),
    ("binary", lambda: pa.array([b"a", None, b"\x00\xff", b""], pa.binary())),
    ("large_binary", lambda: pa.array([b"a", None, b"\x00\xff"], pa.large_binary())),
    ("binary_view", lambda: pa.array([b"a", None, b"\x00" * 20], pa.binary_view())),
    ("fixed_size_binary[5]", lambda: pa.array([b"abcde", None, b"\x00" * 5], pa.binary(5))),
    (
        "uuid",
        lambda: pa.ExtensionArray.from_storage(
            pa.uuid(), pa.array([bytes(range(16)), None, b"\xff" * 16], pa.binary(16))
        ),
    ),
    ("dictionary<string>", lambda: pa.array(["b", "a", None, "b"]).dictionary_encode()),
    ("dictionary<int64>", lambda: pa.array([5, -5, None, 5], pa.int64()).dictionary_encode()),
    (
        "dictionary<fixed_size_binary[3]>",
        lambda: pa.array([b"abc", b"xyz", None, b"abc"], pa.binary(3)).dictionary_encode(),
    ),
    (
        "dictionary<date64>",
        lambda: pa.array([86_400_000 * 3, None], pa.date64()).dictionary_encode(),
    ),
    ("null", lambda: pa.array([None, None, None], pa.null())),
]


@pytest.mark.parametrize(("name", "make"), ARROW_CASES, ids=[c[0] for c in ARROW_CASES])
@pytest.mark.parametrize("sliced", [False, True], ids=["whole", "sliced"])
def test_arrow_inference_matches_pyarrow_parquet(
    name: str, make: Callable[[], pa.Array], sliced: bool
) -> None:
    arr = make()
    if sliced:
        arr = arr.slice(1, len(arr) - 1)
    physical, width, bits = written(arr)
    values = stored(arr, width)
    got = hash_values(arr)
    # 1. The bytes as stored, encoded here, hashed by xxhash.
    assert as_list(got) == xxs([encode(physical, v, width) for v in values]), name
    # 2. The same through the module's explicit-type path.
    assert as_list(hash_values(values, physical, type_length=width)) == as_list(got)
    # 3. Every hash is in the Bloom filter pyarrow wrote for this very column.
    assert all(bloom_contains(bits, h) for h in as_list(got)), name
    # 4. Chunked, the same.
    chunked = pa.chunked_array([arr.slice(0, 1), arr.slice(1)], type=arr.type)
    assert as_list(hash_values(chunked)) == as_list(got)


def test_physical_types_pyarrow_writes() -> None:
    """The mapping the module implements, as pyarrow 26 writes it (format 2.6)."""
    expect = {
        pa.int8(): ("INT32", None),
        pa.uint32(): ("INT32", None),
        pa.uint64(): ("INT64", None),
        pa.float16(): ("FIXED_LEN_BYTE_ARRAY", 2),
        pa.date64(): ("INT32", None),
        pa.time32("s"): ("INT32", None),
        pa.timestamp("s"): ("INT64", None),
        pa.duration("s"): ("INT64", None),
        pa.decimal128(9, 2): ("FIXED_LEN_BYTE_ARRAY", 4),
        pa.decimal128(19, 0): ("FIXED_LEN_BYTE_ARRAY", 9),
        pa.decimal256(40, 0): ("FIXED_LEN_BYTE_ARRAY", 17),
        pa.decimal32(5, 0): ("FIXED_LEN_BYTE_ARRAY", 3),
        pa.string_view(): ("BYTE_ARRAY", None),
        pa.uuid(): ("FIXED_LEN_BYTE_ARRAY", 16),
        pa.null(): ("INT32", None),
    }
    for arrow_type, want in expect.items():
        arr = pa.nulls(1, arrow_type)
        physical, width, _ = written(arr)
        assert (physical, width) == want, arrow_type


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_int96_timestamps_match_pyarrow(unit: str) -> None:
    raw = [0, 1, -1, 1_700_000_000, -2_000_000_000, 123_456_789, None]
    arr = pa.array(raw, pa.timestamp(unit))
    physical, _, bits = written(arr, use_deprecated_int96_timestamps=True)
    assert physical == "INT96"
    got = as_list(hash_values(arr, "INT96"))
    factor = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit]
    expected = []
    for v in raw:
        if v is not None:
            days, nanos = divmod(v * factor, 86_400 * 10**9)
            expected.append(nanos.to_bytes(8, "little") + (days + 2440588).to_bytes(4, "little"))
    assert got == xxs(expected)
    assert all(bloom_contains(bits, h) for h in got)


@pytest.mark.parametrize("precision", [5, 9, 10, 18, 19, 30])
def test_decimals_stored_as_integers(precision: int) -> None:
    arr = pa.array(
        [decimal.Decimal(10**precision - 1), decimal.Decimal(-3), None], pa.decimal128(precision, 0)
    )
    physical, width, bits = written(arr, store_decimal_as_integer=True)
    assert physical == (
        "INT32" if precision <= 9 else "INT64" if precision <= 18 else "FIXED_LEN_BYTE_ARRAY"
    )
    got = as_list(hash_values(arr, physical, type_length=width))
    assert all(bloom_contains(bits, h) for h in got)
    if physical != "FIXED_LEN_BYTE_ARRAY":
        assert got == xxs([encode(physical, v) for v in (10**precision - 1, -3)])


@pytest.mark.parametrize(
    "arrow_type", [pa.decimal32(7, 0), pa.decimal128(30, 0), pa.decimal256(60, 0)]
)
def test_decimals_as_byte_array_take_their_fewest_bytes(arrow_type: pa.DataType) -> None:
    """LogicalTypes.md: a BYTE_ARRAY decimal is big-endian two's complement in "the minimum
    number of bytes" (the writer's choice pyarrow cannot make; its reading is tested in
    test_encoding against a file re-annotated as such)."""
    edges = [0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, -32768, 10**6 + 1]
    unscaled = [v for v in edges if abs(v) < 10**arrow_type.precision] + [
        10**arrow_type.precision - 1,
        -(10**arrow_type.precision) + 1,
    ]
    arr = pa.array([decimal.Decimal(v) for v in unscaled] + [None], arrow_type)

    def fewest(v: int) -> bytes:
        return v.to_bytes((v + (v < 0)).bit_length() // 8 + 1, "big", signed=True)

    assert fewest(128) == b"\x00\x80" and fewest(-129) == b"\xff\x7f" and fewest(-1) == b"\xff"
    assert as_list(hash_values(arr, "BYTE_ARRAY")) == xxs([fewest(v) for v in unscaled])


def test_numpy_and_python_inference_match_pyarrow() -> None:
    # numpy arrays hash like pyarrow.array(them) written to Parquet.
    for dtype in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        data = np.array([0, 1, 100, np.iinfo(dtype).max, np.iinfo(dtype).min], dtype=dtype)
        _, _, bits = written(pa.array(data))
        got = as_list(hash_values(data))
        assert got == as_list(hash_values(pa.array(data)))
        assert all(bloom_contains(bits, h) for h in got)
    for dtype in (np.float16, np.float32, np.float64):
        data = np.array([0.5, -0.0, 2.0, -7.25], dtype=dtype)
        _, _, bits = written(pa.array(data))
        got = as_list(hash_values(data))
        assert got == as_list(hash_values(pa.array(data)))
        assert all(bloom_contains(bits, h) for h in got)
    for values in ([1, -5, 2**62], [1.5, -0.0], ["a", "日本"], [b"\x00", b"xy"]):
        _, _, bits = written(pa.array(values))
        assert all(bloom_contains(bits, h) for h in as_list(hash_values(values)))


# ---- errors --------------------------------------------------------------------------------


def test_out_of_range_integers() -> None:
    with pytest.raises(ValueError, match=r"4294967296 \(int\) as INT32"):
        hash_values([1, 2**32], "INT32")
    with pytest.raises(ValueError, match=r"-2147483649 \(int\) as INT32"):
        hash_value(-(2**31) - 1, "INT32")
    with pytest.raises(ValueError, match=r"4294967296.*int64.*INT32"):
        hash_values(np.array([0, 2**32]), "INT32")
    with pytest.raises(ValueError, match=r"-2147483649.*INT32"):
        hash_values(pa.array([-(2**31) - 1], pa.int64()), "INT32")
    with pytest.raises(ValueError, match=r"18446744073709551616 \(int\) as INT64"):
        hash_values([2**64], "INT64")
    with pytest.raises(ValueError, match=r"-9223372036854775809 \(int\) as INT64"):
        hash_value(-(2**63) - 1, "INT64")
    with pytest.raises(ValueError, match="too large"):
        hash_values([1e300], "FLOAT")
    with pytest.raises(ValueError, match="too large"):
        hash_value(1e300, "FLOAT")


def test_wrong_fixed_length() -> None:
    with pytest.raises(
        ValueError, match=r"b'abc' \(bytes\) as FIXED_LEN_BYTE_ARRAY: 3 bytes, not 4"
    ):
        hash_values([b"abcd", b"abc"], "FIXED_LEN_BYTE_ARRAY", type_length=4)
    with pytest.raises(ValueError, match="3 bytes, not 4"):
        hash_value(b"abc", "FIXED_LEN_BYTE_ARRAY", type_length=4)
    with pytest.raises(ValueError, match="needs type_length"):
        hash_values([b"abcd"], "FIXED_LEN_BYTE_ARRAY")
    with pytest.raises(ValueError, match="5 bytes, not 4"):
        hash_values(pa.array([b"abcde"], pa.binary(5)), "FIXED_LEN_BYTE_ARRAY", type_length=4)
    with pytest.raises(ValueError, match="2 bytes, not 12"):
        hash_values(pa.array([b"ab"]), "INT96")


@pytest.mark.parametrize(
    "values",
    [
        [True],
        True,
        np.array([True, False]),
        np.bool_(True),
        pa.array([True, None]),
        pa.chunked_array([], pa.bool_()),
        pa.array([True]).dictionary_encode(),
    ],
    ids=["list", "scalar", "numpy", "numpy-scalar", "arrow", "chunked", "dictionary"],
)
def test_boolean_has_no_bloom_filter(values: object) -> None:
    with pytest.raises(ValueError, match="BOOLEAN columns have no usable Bloom filters"):
        hash_values(values)


def test_boolean_physical_type_and_bool_values() -> None:
    with pytest.raises(ValueError, match="BOOLEAN columns have no usable Bloom filters"):
        hash_values([1], "BOOLEAN")
    with pytest.raises(ValueError, match="BOOLEAN columns have no usable Bloom filters"):
        hash_value(True)
    with pytest.raises(ValueError, match=r"True \(bool\) as INT64"):
        hash_values([True], "INT64")


@pytest.mark.parametrize(
    "arr",
    [
        pa.array([[1, 2], [3]]),
        pa.array([{"a": 1}]),
        pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
        pa.array([[1]], pa.large_list(pa.int64())),
        pa.array([[1]], pa.list_view(pa.int64())),
    ],
    ids=["list", "struct", "map", "large_list", "list_view"],
)
def test_nested_arrow_types_need_the_leaf(arr: pa.Array) -> None:
    with pytest.raises(TypeError, match=r"nested Arrow type.*pass the leaf array"):
        hash_values(arr)


def test_unsupported_objects() -> None:
    with pytest.raises(TypeError, match=r"object.*INT64"):
        hash_values([object()], "INT64")
    with pytest.raises(TypeError, match="dict"):
        hash_values({"a": 1})
    with pytest.raises(TypeError, match=r"datetime64"):
        hash_values(np.array(["2020-01-01"], dtype="datetime64[D]"))
    with pytest.raises(TypeError, match=r"Decimal"):
        hash_values([decimal.Decimal(1)])
    with pytest.raises(TypeError, match=r"run_end_encoded.*does not write it"):
        hash_values(pa.RunEndEncodedArray.from_arrays([2], pa.array(["x"])))
    with pytest.raises(TypeError, match=r"month_day_nano"):
        hash_values(pa.array([(1, 2, 3)], pa.month_day_nano_interval()))
    with pytest.raises(TypeError, match="physical_type must be a str"):
        hash_values([1], 2)  # type: ignore[arg-type]


def test_values_that_do_not_fit_the_type() -> None:
    with pytest.raises(ValueError, match=r"'abc' \(str\) as INT64"):
        hash_values(["abc"], "INT64")
    with pytest.raises(ValueError, match=r"1.5 \(float\) as INT32"):
        hash_values([1.5], "INT32")
    with pytest.raises(ValueError, match=r"7 \(int\) as BYTE_ARRAY"):
        hash_values([7], "BYTE_ARRAY")
    with pytest.raises(ValueError, match=r"b'x' \(bytes\) as DOUBLE"):
        hash_value(b"x", "DOUBLE")
    with pytest.raises(ValueError, match="lone surrogate"):
        hash_values(["ok", "\ud800"])
    with pytest.raises(ValueError, match="lone surrogate"):
        hash_values(np.array(["\ud800"]))
    with pytest.raises(ValueError, match="unknown Parquet physical type"):
        hash_values([1], "INT128")
    with pytest.raises(ValueError, match="None"):
        hash_value(None)


# ---- the scalar path agrees with the vectorised one -----------------------------------------

TYPED_VALUES = st.one_of(
    st.tuples(st.just("INT32"), st.integers(-(2**31), 2**32 - 1)),
    st.tuples(st.just("INT64"), st.integers(-(2**63), 2**64 - 1)),
    st.tuples(st.just("FLOAT"), st.floats(width=32)),
    st.tuples(st.just("FLOAT"), st.floats()),
    st.tuples(st.just("DOUBLE"), st.floats() | st.integers(-(2**60), 2**60)),
    st.tuples(st.just("BYTE_ARRAY"), st.text() | st.binary()),
    st.tuples(st.just("INT96"), st.binary(min_size=12, max_size=12)),
    st.tuples(st.none(), st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text() | st.binary()),
)


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except (ValueError, TypeError) as error:
        return type(error)


@SETTINGS
@given(TYPED_VALUES)
def test_hash_value_equals_hash_values(typed: tuple[str | None, Any]) -> None:
    physical, value = typed
    one = _outcome(lambda: hash_value(value, physical))
    many = _outcome(lambda: int(hash_values([value], physical)[0]))
    assert one == many
    if not isinstance(one, type):
        assert one == xx(plain_encode(value, physical))


@SETTINGS
@given(st.integers(0, 24), st.data())
def test_hash_value_fixed_len(width: int, data: st.DataObject) -> None:
    values = data.draw(st.lists(st.binary(min_size=width, max_size=width), min_size=1, max_size=5))
    got = as_list(hash_values(values, "FIXED_LEN_BYTE_ARRAY", type_length=width))
    assert got == [hash_value(v, "FIXED_LEN_BYTE_ARRAY", type_length=width) for v in values]
    assert got == xxs(values)


@SETTINGS
@given(
    st.lists(st.none() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text() | st.binary())
)
def test_mixed_lists_hash_like_each_value(values: list[Any]) -> None:
    want = [hash_value(v) for v in values if v is not None]
    assert as_list(hash_values(values)) == want


def test_physical_types_constant() -> None:
    # Indexed by the Thrift Type enum value: check against the generated enum, not a copy.
    assert dict(enumerate(PHYSICAL_TYPES)) == Type._VALUES_TO_NAMES


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 70), st.integers(1, 60), st.integers(0, 5), st.data())
def test_equal_length_strings_back_to_back_hash_like_any_span(
    width: int, n: int, skip: int, data: st.DataObject
) -> None:
    # Values of one length stored one after another take the fixed-width kernel.
    values = [data.draw(st.binary(min_size=width, max_size=width)) for _ in range(n)]
    expected = [xxhash.xxh64_intdigest(v) for v in values]
    arr = pa.array([b"x" * 3] * skip + values, pa.binary()).slice(skip)
    assert hash_values(arr).tolist() == expected
    assert hash_values(pa.array(values, pa.large_binary())).tolist() == expected
    with_nulls = pa.array([v if i % 3 else None for i, v in enumerate(values)], pa.binary())
    assert hash_values(with_nulls).tolist() == [h for i, h in enumerate(expected) if i % 3]
    # A near miss (one value one byte longer) takes the general path, with the same answer.
    longer = [*values[:-1], values[-1] + b"!"]
    assert hash_values(pa.array(longer, pa.binary())).tolist() == [
        xxhash.xxh64_intdigest(v) for v in longer
    ]


@pytest.mark.parametrize(("unit", "target"), [("s", None), ("s", "INT64"), ("ms", "INT96")])
def test_timestamps_that_overflow_when_scaled_are_refused(unit: str, target: str | None) -> None:
    # pyarrow refuses to scale these (timestamp[s] is written as milliseconds, INT96 holds
    # nanoseconds); the int64 minimum must not slip through by wrapping.
    arr = pa.array([0, -(2**63)], pa.timestamp(unit))
    with pytest.raises(ValueError, match="overflows when scaled"):
        hash_values(arr, target)


@given(
    st.lists(st.text(), min_size=1, max_size=50) | st.lists(st.binary(), min_size=1, max_size=50)
)
def test_python_strings_hash_alike_with_and_without_pyarrow_loaded(values: list[Any]) -> None:
    # pyarrow packs a list of strings when the process has it; otherwise str.encode and join.
    with_arrow = hash_values(values, "BYTE_ARRAY")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "pyarrow", None)  # as in a process that never imported it
        without = hash_values(values, "BYTE_ARRAY")
    expected = [xxhash.xxh64_intdigest(v.encode() if isinstance(v, str) else v) for v in values]
    assert with_arrow.tolist() == without.tolist() == expected

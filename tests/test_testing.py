"""parquet_bloom.testing: the assertion, the sizing re-exports and the Hypothesis strategies.

The strategies are tested the way a writer author would use them: values drawn for a Parquet type
are written by pyarrow with a Bloom filter, the file's column has the type asked for, every
value is found through the column's own type, and the file passes the assertion.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import parquet_bloom as pb
from parquet_bloom import _format as fmt
from parquet_bloom import _logical as logical
from parquet_bloom import _sizing as sizing
from parquet_bloom import testing
from parquet_bloom.testing import ParquetType, assert_bloom_filters_valid, parquet_types, values_for
from tests.writers import splice_filter, write_nested_pyarrow, zero_bitset


@pytest.fixture(scope="module")
def pyarrow_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nested_pyarrow(tmp_path_factory.mktemp("pyarrow") / "t.parquet")


# -- the assertion -------------------------------------------------------------------------------


def test_valid_files_pass(pyarrow_file: Path, tmp_path: Path) -> None:
    assert_bloom_filters_valid(pyarrow_file)
    assert_bloom_filters_valid(str(pyarrow_file), columns=["s", "st"], max_fpp=0.2)
    import duckdb

    path = tmp_path / "d.parquet"
    with duckdb.connect() as con:
        con.sql(
            f"copy (select i % 97 as k, 'v' || (i % 31) as v from range(5000) t(i)) to '{path}'"
        )
    assert_bloom_filters_valid(path)


def test_a_missing_value_fails_with_its_place(pyarrow_file: Path, tmp_path: Path) -> None:
    path = zero_bitset(pyarrow_file, tmp_path / "zero.parquet", 2, "small")
    with pytest.raises(AssertionError) as raised:
        assert_bloom_filters_valid(path)
    message = str(raised.value)
    first = pq.ParquetFile(path).read_row_group(2, columns=["small"]).column(0)[0].as_py()
    assert f"1 Bloom filter violation(s) in {path}:" in message
    assert "[false-negative] row group 2, column 'small': " in message
    assert f"the first {first!r}" in message
    # Checking other columns only, the file passes.
    assert_bloom_filters_valid(path, columns=["int64", "s"])


def test_rate_bound(pyarrow_file: Path) -> None:
    with pytest.raises(AssertionError, match=r"\[fpp\] row group 0, column 'int64'"):
        assert_bloom_filters_valid(pyarrow_file, columns=["int64"], max_fpp=1e-9)
    with pytest.raises(ValueError, match="max_fpp"):
        assert_bloom_filters_valid(pyarrow_file, max_fpp=2.0)
    with pytest.raises(ValueError, match="no column"):
        assert_bloom_filters_valid(pyarrow_file, columns=["nope"])


def test_unreadable_files_fail(pyarrow_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "cut.parquet"
    path.write_bytes(pyarrow_file.read_bytes()[:-10])
    with pytest.raises(AssertionError, match="cannot be checked"):
        assert_bloom_filters_valid(path)


def test_a_filter_of_the_wrong_values_fails(pyarrow_file: Path, tmp_path: Path) -> None:
    # A writer that hashed the wrong encoding: the INT16 values as 8-byte integers.
    table = pq.ParquetFile(pyarrow_file).read_row_group(0, columns=["small"])
    wrong = pb.SplitBlockBloomFilter(1024)
    wrong.insert(table["small"].to_numpy().astype(np.int64), "INT64")
    path = splice_filter(pyarrow_file, tmp_path / "wrong.parquet", 0, "small", wrong)
    with pytest.raises(AssertionError, match="row group 0, column 'small'"):
        assert_bloom_filters_valid(path)


def test_sizing_is_re_exported() -> None:
    assert testing.expected_num_bytes is sizing.expected_num_bytes
    assert testing.fold_to_fpp is sizing.fold_to_fpp
    assert testing.expected_num_bytes(1693, 0.01, "arrow-cpp") == 4096


def test_imports_without_hypothesis() -> None:
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "import parquet_bloom.testing as t\n"
        "assert t.expected_num_bytes(27, 0.01, 'duckdb') == 32\n"
        "try:\n"
        "    t.values_for('INT32')\n"
        "except ImportError:\n"
        "    print('strategies need hypothesis')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "strategies need hypothesis\n"


# -- strategies ----------------------------------------------------------------------------------


def arrow_column(t: ParquetType, values: list[Any]) -> tuple[pa.Array, dict[str, Any]] | None:
    """The Arrow array pyarrow writes as column type ``t``, and the write options it needs; None
    where pyarrow cannot write the type (BOOLEAN filters, ENUM, BSON, BYTE_ARRAY decimals)."""
    logical = t.logical_type
    plain = {
        "INT32": pa.int32(), "INT64": pa.int64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(),
        "BYTE_ARRAY": pa.binary(),
    }  # fmt: skip
    annotated = {
        "INT8": pa.int8(), "INT16": pa.int16(), "INT32": pa.int32(), "INT64": pa.int64(),
        "UINT8": pa.uint8(), "UINT16": pa.uint16(), "UINT32": pa.uint32(), "UINT64": pa.uint64(),
        "STRING": pa.string(), "DATE": pa.date32(), "TIME(MILLIS)": pa.time32("ms"),
        "TIME(MICROS)": pa.time64("us"), "TIME(NANOS)": pa.time64("ns"),
        "TIMESTAMP(MILLIS)": pa.timestamp("ms"), "TIMESTAMP(MICROS)": pa.timestamp("us"),
        "TIMESTAMP(NANOS)": pa.timestamp("ns"), "JSON": pa.json_(pa.string()),
    }  # fmt: skip
    if logical is None:
        if t.physical_type in plain:
            return pa.array(values, plain[t.physical_type]), {}
        if t.physical_type == "FIXED_LEN_BYTE_ARRAY":
            return pa.array(values, pa.binary(t.type_length)), {}
        if t.physical_type == "INT96":
            options = {"use_deprecated_int96_timestamps": True}
            return pa.array(values, pa.timestamp("ns")), options
        return None  # BOOLEAN: Arrow C++ writes no Bloom filters for it
    if logical in annotated:
        return pa.array(values, annotated[logical]), {}
    if logical == "UUID":
        storage = pa.array([u.bytes for u in values], pa.binary(16))
        return pa.ExtensionArray.from_storage(pa.uuid(), storage), {}
    if logical == "FLOAT16":
        return pa.array(np.array(values, dtype=np.float16), pa.float16()), {}
    if logical.startswith("DECIMAL") and t.physical_type != "BYTE_ARRAY":
        precision, scale = map(int, logical[8:-1].split(","))
        options = {"store_decimal_as_integer": t.physical_type in ("INT32", "INT64")}
        return pa.array(values, pa.decimal128(precision, scale)), options
    return None  # ENUM, BSON, BYTE_ARRAY decimals


def logical_text(leaf: fmt.SchemaLeaf) -> str | None:
    return testing._logical_text(leaf.logical_type)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), t=parquet_types())
def test_drawn_values_are_found_in_a_real_file(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, t: ParquetType
) -> None:
    values = data.draw(st.lists(values_for(t), min_size=1, max_size=20), label="values")
    column = arrow_column(t, values)
    assume(column is not None)
    assert column is not None
    arr, options = column
    path = tmp_path_factory.mktemp("drawn") / "t.parquet"
    pq.write_table(pa.table({"x": arr}), path, bloom_filter_options={"x": True}, **options)
    with pb.BloomFilterReader(path) as reader:
        (leaf,) = fmt.schema_leaves(reader.metadata)
        f = reader.filter(0, "x")
    # The file's column has the type the values were drawn for (pyarrow leaves INT(32, true)
    # and INT(64, true) unannotated, and picks a decimal's physical type by precision) ...
    assert logical_text(leaf) == (None if t.logical_type in ("INT32", "INT64") else t.logical_type)
    if not (t.logical_type or "").startswith("DECIMAL"):
        assert leaf.physical_type == t.physical_type
        assert leaf.type_length == t.type_length
    # ... every value, probed through the column's type, is in its filter ...
    assert f is not None
    for value in values:
        assert logical.literal_probe([value], leaf).keeps(f), value
    # ... and the file passes the writer-author assertion.
    assert_bloom_filters_valid(path)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), t=parquet_types())
def test_values_fit_their_type(data: st.DataObject, t: ParquetType) -> None:
    value = data.draw(values_for(t))
    physical, logical, length = t
    if logical is None:
        expected = {
            "BOOLEAN": bool, "INT32": int, "INT64": int, "INT96": dt.datetime, "FLOAT": float,
            "DOUBLE": float, "BYTE_ARRAY": bytes, "FIXED_LEN_BYTE_ARRAY": bytes,
        }[physical]  # fmt: skip
        assert isinstance(value, expected)
        if physical == "INT32":
            assert -(2**31) <= value < 2**31
        if physical == "FIXED_LEN_BYTE_ARRAY":
            assert len(value) == length
    elif logical.startswith("UINT"):
        assert 0 <= value < 2 ** int(logical[4:])
    elif logical.startswith("INT"):
        bits = int(logical[3:])
        assert -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    elif logical.startswith("DECIMAL"):
        precision, scale = map(int, logical[8:-1].split(","))
        assert value.as_tuple().exponent == -scale
        assert len(value.as_tuple().digits) <= max(precision, 1)
    elif logical.startswith("TIMESTAMP(MILLIS)") or logical == "TIME(MILLIS)":
        assert value.microsecond % 1000 == 0
    elif logical == "TIMESTAMP(NANOS)":
        assert dt.datetime(1677, 9, 22) < value < dt.datetime(2262, 4, 11)
    elif logical == "UUID":
        assert isinstance(value, uuid.UUID)
    elif logical == "FLOAT16":
        assert math.isnan(value) or math.isinf(value) or abs(value) <= 65504
    elif logical == "JSON":
        json.loads(value)


@pytest.fixture(scope="module")
def typed_leaves(tmp_path_factory: pytest.TempPathFactory) -> dict[str, fmt.SchemaLeaf]:
    path = tmp_path_factory.mktemp("types") / "types.parquet"
    table = pa.table(
        {
            "d": pa.array([1], pa.decimal128(9, 2)),
            "t": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us")),
            "u": pa.array([7], pa.uint16()),
        }
    )
    pq.write_table(table, path, store_decimal_as_integer=True)
    with pb.BloomFilterReader(path) as reader:
        return {leaf.path: leaf for leaf in fmt.schema_leaves(reader.metadata)}


def test_logical_types_from_files_read_as_text(typed_leaves: dict[str, fmt.SchemaLeaf]) -> None:
    assert logical_text(typed_leaves["d"]) == "DECIMAL(9, 2)"
    assert logical_text(typed_leaves["t"]) == "TIMESTAMP(MICROS)"
    assert logical_text(typed_leaves["u"]) == "UINT16"
    assert testing.strategies.values_for is testing.values_for
    assert testing.strategies.values_for_leaf is testing.values_for_leaf


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_values_for_leaf(typed_leaves: dict[str, fmt.SchemaLeaf], data: st.DataObject) -> None:
    d = data.draw(testing.values_for_leaf(typed_leaves["d"]))
    assert d.as_tuple().exponent == -2 and abs(d) < 10**7
    t = data.draw(testing.values_for_leaf(typed_leaves["t"]))
    assert isinstance(t, dt.datetime) and t.tzinfo is None
    u = data.draw(testing.values_for_leaf(typed_leaves["u"]))
    assert 0 <= u < 2**16
    # Legacy spellings of the same types.
    assert isinstance(data.draw(values_for("int64", "timestamp_micros")), dt.datetime)
    assert 0 <= data.draw(values_for("INT32", "UINT8")) < 256


@pytest.mark.parametrize(
    ("physical", "logical", "length"),
    [
        ("INT32", "UINT64", None),
        ("FIXED_LEN_BYTE_ARRAY", None, None),
        ("INT64", "DECIMAL(19, 2)", None),
        ("INT32", "DECIMAL(5, 6)", None),
        ("INT32", "TIMESTAMP(MICROS)", None),
        ("FIXED_LEN_BYTE_ARRAY", "UUID", 8),
        ("BYTE_ARRAY", "DATE", None),
        ("INT32", "INTERVAL", None),
        ("NUMBER", None, None),
    ],
)
def test_values_for_refuses_types_parquet_does_not_allow(
    physical: str, logical: str | None, length: int | None
) -> None:
    with pytest.raises(ValueError, match="no values for"):
        values_for(physical, logical, type_length=length)


@pytest.mark.parametrize(("precision", "scale"), [(29, 0), (33, 0), (38, 5)])
@settings(max_examples=300, deadline=None, database=None)
@given(data=st.data())
def test_wide_decimals_keep_their_precision_at_both_ends(
    data: st.DataObject, precision: int, scale: int
) -> None:
    """Past 28 digits the default decimal context rounds: negating the bound made
    -999...9 (33 nines) into -10**33, a value DECIMAL(33, 0) cannot hold."""
    value = data.draw(values_for("BYTE_ARRAY", f"DECIMAL({precision}, {scale})"))
    digits = value.as_tuple().digits
    assert len(digits) <= precision and value.as_tuple().exponent == -scale

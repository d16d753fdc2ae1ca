"""Paimon's types and hashes: the vectorised hashes (numpy, Arrow, Python values) against the
scalar reference (tests/paimon/reference.py), and the types' parsing."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from parquet_bloom import paimon
from parquet_bloom.paimon import hash_value, hash_values, parse_type
from tests.paimon import reference

INT_TYPES = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}


@pytest.mark.parametrize(
    ("text", "root", "precision", "kind"),
    [
        ("INT", "INT", None, "integer"),
        ("integer not null", "INT", None, "integer"),
        ("STRING", "VARCHAR", None, "string"),
        ("VARCHAR(10) NOT NULL", "VARCHAR", None, "string"),
        ("CHAR(3)", "CHAR", None, "string"),
        ("BYTES", "VARBINARY", None, "binary"),
        ("BINARY(16)", "BINARY", None, "binary"),
        ("TIMESTAMP", "TIMESTAMP", 6, "timestamp"),
        ("TIMESTAMP(3)", "TIMESTAMP", 3, "timestamp"),
        ("TIMESTAMP(9) WITHOUT TIME ZONE", "TIMESTAMP", 9, "timestamp"),
        ("TIMESTAMP(3) WITH LOCAL TIME ZONE", "TIMESTAMP_LTZ", 3, "timestamp"),
        ("TIMESTAMP_LTZ(0)", "TIMESTAMP_LTZ", 0, "timestamp"),
        ("TIME", "TIME", 0, "time"),
        ("TIME(3)", "TIME", 3, "time"),
        ("DATE", "DATE", None, "date"),
        ("FLOAT", "FLOAT", None, "float"),
        ("DOUBLE", "DOUBLE", None, "double"),
        ("BOOLEAN", "BOOLEAN", None, None),
        ("DECIMAL(10, 2)", "DECIMAL", None, None),
        ("ARRAY<INT>", "ARRAY", None, None),
        ("MAP<STRING, INT> NOT NULL", "MAP", None, None),
    ],
)
def test_types_parse_as_paimon_spells_them(
    text: str, root: str, precision: int | None, kind: str | None
) -> None:
    t = parse_type(text)
    assert (t.root, t.precision, t.kind) == (root, precision, kind)
    assert str(t) == " ".join(text.split())


def test_nested_types_from_a_schema_file_have_no_hash() -> None:
    assert parse_type({"type": "ARRAY", "element": "INT"}).kind is None
    assert parse_type({"type": "ROW", "fields": []}).root == "ROW"


@pytest.mark.parametrize("text", ["", "INTT", "TIMESTAMP(12)", "INT WITH TIME ZONE", "VARCHAR(1"])
def test_not_a_type(text: str) -> None:
    with pytest.raises(ValueError):
        parse_type(text)


@pytest.mark.parametrize("text", ["BOOLEAN", "DECIMAL(5, 1)", "ARRAY<INT>"])
def test_types_without_a_bloom_filter_index_refuse_values(text: str) -> None:
    with pytest.raises(ValueError, match="no bloom-filter index"):
        hash_values([1], text)
    with pytest.raises(ValueError, match="no bloom-filter index"):
        paimon.build_bloom_filter([1], text)


@given(st.sampled_from(sorted(INT_TYPES)), st.data())
def test_integers_hash_as_the_reference(root: str, data: st.DataObject) -> None:
    bits = INT_TYPES[root]
    values = data.draw(st.lists(st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1), max_size=40))
    expected = [reference.value_hash(v, root) for v in values]
    assert hash_values(values, root).tolist() == expected
    assert hash_values(np.array(values, dtype=np.int64), root).tolist() == expected
    arrow = pa.array(values, type=getattr(pa, f"int{bits}")())
    assert hash_values(arrow, root).tolist() == expected
    assert [hash_value(v, root) for v in values] == expected


def test_integers_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="out of range for TINYINT"):
        hash_values([128], "TINYINT")
    with pytest.raises(ValueError, match="out of range for INT"):
        hash_values(np.array([2**31], dtype=np.int64), "INT")
    with pytest.raises(ValueError, match="out of range for BIGINT"):
        hash_values(np.array([2**63], dtype=np.uint64), "BIGINT")
    with pytest.raises(TypeError):
        hash_values([True], "INT")
    with pytest.raises(TypeError):
        hash_values([1.5], "INT")
    with pytest.raises(TypeError):
        hash_values([decimal.Decimal(1)], "BIGINT")


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=40))
def test_doubles_hash_as_the_reference(values: list[float]) -> None:
    expected = [reference.value_hash(v, "DOUBLE") for v in values]
    assert hash_values(values, "DOUBLE").tolist() == expected
    assert hash_values(np.array(values), "DOUBLE").tolist() == expected
    assert hash_values(pa.array(values, pa.float64()), "DOUBLE").tolist() == expected


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=40))
def test_floats_hash_as_the_reference(values: list[float]) -> None:
    """A double is cast to float as Java's ``(float)`` does (beyond range: infinity)."""
    expected = [reference.value_hash(v, "FLOAT") for v in values]
    assert hash_values(values, "FLOAT").tolist() == expected
    singles = [float(np.float32(v)) for v in values if abs(v) < 3e38 or v != v]
    assert hash_values(pa.array(singles, pa.float32()), "FLOAT").tolist() == [
        reference.value_hash(v, "FLOAT") for v in singles
    ]


def test_nan_payloads_and_signed_zeros() -> None:
    """Every NaN hashes as Java's canonical NaN; -0.0 is not 0.0."""
    nans = np.array([0x7FF8000000000001, 0xFFF8000000000000], dtype=np.uint64).view(np.float64)
    assert len(set(hash_values(nans, "DOUBLE").tolist())) == 1
    assert len(set(hash_values(nans, "FLOAT").tolist())) == 1
    assert hash_value(0.0, "DOUBLE") != hash_value(-0.0, "DOUBLE")
    assert hash_value(0.0, "FLOAT") != hash_value(-0.0, "FLOAT")


@given(st.lists(st.text(), max_size=30))
def test_strings_hash_as_the_reference(values: list[str]) -> None:
    expected = [reference.value_hash(v, "VARCHAR") for v in values]
    assert hash_values(values, "STRING").tolist() == expected
    if values:
        assert hash_values(np.array(values, dtype=object), "STRING").tolist() == expected


def test_strings_with_surrogates_hash_as_java_encodes_them() -> None:
    values = ["\ud83d\ude00", "\ud83d", "a\udc00b", "\U0001f600", "\x00", ""]
    expected = [reference.value_hash(v, "VARCHAR") for v in values]
    assert hash_values(values, "STRING").tolist() == expected
    assert expected[0] == expected[3]  # a surrogate pair is its code point
    assert expected[1] == reference.value_hash("?", "VARCHAR")  # a lone surrogate is ?


@given(st.lists(st.text().filter(lambda s: "\x00" not in s), min_size=1, max_size=30))
def test_arrow_and_numpy_strings_hash_alike(values: list[str]) -> None:
    expected = hash_values(values, "STRING").tolist()
    arrow = pa.array(values)
    assert hash_values(arrow, "STRING").tolist() == expected
    assert hash_values(arrow.cast(pa.large_string()), "STRING").tolist() == expected
    assert hash_values(pa.chunked_array([arrow[:1], arrow[1:]]), "STRING").tolist() == expected
    assert hash_values(arrow.slice(1), "STRING").tolist() == expected[1:]
    assert hash_values(np.array(values), "STRING").tolist() == expected


@given(st.lists(st.binary(), max_size=30))
def test_binaries_hash_as_the_reference(values: list[bytes]) -> None:
    expected = [reference.value_hash(v, "VARBINARY") for v in values]
    assert hash_values(values, "BYTES").tolist() == expected
    assert hash_values(pa.array(values, pa.binary()), "BYTES").tolist() == expected
    assert hash_values([bytearray(v) for v in values], "BYTES").tolist() == expected


def test_a_binary_column_takes_no_str() -> None:
    with pytest.raises(TypeError, match="bytes, not str"):
        hash_values(["abc"], "BYTES")


@given(st.lists(st.dates(), max_size=30))
def test_dates_hash_as_their_days(values: list[dt.date]) -> None:
    expected = [reference.value_hash(v, "DATE") for v in values]
    assert hash_values(values, "DATE").tolist() == expected
    days = [(v - dt.date(1970, 1, 1)).days for v in values]
    assert hash_values(days, "DATE").tolist() == expected
    assert hash_values(np.array(values, dtype="datetime64[D]"), "DATE").tolist() == expected
    assert hash_values(pa.array(values, pa.date32()), "DATE").tolist() == expected
    assert hash_values(pa.array(values, pa.date64()), "DATE").tolist() == expected


@given(st.lists(st.times(), max_size=30))
def test_times_hash_as_their_milliseconds(values: list[dt.time]) -> None:
    millis = [
        ((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000 for v in values
    ]
    expected = [reference.get_long_hash(m) for m in millis]
    assert hash_values(values, "TIME").tolist() == expected
    assert hash_values(millis, "TIME(3)").tolist() == expected
    assert hash_values(pa.array(values, pa.time64("us")), "TIME").tolist() == expected
    assert hash_values(pa.array(values, pa.time64("ns")), "TIME").tolist() == expected


# Within datetime64[ns]'s range (1677 to 2262).
_DATETIMES = st.datetimes(min_value=dt.datetime(1700, 1, 1), max_value=dt.datetime(2260, 1, 1))


@given(st.lists(_DATETIMES, max_size=30), st.sampled_from([0, 3, 4, 6, 9]))
def test_timestamps_hash_by_their_precision(values: list[dt.datetime], precision: int) -> None:
    expected = [reference.value_hash(v, "TIMESTAMP", precision) for v in values]
    text = f"TIMESTAMP({precision})"
    assert hash_values(values, text).tolist() == expected
    assert hash_values(np.array(values, dtype="datetime64[us]"), text).tolist() == expected
    assert hash_values(np.array(values, dtype="datetime64[ns]"), text).tolist() == expected
    arrow = pa.array(values, pa.timestamp("us"))
    assert hash_values(arrow, text).tolist() == expected
    assert hash_values(arrow.cast(pa.timestamp("ns")), text).tolist() == expected
    ltz = [v.replace(tzinfo=dt.timezone.utc) for v in values]
    assert hash_values(ltz, f"TIMESTAMP_LTZ({precision})").tolist() == expected


def test_timestamps_before_1970_are_floored() -> None:
    """-1 ns is millisecond -1 and microsecond -1 (Paimon's Timestamp floors)."""
    one_before = np.array([-1], dtype="datetime64[ns]")
    assert hash_values(one_before, "TIMESTAMP(3)").tolist() == [reference.get_long_hash(-1)]
    assert hash_values(one_before, "TIMESTAMP(6)").tolist() == [reference.get_long_hash(-1)]


def test_timestamps_take_no_plain_integers() -> None:
    with pytest.raises(TypeError, match="datetime"):
        hash_values([1], "TIMESTAMP(3)")


def test_nulls_are_marked_and_numpy_nat_is_null() -> None:
    from parquet_bloom._paimon.fasthash import hash_values as with_valid

    _, valid = with_valid([1, None, 3], parse_type("INT"))
    assert valid.tolist() == [True, False, True]
    _, valid = with_valid(np.array(["2020-01-01", "NaT"], "datetime64[D]"), parse_type("DATE"))
    assert valid.tolist() == [True, False]
    _, valid = with_valid(pa.array(["a", None]), parse_type("STRING"))
    assert valid.tolist() == [True, False]


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50))
def test_the_vectorised_integer_hash_is_getlonghash(keys: list[int]) -> None:
    from parquet_bloom._paimon.fasthash import wang_hash

    got = wang_hash(np.array(keys, dtype=np.int64)).tolist()
    assert got == [reference.get_long_hash(k) for k in keys]

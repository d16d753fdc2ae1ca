"""Literal and column encoding through the column's type, checked against real writers.

Every rule of ``parquet_bloom.encoding`` is tested on a file written in the test run (by
pyarrow, and by DuckDB where it writes the type) in three ways:

1. ``column_hashes`` of the values pyarrow reads back for each row group rebuilds the
   writer's filter byte for byte: the column path encodes exactly what the writer hashed.
2. A literal's probe hashes are among the stored values' hashes in exactly the row groups
   that hold the literal (a stronger check than "the filter answers maybe", which a false
   positive could satisfy), and the writer's filter finds them there: no false negatives.
3. Literals the column cannot hold give no hashes; nulls and NaN keep every row group.

DuckDB's own ``parquet_bloom_probe`` is a second opinion on its files.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import math
import struct
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from parquet_bloom import BloomFilterReader, SplitBlockBloomFilter
from parquet_bloom import _format as fmt
from parquet_bloom._logical import Probe, column_hashes, literal_probe

# Every test here runs with the compiled kernels and on numpy alone (see conftest.py).
pytestmark = pytest.mark.usefixtures("implementation")

D = decimal.Decimal
UTC = dt.timezone.utc
PLUS_ONE = dt.timezone(dt.timedelta(hours=1))
BLOOM = {"ndv": 64, "fpp": 0.01}


# ---- shared helper: write, read back, rebuild, probe ---------------------------------------


def leaf_array(table: pa.Table, path: str) -> pa.Array:
    """The values of a dotted leaf path (struct fields, list elements), as pyarrow reads them."""
    parts = path.split(".")
    arr = table.column(parts[0]).combine_chunks()
    i = 1
    while i < len(parts):
        t = arr.type
        if pa.types.is_struct(t):
            arr = pc.struct_field(arr, [t.get_field_index(parts[i])])
            i += 1
        else:  # list: <name>.list.element
            arr = pc.list_flatten(arr)
            i += 2
    return arr


def leaf_of(reader: BloomFilterReader, column: str) -> fmt.SchemaLeaf:
    """The schema leaf of ``column`` in the reader's file."""
    (leaf,) = [leaf for leaf in reader.schema_leaves if leaf.path == column]
    return leaf


class Written:
    """A file, its reader, and per row group the hashes of the stored values of one column."""

    def __init__(self, path: Path, column: str, read_dictionary: bool = False) -> None:
        self.path = path
        self.column = column
        with BloomFilterReader(path) as reader:
            self.leaf = leaf_of(reader, column)
            self.filters = [reader.filter(rg, column) for rg in range(reader.num_row_groups)]
        top = column.split(".")[0]
        pf = pq.ParquetFile(path, read_dictionary=[column] if read_dictionary else None)
        self.arrays = [
            leaf_array(pf.read_row_group(rg, columns=[top]), column)
            for rg in range(len(self.filters))
        ]
        pf.close()
        self.hashes: list[np.ndarray] = []
        for rg, (f, arr) in enumerate(zip(self.filters, self.arrays, strict=True)):
            assert f is not None, f"row group {rg} of {column} has no filter"
            hashes = column_hashes(arr, self.leaf)
            assert hashes.dtype == np.uint64
            assert len(hashes) == len(arr) - arr.null_count
            rebuilt = SplitBlockBloomFilter(f.num_bytes)
            rebuilt.insert_hashes(hashes)
            assert rebuilt.to_bytes() == f.to_bytes(), f"{column}: row group {rg} differs"
            self.hashes.append(hashes)

    @property
    def num_row_groups(self) -> int:
        return len(self.filters)

    def holding(self, literal: Any) -> set[int]:
        """Row groups whose stored values hash to one of the literal's encodings."""
        probe = literal_probe(literal, self.leaf)
        assert not probe.always_keep, literal
        assert probe.hashes.size, f"{literal!r} gave no hash"
        return {rg for rg, h in enumerate(self.hashes) if np.isin(probe.hashes, h).any()}

    def assert_in(self, literal: Any, row_groups: set[int]) -> None:
        assert self.holding(literal) == row_groups, literal
        probe = literal_probe(literal, self.leaf)
        for rg in row_groups:
            f = self.filters[rg]
            assert f is not None and probe.keeps(f), (literal, rg)

    def assert_absent(self, *literals: Any) -> None:
        for literal in literals:
            probe = literal_probe(literal, self.leaf)
            assert probe.hashes.size == 0 and not probe.always_keep, literal

    def assert_kept(self, *literals: Any) -> None:
        for literal in literals:
            assert literal_probe(literal, self.leaf).always_keep, literal


def write_groups(
    tmp_path: Path, groups: Sequence[Sequence[Any]], arrow_type: pa.DataType, **kwargs: Any
) -> Written:
    """Write one column ``c`` with pyarrow, one row group per entry of ``groups`` (padded with
    nulls to equal length, so nulls are covered too), then read it back and check it."""
    size = max(len(g) for g in groups) + 1
    values = [v for g in groups for v in [*g, *[None] * (size - len(g))]]
    table = pa.table({"c": pa.array(values, arrow_type)})
    path = tmp_path / "pyarrow.parquet"
    pq.write_table(table, path, bloom_filter_options={"c": BLOOM}, row_group_size=size, **kwargs)
    written = Written(path, "c")
    assert written.num_row_groups == len(groups)
    return written


DUCK_ROWS = 2048  # DuckDB cuts row groups at multiples of its 2048-row vectors


def duck_write(
    tmp_path: Path, sql_type: str, groups: Sequence[Sequence[str]], extra: str = ""
) -> Written:
    """Write one column ``c`` with DuckDB: row group g cycles through the SQL literals
    ``groups[g]``, so each chunk is dictionary-encoded and gets a filter."""
    width = max(len(g) for g in groups)
    cells = ", ".join(
        "[" + ", ".join(f"({v})::{sql_type}" for v in (list(g) * width)[:width]) + "]"
        for g in groups
    )
    path = tmp_path / "duckdb.parquet"
    n = DUCK_ROWS * len(groups)
    duckdb.sql(
        f"COPY (SELECT ([{cells}])[i // {DUCK_ROWS} + 1][i % {width} + 1] AS c {extra} "
        f"FROM range({n}) t(i) ORDER BY i) TO '{path}' "
        f"(FORMAT parquet, ROW_GROUP_SIZE {DUCK_ROWS})"
    )
    written = Written(path, "c")
    assert written.num_row_groups == len(groups)
    return written


def duck_kept(written: Written, sql_literal: str, column: str = "c") -> set[int]:
    rows = duckdb.sql(
        f"SELECT row_group_id, bloom_filter_excludes FROM "
        f"parquet_bloom_probe('{written.path}', '{column}', {sql_literal})"
    ).fetchall()
    return {rg for rg, excludes in rows if not excludes}


def assert_agrees_with_duckdb(
    written: Written, literal: Any, sql_literal: str, row_groups: set[int]
) -> None:
    """We find the literal in exactly ``row_groups``; DuckDB keeps them too; and every row
    group DuckDB keeps, we keep (same filter, same stored bytes: same answer)."""
    written.assert_in(literal, row_groups)
    duck = duck_kept(written, sql_literal)
    assert row_groups <= duck, (literal, duck)
    probe = literal_probe(literal, written.leaf)
    ours = set()
    for rg, f in enumerate(written.filters):
        if f is None or probe.keeps(f):
            ours.add(rg)
    assert ours == duck, (literal, ours, duck)


def raw_hash(blob: bytes) -> int:
    return int(xxhash.xxh64_intdigest(blob))


# ---- integers ----------------------------------------------------------------------------


def test_int8_widened_to_int32_with_range(tmp_path: Path) -> None:
    w = write_groups(tmp_path, [[-128, 0, 5], [127, -1], [5, 42]], pa.int8())
    assert (w.leaf.physical_type, w.leaf.converted_type) == ("INT32", "INT_8")
    w.assert_in(5, {0, 2})
    w.assert_in(-128, {0})
    w.assert_in(np.int8(-1), {1})
    w.assert_in(127.0, {1})  # an integral float is that integer
    w.assert_in(D("42"), {2})
    w.assert_in([5, 127], {0, 1, 2})
    assert literal_probe(5, w.leaf).hashes.tolist() == [raw_hash(struct.pack("<i", 5))]
    w.assert_absent(128, -129, 5.5, D("0.5"), True, False, math.nan, math.inf, 10**100)


def test_int16_widened_to_int32_with_range(tmp_path: Path) -> None:
    w = write_groups(tmp_path, [[-32768, 300], [32767], [300]], pa.int16())
    assert w.leaf.converted_type == "INT_16"
    w.assert_in(300, {0, 2})
    w.assert_in(-32768, {0})
    w.assert_in(np.int64(32767), {1})
    w.assert_absent(32768, -32769)


def test_uint8_zero_extended(tmp_path: Path) -> None:
    w = write_groups(tmp_path, [[0, 255], [200], [255]], pa.uint8())
    assert w.leaf.converted_type == "UINT_8"
    w.assert_in(255, {0, 2})
    w.assert_in(np.uint8(200), {1})
    assert literal_probe(255, w.leaf).hashes.tolist() == [raw_hash(b"\xff\x00\x00\x00")]
    w.assert_absent(256, -1)


def test_uint16_zero_extended(tmp_path: Path) -> None:
    w = write_groups(tmp_path, [[65535, 0], [1000], [65535]], pa.uint16())
    w.assert_in(65535, {0, 2})
    w.assert_in(0, {0})
    w.assert_absent(65536, -1)


def test_uint32_by_bit_pattern(tmp_path: Path) -> None:
    w = write_groups(tmp_path, [[4_000_000_000, 0], [2**32 - 1], [4_000_000_000]], pa.uint32())
    assert (w.leaf.physical_type, w.leaf.converted_type) == ("INT32", "UINT_32")
    w.assert_in(4_000_000_000, {0, 2})
    w.assert_in(np.uint32(2**32 - 1), {1})
    # The INT32 with the same bit pattern.
    pattern = struct.pack("<i", 4_000_000_000 - 2**32)
    assert literal_probe(4_000_000_000, w.leaf).hashes.tolist() == [raw_hash(pattern)]
    w.assert_absent(2**32, -1, -(2**31))


def test_uint64_by_bit_pattern(tmp_path: Path) -> None:
    w = write_groups(tmp_path, [[2**64 - 1, 0], [2**63], [2**63]], pa.uint64())
    assert (w.leaf.physical_type, w.leaf.converted_type) == ("INT64", "UINT_64")
    w.assert_in(2**64 - 1, {0})
    w.assert_in(np.uint64(2**63), {1, 2})
    w.assert_absent(2**64, -1)


def test_int32_range(tmp_path: Path) -> None:
    w = write_groups(tmp_path, [[-(2**31), 7], [2**31 - 1], [7]], pa.int32())
    w.assert_in(7, {0, 2})
    w.assert_in(2**31 - 1, {1})
    w.assert_absent(2**31, -(2**31) - 1)


def test_int64_range(tmp_path: Path) -> None:
    w = write_groups(tmp_path, [[-(2**63), 7], [2**63 - 1], [7]], pa.int64())
    w.assert_in(-(2**63), {0})
    w.assert_in(2**63 - 1, {1})
    w.assert_in(np.array([7, 8]), {0, 2})  # a numpy array is an IN list
    w.assert_absent(2**63, -(2**63) - 1, 2.0**63)


def test_wrong_literal_type_names_column_literal_and_type(tmp_path: Path) -> None:
    w = write_groups(tmp_path, [[1], [2]], pa.int64())
    with pytest.raises(TypeError, match=r"'c'.*INT64.*'7'.*str"):
        literal_probe("7", w.leaf)
    with pytest.raises(TypeError, match="'c'"):
        literal_probe(dt.date(2024, 1, 1), w.leaf)
    with pytest.raises(TypeError, match="'c'"):
        literal_probe(b"\x07", w.leaf)


# ---- decimals ------------------------------------------------------------------------------


DECIMAL_GROUPS = [
    [D("1.50"), D("-0.01"), D("3.00")],
    [D("9999999.99"), D("-9999999.99")],
    [D("1.50"), D("0.30")],
]


def check_decimal_9_2(w: Written) -> None:
    w.assert_in(D("1.5"), {0, 2})
    w.assert_in(1.5, {0, 2})  # a float literal means its shortest repr, 1.5
    w.assert_in("1.50", {0, 2})
    w.assert_in(D("-0.01"), {0})
    w.assert_in(3, {0})
    w.assert_in(0.3, {2})  # not 0.299999999999999988897769753748...
    w.assert_in(D("9.99999999E+6"), {1})
    w.assert_in(np.float32(0.3), {2})
    w.assert_absent(
        D("1.505"), D("10000000.00"), 0.1 + 0.2, math.nan, math.inf, D("NaN"), True, 10**50
    )
    with pytest.raises(TypeError, match="'c'"):
        literal_probe("abc", w.leaf)


def test_decimal_as_int32(tmp_path: Path) -> None:
    groups = DECIMAL_GROUPS
    w = write_groups(tmp_path, groups, pa.decimal128(9, 2), store_decimal_as_integer=True)
    assert (w.leaf.physical_type, w.leaf.converted_type) == ("INT32", "DECIMAL")
    check_decimal_9_2(w)
    assert literal_probe(D("1.5"), w.leaf).hashes.tolist() == [raw_hash(struct.pack("<i", 150))]


def test_decimal_as_int64(tmp_path: Path) -> None:
    groups = [[D("123456789012345.678"), D("-1.000")], [D("0.001")], [D("-1")]]
    w = write_groups(tmp_path, groups, pa.decimal128(18, 3), store_decimal_as_integer=True)
    assert w.leaf.physical_type == "INT64"
    w.assert_in(D("123456789012345.678"), {0})
    w.assert_in(-1, {0, 2})
    w.assert_in(0.001, {1})
    w.assert_absent(D("0.0001"), D("1E+15"))


def test_decimal_as_fixed_len_byte_array(tmp_path: Path) -> None:
    w = write_groups(tmp_path, DECIMAL_GROUPS, pa.decimal128(9, 2))
    assert (w.leaf.physical_type, w.leaf.type_length) == ("FIXED_LEN_BYTE_ARRAY", 4)
    check_decimal_9_2(w)
    assert literal_probe(D("-0.01"), w.leaf).hashes.tolist() == [raw_hash(b"\xff" * 4)]


@pytest.mark.parametrize(
    ("arrow_type", "width"),
    [
        (pa.decimal32(5, 2), 3),
        (pa.decimal64(12, 2), 6),
        (pa.decimal128(30, 2), 13),
        (pa.decimal256(40, 2), 17),
    ],
)
def test_decimal_fixed_widths(tmp_path: Path, arrow_type: pa.DataType, width: int) -> None:
    big = D("9" * (arrow_type.precision - 2) + ".99")  # the largest value
    groups = [[D("-1.28"), big], [D(f"-{big}"), D("0.00")], [D("-1.28")]]
    w = write_groups(tmp_path, groups, arrow_type)
    assert (w.leaf.physical_type, w.leaf.type_length) == ("FIXED_LEN_BYTE_ARRAY", width)
    w.assert_in(D("-1.28"), {0, 2})
    w.assert_in(big, {0})
    w.assert_in(D(f"-{big}"), {1})
    w.assert_in(0, {1})
    w.assert_absent(D("1" + "0" * (arrow_type.precision - 2)), D("-1.285"))


def minimal_twos_complement(value: int) -> bytes:
    """Java's BigInteger.toByteArray, written out: the fewest bytes with the right sign."""
    for size in range(1, 64):
        if -(2 ** (8 * size - 1)) <= value < 2 ** (8 * size - 1):
            return value.to_bytes(size, "big", signed=True)
    raise AssertionError(value)


def test_decimal_as_byte_array_minimal_twos_complement(tmp_path: Path) -> None:
    """No writer we can run stores BYTE_ARRAY decimals (pyarrow and DuckDB write FLBA), so
    write the minimal bytes as binary and re-annotate the footer as DECIMAL(30, 2); pyarrow
    then reads decimal128(30, 2), whose column_hashes must rebuild the filter."""
    unscaled = [[0, 1, -1, 127, 128], [-128, -129, 255, 256], [10**20, -(10**20), 12345, 1]]
    assert minimal_twos_complement(128) == b"\x00\x80"
    assert minimal_twos_complement(-129) == b"\xff\x7f"
    assert minimal_twos_complement(0) == b"\x00"
    assert minimal_twos_complement(-1) == b"\xff"
    groups = [[minimal_twos_complement(v) for v in g] for g in unscaled]
    size = 6
    binary = [v for g in groups for v in [*g, *[None] * (size - len(g))]]
    model = pa.array([D(1)] * len(binary), pa.decimal128(30, 2))
    path = tmp_path / "binary.parquet"
    table = pa.table({"c": pa.array(binary, pa.binary()), "model": model})
    pq.write_table(
        table, path, bloom_filter_options={"c": BLOOM}, row_group_size=size, store_schema=False
    )
    data = path.read_bytes()
    (footer_len,) = struct.unpack("<I", data[-8:-4])
    md = fmt.decode_file_metadata(data[-8 - footer_len : -8], full=True)
    element = next(e for e in md.schema if e.name == "c")
    pattern = next(e for e in md.schema if e.name == "model")
    element.converted_type, element.logicalType = pattern.converted_type, pattern.logicalType
    element.scale, element.precision = 2, 30
    for row_group in md.row_groups:
        row_group.columns[0].meta_data.statistics = None  # binary min/max, not decimal
    footer = fmt.encode_file_metadata(md)
    path.write_bytes(data[: -8 - footer_len] + footer + struct.pack("<I", len(footer)) + b"PAR1")

    w = Written(path, "c")
    assert (w.leaf.physical_type, w.leaf.converted_type) == ("BYTE_ARRAY", "DECIMAL")
    assert w.arrays[0].type == pa.decimal128(30, 2)
    w.assert_in(D("1.28"), {0})
    w.assert_in(D("-1.29"), {1})
    w.assert_in(D("0.01"), {0, 2})
    w.assert_in(D(10**20).scaleb(-2), {2})
    w.assert_in(0, {0})
    w.assert_absent(D("0.001"), D(10**30))
    # Nulls and dictionaries go through the same vectorised conversion.
    whole = pq.read_table(path).column("c").combine_chunks().dictionary_encode()
    assert sorted(column_hashes(whole, w.leaf).tolist()) == sorted(
        np.concatenate(w.hashes).tolist()
    )


# ---- dates and times -----------------------------------------------------------------------


def test_date32_days(tmp_path: Path) -> None:
    days = (
        [dt.date(1969, 12, 31), dt.date(2024, 1, 2)],
        [dt.date(1970, 1, 1)],
        [dt.date(2024, 1, 2)],
    )
    w = write_groups(tmp_path, days, pa.date32())
    w.assert_in(dt.date(2024, 1, 2), {0, 2})
    w.assert_in(dt.datetime(2024, 1, 2), {0, 2})  # midnight: that date
    w.assert_in(dt.datetime(2024, 1, 2, tzinfo=PLUS_ONE), {0, 2})  # its wall-clock date
    w.assert_in(np.datetime64("1969-12-31"), {0})
    w.assert_in(np.datetime64("1970-01-01T00:00:00.000000000"), {1})
    w.assert_in(0, {1})  # an int is a number of days
    w.assert_in(-1, {0})
    w.assert_absent(dt.datetime(2024, 1, 2, 12), np.datetime64("2024-01-02T01"), 2**31)
    with pytest.raises(TypeError, match="'c'"):
        literal_probe("2024-01-02", w.leaf)


def test_date64_stored_as_int32_days(tmp_path: Path) -> None:
    days = [
        [dt.date(2024, 1, 2), dt.date(1900, 1, 1)],
        [dt.date(2024, 1, 3)],
        [dt.date(1900, 1, 1)],
    ]
    w = write_groups(tmp_path, days, pa.date64())
    assert (w.leaf.physical_type, w.leaf.converted_type) == ("INT32", "DATE")
    assert w.arrays[0].type == pa.date32()  # pyarrow 26 reads date64 back as date32
    # The date64 values handed to the writer hash as the stored INT32 days too.
    original = pa.array([d for g in days for d in g], pa.date64())
    assert sorted(column_hashes(original, w.leaf).tolist()) == sorted(
        np.concatenate(w.hashes).tolist()
    )
    w.assert_in(dt.date(1900, 1, 1), {0, 2})
    w.assert_in(np.datetime64("2024-01-03T00:00:00.000", "ms"), {1})


@pytest.mark.parametrize(
    ("arrow_type", "physical", "finer"),
    [
        (pa.time32("s"), "INT32", dt.time(1, 2, 3, 1)),  # stored as ms
        (pa.time32("ms"), "INT32", dt.time(1, 2, 3, 1)),
        (pa.time64("us"), "INT64", np.timedelta64(3_723_000_000_001, "ns")),
        (pa.time64("ns"), "INT64", np.timedelta64(3_723_000_000_000_001, "ps")),
    ],
)
def test_time_units(tmp_path: Path, arrow_type: pa.DataType, physical: str, finer: Any) -> None:
    groups = [[dt.time(1, 2, 3), dt.time(0, 0)], [dt.time(23, 59, 59)], [dt.time(1, 2, 3)]]
    w = write_groups(tmp_path, groups, arrow_type)
    assert w.leaf.physical_type == physical
    w.assert_in(dt.time(1, 2, 3), {0, 2})
    w.assert_in(dt.timedelta(hours=1, minutes=2, seconds=3), {0, 2})
    w.assert_in(np.timedelta64(3723, "s"), {0, 2})
    w.assert_in(dt.time(0, 0), {0})
    # TIME columns written by pyarrow are not UTC-adjusted: an aware time is its wall clock.
    w.assert_in(dt.time(23, 59, 59, tzinfo=PLUS_ONE), {1})
    w.assert_absent(finer)
    original = pa.array([t for g in groups for t in g], arrow_type)
    assert sorted(column_hashes(original, w.leaf).tolist()) == sorted(
        np.concatenate(w.hashes).tolist()
    )
    with pytest.raises(TypeError, match="'c'"):
        literal_probe(dt.datetime(2024, 1, 1, 1, 2, 3), w.leaf)


def test_time_nanoseconds(tmp_path: Path) -> None:
    nanos = [3_723_000_000_001, 0, 5, None, 3_723_000_000_001, None]
    values = pa.array(nanos, pa.int64()).cast(pa.time64("ns"))
    path = tmp_path / "t.parquet"
    pq.write_table(
        pa.table({"c": values}), path, bloom_filter_options={"c": BLOOM}, row_group_size=2
    )
    w = Written(path, "c")
    w.assert_in(np.timedelta64(3_723_000_000_001, "ns"), {0, 2})
    w.assert_in(pa.array([5], pa.int64()).cast(pa.time64("ns")), {1})  # pyarrow scalars
    w.assert_in(5, {1})  # an int is a count of the column's unit
    assert w.holding(dt.time(1, 2, 3)) == set()


# Seconds since the epoch, per row group: 2024-01-02 03:04:05, 1969-12-31 23:59:59 and
# 2024-01-02 04:04:05 UTC.
THREE = 1_704_164_645
TIMESTAMP_SECONDS = [[THREE, -1], [THREE + 3600], [THREE]]


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("tz", [None, "UTC", "Europe/Paris"])
def test_timestamp_units_and_zones(tmp_path: Path, unit: str, tz: str | None) -> None:
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]
    ticks = [[s * per_second for s in g] for g in TIMESTAMP_SECONDS]
    w = write_groups(tmp_path, ticks, pa.timestamp(unit, tz=tz))
    stored_unit = timestamp_unit(w.leaf)
    assert stored_unit == {"s": "MILLIS", "ms": "MILLIS", "us": "MICROS", "ns": "NANOS"}[unit]
    utc_adjusted = w.leaf.logical_type.TIMESTAMP.isAdjustedToUTC
    assert utc_adjusted == (tz is not None)
    # What pyarrow reads back: timestamp[s] comes back as ms; the zone is kept.
    assert w.arrays[0].type == pa.timestamp("ms" if unit == "s" else unit, tz=tz)
    # The values handed to the writer (timestamp[s] too) hash as the stored ones.
    original = pa.array([t for g in ticks for t in g], pa.int64()).cast(pa.timestamp(unit, tz=tz))
    assert sorted(column_hashes(original, w.leaf).tolist()) == sorted(
        np.concatenate(w.hashes).tolist()
    )
    three = dt.datetime(2024, 1, 2, 3, 4, 5)
    w.assert_in(three, {0, 2})  # naive: UTC for adjusted columns, the wall clock otherwise
    w.assert_in(np.datetime64("2024-01-02T03:04:05.000000000"), {0, 2})
    w.assert_in(np.datetime64("2024-01-02T03:04:05", "s"), {0, 2})
    w.assert_in(dt.datetime(1969, 12, 31, 23, 59, 59), {0})
    w.assert_in(dt.datetime(2024, 1, 2, 4, 4, 5), {1})
    aware = three.replace(tzinfo=PLUS_ONE)  # 02:04:05 UTC, wall clock 03:04:05
    if utc_adjusted:
        w.assert_in(aware.replace(hour=5), {1})  # 04:04:05 UTC
        w.assert_in(three.replace(tzinfo=UTC), {0, 2})
        assert w.holding(aware) == set()
    else:
        w.assert_in(aware, {0, 2})  # the wall-clock fields; tzinfo ignored
    finer = {
        "MILLIS": three + dt.timedelta(microseconds=1),
        "MICROS": np.datetime64("2024-01-02T03:04:05.000000001"),
        "NANOS": np.datetime64("2024-01-02T03:04:05.000000000001", "ps"),
    }[stored_unit]
    w.assert_absent(finer)
    with pytest.raises(TypeError, match="'c'"):
        literal_probe("2024-01-02", w.leaf)


def timestamp_unit(leaf: fmt.SchemaLeaf) -> str:
    unit = leaf.logical_type.TIMESTAMP.unit
    return next(name for name in ("MILLIS", "MICROS", "NANOS") if getattr(unit, name) is not None)


def test_timestamp_int_literal_is_raw_units_and_date_is_midnight(tmp_path: Path) -> None:
    groups = [[dt.datetime(2024, 1, 2)], [dt.datetime(1970, 1, 1, 0, 0, 0, 5000)]]
    w = write_groups(tmp_path, groups, pa.timestamp("us"))
    w.assert_in(dt.date(2024, 1, 2), {0})
    w.assert_in(5000, {1})
    w.assert_absent(2**63)


def int96_bytes(value: dt.datetime) -> bytes:
    """LogicalTypes.md INT96: nanoseconds of the day, then the Julian day, little-endian."""
    since_epoch = value - dt.datetime(1970, 1, 1)
    nanos = (since_epoch // dt.timedelta(microseconds=1)) * 1000
    day, nanos_of_day = divmod(nanos, 86_400 * 10**9)
    return struct.pack("<qi", nanos_of_day, day + 2_440_588)


def test_int96_timestamps(tmp_path: Path) -> None:
    groups = [
        [dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.datetime(1969, 12, 31, 23, 59, 59)],
        [dt.datetime(1970, 1, 1)],
        [dt.datetime(2024, 1, 2, 3, 4, 5, 6)],
    ]
    w = write_groups(tmp_path, groups, pa.timestamp("us"), use_deprecated_int96_timestamps=True)
    assert (w.leaf.physical_type, w.leaf.logical_type, w.leaf.converted_type) == (
        "INT96",
        None,
        None,
    )
    assert w.arrays[0].type == pa.timestamp("ns")  # pyarrow reads INT96 as ns
    original = pa.array([t for g in groups for t in g], pa.timestamp("us"))
    assert sorted(column_hashes(original, w.leaf).tolist()) == sorted(
        np.concatenate(w.hashes).tolist()
    )
    w.assert_in(dt.datetime(2024, 1, 2, 3, 4, 5, 6), {0, 2})
    w.assert_in(dt.datetime(2024, 1, 2, 4, 4, 5, 6, tzinfo=PLUS_ONE), {0, 2})
    w.assert_in(dt.datetime(1969, 12, 31, 23, 59, 59), {0})
    w.assert_in(np.datetime64("1970-01-01"), {1})
    w.assert_in(0, {1})  # an int is nanoseconds since the epoch
    w.assert_in(int96_bytes(dt.datetime(1970, 1, 1)), {1})  # raw 12 bytes
    # Hand-computed layout: 1 us after 1970-01-02 is (1000 ns, Julian day 2440589).
    expected = (1000).to_bytes(8, "little") + (2_440_589).to_bytes(4, "little")
    probe = literal_probe(dt.datetime(1970, 1, 2, 0, 0, 0, 1), w.leaf)
    assert probe.hashes.tolist() == [raw_hash(expected)]
    assert int96_bytes(dt.datetime(1969, 12, 31, 23, 59, 59)) == struct.pack(
        "<qi", 86_399 * 10**9, 2_440_587
    )
    w.assert_absent(np.datetime64("2024-01-02T03:04:05.000006000001", "ps"), b"\x00" * 11)


# ---- floats ------------------------------------------------------------------------------


@pytest.mark.parametrize("arrow_type", [pa.float32(), pa.float64()])
def test_floats_zeros_nan_and_exactness(tmp_path: Path, arrow_type: pa.DataType) -> None:
    groups = [[1.5, -0.0, 0.1], [0.0, math.nan], [math.inf, 3.0]]
    w = write_groups(tmp_path, groups, arrow_type)
    w.assert_in(0.0, {0, 1})  # probes +0.0 and -0.0: rg 0 holds only -0.0
    w.assert_in(-0.0, {0, 1})
    assert literal_probe(0.0, w.leaf).hashes.size == 2
    w.assert_in(1.5, {0})
    w.assert_in(np.float32(1.5), {0})
    w.assert_in(D("1.5"), {0})
    w.assert_in(3, {2})
    w.assert_in(math.inf, {2})
    w.assert_kept(math.nan, np.float32("nan"), D("NaN"), [1.5, math.nan], None)
    if arrow_type == pa.float32():
        w.assert_in(np.float32(0.1), {0})
        w.assert_absent(0.1, 2**24 + 1, D("0.1"))  # not exactly a float32
        w.assert_absent(1e300)  # overflows float32
    else:
        w.assert_in(0.1, {0})
        w.assert_absent(2**53 + 1, D("0.1"))
        assert w.holding(np.float32(0.1)) == set()  # a double, just not this one
    w.assert_absent(True)
    with pytest.raises(TypeError, match="'c'"):
        literal_probe("1.5", w.leaf)


def test_float16(tmp_path: Path) -> None:
    groups = [
        [np.float16(1.5), np.float16(-0.0)],
        [np.float16(0.0), np.float16("nan")],
        [np.float16(65504), np.float16(0.1)],
    ]
    w = write_groups(tmp_path, groups, pa.float16())
    assert (w.leaf.physical_type, w.leaf.type_length) == ("FIXED_LEN_BYTE_ARRAY", 2)
    w.assert_in(1.5, {0})
    w.assert_in(0.0, {0, 1})
    w.assert_in(65504, {2})
    w.assert_in(np.float16(0.1), {2})
    assert literal_probe(1.5, w.leaf).hashes.tolist() == [raw_hash(np.float16(1.5).tobytes())]
    w.assert_absent(0.1, 65505, 1e10)
    w.assert_kept(math.nan)


# ---- byte types ----------------------------------------------------------------------------


def test_uuid(tmp_path: Path) -> None:
    a, b = uuid.UUID(int=1), uuid.UUID("12345678-1234-5678-1234-567812345678")
    w = write_groups(tmp_path, [[a.bytes, b.bytes], [b.bytes], [a.bytes]], pa.uuid())
    assert (w.leaf.physical_type, w.leaf.type_length) == ("FIXED_LEN_BYTE_ARRAY", 16)
    assert w.leaf.logical_type.UUID is not None
    w.assert_in(a, {0, 2})
    w.assert_in(str(b), {0, 1})
    w.assert_in(b.bytes, {0, 1})
    w.assert_absent("not-a-uuid", b.bytes[:15])
    with pytest.raises(TypeError, match="'c'"):
        literal_probe(1, w.leaf)


@pytest.mark.parametrize(
    "arrow_type", [pa.string(), pa.large_string(), pa.string_view(), pa.json_()]
)
def test_strings(tmp_path: Path, arrow_type: pa.DataType) -> None:
    groups = [["é", "", "x" * 40], ["abc"], ["é", "abc"]]
    w = write_groups(tmp_path, groups, arrow_type)
    assert w.leaf.physical_type == "BYTE_ARRAY"
    w.assert_in("é", {0, 2})
    w.assert_in("é".encode(), {0, 2})
    w.assert_in("", {0})
    w.assert_in("x" * 40, {0})
    w.assert_in(np.str_("abc"), {1, 2})
    w.assert_absent("\ud800")  # a lone surrogate has no UTF-8 form
    with pytest.raises(TypeError, match="'c'"):
        literal_probe(5, w.leaf)


def test_dictionary_strings(tmp_path: Path) -> None:
    values = pa.array(["a", "b", None, "a", "c", "c"]).dictionary_encode()
    path = tmp_path / "dict.parquet"
    pq.write_table(
        pa.table({"c": values}), path, bloom_filter_options={"c": BLOOM}, row_group_size=2
    )
    w = Written(path, "c", read_dictionary=True)
    assert pa.types.is_dictionary(w.arrays[0].type)
    w.assert_in("a", {0, 1})
    w.assert_in("c", {2})


def test_binary(tmp_path: Path) -> None:
    groups = [[b"\x00\xff", b"abc"], [b""], [b"abc"]]
    w = write_groups(tmp_path, groups, pa.binary())
    assert (w.leaf.physical_type, w.leaf.logical_type, w.leaf.converted_type) == (
        "BYTE_ARRAY",
        None,
        None,
    )
    w.assert_in(b"\x00\xff", {0})
    w.assert_in(bytearray(b"abc"), {0, 2})
    w.assert_in("abc", {0, 2})  # str as UTF-8
    w.assert_in(memoryview(b""), {1})
    large = pa.array([b"abc"], pa.large_binary())
    view = pa.array([b"abc"], pa.binary_view())
    assert column_hashes(large, w.leaf).tolist() == column_hashes(view, w.leaf).tolist()


def test_fixed_size_binary(tmp_path: Path) -> None:
    w = write_groups(tmp_path, [[b"abcd"], [b"\x00\x00\x00\x00"], [b"abcd"]], pa.binary(4))
    assert (w.leaf.physical_type, w.leaf.type_length) == ("FIXED_LEN_BYTE_ARRAY", 4)
    w.assert_in(b"abcd", {0, 2})
    w.assert_in("abcd", {0, 2})
    w.assert_in(bytes(4), {1})
    w.assert_absent(b"abc", b"abcde", "")


# ---- nested leaves -------------------------------------------------------------------------


def test_struct_field_and_list_element(tmp_path: Path) -> None:
    table = pa.table(
        {
            "s": pa.array(
                [{"a": 1, "b": "x"}, {"a": 2, "b": None}, None, {"a": 3, "b": "y"}],
                pa.struct([("a", pa.int16()), ("b", pa.string())]),
            ),
            "tags": pa.array([["p", "q"], [], None, ["q", "r"]], pa.list_(pa.string())),
        }
    )
    path = tmp_path / "nested.parquet"
    options = {"s.a": BLOOM, "tags.list.element": BLOOM}
    pq.write_table(table, path, bloom_filter_options=options, row_group_size=2)
    s = Written(path, "s.a")
    assert s.leaf.converted_type == "INT_16"
    s.assert_in(1, {0})
    s.assert_in(3, {1})
    tags = Written(path, "tags.list.element")
    tags.assert_in("q", {0, 1})
    tags.assert_in("p", {0})
    whole = pq.read_table(path).column("tags")
    with pytest.raises(TypeError, match="list_flatten"):
        column_hashes(whole, tags.leaf)


# ---- what must keep every row group --------------------------------------------------------


def test_boolean_column_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "bool.parquet"
    table = pa.table({"c": [True, False]})
    with pytest.raises(OSError, match="does not support boolean"):
        pq.write_table(table, path, bloom_filter_options={"c": BLOOM})
    pq.write_table(table, path)
    with BloomFilterReader(path) as reader:
        assert reader.filter(0, "c") is None  # pyarrow writes no BOOLEAN filter
        leaf = leaf_of(reader, "c")
    assert literal_probe(True, leaf).always_keep
    assert literal_probe([1, "x"], leaf).always_keep
    with pytest.raises(ValueError, match="BOOLEAN"):
        column_hashes(pa.array([True]), leaf)


def test_none_keeps_and_other_literals_still_hash(tmp_path: Path) -> None:
    w = write_groups(tmp_path, [[1], [2]], pa.int64())
    probe = literal_probe([None, 2], w.leaf)
    assert probe.always_keep and probe.hashes.size == 1
    assert literal_probe(None, w.leaf).always_keep
    assert literal_probe(np.datetime64("NaT"), w.leaf).always_keep
    empty = literal_probe([], w.leaf)
    assert isinstance(empty, Probe) and empty.hashes.size == 0 and not empty.always_keep
    assert empty.hashes.dtype == np.uint64
    # Duplicates probe once.
    assert literal_probe([2, 2.0, D(2)], w.leaf).hashes.size == 1
    # Iterating a pyarrow array gives pyarrow scalars; they are literals too.
    w.assert_in(pa.array([2], pa.int64()), {1})


def test_unsupported_logical_types_keep_everything(tmp_path: Path) -> None:
    leaf = write_groups(tmp_path, [["a"], ["b"]], pa.string()).leaf
    logical_type = type(leaf.logical_type)
    newer = dataclasses.replace(leaf, logical_type=logical_type())  # a member we do not know
    assert literal_probe("a", newer).always_keep
    geometry = dataclasses.replace(leaf, logical_type=logical_type(GEOMETRY=object()))
    assert literal_probe(b"\x01", geometry).always_keep
    interval = dataclasses.replace(
        leaf,
        physical_type="FIXED_LEN_BYTE_ARRAY",
        type_length=12,
        logical_type=None,
        converted_type="INTERVAL",
    )
    assert literal_probe(b"\x00" * 12, interval).always_keep
    # A logical type on a physical type the spec does not allow: never trusted.
    date_on_bytes = dataclasses.replace(leaf, logical_type=logical_type(DATE=object()))
    assert literal_probe(dt.date(2024, 1, 1), date_on_bytes).always_keep


def test_converted_type_only_leaves_encode_like_logical_ones(tmp_path: Path) -> None:
    """Old files carry only the ConvertedType; it must give the same encodings (and the
    legacy TIME/TIMESTAMP annotations mean isAdjustedToUTC=true)."""
    cases: list[tuple[pa.DataType, str, list[Any], list[Any]]] = [
        (pa.int8(), "INT_8", [-5], [-5, 300]),
        (pa.uint32(), "UINT_32", [4_000_000_000], [4_000_000_000, -1]),
        (pa.decimal128(9, 2), "DECIMAL", [D("1.50")], [D("1.5"), 1.5, D("1.505")]),
        (pa.date32(), "DATE", [dt.date(2024, 1, 2)], [dt.date(2024, 1, 2)]),
        # pyarrow writes local TIME with no ConvertedType (TIME_MILLIS would mean UTC).
        (pa.time32("ms"), "TIME_MILLIS", [dt.time(1, 2, 3)], [dt.time(1, 2, 3, 1)]),
        (pa.time64("us"), "TIME_MICROS", [dt.time(1, 2, 3)], [dt.time(1, 2, 3)]),
        (pa.timestamp("ms", tz="UTC"), "TIMESTAMP_MILLIS", [dt.datetime(2024, 1, 2)], [0]),
        (pa.timestamp("us", tz="UTC"), "TIMESTAMP_MICROS", [dt.datetime(2024, 1, 2)], [0]),
        (pa.string(), "UTF8", ["é"], ["é", b"x"]),
    ]
    for arrow_type, converted, values, literals in cases:
        w = write_groups(tmp_path, [values], arrow_type)
        assert w.leaf.converted_type in (converted, None), arrow_type
        legacy = dataclasses.replace(w.leaf, logical_type=None, converted_type=converted)
        for literal in [*values, *literals]:
            expected = literal_probe(literal, w.leaf).hashes.tolist()
            assert literal_probe(literal, legacy).hashes.tolist() == expected, literal
        assert column_hashes(w.arrays[0], legacy).tolist() == w.hashes[0].tolist()
    # TIME_MILLIS is UTC-adjusted: an aware time converts to UTC.
    w = write_groups(tmp_path, [[dt.time(0, 2, 3)]], pa.time32("ms"))
    legacy = dataclasses.replace(w.leaf, logical_type=None, converted_type="TIME_MILLIS")
    assert literal_probe(dt.time(1, 2, 3, tzinfo=PLUS_ONE), legacy).hashes.tolist() == (
        literal_probe(dt.time(0, 2, 3), w.leaf).hashes.tolist()
    )
    # ENUM, JSON and BSON annotate BYTE_ARRAY whose bytes are the value itself.
    w = write_groups(tmp_path, [["a", "b"]], pa.string())
    logical_type = type(w.leaf.logical_type)
    for converted in ("ENUM", "JSON", "BSON"):
        leaf = dataclasses.replace(w.leaf, logical_type=None, converted_type=converted)
        assert literal_probe("a", leaf).hashes.tolist() == w.hashes[0][:1].tolist()
    enum = dataclasses.replace(w.leaf, logical_type=logical_type(ENUM=object()))
    assert literal_probe(b"b", enum).hashes.tolist() == w.hashes[0][1:].tolist()


def test_column_hashes_rejects_types_the_column_cannot_hold(tmp_path: Path) -> None:
    leaf = write_groups(tmp_path, [[dt.date(2024, 1, 1)], [None]], pa.date32()).leaf
    with pytest.raises(TypeError, match=r"'c'.*DATE.*string"):
        column_hashes(pa.array(["2024-01-01"]), leaf)
    with pytest.raises(TypeError, match="pyarrow"):
        column_hashes([1, 2], leaf)
    ts_leaf = write_groups(tmp_path, [[dt.datetime(2024, 1, 1)], [None]], pa.timestamp("ms")).leaf
    with pytest.raises(ValueError, match="lose data"):
        column_hashes(pa.array([1], pa.timestamp("us")), ts_leaf)
    dec_leaf = write_groups(tmp_path, [[D("1.00")], [None]], pa.decimal128(9, 2)).leaf
    with pytest.raises(ValueError, match="scale"):
        column_hashes(pa.array([D("1.0")], pa.decimal128(9, 1)), dec_leaf)
    assert column_hashes(pa.chunked_array([], pa.decimal128(9, 2)), dec_leaf).size == 0
    assert column_hashes(pa.nulls(3), dec_leaf).size == 0


def test_chunked_and_sliced_arrays(tmp_path: Path) -> None:
    """A ChunkedArray hashes as its chunks; slices (offset buffers) and nulls are honoured."""
    groups = [[D("1.28"), D("-1.29")], [D("0.01")], [D("-1.29"), D("3")]]
    w = write_groups(tmp_path, groups, pa.decimal128(30, 2))
    whole = pq.read_table(w.path).column("c")
    expected = np.concatenate(w.hashes).tolist()
    assert column_hashes(whole, w.leaf).tolist() == expected
    rechunked = pa.chunked_array([whole.combine_chunks()[:4], whole.combine_chunks()[4:]])
    assert column_hashes(rechunked, w.leaf).tolist() == expected
    flat = whole.combine_chunks()
    assert column_hashes(flat.slice(3), w.leaf).tolist() == np.concatenate(w.hashes[1:]).tolist()


# ---- DuckDB as writer and second opinion ---------------------------------------------------


DUCK_CASES = [
    # (SQL type, per-row-group SQL literals, physical, converted, [(literal, SQL literal, rgs)])
    (
        "TINYINT",
        [["-128", "5"], ["127"], ["5", "0"]],
        "INT32",
        "INT_8",
        [(5, "5::TINYINT", {0, 2}), (-128, "(-128)::TINYINT", {0}), (127, "127::TINYINT", {1})],
    ),
    (
        "SMALLINT",
        [["-32768", "300"], ["32767"], ["300"]],
        "INT32",
        "INT_16",
        [(300, "300::SMALLINT", {0, 2}), (-32768, "(-32768)::SMALLINT", {0})],
    ),
    (
        "UTINYINT",
        [["255", "0"], ["200"], ["255"]],
        "INT32",
        "UINT_8",
        [(255, "255::UTINYINT", {0, 2}), (200, "200::UTINYINT", {1})],
    ),
    (
        "USMALLINT",
        [["65535"], ["1000", "0"], ["65535"]],
        "INT32",
        "UINT_16",
        [(65535, "65535::USMALLINT", {0, 2})],
    ),
    (
        "UINTEGER",
        [["4000000000"], ["4294967295"], ["1"]],
        "INT32",
        "UINT_32",
        [(4_000_000_000, "4000000000::UINTEGER", {0}), (2**32 - 1, "4294967295::UINTEGER", {1})],
    ),
    (
        "UBIGINT",
        [["18446744073709551615"], ["9223372036854775808"], ["1"]],
        "INT64",
        "UINT_64",
        [
            (2**64 - 1, "18446744073709551615::UBIGINT", {0}),
            (2**63, "9223372036854775808::UBIGINT", {1}),
        ],
    ),
    (
        "INTEGER",
        [["-2147483648", "7"], ["2147483647"], ["7"]],
        "INT32",
        "INT_32",
        [(7, "7::INTEGER", {0, 2}), (-(2**31), "(-2147483648)::INTEGER", {0})],
    ),
    (
        "BIGINT",
        [["-9223372036854775808"], ["9223372036854775807", "7"], ["7"]],
        "INT64",
        "INT_64",
        [(7, "7::BIGINT", {1, 2}), (2**63 - 1, "9223372036854775807::BIGINT", {1})],
    ),
    (
        "DECIMAL(4,2)",
        [["1.50", "-0.01"], ["99.99"], ["1.5"]],
        "INT32",
        "DECIMAL",
        [(D("1.5"), "1.5::DECIMAL(4,2)", {0, 2}), (D("-0.01"), "(-0.01)::DECIMAL(4,2)", {0})],
    ),
    (
        "DECIMAL(9,2)",
        [["1.50", "-0.01"], ["9999999.99"], ["1.5"]],
        "INT32",
        "DECIMAL",
        [(1.5, "1.5::DECIMAL(9,2)", {0, 2}), (D("9999999.99"), "9999999.99::DECIMAL(9,2)", {1})],
    ),
    (
        "DECIMAL(18,3)",
        [["123456789012345.678"], ["-1"], ["0.001"]],
        "INT64",
        "DECIMAL",
        [
            (D("123456789012345.678"), "123456789012345.678::DECIMAL(18,3)", {0}),
            (-1, "(-1)::DECIMAL(18,3)", {1}),
        ],
    ),
    (
        "DATE",
        [["DATE '2024-01-02'", "DATE '1969-12-31'"], ["DATE '1970-01-01'"], ["DATE '2024-01-02'"]],
        "INT32",
        "DATE",
        [
            (dt.date(2024, 1, 2), "DATE '2024-01-02'", {0, 2}),
            (dt.date(1969, 12, 31), "DATE '1969-12-31'", {0}),
        ],
    ),
    (
        "TIMESTAMP",
        [
            ["TIMESTAMP '2024-01-02 03:04:05.000006'"],
            ["TIMESTAMP '1969-12-31 23:59:59'"],
            ["TIMESTAMP '2024-01-02 03:04:05.000006'"],
        ],
        "INT64",
        "TIMESTAMP_MICROS",
        [
            (dt.datetime(2024, 1, 2, 3, 4, 5, 6), "TIMESTAMP '2024-01-02 03:04:05.000006'", {0, 2}),
            (dt.datetime(1969, 12, 31, 23, 59, 59), "TIMESTAMP '1969-12-31 23:59:59'", {1}),
        ],
    ),
    (
        "TIMESTAMPTZ",
        [
            ["TIMESTAMPTZ '2024-01-02 03:04:05+00'"],
            ["TIMESTAMPTZ '2024-01-02 04:04:05+00'"],
            ["TIMESTAMPTZ '2024-01-02 03:04:05+00'"],
        ],
        "INT64",
        "TIMESTAMP_MICROS",
        [
            (
                dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
                "TIMESTAMPTZ '2024-01-02 03:04:05+00'",
                {0, 2},
            ),
            (
                dt.datetime(2024, 1, 2, 5, 4, 5, tzinfo=PLUS_ONE),
                "TIMESTAMPTZ '2024-01-02 04:04:05+00'",
                {1},
            ),
        ],
    ),
    (
        "TIME",
        [["TIME '01:02:03.456789'"], ["TIME '23:59:59'"], ["TIME '01:02:03.456789'"]],
        "INT64",
        "TIME_MICROS",
        [(dt.time(1, 2, 3, 456789), "TIME '01:02:03.456789'", {0, 2})],
    ),
    (
        "FLOAT",
        [["1.5", "-0.0"], ["0.0"], ["0.1"]],
        "FLOAT",
        None,
        [
            (1.5, "1.5::FLOAT", {0}),
            (0.0, "0.0::FLOAT", {0, 1}),
            (np.float32(0.1), "0.1::FLOAT", {2}),
        ],
    ),
    (
        "DOUBLE",
        [["1.5", "-0.0"], ["0.0"], ["0.1"]],
        "DOUBLE",
        None,
        [(1.5, "1.5::DOUBLE", {0}), (-0.0, "(-0.0)::DOUBLE", {0, 1}), (0.1, "0.1::DOUBLE", {2})],
    ),
    (
        "VARCHAR",
        [["'é'", "''"], ["'abc'"], ["'é'"]],
        "BYTE_ARRAY",
        "UTF8",
        [("é", "'é'", {0, 2}), ("", "''", {0})],
    ),
    (
        "BLOB",
        [["'\\x00\\xFF'::BLOB"], ["'abc'::BLOB"], ["'abc'::BLOB"]],
        "BYTE_ARRAY",
        None,
        [(b"\x00\xff", "'\\x00\\xFF'::BLOB", {0}), (b"abc", "'abc'::BLOB", {1, 2})],
    ),
    (
        "UUID",
        [
            ["'12345678-1234-5678-1234-567812345678'"],
            ["'00000000-0000-0000-0000-000000000001'"],
            ["'12345678-1234-5678-1234-567812345678'"],
        ],
        "FIXED_LEN_BYTE_ARRAY",
        None,
        [
            (
                uuid.UUID("12345678-1234-5678-1234-567812345678"),
                "'12345678-1234-5678-1234-567812345678'::UUID",
                {0, 2},
            )
        ],
    ),  # TIME WITH TIME ZONE: DuckDB normalises to UTC and writes TIME(isAdjustedToUTC=true).
    (
        "TIMETZ",
        [["TIMETZ '01:02:03+01'"], ["TIMETZ '23:00:00+00'"], ["TIMETZ '00:02:03+00'"]],
        "INT64",
        "TIME_MICROS",
        [
            (dt.time(1, 2, 3, tzinfo=PLUS_ONE), "TIMETZ '01:02:03+01'", {0, 2}),
            (dt.time(0, 2, 3), "TIMETZ '00:02:03+00'", {0, 2}),  # naive: taken as UTC
            (dt.time(0, 0, tzinfo=PLUS_ONE), "TIMETZ '00:00:00+01'", {1}),  # wraps midnight
        ],
    ),
    # TIMESTAMP_NS: TIMESTAMP(NANOS), no converted type (none can say nanoseconds).
    (
        "TIMESTAMP_NS",
        [
            ["TIMESTAMP_NS '2024-01-02 03:04:05.123456789'"],
            ["TIMESTAMP_NS '1969-12-31 23:59:59.999999999'"],
            ["TIMESTAMP_NS '2024-01-02 03:04:05.123456789'"],
        ],
        "INT64",
        None,
        [
            (
                np.datetime64("2024-01-02T03:04:05.123456789"),
                "TIMESTAMP_NS '2024-01-02 03:04:05.123456789'",
                {0, 2},
            ),
            (
                np.datetime64("1969-12-31T23:59:59.999999999"),
                "TIMESTAMP_NS '1969-12-31 23:59:59.999999999'",
                {1},
            ),
        ],
    ),
]


@pytest.mark.parametrize(
    ("sql_type", "groups", "physical", "converted", "probes"),
    DUCK_CASES,
    ids=[case[0] for case in DUCK_CASES],
)
def test_duckdb_files(
    tmp_path: Path,
    sql_type: str,
    groups: list[list[str]],
    physical: str,
    converted: str | None,
    probes: list[tuple[Any, str, set[int]]],
) -> None:
    w = duck_write(tmp_path, sql_type, groups)
    assert (w.leaf.physical_type, w.leaf.converted_type) == (physical, converted)
    for literal, sql_literal, row_groups in probes:
        assert_agrees_with_duckdb(w, literal, sql_literal, row_groups)


def test_duckdb_out_of_range_literals_give_no_hash(tmp_path: Path) -> None:
    w = duck_write(tmp_path, "TINYINT", [["1"], ["2"]])
    w.assert_absent(128, -129)
    w = duck_write(tmp_path, "USMALLINT", [["1"], ["2"]])
    w.assert_absent(-1, 65536)
    w = duck_write(tmp_path, "DECIMAL(9,2)", [["1"], ["2"]])
    w.assert_absent(D("1.001"), D("10000000"))
    w = duck_write(tmp_path, "TIMESTAMP", [["TIMESTAMP '2024-01-01'"], ["TIMESTAMP '2024-01-02'"]])
    w.assert_absent(np.datetime64("2024-01-01T00:00:00.000000001"))


def test_duckdb_interval_filters_are_not_of_the_stored_bytes(tmp_path: Path) -> None:
    """DuckDB marks its INTERVAL filters 'duckdb.interval_bloom_filter: normalized-v1' and
    hashes a normalised interval: 40 days is stored as such but hashed otherwise. So an
    INTERVAL literal must keep every row group, whatever its bytes."""
    path = tmp_path / "interval.parquet"
    duckdb.sql(
        "COPY (SELECT [INTERVAL 40 DAY, INTERVAL 25 HOUR][i % 2 + 1] AS c FROM range(100) t(i)) "
        f"TO '{path}' (FORMAT parquet)"
    )
    with BloomFilterReader(path) as reader:
        leaf, f = leaf_of(reader, "c"), reader.filter(0, "c")
    assert (leaf.physical_type, leaf.converted_type) == ("FIXED_LEN_BYTE_ARRAY", "INTERVAL")
    assert f is not None
    stored = pq.read_table(path).column("c")
    rebuilt = SplitBlockBloomFilter(f.num_bytes)
    rebuilt.insert_hashes(column_hashes(stored, leaf))  # the raw 12-byte values
    assert rebuilt.to_bytes() != f.to_bytes()
    assert literal_probe(stored[0].as_py(), leaf).always_keep


def test_duckdb_nested_leaves(tmp_path: Path) -> None:
    path = tmp_path / "nested.parquet"
    duckdb.sql(
        f"COPY (SELECT {{'a': (i // {DUCK_ROWS})::BIGINT, 'b': 'n' || (i % 3)}} AS s, "
        f"['t' || (i // {DUCK_ROWS}), 'x'] AS tags FROM range({3 * DUCK_ROWS}) t(i) ORDER BY i) "
        f"TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE {DUCK_ROWS})"
    )
    s = Written(path, "s.a")
    s.assert_in(1, {1})
    tags = Written(path, "tags.list.element")
    tags.assert_in("t2", {2})
    tags.assert_in("x", {0, 1, 2})
    # DuckDB's parquet_bloom_probe only finds top-level columns ("Column s.a not found").
    with pytest.raises(duckdb.InvalidInputException, match="not found"):
        duck_kept(s, "1::BIGINT", "s.a")


# ---- properties: the literal path agrees with the column path ------------------------------


@pytest.fixture(scope="module")
def leaves(tmp_path_factory: pytest.TempPathFactory) -> dict[str, fmt.SchemaLeaf]:
    table = pa.table(
        {
            "i8": pa.array([1], pa.int8()),
            "u32": pa.array([1], pa.uint32()),
            "i64": pa.array([1], pa.int64()),
            "f32": pa.array([1], pa.float32()),
            "f64": pa.array([1], pa.float64()),
            "dec": pa.array([D("1.00")], pa.decimal128(20, 2)),
            "ts": pa.array([0], pa.timestamp("us", tz="UTC")),
        }
    )
    path = tmp_path_factory.mktemp("leaves") / "leaves.parquet"
    pq.write_table(table, path)
    return {leaf.path: leaf for leaf in fmt.schema_leaves(pq_metadata(path))}


def pq_metadata(path: Path) -> Any:
    data = path.read_bytes()
    (footer_len,) = struct.unpack("<I", data[-8:-4])
    return fmt.decode_file_metadata(data[-8 - footer_len : -8])


def probe_equals_column(literal: Any, arrow_array: pa.Array, leaf: fmt.SchemaLeaf) -> None:
    assert literal_probe(literal, leaf).hashes.tolist() == column_hashes(arrow_array, leaf).tolist()


@settings(max_examples=60, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_property_int64(leaves: dict[str, fmt.SchemaLeaf], value: int) -> None:
    probe_equals_column(value, pa.array([value], pa.int64()), leaves["i64"])


@settings(max_examples=60, deadline=None)
@given(st.integers(-128, 127))
def test_property_int8(leaves: dict[str, fmt.SchemaLeaf], value: int) -> None:
    probe_equals_column(value, pa.array([value], pa.int8()), leaves["i8"])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_property_uint32(leaves: dict[str, fmt.SchemaLeaf], value: int) -> None:
    probe_equals_column(value, pa.array([value], pa.uint32()), leaves["u32"])


@settings(max_examples=60, deadline=None)
@given(st.floats(allow_nan=False).filter(lambda f: f != 0))
def test_property_double(leaves: dict[str, fmt.SchemaLeaf], value: float) -> None:
    probe_equals_column(value, pa.array([value], pa.float64()), leaves["f64"])


@settings(max_examples=60, deadline=None)
@given(st.floats(width=32, allow_nan=False).filter(lambda f: f != 0))
def test_property_float(leaves: dict[str, fmt.SchemaLeaf], value: float) -> None:
    probe_equals_column(value, pa.array([value], pa.float32()), leaves["f32"])


@settings(max_examples=60, deadline=None)
@given(st.decimals(min_value=-(10**17), max_value=10**17, places=2, allow_nan=False))
def test_property_decimal(leaves: dict[str, fmt.SchemaLeaf], value: decimal.Decimal) -> None:
    probe_equals_column(value, pa.array([value], pa.decimal128(20, 2)), leaves["dec"])


@settings(max_examples=60, deadline=None)
@given(st.datetimes(timezones=st.just(UTC)))
def test_property_timestamp(leaves: dict[str, fmt.SchemaLeaf], value: dt.datetime) -> None:
    probe_equals_column(value, pa.array([value], pa.timestamp("us", tz="UTC")), leaves["ts"])


def test_hex_literals_say_what_is_wrong_and_what_is_expected() -> None:
    from parquet_bloom._logical import hex_bytes

    assert hex_bytes("0x00ff") == b"\x00\xff" and hex_bytes("0x") == b""
    with pytest.raises(ValueError) as caught:
        hex_bytes("0x0g")
    assert str(caught.value) == (
        "'0x0g' is not hex: the character 'g' at position 3 is not a hex digit (0-9, a-f); "
        "expected 0x and two hex digits per byte, e.g. 0x00ff"
    )
    with pytest.raises(ValueError, match="an odd number of hex digits"):
        hex_bytes("0xabc")
    with pytest.raises(ValueError) as caught:
        hex_bytes("hex:secretzz", "hex:", name="footer_key")
    assert "secret" not in str(caught.value)  # a key's text is never echoed

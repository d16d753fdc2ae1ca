"""Files written by pyarrow (Arrow C++), deltalake (arrow-rs) and DuckDB, read by us.

For every column chunk with a filter, the filter we read must be byte for byte the filter we
build from that chunk's values at the same size; every value must be found; and values absent
from the chunk must be excluded at about the rate the filter's fill implies.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import _format as fmt
from parquet_bloom import _logical as logical
from tests import writers

DELTA_COLUMNS = [
    "int8",
    "int16",
    "int32",
    "int64",
    "float32",
    "float64",
    "decimal_9",
    "decimal_18",
    "decimal_30",
    "date",
    "ts_us_utc",
    "string",
    "binary",
    "struct",
    "tags",
]


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return writers.sample_table()


@pytest.fixture(scope="module")
def pyarrow_file(tmp_path_factory: pytest.TempPathFactory, table: pa.Table) -> Path:
    return writers.write_pyarrow(tmp_path_factory.mktemp("pyarrow") / "t.parquet", table)


@pytest.fixture(scope="module")
def deltalake_files(tmp_path_factory: pytest.TempPathFactory, table: pa.Table) -> list[Path]:
    return writers.write_deltalake(tmp_path_factory.mktemp("delta"), table.select(DELTA_COLUMNS))


@pytest.fixture(scope="module")
def duckdb_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return writers.write_duckdb(tmp_path_factory.mktemp("duckdb") / "t.parquet")


def check_every_filter(path: Path, filter_reads: int | None = 1) -> dict[str, int]:
    """Compare each filter with one rebuilt from its chunk; returns filters checked per column."""
    checked: dict[str, int] = {}
    rng = np.random.default_rng(1)
    parquet = pq.ParquetFile(path)
    footer = int.from_bytes(path.read_bytes()[-8:-4], "little") + 8
    with pb.BloomFilterReader(path, tail_size=footer) as reader:  # a tail of just the footer
        filters = reader.filters()
        # The footer, then one read per place where the writer put filters.
        expected = 1 + (reader.num_row_groups if filter_reads is None else filter_reads)
        assert reader.reads == expected
        leaves = {leaf.path: leaf for leaf in fmt.schema_leaves(reader.metadata)}
        for row_group in range(reader.num_row_groups):
            values = writers.leaf_columns(parquet.read_row_group(row_group))
            for column, leaf in leaves.items():
                f = filters.get((row_group, column))
                if f is None:
                    continue
                hashes = logical.column_hashes(values[column], leaf)
                rebuilt = pb.SplitBlockBloomFilter(f.num_bytes)
                rebuilt.insert_hashes(hashes)
                assert rebuilt.to_bytes() == f.to_bytes(), (path.name, row_group, column)
                assert f.find_hashes(hashes).all(), (row_group, column)
                # Absent values: hashes of values not in the chunk pass at the filter's rate.
                probes = rng.integers(0, 2**64, 20_000, dtype=np.uint64)
                probes = probes[~np.isin(probes, hashes)]
                measured = f.find_hashes(probes).mean()
                assert measured <= max(3 * f.fpp(), 0.002), (row_group, column, measured)
                checked[column] = checked.get(column, 0) + 1
    return checked


def test_pyarrow_filters_are_rebuilt_byte_for_byte(pyarrow_file: Path) -> None:
    checked = check_every_filter(pyarrow_file)
    # Arrow C++ writes a filter for every column it was asked for, every row group.
    with pb.BloomFilterReader(pyarrow_file) as reader:
        assert set(checked) == set(reader.columns)
    assert "tags.list.element" in checked and "struct.a" in checked
    assert all(n == writers.ROWS // writers.ROW_GROUP_SIZE for n in checked.values())


def test_deltalake_filters_are_rebuilt_byte_for_byte(deltalake_files: list[Path]) -> None:
    assert deltalake_files
    total: dict[str, int] = {}
    for path in deltalake_files:
        # arrow-rs writes each row group's filters right after that row group.
        for column, n in check_every_filter(path, filter_reads=None).items():
            total[column] = total.get(column, 0) + n
    assert {"int64", "string", "decimal_18", "date", "ts_us_utc", "struct.a"} <= set(total)


def test_duckdb_filters_are_rebuilt_byte_for_byte(duckdb_file: Path) -> None:
    checked = check_every_filter(duckdb_file)
    # DuckDB writes filters for dictionary-encoded chunks: the low-cardinality columns.
    assert {
        "int32",
        "int16",
        "string",
        "float64",
        "float32",
        "date",
        "ts",
        "decimal_9",
        "decimal_18",
    } <= set(checked)


def test_configured_rate_holds_for_typed_absent_values(pyarrow_file: Path, table: pa.Table) -> None:
    present = set(table["int64"].drop_null().to_pylist())
    absent = [v for v in range(-(2**40), 2**40, 2**40 // 5000) if v not in present][:4000]
    with pb.BloomFilterReader(pyarrow_file) as reader:
        for row_group in range(reader.num_row_groups):
            f = reader.filter(row_group, "int64")
            assert f is not None
            rate = f.might_contain_many(absent, "INT64").mean()
            assert rate <= 0.03, rate  # configured 0.01
        strings = [f"absent-{i}" for i in range(4000)]
        f = reader.filter(0, "string")
        assert f is not None and f.might_contain_many(strings, "BYTE_ARRAY").mean() <= 0.03

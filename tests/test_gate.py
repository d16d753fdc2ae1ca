"""Checks that fail (issue #30, Why 1): a file without filters, or a required column's chunk
without one, fails check_file and assert_bloom_filters_valid, on files pyarrow and DuckDB write."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom import _audit as audit
from parquet_bloom.testing import assert_bloom_filters_valid
from tests.writers import NUM_ROW_GROUPS, write_nested_pyarrow


@pytest.fixture(scope="module")
def pyarrow_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nested_pyarrow(tmp_path_factory.mktemp("gate") / "t.parquet")


@pytest.fixture(scope="module")
def plain_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """events.parquet of the report: user ids, written without any filter."""
    path = tmp_path_factory.mktemp("gate") / "events.parquet"
    pq.write_table(pa.table({"user_id": pa.array(range(5000)), "n": pa.array([1] * 5000)}), path)
    return path


def test_a_file_without_filters_fails_unless_allowed(plain_file: Path) -> None:
    report = audit.check_file(plain_file, columns=["user_id"])
    assert not report.ok
    (v,) = report.violations
    assert (v.kind, v.row_group, v.column) == ("empty", None, None)
    assert "no Bloom filter checked" in v.message and "allow_empty=True" in v.message
    allowed = audit.check_file(plain_file, columns=["user_id"], allow_empty=True)
    assert allowed.ok and allowed.notes == ("no Bloom filters in the columns checked",)
    assert report.to_dict()["ok"] is False


def test_the_assertion_fails_on_a_file_without_filters(plain_file: Path) -> None:
    with pytest.raises(AssertionError, match=r"\[empty\] file: no Bloom filter checked"):
        assert_bloom_filters_valid(plain_file)
    assert_bloom_filters_valid(plain_file, allow_empty=True)


def test_required_columns(pyarrow_file: Path) -> None:
    assert audit.check_file(pyarrow_file, require=["int64", "st"]).ok
    report = audit.check_file(pyarrow_file, require=["nofilter", "int64"])
    assert [(v.kind, v.row_group, v.column) for v in report.violations] == [
        ("missing-filter", rg, "nofilter") for rg in range(NUM_ROW_GROUPS)
    ]
    # Required columns are checked even when columns= names others; no "empty" on top.
    only = audit.check_file(pyarrow_file, columns=["int64"], require=["nofilter"])
    assert {c.column for c in only.chunks} == {"int64"}
    assert {v.kind for v in only.violations} == {"missing-filter"}
    with pytest.raises(ValueError, match=r"no column 'nope' to require .* its columns are int64"):
        audit.check_file(pyarrow_file, require=["nope"])
    with pytest.raises(AssertionError, match=r"\[missing-filter\] row group 0, column 'nofilter'"):
        assert_bloom_filters_valid(pyarrow_file, require=["nofilter"])
    assert_bloom_filters_valid(pyarrow_file, require=["int64", "s"])


def test_required_column_of_a_plain_file(plain_file: Path) -> None:
    report = audit.check_file(plain_file, require=["user_id"])
    assert [(v.kind, v.column) for v in report.violations] == [("missing-filter", "user_id")]
    # allow_empty does not excuse a missing required filter.
    assert not audit.check_file(plain_file, require=["user_id"], allow_empty=True).ok


def test_duckdb_writes_filters_only_for_dictionary_chunks(tmp_path: Path) -> None:
    """DuckDB gives a filter only to dictionary-encoded chunks: a column of distinct values has
    none, which require= catches and a plain check does not."""
    import duckdb

    path = tmp_path / "d.parquet"
    with duckdb.connect() as con:
        con.sql(
            f"copy (select i as id, i % 7 as k from range(100000) t(i)) to '{path}' "
            "(row_group_size 50000)"
        )
    assert audit.check_file(path).ok  # k's filters are right
    report = audit.check_file(path, require=["id", "k"])
    assert {(v.kind, v.column) for v in report.violations} == {("missing-filter", "id")}


def test_empty_row_groups_are_exempt(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"x": pa.array([], pa.int64())}), path)
    assert pq.ParquetFile(path).metadata.row_group(0).num_rows == 0  # one empty row group
    report = audit.check_file(path, require=["x"], allow_empty=True)
    assert report.ok
    assert [v.kind for v in audit.check_file(path, require=["x"]).violations] == ["empty"]

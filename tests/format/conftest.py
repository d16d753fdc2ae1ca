"""Parquet files written by pyarrow, and their footers, for the tests of parquet_bloom._format."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tests.format.helpers import ROWS_PER_GROUP, footer_of, rich_table, write


@pytest.fixture(scope="package")
def rich_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("format") / "rich.parquet"
    return write(
        path,
        rich_table(),
        row_group_size=ROWS_PER_GROUP,
        write_statistics=True,
        write_page_index=True,
        bloom_filter_options={
            "i64": {"ndv": 1000, "fpp": 0.01},
            "s": True,
            "st.b.c": True,
            "tags.list.element": {"ndv": 50, "fpp": 0.05},
        },
    )


@pytest.fixture(scope="package")
def rich_footer(rich_file: Path) -> bytes:
    return footer_of(rich_file)


@pytest.fixture(scope="package")
def small_footer(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A small but complete footer (stats, page index, bloom filter, nesting) for the
    exhaustive byte-flip tests."""
    path = tmp_path_factory.mktemp("format") / "small.parquet"
    table = pa.table(
        {
            "x": pa.array([1, 2, 3], pa.int64()),
            "st": pa.array([{"a": "p"}, {"a": "q"}, None]),
            "l": pa.array([[1.5], [], None], pa.list_(pa.float64())),
        }
    )
    write(path, table, write_page_index=True, bloom_filter_options={"x": True})
    return footer_of(path)

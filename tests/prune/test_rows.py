"""``prune(...).to_table()``: the rows a filter keeps, read late (the filter's columns first,
the other columns of the matching rows only), against pyarrow's scan of the pruned dataset
(the same rows, order and schema) and against DuckDB reading the files: several row groups a
file, small pages with and without a page index, partitions, nulls, several value types,
nested columns, IN lists, filters Bloom filters cannot decide, a column subset, and a file
whose schema differs from the dataset's."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom._prune.expression import referenced_columns
from parquet_bloom._prune.rows import matching_rows

ROWS = 3000
ROW_GROUP = 700  # row groups of 700 rows, the last shorter


def _table(start: int) -> pa.Table:
    n = ROWS
    ids = np.arange(start, start + n, dtype=np.int64)
    valid = ids % 7 != 3  # nulls in most columns
    utc = datetime.timezone.utc
    return pa.table(
        {
            "id": pa.array(ids),
            "i32": pa.array((ids % 1000).astype(np.int32), mask=~valid),
            "s": pa.array([f"key-{i}" if v else None for i, v in zip(ids, valid, strict=True)]),
            "f": pa.array(ids / 4.0, mask=~valid),
            "b": pa.array(ids % 3 == 0, mask=~valid),
            "ts": pa.array(
                [
                    datetime.datetime(2024, 1, 1, tzinfo=utc) + datetime.timedelta(seconds=int(i))
                    for i in ids
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "d": pa.array(
                [datetime.date(2020, 1, 1) + datetime.timedelta(days=int(i % 900)) for i in ids]
            ),
            "dec": pa.array([decimal.Decimal(int(i)) / 100 for i in ids], pa.decimal128(12, 2)),
            "bin": pa.array([bytes([int(i) % 256]) * (int(i) % 5) for i in ids], pa.binary()),
            "big": pa.array(
                [("x" * 40 + str(i)) if v else None for i, v in zip(ids, valid, strict=True)]
            ),
            "tags": pa.array(
                [[int(i), int(i) + 1] if v else None for i, v in zip(ids, valid, strict=True)]
            ),
            "point": pa.array(
                [{"x": int(i), "y": str(i)} for i in ids],
                pa.struct([("x", pa.int64()), ("y", pa.string())]),
            ),
            "cat": pa.array([f"c{i % 5}" for i in ids]).dictionary_encode(),
        }
    )


def _write(path: Path, table: pa.Table, *, page_index: bool, pages: int | None) -> None:
    pq.write_table(
        table,
        path,
        row_group_size=ROW_GROUP,
        # Unique values: as a dictionary, most of a chunk (read whole); PLAIN, in small pages.
        use_dictionary=["i32", "b", "cat"] if pages else True,
        bloom_filter_options={"id": {"ndv": ROWS, "fpp": 0.05}, "s": {"ndv": ROWS, "fpp": 0.05}},
        write_page_index=page_index,
        data_page_size=pages,
        write_batch_size=64,
    )


@pytest.fixture(scope="module", params=["pages", "page-index-off", "one-page"])
def files(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three files of 3,000 rows in 5 row groups, hive-partitioned by ``region``: small pages
    with a page index (pages of a few hundred bytes), the same without the index, or one page
    a row group."""
    root = tmp_path_factory.mktemp(request.param)
    page_index = request.param != "page-index-off"
    pages = None if request.param == "one-page" else 512
    for n, region in enumerate(["eu", "us", "eu"]):
        directory = root / f"region={region}"
        directory.mkdir(exist_ok=True)
        _write(
            directory / f"part-{n}.parquet", _table(n * ROWS), page_index=page_index, pages=pages
        )
    return root


def _dataset(root: Path) -> ds.Dataset:
    return ds.dataset(root, format="parquet", partitioning="hive")


EXPRESSIONS: dict[str, Any] = {
    "id =": pc.field("id") == 4321,
    "id absent": pc.field("id") == 10**9,
    "id in": pc.field("id").isin([0, 1, 699, 700, 701, 2999, 3000, 4500, 8999, 77777]),
    "s =": pc.field("s") == "key-6001",
    "s is null or id": (pc.field("s") == "key-10") | (pc.field("id") == 6003),
    "and": (pc.field("id") == 1500) & (pc.field("s") == "key-1500"),
    "and, no row": (pc.field("id") == 1500) & (pc.field("s") == "key-1501"),
    "partition": (pc.field("region") == "us") & pc.field("id").isin([10, 3010, 6010]),
    "partition or id": (pc.field("region") == "us") | (pc.field("id") == 7),
    "range": pc.field("id") > 8990,
    "null test": pc.field("i32").is_null() & (pc.field("id") < 40),
    "bool": (pc.field("b") == True) & pc.field("id").isin([3, 4, 6, 9]),  # noqa: E712
    "float": pc.field("f") == 750.25,
    "decimal": pc.field("dec") == pa.scalar(decimal.Decimal("12.34"), pa.decimal128(12, 2)),
    "date": (pc.field("d") == datetime.date(2020, 1, 5)) & (pc.field("id") < 3000),
    "timestamp": pc.field("ts")
    == pa.scalar(
        datetime.datetime(2024, 1, 1, 0, 1, 40, tzinfo=datetime.timezone.utc),
        pa.timestamp("us", tz="UTC"),
    ),
    "dictionary": (pc.field("cat") == "c3") & (pc.field("id") < 30),
    "every row": pc.field("id") >= 0,
}


@pytest.mark.parametrize("name", EXPRESSIONS)
def test_the_rows_read_late_equal_the_pruned_scan_and_duckdbs(files: Path, name: str) -> None:
    expr = EXPRESSIONS[name]
    dataset = _dataset(files)
    result = pb.prune(dataset, expr)
    expected = result.dataset.to_table(filter=expr)
    got = result.to_table()
    assert got.equals(expected, check_metadata=True), name
    assert got.equals(dataset.to_table(filter=expr)), name
    assert result.filter is expr
    # DuckDB reads the files itself: the same rows (in id order; its types are its own).
    import duckdb

    rows = sorted(got.select(["id", "s", "region"]).to_pylist(), key=lambda r: r["id"])
    where = ",".join(f"'{p}'" for p in sorted(str(p) for p in files.rglob("*.parquet")))
    ids = got.column("id").to_pylist()
    query = (
        f"SELECT id, s, region FROM read_parquet([{where}], hive_partitioning=true) "
        f"WHERE id IN ({','.join(map(str, ids)) or 'NULL'}) ORDER BY id"
    )
    assert duckdb.sql(query).to_arrow_table().to_pylist() == rows


@pytest.mark.parametrize(
    "columns", [["id"], ["big", "id"], ["region", "tags", "point"], ["s"], [], ["cat", "dec"]]
)
def test_a_column_subset_in_any_order(files: Path, columns: list[str]) -> None:
    dataset = _dataset(files)
    for expr in (pc.field("id").isin([5, 3705, 8999]), pc.field("s") == "key-2"):
        result = pb.prune(dataset, expr)
        got = result.to_table(columns)
        assert got.equals(
            result.dataset.to_table(filter=expr, columns=columns), check_metadata=True
        )


def test_what_it_cannot_tell_apart_is_pyarrows_scan(files: Path) -> None:
    dataset = _dataset(files)
    nested = pc.field(("point", "x")) == 5
    assert referenced_columns(nested) is None
    for expr in (nested, pc.field("id") == pc.field("i32")):
        assert matching_rows(dataset, expr).equals(dataset.to_table(filter=expr))
    # A filter on a column the dataset lacks fails as pyarrow's scan fails.
    with pytest.raises(pa.ArrowInvalid):
        matching_rows(dataset, pc.field("nope") == 1)
    with pytest.raises(TypeError, match="Expression"):
        matching_rows(dataset, "id = 1")  # type: ignore[arg-type]


def test_a_file_whose_schema_differs_from_the_datasets(tmp_path: Path) -> None:
    # An older file: id as int32, no ``s`` column; the dataset's schema is the newer one.
    old = pa.table({"id": pa.array(range(2000), pa.int32()), "v": pa.array(range(2000))})
    new = pa.table(
        {
            "id": pa.array(range(2000, 4000), pa.int64()),
            "v": pa.array(range(2000)),
            "s": pa.array([f"k{i}" for i in range(2000)]),
        }
    )
    for name, table in (("a.parquet", old), ("b.parquet", new)):
        pq.write_table(
            table,
            tmp_path / name,
            row_group_size=300,
            data_page_size=256,
            write_batch_size=50,
            bloom_filter_options={"id": {"ndv": 4000}},
        )
    dataset = ds.dataset(
        [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")], schema=new.schema
    )
    for expr in (
        pc.field("id").isin([5, 1999, 2000, 3333]),
        pc.field("s").is_null() & (pc.field("id") == 17),
    ):
        result = pb.prune(dataset, expr)
        got = result.to_table()
        assert got.equals(result.dataset.to_table(filter=expr), check_metadata=True)
        assert got.num_rows > 0


def test_a_result_without_its_filter_reads_every_row(files: Path) -> None:
    result = pb.prune(_dataset(files), pc.field("id") == 5)
    bare = type(result)(result.dataset, result.report)
    assert bare.to_table().equals(result.dataset.to_table())


def test_the_other_columns_come_from_the_pages_holding_the_rows(files: Path) -> None:
    from parquet_bloom._prune.page_rows import page_columns

    dataset = _dataset(files)
    fragment = next(iter(dataset.get_fragments()))
    group = fragment.row_groups[2]
    rows = np.array([0, 1, 333, 699], dtype=np.int64)
    names = [n for n in dataset.schema.names if n != "id"]
    found = page_columns(fragment, dataset.schema, group.id, group.num_rows, names, rows)
    whole = fragment.subset(row_group_ids=[group.id]).to_table(schema=dataset.schema)
    for name, values in found.items():
        assert values.equals(whole.column(name).take(pa.array(rows))), name
        assert values.type == dataset.schema.field(name).type
    if files.name.startswith("pages"):
        # The flat columns of the file whose chunks have pages to spare (a dictionary is
        # most of a chunk of 700 rows: read whole); not the nested
        # ones, nor the partition column (not in the file).
        assert {"s", "big", "ts", "dec", "f", "bin"} <= set(found)
        assert set(found) <= set(names) - {"tags", "point", "region"}
    else:
        assert not found  # no page index, or one page a chunk: the row group is read
    # A row group pyarrow counts otherwise than the footer: nothing (the caller reads it).
    assert not page_columns(fragment, dataset.schema, group.id, group.num_rows + 1, names, rows)


def test_pages_of_a_dictionary_encoded_chunk(tmp_path: Path) -> None:
    # 20,000 rows in one row group: a dictionary of 16 strings, its indices in ~1 KiB pages;
    # and a PLAIN float column. The pages the rows need, and the dictionary page, are read.
    from parquet_bloom._prune.page_rows import page_columns

    n = 20_000
    grades = pa.array([f"grade-{i % 16}" if i % 11 else None for i in range(n)])
    table = pa.table({"id": pa.array(range(n)), "grade": grades, "x": pa.array(np.arange(n) / 3)})
    pq.write_table(
        table,
        tmp_path / "g.parquet",
        use_dictionary=["grade"],
        data_page_size=1024,
        write_batch_size=256,
        write_page_index=True,
    )
    dataset = ds.dataset(tmp_path / "g.parquet")
    fragment = next(iter(dataset.get_fragments()))
    group = fragment.row_groups[0]
    rows = np.array([0, 11, 5000, 5001, 19_999], dtype=np.int64)
    found = page_columns(fragment, dataset.schema, 0, group.num_rows, ["grade", "x"], rows)
    assert set(found) == {"grade", "x"}
    for name, values in found.items():
        assert values.equals(table.column(name).take(pa.array(rows))), name
    expr = pc.field("id").isin([0, 11, 5000, 5001, 19_999])
    got = pb.prune(dataset, expr).to_table()
    assert got.equals(dataset.to_table(filter=expr), check_metadata=True)


def test_files_are_read_in_windows(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from parquet_bloom._prune import rows

    dataset = _dataset(files)
    expr = pc.field("id").isin([1, 3001, 6001, 6002]) | (pc.field("region") == "us")
    expected = dataset.to_table(filter=expr)
    for window in (1, 2):
        monkeypatch.setattr(rows, "FILES_AT_ONCE", window)
        assert matching_rows(dataset, expr).equals(expected, check_metadata=True)

"""Source files written by the real writers (pyarrow, deltalake's arrow-rs, DuckDB), and the
checks every rewrite must pass (:func:`check_rewrite`): pyarrow reads an equal table, every
page, dictionary page, column index and indexed page has the same bytes at its new offset,
each new filter is exactly the filter of the chunk's values at the requested size, kept filters
are the old bytes, all filters lie together before the footer (one read), and DuckDB reads the
file and its ``parquet_bloom_probe`` agrees with our filters.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import itertools
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import parquet_bloom as pb
from parquet_bloom import _format as fmt
from parquet_bloom._logical import column_hashes
from parquet_bloom._rewrite.api import RewriteReport, rewrite_bloom_filters
from parquet_bloom._sbbf import SplitBlockBloomFilter, optimal_num_bytes
from tests.writers import leaf_columns

ROWS = 6_000
ROW_GROUP_SIZE = 2_000
PAGE_ROWS = 250  # several data pages per chunk, so the offset index has work to do

# Columns DuckDB's parquet_bloom_probe hashes exactly as the file stores them.
DUCKDB_PROBED = {"id", "code", "name", "category", "int64", "int32", "string"}


def make_table(rows: int = ROWS, seed: int = 0) -> pa.Table:
    """High- and low-cardinality columns of the common types, with nulls, signed zeros, NaN,
    a struct and a list."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(rows).astype(np.int64) * 7919
    valid = rng.random(rows) > 0.05
    floats = rng.integers(-50, 50, rows) / 4
    floats[:4] = [0.0, -0.0, np.nan, 1.5]
    base = dt.date(2024, 1, 1)

    def masked(arr: pa.Array) -> pa.Array:
        return pc.if_else(pa.array(valid), arr, pa.nulls(len(arr), arr.type))

    return pa.table(
        {
            "id": pa.array(ids),
            "code": masked(pa.array(ids % 1000, pa.int32())),
            "name": masked(pa.array([f"user-{v:x}" for v in ids])),
            "category": pa.array([f"c{v % 37}" for v in ids]),
            "score": pa.array(floats),
            "day": pa.array([base + dt.timedelta(days=int(v % 400)) for v in ids], pa.date32()),
            "ts": pa.array(ids * 1000, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "price": pa.array(
                [decimal.Decimal(int(v % 100_000)).scaleb(-2) for v in ids], pa.decimal128(12, 2)
            ),
            "flag": pa.array(ids % 3 == 0),
            "uuid": pa.array([uuid.UUID(int=int(v % 50)) for v in ids], pa.uuid()),
            "point": pa.StructArray.from_arrays(
                [pa.array(ids % 500), pa.array([f"p{v % 60}" for v in ids])], names=["x", "label"]
            ),
            "tags": pa.array([[f"t{v % 7}", f"t{v % 11}"] for v in ids], pa.list_(pa.string())),
        }
    )


def filters_of(path: Path) -> dict[tuple[int, str], SplitBlockBloomFilter]:
    with pb.BloomFilterReader(path) as reader:
        return reader.filters()


def same_table(a: pa.Table, b: pa.Table) -> bool:
    """Table equality with NaN equal to NaN (floats compared as their bits)."""

    def bits(table: pa.Table) -> pa.Table:
        columns = [
            pa.chunked_array(
                [c.view(pa.int64() if c.type == pa.float64() else pa.int32()) for c in col.chunks]
            )
            if pa.types.is_floating(col.type)
            else col
            for col in table.columns
        ]
        return pa.table(columns, names=table.column_names)

    return bool(a.schema.equals(b.schema) and bits(a).equals(bits(b)))


def filterable(path: Path) -> list[str]:
    """Every leaf column we can build a filter for (not BOOLEAN)."""
    with pb.BloomFilterReader(path) as reader:
        leaves = fmt.schema_leaves(reader.metadata)
    return [leaf.path for leaf in leaves if leaf.physical_type != "BOOLEAN"]


# -- source files, written by the real writers ----------------------------------------------------


def write_pyarrow(path: Path, options: dict[str, Any] | None) -> Path:
    pq.write_table(
        make_table(),
        path,
        row_group_size=ROW_GROUP_SIZE,
        data_page_size=2048,
        write_page_index=True,
        bloom_filter_options=options,
    )
    return path


def write_deltalake(directory: Path, bloom: bool) -> Path:
    from deltalake import BloomFilterProperties, ColumnProperties, WriterProperties
    from deltalake import write_deltalake as write

    table = make_table().drop_columns(["flag", "uuid"])
    props = WriterProperties(
        max_row_group_size=ROW_GROUP_SIZE,
        data_page_row_count_limit=PAGE_ROWS,
        write_batch_size=PAGE_ROWS,
        default_column_properties=ColumnProperties(
            bloom_filter_properties=BloomFilterProperties(True, 0.01, ROW_GROUP_SIZE)
            if bloom
            else None
        ),
    )
    write(str(directory), table, writer_properties=props)
    (path,) = sorted(directory.glob("*.parquet"))
    return path


def write_duckdb(path: Path) -> Path:
    with duckdb.connect() as con:
        con.sql(
            f"""
            copy (
              select (i * 7919)::bigint as int64, (i % 1000)::integer as int32,
                     'v' || (i % 1500) as string, (i % 40)::double / 4 as float64,
                     date '2024-01-01' + (i % 400)::integer as date,
                     case when i % 10 = 0 then null else 'n' || (i % 90) end as nullable
              from range({ROWS}) t(i)
            ) to '{path}' (format parquet, row_group_size {ROW_GROUP_SIZE})
            """
        )
    return path


def write_oversized(path: Path) -> Path:
    """1 MiB filters (parquet-java's default size) on chunks of a few hundred distinct values.
    pyarrow 26 folds its filters down to size, so we make these ourselves: set num_bytes."""
    plain = write_pyarrow(path.with_suffix(".plain"), None)
    rewrite_bloom_filters(plain, path, columns=["code", "category", "day"], num_bytes=1 << 20)
    plain.unlink()
    return path


SOURCES = [
    "pyarrow-plain",
    "pyarrow-filters",
    "pyarrow-oversized",
    "deltalake-plain",
    "deltalake-filters",
    "duckdb",
]


def write_sources(d: Path) -> dict[str, Path]:
    """Every source file, written into ``d``."""
    table_columns = leaf_columns(make_table())
    options = {c: {"ndv": ROW_GROUP_SIZE, "fpp": 0.01} for c in table_columns if c != "flag"}
    return {
        "pyarrow-plain": write_pyarrow(d / "pyarrow-plain.parquet", None),
        "pyarrow-filters": write_pyarrow(d / "pyarrow-filters.parquet", options),
        "pyarrow-oversized": write_oversized(d / "pyarrow-oversized.parquet"),
        "deltalake-plain": write_deltalake(d / "delta-plain", bloom=False),
        "deltalake-filters": write_deltalake(d / "delta-filters", bloom=True),
        "duckdb": write_duckdb(d / "duckdb.parquet"),
    }


# -- the checks ----------------------------------------------------------------------------------


def footer_of(data: bytes) -> tuple[Any, int]:
    length = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - length
    return fmt.decode_file_metadata(data[start:-8], full=True), start


def chunk_start(meta: Any) -> int:
    """The first page: the dictionary page when it lies before the first data page, or when
    the data page offset is 0 (Arrow C++'s for a chunk without data pages)."""
    dictionary = meta.dictionary_page_offset
    if dictionary and (dictionary < meta.data_page_offset or meta.data_page_offset == 0):
        return int(dictionary)
    return int(meta.data_page_offset)


def check_layout(src: bytes, dst: bytes) -> None:
    """Pages, column indexes and indexed pages: same bytes at the new offsets."""
    md_src, _ = footer_of(src)
    md_dst, footer_start = footer_of(dst)
    assert len(md_src.row_groups) == len(md_dst.row_groups)
    filter_ranges = []
    for rg_src, rg_dst in zip(md_src.row_groups, md_dst.row_groups, strict=True):
        assert rg_dst.num_rows == rg_src.num_rows
        if rg_src.file_offset:
            assert rg_dst.file_offset == chunk_start(rg_dst.columns[0].meta_data)
        for c_src, c_dst in zip(rg_src.columns, rg_dst.columns, strict=True):
            m_src, m_dst = c_src.meta_data, c_dst.meta_data
            a, b, n = chunk_start(m_src), chunk_start(m_dst), m_src.total_compressed_size
            assert m_dst.total_compressed_size == n
            assert dst[b : b + n] == src[a : a + n]
            assert m_dst.data_page_offset - b == m_src.data_page_offset - a
            if m_src.dictionary_page_offset is not None:
                assert m_dst.dictionary_page_offset - b == m_src.dictionary_page_offset - a
            if c_src.column_index_offset is not None:
                o, k = c_src.column_index_offset, c_src.column_index_length
                assert c_dst.column_index_length == k
                p = c_dst.column_index_offset
                assert dst[p : p + k] == src[o : o + k]
            assert (c_src.offset_index_offset is None) == (c_dst.offset_index_offset is None)
            if c_src.offset_index_offset is not None:
                o, k = c_src.offset_index_offset, c_src.offset_index_length
                p, q = c_dst.offset_index_offset, c_dst.offset_index_length
                oi_src = fmt.decode_offset_index(src[o : o + k])
                oi_dst = fmt.decode_offset_index(dst[p : p + q])
                pairs = zip(oi_src.page_locations, oi_dst.page_locations, strict=True)
                for loc_src, loc_dst in pairs:
                    size = loc_src.compressed_page_size
                    assert loc_dst.compressed_page_size == size
                    assert loc_dst.first_row_index == loc_src.first_row_index
                    assert loc_dst.offset - b == loc_src.offset - a
                    assert (
                        dst[loc_dst.offset : loc_dst.offset + size]
                        == (src[loc_src.offset : loc_src.offset + size])
                    )
            if m_dst.bloom_filter_offset is not None:
                filter_ranges.append((m_dst.bloom_filter_offset, m_dst.bloom_filter_length))
    # All filters together, right before the footer, with nothing between them.
    if filter_ranges:
        filter_ranges.sort()
        for (o1, n1), (o2, _) in itertools.pairwise(filter_ranges):
            assert o1 + n1 == o2
        last_offset, last_length = filter_ranges[-1]
        assert last_offset + last_length == footer_start


def chunk_values(path: Path, row_group: int, column: str) -> pa.Array:
    table = pq.ParquetFile(path).read_row_group(row_group, columns=[column])
    values = leaf_columns(table)[column]
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def check_rewrite(
    src: Path,
    dst: Path,
    report: RewriteReport,
    *,
    fpp: float = 0.01,
    expected_num_bytes: Callable[[int], int] | None = None,
) -> None:
    """Everything the issue asks of a rewrite."""
    assert same_table(pq.read_table(dst), pq.read_table(src))
    src_bytes, dst_bytes = src.read_bytes(), dst.read_bytes()
    check_layout(src_bytes, dst_bytes)
    assert report.bytes_before == len(src_bytes)
    assert report.bytes_after == len(dst_bytes)

    before = filters_of(src)
    with pb.BloomFilterReader(dst, tail_size=len(dst_bytes) - footer_of(dst_bytes)[1]) as reader:
        after = reader.filters()
        # The footer in one read (a tail read of just its bytes), then every filter in one.
        assert reader.reads == 1 + (1 if after else 0)
        leaves = {leaf.path: leaf for leaf in fmt.schema_leaves(reader.metadata)}
    written = {(rg, column): size for rg, column, size in report.filters_written}
    assert len(written) == len(report.filters_written)
    assert set(written) <= set(after)
    assert report.filters_kept == len(set(after) - set(written))
    assert report.filters_removed == len(set(before) - set(after))
    for key, bloom_filter in after.items():
        if key not in written:
            assert bloom_filter == before[key]  # kept: the very same bits
            continue
        rg, column = key
        hashes = column_hashes(chunk_values(dst, rg, column), leaves[column])
        assert bloom_filter.num_bytes == written[key]
        ndv = len(np.unique(hashes))
        size = expected_num_bytes(ndv) if expected_num_bytes else optimal_num_bytes(ndv, fpp)
        assert bloom_filter.num_bytes == size
        expected = SplitBlockBloomFilter(size)
        expected.insert_hashes(hashes)
        assert bloom_filter == expected
        assert bloom_filter.find_hashes(hashes).all()  # every value of the chunk is found

    check_duckdb(dst, after)


def check_duckdb(path: Path, filters: dict[tuple[int, str], SplitBlockBloomFilter]) -> None:
    """DuckDB reads the file, and its probe never excludes a present value and excludes an
    absent one exactly where our filter does."""
    with contextlib.ExitStack() as stack, duckdb.connect() as con:
        (count,) = con.execute("select count(*) from read_parquet(?)", [str(path)]).fetchone()
        assert count == pq.ParquetFile(path).metadata.num_rows
        reader = stack.enter_context(pb.BloomFilterReader(path))
        for column in sorted({c for _, c in filters} & DUCKDB_PROBED):
            values = pq.read_table(path, columns=[column]).column(0).drop_null().unique()
            present = values.to_pylist()[:: max(1, len(values) // 8)]
            absent = (
                [f"absent-{i}" for i in range(25)]
                if pa.types.is_string(values.type)
                else [10**9 + 7 * i for i in range(25)]
            )
            for value, is_present in [(v, True) for v in present] + [(v, False) for v in absent]:
                rows = con.execute(
                    "select row_group_id, bloom_filter_excludes from parquet_bloom_probe(?, ?, ?)",
                    [str(path), column, value],
                ).fetchall()
                excluded_by_duckdb = {rg for rg, excludes in rows if excludes}
                kept_by_us = set(reader.row_groups_might_contain(column, [value]))
                excluded_by_us = set(range(reader.num_row_groups)) - kept_by_us
                if is_present:
                    holding = {
                        rg
                        for rg in range(reader.num_row_groups)
                        if value in chunk_values(path, rg, column).to_pylist()
                    }
                    assert not excluded_by_duckdb & holding, (column, value)
                    assert not excluded_by_us & holding, (column, value)
                assert excluded_by_duckdb == excluded_by_us, (column, value)

"""Rewriting the Bloom filters of files written by pyarrow, deltalake (arrow-rs) and DuckDB.

Every rewrite is checked the same way (:func:`check_rewrite`): pyarrow reads an equal table,
every page, dictionary page, column index and indexed page has the same bytes at its new offset,
each new filter is exactly the filter of the chunk's values at the requested size, kept filters
are the old bytes, all filters lie together before the footer (one read), and DuckDB reads the
file and its ``parquet_bloom_probe`` agrees with our filters.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import errno
import hashlib
import itertools
import json
import os
import random
import stat
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import parquet_bloom as pb
from parquet_bloom import _format as fmt
from parquet_bloom import _rewrite as rewrite
from parquet_bloom import kernels
from parquet_bloom._logical import column_hashes
from parquet_bloom._io.source import FOOTER_READ_SIZE
from parquet_bloom._rewrite import (
    Relocation,
    RewriteReport,
    Splice,
    rewrite_bloom_filters,
    rewrite_files,
    serialize_bloom_filter,
    set_bloom_filter_location,
)
from parquet_bloom._sbbf import SplitBlockBloomFilter, optimal_num_bytes
from tests.writers import drop_bloom_filter_lengths, leaf_columns, rewrite_footer

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


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("sources")
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
    with pb.BloomFilterReader(dst) as reader:
        after = reader.filters()
        # The footer (in two reads if it is longer than the first), then every filter in one.
        footer_reads = 1 if len(dst_bytes) - footer_of(dst_bytes)[1] <= FOOTER_READ_SIZE else 2
        assert reader.reads == footer_reads + (1 if after else 0)
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


# -- the rewrites --------------------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_add_filters_to_every_column(sources: dict[str, Path], source: str, tmp_path: Path) -> None:
    src, dst = sources[source], tmp_path / "out.parquet"
    columns = filterable(src)
    report = rewrite_bloom_filters(src, dst, columns=columns)
    assert {column for _, column, _ in report.filters_written} == set(columns)
    check_rewrite(src, dst, report)


@pytest.mark.parametrize("source", ["pyarrow-plain", "deltalake-plain", "duckdb"])
def test_every_column_of_the_real_writers_files_is_read_from_its_pages(
    sources: dict[str, Path], source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pyarrow path is the fallback for what the page reader does not read; none of these
    # files needs it, so the checks above test the page reader, not the fallback.
    def no_arrow(*args: object) -> None:
        raise AssertionError("a chunk was read with pyarrow")

    monkeypatch.setattr(rewrite, "_chunk_hashes", no_arrow)
    columns = filterable(sources[source])
    report = rewrite_bloom_filters(sources[source], tmp_path / "out.parquet", columns=columns)
    assert (
        len(report.filters_written) == len(columns) * pq.ParquetFile(sources[source]).num_row_groups
    )


@pytest.mark.parametrize("source", ["pyarrow-plain", "deltalake-plain", "duckdb"])
def test_numpy_alone_writes_the_same_file_as_the_compiled_kernels(
    sources: dict[str, Path], source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other tests here run with the compiled kernels where they are built; the rewrite
    # on numpy alone (kernels.compiled is None) must give the same bytes, filters included.
    if kernels.compiled is None:
        pytest.skip("the compiled kernels are not built: every test here ran on numpy alone")
    src, columns = sources[source], filterable(sources[source])
    rewrite_bloom_filters(src, tmp_path / "compiled.parquet", columns=columns)
    monkeypatch.setattr(kernels, "compiled", None)
    rewrite_bloom_filters(src, tmp_path / "numpy.parquet", columns=columns)
    compiled = (tmp_path / "compiled.parquet").read_bytes()
    assert (tmp_path / "numpy.parquet").read_bytes() == compiled


@pytest.mark.parametrize("source", SOURCES)
def test_resize_existing_filters(sources: dict[str, Path], source: str, tmp_path: Path) -> None:
    src, dst = sources[source], tmp_path / "out.parquet"
    before = filters_of(src)
    report = rewrite_bloom_filters(src, dst, columns="existing")
    assert {(rg, c) for rg, c, _ in report.filters_written} == set(before)
    assert report.filters_kept == report.filters_removed == 0
    check_rewrite(src, dst, report)


@pytest.mark.parametrize("source", SOURCES)
def test_remove_all_filters(sources: dict[str, Path], source: str, tmp_path: Path) -> None:
    src, dst = sources[source], tmp_path / "out.parquet"
    before = filters_of(src)
    report = rewrite_bloom_filters(src, dst, remove="all")
    assert report.filters_written == []
    assert report.filters_removed == len(before)
    # Exactly the filters' bytes are gone from before the footer.
    _, src_footer_start = footer_of(src.read_bytes())
    _, dst_footer_start = footer_of(dst.read_bytes())
    filter_bytes = sum(len(serialize_bloom_filter(f)) for f in before.values())
    assert dst_footer_start == src_footer_start - filter_bytes
    check_rewrite(src, dst, report)


@pytest.mark.parametrize("source", ["pyarrow-filters", "deltalake-filters", "duckdb"])
def test_add_some_remove_some_keep_the_rest(
    sources: dict[str, Path], source: str, tmp_path: Path
) -> None:
    src, dst = sources[source], tmp_path / "out.parquet"
    before = filters_of(src)
    with_filters = sorted({c for _, c in before})
    without = [c for c in filterable(src) if c not in with_filters]
    removed, rebuilt, kept = with_filters[0], with_filters[1], with_filters[2:]
    report = rewrite_bloom_filters(
        src, dst, columns=[rebuilt, *without[:1]], remove=[removed], fpp=0.001
    )
    after = filters_of(dst)
    assert {c for _, c in after} == {rebuilt, *without[:1], *kept}
    assert report.filters_kept == sum(1 for _, c in before if c in kept)
    check_rewrite(src, dst, report, fpp=0.001)


def test_resize_shrinks_oversized_filters_to_the_chunk(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    src, dst = sources["pyarrow-oversized"], tmp_path / "out.parquet"
    assert {f.num_bytes for f in filters_of(src).values()} == {1 << 20}
    report = rewrite_bloom_filters(src, dst, columns="existing")
    sizes = {column: size for _, column, size in report.filters_written}
    # code: 1000 values (but 2000 rows), category: 37, day: 400 distinct per chunk.
    assert sizes == {"code": 2048, "category": 64, "day": 512}
    assert report.bytes_after < report.bytes_before - 9 * 1_000_000
    check_rewrite(src, dst, report)


@pytest.mark.parametrize("source", ["pyarrow-filters", "deltalake-filters", "duckdb"])
def test_rebuilt_filters_have_the_writers_bits(
    sources: dict[str, Path], source: str, tmp_path: Path
) -> None:
    """Built at the writer's size, our filter of a chunk is bit for bit the writer's: we hash
    every type as it does (after folding, a writer's filter is the direct build at its size)."""
    src = sources[source]
    before = filters_of(src)
    sizes: dict[str, set[int]] = {}
    for (_, column), bloom_filter in before.items():
        sizes.setdefault(column, set()).add(bloom_filter.num_bytes)
    compared = 0
    for column, (size,) in ((c, s) for c, s in sizes.items() if len(s) == 1):
        dst = tmp_path / f"{column}.parquet"
        rewrite_bloom_filters(src, dst, columns=[column], num_bytes=size)
        after = filters_of(dst)
        for key in (k for k in before if k[1] == column):
            assert after[key] == before[key], key
            compared += 1
    assert compared >= 6


@pytest.mark.parametrize(
    ("options", "size"),
    [
        ({"ndv": 100_000}, optimal_num_bytes(100_000, 0.01)),
        ({"ndv": 100_000, "fpp": 0.1}, optimal_num_bytes(100_000, 0.1)),
        ({"num_bytes": 256}, 256),
    ],
)
def test_given_ndv_or_size(
    sources: dict[str, Path], tmp_path: Path, options: dict[str, Any], size: int
) -> None:
    src, dst = sources["pyarrow-plain"], tmp_path / "out.parquet"
    report = rewrite_bloom_filters(src, dst, columns=["id", "name"], **options)
    assert {s for _, _, s in report.filters_written} == {size}
    check_rewrite(src, dst, report, expected_num_bytes=lambda _ndv: size)


@pytest.mark.parametrize("flavor", ["spec", "parquet-java", "arrow-cpp", "arrow-rs", "duckdb"])
def test_flavored_sizing(sources: dict[str, Path], tmp_path: Path, flavor: str) -> None:
    from parquet_bloom._sizing import expected_num_bytes

    src, dst = sources["pyarrow-plain"], tmp_path / "out.parquet"
    report = rewrite_bloom_filters(src, dst, columns=["code", "category"], flavor=flavor)
    check_rewrite(
        src, dst, report, expected_num_bytes=lambda ndv: expected_num_bytes(ndv, 0.01, flavor)
    )


def test_empty_row_groups_and_an_empty_table(tmp_path: Path) -> None:
    """Arrow C++ writes data_page_offset 0 for a chunk with a dictionary page and no data page
    (each column of an empty row group, and of an empty table's one row group): such a chunk's
    pages are its dictionary page alone, and it gets an empty filter like any chunk."""
    table = make_table(rows=600)
    gaps = tmp_path / "empty-row-groups.parquet"
    with pq.ParquetWriter(gaps, table.schema, write_page_index=True) as out:
        for part in (table.slice(0, 300), table.slice(0, 0), table.slice(300), table.slice(0, 0)):
            out.write_table(part)
    empty = tmp_path / "empty-table.parquet"
    pq.write_table(table.slice(0, 0), empty)
    for src in (gaps, empty):
        md = pq.ParquetFile(src).metadata
        empties = [i for i in range(md.num_row_groups) if md.row_group(i).num_rows == 0]
        assert empties and all(md.row_group(i).column(0).data_page_offset == 0 for i in empties)
        dst = src.with_suffix(".out.parquet")
        report = rewrite_bloom_filters(src, dst, columns=filterable(src))
        check_rewrite(src, dst, report)
        assert all(size == 32 for rg, _, size in report.filters_written if rg in empties)
        assert pb.check_file(dst).ok


# Column makers for random tables, from random integer codes.
RANDOM_COLUMNS: dict[str, Callable[[np.ndarray], pa.Array]] = {
    "int64": lambda v: pa.array(v * 7919 - 10**6, pa.int64()),
    "int8": lambda v: pa.array((v % 100).astype(np.int8)),
    "uint32": lambda v: pa.array(v.astype(np.uint32)),
    "float32": lambda v: pa.array((v / 3).astype(np.float32)),
    "string": lambda v: pa.array([("x" * int(k % 40)) + str(k) for k in v]),
    "binary": lambda v: pa.array([bytes([k % 256]) * int(k % 5) for k in v], pa.binary()),
    "fixed": lambda v: pa.array([int(k).to_bytes(6, "little") for k in v], pa.binary(6)),
    "timestamp": lambda v: pa.array(v * 1000, pa.timestamp("ms")),
    "decimal": lambda v: pa.array(
        [decimal.Decimal(int(k)).scaleb(-2) for k in v], pa.decimal128(30, 2)
    ),
    "dictionary": lambda v: pa.array([f"d{k}" for k in v]).dictionary_encode(),
    "list": lambda v: pa.array(
        [[int(k), int(k) + 1][: int(k % 3)] for k in v], pa.list_(pa.int64())
    ),
}


@settings(max_examples=20, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(sorted(RANDOM_COLUMNS)), min_size=1, max_size=4),
    rows=st.sampled_from([0, 1, 17, 700]),
    cardinality=st.sampled_from([1, 3, 50, 10**6]),
    nulls=st.sampled_from([None, 0.3, 1.0]),
    seed=st.integers(0, 2**32 - 1),
    options=st.fixed_dictionaries(
        {
            "row_group_size": st.sampled_from([7, 100, 10**5]),
            "use_dictionary": st.booleans(),
            "data_page_version": st.sampled_from(["1.0", "2.0"]),
            "compression": st.sampled_from(["snappy", "zstd", "gzip", "none", "brotli"]),
            "write_page_index": st.booleans(),
            "data_page_size": st.sampled_from([64, 1 << 20]),
        }
    ),
    with_filters=st.booleans(),
)
def test_random_tables_written_by_pyarrow(
    kinds: list[str],
    rows: int,
    cardinality: int,
    nulls: float | None,
    seed: int,
    options: dict[str, Any],
    with_filters: bool,
) -> None:
    """Random schemas, sizes, nulls and writer options: every column gets a filter (its old
    one, if any, replaced), and the rewrite passes every check."""
    rng = np.random.default_rng(seed)
    columns = {}
    for i, kind in enumerate(kinds):
        values = RANDOM_COLUMNS[kind](rng.integers(0, cardinality, rows))
        if nulls is not None:
            valid = pa.array(rng.random(rows) >= nulls)
            values = pc.if_else(valid, values, pa.nulls(rows, values.type))
        columns[f"c{i}_{kind}"] = values
    table = pa.table(columns)
    if with_filters:
        flat = [c for c in table.column_names if not c.endswith("list")]
        options["bloom_filter_options"] = {c: {"ndv": 100} for c in flat}
    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "src.parquet", Path(d) / "dst.parquet"
        pq.write_table(table, src, **options)
        report = rewrite_bloom_filters(src, dst, columns=filterable(src))
        check_rewrite(src, dst, report)
        assert pb.check_file(dst).ok


def test_footer_without_bloom_filter_length(sources: dict[str, Path], tmp_path: Path) -> None:
    """Before format 2.10 the footer had no length: the header says how long a filter is."""
    src = rewrite_footer(
        sources["deltalake-filters"], tmp_path / "old.parquet", drop_bloom_filter_lengths
    )
    dst = tmp_path / "out.parquet"
    report = rewrite_bloom_filters(src, dst, columns=["id"], remove=["name"])
    md, _ = footer_of(dst.read_bytes())
    metas = [c.meta_data for rg in md.row_groups for c in rg.columns]
    with_filter = [m for m in metas if m.bloom_filter_offset is not None]
    assert with_filter
    assert all(m.bloom_filter_length is not None for m in with_filter)  # lengths filled in
    assert report.filters_kept > 0
    check_rewrite(src, dst, report)


# -- readers that use the page index -------------------------------------------------------------


def test_datafusion_reads_a_rewritten_delta_table_through_the_page_index(
    tmp_path: Path,
) -> None:
    """arrow-rs puts filters after each row group, so cutting them moves the pages of later row
    groups and their offset index must be rewritten. DataFusion (deltalake's query engine)
    prunes pages through the offset index: wrong offsets would read garbage."""
    from deltalake import DeltaTable, QueryBuilder

    table_dir = tmp_path / "table"
    path = write_deltalake(table_dir, bloom=True)
    original = path.read_bytes()
    rewrite_bloom_filters(path, in_place=True, columns=None, remove=["id", "code"])
    assert path.read_bytes() != original
    # The log records each file's size, and readers use it to find the footer.
    (log,) = (table_dir / "_delta_log").glob("*.json")
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    for action in actions:
        if "add" in action:
            action["add"]["size"] = path.stat().st_size
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))

    query = QueryBuilder().register("t", DeltaTable(str(table_dir)))
    ids = pq.read_table(path, columns=["id"]).column(0).to_pylist()
    for value in ids[::997]:
        result = query.execute(f"select id, name from t where id = {value}").read_all()
        assert pa.table(result).column("id").to_pylist() == [value]
    total = query.execute("select count(*) as n, sum(code) as s from t").read_all()
    table = pq.read_table(path)
    assert pa.table(total).to_pylist() == [
        {"n": table.num_rows, "s": pc.sum(table.column("code")).as_py()}
    ]


@pytest.mark.spark
def test_parquet_java_files_resized_and_read_back_by_spark(spark: Any, tmp_path: Path) -> None:
    """parquet-java gives every filter its maximum size (1 MiB) when no NDV is configured: the
    issue's case. Resized, the file must still read in Spark, which filters row groups through
    our filters and pages through the relocated column and offset indexes."""
    out = tmp_path / "spark"
    (
        spark.range(0, ROWS)
        .selectExpr("id", "cast(id % 300 as int) as code", "concat('n', id % 300) as name")
        .coalesce(1)
        .write.option("parquet.bloom.filter.enabled#code", "true")
        .option("parquet.bloom.filter.enabled#name", "true")
        .option("parquet.page.size.row.check.min", "100")
        .option("parquet.page.row.count.limit", str(PAGE_ROWS))
        .parquet(str(out))
    )
    (src,) = sorted(out.glob("*.parquet"))
    assert {f.num_bytes for f in filters_of(src).values()} == {1 << 20}
    dst = tmp_path / "resized.parquet"
    report = rewrite_bloom_filters(src, dst, columns="existing")
    assert {size for _, _, size in report.filters_written} == {optimal_num_bytes(300, 0.01)}
    check_rewrite(src, dst, report)
    frame = spark.read.parquet(str(dst))
    assert frame.count() == ROWS
    assert frame.where("code = 7").count() == ROWS // 300
    assert frame.where("name = 'n7'").count() == ROWS // 300
    assert frame.where("code = 100000 or name = 'absent'").count() == 0
    assert frame.where("id = 4321").select("code").collect()[0][0] == 4321 % 300


# -- the lossless footer -------------------------------------------------------------------------


def with_unknown_field(struct_bytes: bytes) -> bytes:
    """The same Thrift compact struct with one more field, id 99 (i32 7), that no
    parquet.thrift has: long-form field header (type 5 = i32, then the zigzag id), the zigzag
    value, before the struct's stop byte."""
    assert struct_bytes[-1:] == b"\x00"
    return struct_bytes[:-1] + b"\x05\xc6\x01\x0e" + b"\x00"


def with_new_footer(data: bytes, footer: bytes) -> bytes:
    _, start = footer_of(data)
    return data[:start] + footer + len(footer).to_bytes(4, "little") + b"PAR1"


def test_a_footer_with_an_unknown_field_is_refused(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    data = sources["pyarrow-filters"].read_bytes()
    _, start = footer_of(data)
    src = tmp_path / "unknown.parquet"
    src.write_bytes(with_new_footer(data, with_unknown_field(data[start:-8])))
    assert pq.read_table(src).num_rows == ROWS  # a valid file: readers skip unknown fields
    dst = tmp_path / "out.parquet"
    with pytest.raises(pb.UnsupportedFileError, match="force=True") as info:
        rewrite_bloom_filters(src, dst, columns=["id"])
    assert info.value.source == str(src)
    assert "parquet.thrift does not know" in str(info.value)
    assert not dst.exists()
    report = rewrite_bloom_filters(src, dst, columns=["id"], force=True)
    check_rewrite(src, dst, report)
    md, start = footer_of(dst.read_bytes())
    assert fmt.encode_file_metadata(md) == dst.read_bytes()[start:-8]  # the field is gone


def with_unknown_field_in_the_last_offset_index(src: Path, dst: Path) -> Path:
    data = src.read_bytes()
    md, start = footer_of(data)
    # The last offset index is the last thing before the footer: growing it moves nothing else.
    last = md.row_groups[-1].columns[-1]
    o, k = last.offset_index_offset, last.offset_index_length
    assert o + k == start
    last.offset_index_length = k + 4
    footer = fmt.encode_file_metadata(md)
    dst.write_bytes(
        data[:o]
        + with_unknown_field(data[o : o + k])
        + footer
        + len(footer).to_bytes(4, "little")
        + b"PAR1"
    )
    assert pq.read_table(dst).num_rows == ROWS  # valid: readers skip the unknown field
    return dst


def test_an_offset_index_with_an_unknown_field_is_refused_when_it_must_change(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    dst = tmp_path / "out.parquet"
    # No filters to cut, so no page moves: the index is copied as it is, unknown field and all.
    src = with_unknown_field_in_the_last_offset_index(
        sources["deltalake-plain"], tmp_path / "plain.parquet"
    )
    report = rewrite_bloom_filters(src, dst, columns=["id"])
    check_rewrite(src, dst, report)
    # arrow-rs put filters after each row group: cutting them moves the later pages.
    src = with_unknown_field_in_the_last_offset_index(
        sources["deltalake-filters"], tmp_path / "filters.parquet"
    )
    with pytest.raises(pb.UnsupportedFileError, match="OffsetIndex") as info:
        rewrite_bloom_filters(src, dst, columns=["id"])
    assert info.value.row_group == 2
    assert info.value.column == "tags.list.item"
    report = rewrite_bloom_filters(src, dst, columns=["id"], force=True)
    check_rewrite(src, dst, report)


# -- refusing what cannot be rewritten -----------------------------------------------------------


def test_an_encrypted_file_is_refused(sources: dict[str, Path], tmp_path: Path) -> None:
    src = tmp_path / "encrypted.parquet"
    src.write_bytes(sources["pyarrow-filters"].read_bytes()[:-4] + b"PARE")
    dst = tmp_path / "out.parquet"
    with pytest.raises(pb.UnsupportedFileError, match="encrypted") as info:
        rewrite_bloom_filters(src, dst, columns=["id"])
    assert info.value.source == str(src)
    assert not dst.exists()


def test_a_filter_overlapping_the_pages_is_refused(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    def point_into_the_data(md: Any) -> None:
        meta = md.row_groups[1].columns[0].meta_data
        md.row_groups[0].columns[0].meta_data.bloom_filter_offset = meta.data_page_offset + 10

    src = rewrite_footer(sources["pyarrow-filters"], tmp_path / "bad.parquet", point_into_the_data)
    with pytest.raises(pb.CorruptFileError, match="overlaps the pages of row group 1") as info:
        rewrite_bloom_filters(src, tmp_path / "out.parquet", remove=["id"])
    assert (info.value.row_group, info.value.column) == (0, "id")


def test_a_filter_past_the_footer_is_refused(sources: dict[str, Path], tmp_path: Path) -> None:
    def past_the_end(md: Any) -> None:
        md.row_groups[2].columns[1].meta_data.bloom_filter_offset = 10**9

    src = rewrite_footer(sources["pyarrow-filters"], tmp_path / "bad.parquet", past_the_end)
    with pytest.raises(pb.CorruptFileError, match="outside the data region") as info:
        rewrite_bloom_filters(src, tmp_path / "out.parquet", columns="existing")
    assert (info.value.row_group, info.value.column, info.value.offset) == (2, "code", 10**9)


def test_a_chunk_without_its_path_is_refused(sources: dict[str, Path], tmp_path: Path) -> None:
    def drop_path(md: Any) -> None:
        md.row_groups[1].columns[2].meta_data.path_in_schema = None

    src = rewrite_footer(sources["pyarrow-plain"], tmp_path / "bad.parquet", drop_path)
    with pytest.raises(pb.CorruptFileError, match="path_in_schema None") as info:
        rewrite_bloom_filters(src, tmp_path / "out.parquet", columns=["id"])
    assert (info.value.row_group, info.value.column) == (1, "name")


@pytest.mark.parametrize(("codec", "name"), [(3, "LZO"), (99, "codec 99")])
def test_a_codec_pyarrow_lacks_is_unsupported_not_corrupt(
    sources: dict[str, Path], tmp_path: Path, codec: int, name: str
) -> None:
    # LZO is a Parquet codec that pyarrow has never decompressed (it says so with an OSError,
    # which would read as a corrupt file); a codec number from a newer format is unknown.
    def recompress(md: Any) -> None:
        md.row_groups[1].columns[0].meta_data.codec = codec

    src = rewrite_footer(sources["pyarrow-plain"], tmp_path / "lzo.parquet", recompress)
    dst = tmp_path / "out.parquet"
    with pytest.raises(pb.UnsupportedFileError, match=f"compressed with {name},") as info:
        rewrite_bloom_filters(src, dst, columns=["id"])
    assert (info.value.row_group, info.value.column) == (1, "id")
    assert not dst.exists()


@pytest.mark.parametrize(
    ("write_options", "message", "offset"),
    [
        # Read from the pages: our own error, at the page's offset.
        ({}, "cannot decode a page header", 4),
        # DELTA_BINARY_PACKED goes through pyarrow, which reports an OSError.
        (
            {"use_dictionary": False, "column_encoding": "DELTA_BINARY_PACKED"},
            "pyarrow cannot read",
            None,
        ),
    ],
)
def test_an_undecodable_page_is_a_located_corrupt_file_error(
    tmp_path: Path, write_options: dict[str, Any], message: str, offset: int | None
) -> None:
    # A page header that does not decode is a corrupt source, named with its row group and
    # column, and no output appears.
    src, dst = tmp_path / "bad.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"x": pa.array(range(10_000))}), src, **write_options)
    data = bytearray(src.read_bytes())
    data[len(fmt.MAGIC) : len(fmt.MAGIC) + 64] = b"\xff" * 64  # the first page header
    src.write_bytes(bytes(data))
    with pytest.raises(pb.CorruptFileError, match=message) as info:
        rewrite_bloom_filters(src, dst, columns=["x"])
    assert (info.value.row_group, info.value.column, info.value.offset) == (0, "x", offset)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.parquet"]


def test_what_pyarrow_does_not_implement_is_unsupported_not_corrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pyarrow raises NotImplemented for what it cannot decode by design (e.g. nested columns
    # too large for one chunk), which no small file makes it do: inject it where the rewrite
    # reads a chunk through pyarrow. The file is fine, so it is unsupported, not corrupt.
    src, dst = tmp_path / "delta.parquet", tmp_path / "out.parquet"
    table = pa.table({"x": pa.array(range(10_000))})
    pq.write_table(table, src, use_dictionary=False, column_encoding="DELTA_BINARY_PACKED")

    def not_implemented(*args: Any, **kwargs: Any) -> Any:
        raise pa.ArrowNotImplementedError("not implemented here")

    monkeypatch.setattr(rewrite._ChunkReader, "batches", not_implemented)
    with pytest.raises(pb.UnsupportedFileError, match="pyarrow cannot read") as info:
        rewrite_bloom_filters(src, dst, columns=["x"])
    assert (info.value.row_group, info.value.column) == (0, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["delta.parquet"]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"columns": ["nope"]}, ValueError, "no leaf column 'nope'.*'id'"),
        (
            {"columns": ["point"]},
            ValueError,
            "group; its leaf columns are 'point.x', 'point.label'",
        ),
        ({"columns": "id"}, TypeError, "columns must be"),
        ({"remove": "id"}, TypeError, "remove must be"),
        ({"columns": ["id"], "remove": ["id"]}, ValueError, "both"),
        ({"columns": ["id"], "remove": "all"}, ValueError, "cannot be combined"),
        ({"columns": ["flag"]}, ValueError, "BOOLEAN"),
        ({"columns": ["id"], "fpp": 1.5}, ValueError, "fpp"),
        ({"columns": ["id"], "ndv": -1}, ValueError, "ndv"),
        ({"columns": ["id"], "ndv": "many"}, TypeError, "ndv"),
        ({"columns": ["id"], "num_bytes": 1000}, ValueError, "power of two"),
        ({"columns": ["id"], "num_bytes": 1024, "flavor": "spec"}, ValueError, "not both"),
        ({"columns": ["id"], "flavor": "mine"}, ValueError, "unknown flavor"),
    ],
)
def test_bad_arguments(
    sources: dict[str, Path],
    tmp_path: Path,
    options: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    dst = tmp_path / "out.parquet"
    with pytest.raises(error, match=message):
        rewrite_bloom_filters(sources["pyarrow-filters"], dst, **options)
    assert not dst.exists()
    assert os.listdir(tmp_path) == []


def test_dst_must_be_given_unless_in_place(sources: dict[str, Path], tmp_path: Path) -> None:
    src = sources["pyarrow-plain"]
    with pytest.raises(ValueError, match="in_place=True"):
        rewrite_bloom_filters(src, columns=["id"])
    with pytest.raises(ValueError, match=r"dst .* is src"):
        rewrite_bloom_filters(src, src, columns=["id"])
    with pytest.raises(ValueError, match="pass no dst"):
        rewrite_bloom_filters(src, tmp_path / "other.parquet", in_place=True)


# -- safe output ---------------------------------------------------------------------------------


def test_a_dst_that_cannot_be_a_file_is_refused_before_any_work(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    src = sources["pyarrow-plain"]
    with pytest.raises(IsADirectoryError, match="dst is a directory"):
        rewrite_bloom_filters(src, tmp_path, columns=["id"])
    missing = tmp_path / "no" / "such" / "out.parquet"
    with pytest.raises(FileNotFoundError, match=r"no directory to write .*out\.parquet"):
        rewrite_bloom_filters(src, missing, columns=["id"])
    assert os.listdir(tmp_path) == []


def test_in_place_replaces_src_and_keeps_its_mode(sources: dict[str, Path], tmp_path: Path) -> None:
    src = tmp_path / "data.parquet"
    src.write_bytes(sources["pyarrow-plain"].read_bytes())
    src.chmod(0o640)
    inode = src.stat().st_ino
    report = rewrite_bloom_filters(src, in_place=True, columns=["name"])
    assert report.src == report.dst == str(src)
    assert src.stat().st_ino != inode  # a new file renamed over the old one
    assert stat.S_IMODE(src.stat().st_mode) == 0o640
    assert {c for _, c in filters_of(src)} == {"name"}
    assert same_table(pq.read_table(src), pq.read_table(sources["pyarrow-plain"]))
    assert sorted(os.listdir(tmp_path)) == ["data.parquet"]


def test_in_place_through_a_symlink_rewrites_the_file_and_keeps_its_owner(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    data = tmp_path / "data" / "part-0.parquet"
    data.parent.mkdir()
    data.write_bytes(sources["pyarrow-plain"].read_bytes())
    data.chmod(0o604)
    owner = (os.getuid() + 1234, os.getgid() + 5678) if os.getuid() == 0 else None
    if owner is not None:  # only root may give a file away; CI runs as root
        os.chown(data, *owner)
    link = tmp_path / "current.parquet"
    link.symlink_to(data)
    report = rewrite_bloom_filters(link, in_place=True, columns=["name"])
    assert report.src == report.dst == str(link)
    assert link.is_symlink() and link.resolve() == data
    assert {c for _, c in filters_of(data)} == {"name"}
    assert stat.S_IMODE(data.stat().st_mode) == 0o604
    if owner is not None:
        assert (data.stat().st_uid, data.stat().st_gid) == owner
    assert sorted(p.name for p in data.parent.iterdir()) == ["part-0.parquet"]


def test_dst_is_replaced_when_it_exists(sources: dict[str, Path], tmp_path: Path) -> None:
    dst = tmp_path / "out.parquet"
    dst.write_bytes(b"old")
    report = rewrite_bloom_filters(sources["pyarrow-plain"], dst, columns=["id"])
    check_rewrite(sources["pyarrow-plain"], dst, report)


class FailingFile:
    """A file that raises OSError once ``budget`` bytes have been written (a full disk, a
    crash): it writes what fits, then fails."""

    def __init__(self, inner: IO[bytes], budget: int) -> None:
        self.inner = inner
        self.budget = budget

    def write(self, data: bytes | memoryview) -> int:
        if self.budget <= 0:
            raise OSError(28, "No space left on device (simulated)")
        part = bytes(data[: self.budget])
        self.budget -= len(part)
        written: int = self.inner.write(part)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("source", ["pyarrow-filters", "deltalake-filters"])
def test_a_crash_mid_write_leaves_src_intact_and_no_dst(
    sources: dict[str, Path], source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src.parquet"
    src.write_bytes(sources[source].read_bytes())
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    dst = tmp_path / "out.parquet"
    probe = rewrite_bloom_filters(src, dst, columns=["id", "name"], remove=["code"])
    size = probe.bytes_after
    dst.unlink()
    real_open = rewrite._open_temporary
    rng = random.Random(1)
    budgets = [0, 1, 4, size - 9, size - 1, *rng.sample(range(size), 12)]
    for budget in budgets:

        def failing_open(directory: str, name: str, budget: int = budget) -> tuple[str, Any]:
            path, file = real_open(directory, name)
            return path, FailingFile(file, budget)

        monkeypatch.setattr(rewrite, "_open_temporary", failing_open)
        for options in ({"in_place": True}, {"dst": dst}):
            with pytest.raises(OSError, match="simulated"):
                rewrite_bloom_filters(src, columns=["id", "name"], remove=["code"], **options)
            assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
            assert sorted(os.listdir(tmp_path)) == ["src.parquet"], budget


@pytest.fixture
def small_direct_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Direct I/O for the small test files too, in several windows each."""
    if rewrite._O_DIRECT is None:
        pytest.skip("no O_DIRECT on this platform")
    monkeypatch.setattr(rewrite, "DIRECT_COPY_MIN", rewrite.DIRECT_COPY_ALIGN)
    monkeypatch.setattr(rewrite, "DIRECT_COPY_WINDOW", 4 * rewrite.DIRECT_COPY_ALIGN)


def record_direct_copies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (start, stop) of every run of the body copied with direct I/O."""
    real = rewrite._copy_direct
    runs: list[tuple[int, int]] = []

    def recording(src: Any, out: Any, start: int, *args: Any) -> int:
        stop = real(src, out, start, *args)
        runs.append((start, stop))
        return stop

    monkeypatch.setattr(rewrite, "_copy_direct", recording)
    return runs


def direct_runs_of_a_rewrite(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[int, int]]:
    """Rewrite ``src`` (a filter for "id") as patched, check that the bytes are those of the
    rewrite without direct I/O, and return the runs the patched one copied with it."""
    with monkeypatch.context() as without:
        without.setattr(rewrite, "_O_DIRECT", None)
        expected = tmp_path / "expected.parquet"
        rewrite_bloom_filters(src, expected, columns=["id"])
    runs = record_direct_copies(monkeypatch)
    out = tmp_path / "out.parquet"
    rewrite_bloom_filters(src, out, columns=["id"])
    assert out.read_bytes() == expected.read_bytes()
    return runs


@pytest.mark.usefixtures("small_direct_copies")
@pytest.mark.parametrize("source", ["pyarrow-plain", "deltalake-filters"])
def test_the_body_is_copied_around_the_page_cache_in_the_kernel_and_through_a_buffer_alike(
    sources: dict[str, Path], source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Long runs go around the page cache (O_DIRECT) where the file system allows; the rest is
    # copied by copy_file_range where the kernel can, and through a buffer where it cannot (EXDEV
    # across file systems, ENOSYS on old kernels): the same bytes every way. deltalake puts its
    # filters after each row group, so its body has splices, after which the source's pages no
    # longer line up with the output's blocks (those runs take the kernel's copy).
    if rewrite._COPY_FILE_RANGE is None:
        pytest.skip("no copy_file_range on this platform")
    src = sources[source]
    options: dict[str, Any] = {"columns": ["id"], "remove": ["code"]}
    direct, kernel, buffered = (tmp_path / f"{way}.parquet" for way in ("d", "k", "b"))

    runs = record_direct_copies(monkeypatch)
    kernel_calls: list[int] = []
    real_copy_file_range = rewrite._COPY_FILE_RANGE

    def counting(*args: Any) -> int:
        kernel_calls.append(args[2])
        return real_copy_file_range(*args)  # type: ignore[no-any-return]

    monkeypatch.setattr(rewrite, "_COPY_FILE_RANGE", counting)
    rewrite_bloom_filters(src, direct, **options)
    copied = sum(stop - start for start, stop in runs)
    assert copied > src.stat().st_size // 2, runs  # most of the body went around the cache
    assert kernel_calls  # the heads and tails did not

    monkeypatch.setattr(rewrite, "_O_DIRECT", None)
    kernel_calls.clear()
    rewrite_bloom_filters(src, kernel, **options)
    assert kernel_calls

    def cannot(*args: Any) -> int:
        raise OSError(errno.EXDEV, "Invalid cross-device link (simulated)")

    monkeypatch.setattr(rewrite, "_COPY_FILE_RANGE", cannot)
    rewrite_bloom_filters(src, buffered, **options)
    assert direct.read_bytes() == kernel.read_bytes() == buffered.read_bytes()
    check_rewrite(src, direct, rewrite_bloom_filters(src, direct, **options))


@pytest.mark.usefixtures("small_direct_copies")
@pytest.mark.parametrize("refused", ["flag", "first write", "later write"])
def test_direct_io_refused_falls_back_to_the_same_bytes(
    sources: dict[str, Path], refused: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file system may refuse O_DIRECT when the flag is set, or only at a write (EINVAL): the
    # copy goes on without it from where it stopped.
    import fcntl

    if refused == "flag":
        real_fcntl = fcntl.fcntl

        def no_direct(fd: int, cmd: int, arg: int = 0) -> Any:
            if cmd == fcntl.F_SETFL and arg & rewrite._O_DIRECT:
                raise OSError(errno.EINVAL, "Invalid argument (simulated)")
            return real_fcntl(fd, cmd, arg)

        monkeypatch.setattr(fcntl, "fcntl", no_direct)
    else:
        real_write = rewrite._write_direct
        writes = itertools.count()
        refuse_from = 0 if refused == "first write" else 2

        def refusing(fd: int, data: memoryview) -> int:
            if next(writes) < refuse_from:
                return real_write(fd, data)
            raise OSError(errno.EINVAL, "Invalid argument (simulated)")

        monkeypatch.setattr(rewrite, "_write_direct", refusing)
    ((start, stop),) = direct_runs_of_a_rewrite(sources["pyarrow-plain"], tmp_path, monkeypatch)
    direct = 2 * rewrite.DIRECT_COPY_WINDOW if refused == "later write" else 0
    assert stop == start + direct  # the body starts aligned: no head


@pytest.mark.usefixtures("small_direct_copies")
@pytest.mark.parametrize("short", ["aligned", "unaligned"])
def test_short_direct_writes_go_on_from_where_they_stopped(
    sources: dict[str, Path], short: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # write(2) may write less than asked. A whole number of blocks: the next write goes on from
    # there. Anything else would leave the output unaligned for direct I/O, so the copy goes on
    # without it (simulated by writing the odd length with the flag cleared).
    import fcntl

    src = sources["deltalake-filters"]
    real_write = rewrite._write_direct
    align = rewrite.DIRECT_COPY_ALIGN

    def partial(fd: int, data: memoryview) -> int:
        if short == "aligned" or len(data) <= align:
            return real_write(fd, data[: max(align, len(data) // 2 // align * align)])
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~rewrite._O_DIRECT)
        try:
            return real_write(fd, data[: align + 1])
        finally:
            fcntl.fcntl(fd, fcntl.F_SETFL, flags)

    monkeypatch.setattr(rewrite, "_write_direct", partial)
    runs = direct_runs_of_a_rewrite(src, tmp_path, monkeypatch)
    if short == "aligned":
        assert sum(stop - start for start, stop in runs) > src.stat().st_size // 2
    else:
        assert runs[0] == (0, align + 1)  # the body starts aligned; its first write was odd


@pytest.mark.usefixtures("small_direct_copies")
def test_a_disk_full_during_the_direct_copy_leaves_no_file(
    sources: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src.parquet"
    src.write_bytes(sources["pyarrow-filters"].read_bytes())
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    real_write = rewrite._write_direct
    for budget in (0, 1, 3):
        writes = itertools.count()

        def full(fd: int, data: memoryview, budget: int = budget, writes: Any = writes) -> int:
            if next(writes) < budget:
                return real_write(fd, data)
            raise OSError(errno.ENOSPC, "No space left on device (simulated)")

        monkeypatch.setattr(rewrite, "_write_direct", full)
        for options in ({"in_place": True}, {"dst": tmp_path / "out.parquet"}):
            with pytest.raises(OSError, match="simulated"):
                rewrite_bloom_filters(src, columns=["id"], **options)
            assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
            assert sorted(os.listdir(tmp_path)) == ["src.parquet"]


def test_a_disk_full_during_the_kernel_copy_leaves_no_file(
    sources: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An error that is not "cannot copy here" (ENOSPC, EIO) is an error, not a fallback.
    src = tmp_path / "src.parquet"
    src.write_bytes(sources["pyarrow-filters"].read_bytes())
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    if rewrite._COPY_FILE_RANGE is None:
        pytest.skip("no copy_file_range on this platform")

    def full(*args: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device (simulated)")

    monkeypatch.setattr(rewrite, "_COPY_FILE_RANGE", full)
    for options in ({"in_place": True}, {"dst": tmp_path / "out.parquet"}):
        with pytest.raises(OSError, match="simulated"):
            rewrite_bloom_filters(src, columns=["id"], **options)
        assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
        assert sorted(os.listdir(tmp_path)) == ["src.parquet"]


def test_a_failed_rename_leaves_no_file(
    sources: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_rename(a: str, b: str) -> None:
        raise PermissionError("rename refused (simulated)")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(PermissionError):
        rewrite_bloom_filters(sources["pyarrow-plain"], tmp_path / "out.parquet", columns=["id"])
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("direct", [False, True])
def test_a_failure_while_building_filters_creates_no_file(
    sources: dict[str, Path], direct: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if direct:  # the body copy, around the page cache, is told to stop
        monkeypatch.setattr(rewrite, "DIRECT_COPY_MIN", rewrite.DIRECT_COPY_ALIGN)
        monkeypatch.setattr(rewrite, "DIRECT_COPY_WINDOW", rewrite.DIRECT_COPY_ALIGN)

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(SplitBlockBloomFilter, "insert_hashes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rewrite_bloom_filters(sources["pyarrow-plain"], tmp_path / "out.parquet", columns=["id"])
    assert os.listdir(tmp_path) == []


# -- many files ----------------------------------------------------------------------------------


def test_rewrite_files_reports_progress_and_errors(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    jobs = [
        (sources["pyarrow-plain"], tmp_path / "a.parquet"),
        (bad, tmp_path / "b.parquet"),
        (sources["duckdb"], tmp_path / "c.parquet"),
    ]
    done: list[str] = []
    failed: list[tuple[str, Exception]] = []
    reports = rewrite_files(
        jobs,
        remove="all",
        progress=lambda report: done.append(report.dst),
        on_error=lambda src, err: failed.append((src, err)),
    )
    assert (
        done
        == [r.dst for r in reports]
        == [str(tmp_path / "a.parquet"), str(tmp_path / "c.parquet")]
    )
    assert [src for src, _ in failed] == [str(bad)]
    assert isinstance(failed[0][1], pb.CorruptFileError)
    with pytest.raises(pb.CorruptFileError):
        rewrite_files(jobs, remove="all")


# -- low-level pieces ----------------------------------------------------------------------------


def test_serialize_bloom_filter_is_what_pyarrow_writes(sources: dict[str, Path]) -> None:
    path = sources["pyarrow-filters"]
    data = path.read_bytes()
    with pb.BloomFilterReader(path) as reader:
        for (rg, column), bloom_filter in reader.filters().items():
            chunk = reader.column_chunk(rg, column)
            offset, length = chunk.bloom_filter_offset, chunk.bloom_filter_length
            assert offset is not None and length is not None
            assert serialize_bloom_filter(bloom_filter) == data[offset : offset + length]


def test_serialize_bloom_filter_round_trips() -> None:
    bloom_filter = SplitBlockBloomFilter(1024)
    bloom_filter.insert(np.arange(100))
    data = serialize_bloom_filter(bloom_filter)
    header, header_len = fmt.parse_bloom_filter_header(data)
    assert header == fmt.BloomFilterHeader(1024, "BLOCK", "XXHASH", "UNCOMPRESSED")
    assert len(data) == header_len + 1024
    assert SplitBlockBloomFilter.from_bytes(data[header_len:]) == bloom_filter
    with pytest.raises(TypeError):
        serialize_bloom_filter(b"bits")  # type: ignore[arg-type]


def test_set_bloom_filter_location() -> None:
    meta = fmt.ColumnMetaData()
    set_bloom_filter_location(meta, 1234, 4112)
    assert (meta.bloom_filter_offset, meta.bloom_filter_length) == (1234, 4112)
    set_bloom_filter_location(meta, None, None)
    assert (meta.bloom_filter_offset, meta.bloom_filter_length) == (None, None)
    with pytest.raises(ValueError, match="both"):
        set_bloom_filter_location(meta, 1234, None)
    with pytest.raises(ValueError, match="leading magic"):
        set_bloom_filter_location(meta, 2, 100)
    with pytest.raises(ValueError, match="i32"):
        set_bloom_filter_location(meta, 100, 2**31)
    with pytest.raises(TypeError, match="int"):
        set_bloom_filter_location(meta, 100.0, 10)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ColumnMetaData"):
        set_bloom_filter_location(fmt.ColumnChunk(), 100, 10)


# -- relocation (pure) ---------------------------------------------------------------------------


def test_relocation_examples() -> None:
    relocation = Relocation([Splice(10, 20), Splice(30, 35, b"abcdefgh")])
    assert [relocation(o) for o in (0, 9, 10, 15, 20, 29, 30, 33, 35, 100)] == [
        0, 9, 10, 10, 10, 19, 20, 20, 28, 93,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="overlap"):
        Relocation([Splice(10, 20), Splice(15, 25)])


@st.composite
def splices(draw: st.DrawFn) -> tuple[int, list[Splice]]:
    size = draw(st.integers(0, 200))
    cuts = sorted(draw(st.lists(st.integers(0, size), max_size=12)))
    pieces = []
    for start, end in zip(cuts[::2], cuts[1::2], strict=False):
        pieces.append(Splice(start, end, draw(st.binary(max_size=6))))
    return size, pieces


@given(splices())
def test_relocation_matches_applying_the_splices(case: tuple[int, list[Splice]]) -> None:
    size, pieces = case
    # Apply the splices to a file whose byte i is "old offset i"; then every surviving old byte
    # must be where the relocation says.
    new: list[int | None] = []
    position = 0
    for splice in pieces:
        new.extend(range(position, splice.start))
        new.extend([None] * len(splice.replacement))
        position = splice.end
    new.extend(range(position, size))
    relocation = Relocation(reversed(pieces))
    for new_offset, old_offset in enumerate(new):
        if old_offset is not None:
            assert relocation(old_offset) == new_offset
    moved = [relocation(o) for o in range(size + 1)]
    assert moved == sorted(moved)  # order is kept
    assert relocation(size) == len(new)


# -- sizing for ndv="exact" without counting every chunk --------------------------------------


def _last_ndv_at_most(num_bytes: int, size_of: Callable[[int], int]) -> int:
    """The largest NDV that ``size_of`` sizes at ``num_bytes`` or less (sizes are monotone)."""
    low, high = 0, 1 << 40
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if size_of(mid) <= num_bytes else (low, mid - 1)
    return low


# Flavors whose chunks are sized from an estimate of the NDV, and one (parquet-java) counted.
EXACT_SIZING_FLAVORS = [None, "arrow-cpp", "duckdb", "parquet-java"]


@given(
    flavor=st.sampled_from(EXACT_SIZING_FLAVORS),
    fpp=st.sampled_from([0.01, 0.05, 0.001]),
    boundary=st.sampled_from([32 * 1024, 64 * 1024, 128 * 1024]),
    offset=st.integers(-400, 400) | st.integers(-20_000, 20_000),
    duplicates=st.integers(0, 30_000),
    seed=st.integers(0, 2**32 - 1),
)
def test_chunk_size_near_size_boundaries_is_the_exact_ndv_size(
    flavor: str | None, fpp: float, boundary: int, offset: int, duplicates: int, seed: int
) -> None:
    """For NDVs around the edge between two sizes, where an estimated NDV could pick the other
    size, the filter is the one sized for the exact count of distinct hashes."""
    sizing = rewrite._check_sizing(fpp, "exact", None, flavor)
    ndv = max(_last_ndv_at_most(boundary, sizing.num_bytes_for) + offset, 1)
    rng = np.random.default_rng(seed)
    distinct = np.unique(rng.integers(0, 2**64, size=ndv, dtype=np.uint64))
    hashes = np.concatenate([distinct, rng.choice(distinct, size=duplicates)])
    rng.shuffle(hashes)
    expected = SplitBlockBloomFilter(sizing.num_bytes_for(distinct.size))
    expected.insert_hashes(distinct)
    assert rewrite._chunk_filter(hashes.copy(), sizing) == expected


@pytest.mark.parametrize("ndv", [20_000, 40_000, 150_000])
def test_chunks_away_from_a_size_boundary_are_not_counted(
    ndv: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Away from the edge between two sizes the estimate alone picks the size: no sort."""
    counted: list[int] = []
    count = rewrite._count_distinct

    def counting(hashes: np.ndarray) -> int:
        counted.append(hashes.size)
        return count(hashes)

    monkeypatch.setattr(rewrite, "_count_distinct", counting)
    rng = np.random.default_rng(ndv)
    distinct = np.unique(rng.integers(0, 2**64, size=ndv, dtype=np.uint64))
    hashes = np.concatenate([distinct, distinct[: ndv // 3]])
    sizing = rewrite._check_sizing(0.01, "exact", None, None)
    expected = SplitBlockBloomFilter(optimal_num_bytes(distinct.size, 0.01))
    expected.insert_hashes(distinct)
    assert rewrite._chunk_filter(hashes, sizing) == expected
    assert counted == []


def test_the_estimate_margin_bounds_the_estimate_error() -> None:
    """The margin allowed to the estimated NDV is far beyond its observed error (a few
    standard deviations at most), from nearly empty filters to the fullest ones it is used
    for, and the bounds derived from it hold the true NDV."""
    rng = np.random.default_rng(7)
    for ndv, num_values in [(1_000, 900_000), (20_000, 20_000), (60_000, 200_000), (300_000,) * 2]:
        num_bytes = optimal_num_bytes(num_values, rewrite._ESTIMATE_FPP)
        margin = rewrite._estimate_margin(ndv, num_bytes)
        errors = []
        for _ in range(20):
            bloom_filter = SplitBlockBloomFilter(num_bytes)
            bloom_filter.insert_hashes(rng.integers(0, 2**64, size=ndv, dtype=np.uint64))
            estimate = bloom_filter.estimate_ndv()
            errors.append(abs(estimate - ndv))
            low, high = rewrite._ndv_bounds(estimate, num_values, num_bytes)
            assert low <= ndv <= high
            assert high - low < 4 * margin  # not so wide that it says nothing
        assert max(errors) < margin / 4, (ndv, num_values, max(errors), margin)


@pytest.mark.parametrize("flavor", [None, "parquet-java", "duckdb"])
def test_large_chunks_get_filters_sized_for_their_exact_ndv(
    tmp_path: Path, flavor: str | None
) -> None:
    """Chunks big enough that their NDV is estimated from the filter, not counted: unique,
    duplicated, dictionary-encoded and nullable columns, an NDV just past a size boundary."""
    from parquet_bloom._sizing import expected_num_bytes

    rows = 70_000
    rng = np.random.default_rng(3)
    # 27_080 distinct values in each row group: just past the last NDV of a 32 KiB filter at
    # fpp 0.01 (27_076), within the estimate's margin, so counted.
    assert _last_ndv_at_most(32 * 1024, optimal_num_bytes) == 27_076
    near_edge = np.concatenate([rng.permutation(np.arange(rows // 2) % 27_080) for _ in "ab"])
    table = pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "user_id": pa.array(rng.integers(0, 50_000, rows)),
            "near_edge": pa.array(near_edge.astype(np.int64)),
            "name": pa.array([f"name-{i % 30_000}" for i in range(rows)]),
            "score": pa.array(rng.random(rows), mask=rng.random(rows) < 0.1),
        }
    )
    src, dst = tmp_path / "big.parquet", tmp_path / "out.parquet"
    pq.write_table(table, src, row_group_size=35_000, use_dictionary=["name"])
    columns = ["id", "user_id", "near_edge", "name", "score"]
    report = rewrite_bloom_filters(src, dst, columns=columns, flavor=flavor)
    assert len(report.filters_written) == 2 * len(columns)
    check_rewrite(
        src,
        dst,
        report,
        expected_num_bytes=lambda ndv: expected_num_bytes(ndv, 0.01, flavor or "spec"),
    )

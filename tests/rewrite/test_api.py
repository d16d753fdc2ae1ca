"""Rewriting the Bloom filters of files written by pyarrow, deltalake (arrow-rs) and DuckDB:
what is added, resized, kept and removed, what is refused, and where the output goes. Every
rewrite is checked by :func:`tests.rewrite.files.check_rewrite`.
"""

from __future__ import annotations

import decimal
import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import parquet_bloom as pb
from parquet_bloom import _format as fmt
from parquet_bloom._rewrite.api import rewrite_bloom_filters, rewrite_files
from parquet_bloom._rewrite.plan import (
    serialize_bloom_filter,
)
from parquet_bloom._sbbf import optimal_num_bytes
from tests.rewrite.files import (
    PAGE_ROWS,
    ROWS,
    SOURCES,
    check_rewrite,
    filterable,
    filters_of,
    footer_of,
    make_table,
    same_table,
    write_deltalake,
)
from tests.writers import drop_bloom_filter_lengths, rewrite_footer

# -- the rewrites --------------------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_add_filters_to_every_column(sources: dict[str, Path], source: str, tmp_path: Path) -> None:
    src, dst = sources[source], tmp_path / "out.parquet"
    columns = filterable(src)
    report = rewrite_bloom_filters(src, dst, columns=columns)
    assert {column for _, column, _ in report.filters_written} == set(columns)
    check_rewrite(src, dst, report)


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
    rewrite_bloom_filters(
        path, in_place=True, columns=None, remove=["id", "code"], ignore_table=True
    )
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


@pytest.mark.parametrize(
    ("offset", "length", "message"),
    [
        (None, 1, "cannot hold a header and a bitset"),
        (None, 32, "cannot hold a header and a bitset"),
        (2, None, "outside the data region"),
    ],
)
def test_filters_the_reader_refuses_are_refused(
    sources: dict[str, Path],
    tmp_path: Path,
    offset: int | None,
    length: int | None,
    message: str,
) -> None:
    # The rewrite locates old filters by the reader's rules: a bloom_filter_length of 1..32
    # cannot hold a header and a bitset, and no filter lies in the leading magic.
    def misplace(md: Any) -> None:
        meta = md.row_groups[1].columns[2].meta_data
        meta.bloom_filter_offset = offset if offset is not None else meta.bloom_filter_offset
        meta.bloom_filter_length = length if length is not None else meta.bloom_filter_length

    src = rewrite_footer(sources["pyarrow-filters"], tmp_path / "bad.parquet", misplace)
    dst = tmp_path / "out.parquet"
    with pytest.raises(pb.CorruptFileError, match=message) as info:
        rewrite_bloom_filters(src, dst, columns=["id"])
    with pb.BloomFilterReader(src) as reader:
        located = reader.column_chunk(1, "name").bloom_filter_offset
    error = info.value
    assert (error.source, error.row_group, error.column, error.offset) == (
        str(src),
        1,
        "name",
        located,
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.parquet"]


def test_a_chunk_without_its_path_is_refused(sources: dict[str, Path], tmp_path: Path) -> None:
    def drop_path(md: Any) -> None:
        md.row_groups[1].columns[2].meta_data.path_in_schema = None

    src = rewrite_footer(sources["pyarrow-plain"], tmp_path / "bad.parquet", drop_path)
    with pytest.raises(pb.CorruptFileError, match="path_in_schema None") as info:
        rewrite_bloom_filters(src, tmp_path / "out.parquet", columns=["id"])
    assert (info.value.row_group, info.value.column) == (1, "name")


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


def test_a_resize_of_named_columns_adds_no_filter(tmp_path: Path) -> None:
    # Filters on "a" only: a resize of ["a", "b"] is refused for "b"
    # (no filter to resize), and a resize of ["a"] rebuilds that one filter and adds none.
    src = tmp_path / "src.parquet"
    data = pa.table({"a": list(range(200)), "b": [f"v{i}" for i in range(200)]})
    pq.write_table(data, src, row_group_size=100, bloom_filter_options={"a": {"ndv": 100}})
    with pb.BloomFilterReader(src) as reader:
        chunks = reader.column_chunks
        before = {(c.row_group, c.path) for c in chunks if c.bloom_filter_offset is not None}
    assert {c for _, c in before} == {"a"}
    with pytest.raises(ValueError, match=r"'b' has no Bloom filter .* add --column b"):
        rewrite_bloom_filters(src, tmp_path / "x.parquet", columns=["a", "b"], existing_only=True)
    assert not (tmp_path / "x.parquet").exists()
    report = rewrite_bloom_filters(
        src, tmp_path / "out.parquet", columns=["a"], existing_only=True, fpp=0.2
    )
    assert {(rg, c) for rg, c, _ in report.filters_written} == before

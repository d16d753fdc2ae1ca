"""parquet_bloom.spark._files against a real local Spark: the index of a dataset's filters matches
the reader's, locally and through fsspec, pruning keeps every row group holding a value, and the
listing skips what Spark skips; and Spark reads (and prunes with) files whose filters we added or
resized.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import parquet_bloom as pb
from parquet_bloom import _format as fmt
from parquet_bloom import spark as pbs
from parquet_bloom.spark import _files as spark_files
from tests.spark.data import spark_write

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def plain_file(typed_df: DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Several row groups, no filters, no dictionary (so only statistics and filters prune)."""
    (file,) = spark_write(
        typed_df.orderBy("id"),
        tmp_path_factory.mktemp("plain") / "t",
        {"spark.sql.parquet.outputTimestampType": "INT96"},
        {"parquet.block.size": "32768", "parquet.enable.dictionary": "false"},
        filters=False,
    )
    with pb.BloomFilterReader(file) as reader:
        assert reader.num_row_groups > 2
        assert not reader.filters()
    return file


def rows_of(spark: SparkSession, path: Path) -> list[tuple[Any, ...]]:
    """The file's rows as Spark reads them, sorted, with NaN made comparable."""
    rows = spark.read.parquet(str(path)).collect()
    return sorted(tuple("NaN" if v != v else v for v in row) for row in rows)


def test_spark_reads_a_file_whose_filters_we_added(
    spark: SparkSession, plain_file: Path, tmp_path: Path, typed_df: DataFrame
) -> None:
    from parquet_bloom._rewrite import rewrite_bloom_filters

    added = tmp_path / "added.parquet"
    rewrite_bloom_filters(plain_file, added, columns=["long", "string", "dec30", "ts", "date"])
    with pb.BloomFilterReader(added) as reader:
        assert {c for _, c in reader.filters()} == {"long", "string", "dec30", "ts", "date"}
    assert rows_of(spark, added) == rows_of(spark, plain_file)

    # Spark prunes with our filters: probe a value of row group 1, then blank that row group's
    # filter; Spark must now skip the row group (the statistics alone would keep it).
    value = (
        pq.ParquetFile(added)
        .read_row_group(1, columns=["long"])
        .column("long")
        .drop_null()[5]
        .as_py()
    )
    query = spark.read.parquet(str(added)).filter(F.col("long") == value)
    assert query.count() == 1
    blanked = tmp_path / "blanked.parquet"
    shutil.copyfile(added, blanked)
    with pb.BloomFilterReader(added) as reader:
        chunk = reader.column_chunk(1, "long")
    data = bytearray(blanked.read_bytes())
    assert chunk.bloom_filter_offset is not None
    header, header_len = fmt.parse_bloom_filter_header(
        bytes(data[chunk.bloom_filter_offset :][:64])
    )
    start = chunk.bloom_filter_offset + header_len
    data[start : start + header.num_bytes] = bytes(header.num_bytes)
    blanked.write_bytes(bytes(data))
    assert spark.read.parquet(str(blanked)).filter(F.col("long") == value).count() == 0


def test_spark_reads_a_file_whose_filters_we_resized(
    spark: SparkSession, written: dict[str, Path], tmp_path: Path
) -> None:
    from parquet_bloom._rewrite import rewrite_bloom_filters

    source = written["fixed_size_row_groups"]  # every filter 8192 bytes, chunks of ~300 rows
    resized = tmp_path / "resized.parquet"
    rewrite_bloom_filters(source, resized, columns="existing", fpp=0.01)
    with pb.BloomFilterReader(source) as before, pb.BloomFilterReader(resized) as after:
        old, new = before.filters(), after.filters()
    assert old.keys() == new.keys()
    assert all(new[k].num_bytes < old[k].num_bytes for k in old)
    assert rows_of(spark, resized) == rows_of(spark, source)
    table = pq.read_table(source, columns=["long", "string"])
    for column in ("long", "string"):
        values = table.column(column).drop_null().to_pylist()[::1999]
        for path in (source, resized):
            found = spark.read.parquet(str(path)).filter(F.col(column).isin(values))
            assert found.select(column).distinct().count() == len(set(values))


# -- auditing datasets --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dataset(written: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of Spark's files, partition-style, with files Spark would skip and one that is
    not Parquet at all."""
    root = tmp_path_factory.mktemp("dataset")
    for name in ("adaptive_row_groups", "fixed_size_row_groups", "int96_no_dictionary"):
        part = root / f"kind={name}"
        part.mkdir()
        shutil.copyfile(written[name], part / written[name].name)
    (root / "_SUCCESS").write_bytes(b"")
    (root / "kind=adaptive_row_groups" / ".part.crc").write_bytes(b"crc")
    (root / "_delta_log").mkdir()
    (root / "_delta_log" / "0.json").write_text("{}")
    (root / "kind=broken").mkdir()
    (root / "kind=broken" / "part-0.parquet").write_bytes(b"PAR1 not really")
    return root


def parquet_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.parquet") if "broken" not in str(p))


def test_bloom_filter_index_matches_the_reader(spark: SparkSession, dataset: Path) -> None:
    rows = pbs.bloom_filter_index(spark, str(dataset)).collect()
    assert {r.file for r in rows} == {str(p) for p in parquet_files(dataset)} | {
        str(dataset / "kind=broken" / "part-0.parquet")
    }
    (broken,) = [r for r in rows if "broken" in r.file]
    assert broken.error.startswith("CorruptFileError") and broken.row_group is None
    by_key = {(r.file, r.row_group, r.column): r for r in rows if r.error is None}
    expected = 0
    for path in parquet_files(dataset):
        with pb.BloomFilterReader(path) as reader:
            filters = reader.filters()
            for chunk in reader.column_chunks:
                expected += 1
                row = by_key[(str(path), chunk.row_group, chunk.path)]
                assert row.physical_type == chunk.physical_type
                assert row.num_values == chunk.num_values
                assert row.has_bloom_filter == (chunk.bloom_filter_offset is not None)
                assert row.bloom_filter_offset == chunk.bloom_filter_offset
                assert row.bloom_filter_length == chunk.bloom_filter_length
                f = filters.get((chunk.row_group, chunk.path))
                if f is None:
                    assert row.num_bytes is None and row.fraction_set is None
                    continue
                assert row.num_bytes == f.num_bytes
                assert row.fraction_set == pytest.approx(f.fraction_set())
                assert row.estimated_ndv == pytest.approx(f.estimate_ndv())
                assert row.fpp == pytest.approx(f.fpp())
    assert len(by_key) == expected
    assert sum(r.has_bloom_filter for r in by_key.values()) > 30


def test_bloom_filter_index_over_fsspec_urls(spark: SparkSession, dataset: Path) -> None:
    directory = dataset / "kind=adaptive_row_groups"
    local = {
        (r.file, r.row_group, r.column): r.asDict()
        for r in pbs.bloom_filter_index(spark, directory).collect()
    }
    remote = pbs.bloom_filter_index(spark, f"file://{directory}").collect()
    assert len(remote) == len(local) > 0
    for row in remote:
        got = row.asDict()
        url = got.pop("file")
        assert url.startswith("file://")
        expected = local[(url[len("file://") :], row.row_group, row.column)]
        expected.pop("file")
        assert got == expected


def row_groups_holding(path: Path, column: str, value: Any) -> set[tuple[str, int]]:
    parquet = pq.ParquetFile(path)
    return {
        (str(path), rg)
        for rg in range(parquet.metadata.num_row_groups)
        if value in parquet.read_row_group(rg, columns=[column]).column(column).to_pylist()
    }


def test_files_might_contain_keeps_every_row_group_holding_the_value(
    spark: SparkSession, dataset: Path, table: pa.Table
) -> None:
    files = parquet_files(dataset)
    filtered: dict[str, set[tuple[str, int]]] = {}
    every: dict[str, set[tuple[str, int]]] = {}
    for column in ("long", "string", "dec30"):
        filtered[column], every[column] = set(), set()
        for path in files:
            with pb.BloomFilterReader(path) as reader:
                filtered[column] |= {(str(path), rg) for rg, _ in reader.filters([column])}
                every[column] |= {(str(path), rg) for rg in range(reader.num_row_groups)}
    for column, picks in (("long", [3, 1500, 3999]), ("string", [10, 2000]), ("dec30", [77])):
        for i in picks:
            value = table.column(column)[i].as_py()
            if value is None:
                continue
            truth = set().union(*(row_groups_holding(p, column, value) for p in files))
            found = pbs.files_might_contain(spark, files, column, [value]).collect()
            kept = {(r.file, r.row_group) for r in found}
            assert truth and truth <= kept, (column, value)
            # Row groups without a filter (all-dictionary chunks) are kept; of those with one,
            # only false positives may be kept.
            assert len((kept - truth) & filtered[column]) <= 2, (column, value)
            assert kept - truth - filtered[column] == every[column] - truth - filtered[column]
    every = {(str(p), rg) for p in files for rg in range(pq.ParquetFile(p).metadata.num_row_groups)}
    absent = pbs.files_might_contain(spark, files, "long", [11, 12, 13]).collect()
    assert len(absent) < 0.2 * len(every)
    # a null literal, or a column that a file lacks, keeps everything
    assert {
        (r.file, r.row_group)
        for r in pbs.files_might_contain(spark, files, "long", [None]).collect()
    } == every
    assert {
        (r.file, r.row_group) for r in pbs.files_might_contain(spark, files, "kind", "x").collect()
    } == every


def test_files_might_contain_bad_literals_fail_on_the_driver(
    spark: SparkSession, dataset: Path
) -> None:
    with pytest.raises(TypeError, match="long"):
        pbs.files_might_contain(spark, dataset, "long", ["not a number"])
    with pytest.raises(FileNotFoundError):
        pbs.files_might_contain(spark, dataset / "missing", "long", [1])
    assert pbs.files_might_contain(spark, [], "long", [1]).count() == 0


def test_listing_skips_what_spark_skips(dataset: Path) -> None:
    listed = spark_files.list_files(dataset, None)
    assert [Path(p) for p in listed] == sorted(
        [*parquet_files(dataset), dataset / "kind=broken" / "part-0.parquet"]
    )
    assert os.path.basename(listed[0]).startswith("part-")

"""parquet_bloom.spark._build against a real local Spark (``local[2]``, one session for the run):
a filter built from a DataFrame must equal, bit for bit, the filter Spark wrote for the same
values at the same size, and the local :class:`SplitBlockBloomFilter` of those values, however
the DataFrame is partitioned and sized (test_build_distributed.py: at many partitions).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import parquet_bloom as pb
from parquet_bloom import spark as pbs
from parquet_bloom._sbbf import SplitBlockBloomFilter, optimal_num_bytes
from parquet_bloom.spark import _build as build
from tests.spark.data import COLUMNS, WRITES, session_conf

pytestmark = pytest.mark.spark


def file_filter(path: Path, column: str) -> SplitBlockBloomFilter:
    with pb.BloomFilterReader(path) as reader:
        bloom_filter = reader.filter(0, column)
    assert bloom_filter is not None, column
    return bloom_filter


@pytest.mark.parametrize("partitions", [1, 3, 8])
def test_build_filters_equal_the_filters_spark_writes(
    typed_df: DataFrame, written: dict[str, Path], partitions: int, jvm: bool
) -> None:
    path = written["int96_no_dictionary"]
    expected = {column: file_filter(path, column) for column in COLUMNS}
    sizes = {column: f.num_bytes for column, f in expected.items()}
    df = typed_df.repartition(partitions)
    with session_conf(typed_df.sparkSession, WRITES["int96_no_dictionary"]["conf"]):
        built = pbs.build_filters(df, COLUMNS, num_bytes=sizes, jvm=jvm)
    assert list(built) == COLUMNS
    assert [c for c in COLUMNS if built[c] != expected[c]] == []


def test_build_filter_one_column(typed_df: DataFrame, written: dict[str, Path]) -> None:
    expected = file_filter(written["int96_no_dictionary"], "dec30")
    assert pbs.build_filter(typed_df, "dec30", num_bytes=expected.num_bytes) == expected


def test_build_filter_equals_a_local_build(typed_df: DataFrame, table: pa.Table) -> None:
    longs = table.column("long").drop_null().to_numpy()
    ndv = len(np.unique(longs))
    built = pbs.build_filter(typed_df.repartition(5), "long", fpp=0.001, ndv=ndv)
    local = SplitBlockBloomFilter.from_ndv(ndv, 0.001)
    local.insert(longs, "INT64")
    assert built == local
    strings = pbs.build_filter(typed_df, F.upper("string"), num_bytes=4096)
    local = SplitBlockBloomFilter(4096)
    local.insert([s.upper() for s in table.column("string").drop_null().to_pylist()], "BYTE_ARRAY")
    assert strings == local


def test_build_restores_the_arrow_batch_size(typed_df: DataFrame) -> None:
    spark = typed_df.sparkSession
    for setting in ("5000", "500000"):  # raised for the build and restored; never lowered
        with session_conf(spark, {build.MAX_RECORDS_PER_BATCH_CONF: setting}):
            pbs.build_filter(typed_df, "int", num_bytes=1024)
            assert spark.conf.get(build.MAX_RECORDS_PER_BATCH_CONF) == setting
    before = spark.conf.get(build.MAX_RECORDS_PER_BATCH_CONF)
    pbs.build_filter(typed_df, "int", num_bytes=1024)
    assert spark.conf.get(build.MAX_RECORDS_PER_BATCH_CONF) == before


@pytest.mark.parametrize("route", ["fold", "estimate"])
def test_build_filter_sizes_itself(
    typed_df: DataFrame, table: pa.Table, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    longs = table.column("long").drop_null()
    truth = len(np.unique(longs.to_numpy()))
    if route == "estimate":  # a filter sized for the row count would be too large to receive
        monkeypatch.setattr(build, "MAX_FOLD_BYTES", 4096)
    built = pbs.build_filter(typed_df, "long", fpp=0.01)
    assert built.num_bytes == optimal_num_bytes(truth, 0.01)
    local = SplitBlockBloomFilter(built.num_bytes)
    local.insert(longs)
    assert built == local
    assert built.fpp() <= 0.01


def test_build_filter_of_no_values(spark: SparkSession) -> None:
    empty = spark.range(0).select(F.col("id").alias("x"))
    assert pbs.build_filter(empty, "x") == SplitBlockBloomFilter(32)
    nulls = spark.range(10).select(F.lit(None).cast("string").alias("x")).repartition(3)
    assert pbs.build_filter(nulls, "x", ndv=100) == SplitBlockBloomFilter.from_ndv(100)


def test_build_filters_sizes_per_column(typed_df: DataFrame, table: pa.Table) -> None:
    built = pbs.build_filters(typed_df, ["long", "byte"], fpp=0.01, ndv={"long": 10_000})
    assert built["long"].num_bytes == optimal_num_bytes(10_000, 0.01)
    byte_ndv = len(set(table.column("byte").to_pylist()))
    assert built["byte"].num_bytes == optimal_num_bytes(byte_ndv, 0.01)
    local = SplitBlockBloomFilter(built["byte"].num_bytes)
    local.insert(table.column("byte"), "INT32")
    assert built["byte"] == local
    with pytest.raises(ValueError, match="not built"):
        pbs.build_filters(typed_df, ["long"], ndv={"other": 3})
    with pytest.raises(ValueError, match="no size for"):
        pbs.build_filters(typed_df, ["long", "int"], num_bytes={"long": 64})
    with pytest.raises(ValueError, match="distinct names"):
        pbs.build_filters(typed_df, ["long", "long"])


def test_build_filter_refuses_what_has_no_filter(spark: SparkSession) -> None:
    df = spark.range(3).select(
        (F.col("id") > 1).alias("flag"), F.array("id").alias("ids"), F.col("id")
    )
    with pytest.raises(ValueError, match="BooleanType"):
        pbs.build_filter(df, "flag")
    with pytest.raises(TypeError, match="array<bigint>"):
        pbs.build_filter(df, "ids")
    with pytest.raises(ValueError, match="not both"):
        pbs.build_filter(df, "id", ndv=10, num_bytes=64)
    with pytest.raises(ValueError, match="power of two"):
        pbs.build_filter(df, "id", num_bytes=100)
    with pytest.raises(ValueError, match="fpp"):
        pbs.build_filter(df, "id", fpp=1.5)
    with pytest.raises(TypeError, match="name or a Column"):
        pbs.build_filter(df, 3)  # type: ignore[arg-type]

"""Spark-session fixtures shared by the tests of parquet_bloom.spark: the typed table as a cached
DataFrame, that DataFrame written by Spark in each way of WRITES, and the choice of running with
the JVM accelerator or without it. Package-scoped, so that
Spark builds them once for every test module here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from parquet_bloom.spark import _jvm
from tests import skips
from tests.spark.data import ROWS, WRITES, spark_write, typed_table


@pytest.fixture(params=[True, False], ids=["jar", "no-jar"])
def jvm(request: pytest.FixtureRequest, spark: SparkSession) -> bool:
    """Run a test with the JVM accelerator (``jvm=True``) and without it (``jvm=False``): the
    answers must be the same."""
    if request.param and _jvm.accelerator(spark, None) is None:
        pytest.skip(skips.NO_JAVAC_FOR_JAR)
    return bool(request.param)


@pytest.fixture(scope="package")
def table() -> pa.Table:
    return typed_table()


@pytest.fixture(scope="package")
def typed_df(spark: SparkSession, table: pa.Table) -> Iterator[DataFrame]:
    df = spark.createDataFrame(table).withColumn("ts_ntz", F.col("ts_ntz").cast("timestamp_ntz"))
    assert df.schema["ts_ntz"].dataType.simpleString() == "timestamp_ntz"
    df = df.cache()
    assert df.count() == ROWS
    yield df
    df.unpersist()


@pytest.fixture(scope="package")
def written(typed_df: DataFrame, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each configuration of WRITES as one Parquet file written by Spark."""
    root = tmp_path_factory.mktemp("spark-written")
    out = {}
    for name, how in WRITES.items():
        (file,) = spark_write(typed_df, root / name, how["conf"], how["options"])
        num_row_groups = pq.ParquetFile(file).metadata.num_row_groups
        assert (num_row_groups == 1) == how["one_row_group"], (name, num_row_groups)
        out[name] = file
    return out

"""Files from every writer the suite has, read from the S3 server: Arrow C++ (pyarrow), DuckDB,
arrow-rs (deltalake: filters after each row group) and parquet-java (Spark: filters at the end).
The filters read by URL are those read from the local file, in at most 2 requests when the
footer fits the tail read: 1 when the tail holds the filters too, 2 when it does not; and the
server saw exactly those requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import parquet_bloom as pb
from parquet_bloom._io.source import REMOTE_TAIL_SIZE
from tests import writers


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("writers-remote")
    rng = np.random.default_rng(11)
    ids = rng.integers(0, 2**40, writers.ROWS)
    table = pa.table({"id": ids, "s": [f"k{v}" for v in ids]})
    files = {
        "pyarrow": writers.write_pyarrow(root / "pyarrow.parquet", table),
        "duckdb": writers.write_duckdb(root / "duckdb.parquet"),
        "deltalake": writers.write_deltalake(root / "delta", table)[0],
    }
    from pyspark.sql import functions as F

    frame = spark.range(writers.ROWS).select(
        (F.col("id") * 1_000_003 % (1 << 40)).alias("id"),
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("s"),
    )
    frame = frame.coalesce(1)
    writer = frame.write.mode("overwrite").option("parquet.block.size", 64 * 1024)
    for column in ("id", "s"):
        writer = writer.option(f"parquet.bloom.filter.enabled#{column}", "true")
    writer.parquet(str(root / "spark"))
    (files["spark"],) = sorted((root / "spark").glob("*.parquet"))
    return files


@pytest.mark.parametrize("tail", [REMOTE_TAIL_SIZE, 4096], ids=["default tail", "4 KiB tail"])
@pytest.mark.parametrize("writer", ["pyarrow", "duckdb", "deltalake", "spark"])
def test_every_writers_filters_by_url_in_one_or_two_requests(
    s3: Any, s3_requests: Any, written: dict[str, Path], writer: str, tail: int
) -> None:
    local = written[writer]
    with pb.BloomFilterReader(local) as reader:
        expected = {key: f.to_bytes() for key, f in reader.filters().items()}
        offsets = [c.bloom_filter_offset for c in reader.column_chunks if c.bloom_filter_offset]
    assert expected, f"{writer} wrote no filters"
    size = local.stat().st_size
    url = s3.upload(local, f"s3://{s3.bucket()}/{writer}.parquet")
    s3_requests.reset()
    with pb.BloomFilterReader(url, size=size, tail_size=tail) as reader:
        got = {key: f.to_bytes() for key, f in reader.filters().items()}
        requests = reader.requests
        footer_start = reader.footer_start
    assert got == expected
    # The tail read, one more for a footer longer than it, one more for filters before both.
    footer_reads = 1 if size - footer_start <= tail else 2
    covered = min(size - tail, footer_start)
    assert requests == footer_reads + (min(offsets) < covered), (writer, size, min(offsets))
    assert requests <= 2 or footer_reads == 2
    assert s3_requests.count() == s3_requests.count("GET") == requests

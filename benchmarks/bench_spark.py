"""parquet_bloom.spark against Spark's own JVM code, on one cached DataFrame, in one run.

A 20 M-row bigint column (distinct values) is cached on ``local[2]``; every timing is the best of
a few runs of a Spark action on it, so the cache scan is in both sides of each ratio.

- build: ``build_filter(df, "x", ndv=n)`` against Spark's JVM ``df.stat.bloomFilter("x", n,
  0.01)`` (Spark's own Bloom filter, built per partition in the JVM and tree-aggregated). Also
  shown, not targeted, the two ways of sizing without ``ndv``: counting rows, building at that
  size and folding down (what ``ndv=None`` does here), and ``approx_count_distinct`` first
  (what it does when the partials sized for the rows would be too large to ship).
- probe: ``df.filter(might_contain(f, "x")).count()`` against ``df.filter(col("x").isin(small))
  .count()``, with ``f`` the filter of the same small list; the Column is made inside the timing,
  as a user's query makes it. Also shown: a 2 MiB filter (its words reach the plan through a
  scalar subquery), the Arrow UDF that probes the types Spark cannot hash itself, and a scalar
  Arrow UDF that does nothing but return True, the floor any Python UDF pays here.

Ratios, not seconds, are the figures: the machine is shared and noisy.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pyarrow as pa

os.environ["PYSPARK_PYTHON"] = sys.executable

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from timing import best_in_turns, report

from parquet_bloom import SplitBlockBloomFilter
from parquet_bloom import spark as pbs
from parquet_bloom.spark import _probe as spark_probe
from parquet_bloom.spark._build import NDV_RSD
from parquet_bloom.spark._types import SparkLayout

ROWS = 20_000_000
SMALL_LIST = 100
REPEATS = 4


def main() -> bool:
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    # Distinct, scrambled 64-bit values: a multiplication by an odd constant is a bijection.
    df = spark.range(ROWS).select((F.col("id") * 0x9E3779B1 + 12345).alias("x")).cache()
    assert df.count() == ROWS
    ok = True

    print(f"build, {ROWS:,} distinct bigints, 1 % ({df.rdd.getNumPartitions()} partitions):")
    jvm_stat = df._jdf.stat()  # no Python wrapper for bloomFilter in pyspark

    def estimate_then_build() -> SplitBlockBloomFilter:
        # What build_filter(ndv=None) does when folding would ship too much.
        (estimate,) = df.select(F.approx_count_distinct("x", rsd=NDV_RSD)).first() or (0,)
        return pbs.build_filter(df, "x", ndv=int(estimate * 1.03) + 1)

    build = best_in_turns(
        {
            "jvm": lambda: jvm_stat.bloomFilter("x", ROWS, 0.01).bitSize(),
            "ours": lambda: pbs.build_filter(df, "x", ndv=ROWS),
            "folded": lambda: pbs.build_filter(df, "x"),  # counts rows, builds, folds
            "estimated": estimate_then_build,
        },
        REPEATS,
    )
    jvm, ours, estimated, folded = (build[k] for k in ("jvm", "ours", "estimated", "folded"))
    print(
        f"  Spark JVM {jvm:.2f} s; build_filter(ndv=n) {ours:.2f} s; ndv=None {folded:.2f} s "
        f"(count, build, fold); approx_count_distinct then build {estimated:.2f} s"
    )
    ok &= report(
        "build_filter(ndv=n) / df.stat.bloomFilter(n)", ours / jvm, "<= 1", ours / jvm <= 1
    )
    report("build_filter(ndv=None): count + build + fold / df.stat.bloomFilter", folded / jvm)
    report("approx_count_distinct + build_filter / df.stat.bloomFilter", estimated / jvm)

    rng = np.random.default_rng(0)
    small = [int(v) * 0x9E3779B1 + 12345 for v in rng.integers(0, ROWS, SMALL_LIST)]
    bloom_filter = SplitBlockBloomFilter.from_ndv(SMALL_LIST, 0.01)
    bloom_filter.insert(small, "INT64")
    expected = df.filter(F.col("x").isin(small)).count()
    kept = df.filter(pbs.might_contain(bloom_filter, "x")).count()
    assert kept >= expected, (kept, expected)

    @F.arrow_udf("boolean")  # type: ignore[misc]
    def always(values: pa.Array) -> pa.Array:
        return pa.array(np.ones(len(values), dtype=bool))

    big = SplitBlockBloomFilter.from_ndv(1_000_000, 0.01)  # words from a scalar subquery
    big.insert(np.asarray(small + list(range(1_000_000 - SMALL_LIST)), np.int64))
    layout = SparkLayout.of(spark)

    probes = best_in_turns(
        {
            "isin": lambda: df.filter(F.col("x").isin(small)).count(),
            "probe": lambda: df.filter(pbs.might_contain(bloom_filter, "x")).count(),
            "big": lambda: df.filter(pbs.might_contain(big, "x")).count(),
            "udf": lambda: df.filter(
                spark_probe.arrow_probe(
                    spark.sparkContext.broadcast(bloom_filter), F.col("x"), layout
                )
            ).count(),
            "floor": lambda: df.filter(always("x")).count(),
        },
        REPEATS,
    )
    isin, probe, big_probe, udf, floor = (
        probes[k] for k in ("isin", "probe", "big", "udf", "floor")
    )
    print(
        f"\nprobe, {ROWS:,} rows against {SMALL_LIST} values ({kept - expected} false positives):"
    )
    print(
        f"  isin scan {isin:.2f} s; might_contain {probe:.2f} s ({big.num_bytes >> 20} MiB "
        f"filter {big_probe:.2f} s); the Arrow UDF {udf:.2f} s; do-nothing Arrow UDF {floor:.2f} s"
    )
    ok &= report("might_contain scan / isin scan", probe / isin, "<= 2", probe / isin <= 2)
    report(f"might_contain scan, {big.num_bytes >> 20} MiB filter / isin scan", big_probe / isin)
    report("Arrow UDF probe (INT96 timestamps, some decimals) / isin scan", udf / isin)
    report("do-nothing Arrow UDF scan / isin scan (any Python UDF's floor)", floor / isin)
    spark.stop()
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)

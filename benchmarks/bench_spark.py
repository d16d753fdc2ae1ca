"""parquet_bloom.spark against Spark's own JVM code, on cached DataFrames, in one run.

20 M distinct bigints (``--rows`` scales it down) on ``local[2]``, cached in turn as 2, 8, 32 and
200 partitions (``--partitions``); every timing is the best of a few runs of a Spark action,
the candidates in turns, so the cache scan is in both sides of each ratio.

- build: ``build_filter(df, "x", ndv=n)`` with the JVM accelerator's jar (docs/spark.md) against
  Spark's JVM ``df.stat.bloomFilter("x", n, 0.01)`` (Spark's own Bloom filter: one full-size filter
  per partition, tree-aggregated), at each partition count; shown too, the build without the jar
  (``jvm=False``, hashes inserted in Python workers). Targets: at most 1x at each partition count,
  and the ratio at the most partitions within 1.5x of the ratio at the fewest. Shown: the driver's
  peak memory during ``build_filter``, the most this process's resident set grew in any run
  (``VmHWM`` in ``/proc/self/status``, reset before each build through ``/proc/self/clear_refs``;
  after one small build of each kind, so that the driver's one-time allocations are not in it),
  against the filter's size: target at most 2x (the batches received, and the filter they are
  copied into). Also shown, at the fewest and the most partitions, the two ways of sizing without
  ``ndv``: counting rows, building at that size and folding down (what ``ndv=None`` does here), and
  ``approx_count_distinct`` first (what it does when filters sized for the rows would be too large
  to receive).
- probe (``--no-probe`` skips it; benchmarks/bench_spark_probe.py covers more types), on the
  rows cached as ``spark.range`` partitions them (2 here):
  ``df.filter(might_contain(f, "x")).count()`` against ``df.filter(col("x").isin(small))
  .count()``, with ``f`` the filter of the same small list; the Column is made inside the
  timing, as a user's query makes it. Also shown: a 2 MiB filter (its words reach the plan
  through a scalar subquery), ``might_contain(f, "x", arrow_udf=True)`` (the Arrow UDF
  fallback, in Python; by default every type is probed in the JVM), and a scalar Arrow UDF that
  does nothing but return True, the floor any Python UDF pays here.

Ratios, not seconds, are the figures: the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import numpy as np
import pyarrow as pa

os.environ["PYSPARK_PYTHON"] = sys.executable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from timing import best_in_turns, local_spark, report

from parquet_bloom import SplitBlockBloomFilter
from parquet_bloom import spark as pbs
from parquet_bloom.spark import _build as spark_build

ROWS = 20_000_000
PARTITIONS = (2, 8, 32, 200)
FPP = 0.01
SMALL_LIST = 100
REPEATS = 2
PROBE_REPEATS = 4
# The ratio at the most partitions may exceed the ratio at the fewest by this factor at most.
SPREAD = 1.5


def _resident_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


class PeakMemory:
    """The most this process's resident set grew during any of the calls it wraps (Linux)."""

    def __init__(self) -> None:
        self.peak_bytes = 0
        try:
            with open("/proc/self/clear_refs", "w") as clear_refs:
                clear_refs.write("5")  # resets VmHWM to the current resident set
            self.available = True
        except OSError:
            self.available = False

    def wrap(self, fn: Callable[[], object]) -> Callable[[], object]:
        def measured() -> object:
            if not self.available:
                return fn()
            with open("/proc/self/clear_refs", "w") as clear_refs:
                clear_refs.write("5")
            before = _resident_kib("VmRSS")
            result = fn()
            self.peak_bytes = max(self.peak_bytes, (_resident_kib("VmHWM") - before) * 1024)
            return result

        return measured


def main() -> bool:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=ROWS, help="distinct bigints (20 M)")
    parser.add_argument(
        "--partitions",
        type=lambda s: [int(p) for p in s.split(",")],
        default=list(PARTITIONS),
        help="comma-separated partition counts (2,8,32,200)",
    )
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each build (2)")
    parser.add_argument("--no-probe", action="store_true", help="time the builds only")
    args = parser.parse_args()
    spark = local_spark(jars=True)
    ok = build_benchmark(spark, args.rows, args.partitions, args.repeats)
    if not args.no_probe:
        ok &= probe_benchmark(spark, args.rows)
    spark.stop()
    return ok


def values(spark: SparkSession, rows: int) -> DataFrame:
    # Distinct, scrambled 64-bit values: a multiplication by an odd constant is a bijection.
    return spark.range(rows).select((F.col("id") * 0x9E3779B1 + 12345).alias("x"))


def build_benchmark(spark: SparkSession, rows: int, partitions: list[int], repeats: int) -> bool:
    num_bytes = SplitBlockBloomFilter.from_ndv(rows, FPP).num_bytes
    print(
        f"build, {rows:,} distinct bigints, {FPP:.0%}, a {num_bytes / 2**20:g} MiB filter, "
        f"best of {repeats}:"
    )
    print(
        f"  {'partitions':>10} {'ours':>8} {'JVM':>8} {'ratio':>7} {'driver peak':>15}"
        "   no jar   ndv=None (fold)   estimate + build"
    )
    ratios, peaks = {}, {}
    # One small build of each kind first: the driver's one-time allocations (modules, Arrow's
    # pools, py4j) are not the build's memory.
    for jvm in (True, False):
        pbs.build_filter(values(spark, 100_000), "x", FPP, ndv=100_000, jvm=jvm)
    for count in partitions:
        df = values(spark, rows).repartition(count).cache()
        assert df.count() == rows
        sizing = count in (min(partitions), max(partitions))
        times, peaks[count] = time_builds(df, rows, repeats, sizing)
        ratios[count] = times["ours"] / times["jvm"]
        peak = (
            "n/a"
            if peaks[count] is None
            else (f"{peaks[count] / 2**20:6.1f} MiB {peaks[count] / num_bytes:4.2f}x")
        )
        shown = (
            f"   {times['folded'] / times['jvm']:14.2f}x {times['estimated'] / times['jvm']:17.2f}x"
            if sizing
            else ""
        )
        print(
            f"  {count:>10} {times['ours']:7.2f}s {times['jvm']:7.2f}s {ratios[count]:6.2f}x "
            f"{peak:>15} {times['python'] / times['jvm']:7.2f}x{shown}",
            flush=True,
        )
        df.unpersist()
    ok = True
    for count, ratio in ratios.items():
        ok &= report(
            f"build_filter(ndv=n) / df.stat.bloomFilter(n), {count} partitions",
            ratio,
            "<= 1",
            ratio <= 1,
        )
    fewest, most = min(ratios), max(ratios)
    spread = ratios[most] / ratios[fewest]
    ok &= report(
        f"ratio at {most} partitions / ratio at {fewest}", spread, f"<= {SPREAD}", spread <= SPREAD
    )
    measured = [peak for peak in peaks.values() if peak is not None]
    if measured:  # the slices received, and the filter they are copied into
        peak = max(measured) / num_bytes
        ok &= report(
            "driver peak memory during build_filter / filter size", peak, "<= 2", peak <= 2
        )
    return ok


def time_builds(
    df: DataFrame, rows: int, repeats: int, sizing: bool
) -> tuple[dict[str, float], int | None]:
    """The best times of ours and the JVM's builds (and the sizing routes when ``sizing``),
    and the driver's peak memory growth during ours (None where it cannot be measured)."""
    jvm_stat = df._jdf.stat()  # no Python wrapper for bloomFilter in pyspark
    memory = PeakMemory()
    candidates: dict[str, Callable[[], object]] = {
        "jvm": lambda: jvm_stat.bloomFilter("x", rows, FPP).bitSize(),
        "ours": memory.wrap(lambda: pbs.build_filter(df, "x", FPP, ndv=rows, jvm=True)),
        "python": lambda: pbs.build_filter(df, "x", FPP, ndv=rows, jvm=False),
    }
    if sizing:
        candidates["folded"] = lambda: pbs.build_filter(df, "x", FPP)  # count, build, fold
        candidates["estimated"] = lambda: estimated_build(df)
    times = best_in_turns(candidates, repeats)
    return times, memory.peak_bytes if memory.available else None


def estimated_build(df: DataFrame) -> SplitBlockBloomFilter:
    """build_filter(ndv=None) as it runs when filters sized for the rows would be too large to
    receive: approx_count_distinct, then the build at that size."""
    saved = spark_build.MAX_FOLD_BYTES
    spark_build.MAX_FOLD_BYTES = 0
    try:
        return pbs.build_filter(df, "x", FPP)
    finally:
        spark_build.MAX_FOLD_BYTES = saved


def probe_benchmark(spark: SparkSession, rows: int) -> bool:
    df = values(spark, rows).cache()
    assert df.count() == rows
    rng = np.random.default_rng(0)
    small = [int(v) * 0x9E3779B1 + 12345 for v in rng.integers(0, rows, SMALL_LIST)]
    bloom_filter = SplitBlockBloomFilter.from_ndv(SMALL_LIST, FPP)
    bloom_filter.insert(small, "INT64")
    expected = df.filter(F.col("x").isin(small)).count()
    kept = df.filter(pbs.might_contain(bloom_filter, "x")).count()
    assert kept >= expected, (kept, expected)

    @F.arrow_udf("boolean")  # type: ignore[misc]
    def always(values: pa.Array) -> pa.Array:
        return pa.array(np.ones(len(values), dtype=bool))

    big = SplitBlockBloomFilter.from_ndv(1_000_000, FPP)  # words from a scalar subquery
    big.insert(np.asarray(small + list(range(1_000_000 - SMALL_LIST)), np.int64))
    handle = spark.sparkContext.broadcast(bloom_filter)
    forced = df.filter(pbs.might_contain(handle, "x", arrow_udf=True)).count()
    assert forced == kept, (forced, kept)

    probes = best_in_turns(
        {
            "isin": lambda: df.filter(F.col("x").isin(small)).count(),
            "probe": lambda: df.filter(pbs.might_contain(bloom_filter, "x")).count(),
            "big": lambda: df.filter(pbs.might_contain(big, "x")).count(),
            "udf": lambda: df.filter(pbs.might_contain(handle, "x", arrow_udf=True)).count(),
            "floor": lambda: df.filter(always("x")).count(),
        },
        PROBE_REPEATS,
    )
    isin, probe, big_probe, udf, floor = (
        probes[k] for k in ("isin", "probe", "big", "udf", "floor")
    )
    print(
        f"\nprobe, {rows:,} rows against {SMALL_LIST} values ({kept - expected} false positives):"
    )
    print(
        f"  isin scan {isin:.2f} s; might_contain {probe:.2f} s ({big.num_bytes >> 20} MiB "
        f"filter {big_probe:.2f} s); arrow_udf=True {udf:.2f} s; do-nothing Arrow UDF {floor:.2f} s"
    )
    ok = report("might_contain scan / isin scan", probe / isin, "<= 2", probe / isin <= 2)
    report(f"might_contain scan, {big.num_bytes >> 20} MiB filter / isin scan", big_probe / isin)
    report("might_contain(arrow_udf=True) scan / isin scan", udf / isin)
    report("do-nothing Arrow UDF scan / isin scan (any Python UDF's floor)", floor / isin)
    df.unpersist()
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)

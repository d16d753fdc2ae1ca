"""parquet_bloom.spark.might_contain against Spark's own ``isin``: scans of a cached DataFrame and
of the Parquet files Spark wrote from it, in one run.

20 M rows on ``local[2]``: random bigints (``xxhash64`` of the row number), strings (their hex form,
1 to 16 characters) and timestamps (the bigints shifted to within 2**54 microseconds of 1970: years
1400 to 2540), probed in the session's layout for timestamps, INT96 (Spark's default, in which it
writes the file: the JVM accelerator's jar hashes the 12 bytes in one Java method; without the jar,
shown too, Spark's expressions assemble them before hashing). For each type,
``df.filter(might_contain(f, c)).count()`` against ``df.filter(col(c).isin(small)).count()``, with
``f`` the filter of the same 100 values (1 %):

- on the DataFrame cached in memory: the rows cost almost nothing to read, so this is the
  predicates' own cost side by side;
- on the Parquet files (snappy, no filters in them), read again by each scan from the page
  cache: what a query over a dataset pays.

The values are in random order, so that min/max statistics (the cached batches', the row
groups') skip nothing: with sorted values ``isin`` would skip data by those statistics, which
neither a Bloom filter nor any other per-row predicate can. The Column is made inside the
timing, as a user's query makes it, so the ratio includes building and planning the probe. Each
figure is the best of a few runs, the candidates in turns.

Shown, not targeted: the INT96 probe through the Arrow UDF (``arrow_udf=True``), the path INT96
timestamps took before, and the count of the cached rows, which every cached scan includes.

Ratios, not seconds, are the figures: the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable

import numpy as np

os.environ["PYSPARK_PYTHON"] = sys.executable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from timing import best_in_turns, local_spark, report

from parquet_bloom import SplitBlockBloomFilter
from parquet_bloom import spark as pbs

SMALL_LIST = 100
TARGET = 1.5
COLUMNS = {"long": "int64", "string": "strings", "ts": "INT96 timestamps"}


def _isin(column: str, members: DataFrame) -> Column:
    """``column IN (the members' values)`` as literals, which Spark turns into a hash set."""
    if column == "ts":  # exact instants, whatever the Python side's time zone
        micros = [r[0] for r in members.select(F.unix_micros("ts")).collect()]
        return F.expr(f"ts IN ({', '.join(f'timestamp_micros({m})' for m in micros)})")
    return F.col(column).isin([r[0] for r in members.select(column).collect()])


def _candidates(
    sources: dict[str, DataFrame], members: DataFrame
) -> tuple[dict[str, Callable[[], object]], dict[str, int]]:
    """The scans to time, by name, and each probe's false positives (checked first)."""
    candidates: dict[str, Callable[[], object]] = {}
    false_positives = {}
    for column in COLUMNS:
        bloom_filter = pbs.build_filter(members, column, fpp=0.01, ndv=SMALL_LIST)
        isin = _isin(column, members)
        for source, df in sources.items():
            expected = df.filter(isin).count()
            kept = df.filter(pbs.might_contain(bloom_filter, column)).count()
            assert expected == SMALL_LIST and kept >= expected, (source, column, kept)
            false_positives[column] = kept - expected

            def isin_scan(df: DataFrame = df, isin: Column = isin) -> int:
                return df.filter(isin).count()

            def probe_scan(
                df: DataFrame = df,
                column: str = column,
                bloom_filter: SplitBlockBloomFilter = bloom_filter,
                arrow_udf: bool = False,
                jvm: bool = True,
            ) -> int:
                probe = pbs.might_contain(bloom_filter, column, arrow_udf=arrow_udf, jvm=jvm)
                return df.filter(probe).count()

            candidates[f"{source} isin {column}"] = isin_scan
            candidates[f"{source} probe {column}"] = probe_scan
            if column == "ts":
                candidates[f"{source} no-jar ts"] = lambda p=probe_scan: p(jvm=False)
            if column == "ts" and source == "cached":
                candidates["cached udf ts"] = lambda: probe_scan(arrow_udf=True)
    return candidates, false_positives


def main() -> bool:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    spark = local_spark({"spark.sql.parquet.outputTimestampType": "INT96"}, jars=True)
    x = F.xxhash64("id")  # random 64-bit values, distinct but for 1 in 10**5 pairs of runs
    df = spark.range(args.rows).select(
        "id",
        x.alias("long"),
        F.hex(x).alias("string"),
        F.timestamp_micros(F.shiftright(x, 9)).alias("ts"),
    )
    with tempfile.TemporaryDirectory(prefix="bench_spark_probe_") as tmp:
        path = os.path.join(tmp, "data")
        df.write.parquet(path, compression="snappy")
        cached = df.cache()
        assert cached.count() == args.rows
        ids = np.random.default_rng(0).choice(args.rows, SMALL_LIST, replace=False).tolist()
        members = cached.filter(F.col("id").isin(ids)).cache()
        assert members.count() == SMALL_LIST
        sources = {"cached": cached, "parquet": spark.read.parquet(path)}
        candidates, false_positives = _candidates(sources, members)
        candidates["cached count"] = cached.count
        print(
            f"might_contain scan / isin scan, {args.rows:,} rows, {SMALL_LIST} values, 1 %; false "
            f"positives: {', '.join(f'{c} {n:,}' for c, n in false_positives.items())}"
        )
        times = best_in_turns(candidates, args.repeats)
        print("  seconds: " + ", ".join(f"{name} {t:.2f}" for name, t in times.items()))
        ok = True
        for source in sources:
            for column, label in COLUMNS.items():
                ratio = times[f"{source} probe {column}"] / times[f"{source} isin {column}"]
                ok &= report(f"{source}, {label}", ratio, f"<= {TARGET}", ratio <= TARGET)
        for source in sources:
            report(
                f"{source}, INT96 timestamps without the jar (jvm=False)",
                times[f"{source} no-jar ts"] / times[f"{source} isin ts"],
            )
        report(
            "cached, INT96 timestamps: the Arrow UDF probe",
            times["cached udf ts"] / times["cached isin ts"],
        )
        report(
            "cached count / isin on int64 (the reading's share)",
            times["cached count"] / times["cached isin long"],
        )
    spark.stop()
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)

"""The data the Spark tests share: a table of every type Spark can store with a usable Bloom
filter, how Spark is asked to write it (see WRITES), and SQL-conf helpers."""

from __future__ import annotations

import contextlib
import decimal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

ROWS = 4_000
# Every column of the typed table; BOOLEAN aside, these are all the types Spark stores as
# something a Bloom filter can hold.
COLUMNS = [
    "long", "int", "short", "byte", "float", "double", "string", "binary", "date", "ts",
    "ts_ntz", "interval", "dec9", "dec18", "dec30",
]  # fmt: skip
TIMESTAMP_AND_DECIMALS = ["ts", "dec9", "dec18", "dec30"]


def typed_table(rows: int = ROWS, seed: int = 7) -> pa.Table:
    """Mostly distinct values of every type, with nulls, extremes, signed zeros, NaN, empty
    strings and timestamps before 1970 with sub-millisecond digits (where rounding to
    milliseconds must round down)."""
    rng = np.random.default_rng(seed)
    valid = rng.random(rows) > 0.05

    def with_nulls(arr: pa.Array) -> pa.Array:
        return pa.array(arr.to_pylist(), arr.type, mask=~valid)

    longs = rng.integers(-(2**63), 2**63 - 1, rows, dtype=np.int64, endpoint=True)
    longs[:2] = [-(2**63), 2**63 - 1]
    doubles = rng.normal(0, 1e6, rows)
    doubles[:5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
    micros = rng.integers(-(2**50), 2**50, rows)
    micros[:4] = [-1, -999, -1001, 1]
    strings = [f"v{int(x):x}" * int(x % 4) + ("é🙂" if x % 7 == 0 else "") for x in longs]
    unscaled = rng.integers(-(10**9) + 1, 10**9, rows)

    def decimals(precision: int, scale: int, factor: int) -> pa.Array:
        values = [decimal.Decimal(int(u) * factor).scaleb(-scale) for u in unscaled]
        return pa.array(values, pa.decimal128(precision, scale))

    return pa.table(
        {
            "id": pa.array(np.arange(rows), pa.int64()),
            "long": with_nulls(pa.array(longs)),
            "int": pa.array(longs >> 32, pa.int32()),
            "short": pa.array(longs >> 48, pa.int16()),
            "byte": pa.array(longs >> 56, pa.int8()),
            "float": pa.array(doubles.astype(np.float32)),
            "double": with_nulls(pa.array(doubles)),
            "string": with_nulls(pa.array(strings, pa.string())),
            "binary": pa.array([s.encode()[::-1] for s in strings], pa.binary()),
            "date": pa.array(rng.integers(-25_000, 30_000, rows), pa.int32()).cast(pa.date32()),
            "ts": with_nulls(pa.array(micros, pa.timestamp("us", tz="UTC"))),
            "ts_ntz": pa.array(micros // 7, pa.timestamp("us", tz="UTC")),  # cast to NTZ below
            "interval": pa.array(micros // 3, pa.duration("us")),
            "dec9": with_nulls(decimals(9, 2, 1)),
            "dec18": decimals(18, 4, 10**8 + 1),
            "dec30": decimals(30, 6, 10**20 + 3),
        }
    )


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Set SQL confs for the block, restoring the previous values after."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


# How Spark writes each test file: SQL confs (timestamp layout, legacy decimals), parquet-java
# options, whether one row group is wanted (for the build_filter comparisons) and which columns
# must end up with filters.
NDV_OPTIONS = {f"parquet.bloom.filter.expected.ndv#{c}": str(ROWS) for c in COLUMNS}
FPP_OPTIONS = {f"parquet.bloom.filter.fpp#{c}": "0.02" for c in COLUMNS}
WRITES: dict[str, dict[str, Any]] = {
    "int96_no_dictionary": {
        "conf": {"spark.sql.parquet.outputTimestampType": "INT96"},
        "options": {"parquet.enable.dictionary": "false", **NDV_OPTIONS},
        "one_row_group": True,
    },
    # Dictionary on with a small dictionary page: chunks start dictionary encoded and fall back
    # to PLAIN. parquet-java writes no filter for a chunk that stays all dictionary (PARQUET-2251),
    # which is the fate of the low-cardinality byte column.
    "micros_dictionary": {
        "conf": {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"},
        "options": {
            "parquet.enable.dictionary": "true",
            "parquet.dictionary.page.size": "2048",
            **NDV_OPTIONS,
            **FPP_OPTIONS,
        },
        "one_row_group": True,
    },
    "millis_legacy_decimals": {
        "conf": {
            "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
            "spark.sql.parquet.writeLegacyFormat": "true",
        },
        "options": {"parquet.enable.dictionary": "false", **NDV_OPTIONS},
        "one_row_group": True,
    },
    # No NDV: the adaptive filter picks among candidate sizes after seeing the chunk.
    "adaptive_row_groups": {
        "conf": {"spark.sql.parquet.outputTimestampType": "INT96"},
        "options": {
            "parquet.enable.dictionary": "false",
            "parquet.bloom.filter.adaptive.enabled": "true",
            "parquet.bloom.filter.max.bytes": "65536",
            "parquet.block.size": "32768",
        },
        "one_row_group": False,
    },
    # No NDV, not adaptive: every filter is parquet.bloom.filter.max.bytes.
    "fixed_size_row_groups": {
        "conf": {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"},
        "options": {"parquet.bloom.filter.max.bytes": "8192", "parquet.block.size": "32768"},
        "one_row_group": False,
    },
}


def spark_write(
    df: DataFrame, path: Path, conf: dict[str, str], options: dict[str, str], filters: bool = True
) -> list[Path]:
    writer = df.coalesce(1).write.mode("overwrite")
    for key, value in options.items():
        writer = writer.option(key, value)
    if filters:
        for column in COLUMNS:
            writer = writer.option(f"parquet.bloom.filter.enabled#{column}", "true")
    with session_conf(df.sparkSession, conf):
        writer.parquet(str(path))
    return sorted(path.glob("*.parquet"))

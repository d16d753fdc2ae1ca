"""might_contain in the JVM for every layout Spark writes: the hash Spark's expressions compute
(parquet_bloom.spark._types.sql_hash) equals the Python one (arrow_hashes) row for row, over
extreme values; the probe's answers are those worked out in Python, and the forced Arrow UDF's;
the hashes are those of the filters Spark itself writes to Parquet files (old dates and
timestamps rebased included); and no plan of a probe holds a Python UDF.

Each layout is a session setting (spark.sql.parquet.outputTimestampType, writeLegacyFormat,
the rebase modes); one small table, built once, holds every supported type at its extremes.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

import parquet_bloom as pb
from parquet_bloom._sbbf import SplitBlockBloomFilter
from parquet_bloom.spark import _jvm, might_contain
from parquet_bloom.spark._functions import create_sql_functions
from parquet_bloom.spark._types import SparkLayout, arrow_hashes, sql_hash
from tests.spark.data import session_conf

pytestmark = pytest.mark.spark

ROWS = 240
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
MICROS_PER_DAY = 86_400_000_000
JULIAN_EPOCH_MICROS = 2440588 * MICROS_PER_DAY  # micros from the Julian day 0 to 1970
# Microseconds (TimestampType, TimestampNTZType) at the edges of each layout's arithmetic:
# Long's ends; around 1970; before the Gregorian calendar (1582-10-15) and before the Julian
# day 0 (4713 BC, where Spark's INT96 nanoseconds turn negative); past 2262 (where INT96 as
# nanoseconds would overflow a long); the year 9999; where micros + Julian epoch wraps.
EDGE_MICROS = [
    I64_MIN, I64_MAX, 0, -1, 1, -999, -1000, -1001, 999, 1001,
    -12219292800000001, -62135596800000000, -JULIAN_EPOCH_MICROS, -JULIAN_EPOCH_MICROS - 1,
    -JULIAN_EPOCH_MICROS + 1, -JULIAN_EPOCH_MICROS - MICROS_PER_DAY - 7, 9_300_000_000_000_000,
    253402300799999999, I64_MAX - JULIAN_EPOCH_MICROS, I64_MAX - JULIAN_EPOCH_MICROS + 1,
]  # fmt: skip
EDGE_DAYS = [-(2**31), 2**31 - 1, 0, -1, -719162, 2932896, -141428, -141427, 106751]
# Unscaled values around a long's and a 64-bit word's ends, where the FIXED_LEN_BYTE_ARRAY
# bytes come from two longs.
WIDE_UNSCALED = [2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1, 2**64, 2**64 + 1]
DECIMALS = {  # column: (precision, scale)
    "dec1": (1, 0), "dec9": (9, 2), "dec9s9": (9, 9), "dec10": (10, 0), "dec18": (18, 4),
    "dec19": (19, 0), "dec30": (30, 6), "dec38": (38, 0), "dec38s38": (38, 38),
}  # fmt: skip
COLLATIONS = {"lcase": "UTF8_LCASE", "unicode_ci": "UNICODE_CI", "utf8_binary": "UTF8_BINARY"}
LAYOUTS = {
    "int96": {"spark.sql.parquet.outputTimestampType": "INT96"},
    "millis_legacy_decimals": {
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
        "spark.sql.parquet.writeLegacyFormat": "true",
    },
    "micros": {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"},
}
PYTHON_NODES = ("ArrowEvalPython", "BatchEvalPython", "PythonUDF", "pythonUDF", "MapInArrow")


def _edges_then_random(edges: list[Any], draw: Any, rng: np.random.Generator) -> list[Any]:
    return [*edges, *(draw(rng) for _ in range(ROWS - len(edges)))]


def _decimals(precision: int, scale: int, rng: np.random.Generator) -> pa.Array:
    top = 10**precision - 1
    edges = [0, 1, -1, top, -top, top // 2, -(top // 2) - 1]
    edges += [s * u for u in WIDE_UNSCALED if u <= top for s in (1, -1)]

    def draw(rng: np.random.Generator) -> int:
        digits = int(rng.integers(1, precision + 1))  # every length of digits, both signs
        return (
            int(rng.integers(0, 10 ** min(digits, 18)))
            * 10 ** max(digits - 18, 0)
            * (1 if rng.random() < 0.5 else -1)
        )

    unscaled = _edges_then_random(edges, draw, rng)
    values = [decimal.Decimal(f"{u}e-{scale}") for u in unscaled]  # exact, at any precision
    return pa.array(values, pa.decimal128(precision, scale))


def layout_table(seed: int = 11) -> pa.Table:
    """Every supported type: edge values in the first rows, random ones after, and nulls
    (never in the edge rows)."""
    rng = np.random.default_rng(seed)

    def ints(bits: int) -> list[int]:
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        edges = [lo, hi, 0, -1, 1, lo + 1, hi - 1]
        return _edges_then_random(edges, lambda r: int(r.integers(lo, hi, endpoint=True)), rng)

    special = [np.nan, 0.0, -0.0, np.inf, -np.inf, 1.5, -1.5]
    floats = np.array(
        _edges_then_random([*special, 3.4028235e38, 1e-45], lambda r: r.normal(), rng), np.float32
    )
    doubles = np.array(
        _edges_then_random([*special, 1.7976931348623157e308, 5e-324], lambda r: r.normal(), rng)
    )
    strings = _edges_then_random(
        ["", "é🙂", "x" * 40, "A", "a", "ß", "SS"], lambda r: f"s{int(r.integers(1 << 40)):x}", rng
    )
    columns = {
        "id": pa.array(np.arange(ROWS), pa.int64()),
        "byte": pa.array(ints(8), pa.int8()),
        "short": pa.array(ints(16), pa.int16()),
        "int": pa.array(ints(32), pa.int32()),
        "long": pa.array(ints(64), pa.int64()),
        "float": pa.array(floats),
        "double": pa.array(doubles),
        "string": pa.array(strings, pa.string()),
        "binary": pa.array([s.encode()[::-1] + b"\x00" * (len(s) % 3) for s in strings]),
        "date": pa.array(
            _edges_then_random(EDGE_DAYS, lambda r: int(r.integers(-800_000, 3_000_000)), rng),
            pa.int32(),
        ).cast(pa.date32()),
        "ts": pa.array(
            _edges_then_random(EDGE_MICROS, lambda r: int(r.integers(-(2**62), 2**62)), rng),
            pa.int64(),
        ).cast(pa.timestamp("us", tz="UTC")),
        "interval": pa.array(
            _edges_then_random(
                [I64_MIN + 1, I64_MAX, 0, -1, 1], lambda r: int(r.normal() * 1e12), rng
            ),
            pa.int64(),
        ).cast(pa.duration("us")),
        **{c: _decimals(p, s, rng) for c, (p, s) in DECIMALS.items()},
    }
    valid = (np.arange(ROWS) < 30) | (rng.random(ROWS) > 0.1)
    nulls = pa.array(valid)
    return pa.table(
        {
            name: column
            if name == "id"
            else pc.if_else(nulls, column, pa.scalar(None, column.type))
            for name, column in columns.items()
        }
    )


def _spark_columns(df: DataFrame) -> DataFrame:
    """The Spark-only types: TimestampNTZType from the UTC micros, and collated strings."""
    return df.select(
        "*",
        F.col("ts").cast("timestamp_ntz").alias("ts_ntz"),
        *[F.collate("string", name).alias(column) for column, name in COLLATIONS.items()],
    )


@pytest.fixture(scope="module")
def layout_df(spark: SparkSession) -> Iterator[DataFrame]:
    with session_conf(spark, {"spark.sql.session.timeZone": "UTC"}):
        df = _spark_columns(spark.createDataFrame(layout_table())).cache()
        assert df.count() == ROWS
        yield df
    df.unpersist()


COLUMNS = [
    "byte", "short", "int", "long", "float", "double", "string", "binary", "date", "ts",
    "ts_ntz", "interval", *DECIMALS, *COLLATIONS,
]  # fmt: skip


def python_hashes(
    arrow: pa.Table, column: str, layout: SparkLayout, *, stored: bool = False
) -> list[int | None]:
    """The Python side's hash of each row (None for nulls), as signed longs. Spark's xxhash64
    hashes -0.0 as 0.0 (the probe looks both zeros up), so the zeros here are +0.0 unless
    ``stored``, the hashes of the bytes a file holds."""
    values = arrow.column(column).combine_chunks()
    if pa.types.is_floating(values.type) and not stored:
        values = pc.if_else(pc.equal(values, 0), pa.scalar(0.0, values.type), values)
    hashes = iter(arrow_hashes(values, layout).view(np.int64).tolist())
    return [next(hashes) if valid else None for valid in values.is_valid().to_pylist()]


def jvm_hash(column: str, layout: SparkLayout, accelerator: Any) -> Column:
    values = F.col(column)
    if column in COLLATIONS:  # the bytes a collated string is stored as
        values = F.collate(values, "UTF8_BINARY")
    return sql_hash(values, layout, accelerator)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_spark_expressions_hash_as_python_does(layout_df: DataFrame, name: str, jvm: bool) -> None:
    """Row for row, every type, every edge value: the same 64-bit hash in the JVM as in
    Python (with the accelerator's INT96 hash, and without), which the Spark-written files below
    check against parquet-java's."""
    spark = layout_df.sparkSession
    with session_conf(spark, LAYOUTS[name]):
        layout = SparkLayout.of(spark)
        create_sql_functions(spark)
        accelerator = _jvm.accelerator(spark, jvm)
        hashes = [jvm_hash(c, layout, accelerator).alias(c) for c in COLUMNS]
        jvm_hashes = layout_df.select(*hashes).toArrow()
    arrow = layout_df.toArrow()
    for column in COLUMNS:
        expected = python_hashes(arrow, column, layout)
        got = [
            h if e is not None else None
            for h, e in zip(jvm_hashes.column(column).to_pylist(), expected, strict=True)
        ]  # a null's is not the hash of anything
        assert got == expected, column


def _even_rows_filter(hashes: dict[str, list[int | None]], num_bytes: int) -> SplitBlockBloomFilter:
    """A filter of the values of every column's even rows (the table's ids are its rows)."""
    stored = [h for c in COLUMNS for h in hashes[c][::2] if h is not None]
    bloom_filter = SplitBlockBloomFilter(num_bytes)
    bloom_filter.insert_hashes(np.array(stored, np.int64).view(np.uint64))
    return bloom_filter


def python_answers(
    arrow: pa.Table, column: str, hashes: list[int | None], bloom_filter: SplitBlockBloomFilter
) -> list[bool]:
    """might_contain's answers worked out in Python: nulls no, strings compared by a collation
    yes, NaN yes and a zero as either zero (Spark's =), otherwise the filter's lookup."""
    found = bloom_filter.find_hashes(np.array([h or 0 for h in hashes], np.int64).view(np.uint64))
    answers = [bool(f) and h is not None for f, h in zip(found, hashes, strict=True)]
    if column in ("lcase", "unicode_ci"):
        return [h is not None for h in hashes]
    if column in ("float", "double"):
        zeros = pb.hash_values(np.array([0.0, -0.0]), "FLOAT" if column == "float" else "DOUBLE")
        zero = bool(bloom_filter.find_hashes(zeros).any())
        for i, value in enumerate(arrow.column(column).to_pylist()):
            if value is not None and value != value:
                answers[i] = True
            elif value == 0:
                answers[i] = zero
    return answers


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_jvm_probe_answers_as_python_does(layout_df: DataFrame, name: str, jvm: bool) -> None:
    """might_contain in the JVM gives, row for row and type by type, the answer worked out in
    Python from the same filter: false positives alike."""
    spark = layout_df.sparkSession
    arrow = layout_df.toArrow()
    with session_conf(spark, LAYOUTS[name]):
        layout = SparkLayout.of(spark)
        hashes = {c: python_hashes(arrow, c, layout) for c in COLUMNS}
        bloom_filter = _even_rows_filter(hashes, 4096)
        got = _answers(
            layout_df, [might_contain(bloom_filter, c, jvm=jvm).alias(c) for c in COLUMNS]
        )
    for column in COLUMNS:
        expected = python_answers(arrow, column, hashes[column], bloom_filter)
        assert got[column] == expected, column
        stored = [
            e for e, h in zip(expected[::2], hashes[column][::2], strict=True) if h is not None
        ]
        assert all(stored), column
        if column not in ("byte", "dec1", "lcase", "unicode_ci"):  # (few values; collations)
            assert sum(expected[1::2]) < len(expected) // 4, column  # some are not there


def _answers(df: DataFrame, probes: list[Column]) -> dict[str, list[bool]]:
    """The probes' answers, in row order, 9 probes a query: a plan of more outgrows the 64 KiB
    of one Java method, and Spark falls back from generated code with a long warning."""
    answers: dict[str, list[bool]] = {}
    for i in range(0, len(probes), 9):
        table = df.select(*probes[i : i + 9]).toArrow()  # in the table's order
        answers.update({c: table.column(c).to_pylist() for c in table.column_names})
    return answers


def test_forced_arrow_udf_answers_as_the_jvm(layout_df: DataFrame) -> None:
    """arrow_udf=True probes in Python, and gives the JVM's answers for every type."""
    spark = layout_df.sparkSession
    arrow = layout_df.toArrow()
    with session_conf(spark, LAYOUTS["int96"]):
        layout = SparkLayout.of(spark)
        hashes = {c: python_hashes(arrow, c, layout) for c in COLUMNS}
        bloom_filter = _even_rows_filter(hashes, 4096)
        handle = spark.sparkContext.broadcast(bloom_filter)
        query = layout_df.select(
            *[might_contain(handle, c, arrow_udf=True).alias(c) for c in COLUMNS]
        )
        assert "ArrowEvalPython" in uses_python(query)
        udf = _answers(
            layout_df, [might_contain(handle, c, arrow_udf=True).alias(c) for c in COLUMNS]
        )
        jvm = _answers(layout_df, [might_contain(bloom_filter, c).alias(c) for c in COLUMNS])
    assert udf == jvm


def _written_filters(
    df: DataFrame, path: Path, conf: dict[str, str]
) -> dict[str, SplitBlockBloomFilter]:
    writer = df.coalesce(1).write.mode("overwrite").option("parquet.enable.dictionary", "false")
    for column in COLUMNS:
        writer = writer.option(f"parquet.bloom.filter.enabled#{column}", "true")
        writer = writer.option(f"parquet.bloom.filter.expected.ndv#{column}", str(ROWS))
    with session_conf(df.sparkSession, conf):
        writer.parquet(str(path))
    (file,) = path.glob("*.parquet")
    with pb.BloomFilterReader(file) as reader:
        filters = {column: f for (_, column), f in reader.filters().items()}
    assert set(filters) == set(COLUMNS)
    return filters


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_spark_written_filters_hold_exactly_these_hashes(
    layout_df: DataFrame, tmp_path: Path, name: str
) -> None:
    """Spark writes the table in the layout; each column's filter (parquet-java's, over the
    bytes Spark stored) equals, byte for byte, the filter of the hashes computed here (the
    JVM's, above, being the same), and might_contain with it keeps every non-null row."""
    spark = layout_df.sparkSession
    filters = _written_filters(layout_df, tmp_path / name, LAYOUTS[name])
    arrow = layout_df.toArrow()
    with session_conf(spark, LAYOUTS[name]):
        layout = SparkLayout.of(spark)
        kept = layout_df.select(
            *[F.min(might_contain(filters[c], c) == F.col(c).isNotNull()).alias(c) for c in COLUMNS]
        ).first()
    assert kept is not None and kept.asDict() == dict.fromkeys(COLUMNS, True)
    for column, written in filters.items():
        hashes = [h for h in python_hashes(arrow, column, layout, stored=True) if h is not None]
        rebuilt = SplitBlockBloomFilter(written.num_bytes)
        rebuilt.insert_hashes(np.array(hashes, np.int64).view(np.uint64))
        assert rebuilt.to_bytes() == written.to_bytes(), column


def uses_python(df: DataFrame) -> list[str]:
    plan = df._jdf.queryExecution().executedPlan().toString()
    return [node for node in PYTHON_NODES if node in plan]


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_no_python_in_the_plan_of_any_layout(layout_df: DataFrame, name: str, jvm: bool) -> None:
    """For every supported type in every layout, the executed plan of a probe is Spark's
    alone (the forced fallback's plan shows the check sees a Python UDF: test above)."""
    spark = layout_df.sparkSession
    bloom_filter = SplitBlockBloomFilter(64)
    with session_conf(spark, LAYOUTS[name]):
        for column in COLUMNS:
            query = layout_df.filter(might_contain(bloom_filter, column, jvm=jvm))
            assert uses_python(query) == [], (name, column)


REBASED = {  # LEGACY rebase of both kinds, in a time zone whose old offsets are not whole hours
    "spark.sql.parquet.int96RebaseModeInWrite": "LEGACY",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "LEGACY",
    "spark.sql.session.timeZone": "America/Los_Angeles",
}


@pytest.mark.parametrize("timestamp_type", ["INT96", "TIMESTAMP_MICROS"])
def test_legacy_rebased_values_are_never_excluded(
    spark: SparkSession, tmp_path: Path, timestamp_type: str
) -> None:
    """With LEGACY rebase modes Spark writes dates before 1582-10-15 and timestamps before
    1900 shifted to the Julian calendar, so their stored bytes are not those of the value:
    might_contain keeps them (as it must, the CORRECTED probe drops some), and finds the rest
    by their bytes."""
    conf = {**REBASED, "spark.sql.parquet.outputTimestampType": timestamp_type}
    days = [-500_000, -200_000, -141_428, -141_427, 0, 10_957, None]
    micros = [
        -30_000_000_000_000_000, -12_219_292_800_000_001, -4_000_000_000_000_000,
        -2_208_988_800_000_001, -2_208_988_800_000_000, 0, 1_600_000_000_123_456,
    ]  # fmt: skip
    table = pa.table(
        {
            "date": pa.array(days, pa.int32()).cast(pa.date32()),
            "ts": pa.array(micros, pa.timestamp("us", tz="UTC")),
        }
    )
    df = spark.createDataFrame(table)
    writer = df.coalesce(1).write.option("parquet.enable.dictionary", "false")
    for column in ("date", "ts"):
        writer = writer.option(f"parquet.bloom.filter.enabled#{column}", "true")
    with session_conf(spark, conf):
        writer.parquet(str(tmp_path / "rebased"))
    (file,) = (tmp_path / "rebased").glob("*.parquet")
    with pb.BloomFilterReader(file) as reader:
        filters = {column: f for (_, column), f in reader.filters().items()}
    with session_conf(spark, conf):
        probes = [
            might_contain(filters[c], c, arrow_udf=udf).alias(f"{c}_{udf}")
            for c in ("date", "ts")
            for udf in (False, True)
        ]
        legacy = df.select(*probes).collect()
    with session_conf(spark, {**conf, **dict.fromkeys(list(REBASED)[:2], "CORRECTED")}):
        corrected = df.select(*[might_contain(filters[c], c).alias(c) for c in ("date", "ts")])
        corrected_rows = corrected.collect()
    assert [tuple(r) for r in legacy] == [(d is not None,) * 2 + (True, True) for d in days]
    assert not all(r.date for r in corrected_rows[:3]), "Spark did not rebase old dates"
    assert not all(r.ts for r in corrected_rows[:4]), "Spark did not rebase old timestamps"
    assert all(r.date for r in corrected_rows[3:6]) and all(r.ts for r in corrected_rows[4:])

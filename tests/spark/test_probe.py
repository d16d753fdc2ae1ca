"""parquet_bloom.spark._probe against a real local Spark: might_contain never drops a value the
filter holds (Spark's own filters included), agrees with ``isin`` and Spark's equality (floats,
collations), answers in Spark's expressions as the Arrow UDF does, and semi_join_prefilter keeps
the join. Every layout, at its extremes: test_probe_layouts.py.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import parquet_bloom as pb
from parquet_bloom import spark as pbs
from parquet_bloom._sbbf import SplitBlockBloomFilter
from parquet_bloom.spark import _probe as probe
from parquet_bloom.spark._types import SparkLayout
from tests.spark.data import COLUMNS, ROWS, WRITES, session_conf

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("name", ["int96_no_dictionary", "millis_legacy_decimals"])
def test_might_contain_keeps_every_value_spark_wrote(
    typed_df: DataFrame, written: dict[str, Path], name: str
) -> None:
    """Probing Spark's column with the filter Spark wrote for it never says no."""
    with pb.BloomFilterReader(written[name]) as reader:
        filters = {column: f for (_, column), f in reader.filters().items()}
    assert set(filters) == set(COLUMNS)
    with session_conf(typed_df.sparkSession, WRITES[name]["conf"]):
        checks = [
            F.min(pbs.might_contain(f, c) == F.col(c).isNotNull()).alias(c)
            for c, f in filters.items()
        ]
    (row,) = typed_df.select(*checks).collect()
    assert row.asDict() == dict.fromkeys(filters, True)


@pytest.mark.parametrize("column", ["long", "string", "dec30", "ts", "double"])
def test_might_contain_agrees_with_isin(typed_df: DataFrame, column: str) -> None:
    present_rows = typed_df.filter(F.col("id") % 4 == 0)
    bloom_filter = pbs.build_filter(present_rows, column, fpp=0.01, ndv=ROWS // 4)
    # Spark's own idea of "the value is among the present ones": a semi join (= semantics).
    members = typed_df.join(present_rows.select(column).distinct(), column, "left_semi")
    member_ids = {r.id for r in members.select("id").collect()}
    values = [r[0] for r in present_rows.select(column).dropna().distinct().collect()]
    rows = typed_df.select(
        "id",
        F.col(column).isNull().alias("null"),
        pbs.might_contain(bloom_filter, column).alias("hit"),
        F.col(column).isin(values).alias("isin"),
    ).collect()
    assert len(member_ids) > ROWS // 5
    assert all(r.hit for r in rows if r.id in member_ids), (
        "a row whose value is present was dropped"
    )
    assert not any(r.hit for r in rows if r.null), "a null matched"
    absent = [r for r in rows if r.id not in member_ids and not r.null]
    false_hits = sum(r.hit for r in absent)
    assert false_hits <= 0.03 * len(absent) + 3, (false_hits, len(absent))
    if column != "double":  # isin misses NaN
        assert {r.id for r in rows if r.isin} == member_ids
        assert {r.id for r in rows if r.isin and r.hit} == member_ids


def test_might_contain_follows_spark_equality_for_doubles(spark: SparkSession) -> None:
    bloom_filter = SplitBlockBloomFilter(64)
    bloom_filter.insert([0.0, 2.5], "DOUBLE")
    df = spark.createDataFrame(
        [(0.0,), (-0.0,), (2.5,), (-2.5,), (float("nan"),), (None,)], "x double"
    )
    hits = [r.hit for r in df.select(pbs.might_contain(bloom_filter, "x").alias("hit")).collect()]
    assert hits[:3] == [True, True, True]
    assert hits[4] is True  # NaN = NaN in Spark: never excluded
    assert hits[5] is False  # null
    floats = SplitBlockBloomFilter(64)
    floats.insert(np.array([-0.0], np.float32))
    df = spark.createDataFrame([(0.0,), (-0.0,)], "x float")
    assert [r[0] for r in df.select(pbs.might_contain(floats, "x")).collect()] == [True, True]


def test_might_contain_takes_a_broadcast(spark: SparkSession) -> None:
    bloom_filter = SplitBlockBloomFilter(256)
    bloom_filter.insert(list(range(0, 1000, 10)), "INT64")
    handle = spark.sparkContext.broadcast(bloom_filter)
    df = spark.range(1000)
    kept = {r.id for r in df.filter(pbs.might_contain(handle, "id")).collect()}
    assert set(range(0, 1000, 10)) <= kept
    assert len(kept) < 200
    ints = df.select(F.col("id").cast("int").alias("id"))
    int_filter = SplitBlockBloomFilter(256)
    int_filter.insert(list(range(0, 1000, 10)), "INT32")
    assert set(range(0, 1000, 10)) <= {
        r.id for r in ints.filter(pbs.might_contain(int_filter, "id")).collect()
    }


def uses_python(df: DataFrame) -> bool:
    plan = df._jdf.queryExecution().executedPlan().toString()
    return any(node in plan for node in ("ArrowEvalPython", "BatchEvalPython", "PythonUDF"))


def test_seed_zero_prefix_makes_spark_hash_with_seed_zero() -> None:
    prefix = probe.SEED_ZERO_PREFIX.to_bytes(8, "little", signed=True)
    assert xxhash.xxh64_intdigest(prefix, seed=probe.SPARK_HASH_SEED) == 0


@pytest.mark.parametrize(
    ("num_bytes", "columns"),
    [(512, COLUMNS), (32768, ["long", "string", "double", "dec18"])],
    ids=["literal", "subquery"],  # where the words come from: see _LITERAL_MAX_BYTES
)
def test_might_contain_in_spark_answers_as_the_arrow_udf(
    typed_df: DataFrame, num_bytes: int, columns: list[str]
) -> None:
    """Spark's expressions give, row for row, the Arrow UDF's answers (the UDF hashes with the
    numpy core, checked against the files Spark writes), for every type and both word sources;
    the types Spark cannot hash as Parquet stores them stay with the UDF."""
    spark = typed_df.sparkSession
    present = typed_df.filter(F.col("id") % 3 == 0)
    with session_conf(spark, WRITES["micros_dictionary"]["conf"]):
        filters = pbs.build_filters(present, columns, num_bytes=dict.fromkeys(columns, num_bytes))
        layout = SparkLayout.of(spark)
        handles = {c: spark.sparkContext.broadcast(f) for c, f in filters.items()}
        rows = typed_df.select(
            *[pbs.might_contain(h, c).alias(f"hit_{c}") for c, h in handles.items()],
            *[probe.arrow_probe(h, F.col(c), layout).alias(f"udf_{c}") for c, h in handles.items()],
        ).collect()
    for column in columns:
        hits = [r[f"hit_{column}"] for r in rows]
        assert hits == [r[f"udf_{column}"] for r in rows], column
        assert sum(hits) >= ROWS // 3 - ROWS // 10, column
        assert sum(hits) < ROWS or column == "byte", column  # 256 values, all present


def test_might_contain_follows_collations(spark: SparkSession) -> None:
    """The filter holds a collated string's bytes (Spark stores the value's own UTF-8), but the
    column's = is the collation's: a string equal to a stored one under it may differ in bytes,
    so none is ruled out. Looking the bytes up takes F.collate(column, "UTF8_BINARY")."""
    bloom_filter = SplitBlockBloomFilter(256)
    bloom_filter.insert(["abc", "é"], "BYTE_ARRAY")
    df = spark.createDataFrame([("abc",), ("ABC",), ("e\u0301",), ("zzz",), (None,)], "s string")
    for collation in ("UTF8_LCASE", "UNICODE", "UNICODE_CI", "UTF8_BINARY_RTRIM"):
        collated = df.select(F.collate("s", collation).alias("s"))
        hits = collated.select(
            pbs.might_contain(bloom_filter, "s").alias("hit"),
            pbs.might_contain(bloom_filter, F.collate("s", "UTF8_BINARY")).alias("bytes"),
        ).collect()
        assert [r.hit for r in hits] == [True, True, True, True, False], collation
        assert [r.bytes for r in hits] == [True, False, False, False, False], collation
    binary = df.select(F.collate("s", "UTF8_BINARY").alias("s"))
    assert [r[0] for r in binary.select(pbs.might_contain(bloom_filter, "s")).collect()] == [
        True, False, False, False, False,
    ]  # fmt: skip


def test_might_contain_refuses_types_without_filters(spark: SparkSession) -> None:
    df = spark.createDataFrame([(True,), (None,)], "b boolean")
    query = df.select(pbs.might_contain(SplitBlockBloomFilter(32), "b"))
    with pytest.raises(Exception, match="a column of type boolean has no Parquet Bloom filter"):
        query.collect()


def test_might_contain_in_spark_for_any_nan_and_zero(spark: SparkSession) -> None:
    """Every NaN bit pattern and both zeros, as Spark's = sees them, in Spark's expressions."""
    other_nan = np.array([0x7FF0000000000001, 0xFFF8000000000000], np.uint64).view(np.float64)
    doubles = pa.array([1.5, 0.0, -0.0, np.nan, *other_nan, -1.5, None], pa.float64())
    df = spark.createDataFrame(pa.table({"x": doubles, "y": doubles.cast(pa.float32())}))
    for column, physical_type, dtype in (("x", "DOUBLE", np.float64), ("y", "FLOAT", np.float32)):
        for stored in ([1.5], [1.5, -0.0], [1.5, 0.0]):
            bloom_filter = SplitBlockBloomFilter(32)
            bloom_filter.insert(np.array(stored, dtype), physical_type)
            query = df.select(pbs.might_contain(bloom_filter, column).alias("hit"))
            assert not uses_python(query)
            zero = len(stored) > 1
            expected = [True, zero, zero, True, True, True, False, False]
            assert [r.hit for r in query.collect()] == expected, (column, stored)


def test_might_contain_bad_arguments(spark: SparkSession) -> None:
    with pytest.raises(TypeError, match="SplitBlockBloomFilter"):
        pbs.might_contain(b"\x00" * 32, "id")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="name or a Column"):
        pbs.might_contain(SplitBlockBloomFilter(32), 3)  # type: ignore[arg-type]


# -- semi joins ---------------------------------------------------------------------------------


def test_semi_join_prefilter_keeps_the_join(spark: SparkSession) -> None:
    left = spark.range(20_000).select(
        F.col("id").alias("k"), (F.col("id") % 7).alias("payload"),
        F.when(F.col("id") % 1000 == 0, None).otherwise(F.col("id") % 50).cast("int").alias("k2"),
    )  # fmt: skip
    right = (
        spark.range(600)
        .select(
            (F.col("id") * 37 + 5).alias("k"),
            # matches the left's k2 (k % 50) for two rows in three
            F.when(F.col("id") % 3 == 0, 99).otherwise((F.col("id") * 37 + 5) % 50).alias("k2"),
            F.col("id").alias("r"),
        )
        .union(spark.range(5).select(F.lit(None).cast("long"), F.lit(1).cast("long"), F.col("id")))
    )
    right = right.cache()
    pruned = pbs.semi_join_prefilter(left, right, "k", ndv=605).cache()
    assert pruned.count() < 600 + 0.03 * 20_000
    assert sorted(pruned.join(right, "k").collect()) == sorted(left.join(right, "k").collect())
    # two keys (one scan of the right side), and an int key on the left against a long one
    pruned = pbs.semi_join_prefilter(left, right, ["k", "k2"], fpp=0.001)
    joined = sorted(pruned.join(right, ["k", "k2"]).collect())
    assert joined == sorted(left.join(right, ["k", "k2"]).collect())
    assert len(joined) > 0


def test_semi_join_prefilter_refuses_mixed_key_types(spark: SparkSession) -> None:
    left = spark.range(10).select(F.col("id").cast("string").alias("k"))
    right = spark.range(10).select(F.col("id").alias("k"))
    with pytest.raises(TypeError, match="cast both"):
        pbs.semi_join_prefilter(left, right, "k")
    with pytest.raises(ValueError, match="no column 'x'"):
        pbs.semi_join_prefilter(left, right, "x")
    with pytest.raises(TypeError, match="non-empty"):
        pbs.semi_join_prefilter(left, right, [])


# -- filters as broadcast variables and inside UDFs ------------------------------------------------


# pyspark 4.3 warns about pandas 3 when a Python UDF is made, though this one never uses pandas.
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
def test_filters_pickle_as_their_bitset(spark: SparkSession) -> None:
    bloom_filter = SplitBlockBloomFilter.from_ndv(50_000, 0.01)
    bloom_filter.insert(np.arange(50_000, dtype=np.int64) * 3)
    data = pickle.dumps(bloom_filter)
    assert bloom_filter.num_bytes <= len(data) <= bloom_filter.num_bytes + 128
    assert pickle.loads(data) == bloom_filter

    handle = spark.sparkContext.broadcast(bloom_filter)

    # Plain row-at-a-time UDFs, as a user writes them (no type hints: pyspark would take
    # hints as a request for a vectorised UDF).
    @F.udf("boolean")
    def in_broadcast(x):  # type: ignore[no-untyped-def]
        import parquet_bloom  # noqa: F401  # what a user's UDF does on an executor

        return bool(handle.value.might_contain(x, "INT64"))

    @F.udf("boolean")
    def in_closure(x):  # type: ignore[no-untyped-def]
        return bool(bloom_filter.might_contain(x, "INT64"))

    df = spark.range(0, 3000).select(
        in_broadcast("id").alias("a"), in_closure("id").alias("b"),
        pbs.might_contain(bloom_filter, "id").alias("c"), (F.col("id") % 3 == 0).alias("member"),
    )  # fmt: skip
    rows = df.collect()
    assert all(r.a == r.b == r.c for r in rows)
    assert all(r.a for r in rows if r.member)

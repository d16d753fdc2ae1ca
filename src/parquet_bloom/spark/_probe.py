"""Probing Parquet Bloom filters in Spark queries, and semi-join pre-filtering with them.

:func:`might_contain` is a boolean Column written in Spark's own expressions, so that it runs
in the JVM, in Spark's generated code, with no batch sent to Python, for every supported type:

- The hash: XXH64 (seed 0) of the bytes Parquet stores for the value, as Spark writes it
  (:func:`parquet_bloom.spark._types.sql_hash`): Spark's ``xxhash64`` of those bytes, which
  for INT96 and TIMESTAMP_MILLIS timestamps and decimals not stored as INT64 are assembled
  first.
- The lookup: block index and bit positions as the format defines them (docs/format-notes.md,
  SBBF layout), in the filter's words as an ``array<bigint>`` (two words to a long): a literal
  for small filters, the result of a scalar subquery for larger ones.
- Around both, the answers that are not a lookup: nulls, NaN and zeros (Spark's equality),
  strings compared by a collation, dates and timestamps LEGACY rebasing rewrites, types
  without a filter.

Hash and answer are two temporary SQL functions, created once per session with ANSI mode off
(so that products wrap and integers cast to their bytes), that Spark inlines into the plan.
Their arguments are what Spark can say of a value of any type, ``typeof(column)`` among them,
which Spark folds into a constant as it plans the query: of each function's ``CASE`` on it one
branch remains.

The Arrow UDF (:func:`arrow_probe`, which hashes with
:func:`parquet_bloom.spark._types.arrow_hashes`) answers the same in Python, one Arrow batch at
a time; ``might_contain(..., arrow_udf=True)`` uses it instead, to check the JVM's answers or
work around a problem in them.

:func:`semi_join_prefilter` builds a filter on the join key of one side
(:func:`parquet_bloom.spark._build.build_filters`) and drops the rows of the other side that
cannot match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import Broadcast
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from parquet_bloom import _plain as plain
from parquet_bloom._sbbf import SplitBlockBloomFilter
from parquet_bloom.spark import _jvm
from parquet_bloom.spark._build import build_filters
from parquet_bloom.spark._functions import MIGHT_CONTAIN_FUNCTION, create_sql_functions
from parquet_bloom.spark._types import (
    SEED_ZERO_PREFIX,
    SPARK_HASH_SEED,
    SparkLayout,
    arrow_hashes,
    check_spark_type,
    date_days,
    native_type,
    sql_hash,
    timestamp_micros,
    without_pandas_warning,
)

__all__ = [
    "SEED_ZERO_PREFIX",
    "SPARK_HASH_SEED",
    "arrow_probe",
    "might_contain",
    "semi_join_prefilter",
]


def might_contain(
    bloom_filter: SplitBlockBloomFilter | Broadcast[SplitBlockBloomFilter],
    column: str | Column,
    *,
    spark: SparkSession | None = None,
    arrow_udf: bool = False,
    jvm: bool | None = None,
) -> Column:
    """A boolean Column: False where the column's value is certainly not in ``bloom_filter``.

    Use it in ``df.filter(...)`` or ``withColumn``. Values are hashed as Spark writes the column
    (docs/spark.md), so a filter from :func:`build_filter` or from a file Spark wrote over
    the same type answers correctly; a filter built over another type (an INT32 column probed
    with longs) does not. Nulls give False (a Bloom filter holds no nulls). Following Spark's
    equality, NaN gives True, a zero is looked up as both +0.0 and -0.0, and a string with a
    collation other than UTF8_BINARY gives True (equal strings may differ in bytes; probe
    ``F.collate(column, "UTF8_BINARY")`` to look its bytes up). Dates and timestamps that the
    session's LEGACY rebase mode would rewrite give True.

    The probe runs in Spark's own expressions, in the JVM, for every supported type (this
    module's docstring, and docs/spark.md). ``arrow_udf=True`` probes in a scalar Arrow UDF
    instead, in Python, with the same answers, several times slower: to check the JVM's
    answers or to work around a problem in them (it needs pyspark >= 4.1, ``arrow_udf``; pass a
    ``Broadcast`` of the filter to reuse one copy on the executors).

    ``jvm``: whether to hash INT96 timestamps with the JVM accelerator (:func:`jar_path`;
    docs/spark.md): None does where the session has its jar, False never, True requires it.
    The answers are the same either way.
    """
    session = spark if spark is not None else SparkSession.getActiveSession()
    if session is None:
        raise ValueError("might_contain needs an active SparkSession (or pass spark=...)")
    if not isinstance(column, str | Column):
        raise TypeError(f"column must be a name or a Column, not {type(column).__name__}")
    if not isinstance(bloom_filter, Broadcast | SplitBlockBloomFilter):
        raise TypeError(
            "bloom_filter must be a SplitBlockBloomFilter or a Broadcast of one, not "
            f"{type(bloom_filter).__name__}"
        )
    layout = SparkLayout.of(session)
    values = F.col(column) if isinstance(column, str) else column
    accelerator = _jvm.accelerator(session, jvm)
    create_sql_functions(session)
    no_bigint, no_boolean = F.lit(None).cast("bigint"), F.lit(None).cast("boolean")
    if arrow_udf:
        handle = (
            bloom_filter
            if isinstance(bloom_filter, Broadcast)
            else session.sparkContext.broadcast(bloom_filter)
        )
        hashed, words, zeros = no_bigint, F.lit(None).cast("array<bigint>"), [no_boolean] * 2
        blocks, python = no_bigint, arrow_probe(handle, values, layout)
    else:
        value = bloom_filter.value if isinstance(bloom_filter, Broadcast) else bloom_filter
        hashed = sql_hash(values, layout, accelerator)
        words, python = _words_column(value, session), no_boolean
        blocks = F.lit(value.num_bytes // 32)
        zeros = [F.lit(_holds_a_zero(value, t)) for t in ("FLOAT", "DOUBLE")]
    type_name = F.typeof(values)
    return F.call_function(
        MIGHT_CONTAIN_FUNCTION,
        type_name,
        native_type(type_name),
        values.isNull(),
        hashed,
        words,
        blocks,
        *zeros,
        timestamp_micros(values, type_name) if layout.timestamps_rebased else no_bigint,
        F.lit(layout.timestamps_rebased),
        date_days(values, type_name) if layout.datetime_rebase_legacy else F.lit(None).cast("int"),
        F.lit(layout.datetime_rebase_legacy),
        F.lit(arrow_udf),
        python,
    )


def _holds_a_zero(bloom_filter: SplitBlockBloomFilter, physical_type: str) -> bool:
    """Whether the filter holds +0.0 or -0.0: Spark's = finds either zero for both."""
    zeros = np.array([0.0, -0.0], np.float32 if physical_type == "FLOAT" else np.float64)
    return bool(bloom_filter.find_hashes(plain.hash_values(zeros, physical_type)).any())


def arrow_probe(
    handle: Broadcast[SplitBlockBloomFilter], values: Column, layout: SparkLayout
) -> Column:
    """might_contain as a scalar Arrow UDF: every type, one Arrow batch at a time, in Python."""
    arrow_udf = getattr(F, "arrow_udf", None)
    if arrow_udf is None:
        raise ImportError("might_contain needs pyspark >= 4.1 (pyspark.sql.functions.arrow_udf)")

    def might_contain(values: pa.Array) -> pa.Array:
        return _probe_batch(values, handle.value, layout)

    # The type hints (resolved from this module's globals) make it a scalar Arrow UDF.
    udf = arrow_udf(might_contain, T.BooleanType())
    result: Column = udf(values)
    return result


def _probe_batch(values: Any, bloom_filter: SplitBlockBloomFilter, layout: SparkLayout) -> Any:
    """Executor side of the Arrow UDF: its answer for one Arrow batch."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    found = bloom_filter.find_hashes(arrow_hashes(values, layout))
    t = values.type
    if pa.types.is_floating(t) and found.size:
        # Spark's = treats every NaN as equal and -0.0 as 0.0, but the filter holds raw bits.
        numbers = values.drop_null().to_numpy(zero_copy_only=False)
        found |= np.isnan(numbers)
        zero = numbers == 0
        if zero.any():
            physical_type = "FLOAT" if pa.types.is_float32(t) else "DOUBLE"
            flipped = plain.hash_values(np.negative(numbers[zero]), physical_type)
            found[zero] |= bloom_filter.find_hashes(flipped)
    if values.null_count:
        answer = np.zeros(len(values), dtype=bool)
        answer[values.is_valid().to_numpy(zero_copy_only=False)] = found
        found = answer
    return pa.array(found, type=pa.bool_())


# Filters up to this size go into the plan as a literal array. Spark renders the plan as text,
# literals in full, several times per query, which measured 0.3 s at 32 KiB and 4 s at 1 MiB
# (with the expression built lookup by lookup); larger filters travel as the result of a scalar
# subquery instead, which is rendered as its name (0.3 s more per query at 16 MiB).
_LITERAL_MAX_BYTES = 4096


def _words_column(bloom_filter: SplitBlockBloomFilter, session: SparkSession) -> Column:
    """The filter's words as an array<bigint> Column, two to a long (see _LITERAL_MAX_BYTES)."""
    words = np.frombuffer(bloom_filter.to_bytes(), dtype="<i8")
    if bloom_filter.num_bytes <= _LITERAL_MAX_BYTES:
        return F.expr(f"array({', '.join(f'{w}L' for w in words.tolist())})")
    table = pa.table({"words": pa.array([words], pa.list_(pa.int64()))})
    with without_pandas_warning():
        return session.createDataFrame(table).scalar()


def semi_join_prefilter(
    left: DataFrame,
    right: DataFrame,
    on: str | Sequence[str],
    fpp: float = 0.01,
    ndv: int | None = None,
) -> DataFrame:
    """``left`` without the rows whose join key cannot be in ``right``, before joining them.

    One filter per key column is built over ``right`` (:func:`build_filters`) and probed on
    ``left`` (:func:`might_contain`); a row is kept when every key might match. The result
    keeps every row of ``left`` that has a match in ``right`` on ``on`` (equality; rows with
    null keys, which never match, are dropped), so ``semi_join_prefilter(l, r, on).join(r, on)``
    equals ``l.join(r, on)`` for inner and left-semi joins, while shuffling fewer rows. Cache
    ``right`` if it is expensive: it is scanned to build the filter (twice when ``ndv`` is None)
    and again by the join.

    Keys of different integer types are compared as LongType; other type differences must be
    removed by casting first (a filter compares stored bytes, and Spark's implicit casts are
    not the same on every version). Collated strings are refused for the same reason.
    """
    keys = [on] if isinstance(on, str) else list(on)
    if not keys or not all(isinstance(k, str) for k in keys):
        raise TypeError("on must be a column name or a non-empty sequence of column names")
    key_types = {
        key: _join_key_type(_column_type(left, key, "left"), _column_type(right, key, "right"), key)
        for key in keys
    }
    right_keys = right.select(*[F.col(k).cast(t).alias(k) for k, t in key_types.items()])
    filters = build_filters(right_keys, keys, fpp=fpp, ndv=ndv)  # one scan for every key
    condition: Column | None = None
    for key, key_type in key_types.items():
        keep = might_contain(filters[key], F.col(key).cast(key_type), spark=left.sparkSession)
        condition = keep if condition is None else condition & keep
    assert condition is not None
    return left.filter(condition)


def _column_type(df: DataFrame, key: str, side: str) -> Any:
    if key not in df.columns:
        raise ValueError(f"no column {key!r} in the {side} DataFrame; its columns are {df.columns}")
    return df.select(F.col(key)).schema.fields[0].dataType


_INTEGER_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def _join_key_type(left_type: Any, right_type: Any, key: str) -> Any:
    for data_type in (left_type, right_type):
        check_spark_type(data_type, key)
        if getattr(data_type, "collation", "UTF8_BINARY") != "UTF8_BINARY":
            raise TypeError(
                f"join key {key!r} has collation {data_type.collation}: equal strings may differ "
                "in bytes, so a Bloom filter could drop matching rows"
            )
    if left_type == right_type:
        return left_type
    if isinstance(left_type, _INTEGER_TYPES) and isinstance(right_type, _INTEGER_TYPES):
        return T.LongType()
    raise TypeError(
        f"join key {key!r} is {left_type.simpleString()} on the left and "
        f"{right_type.simpleString()} on the right; cast both to one type first"
    )

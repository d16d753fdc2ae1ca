"""Probing Parquet Bloom filters in Spark queries, and semi-join pre-filtering with them.

:func:`might_contain` is a boolean Column written in Spark's own expressions, so that it runs
in the JVM, in Spark's generated code, with no batch sent to Python:

- The hash: Spark's ``xxhash64(a, b)`` is XXH64 of ``b``'s bytes seeded with the hash of ``a``,
  itself seeded with 42. With ``a`` the one long whose hash under seed 42 is 0
  (:data:`SEED_ZERO_PREFIX`), that is XXH64 with seed 0 of the value's bytes, which are the
  bytes Parquet stores for integers, dates, INT64 timestamps, day-time intervals, strings,
  binaries, decimals of 10 to 18 digits and floats (with every NaN, and -0.0, hashed as one bit
  pattern, which the probe turns into Spark's equality).
- The probe: block index and bit positions as the format defines them (docs/format-notes.md,
  SBBF layout), with every product kept below 2**63 (ANSI mode fails on overflow), and the words
  looked up with ``element_at`` in an ``array<int>``: a literal for small filters, the result of
  a scalar subquery for larger ones. It is a temporary SQL function of (hash, words), created
  once per session, which Spark inlines into the plan.
- Other types: ``typeof(column)`` is folded into a constant when Spark plans the query, so a
  ``CASE`` on it keeps one branch, and the layouts Spark hashes otherwise go to a scalar Arrow
  UDF that hashes with :func:`parquet_bloom.spark._types.arrow_hashes`.

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
from parquet_bloom import _xxh64 as xxh64
from parquet_bloom._sbbf import SALT, SplitBlockBloomFilter
from parquet_bloom.spark._build import build_filters
from parquet_bloom.spark._types import (
    SparkLayout,
    arrow_hashes,
    check_spark_type,
    without_pandas_warning,
)


def might_contain(
    bloom_filter: SplitBlockBloomFilter | Broadcast[SplitBlockBloomFilter],
    column: str | Column,
    *,
    spark: SparkSession | None = None,
) -> Column:
    """A boolean Column: False where the column's value is certainly not in ``bloom_filter``.

    Use it in ``df.filter(...)`` or ``withColumn``. Values are hashed as Spark writes the column
    (docs/spark.md), so a filter from :func:`build_filter` or from a file Spark wrote over
    the same type answers correctly; a filter built over another type (an INT32 column probed
    with longs) does not. Nulls give False (a Bloom filter holds no nulls). Following Spark's
    equality, NaN gives True and a zero is looked up as both +0.0 and -0.0.

    Most types are probed by Spark's own expressions, in the JVM (this module's docstring, and
    docs/spark.md); the rest (INT96 and TIMESTAMP_MILLIS timestamps, decimals not stored
    as INT64, collated strings) by a scalar Arrow UDF over a broadcast copy of the filter (pass
    a ``Broadcast`` of a filter to reuse one). Needs pyspark >= 4.1 (``arrow_udf``).
    """
    session = spark if spark is not None else SparkSession.getActiveSession()
    if session is None:
        raise ValueError("might_contain needs an active SparkSession (or pass spark=...)")
    if not isinstance(column, str | Column):
        raise TypeError(f"column must be a name or a Column, not {type(column).__name__}")
    if isinstance(bloom_filter, Broadcast):
        handle = bloom_filter
    elif isinstance(bloom_filter, SplitBlockBloomFilter):
        handle = session.sparkContext.broadcast(bloom_filter)
    else:
        raise TypeError(
            "bloom_filter must be a SplitBlockBloomFilter or a Broadcast of one, not "
            f"{type(bloom_filter).__name__}"
        )
    layout = SparkLayout.of(session)
    values = F.col(column) if isinstance(column, str) else column
    # typeof() is folded to a constant once the plan is analysed, so Spark keeps one branch:
    # a column of a type hashed natively never reaches Python.
    return F.when(
        _hashed_by_spark(F.typeof(values), layout), _expression_probe(handle.value, values, session)
    ).otherwise(arrow_probe(handle, values, layout))


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


# Spark's xxhash64(a, b, ...) hashes each argument's bytes with XXH64, seeded with the hash of
# the arguments before it, and starts from seed 42. For 8 bytes XXH64 is a bijection, so exactly
# one long hashes to 0 under seed 42; with it first, xxhash64(SEED_ZERO_PREFIX, v) is XXH64 with
# seed 0 of v's bytes: the Parquet filter's hash, for every type whose bytes Spark hashes the
# way Parquet stores them. The long is found by running XXH64's last steps backwards from 0.
def _xxh64_preimage_of_zero(seed: int) -> int:
    m = (1 << 64) - 1
    p1, p2, p3, p4, p5 = (int(p) for p in (xxh64.PRIME64_1, xxh64.PRIME64_2, xxh64.PRIME64_3,
                                           xxh64.PRIME64_4, xxh64.PRIME64_5))  # fmt: skip

    def rotr(x: int, r: int) -> int:
        return ((x >> r) | (x << (64 - r))) & m

    h = 0  # the target, through the avalanche backwards: xor-shifts and odd multipliers
    h ^= h >> 32
    h = h * pow(p3, -1, 1 << 64) & m
    h ^= (h >> 29) ^ (h >> 58)
    h = h * pow(p2, -1, 1 << 64) & m
    h ^= h >> 33
    h = rotr((h - p4) * pow(p1, -1, 1 << 64) & m, 27)  # h = rotl(h, 27) * P1 + P4
    lane = h ^ ((seed + p5 + 8) & m)  # h ^= round(0, lane), from h = seed + P5 + 8
    value = rotr(lane * pow(p1, -1, 1 << 64) & m, 31) * pow(p2, -1, 1 << 64) & m
    return _signed(value)


def _signed(value: Any) -> int:
    """A uint64 as the Java long with the same bits."""
    bits = int(value)
    return bits - (1 << 64) if bits >> 63 else bits


SPARK_HASH_SEED = 42  # XxHash64(children, seed = 42L), Spark's xxhash64()
SEED_ZERO_PREFIX = _xxh64_preimage_of_zero(SPARK_HASH_SEED)

# typeof() names of the types Spark's xxhash64 hashes as Parquet stores them: hashInt of the
# 4-byte value for INT32 types, hashLong for INT64 ones, the bytes of (UTF8_BINARY) strings and
# binaries, and the IEEE bits of floats (which the probe's zero and NaN cases see to).
_NATIVE_TYPE_NAMES = (
    "tinyint", "smallint", "int", "bigint", "date", "timestamp_ntz", "float", "double",
    "string", "binary",
)  # fmt: skip
_DAY_TIME_FIELDS = ("day", "hour", "minute", "second")
_DAY_TIME_INTERVALS = tuple(
    f"interval {start}" if start == end else f"interval {start} to {end}"
    for i, start in enumerate(_DAY_TIME_FIELDS)
    for end in _DAY_TIME_FIELDS[i:]
)
# Spark hashes a decimal of precision <= 18 as hashLong of its unscaled value: the INT64 that
# Parquet stores for 10..18 digits (INT32 below, minimal bytes above are hashed otherwise).
_INT64_DECIMAL = r"^decimal\(1[0-8],"
# Filters up to this size go into the plan as a literal array. Spark renders the plan as text,
# literals in full, several times per query, which measured 0.3 s at 32 KiB and 4 s at 1 MiB
# (with the expression built lookup by lookup); larger filters travel as the result of a scalar
# subquery instead, which is rendered as its name (0.3 s more per query at 16 MiB).
_LITERAL_MAX_BYTES = 4096


def _hashed_by_spark(type_name: Column, layout: SparkLayout) -> Column:
    """Whether xxhash64 hashes a value of this type as its Parquet filter does."""
    names = _NATIVE_TYPE_NAMES + _DAY_TIME_INTERVALS
    if layout.timestamp_type == "TIMESTAMP_MICROS":
        names += ("timestamp",)
    native = type_name.isin(*names)
    return native if layout.legacy_decimal else native | type_name.rlike(_INT64_DECIMAL)


def _probe_function_sql() -> str:
    """The SBBF probe (docs/format-notes.md, SBBF layout) as a SQL function of a hash and a
    filter's words.

    Spark's ANSI mode turns a long overflow into an error, so every product stays below 2**63:
    the block index multiplies the hash's top 32 bits by the block count (at most 2**22), and
    each salt is split into 16-bit halves, of which only the product's low 32 bits matter.
    """
    block = "shiftrightunsigned(shiftrightunsigned(h, 32) * (size(words) div 8), 32)"
    first_word = f"cast({block} * 8 + 1 as int)"  # element_at counts from 1
    key = "(h & 4294967295)"
    lanes = []
    for i, salt in enumerate(int(s) for s in SALT):
        high_half = f"shiftleft(({key} * {salt >> 16}) & 65535, 16)"
        low32 = f"({key} * {salt & 0xFFFF} + {high_half}) & 4294967295"
        bit = f"cast(shiftrightunsigned({low32}, 27) as int)"
        lanes.append(f"getbit(element_at(words, {first_word} + {i}), {bit}) = 1")
    return (
        f"CREATE OR REPLACE TEMPORARY FUNCTION {_PROBE_FUNCTION}(h BIGINT, words ARRAY<INT>) "
        f"RETURNS BOOLEAN RETURN {' AND '.join(lanes)}"
    )


# A temporary SQL function (inlined by Spark's analyser, its arguments computed once), created
# once per session, rather than the same expression built Column by Column: some 170 calls into
# the JVM, which cost 0.2 s per query. The version suffix keeps another release's body apart.
_PROBE_FUNCTION = "parquet_bloom_sbbf_probe_v1"
_PROBE_FUNCTION_SQL = _probe_function_sql()


def _expression_probe(
    bloom_filter: SplitBlockBloomFilter, values: Column, session: SparkSession
) -> Column:
    """might_contain in Spark's own expressions, in the JVM (module docstring)."""
    if not session.catalog.functionExists(_PROBE_FUNCTION):  # 5 ms; creating it takes 0.2 s
        session.sql(_PROBE_FUNCTION_SQL)
    h = F.xxhash64(F.lit(SEED_ZERO_PREFIX), values)
    hit = F.call_function(_PROBE_FUNCTION, h, _words_column(bloom_filter, session))
    # Spark's = holds for NaN = NaN and 0.0 = -0.0, while the filter holds raw bits. Spark
    # hashes every NaN and both zeros by one bit pattern each (Float.floatToIntBits of the value
    # with -0.0 made 0.0), so the hash tells them apart without a per-type expression.
    type_name = F.typeof(values)
    answers = F.when(values.isNull(), F.lit(False))
    for name, physical_type, dtype in (
        ("float", "FLOAT", np.float32),
        ("double", "DOUBLE", np.float64),
    ):
        nan_hash, zero_hash = plain.hash_values(np.array([np.nan, 0.0], dtype), physical_type)
        zeros = np.array([0.0, -0.0], dtype)
        zero_hit = bool(bloom_filter.find_hashes(plain.hash_values(zeros, physical_type)).any())
        is_name = type_name == name
        answers = answers.when(is_name & (h == _signed(nan_hash)), F.lit(True))
        answers = answers.when(is_name & (h == _signed(zero_hash)), F.lit(zero_hit))
    return answers.otherwise(hit)


def _words_column(bloom_filter: SplitBlockBloomFilter, session: SparkSession) -> Column:
    """The filter's 32-bit words as an array<int> Column (see _LITERAL_MAX_BYTES)."""
    words = np.frombuffer(bloom_filter.to_bytes(), dtype="<i4")
    if bloom_filter.num_bytes <= _LITERAL_MAX_BYTES:
        return F.expr(f"array({', '.join(map(str, words.tolist()))})")
    table = pa.table({"words": pa.array([words], pa.list_(pa.int32()))})
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

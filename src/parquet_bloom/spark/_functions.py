"""The temporary SQL functions the Spark build and probe call: the hash of a value as Parquet
stores it (:data:`parquet_bloom.spark._types.HASH_FUNCTION_SQL`) and might_contain's answer, a
lookup in a filter's words with the answers that are not one around it
(:mod:`parquet_bloom.spark._probe` describes both). :func:`create_sql_functions` creates them in a
session, once, with ANSI mode off."""

from __future__ import annotations

import threading

import numpy as np
from pyspark.sql import SparkSession

from parquet_bloom import _plain as plain
from parquet_bloom._sbbf import SALT
from parquet_bloom.spark._types import (
    HASH_FUNCTION_SQL,
    LAST_REBASED_DAY,
    LAST_REBASED_MICROS,
    signed64,
)

__all__ = ["MIGHT_CONTAIN_FUNCTION", "create_sql_functions"]


def _might_contain_function_sql() -> str:
    """might_contain's answer, a ``CASE`` whose branches Spark folds to one per column type:
    what is not a lookup first (strings compared by a collation, which no lookup can rule
    out; dates and timestamps LEGACY rebasing rewrites; unsupported types), then Spark's
    equality for NaN and the zeros (Spark hashes every NaN, and both zeros, as one bit
    pattern each), then the filter, where a null's hash, null, gives false; ``python``
    replaces the last two under ``arrow_udf``. The lookup is the first thing Spark computes
    for a row (outside a branch of a ``CASE``), so that it computes the hash once, not for
    every use (Spark shares an expression's repeats only where it is sure to compute it).

    The lookup (docs/format-notes.md, SBBF layout): the block is the hash's top 32 bits times
    the block count (at most 2**22, so below 2**63), over 2**32; each of its 8 words must have
    the bit that the top 5 bits of the 32-bit product of the hash's low half and a salt name,
    computed as ints that wrap (the function is created with ANSI mode off).
    """
    nan_f, zero_f = (signed64(h) for h in plain.hash_values(np.array([np.nan, 0.0], np.float32)))
    nan_d, zero_d = (signed64(h) for h in plain.hash_values(np.array([np.nan, 0.0], np.float64)))
    # The block's 8 words as 4 longs (the words' little-endian pairs): each lookup tests two
    # bits, the first word's in the low half.
    block = "cast(shiftrightunsigned(shiftrightunsigned(h, 32) * blocks, 32) as int) * 4"
    bits = [  # the bit each word must have, as a long's bit (the salts as ints' bits)
        f"shiftrightunsigned(cast(h as int) * {salt - (1 << 32) if salt >> 31 else salt}, 27)"
        for salt in (int(s) for s in SALT)
    ]
    lanes = [
        f"(~words[{block} + {i}] & (shiftleft(1L, {bits[2 * i]}) | "
        f"shiftleft(1L, {bits[2 * i + 1]} + 32))) = 0"
        for i in range(4)
    ]
    lookup = "\n    AND ".join(lanes)
    return f"""
CREATE OR REPLACE TEMPORARY FUNCTION {MIGHT_CONTAIN_FUNCTION}(type_name STRING,
    native BOOLEAN, is_null BOOLEAN, h BIGINT, words ARRAY<BIGINT>, blocks BIGINT,
    float_zero BOOLEAN, double_zero BOOLEAN, micros BIGINT, timestamps_rebased BOOLEAN,
    days INT, dates_rebased BOOLEAN, use_python BOOLEAN, python BOOLEAN)
RETURNS BOOLEAN RETURN CASE
  WHEN type_name LIKE 'string collate %' AND type_name != 'string collate UTF8_BINARY'
    THEN NOT is_null
  WHEN dates_rebased AND type_name = 'date' AND days < {LAST_REBASED_DAY} THEN true
  WHEN timestamps_rebased AND type_name = 'timestamp' AND micros < {LAST_REBASED_MICROS}L
    THEN true
  WHEN NOT (native OR type_name = 'timestamp' OR type_name LIKE 'decimal(%')
    THEN raise_error(concat('might_contain: a column of type ', type_name,
      ' has no Parquet Bloom filter'))
  WHEN use_python THEN python
  WHEN type_name = 'float' AND h = {nan_f}L THEN true
  WHEN type_name = 'float' AND h = {zero_f}L THEN float_zero
  WHEN type_name = 'double' AND h = {nan_d}L THEN true
  WHEN type_name = 'double' AND h = {zero_d}L THEN double_zero
  ELSE coalesce({lookup}, false)
END"""


# Temporary SQL functions rather than the same expressions built Column by Column (hundreds
# of calls into the JVM). Spark projects a SQL function's arguments below the query and
# inlines its body; resolving a body costs 20 ms to 40 ms of planning, hence two, compact; and
# as it pushes the filter through the projection, Spark copies the hash's expression into each
# of its 12 uses in the lookup, hence a hash whose expression stays small (see
# _types._hash_function_sql). The version suffixes keep another release's bodies apart.
MIGHT_CONTAIN_FUNCTION = "parquet_bloom_might_contain_v3"
_FUNCTIONS_SQL = (HASH_FUNCTION_SQL, _might_contain_function_sql())
_ANSI_CONF = "spark.sql.ansi.enabled"
_CREATING = threading.Lock()  # one thread at a time turns ANSI mode off and back


def create_sql_functions(session: SparkSession) -> None:
    """Create the probe's SQL functions in this session, once (creating them costs 0.2 s,
    checking 5 ms). A SQL function keeps the SQL settings in force when it is created, so ANSI
    mode is off meanwhile: their arithmetic wraps and integers cast to bytes, whatever the
    queries that call them run with. (A query run on the same session in those milliseconds
    would see the setting too.)"""
    if session.catalog.functionExists(MIGHT_CONTAIN_FUNCTION):  # created last
        return
    with _CREATING:
        before = session.conf.get(_ANSI_CONF, None)
        session.conf.set(_ANSI_CONF, "false")
        try:
            for sql in _FUNCTIONS_SQL:
                session.sql(sql)
        finally:
            if before is None:
                session.conf.unset(_ANSI_CONF)
            else:
                session.conf.set(_ANSI_CONF, before)

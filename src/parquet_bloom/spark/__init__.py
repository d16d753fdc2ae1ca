"""Parquet split-block Bloom filters at cluster scale, with PySpark.

Spark is the distributed engine here; this module only adds what Spark lacks: the Parquet
filter's hashing and bit layout, run on executors with the numpy core.

- :func:`build_filter` builds one filter over a column of any size. Each partition hashes its
  values with :mod:`parquet_bloom._plain` inside ``mapInArrow`` (Arrow batches, no Python per
  row) and inserts them into a partial filter of the final size; the partial bitsets are OR-ed,
  which is exact, so the result is the filter a local :class:`SplitBlockBloomFilter` of that size
  would hold after inserting the same values, whatever the partitioning.
- :func:`might_contain` is a Spark Column for ``df.filter``/``withColumn``, in Spark's own
  expressions (see "Probing in Spark's expressions" below).
- :func:`semi_join_prefilter` builds a filter on the join key of one side and drops the rows of
  the other side that cannot match.
- :func:`bloom_filter_index` and :func:`files_might_contain` read the filters of a dataset's
  files on executors (one :class:`BloomFilterReader` per file) and return DataFrames.

Needs a classic (not Spark Connect) session: broadcasts and the partial-filter reduction use
the SparkContext.

How values are hashed
---------------------
A filter only answers for values hashed exactly as they are stored. Spark writes Parquet through
parquet-java with this mapping (``ParquetSchemaConverter`` and ``ParquetWriteSupport``), which
:func:`build_filter` and :func:`might_contain` both apply, so that a filter built here probes
like the filters Spark writes (``parquet.bloom.filter.enabled#col``):

=====================  ==========================================================================
Spark type             stored (and hashed) as
=====================  ==========================================================================
ByteType, ShortType,   INT32, 4 bytes little-endian (sign-extended)
IntegerType
LongType               INT64, 8 bytes little-endian
FloatType, DoubleType  FLOAT / DOUBLE, the raw IEEE-754 bits
StringType, BinaryType BYTE_ARRAY: the UTF-8 (or raw) bytes, without a length prefix
DateType               INT32 days since 1970-01-01
TimestampType          per ``spark.sql.parquet.outputTimestampType`` (Spark's default is INT96):
                       INT96 (nanoseconds of the day, then the Julian day), or INT64
                       microseconds (TIMESTAMP_MICROS), or INT64 milliseconds rounded down
                       (TIMESTAMP_MILLIS)
TimestampNTZType       INT64 microseconds
DayTimeIntervalType    INT64 microseconds
DecimalType(p, s)      the unscaled value: INT32 for p <= 9, INT64 for p <= 18, else
                       FIXED_LEN_BYTE_ARRAY of the fewest bytes that hold p digits, big-endian
                       two's complement; with ``spark.sql.parquet.writeLegacyFormat`` every
                       precision is FIXED_LEN_BYTE_ARRAY
=====================  ==========================================================================

Both settings are read from the session when the function is called. BooleanType has no usable
filter (writers disagree on how to hash it); nested types have no single column to filter;
YearMonthIntervalType and Spark 4's TIME, VARIANT and geospatial types are refused.

The mapping goes through :func:`parquet_bloom._plain.hash_values` with an explicit physical
type rather than through :func:`parquet_bloom._logical.column_hashes`: the latter encodes values
as a *file* stores them and rejects a TIMESTAMP(MILLIS) value with sub-millisecond digits,
whereas Spark rounds those down when it writes, so the rounding is done here.

Sizing when ``ndv`` is None
---------------------------
Partial filters must all have the final size before any value is inserted (OR needs equal
sizes, and a filter cannot grow), so sizing costs one scan before the build. Two ways were
measured (``benchmarks/bench_spark.py``, 20 M distinct bigints, cached, ``local[2]``):

- Count the rows (a cheap JVM job, which also tells how many partitions hold rows), build every
  partial at the size for that many values, and fold the union down to the smallest size the
  bits set allow (:func:`parquet_bloom._sizing.fold_to_fpp`, the rule Arrow C++ and arrow-rs
  apply; folding is exact, so the result is still the filter of the values at its size): the
  build plus 0.1x to 0.2x the time of Spark's own ``df.stat.bloomFilter`` (two runs).
- Estimate the distinct count with Spark's ``approx_count_distinct`` (HyperLogLog++, relative
  error ``NDV_RSD``, padded by three standard errors) and build at that size: the build plus
  0.25x to 0.5x, hashing every value into the sketch being the dearer scan.

The fold is used when it is cheap: when the partials sized for the row count, one per
partition holding rows, fit in ``MAX_COLLECT_BYTES`` and the row count does not saturate a
filter (about 110 M rows at 1 %). Otherwise, with many partitions, many rows, or rows that are
mostly repeats, sizing every partial for the rows would multiply what is inserted, shipped and
OR-ed, and the estimate is used.

Combining partial filters
-------------------------
Each partition sends one row per column: ``(column, bitset)``. When ``partitions`` times the
bytes of one partition's bitsets fits in ``MAX_COLLECT_BYTES`` they are collected and OR-ed on
the driver; otherwise they are OR-ed on the executors by ``treeAggregate``, deep enough that
the driver receives at most about that many bytes. Spark hands ``mapInArrow`` 10,000 rows per
Arrow batch by default; the build raises that to ``BUILD_BATCH_ROWS`` for its own job (see
:func:`_arrow_batches_of_at_least`), which on the benchmark cut the build by a third.

Probing in Spark's expressions
------------------------------
:func:`might_contain` is written in Spark's own expressions, so that it runs in the JVM, in
Spark's generated code, with no batch sent to Python: a scalar Arrow UDF that does nothing
costs about 5.8x an ``isin`` scan on the benchmark's 20 M cached rows, whatever it computes.

- The hash: Spark's ``xxhash64(a, b)`` is XXH64 of ``b``'s bytes seeded with the hash of ``a``,
  itself seeded with 42. With ``a`` the one long whose hash under seed 42 is 0
  (:data:`SEED_ZERO_PREFIX`), that is XXH64 with seed 0 of the value's bytes, which are the
  bytes Parquet stores for integers, dates, INT64 timestamps, day-time intervals, strings,
  binaries, decimals of 10 to 18 digits and floats (with every NaN, and -0.0, hashed as one
  bit pattern, which the probe turns into Spark's equality).
- The probe: block index and bit positions by BloomFilter.md, with every product kept below
  2**63 (ANSI mode fails on overflow), and the words looked up with ``element_at`` in an
  ``array<int>``: a literal for small filters, the result of a scalar subquery for larger ones
  (Spark prints a plan's literals in full, several times per query). It is a temporary SQL
  function of (hash, words), created once per session, which Spark inlines into the plan.
- Other types: ``typeof(column)`` is folded into a constant when Spark plans the query, so a
  ``CASE`` on it keeps one branch, and the layouts Spark hashes otherwise go to the Arrow UDF.

On the benchmark's 20 M rows the probe costs 1.4x to 1.9x the ``isin`` scan (three runs; the
Arrow UDF it replaced: 6.7x).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from parquet_bloom import _format as fmt
from parquet_bloom import _plain as plain
from parquet_bloom import _sizing as sizing
from parquet_bloom import _xxh64 as xxh64
from parquet_bloom._logical import literal_probe
from parquet_bloom._reader import BloomFilterReader, BloomFilterWarning
from parquet_bloom._sbbf import MAX_NUM_BYTES, SALT, SplitBlockBloomFilter, optimal_num_bytes
from parquet_bloom.errors import BloomFilterError

try:
    from pyspark import Broadcast
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
except ImportError as err:  # pragma: no cover - exercised only without pyspark
    raise ImportError(
        "parquet_bloom.spark needs PySpark (and a Java 17+ runtime): "
        "pip install 'parquet-bloom[spark]'"
    ) from err

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "INDEX_SCHEMA",
    "ROW_GROUPS_SCHEMA",
    "bloom_filter_index",
    "build_filter",
    "build_filters",
    "files_might_contain",
    "might_contain",
    "semi_join_prefilter",
]

# SQLConf entries that decide how Spark stores a value (see the module docstring).
TIMESTAMP_TYPE_CONF = "spark.sql.parquet.outputTimestampType"
LEGACY_FORMAT_CONF = "spark.sql.parquet.writeLegacyFormat"
_TIMESTAMP_TYPES = ("INT96", "TIMESTAMP_MICROS", "TIMESTAMP_MILLIS")

# Spark's DecimalType.MAX_INT_DIGITS and MAX_LONG_DIGITS: the largest precisions that
# ParquetWriteSupport stores as INT32 and INT64 when not writing the legacy format.
_MAX_INT_DIGITS = 9
_MAX_LONG_DIGITS = 18
_MICROS_PER_MILLI = 1000

# approx_count_distinct's relative standard deviation when ndv is not given. 1 % costs Spark
# 2**14 HyperLogLog++ registers per partition, nothing next to the scan; the estimate is padded
# by three deviations so that it undershoots the true count with probability about 0.1 %.
NDV_RSD = 0.01
_NDV_PADDING = 1.0 + 3 * NDV_RSD

# Hashes gathered from Arrow batches (Spark sends 10,000 rows per batch by default) before one
# insert: inserting into a large filter has a fixed cost per call (see SplitBlockBloomFilter's
# dense path), which 4 Mi hashes (32 MiB) amortise.
_INSERT_BATCH = 1 << 22

# Rows per Arrow batch that the build asks Spark for (see _arrow_batches_of_at_least). The
# build's batches hold only the columns being built: 128 Ki fixed-width values are at most 2 MiB
# a column (16-byte decimals), strings as long as they are.
MAX_RECORDS_PER_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"
BUILD_BATCH_ROWS = 1 << 17

# Most bytes of partial bitsets the driver receives. Above it they are OR-ed on executors first.
MAX_COLLECT_BYTES = 256 * 1024 * 1024
# A tree reduction deeper than this would not cut the driver's share further in practice.
_MAX_TREE_DEPTH = 6

# The message pyspark (4.x) warns with when a Map-in-Arrow UDF is created under pandas >= 3.
# mapInArrow never converts to pandas, so the warning says nothing about what runs here.
_PANDAS_WARNING = "PySpark does not yet fully support pandas"

_PARTIAL_SCHEMA = "column int, bitset binary"


# -- how Spark stores a value -------------------------------------------------------------------


@dataclass(frozen=True)
class _SparkLayout:
    """The session settings that change how Spark writes a value to Parquet."""

    timestamp_type: str  # one of _TIMESTAMP_TYPES
    legacy_decimal: bool

    @classmethod
    def of(cls, spark: Any) -> _SparkLayout:
        # No default of ours: an unset entry reads as this Spark version's own default.
        timestamp_type = str(spark.conf.get(TIMESTAMP_TYPE_CONF)).upper()
        if timestamp_type not in _TIMESTAMP_TYPES:
            raise ValueError(
                f"unknown {TIMESTAMP_TYPE_CONF}={timestamp_type!r}; expected one of "
                f"{', '.join(_TIMESTAMP_TYPES)}"
            )
        legacy = str(spark.conf.get(LEGACY_FORMAT_CONF)).lower() == "true"
        return cls(timestamp_type, legacy)


def _decimal_storage(precision: int, legacy: bool) -> tuple[str, int | None]:
    """Physical type and width of a Spark decimal (ParquetWriteSupport.makeDecimalWriter)."""
    if not legacy and precision <= _MAX_INT_DIGITS:
        return "INT32", None
    if not legacy and precision <= _MAX_LONG_DIGITS:
        return "INT64", None
    # Spark's Decimal.minBytesForPrecision: the fewest bytes that hold every value of those
    # digits, the width pyarrow picks as well.
    return "FIXED_LEN_BYTE_ARRAY", plain.decimal_width(precision)


# Arrow types Spark hands to Python for each supported Spark type (ArrowUtils.toArrowType),
# and the physical type Spark stores them as. Timestamps with a time zone (TimestampType) and
# decimals depend on the session and are handled before this table.
_ARROW_STORAGE: tuple[tuple[Callable[[Any], bool], str], ...] = (
    (pa.types.is_int8, "INT32"),
    (pa.types.is_int16, "INT32"),
    (pa.types.is_int32, "INT32"),
    (pa.types.is_date32, "INT32"),
    (pa.types.is_int64, "INT64"),
    (pa.types.is_duration, "INT64"),  # DayTimeIntervalType
    (pa.types.is_timestamp, "INT64"),  # TimestampNTZType
    (pa.types.is_float32, "FLOAT"),
    (pa.types.is_float64, "DOUBLE"),
    (pa.types.is_string, "BYTE_ARRAY"),
    (pa.types.is_large_string, "BYTE_ARRAY"),
    (pa.types.is_binary, "BYTE_ARRAY"),
    (pa.types.is_large_binary, "BYTE_ARRAY"),
    (pa.types.is_string_view, "BYTE_ARRAY"),
    (pa.types.is_binary_view, "BYTE_ARRAY"),
)

_SUPPORTED_TYPES = (
    "ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, StringType, BinaryType, "
    "DateType, TimestampType, TimestampNTZType, DayTimeIntervalType and DecimalType"
)


def _check_spark_type(data_type: Any, column: object) -> None:
    """Refuse, on the driver, a column whose values have no usable Parquet Bloom filter."""
    if isinstance(data_type, T.BooleanType):
        raise ValueError(
            f"column {column!r} is BooleanType: BOOLEAN columns have no usable Bloom filters "
            "(writers do not agree on how a boolean is hashed)"
        )
    supported = (
        T.ByteType,
        T.ShortType,
        T.IntegerType,
        T.LongType,
        T.FloatType,
        T.DoubleType,
        T.StringType,
        T.BinaryType,
        T.DateType,
        T.TimestampType,
        T.TimestampNTZType,
        T.DayTimeIntervalType,
        T.DecimalType,
    )
    if not isinstance(data_type, supported):
        raise TypeError(
            f"column {column!r} has type {data_type.simpleString()}, which has no Parquet "
            f"Bloom filter here; supported: {_SUPPORTED_TYPES}"
        )


def _arrow_hashes(values: Any, layout: _SparkLayout) -> npt.NDArray[np.uint64]:
    """XXH64 of each non-null value of a Spark column's Arrow array, encoded as Spark stores it."""
    t = values.type
    if pa.types.is_timestamp(t) and t.tz is not None:  # TimestampType: UTC microseconds
        _check_micros(t)
        if layout.timestamp_type == "INT96":
            return plain.hash_values(values, "INT96")
        if layout.timestamp_type == "TIMESTAMP_MILLIS":
            micros = values.drop_null().cast(pa.int64()).to_numpy()
            # DateTimeUtils.microsToMillis is Math.floorDiv: rounds toward negative infinity.
            return plain.hash_values(np.floor_divide(micros, _MICROS_PER_MILLI), "INT64")
        return plain.hash_values(values, "INT64")
    if pa.types.is_decimal(t):
        physical_type, type_length = _decimal_storage(t.precision, layout.legacy_decimal)
        return plain.hash_values(values, physical_type, type_length=type_length)
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        _check_micros(t)
    for matches, physical_type in _ARROW_STORAGE:
        if matches(t):
            return plain.hash_values(values, physical_type)
    raise TypeError(
        f"cannot hash Arrow type {t} from Spark: supported Spark types are {_SUPPORTED_TYPES}"
    )


def _check_micros(arrow_type: Any) -> None:
    if arrow_type.unit != "us":  # Spark's time types are microseconds; anything else is not Spark
        raise TypeError(f"expected microseconds from Spark, got Arrow type {arrow_type}")


# -- building -----------------------------------------------------------------------------------


def build_filter(
    df: DataFrame,
    column: str | Column,
    fpp: float = 0.01,
    ndv: int | None = None,
    *,
    num_bytes: int | None = None,
) -> SplitBlockBloomFilter:
    """Build the Bloom filter of one column of ``df`` on the executors.

    Args:
        df: any DataFrame (cache it first if it is expensive and ``ndv`` is None: sizing
            scans it once more).
        column: a column name or a Column expression of a supported type (module docstring).
        fpp: the false-positive rate the filter is sized for.
        ndv: the number of distinct values to size for; None sizes the filter from the data
            (one more scan; see "Sizing" in the module docstring).
        num_bytes: build at exactly this size (a power of two from 32 B to 128 MiB) instead,
            e.g. to compare with, or replace, a filter of that size in a file.

    Returns:
        the filter, bit for bit the :class:`SplitBlockBloomFilter` of that size after
        inserting every non-null value of the column, hashed as Spark writes it to Parquet.
    """
    (bloom_filter,) = build_filters(df, [column], fpp, ndv, num_bytes=num_bytes).values()
    return bloom_filter


def build_filters(
    df: DataFrame,
    columns: Sequence[str | Column],
    fpp: float = 0.01,
    ndv: int | Mapping[str, int] | None = None,
    *,
    num_bytes: int | Mapping[str, int] | None = None,
) -> dict[str, SplitBlockBloomFilter]:
    """:func:`build_filter` for several columns in one scan of ``df``.

    Returns the filters keyed by the name each column has in ``df.select(*columns)``. ``ndv``
    and ``num_bytes`` are one value for every column or a mapping from those names; columns
    missing from an ``ndv`` mapping are sized from the data, with one sizing job for all.
    """
    if ndv is not None and num_bytes is not None:
        raise ValueError("give ndv or num_bytes, not both")
    if isinstance(columns, str | Column):
        columns = [columns]
    for column in columns:
        if not isinstance(column, str | Column):
            raise TypeError(f"column must be a name or a Column, not {type(column).__name__}")
    if not columns:
        raise ValueError("build_filters needs at least one column")
    selected = df.select(*columns)
    names = list(selected.columns)
    if len(set(names)) != len(names):
        raise ValueError(f"columns must have distinct names, got {names}")
    for field, column in zip(selected.schema.fields, columns, strict=True):
        _check_spark_type(field.dataType, column)
    layout = _SparkLayout.of(df.sparkSession)  # a bad setting fails before the sizing scan
    sizes, fold = _sizes(selected, names, fpp, ndv, num_bytes)
    size_list = [sizes[name] for name in names]

    def build_partition(batches: Iterator[Any]) -> Iterator[Any]:
        yield from _partial_filters(batches, size_list, layout)

    with _without_pandas_warning():
        partials = selected.toDF(*_positional_names(len(names))).mapInArrow(
            build_partition, _PARTIAL_SCHEMA
        )
    with _arrow_batches_of_at_least(df.sparkSession, BUILD_BATCH_ROWS):
        merged = _combine(partials, sum(size_list))
    filters = {
        name: SplitBlockBloomFilter.from_bytes(merged[i])
        if i in merged
        else SplitBlockBloomFilter(sizes[name])
        for i, name in enumerate(names)
    }
    for name in fold:
        filters[name] = sizing.fold_to_fpp(filters[name], fpp)
    return filters


def _positional_names(n: int) -> list[str]:
    # Plain names for mapInArrow: the user's may hold dots or spaces.
    return [f"c{i}" for i in range(n)]


def _sizes(
    selected: DataFrame,
    names: list[str],
    fpp: float,
    ndv: int | Mapping[str, int] | None,
    num_bytes: int | Mapping[str, int] | None,
) -> tuple[dict[str, int], list[str]]:
    """Each column's build size, checked before the build runs, and the columns to fold after
    (sized for the row count; see "Sizing" in the module docstring)."""
    optimal_num_bytes(0, fpp)  # checks fpp
    if num_bytes is not None:
        sizes = _per_column(num_bytes, names, "num_bytes")
        if set(sizes) != set(names):
            raise ValueError(f"num_bytes has no size for {sorted(set(names) - set(sizes))}")
        for size in sizes.values():
            SplitBlockBloomFilter(size)  # checks the size
        return sizes, []
    known = {} if ndv is None else _per_column(ndv, names, "ndv")
    sizes = {name: optimal_num_bytes(n, fpp) for name, n in known.items()}
    missing = [name for name in names if name not in known]
    if not missing:
        return sizes, []
    rows, partitions = _rows_and_partitions(selected)
    row_bound = optimal_num_bytes(rows, fpp)
    shipped = partitions * (sum(sizes.values()) + row_bound * len(missing))
    if row_bound < MAX_NUM_BYTES and shipped <= MAX_COLLECT_BYTES:
        sizes.update(dict.fromkeys(missing, row_bound))
        return sizes, missing
    estimates = _estimate_ndv(selected, missing)
    sizes.update({name: optimal_num_bytes(n, fpp) for name, n in estimates.items()})
    return sizes, []


def _rows_and_partitions(selected: DataFrame) -> tuple[int, int]:
    """Rows, and partitions holding rows (each sends one partial), in one cheap JVM job."""
    per_partition = selected.groupBy(F.spark_partition_id()).count().collect()
    return sum(int(row[1]) for row in per_partition), len(per_partition)


def _per_column(value: int | Mapping[str, int], names: list[str], what: str) -> dict[str, int]:
    if isinstance(value, Mapping):
        unknown = set(value) - set(names)
        if unknown:
            raise ValueError(f"{what} names columns that are not built: {sorted(unknown)}")
        return dict(value)
    return dict.fromkeys(names, value)


def _estimate_ndv(selected: DataFrame, names: list[str]) -> dict[str, int]:
    """Spark's HyperLogLog++ estimates, padded (see NDV_RSD), in one job for all columns."""
    estimates = [F.approx_count_distinct(F.col(f"`{n}`"), rsd=NDV_RSD) for n in names]
    row = selected.select(*estimates).first()
    counts = [0] * len(names) if row is None else [int(v) for v in row]
    return {
        name: math.ceil(count * _NDV_PADDING) for name, count in zip(names, counts, strict=True)
    }


def _partial_filters(
    batches: Iterator[Any], num_bytes: list[int], layout: _SparkLayout
) -> Iterator[Any]:
    """Executor side: one partition's filter of each column, one row per column that had
    values: (column index, bitset)."""
    filters = [SplitBlockBloomFilter(n) for n in num_bytes]
    pending: list[list[npt.NDArray[np.uint64]]] = [[] for _ in num_bytes]
    inserted = [0] * len(num_bytes)
    num_pending = 0

    def flush() -> None:
        for i, hashes in enumerate(pending):
            if hashes:
                batch = np.concatenate(hashes)
                filters[i].insert_hashes(batch)
                inserted[i] += batch.size
                hashes.clear()

    for batch in batches:
        for i in range(batch.num_columns):
            hashes = _arrow_hashes(batch.column(i), layout)
            pending[i].append(hashes)
            num_pending += hashes.size
        if num_pending >= _INSERT_BATCH:
            flush()
            num_pending = 0
    flush()
    used = [i for i, n in enumerate(inserted) if n]
    if used:
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(used, type=pa.int32()),
                pa.array([filters[i].to_bytes() for i in used], type=pa.binary()),
            ],
            names=["column", "bitset"],
        )


def _or_bitsets(a: bytes, b: bytes) -> bytes:
    """The OR of two equally long bitsets: the filter of both sets of values."""
    return np.bitwise_or(np.frombuffer(a, np.uint64), np.frombuffer(b, np.uint64)).tobytes()


# Partial filters in flight: bitsets by column index. A column without values in a partition
# has no entry (an empty filter changes nothing in an OR).
_Bitsets = dict[int, bytes]


def _add_partial(merged: _Bitsets, partial: tuple[int, bytes]) -> _Bitsets:
    return _merge_partials(merged, dict([partial]))


def _merge_partials(a: _Bitsets, b: _Bitsets) -> _Bitsets:
    out = dict(a)
    for column, bitset in b.items():
        out[column] = bitset if column not in out else _or_bitsets(out[column], bitset)
    return out


def _tree_depth(num_partitions: int, partial_bytes: int) -> int:
    """The shallowest tree whose last level sends the driver at most MAX_COLLECT_BYTES:
    treeAggregate leaves about ``num_partitions ** (1 / depth)`` partials for the driver."""
    fan_in = max(MAX_COLLECT_BYTES // partial_bytes, 2)
    depth = 2
    while depth < _MAX_TREE_DEPTH and math.ceil(num_partitions ** (1.0 / depth)) > fan_in:
        depth += 1
    return depth


def _combine(partials: DataFrame, partial_bytes: int) -> _Bitsets:
    """OR the partial bitsets of each column: on the driver, or in a tree on the executors
    when the partitions' bitsets together exceed MAX_COLLECT_BYTES."""
    pairs = partials.rdd.map(lambda row: (int(row[0]), bytes(row[1])))
    num_partitions = pairs.getNumPartitions()
    if num_partitions * partial_bytes <= MAX_COLLECT_BYTES:
        # As Arrow, not as pickled rows: on the benchmark 0.1 s over the build's own time
        # against 0.9 s for collect() (the rows pass through a Python worker and a pickle).
        table = partials.toArrow()
        received = zip(table["column"].to_pylist(), table["bitset"].to_pylist(), strict=True)
        return functools.reduce(_add_partial, received, {})
    depth = _tree_depth(num_partitions, partial_bytes)
    merged: _Bitsets = pairs.treeAggregate({}, _add_partial, _merge_partials, depth=depth)
    return merged


@contextlib.contextmanager
def _arrow_batches_of_at_least(spark: Any, rows: int) -> Iterator[None]:
    """Raise the session's Arrow batch size for the duration of one of our jobs, then restore it.

    Spark hands mapInArrow 10,000 rows per batch by default, and per-batch costs on both sides
    of the pipe then dominate a build that does little per value: on the benchmark's 20 M rows,
    128 Ki-row batches cut ``build_filter`` from 7.4 s to 5.1 s. The setting is per session,
    so queries that other threads run on the same session meanwhile get the larger batches too
    (a memory, not a correctness, effect); it is never lowered.
    """
    before = spark.conf.get(MAX_RECORDS_PER_BATCH_CONF, None)
    if before is not None and (int(before) <= 0 or int(before) >= rows):
        yield  # unlimited (<= 0) or already large enough
        return
    spark.conf.set(MAX_RECORDS_PER_BATCH_CONF, str(rows))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(MAX_RECORDS_PER_BATCH_CONF)
        else:
            spark.conf.set(MAX_RECORDS_PER_BATCH_CONF, before)


@contextlib.contextmanager
def _without_pandas_warning() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PANDAS_WARNING, category=FutureWarning)
        yield


# -- probing ------------------------------------------------------------------------------------


def might_contain(
    bloom_filter: SplitBlockBloomFilter | Broadcast[SplitBlockBloomFilter],
    column: str | Column,
    *,
    spark: SparkSession | None = None,
) -> Column:
    """A boolean Column: False where the column's value is certainly not in ``bloom_filter``.

    Use it in ``df.filter(...)`` or ``withColumn``. Values are hashed as Spark writes the column
    (module docstring), so a filter from :func:`build_filter` or from a file Spark wrote over
    the same type answers correctly; a filter built over another type (an INT32 column probed
    with longs) does not. Nulls give False (a Bloom filter holds no nulls). Following Spark's
    equality, NaN gives True and a zero is looked up as both +0.0 and -0.0.

    Most types are probed by Spark's own expressions, in the JVM (module docstring, "Probing in
    Spark's expressions"); the rest (INT96 and TIMESTAMP_MILLIS timestamps, decimals not stored
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
    layout = _SparkLayout.of(session)
    values = F.col(column) if isinstance(column, str) else column
    # typeof() is folded to a constant once the plan is analysed, so Spark keeps one branch:
    # a column of a type hashed natively never reaches Python.
    return F.when(
        _hashed_by_spark(F.typeof(values), layout), _expression_probe(handle.value, values, session)
    ).otherwise(_arrow_probe(handle, values, layout))


def _arrow_probe(
    handle: Broadcast[SplitBlockBloomFilter], values: Column, layout: _SparkLayout
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


def _probe_batch(values: Any, bloom_filter: SplitBlockBloomFilter, layout: _SparkLayout) -> Any:
    """Executor side of the Arrow UDF: its answer for one Arrow batch."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    found = bloom_filter.find_hashes(_arrow_hashes(values, layout))
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


def _hashed_by_spark(type_name: Column, layout: _SparkLayout) -> Column:
    """Whether xxhash64 hashes a value of this type as its Parquet filter does."""
    names = _NATIVE_TYPE_NAMES + _DAY_TIME_INTERVALS
    if layout.timestamp_type == "TIMESTAMP_MICROS":
        names += ("timestamp",)
    native = type_name.isin(*names)
    return native if layout.legacy_decimal else native | type_name.rlike(_INT64_DECIMAL)


def _probe_function_sql() -> str:
    """The SBBF probe of BloomFilter.md as a SQL function of a hash and a filter's words.

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
    with _without_pandas_warning():
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
        _check_spark_type(data_type, key)
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


# -- auditing datasets --------------------------------------------------------------------------

INDEX_SCHEMA = T.StructType(
    [
        T.StructField("file", T.StringType(), False),
        T.StructField("row_group", T.IntegerType(), True),
        T.StructField("column", T.StringType(), True),
        T.StructField("physical_type", T.StringType(), True),
        T.StructField("num_values", T.LongType(), True),
        T.StructField("has_bloom_filter", T.BooleanType(), True),
        T.StructField("bloom_filter_offset", T.LongType(), True),
        T.StructField("bloom_filter_length", T.IntegerType(), True),
        T.StructField("num_bytes", T.IntegerType(), True),
        T.StructField("fraction_set", T.DoubleType(), True),
        T.StructField("estimated_ndv", T.DoubleType(), True),
        T.StructField("fpp", T.DoubleType(), True),
        T.StructField("error", T.StringType(), True),
    ]
)
"""Schema of :func:`bloom_filter_index`: one row per (file, row group, column chunk).

``has_bloom_filter``: the footer gives the chunk a filter offset. ``bloom_filter_length`` is
null in files from before format 2.10. ``num_bytes`` (bitset size), ``fraction_set`` (fraction of
bits that are 1), ``estimated_ndv`` (distinct values that explain the bits set) and ``fpp``
(false-positive rate implied by the bits set) are null without a usable filter. ``error`` says
why a filter (or, with null ``row_group`` and ``column``, a whole file) could not be read."""

ROW_GROUPS_SCHEMA = T.StructType(
    [
        T.StructField("file", T.StringType(), False),
        T.StructField("row_group", T.IntegerType(), False),
    ]
)
"""Schema of :func:`files_might_contain`: the (file, row group) pairs that must be read."""


def bloom_filter_index(
    spark: SparkSession,
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    storage_options: dict[str, Any] | None = None,
) -> DataFrame:
    """A DataFrame (:data:`INDEX_SCHEMA`) describing every column chunk's Bloom filter.

    ``paths``: Parquet files and directories (searched recursively, skipping names that Spark
    skips: starting with ``.``, or with ``_`` unless they contain ``=``), local or fsspec URLs
    (``s3://...``; ``storage_options`` are passed to fsspec on the executors). Files are listed
    on the driver and read on the executors; a file that cannot be read gives one row with its
    ``error`` rather than failing the job.
    """
    files = _list_files(paths, storage_options)
    options = dict(storage_options or {})

    def index(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            rows = [
                row for file in batch.column(0).to_pylist() for row in _index_file(file, options)
            ]
            yield pa.RecordBatch.from_pylist(rows, schema=_INDEX_ARROW_SCHEMA)

    return _over_files(spark, files, index, INDEX_SCHEMA)


def files_might_contain(
    spark: SparkSession,
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    column: str,
    values: Any,
    *,
    storage_options: dict[str, Any] | None = None,
) -> DataFrame:
    """The (file, row group) pairs (:data:`ROW_GROUPS_SCHEMA`) that may hold ``column IN values``.

    ``column`` is the Parquet column's dotted path; ``values`` are Python literals, encoded per
    file through the column's Parquet type (:func:`parquet_bloom._logical.literal_probe`). A row
    group is dropped only when its filter proves that no value is there: row groups without a
    filter, with an unreadable one, with a null or NaN literal, and every row group of a file
    without the column are kept. ``paths`` and ``storage_options`` as in
    :func:`bloom_filter_index`; an unreadable file fails the job, since its row groups cannot be
    listed.
    """
    if not isinstance(column, str):
        raise TypeError(f"column must be a dotted path string, not {type(column).__name__}")
    files = _list_files(paths, storage_options)
    options = dict(storage_options or {})
    if files:  # literals that cannot be compared with the column fail here, not on an executor
        with _open_reader(files[0], options) as reader:
            leaf = _leaf(reader, column)
            if leaf is not None:
                literal_probe(values, leaf)

    def prune(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            pairs = [
                (file, row_group)
                for file in batch.column(0).to_pylist()
                for row_group in _row_groups_to_read(file, column, values, options)
            ]
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([file for file, _ in pairs], type=pa.string()),
                    pa.array([rg for _, rg in pairs], type=pa.int32()),
                ],
                schema=_ROW_GROUPS_ARROW_SCHEMA,
            )

    return _over_files(spark, files, prune, ROW_GROUPS_SCHEMA)


_INDEX_ARROW_SCHEMA = pa.schema(
    [
        pa.field("file", pa.string(), False),
        ("row_group", pa.int32()),
        ("column", pa.string()),
        ("physical_type", pa.string()),
        ("num_values", pa.int64()),
        ("has_bloom_filter", pa.bool_()),
        ("bloom_filter_offset", pa.int64()),
        ("bloom_filter_length", pa.int32()),
        ("num_bytes", pa.int32()),
        ("fraction_set", pa.float64()),
        ("estimated_ndv", pa.float64()),
        ("fpp", pa.float64()),
        ("error", pa.string()),
    ]
)
_ROW_GROUPS_ARROW_SCHEMA = pa.schema(
    [pa.field("file", pa.string(), False), pa.field("row_group", pa.int32(), False)]
)


def _over_files(
    spark: SparkSession,
    files: list[str],
    work: Callable[[Iterator[Any]], Iterator[Any]],
    schema: Any,
) -> DataFrame:
    """Run ``work`` over the file list, spread over the cluster's cores."""
    context = spark.sparkContext
    num_slices = max(1, min(len(files), 2 * context.defaultParallelism))
    jobs = spark.createDataFrame(
        context.parallelize([(f,) for f in files], num_slices), "file string"
    )
    with _without_pandas_warning():
        result: DataFrame = jobs.mapInArrow(work, schema)
    return result


def _is_url(path: str) -> bool:
    return "://" in path


def _list_files(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    storage_options: dict[str, Any] | None,
) -> list[str]:
    """The data files under ``paths``, sorted, with Spark's rule for hidden names."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    files: list[str] = []
    for entry in paths:
        path = os.fspath(entry)
        if not isinstance(path, str):
            raise TypeError(f"paths must be strings or path-like, not {type(entry).__name__}")
        if _is_url(path):
            files.extend(_list_url(path, storage_options or {}))
        elif os.path.isdir(path):
            for directory, subdirs, names in os.walk(path):
                subdirs[:] = sorted(d for d in subdirs if not _hidden(d))
                files.extend(os.path.join(directory, n) for n in names if not _hidden(n))
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise FileNotFoundError(f"no file or directory {path!r}")
    return sorted(dict.fromkeys(files))


def _list_url(url: str, storage_options: dict[str, Any]) -> list[str]:
    filesystem, root = _url_to_fs(url, storage_options)
    if not filesystem.isdir(root):
        if not filesystem.isfile(root):
            raise FileNotFoundError(f"no file or directory {url!r}")
        return [url]
    found = []
    prefix = root.rstrip("/") + "/"
    for path in filesystem.find(root):
        relative = path[len(prefix) :] if path.startswith(prefix) else path
        if not any(_hidden(part) for part in relative.split("/")):
            found.append(filesystem.unstrip_protocol(path))
    return found


def _hidden(name: str) -> bool:
    """Spark's HadoopFSUtils.shouldFilterOutPathName (without the _metadata summary files,
    which are not data files either)."""
    return (
        (name.startswith("_") and "=" not in name)
        or name.startswith(".")
        or name.endswith("._COPYING_")
    )


def _url_to_fs(url: str, storage_options: dict[str, Any]) -> tuple[Any, str]:
    try:
        import fsspec.core
    except ImportError as err:
        raise ImportError(
            f"reading {url!r} needs fsspec: pip install 'parquet-bloom[fsspec]'"
        ) from err
    filesystem, path = fsspec.core.url_to_fs(url, **storage_options)
    return filesystem, path


def _open_reader(file: str, storage_options: dict[str, Any]) -> BloomFilterReader:
    if _is_url(file):
        filesystem, path = _url_to_fs(file, storage_options)
        return BloomFilterReader(path, filesystem=filesystem)
    return BloomFilterReader(file)


def _leaf(reader: BloomFilterReader, column: str) -> fmt.SchemaLeaf | None:
    for leaf in reader.schema_leaves:
        if leaf.path == column:
            return leaf
    return None


def _index_file(file: str, storage_options: dict[str, Any]) -> list[dict[str, Any]]:
    """Executor side: the index rows of one file."""
    try:
        reader = _open_reader(file, storage_options)
    except (BloomFilterError, OSError) as err:
        return [{"file": file, "error": f"{type(err).__name__}: {err}"}]
    with reader:
        try:
            filters, failed = reader.filters_with_errors()
        except OSError as err:
            return [{"file": file, "error": f"{type(err).__name__}: {err}"}]
        rows = []
        for chunk in reader.column_chunks:
            row: dict[str, Any] = {
                "file": file,
                "row_group": chunk.row_group,
                "column": chunk.path,
                "physical_type": chunk.physical_type,
                "num_values": chunk.num_values,
                "has_bloom_filter": chunk.bloom_filter_offset is not None,
                "bloom_filter_offset": chunk.bloom_filter_offset,
                "bloom_filter_length": chunk.bloom_filter_length,
            }
            key = (chunk.row_group, chunk.path)
            bloom_filter = filters.get(key)
            if key in failed:
                row["error"] = f"{type(failed[key]).__name__}: {failed[key]}"
            if bloom_filter is not None:
                row["num_bytes"] = bloom_filter.num_bytes
                row["fraction_set"] = bloom_filter.fraction_set()
                row["estimated_ndv"] = bloom_filter.estimate_ndv()
                row["fpp"] = bloom_filter.fpp()
            rows.append(row)
    return rows


def _row_groups_to_read(
    file: str, column: str, values: Any, storage_options: dict[str, Any]
) -> list[int]:
    """Executor side: the row groups of one file that may hold one of ``values``."""
    with _open_reader(file, storage_options) as reader:
        every = list(range(reader.num_row_groups))
        if _leaf(reader, column) is None:
            return every  # not this file's column: kept, pruning never guesses
        try:
            # An unusable filter keeps its row group (the reader warns; on an executor no one
            # would read it); the others still prune.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", BloomFilterWarning)
                return reader.row_groups_might_contain(column, values)
        except OSError:
            return every

"""Building Parquet Bloom filters over Spark DataFrames, on the executors.

Each partition hashes its values (:func:`parquet_bloom.spark._types.arrow_hashes`) inside
``mapInArrow`` (Arrow batches, no Python per row) and inserts them into a partial filter of the
final size; the partial bitsets are OR-ed, which is exact, so the result is the filter a local
:class:`SplitBlockBloomFilter` of that size would hold after inserting the same values, whatever
the partitioning.

Partial filters must all have the final size before any value is inserted (OR needs equal sizes,
and a filter cannot grow), so a build without ``ndv`` sizes the filter with one more scan: either
it counts the rows, builds every partial at the size for that many values and folds the union
down to the smallest size the bits set allow (:func:`parquet_bloom._sizing.fold_to_fpp`, exact),
or, when partials sized for the rows would not fit in :data:`MAX_COLLECT_BYTES` or the rows would
saturate the largest filter, it estimates the distinct count with ``approx_count_distinct``. The
partials are collected and OR-ed on the driver when they fit in :data:`MAX_COLLECT_BYTES`, and
OR-ed on the executors by ``treeAggregate`` otherwise. docs/spark.md says more on each choice.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from parquet_bloom import _sizing as sizing
from parquet_bloom._sbbf import MAX_NUM_BYTES, SplitBlockBloomFilter, optimal_num_bytes
from parquet_bloom.spark._types import (
    SparkLayout,
    arrow_hashes,
    check_spark_type,
    without_pandas_warning,
)

if TYPE_CHECKING:
    import numpy.typing as npt

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

_PARTIAL_SCHEMA = "column int, bitset binary"


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
        column: a column name or a Column expression of a supported type (docs/spark.md).
        fpp: the false-positive rate the filter is sized for.
        ndv: the number of distinct values to size for; None sizes the filter from the data
            (one more scan; see the sizing section of docs/spark.md).
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
        check_spark_type(field.dataType, column)
    layout = SparkLayout.of(df.sparkSession)  # a bad setting fails before the sizing scan
    sizes, fold = _sizes(selected, names, fpp, ndv, num_bytes)
    size_list = [sizes[name] for name in names]

    def build_partition(batches: Iterator[Any]) -> Iterator[Any]:
        yield from _partial_filters(batches, size_list, layout)

    with without_pandas_warning():
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
    (sized for the row count; see the module docstring)."""
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
    batches: Iterator[Any], num_bytes: list[int], layout: SparkLayout
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
            hashes = arrow_hashes(batch.column(i), layout)
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


def tree_depth(num_partitions: int, partial_bytes: int) -> int:
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
    depth = tree_depth(num_partitions, partial_bytes)
    merged: _Bitsets = pairs.treeAggregate({}, _add_partial, _merge_partials, depth=depth)
    return merged


@contextlib.contextmanager
def _arrow_batches_of_at_least(spark: Any, rows: int) -> Iterator[None]:
    """Raise the session's Arrow batch size for the duration of one of our jobs, then restore it.

    Spark hands mapInArrow 10,000 rows per batch by default, and per-batch costs on both sides
    of the pipe then dominate a build that does little per value, which larger batches cut
    (docs/performance.md). The setting is per session, so queries that other threads run on the
    same session meanwhile get the larger batches too (a memory, not a correctness, effect); it
    is never lowered.
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

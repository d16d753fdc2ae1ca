"""Building Parquet Bloom filters over Spark DataFrames, on the executors.

Each map task hashes its values (:func:`parquet_bloom.spark._types.arrow_hashes`) inside
``mapInArrow`` (Arrow batches, no Python per row); the tasks' partial filters are combined on the
executors by a reduce-scatter (:mod:`parquet_bloom.spark._slices`: slices of the filter shuffled
by slice index and OR-ed there), so the driver receives each filter's bytes once, whatever the
partitioning. OR-ing is exact: the result is the filter a local :class:`SplitBlockBloomFilter` of
that size would hold after inserting the same values. The DataFrame is coalesced to at most
:data:`MAP_TASKS_PER_CORE` map tasks per core first: a Python task has a fixed cost, which
hundreds of small partitions would otherwise pay each.

Partial filters must all have the final size before any value is inserted (OR needs equal sizes,
and a filter cannot grow), so a build without ``ndv`` sizes the filter with one more scan: either
it counts the rows, builds at the size for that many values and folds the result down to the
smallest size the bits set allow (:func:`parquet_bloom._sizing.fold_to_fpp`, exact), or, when
filters sized for the rows would exceed :data:`MAX_FOLD_BYTES` or the rows would saturate the
largest filter, it estimates the distinct count with ``approx_count_distinct``. docs/spark.md
says more on each choice.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

from parquet_bloom import _sizing as sizing
from parquet_bloom._sbbf import MAX_NUM_BYTES, SplitBlockBloomFilter, optimal_num_bytes
from parquet_bloom.spark import _jvm
from parquet_bloom.spark import _slices as slices
from parquet_bloom.spark._functions import create_sql_functions
from parquet_bloom.spark._types import (
    SparkLayout,
    check_spark_type,
    sql_hash,
    without_pandas_warning,
)

# approx_count_distinct's relative standard deviation when ndv is not given. 1 % costs Spark
# 2**14 HyperLogLog++ registers a column in every task, whose setup and merge outweigh hashing
# thousands of rows (see _estimate_ndv); the estimate is padded by three deviations so that it
# undershoots the true count with probability about 0.1 %.
NDV_RSD = 0.01
_NDV_PADDING = 1.0 + 3 * NDV_RSD

# Rows per Arrow batch that the build asks Spark for (see _arrow_batches_of_at_least). The
# build's batches hold only the columns being built: 128 Ki fixed-width values are at most 2 MiB
# a column (16-byte decimals); Spark also ends a batch at spark.sql.execution.arrow.
# maxBytesPerBatch (64 MiB by default), which bounds batches of long strings. 1 Mi rows a batch
# was no faster (docs/performance.md).
MAX_RECORDS_PER_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"
BUILD_BATCH_ROWS = 1 << 17

# Most bytes of filters sized for the row count (count and fold, see the module docstring): the
# driver holds twice what it receives. Above it the distinct count is estimated instead.
MAX_FOLD_BYTES = 256 * 1024 * 1024

# Map tasks per core (the context's defaultParallelism) that the build's input is coalesced to.
MAP_TASKS_PER_CORE = 1


def build_filter(
    df: DataFrame,
    column: str | Column,
    fpp: float = 0.01,
    ndv: int | None = None,
    *,
    num_bytes: int | None = None,
    jvm: bool | None = None,
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
        jvm: whether to build with the JVM accelerator (:func:`jar_path`; docs/spark.md):
            None does where the session has its jar, False never, True requires it. The
            filter is the same, bit for bit, either way.

    Returns:
        the filter, bit for bit the :class:`SplitBlockBloomFilter` of that size after
        inserting every non-null value of the column, hashed as Spark writes it to Parquet.
    """
    (bloom_filter,) = build_filters(df, [column], fpp, ndv, num_bytes=num_bytes, jvm=jvm).values()
    return bloom_filter


def build_filters(
    df: DataFrame,
    columns: Sequence[str | Column],
    fpp: float = 0.01,
    ndv: int | Mapping[str, int] | None = None,
    *,
    num_bytes: int | Mapping[str, int] | None = None,
    jvm: bool | None = None,
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
    accelerator = _jvm.accelerator(df.sparkSession, jvm)
    sizes, fold = _sizes(selected, names, fpp, ndv, num_bytes)
    plans = slices.slice_plans([sizes[name] for name in names])
    positional = selected.toDF(*_positional_names(len(names)))
    if accelerator is None:
        merged = reduce_scatter(positional, plans, layout)
    else:
        merged = jvm_reduce_scatter(accelerator, positional, plans, layout)
    with _arrow_batches_of_at_least(df.sparkSession, BUILD_BATCH_ROWS):
        received = collect_batches(merged)
    filters = dict(zip(names, slices.assemble(received, plans), strict=True))
    for name in fold:
        filters[name] = sizing.fold_to_fpp(filters[name], fpp)
    return filters


def reduce_scatter(
    selected: DataFrame, plans: list[slices.SlicePlan], layout: SparkLayout
) -> DataFrame:
    """The job that builds the filters' slices: map tasks (MAP_TASKS_PER_CORE a core) send
    theirs, shuffled by slice index to reduce tasks (one a core at most), which OR them (see
    the _slices module)."""
    num_slices = plans[-1].first + plans[-1].num_slices
    reducers = _reducers(selected, plans)

    def map_task(batches: Iterator[Any]) -> Iterator[Any]:
        yield from slices.partition_slices(batches, plans, layout)

    def reduce_task(batches: Iterator[Any]) -> Iterator[Any]:
        yield from slices.or_slices(batches, plans)

    with without_pandas_warning():
        sliced = _coalesced(selected).mapInArrow(map_task, slices.SLICES_SCHEMA)
        return sliced.repartitionById(
            reducers, slices.slice_range_partition(reducers, num_slices)
        ).mapInArrow(reduce_task, slices.MERGED_SCHEMA)


def jvm_reduce_scatter(
    accelerator: Any, selected: DataFrame, plans: list[slices.SlicePlan], layout: SparkLayout
) -> DataFrame:
    """The same job with the JVM accelerator (parquet_bloom.spark._jvm): Spark's own
    expressions hash the values (sql_hash), Java map tasks insert the hashes and Java reduce
    tasks OR the slices (SliceBuild.java), with the same slices, sizes and thresholds; its rows
    are the same MERGED_SCHEMA rows. Values are hashed by the bytes Spark stores, where
    ``sql_hash`` follows Spark's equality instead: strings of another collation by their bytes,
    floats and doubles by their raw bits (-0.0 and every NaN as they are)."""
    session = selected.sparkSession
    create_sql_functions(session)
    hashes = []
    for field in selected.schema.fields:
        values = F.col(f"`{field.name}`")
        if isinstance(field.dataType, T.FloatType | T.DoubleType):
            bits = "floatBits" if isinstance(field.dataType, T.FloatType) else "doubleBits"
            hashes.append(_jvm.java_hash(accelerator, bits, values).alias(field.name))
            continue
        if getattr(field.dataType, "collation", "UTF8_BINARY") != "UTF8_BINARY":
            values = F.collate(values, "UTF8_BINARY")
        hashes.append(sql_hash(values, layout, accelerator).alias(field.name))
    built = accelerator.SliceBuild.build(
        _coalesced(selected.select(*hashes))._jdf,
        [plan.num_bytes for plan in plans],
        [plan.slice_bits for plan in plans],
        [plan.max_hashes for plan in plans],
        _reducers(selected, plans),
    )
    return ClassicDataFrame(built, session)


def collect_batches(df: DataFrame) -> list[Any]:
    """``df``'s rows as the Arrow batches Spark sent, each holding its own memory, so that
    assemble can hand each back as it goes (the driver then holds about one copy of the
    filters). ``toArrow`` makes a Table of them, cast to the schema, whose batches keep each
    other's memory until the last is gone (measured: two copies at the peak); pyspark's
    ``_collect_as_arrow``, under it since pyspark 2.3, returns them as they came."""
    collect = getattr(df, "_collect_as_arrow", None)
    if collect is None:  # not in this pyspark: the Table's batches, at two copies' peak
        return list(df.toArrow().to_batches())
    batches: list[Any] = collect()
    return batches


def _reducers(df: DataFrame, plans: list[slices.SlicePlan]) -> int:
    """Reduce tasks of a build: one a core, at most one a slice."""
    return min(plans[-1].first + plans[-1].num_slices, _cores(df))


def _cores(df: DataFrame) -> int:
    return max(int(df.sparkSession.sparkContext.defaultParallelism), 1)


def _coalesced(df: DataFrame) -> DataFrame:
    """``df`` in at most MAP_TASKS_PER_CORE tasks a core: a Python task, or a HyperLogLog++
    buffer, costs the same whether its partition holds a row or a million."""
    return df.coalesce(_cores(df) * MAP_TASKS_PER_CORE)


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
    row_bound = optimal_num_bytes(selected.count(), fpp)
    received = sum(sizes.values()) + row_bound * len(missing)
    if row_bound < MAX_NUM_BYTES and received <= MAX_FOLD_BYTES:
        sizes.update(dict.fromkeys(missing, row_bound))
        return sizes, missing
    estimates = _estimate_ndv(selected, missing)
    sizes.update({name: optimal_num_bytes(n, fpp) for name, n in estimates.items()})
    return sizes, []


def _per_column(value: int | Mapping[str, int], names: list[str], what: str) -> dict[str, int]:
    if isinstance(value, Mapping):
        unknown = set(value) - set(names)
        if unknown:
            raise ValueError(f"{what} names columns that are not built: {sorted(unknown)}")
        return dict(value)
    return dict.fromkeys(names, value)


def _estimate_ndv(selected: DataFrame, names: list[str]) -> dict[str, int]:
    """Spark's HyperLogLog++ estimates, padded (see NDV_RSD), in one job for all columns, over
    the DataFrame coalesced as for the build: a task's sketches cost the same however few rows
    it has."""
    estimates = [F.approx_count_distinct(F.col(f"`{n}`"), rsd=NDV_RSD) for n in names]
    row = _coalesced(selected).select(*estimates).first()
    counts = [0] * len(names) if row is None else [int(v) for v in row]
    return {
        name: math.ceil(count * _NDV_PADDING) for name, count in zip(names, counts, strict=True)
    }


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

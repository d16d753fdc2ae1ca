"""Building a Bloom index (docs/index.md) with the per-file work on Spark's executors.

The index is the one :func:`parquet_bloom.index.build_index` and
:func:`parquet_bloom.delta.build_index` write, blob for blob; only where the work runs differs:

1. The driver lists the files (a dataset's, or a Delta snapshot's) and ships each task a few
   small picklable descriptions (:class:`~parquet_bloom._index.files.IndexedFile`).
2. **Tails** (one job, its result kept on the executors): each map task reads its files' footers
   and filters (no data; a few files at a time on the read threads) and returns, per file, one
   row of metadata (rows a row group, the column's type, each filter's size, or why the footer
   could not be read) and one row per row group and column with the filter's bitset. Only the
   metadata rows are collected: the driver orders each size class's row groups (its entries),
   exactly as the local build does (:func:`~parquet_bloom._index.build.segment_blobs`).
   With ``from_data``, a second job reads again the files with row groups to build (N, the row
   groups, now known, sizes them) and builds their filters from the values; its rows replace
   those files' rows of the first (:func:`_with_built`).
3. **Slices** (one job, kept on the executors): each class's blocks are cut into block ranges
   (:func:`range_plan`), one reduce task each. Map tasks cut the kept bitsets into their ranges'
   pieces, one row per Arrow batch, class and range; the rows are shuffled by range
   (``repartitionById``, as :mod:`parquet_bloom.spark._slices` shuffles a filter's slices), and
   each reduce task lays its range's pieces in the class's order and transposes them into the
   range's slices (:func:`parquet_bloom._index.slices.slices_of` on that sub-array of blocks:
   the layout is block-major, so the ranges' slices end to end are the class's blob).
4. The driver fetches the slices one range (one partition) at a time, in order, and writes
   each straight into the Puffin file (:func:`~parquet_bloom._index.build.write_blobs`), then
   the pointer of an index directory.

Driver memory: the files' metadata (a few hundred bytes a file and column, as the local build),
and one range's slices, at most :data:`MAX_RANGE_BYTES` (a range is at least one block, though:
``32 x N`` bytes for a class of N row groups), held once by the driver's JVM and at most once
more by Python while it is written.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from parquet_bloom._index import slices, store
from parquet_bloom._index.build import (
    FileRead,
    FromData,
    IndexBuildReport,
    Segment,
    check_columns,
    check_from_data,
    check_read_columns,
    create_index_with,
    data_sizing,
    filters_from_data,
    needs_data,
    read_file,
    segment_blobs,
    write_blobs,
)
from parquet_bloom._index.files import IndexedFile, dataset_files
from parquet_bloom._rewrite.build import Sizing
from parquet_bloom._sbbf import BYTES_PER_BLOCK, WORDS_PER_BLOCK
from parquet_bloom._threads import READ_THREADS, read_pool
from parquet_bloom.spark._build import MAX_RECORDS_PER_BATCH_CONF, collect_batches
from parquet_bloom.spark._types import without_pandas_warning

__all__ = ["MAX_RANGE_BYTES", "build_index", "range_plan"]

# The most bytes of slices one block range holds: a reduce task holds its range twice (the
# pieces and the slices), the driver one range at a time. 64 MiB keeps both small while a range
# is enough work for a task to outweigh its cost. A range is at least one block of its class,
# ``256 x ceil(N / 8)`` bytes: over the bound for a class of more than 2 million row groups.
MAX_RANGE_BYTES = 64 << 20

# Files a map task of the tails job reads: enough that a task's cost is spread over many
# files, few enough that 10^5 files make thousands of tasks to balance.
FILES_PER_TASK = 64

# Files a map task reads at once (on the read threads) and holds the filters of.
_FILES_AT_ONCE = READ_THREADS

# The bytes of bitsets a map task of the slices job is handed at once (an Arrow batch): Spark's
# 10,000 rows a batch would be 10 GiB of 1 MiB filters. The task holds the batch and its pieces.
PIECES_BATCH_BYTES = 64 << 20
_SPARK_RECORDS_PER_BATCH = 10_000  # Spark's default maxRecordsPerBatch

# Rows of the tails job: per file one row of metadata (column and row_group -1, payload its
# JSON), and per column and row group with a filter one row (payload the bitset).
TAILS_SCHEMA = "file int, column int, row_group int, payload binary"
# Rows the slices job shuffles: the pieces (``blocks`` of each filter in the range) of some of
# a class's members, at ``positions`` (little-endian int64) in the class's order.
PIECES_SCHEMA = "range int, positions binary, payload binary"
# Rows it returns: a range's slices, in parts (one per pass of the transposition).
RANGE_SLICES_SCHEMA = "range int, part int, payload binary"

_NO_COLUMN = -1


@dataclass(frozen=True)
class ClassRanges:
    """One size class of one column as the slices job cuts it: its filters' ``num_bytes``, its
    ``row_groups`` (N), and ``num_ranges`` ranges of ``blocks_per_range`` blocks (the last may
    be shorter), numbered from ``first_range``."""

    num_bytes: int
    row_groups: int
    blocks_per_range: int
    num_ranges: int
    first_range: int

    @property
    def num_blocks(self) -> int:
        return self.num_bytes // BYTES_PER_BLOCK

    def blocks(self, r: int) -> tuple[int, int]:
        """The blocks ``[start, stop)`` of range ``r`` (counted within the class)."""
        start = r * self.blocks_per_range
        return start, min(start + self.blocks_per_range, self.num_blocks)


def range_plan(classes: Sequence[tuple[int, int]], reduce_tasks: int) -> list[ClassRanges]:
    """How the slices job cuts classes of ``(num_bytes, row_groups)``: into about
    ``reduce_tasks`` block ranges of equal bytes of slices, at least one a class, at most one a
    block, each at most :data:`MAX_RANGE_BYTES` where one block is not larger."""
    if reduce_tasks < 1:
        raise ValueError(f"reduce_tasks must be at least 1, not {reduce_tasks}")
    block_bytes = [256 * slices.slice_bytes(n) for _, n in classes]
    blocks = [num_bytes // BYTES_PER_BLOCK for num_bytes, _ in classes]
    total = sum(b * z for b, z in zip(block_bytes, blocks, strict=True))
    target = min(MAX_RANGE_BYTES, max(1, math.ceil(total / reduce_tasks)))
    out = []
    first = 0
    for b, (num_bytes, n) in zip(block_bytes, classes, strict=True):
        z = num_bytes // BYTES_PER_BLOCK
        k = min(max(1, target // b), z)
        count = -(-z // k)
        out.append(ClassRanges(num_bytes, n, k, count, first))
        first += count
    return out


@dataclass
class _Placement:
    """What the slices job's map tasks need, broadcast: each file's first row group in one
    numbering of all the files' row groups, and per column each row group's class (an index
    into ``classes``; -1: none) and position in it."""

    first: npt.NDArray[np.int64]
    klass: list[npt.NDArray[np.int32]]
    position: list[npt.NDArray[np.int64]]
    classes: list[ClassRanges] = field(default_factory=list)


def build_index(
    spark: SparkSession,
    table_or_dataset: Any,
    columns: Sequence[str],
    *,
    index_location: str | os.PathLike[str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    index_storage_options: Mapping[str, Any] | None = None,
    version: int | None = None,
    reduce_tasks: int | None = None,
    from_data: FromData = None,
    fpp: float | None = None,
) -> IndexBuildReport:
    """Build a Bloom index of ``columns`` with the files read and the filters transposed on the
    executors: the index :func:`parquet_bloom.index.build_index` (with ``index_location``) or
    :func:`parquet_bloom.delta.build_index` (without) would write, blob for blob.

    Args:
        spark: a classic SparkSession.
        table_or_dataset: with ``index_location``, a dataset as
            :func:`parquet_bloom.index.build_index` takes it (a file, a directory, a prefix or
            glob, or a list of them); without, a Delta table (its URI or path, or a
            ``deltalake.DeltaTable``), whose index goes to ``<table>/_bloom_index/``, or a
            pyiceberg ``Table``, whose index of its current snapshot is registered as that
            snapshot's statistics file (:func:`parquet_bloom.iceberg.build_index`).
        columns: the columns to index (dotted paths).
        index_location: where a dataset's index goes: one Puffin file when the name ends in
            ``.puffin``, else an index directory (a segment and its pointer).
        storage_options: fsspec's for a dataset's files, shipped to the executors with the
            files; deltalake's for a Delta table (the files' are derived from them, as the
            local build does).
        index_storage_options: fsspec's for a dataset's index (default ``storage_options``).
        version: a Delta table's version (default the latest).
        reduce_tasks: about how many block ranges (one reduce task each) the slices are cut
            into; default one a core. Never more than one a block, at least one a class, and
            never a range of more than :data:`MAX_RANGE_BYTES` where a block is smaller.
        from_data: also build filters from the values on the executors, for the row groups
            without one (``"missing"``) or for every row group (``"all"``), as the local build
            does: a second job reads those files' column chunks, after the tails have told
            how many row groups there are.
        fpp: the false-positive rate of the filters built from the values (default about
            1/N for the N row groups indexed: about one false candidate a lookup).

    Returns:
        the report of the local build (its ``reads`` and ``bytes_read`` are the executors').

    Raises ValueError for no column, or a column no file has. A file that cannot be fetched
    fails its task, and so the job and the build (nothing is written; Spark's error carries
    the file's); a file whose footer cannot be read is a whole file every lookup returns.
    """
    wanted = check_columns(columns)
    check_from_data(from_data, fpp)
    data = (from_data, fpp)
    if reduce_tasks is not None and reduce_tasks < 1:
        raise ValueError(f"reduce_tasks must be at least 1, not {reduce_tasks}")
    tasks = reduce_tasks or max(int(spark.sparkContext.defaultParallelism), 1)
    if type(table_or_dataset).__module__.startswith("pyiceberg"):
        if index_location is not None or index_storage_options is not None or version is not None:
            raise ValueError(
                "an Iceberg table's index goes to its metadata, for its current snapshot: "
                "leave index_location, index_storage_options and version out"
            )
        return _build_iceberg(spark, table_or_dataset, wanted, storage_options, tasks, data)
    if index_location is None:
        if index_storage_options is not None:
            raise ValueError("a Delta table's index takes the table's storage_options")
        return _build_delta(spark, table_or_dataset, wanted, storage_options, version, tasks, data)
    if version is not None:
        raise ValueError("version= is a Delta table's; a dataset's index takes index_location")
    if type(table_or_dataset).__module__.startswith("deltalake"):
        raise ValueError(
            "a Delta table's index goes to <table>/_bloom_index/: leave index_location out"
        )
    files = dataset_files(table_or_dataset, storage_options)
    options = storage_options if index_storage_options is None else index_storage_options
    target = os.fspath(index_location)
    what = (
        os.fspath(table_or_dataset)
        if isinstance(table_or_dataset, str | os.PathLike)
        else "the dataset"
    )
    write = partial(_write_segment, spark, files, wanted, options, what, tasks, data)
    if store.is_single_file(target):
        report, _ = write(target)
        return report
    return create_index_with(target, wanted, options, write)


def _build_delta(
    spark: SparkSession,
    table_or_uri: Any,
    columns: list[str],
    storage_options: Mapping[str, Any] | None,
    version: int | None,
    reduce_tasks: int,
    data: tuple[FromData, float | None],
) -> IndexBuildReport:
    from parquet_bloom._tables import delta_index
    from parquet_bloom._tables.delta_snapshot import file_storage_options, load_table, table_root

    table = load_table(table_or_uri, version, storage_options)
    if storage_options is None:  # those a DeltaTable was loaded with, as the local build takes
        storage_options = getattr(table_or_uri, "_storage_options", None)
    options = file_storage_options(table.table_uri, storage_options)
    files = delta_index.snapshot_indexed_files(table, options)
    what = f"the Delta table at {table_root(table)}"
    write = partial(_write_segment, spark, files, columns, options, what, reduce_tasks, data)
    return create_index_with(delta_index.index_location(table), columns, options, write)


def _build_iceberg(
    spark: SparkSession,
    table: Any,
    columns: list[str],
    storage_options: Mapping[str, Any] | None,
    reduce_tasks: int,
    data: tuple[FromData, float | None],
) -> IndexBuildReport:
    from parquet_bloom._tables.iceberg_index import build_index_with

    def write(
        files: list[IndexedFile],
        wanted: list[str],
        target: str,
        options: Mapping[str, Any] | None,
        *,
        what: str,
        fields: Mapping[str, int],
        snapshot: tuple[int, int],
    ) -> tuple[IndexBuildReport, Segment]:
        return _write_segment(
            spark,
            files,
            wanted,
            options,
            what,
            reduce_tasks,
            data,
            target,
            fields=fields,
            snapshot=snapshot,
        )

    return build_index_with(table, columns, write, storage_options=storage_options)


def _write_segment(
    spark: SparkSession,
    files: list[IndexedFile],
    columns: list[str],
    storage_options: Mapping[str, Any] | None,
    what: str,
    reduce_tasks: int,
    data: tuple[FromData, float | None],
    target: str,
    *,
    fields: Mapping[str, int] | None = None,
    snapshot: tuple[int, int] = (-1, -1),
) -> tuple[IndexBuildReport, Segment]:
    """The local build's write_segment, with the reads, the filters built from the values and
    the transposition on Spark."""
    kept: list[DataFrame] = []
    from_data, fpp = data
    built = 0
    try:
        reads: list[FileRead] = []
        tails = None
        if files:
            tails = _tails(spark, files, columns).persist(StorageLevel.MEMORY_AND_DISK)
            kept.append(tails)
            reads = _collect_reads(tails, files)
        if from_data is not None and tails is not None:
            every = from_data == "all"
            redo = [i for i, r in enumerate(reads) if needs_data(r, columns, every)]
            if redo:
                sizing = data_sizing(reads, fpp)
                tails = _with_built(spark, tails, files, redo, columns, sizing, every)
                tails = tails.persist(StorageLevel.MEMORY_AND_DISK)
                kept.append(tails)
                first = reads
                reads = _collect_reads(tails, files)
                for i in redo:  # the tails read twice: both reads counted
                    reads[i].reads += first[i].reads
                    reads[i].bytes_read += first[i].bytes_read
                built = sum(r.built for r in reads)
        check_read_columns(reads, columns, what, require_columns=True)
        planner = _Planner()
        report, blobs = segment_blobs(
            reads, columns, target, class_slices=planner.add, built_from_data=built
        )
        if planner.classes:
            assert tails is not None
            placement = planner.placement(reads, columns, reduce_tasks)
            sliced = _slices_job(spark, tails, placement).persist(StorageLevel.MEMORY_AND_DISK)
            kept.append(sliced)
            largest = max(c.num_bytes for c in placement.classes)
            with _arrow_batches_of_at_most(spark, max(1, PIECES_BATCH_BYTES // largest)):
                sliced.count()  # every reduce task at once, kept on the executors
            planner.receive(sliced.toLocalIterator(prefetchPartitions=False))
        segment = write_blobs(
            target, blobs, columns, storage_options, fields=fields, snapshot=snapshot
        )
        planner.check_done()
    finally:
        for df in reversed(kept):
            df.unpersist()
    report.index_bytes = segment.size
    return report, segment


@contextlib.contextmanager
def _arrow_batches_of_at_most(spark: SparkSession, rows: int) -> Iterator[None]:
    """Lower the session's Arrow batch size for the duration of one of our jobs, then restore
    it (a session setting: queries other threads run meanwhile get the smaller batches too)."""
    before = spark.conf.get(MAX_RECORDS_PER_BATCH_CONF, None)
    if 0 < int(before or _SPARK_RECORDS_PER_BATCH) <= rows:
        yield
        return
    spark.conf.set(MAX_RECORDS_PER_BATCH_CONF, str(rows))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(MAX_RECORDS_PER_BATCH_CONF)
        else:
            spark.conf.set(MAX_RECORDS_PER_BATCH_CONF, before)


def _tails(
    spark: SparkSession,
    files: list[IndexedFile],
    columns: list[str],
    numbers: Sequence[int] | None = None,
    data: tuple[Sizing, bool] | None = None,
) -> DataFrame:
    """The tails job: TAILS_SCHEMA rows of every file (or of the files ``numbers``),
    FILES_PER_TASK files a task; ``data``: also build filters from the values (sized so,
    for every row group or those without one) for the files' row groups."""
    context = spark.sparkContext
    cores = max(int(context.defaultParallelism), 1)
    chosen = range(len(files)) if numbers is None else numbers
    num_tasks = min(len(chosen), max(cores, -(-len(chosen) // FILES_PER_TASK)))
    described = [(i, pickle.dumps(files[i])) for i in chosen]
    jobs = spark.createDataFrame(
        context.parallelize(described, num_tasks), "file int, description binary"
    )
    with without_pandas_warning():
        return jobs.mapInArrow(partial(_read_tails, columns, data), TAILS_SCHEMA)


def _with_built(
    spark: SparkSession,
    tails: DataFrame,
    files: list[IndexedFile],
    redo: list[int],
    columns: list[str],
    sizing: Sizing,
    every: bool,
) -> DataFrame:
    """``tails`` with the rows of the files ``redo`` replaced by those of a second job that
    reads them again and builds their filters from the values."""
    built = _tails(spark, files, columns, redo, (sizing, every))
    redone = spark.createDataFrame([(i,) for i in redo], "file int")
    return tails.join(F.broadcast(redone), "file", "left_anti").unionByName(built)


def _read_tails(
    columns: list[str], data: tuple[Sizing, bool] | None, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor side: the tails of a task's files, a few at a time on the read threads; with
    ``data``, their filters built from the values (on the build threads)."""
    read = partial(read_file, columns) if data is None else partial(_read_and_build, columns, data)
    for batch in batches:
        numbers = batch.column(0).to_pylist()
        files = [pickle.loads(d) for d in batch.column(1).to_pylist()]
        for start in range(0, len(files), _FILES_AT_ONCE):
            chunk = files[start : start + _FILES_AT_ONCE]
            reads = read_pool().map(read, chunk)
            for number, got in zip(numbers[start:], reads, strict=False):
                yield _tail_rows(number, got, columns)


def _read_and_build(columns: list[str], data: tuple[Sizing, bool], file: IndexedFile) -> FileRead:
    got = read_file(columns, file)
    if got.error is None:
        sizing, every = data
        got.built = filters_from_data(columns, sizing, every, got)
    return got


def _tail_rows(number: int, got: FileRead, columns: list[str]) -> pa.RecordBatch:
    meta = {
        "size": got.size,
        "rows": got.rows,
        "types": got.types,
        "arrow": got.arrow,
        "sizes": {c: [None if b is None else len(b) for b in got.filters[c]] for c in got.filters},
        "error": got.error,
        "data_error": got.data_error,
        "built": got.built,
        "reads": got.reads,
        "bytes_read": got.bytes_read,
    }
    cols, groups, payloads = [_NO_COLUMN], [-1], [json.dumps(meta).encode()]
    for c, column in enumerate(columns):
        for rg, bitset in enumerate(got.filters.get(column, [])):
            if bitset is not None:
                cols.append(c)
                groups.append(rg)
                payloads.append(bitset)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([number] * len(cols), pa.int32()),
            pa.array(cols, pa.int32()),
            pa.array(groups, pa.int32()),
            pa.array(payloads, pa.binary()),
        ],
        names=["file", "column", "row_group", "payload"],
    )


def _collect_reads(tails: DataFrame, files: list[IndexedFile]) -> list[FileRead]:
    """Driver side: each file's metadata row, as the local build's reads (without bitsets)."""
    found: dict[int, FileRead] = {}
    metadata = tails.filter(F.col("column") == _NO_COLUMN).select("file", "payload")
    for batch in collect_batches(metadata):
        for number, payload in zip(
            batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True
        ):
            meta = json.loads(payload)
            found[number] = FileRead(
                file=files[number],
                size=meta["size"],
                rows=meta["rows"],
                types=meta["types"],
                arrow=meta["arrow"],
                sizes=meta["sizes"],
                error=meta["error"],
                data_error=meta["data_error"],
                built=meta["built"],
                reads=meta["reads"],
                bytes_read=meta["bytes_read"],
            )
    if sorted(found) != list(range(len(files))):
        raise RuntimeError(f"the tails job returned {len(found)} of {len(files)} files")
    return [found[i] for i in range(len(files))]


class _Planner:
    """Driver side: the classes in the order the blobs are written (the order
    :func:`segment_blobs` asks for their slices), then their slices received from the slices
    job's ranges in that order."""

    def __init__(self) -> None:
        self.classes: list[tuple[str, int, list[tuple[FileRead, int]]]] = []
        self.ranges: list[ClassRanges] = []
        self._rows: Iterator[Any] = iter(())
        self._ahead: Any = None

    def add(
        self, column: str, number: int, num_bytes: int, members: list[tuple[FileRead, int]]
    ) -> Iterable[bytes]:
        self.classes.append((column, num_bytes, members))
        return self._slices(len(self.classes) - 1)

    def placement(self, reads: list[FileRead], columns: list[str], reduce_tasks: int) -> _Placement:
        self.ranges = range_plan([(b, len(m)) for _, b, m in self.classes], reduce_tasks)
        counts = np.array([len(r.rows) for r in reads], dtype=np.int64)
        first = np.zeros(len(reads), dtype=np.int64)
        np.cumsum(counts[:-1], out=first[1:])
        total = int(counts.sum())
        number_of = {id(r): i for i, r in enumerate(reads)}
        klass = [np.full(total, -1, dtype=np.int32) for _ in columns]
        position = [np.full(total, -1, dtype=np.int64) for _ in columns]
        column_number = {c: i for i, c in enumerate(columns)}
        for k, (column, _, members) in enumerate(self.classes):
            c = column_number[column]
            where = np.array([first[number_of[id(r)]] + rg for r, rg in members], dtype=np.int64)
            klass[c][where] = k
            position[c][where] = np.arange(len(members), dtype=np.int64)
        return _Placement(first, klass, position, self.ranges)

    def receive(self, rows: Iterator[Any]) -> None:
        self._rows = iter(rows)

    def _next_row(self) -> Any:
        if self._ahead is None:
            self._ahead = next(self._rows, None)
        return self._ahead

    def _slices(self, k: int) -> Iterator[bytes]:
        plan = self.ranges[k]
        for r in range(plan.first_range, plan.first_range + plan.num_ranges):
            part = 0
            while (row := self._next_row()) is not None and row.range == r:
                self._ahead = None
                if row.part != part:
                    raise RuntimeError(f"range {r}: part {row.part} came where {part} was due")
                yield bytes(row.payload)
                part += 1
            if part == 0:
                raise RuntimeError(f"the slices job returned nothing for range {r}")

    def check_done(self) -> None:
        row = self._next_row()
        if row is not None:
            raise RuntimeError(f"the slices job returned range {row.range} past the last class")


def _slices_job(spark: SparkSession, tails: DataFrame, placement: _Placement) -> DataFrame:
    """The slices job: the kept bitsets cut into their ranges' pieces, shuffled by range (one
    partition a range), each range transposed into its slices (RANGE_SLICES_SCHEMA)."""
    shared = spark.sparkContext.broadcast(placement)
    num_ranges = sum(c.num_ranges for c in placement.classes)
    bitsets = tails.filter(F.col("column") != _NO_COLUMN)
    with without_pandas_warning():
        pieces = bitsets.mapInArrow(partial(_cut_pieces, shared), PIECES_SCHEMA)
        return pieces.repartitionById(num_ranges, F.col("range")).mapInArrow(
            partial(_transpose_range, shared), RANGE_SLICES_SCHEMA
        )


def _binary_values(array: pa.Array) -> npt.NDArray[np.uint8]:
    """The bytes of a binary array's values, end to end."""
    parts = [np.frombuffer(v.as_buffer(), dtype=np.uint8) for v in array]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)


def _cut_pieces(shared: Any, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: a batch of bitset rows -> one PIECES_SCHEMA row per class and range."""
    placement: _Placement = shared.value
    for batch in batches:
        if batch.num_rows == 0:
            continue
        files = batch.column(0).to_numpy().astype(np.int64)
        cols = batch.column(1).to_numpy()
        groups = batch.column(2).to_numpy().astype(np.int64)
        numbers = placement.first[files] + groups
        klass = np.empty(batch.num_rows, dtype=np.int64)
        position = np.empty(batch.num_rows, dtype=np.int64)
        for c in np.unique(cols).tolist():
            rows = np.flatnonzero(cols == c)
            klass[rows] = placement.klass[c][numbers[rows]]
            position[rows] = placement.position[c][numbers[rows]]
        ranges: list[int] = []
        positions: list[bytes] = []
        payloads: list[bytes] = []
        for k in np.unique(klass).tolist():
            if k < 0:
                continue  # a filter of a row group in the none class (another type)
            plan = placement.classes[k]
            rows = np.flatnonzero(klass == k)
            data = _binary_values(batch.column(3).take(pa.array(rows)))
            if data.size != rows.size * plan.num_bytes:
                raise RuntimeError(f"class {k}: filters of another size than {plan.num_bytes}")
            blocks = data.reshape(rows.size, plan.num_blocks, BYTES_PER_BLOCK)
            at = position[rows].astype("<i8").tobytes()
            for r in range(plan.num_ranges):
                start, stop = plan.blocks(r)
                ranges.append(plan.first_range + r)
                positions.append(at)
                payloads.append(np.ascontiguousarray(blocks[:, start:stop, :]).tobytes())
        if ranges:
            yield pa.RecordBatch.from_arrays(
                [pa.array(ranges, pa.int32()), pa.array(positions), pa.array(payloads)],
                names=["range", "positions", "payload"],
            )


def _transpose_range(shared: Any, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: one range's pieces (a partition holds one range) -> its slices."""
    placement: _Placement = shared.value
    words: npt.NDArray[np.uint32] | None = None
    received: npt.NDArray[np.int64] | None = None
    current = -1
    plan: ClassRanges | None = None
    for batch in batches:
        for r, at, payload in zip(
            batch.column(0).to_pylist(), batch.column(1), batch.column(2), strict=True
        ):
            if words is None:
                current = r
                plan = _range_class(placement.classes, r)
                start, stop = plan.blocks(r - plan.first_range)
                words = np.zeros((plan.row_groups, stop - start, WORDS_PER_BLOCK), np.uint32)
                received = np.zeros(plan.row_groups, dtype=np.int64)
            elif r != current:
                raise RuntimeError(f"ranges {current} and {r} in one partition")
            assert received is not None
            members = np.frombuffer(at.as_buffer(), dtype="<i8")
            piece = np.frombuffer(payload.as_buffer(), dtype="<u4")
            words[members] = piece.reshape(members.size, words.shape[1], WORDS_PER_BLOCK)
            np.add.at(received, members, 1)
    if words is None:
        return
    assert received is not None and plan is not None
    if not (received == 1).all():
        missing = int((received == 0).sum())
        raise RuntimeError(
            f"range {current}: {missing} row groups' filters missing, "
            f"{int((received > 1).sum())} received twice"
        )
    for part, chunk in enumerate(slices.slices_of(words)):
        yield pa.RecordBatch.from_arrays(
            [pa.array([current], pa.int32()), pa.array([part], pa.int32()), pa.array([chunk])],
            names=["range", "part", "payload"],
        )


def _range_class(classes: list[ClassRanges], r: int) -> ClassRanges:
    for plan in classes:
        if plan.first_range <= r < plan.first_range + plan.num_ranges:
            return plan
    raise RuntimeError(f"no class has range {r}")

"""Auditing and pruning Parquet datasets by their Bloom filters, with Spark.

:func:`bloom_filter_index` and :func:`files_might_contain` list a dataset's files on the driver
(skipping the names Spark skips), then read each file's filters on the executors, one
:class:`parquet_bloom.BloomFilterReader` per file, local or through fsspec, and return
DataFrames.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from parquet_bloom import _format as fmt
from parquet_bloom._crypto import DecryptionKeys
from parquet_bloom._extras import require
from parquet_bloom._logical import literal_probe
from parquet_bloom._prune.decryption import stop_if_refused
from parquet_bloom._reader import BloomFilterReader, BloomFilterWarning
from parquet_bloom.errors import BloomFilterError
from parquet_bloom.spark._keys import executor_keys
from parquet_bloom.spark._types import without_pandas_warning

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
    decryption: DecryptionKeys | None = None,
) -> DataFrame:
    """A DataFrame (:data:`INDEX_SCHEMA`) describing every column chunk's Bloom filter.

    ``paths``: Parquet files and directories (searched recursively, skipping names that Spark
    skips: starting with ``.``, or with ``_`` unless they contain ``=``), local or fsspec URLs
    (``s3://...``; ``storage_options`` are passed to fsspec on the executors). Files are listed
    on the driver and read on the executors; a file that cannot be read gives one row with its
    ``error`` rather than failing the job.

    ``decryption``: the keys of encrypted files (:class:`parquet_bloom.DecryptionKeys`), sent
    to the executors with the tasks, so they must pickle (a TypeError on the driver names the
    part that does not). A chunk whose key is not given has its ``error``
    (docs/encryption.md).
    """
    keys = executor_keys(decryption)
    files = list_files(paths, storage_options)
    options = dict(storage_options or {})

    def index(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            rows = [
                row
                for file in batch.column(0).to_pylist()
                for row in _index_file(file, options, keys)
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
    decryption: DecryptionKeys | None = None,
) -> DataFrame:
    """The (file, row group) pairs (:data:`ROW_GROUPS_SCHEMA`) that may hold ``column IN values``.

    ``column`` is the Parquet column's dotted path; ``values`` are Python literals, encoded per
    file through the column's Parquet type (:func:`parquet_bloom._logical.literal_probe`). A row
    group is dropped only when its filter proves that no value is there: row groups without a
    filter, with an unreadable one, with a null or NaN literal, and every row group of a file
    without the column are kept. ``paths`` and ``storage_options`` as in
    :func:`bloom_filter_index`; an unreadable file fails the job, since its row groups cannot be
    listed. ``decryption`` as in :func:`bloom_filter_index`: the row groups of a column whose
    key is not given are kept; a key that does not decrypt the column's metadata or filters
    (wrong, or tampered bytes) fails the job with a DecryptionError naming the file, as
    :func:`parquet_bloom.prune` stops on it.
    """
    if not isinstance(column, str):
        raise TypeError(f"column must be a dotted path string, not {type(column).__name__}")
    keys = executor_keys(decryption)
    files = list_files(paths, storage_options)
    options = dict(storage_options or {})
    if files:  # literals that cannot be compared with the column fail here, not on an executor
        with _open_reader(files[0], options, keys) as reader:
            leaf = _leaf(reader, column)
            if leaf is not None:
                literal_probe(values, leaf)

    def prune(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            pairs = [
                (file, row_group)
                for file in batch.column(0).to_pylist()
                for row_group in _row_groups_to_read(file, column, values, options, keys)
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
    with without_pandas_warning():
        result: DataFrame = jobs.mapInArrow(work, schema)
    return result


def _is_url(path: str) -> bool:
    return "://" in path


def list_files(
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
    fsspec_core = require("fsspec.core", f"reading {url!r}")
    filesystem, path = fsspec_core.url_to_fs(url, **storage_options)
    return filesystem, path


def _open_reader(
    file: str, storage_options: dict[str, Any], decryption: DecryptionKeys | None
) -> BloomFilterReader:
    if _is_url(file):
        filesystem, path = _url_to_fs(file, storage_options)
        return BloomFilterReader(path, filesystem=filesystem, decryption=decryption)
    return BloomFilterReader(file, decryption=decryption)


def _leaf(reader: BloomFilterReader, column: str) -> fmt.SchemaLeaf | None:
    for leaf in reader.schema_leaves:
        if leaf.path == column:
            return leaf
    return None


def _index_file(
    file: str, storage_options: dict[str, Any], decryption: DecryptionKeys | None
) -> list[dict[str, Any]]:
    """Executor side: the index rows of one file."""
    try:
        reader = _open_reader(file, storage_options, decryption)
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
    file: str,
    column: str,
    values: Any,
    storage_options: dict[str, Any],
    decryption: DecryptionKeys | None,
) -> list[int]:
    """Executor side: the row groups of one file that may hold one of ``values``."""
    with _open_reader(file, storage_options, decryption) as reader:
        every = list(range(reader.num_row_groups))
        if _leaf(reader, column) is None:
            return every  # not this file's column: kept, pruning never guesses
        if decryption is not None:
            # A key given that does not decrypt the column's metadata or filters stops, as
            # every prune does (parquet_bloom._prune.decryption); one not given keeps its row
            # groups below. (The filters read here are the reader's, cached for the probe.)
            _, failed = reader.filters_with_errors([column], every)
            for err in failed.values():
                stop_if_refused(err, file)
        try:
            # An unusable filter keeps its row group (the reader warns; on an executor no one
            # would read it); the others still prune.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", BloomFilterWarning)
                return reader.row_groups_might_contain(column, values)
        except OSError:
            return every

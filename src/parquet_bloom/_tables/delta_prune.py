"""A Delta table's scan pruned twice: by the table's own metadata (deltalake's partition values
and min/max statistics, as its pyarrow dataset carries them), then by the Bloom filters of the
files left (:func:`parquet_bloom._prune.dataset.prune`).

Files with deletion vectors: deltalake's pyarrow dataset refuses any table with the
``deletionVectors`` reader feature. Here such a table is read from its log instead (partition
values only: its statistics are not used), and a file that has a deletion vector is pruned by
its filters like any other, then its row groups left are read at once and the rows its
deletion vector deletes (deltalake's own reading of it, ``DeltaTable.deletion_vectors``)
dropped: those rows are held in memory, in the result, never read again from the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.fs import DeltaStorageHandler

from parquet_bloom._io.limits import delta_storage_options
from parquet_bloom._prune.dataset import DEFAULT_MAX_WORKERS
from parquet_bloom._prune.dataset import prune as prune_dataset
from parquet_bloom._tables.delta_snapshot import (
    deletion_vectors,
    file_location,
    is_local,
    load_table,
    reader_feature_refusal,
    table_root,
)
from parquet_bloom._tables.scan import TablePruneReport
from parquet_bloom.errors import UnsupportedFileError

__all__ = ["DeltaPruneResult", "prune"]


@dataclass(frozen=True)
class DeltaPruneResult:
    """What :func:`parquet_bloom.delta.prune` left of a table's scan.

    ``dataset``: a pyarrow dataset of the row groups left (a ``FileSystemDataset``, or a
    ``UnionDataset`` of it and the rows of files with deletion vectors, in memory);
    ``files``: the data files it reads, as the log names them; ``report``: what the table's
    own pruning and then the Bloom filters skipped (:class:`TablePruneReport`); ``version``:
    the table version read."""

    dataset: ds.Dataset
    files: tuple[str, ...]
    report: TablePruneReport
    version: int


def prune(
    table_or_uri: DeltaTable | str | os.PathLike[str],
    expr: pc.Expression,
    *,
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    max_workers: int = DEFAULT_MAX_WORKERS,
    tail_size: int | None = None,
) -> DeltaPruneResult:
    """The row groups of a Delta table that might hold a row ``expr`` keeps.

    ``table_or_uri``: a ``deltalake.DeltaTable`` (as loaded: its version, its storage options),
    or the table's path or URI, loaded at ``version`` (default the latest) with deltalake's
    ``storage_options``. The table's own pruning comes first: the files whose partition values
    and min/max statistics rule ``expr`` out are dropped, as deltalake's
    ``to_pyarrow_dataset()`` fragments do; then :func:`parquet_bloom.prune` (``max_workers``
    files at once, ``tail_size`` the first read of each) drops the row groups whose Bloom
    filters rule it out. ``result.dataset.to_table(filter=expr)`` holds the rows of
    ``DeltaTable(uri).to_pyarrow_dataset().to_table(filter=expr)``, with its schema, partition
    columns included.

    A table with the ``deletionVectors`` reader feature, which deltalake's pyarrow dataset
    refuses, is read from its log (partition values prune it; its statistics do not), and each
    deletion vector is applied: the file's row groups left are read now and its deleted rows
    dropped, as ``DeltaTable.scan()`` drops them. Tables whose other reader features
    deltalake's pyarrow reading lacks (column mapping) raise
    :class:`~parquet_bloom.errors.UnsupportedFileError`, as deltalake refuses them.
    """
    if not isinstance(expr, pc.Expression):
        raise TypeError(f"expr must be a pyarrow.compute.Expression, not {type(expr).__name__}")
    table = load_table(table_or_uri, version, storage_options)
    root = table_root(table)
    refusal = reader_feature_refusal(table)
    if refusal is not None:
        raise UnsupportedFileError(
            f"cannot read the Delta table at {root} as a pyarrow dataset: {refusal}"
        )
    actions = pa.table(table.get_add_actions(flatten=True)).select(["path", "size_bytes"])
    keys = {}  # decoded path under the root -> the log's path
    sizes = {}
    for key, size in zip(*actions.to_pydict().values(), strict=True):
        path = unquote(key)
        keys[path], sizes[path] = key, int(size)
    masks = deletion_vectors(table)
    if "deletionVectors" in (table.protocol().reader_features or ()):
        options = storage_options
        if options is None and isinstance(table_or_uri, DeltaTable):
            options = getattr(table_or_uri, "_storage_options", None)  # what it was loaded with
        dataset = _log_dataset(table, root, sizes, options)
    else:
        dataset = table.to_pyarrow_dataset()
    every = list(dataset.get_fragments())
    chosen = list(dataset.get_fragments(filter=expr))
    local = is_local(root)
    filesystem = pafs.LocalFileSystem() if local else dataset.filesystem
    paths = {}  # a fragment's path here -> its path under the root
    fragments = []
    for fragment in chosen:
        path = fragment.path
        opened = file_location(root, path) if local else path
        paths[opened] = path
        fragments.append(
            dataset.format.make_fragment(
                opened, filesystem, fragment.partition_expression, file_size=sizes.get(path)
            )
        )
    files = ds.FileSystemDataset(fragments, dataset.schema, dataset.format, filesystem)
    pruned = prune_dataset(files, expr, max_workers=max_workers, tail_size=tail_size)
    left = list(pruned.dataset.get_fragments())
    with_deletes = [f for f in left if paths[f.path] in masks]
    result: ds.Dataset = pruned.dataset
    if with_deletes:
        kept = [f for f in left if paths[f.path] not in masks]
        rows = [
            _undeleted_rows(f, masks[paths[f.path]], dataset.schema, expr) for f in with_deletes
        ]
        result = ds.UnionDataset(
            dataset.schema,
            [
                ds.FileSystemDataset(kept, dataset.schema, dataset.format, filesystem),
                ds.InMemoryDataset(pa.concat_tables(rows), schema=dataset.schema),
            ],
        )
    report = TablePruneReport(
        table_files=len(every),
        table_bytes=sum(sizes.get(f.path, 0) for f in every),
        files_after_table=len(chosen),
        bytes_after_table=sum(sizes.get(f.path, 0) for f in chosen),
        bloom=pruned.report,
        files_with_deletes=len(with_deletes),
    )
    return DeltaPruneResult(
        result, tuple(keys[paths[f.path]] for f in left), report, table.version()
    )


def _log_dataset(
    table: DeltaTable, root: str, sizes: Mapping[str, int], options: Mapping[str, str] | None
) -> ds.FileSystemDataset:
    """The table's files as a pyarrow dataset made from its log (deltalake's pyarrow dataset
    refuses tables that may have deletion vectors): each file with the expression of its
    partition values."""
    schema = pa.schema(table.schema().to_arrow())
    file_format = ds.ParquetFileFormat(
        default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=True)
    )
    # Paths under the root, as deltalake's own dataset has them.
    filesystem: pafs.FileSystem
    if is_local(root):
        filesystem = pafs.SubTreeFileSystem(root, pafs.LocalFileSystem())
    else:
        handler = DeltaStorageHandler(
            table.table_uri, delta_storage_options(table.table_uri, options), dict(sizes)
        )
        filesystem = pafs.PyFileSystem(handler)
    actions = pa.table(table.get_add_actions(flatten=False))
    partitions = (
        actions.column("partition").to_pylist()
        if "partition" in actions.column_names
        else [None] * actions.num_rows
    )
    fragments = []
    for key, values in zip(actions.column("path").to_pylist(), partitions, strict=True):
        path = unquote(key)
        expression = _partition_expression(values or {}, schema)
        fragments.append(
            file_format.make_fragment(path, filesystem, expression, file_size=sizes.get(path))
        )
    return ds.FileSystemDataset(fragments, schema, file_format, filesystem)


def _partition_expression(values: Mapping[str, Any], schema: pa.Schema) -> pc.Expression:
    """``name == value`` (``is_null`` for null) for each partition column, ANDed."""
    terms = [
        pc.field(name).is_null()
        if value is None
        else pc.field(name) == pa.scalar(value, type=schema.field(name).type)
        for name, value in values.items()
    ]
    if not terms:
        return pc.scalar(True)
    expression = terms[0]
    for term in terms[1:]:
        expression = expression & term
    return expression


def _undeleted_rows(
    fragment: ds.ParquetFileFragment,
    keep: Sequence[bool],
    schema: pa.Schema,
    expr: pc.Expression,
) -> pa.Table:
    """The rows of a fragment's row groups that its file's deletion vector keeps (``keep``:
    True for a kept row, by row of the file; rows past its end are kept), then those
    ``expr`` keeps."""
    metadata = fragment.metadata
    starts = [0]
    for i in range(metadata.num_row_groups):
        starts.append(starts[-1] + metadata.row_group(i).num_rows)
    mask: list[bool] = []
    for row_group in fragment.row_groups:
        start, end = starts[row_group.id], starts[row_group.id + 1]
        part = list(keep[start:end])
        mask.extend(part + [True] * (end - start - len(part)))
    rows = fragment.to_table(schema=schema)
    if rows.num_rows != len(mask):
        raise ValueError(
            f"{fragment.path}: read {rows.num_rows} rows of row groups holding {len(mask)}"
        )
    return rows.filter(pa.array(mask, pa.bool_())).filter(expr)

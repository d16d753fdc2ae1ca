"""A Delta table's scan pruned twice: by the table's own metadata (its partition values, and
the exact min/max statistics of its add actions: :mod:`.delta_stats`), then by the Bloom
filters of the files left (:func:`parquet_bloom._prune.dataset.prune`), or by the table's Bloom
index for the files it knows.

The dataset is made from the log, as deltalake's pyarrow dataset is (the table's schema, each
file with the expression of its partition values, the same Parquet format options), without
deltalake's expression a file for its statistics (190 ms for 200 files). Files with deletion
vectors (deltalake's pyarrow dataset refuses such tables) are pruned by their filters like any
other, then their row groups left are read at once and the rows its deletion vector deletes
(deltalake's own reading of it, ``DeltaTable.deletion_vectors``) dropped: those rows are held
in memory, in the result, never read again from the file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.fs import DeltaStorageHandler

from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._index import store
from parquet_bloom._index.files import IndexedFile, same_file
from parquet_bloom._index.lookup import BloomIndex
from parquet_bloom._io.limits import delta_storage_options
from parquet_bloom._prune.dataset import Reading, prune_with
from parquet_bloom._prune.decryption import scan_options
from parquet_bloom._prune.expression import Node, Unknown, translate
from parquet_bloom._prune.indexed import decide, scan_probe, text_probe
from parquet_bloom._prune.report import PruneReport
from parquet_bloom._prune.rows import matching_rows
from parquet_bloom._tables.delta_index import index_location
from parquet_bloom._tables.delta_snapshot import (
    deletion_vectors,
    file_location,
    file_storage_options,
    is_local,
    load_table,
    reader_feature_refusal,
    table_root,
)
from parquet_bloom._tables.delta_stats import matching_files
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
    filter: pc.Expression | None = None  # the filter pruned for
    # the keys the dataset's scan decryption was made from, to tell its failures
    decryption: DecryptionKeys | None = field(default=None, repr=False)

    def to_table(self, columns: Sequence[str] | None = None) -> pa.Table:
        """The rows the filter keeps, as ``dataset.to_table(filter=filter, columns=columns)``
        gives them (rows, order, schema), read late: see
        :meth:`parquet_bloom.PruneResult.to_table`."""
        if self.filter is None:
            return self.dataset.to_table(columns=columns)
        return matching_rows(self.dataset, self.filter, columns, self.decryption)


def prune(
    table_or_uri: DeltaTable | str | os.PathLike[str],
    expr: pc.Expression,
    *,
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    max_workers: int | None = None,
    tail_size: int | None = None,
    index: bool | None = None,
    decryption: DecryptionKeys | None = None,
) -> DeltaPruneResult:
    """The row groups of a Delta table that might hold a row ``expr`` keeps.

    ``table_or_uri``: a ``deltalake.DeltaTable`` (as loaded: its version, its storage options),
    or the table's path or URI, loaded at ``version`` (default the latest) with deltalake's
    ``storage_options``. The table's own pruning comes first: the files whose partition values
    and min/max statistics rule ``expr`` out are dropped, as deltalake's
    ``to_pyarrow_dataset()`` fragments do; then :func:`parquet_bloom.prune` (``max_workers``
    files at once, by default 16 in a store, local files one or two at a time as there;
    ``tail_size`` the first read of each) drops the row groups whose Bloom
    filters rule it out. ``result.dataset.to_table(filter=expr)`` holds the rows of
    ``DeltaTable(uri).to_pyarrow_dataset().to_table(filter=expr)``, with its schema, partition
    columns included; ``result.to_table()`` gives them too, read late (the filter's columns
    first: faster for a lookup).

    A table with the ``deletionVectors`` reader feature, which deltalake's pyarrow dataset
    refuses, is read from its log (partition values prune it; its statistics do not), and each
    deletion vector is applied: the file's row groups left are read now and its deleted rows
    dropped, as ``DeltaTable.scan()`` drops them. Tables whose other reader features
    deltalake's pyarrow reading lacks (column mapping) raise
    :class:`~parquet_bloom.errors.UnsupportedFileError`, as deltalake refuses them.

    ``index``: the table's Bloom index (``<table>/_bloom_index/``, see
    :func:`parquet_bloom.delta.build_index`) decides the files it knows as the snapshot has
    them (path, size, modification time) without opening them: None uses it when there is one
    (one read to find out), True requires it (FileNotFoundError without), False never. The
    files the table's pruning leaves that the index rules out are decided before any other
    work on them (counted in the report's ``bloom`` as skipped, decided by the index).

    ``decryption``: the keys of a table of encrypted files (:class:`~parquet_bloom.
    DecryptionKeys`), for their filters and for pyarrow's scan of the row groups kept, as
    :func:`parquet_bloom.prune` of paths uses them (docs/encryption.md#pruning-tables-and-
    datasets): a column whose key is not available keeps its row groups, counted in
    ``report.bloom.filters_unreadable`` and warned; a key that does not decrypt is a
    :class:`~parquet_bloom.errors.DecryptionError` naming the file.
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
    actions = pa.table(table.get_add_actions(flatten=True))
    keys = {}  # decoded path under the root -> the log's path
    sizes = {}
    modified = {}
    columns = ("path", "size_bytes", "modification_time")
    listed = actions.select(list(columns)).to_pydict().values()
    for key, size, mtime in zip(*listed, strict=True):
        path = unquote(key)
        keys[path], sizes[path] = key, int(size)
        modified[path] = int(mtime)  # ms, as the log has it
    masks = deletion_vectors(table)
    deltalake_options = storage_options
    if deltalake_options is None and isinstance(table_or_uri, DeltaTable):
        deltalake_options = getattr(table_or_uri, "_storage_options", None)  # as it was loaded
    tree = translate(expr)
    partition_columns = table.metadata().partition_columns or []
    with _table_index(table, index, deltalake_options) as idx:
        # The files the index rules out are decided first: what prune_with does a file costs,
        # on 10,000 files, most of a point lookup. In a table without partitions, whose own
        # pruning is then its statistics alone, they need no fragment either.
        ruled_out = _ruled_out_by_index(idx, tree, table, sizes, modified)
        unmade = ruled_out if not partition_columns else set()
        # The table's own pruning: partition values (pyarrow's, from each fragment's
        # partition expression) and the exact min/max statistics (vectorised over the add
        # actions).
        dataset, under_root = _log_dataset(
            table, root, sizes, deltalake_options, skip=unmade, decryption=decryption
        )
        every = list(dataset.get_fragments())
        stats_keep = matching_files(actions, tree, partition_columns)
        logged = actions.column("path").to_pylist()
        in_range = {unquote(k) for k, keep in zip(logged, stats_keep, strict=True) if keep}
        chosen = [f for f in dataset.get_fragments(filter=expr) if under_root[f.path] in in_range]
        unmade_left = [path for path in unmade if path in in_range]
        filesystem = dataset.filesystem
        paths = {}  # a fragment's path here -> its path under the root
        fragments = []
        skipped = len(unmade_left)
        for fragment in chosen:
            path = under_root[fragment.path]
            if path in ruled_out:
                skipped += 1
                continue
            paths[fragment.path] = path
            fragments.append(fragment)
        files = ds.FileSystemDataset(fragments, dataset.schema, dataset.format, filesystem)
        identities = {
            opened: IndexedFile(path, opened, size=sizes.get(path), modified=modified.get(path, -1))
            for opened, path in paths.items()
        }
        opened_sizes = {o: sizes[p] for o, p in paths.items() if p in sizes}
        reading = Reading(opened_sizes, tail_size, identities, idx, decryption=decryption)
        pruned = prune_with(files, tree, reading, max_workers)
    bloom = pruned.report
    if skipped:
        bloom = bloom + PruneReport(files=skipped, files_skipped=skipped, index_files=skipped)
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
    unmade_bytes = sum(sizes.get(path, 0) for path in unmade)
    report = TablePruneReport(
        table_files=len(every) + len(unmade),
        table_bytes=sum(sizes.get(under_root[f.path], 0) for f in every) + unmade_bytes,
        files_after_table=len(chosen) + len(unmade_left),
        bytes_after_table=sum(sizes.get(under_root[f.path], 0) for f in chosen)
        + sum(sizes.get(path, 0) for path in unmade_left),
        bloom=bloom,
        files_with_deletes=len(with_deletes),
    )
    kept_files = tuple(keys[paths[f.path]] for f in left)
    return DeltaPruneResult(result, kept_files, report, table.version(), expr, decryption)


def _ruled_out_by_index(
    idx: BloomIndex | None,
    tree: Node,
    table: DeltaTable,
    sizes: Mapping[str, int],
    modified: Mapping[str, int],
) -> set[str]:
    """The snapshot's files (paths under the root) that the index knows as they are and rules
    out for ``tree``, as :func:`parquet_bloom._prune.dataset.prune_with` would decide them
    (none when the index decides nothing)."""
    if idx is None or isinstance(tree, Unknown):
        return set()
    schema = pa.schema(table.schema().to_arrow())
    partitions = set(table.metadata().partition_columns or [])
    probe = scan_probe(idx, schema, partitions)
    decision, _ = decide(tree, probe, idx, text_probe(idx, schema, partitions))
    if decision is None:
        return set()
    known = idx.file_rows()
    out = set()
    for path, size in sizes.items():
        row = known.get(path)
        if row is None or path in decision:
            continue
        if same_file(row, IndexedFile(path, path, size=size, modified=modified.get(path, -1))):
            out.add(path)
    return out


@contextmanager
def _table_index(
    table: DeltaTable, wanted: bool | None, storage_options: Mapping[str, str] | None
) -> Iterator[BloomIndex | None]:
    """The table's index, opened, when ``wanted`` (None: if it has one)."""
    if wanted is False:
        yield None
        return
    if wanted not in (None, True):
        raise TypeError(f"index must be None, True or False, not {wanted!r}")
    where = index_location(table)
    options = file_storage_options(table.table_uri, storage_options)
    if wanted is None and store.read_pointer(where, options) is None:
        yield None
        return
    with BloomIndex(where, storage_options=options) as idx:
        yield idx


def _log_dataset(
    table: DeltaTable,
    root: str,
    sizes: Mapping[str, int],
    options: Mapping[str, str] | None,
    skip: AbstractSet[str] = frozenset(),
    decryption: DecryptionKeys | None = None,
) -> tuple[ds.FileSystemDataset, dict[str, str]]:
    """The table's files as a pyarrow dataset made from its log (deltalake's pyarrow dataset
    refuses tables that may have deletion vectors), but those in ``skip`` (paths under the
    root): each file with the expression of its partition values, named as it is opened (a
    local path, or its path under the root on the table's store); and each fragment's path
    under the root, by its name there. Encrypted files are scanned with ``decryption``."""
    schema = pa.schema(table.schema().to_arrow())
    file_format = ds.ParquetFileFormat(
        default_fragment_scan_options=scan_options(decryption, pre_buffer=True)
    )
    filesystem: pafs.FileSystem
    local = is_local(root)
    if local:
        filesystem = pafs.LocalFileSystem()
    else:  # paths under the root, as deltalake's own dataset has them
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
    under_root = {}
    expressions: dict[tuple[tuple[str, Any], ...], pc.Expression] = {}  # a few distinct ones
    for key, values in zip(actions.column("path").to_pylist(), partitions, strict=True):
        path = unquote(key)
        if path in skip:
            continue
        items = tuple((values or {}).items())
        expression = expressions.get(items)
        if expression is None:
            expression = expressions[items] = _partition_expression(dict(items), schema)
        opened = file_location(root, path) if local else path
        under_root[opened] = path
        fragments.append(
            file_format.make_fragment(opened, filesystem, expression, file_size=sizes.get(path))
        )
    return ds.FileSystemDataset(fragments, schema, file_format, filesystem), under_root


# The expression of a file without partition values (one for all: pc.scalar costs 7 us a call).
_NO_PARTITION = pc.scalar(True)


def _partition_expression(values: Mapping[str, Any], schema: pa.Schema) -> pc.Expression:
    """``name == value`` (``is_null`` for null) for each partition column, ANDed."""
    terms = [
        pc.field(name).is_null()
        if value is None
        else pc.field(name) == pa.scalar(value, type=schema.field(name).type)
        for name, value in values.items()
    ]
    if not terms:
        return _NO_PARTITION
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

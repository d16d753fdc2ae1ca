"""A Delta table's Bloom index: built from the filters in the files of its snapshot, kept under
``<table>/_bloom_index/`` (Delta's VACUUM leaves directories whose names start with ``_``
alone, as it leaves ``_delta_log/``), and looked up against the table's snapshot, never wrong
(docs/index.md#delta-lake).

A file is known to the index by its path under the table's root, its size and its
modification time (the add action's), so that a file the log replaced under the same name is
not taken for the one the index read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from deltalake import DeltaTable

from parquet_bloom._index import store
from parquet_bloom._index.build import (
    FromData,
    IndexBuildReport,
    check_columns,
    check_from_data,
    create_index,
)
from parquet_bloom._index.files import IndexedFile
from parquet_bloom._index.live import DatasetLookup, lookup_files
from parquet_bloom._index.lookup import BloomIndex
from parquet_bloom._index.maintain import (
    DEFAULT_RETAIN_SECONDS,
    CompactReport,
    check_retain,
    compact_files,
    refresh_files,
)
from parquet_bloom._index.text import TextFilter
from parquet_bloom._index.text_build import check_text_filters
from parquet_bloom._index.text_lookup import TextLookup, lookup_text_files
from parquet_bloom._io import location
from parquet_bloom._tables.delta_snapshot import (
    file_location,
    file_storage_options,
    load_table,
    maps_column_names,
    snapshot_files,
    table_root,
)

__all__ = [
    "INDEX_DIRECTORY",
    "build_index",
    "compact_index",
    "has_index",
    "index_location",
    "latest_files",
    "lookup",
    "lookup_opened",
    "lookup_text",
    "refresh_index",
    "snapshot_indexed_files",
]

# Where a table's index lives, under its root: a name VACUUM passes over.
INDEX_DIRECTORY = "_bloom_index"


def index_location(table: DeltaTable) -> str:
    """The table's index directory: a local path or a URL."""
    return file_location(table_root(table), INDEX_DIRECTORY)


def _options(table: DeltaTable, storage_options: Mapping[str, str] | None) -> dict[str, Any]:
    """fsspec's options for the table's files (and its index), from deltalake's."""
    return file_storage_options(table.table_uri, storage_options)


def snapshot_indexed_files(
    table: DeltaTable, file_options: Mapping[str, Any] | None
) -> list[IndexedFile]:
    """The snapshot's data files as the index knows them: the path under the root, where it is
    read, its size and modification time. A table that maps column names is refused
    (ValueError): its files name the columns by physical names the index would not find."""
    if maps_column_names(table):
        raise ValueError(
            f"the Delta table at {table_root(table)} maps column names "
            "(delta.columnMapping.mode): its files name the columns by physical names, "
            "which a Bloom index of the table cannot look up by the names its schema gives"
        )
    root = table_root(table)
    out = []
    for f in snapshot_files(table):
        where = file_location(root, f.path)
        options = file_options if location.is_url(where) else None
        filesystem, path = location.resolve(where, storage_options=options)
        out.append(IndexedFile(f.path, path, filesystem, f.size, f.modification_time))
    return sorted(out, key=lambda f: f.key)


def has_index(table: DeltaTable, storage_options: Mapping[str, str] | None = None) -> bool:
    """Whether the table has an index (its pointer is there)."""
    where = index_location(table)
    return store.read_pointer(where, _options(table, storage_options)) is not None


def build_index(
    table_or_uri: DeltaTable | str | os.PathLike[str],
    columns: Sequence[str],
    *,
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    from_data: FromData = None,
    fpp: float | None = None,
    text: Sequence[TextFilter] = (),
) -> IndexBuildReport:
    """Build the table's index of ``columns`` from the filters in the files of its snapshot
    (``version``, default the latest), into ``<table>/_bloom_index/`` (an index there before
    is replaced). ``storage_options`` are deltalake's. ``from_data``, ``fpp`` and ``text``
    (token and n-gram filters): as for :func:`parquet_bloom.index.build_index`."""
    texts = check_text_filters(text)
    wanted = check_columns(columns, allow_empty=bool(texts))
    check_from_data(from_data, fpp)
    table = load_table(table_or_uri, version, storage_options)
    options = _options(table, _loaded_options(table_or_uri, storage_options))
    files = snapshot_indexed_files(table, options)
    return create_index(
        index_location(table),
        files,
        wanted,
        options,
        what=f"the Delta table at {table_root(table)}",
        from_data=from_data,
        fpp=fpp,
        text=texts,
    )


def refresh_index(
    table_or_uri: DeltaTable | str | os.PathLike[str],
    *,
    storage_options: Mapping[str, str] | None = None,
    from_data: FromData = None,
    fpp: float | None = None,
) -> IndexBuildReport:
    """Add a segment of the files of the table's latest snapshot the index does not know
    (appended, or rewritten, since it was built or last refreshed)."""
    check_from_data(from_data, fpp)
    table = load_table(table_or_uri, None, storage_options)
    options = _options(table, _loaded_options(table_or_uri, storage_options))
    files = snapshot_indexed_files(table, options)
    return refresh_files(index_location(table), files, options, from_data=from_data, fpp=fpp)


def compact_index(
    table_or_uri: DeltaTable | str | os.PathLike[str],
    *,
    storage_options: Mapping[str, str] | None = None,
    retain_seconds: float = DEFAULT_RETAIN_SECONDS,
    no_concurrent_writers: bool = False,
) -> CompactReport:
    """Merge the index's segments into one holding the files of the latest snapshot it knows;
    remove segments no pointer names once older than ``retain_seconds`` (below 60 only with
    ``no_concurrent_writers=True``: :func:`parquet_bloom.index.compact_index` says why)."""
    check_retain(retain_seconds, no_concurrent_writers)
    table = load_table(table_or_uri, None, storage_options)
    options = _options(table, _loaded_options(table_or_uri, storage_options))
    live = snapshot_indexed_files(table, options)
    return compact_files(
        index_location(table), live, options, retain_seconds, no_concurrent_writers
    )


def lookup(
    table_or_uri: DeltaTable | str | os.PathLike[str],
    column: str,
    values: Any,
    *,
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> DatasetLookup:
    """The row groups of the snapshot's data files (``version``, default the latest) where
    ``column`` may equal one of ``values``: the index's answer for the files it knows as they
    are in the snapshot, each other file's own filters for the rest. ``files`` are keyed by
    the path under the table's root."""
    table = load_table(table_or_uri, version, storage_options)
    options = _options(table, _loaded_options(table_or_uri, storage_options))
    with BloomIndex(index_location(table), storage_options=options) as idx:
        return lookup_opened(table, column, values, idx, opened_here=True)


def lookup_opened(
    table_or_uri: DeltaTable | str | os.PathLike[str],
    column: str,
    values: Any,
    idx: BloomIndex,
    storage_options: Mapping[str, str] | None = None,
    *,
    opened_here: bool = False,
) -> DatasetLookup:
    """:func:`lookup` through an index already open (the latest snapshot's files)."""
    files = latest_files(table_or_uri, storage_options)
    return lookup_files(files, column, values, idx, opened_here=opened_here)


def latest_files(
    table_or_uri: DeltaTable | str | os.PathLike[str], storage_options: Mapping[str, str] | None
) -> list[IndexedFile]:
    """The latest snapshot's live files as the index knows them."""
    table = load_table(
        table_or_uri, None, None if isinstance(table_or_uri, DeltaTable) else storage_options
    )
    return snapshot_indexed_files(
        table, _options(table, _loaded_options(table_or_uri, storage_options))
    )


def lookup_text(
    table_or_uri: DeltaTable | str | os.PathLike[str],
    column: str,
    patterns: str | Sequence[str],
    *,
    function: str = "has_token",
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> TextLookup:
    """The row groups of the snapshot's data files (``version``, default the latest) whose
    ``column`` may hold a value matching ``function(value, pattern)`` for one of
    ``patterns``, through the index's token and n-gram filters
    (:func:`parquet_bloom.index.lookup_text` says the functions); live files the index does
    not know are candidates whole. ``files`` are keyed by the path under the table's root."""
    table = load_table(table_or_uri, version, storage_options)
    options = _options(table, _loaded_options(table_or_uri, storage_options))
    files = snapshot_indexed_files(table, options)
    with BloomIndex(index_location(table), storage_options=options) as idx:
        return lookup_text_files(files, column, patterns, idx, function=function, opened_here=True)


def _loaded_options(
    table_or_uri: DeltaTable | str | os.PathLike[str], storage_options: Mapping[str, str] | None
) -> Mapping[str, str] | None:
    """deltalake's options: those given, or those a DeltaTable was loaded with."""
    if storage_options is None and isinstance(table_or_uri, DeltaTable):
        found: Mapping[str, str] | None = getattr(table_or_uri, "_storage_options", None)
        return found
    return storage_options

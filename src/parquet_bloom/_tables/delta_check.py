"""Check the Bloom filters of a Delta table's live files: the data files of one version's
snapshot, as its log lists them (never the files a rewrite replaced and vacuum has not yet
removed), through :mod:`parquet_bloom._tables.check`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping

from deltalake import DeltaTable

from parquet_bloom._audit import CheckReport
from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._tables.check import (
    DEFAULT_MAX_WORKERS,
    TableCheckReport,
    TableFile,
    check_table_columns,
    check_table_files,
)
from parquet_bloom._tables.delta_snapshot import (
    file_location,
    file_storage_options,
    load_table,
    relative_path,
    snapshot_files,
    table_columns,
    table_root,
)

__all__ = ["check", "live_files"]


def live_files(table: DeltaTable) -> list[TableFile]:
    """The snapshot's data files, in the log's order: their keys and where they are read."""
    root = table_root(table)
    files = []
    for entry in snapshot_files(table):
        path = relative_path(entry.key)
        files.append(TableFile(entry.key, file_location(root, path) if path else entry.path))
    return files


def check(
    table_or_uri: DeltaTable | str | os.PathLike[str],
    columns: Iterable[str] | None = None,
    *,
    require: Iterable[str] | None = None,
    max_fpp: float | None = None,
    allow_empty: bool = False,
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    max_workers: int = DEFAULT_MAX_WORKERS,
    progress: Callable[[CheckReport], None] | None = None,
    decryption: DecryptionKeys | None = None,
) -> TableCheckReport:
    """Check every live data file of the Delta table (its ``version``, or the latest) as
    :func:`parquet_bloom.check_file` checks a file, with the same ``columns``, ``require`` and
    ``max_fpp``; the table fails when any file does, or when no filter was checked in any file
    unless ``allow_empty=True``. Column names are checked against the table's schema before
    any file is read (ValueError naming the columns there are). ``progress(report)`` is called
    as each file's check finishes. ``decryption``: the keys of encrypted data files
    (:class:`parquet_bloom.DecryptionKeys`; check_file's notes say what they leave unread)."""
    table = load_table(table_or_uri, version, storage_options)
    root = table_root(table)
    there = table_columns(table)
    check_table_columns(columns, there, f"the Delta table at {root}")
    check_table_columns(require, there, f"the Delta table at {root}")
    if storage_options is None and isinstance(table_or_uri, DeltaTable):
        storage_options = getattr(table_or_uri, "_storage_options", None)
    return check_table_files(
        root,
        "delta",
        table.version(),
        live_files(table),
        columns=columns,
        require=require,
        max_fpp=max_fpp,
        allow_empty=allow_empty,
        storage_options=file_storage_options(table.table_uri, storage_options),
        max_workers=max_workers,
        progress=progress,
        decryption=decryption,
    )

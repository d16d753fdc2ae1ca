"""Check the Bloom filters of an Iceberg table's live files: the Parquet data files of one
snapshot, as its manifests list them, through :mod:`parquet_bloom._tables.check`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyiceberg.manifest import DataFileContent, FileFormat, ManifestContent
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from parquet_bloom._audit import CheckReport
from parquet_bloom._tables.check import (
    DEFAULT_MAX_WORKERS,
    TableCheckReport,
    TableFile,
    check_table_files,
)
from parquet_bloom._tables.iceberg_io import local_or_url, storage_options_for
from parquet_bloom._tables.iceberg_rewrite import leaf_ids, table_name

__all__ = ["check", "live_parquet_files"]


def live_parquet_files(
    table: Table, snapshot: Snapshot | None
) -> tuple[list[TableFile], list[str]]:
    """The snapshot's live Parquet data files (by URI), and a note for each data file that is
    not Parquet."""
    files, notes = [], []
    if snapshot is not None:
        for manifest in snapshot.manifests(table.io):
            if manifest.content != ManifestContent.DATA:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                data_file = entry.data_file
                if data_file.content != DataFileContent.DATA:
                    continue
                if data_file.file_format != FileFormat.PARQUET:
                    notes.append(f"{data_file.file_path}: a {data_file.file_format.name} file")
                    continue
                files.append(TableFile(data_file.file_path, local_or_url(data_file.file_path)))
    return sorted(files, key=lambda f: f.key), notes


def check(
    table: Table,
    columns: Iterable[str] | None = None,
    *,
    require: Iterable[str] | None = None,
    max_fpp: float | None = None,
    allow_empty: bool = False,
    snapshot_id: int | None = None,
    case_sensitive: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    max_workers: int = DEFAULT_MAX_WORKERS,
    progress: Callable[[CheckReport], None] | None = None,
) -> TableCheckReport:
    """Check every live Parquet data file of the table's snapshot (``snapshot_id``, or the
    current one) as :func:`parquet_bloom.check_file` checks a file, with the same
    ``columns``, ``require`` and ``max_fpp``. Columns are named as the table names them (a
    struct, list or map names its primitive columns), checked against its schema before any
    file is read, and found in each file by field id (a renamed column under its old name in
    old files; a file without it says so in its notes); the table fails when any file
    does, or when no filter was checked in any file unless ``allow_empty=True``. Files that are
    not Parquet are listed in the notes. ``storage_options``: for the data files (default:
    those of the table's FileIO)."""
    schema = table.schema()
    ids = [
        None if names is None else [str(i) for i in leaf_ids(schema, names, case_sensitive)]
        for names in (
            None if names is None else [names] if isinstance(names, str) else list(names)
            for names in (columns, require)
        )
    ]
    if snapshot_id is None:
        snapshot = table.current_snapshot()
    else:
        snapshot = table.metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise ValueError(f"the Iceberg table has no snapshot {snapshot_id}")
    files, notes = live_parquet_files(table, snapshot)
    report = check_table_files(
        table_name(table),
        "iceberg",
        None if snapshot is None else snapshot.snapshot_id,
        files,
        columns=ids[0],
        require=ids[1],
        by_field_id=True,
        max_fpp=max_fpp,
        allow_empty=allow_empty,
        storage_options=storage_options
        if storage_options is not None
        else storage_options_for(table),
        max_workers=max_workers,
        progress=progress,
    )
    return TableCheckReport(
        report.table, report.format, report.version, report.files, report.violations, tuple(notes)
    )

"""The files an index knows, and how it tells that a live file is one of them: by its name and
size, and by the identity its table gives it where it has one
(docs/index.md#what-a-lookup-guarantees).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from parquet_bloom._format import SchemaLeaf
from parquet_bloom._io import location
from parquet_bloom._tables.directories import list_live_files

__all__ = ["IndexedFile", "dataset_files", "file_columns", "file_key", "same_file"]


@dataclass(frozen=True)
class IndexedFile:
    """A file to index or to look up: ``key`` (how the index names it: an absolute local path,
    a URL, or a table's name of the file), where it is read (``path`` on ``filesystem``, None:
    local), ``size`` when known, and the table's identity of it (``modified``: Delta's
    modification time in ms; ``sequence``: Iceberg's data sequence number; -1 where none).

    ``field_ids``: for a table that names columns by id (Iceberg), each index column's field
    id; the file's column is then the leaf whose Parquet ``field_id`` it is, whatever its name
    there (a column renamed since the file was written). None: columns are found by name."""

    key: str
    path: str
    filesystem: Any | None = None
    size: int | None = None
    modified: int = -1
    sequence: int = -1
    field_ids: tuple[tuple[str, int], ...] | None = None


def file_key(name: str) -> str:
    """How an index names a dataset's file: a URL as it is, a local path made absolute."""
    return name if location.is_url(name) else os.path.abspath(name)


def dataset_files(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    storage_options: Mapping[str, Any] | None,
) -> list[IndexedFile]:
    """The files of a dataset, listed (a table directory standing for the table's live
    files: :mod:`parquet_bloom._tables.directories`), each named by :func:`file_key`, in that
    order; a local file named rather than listed has its size looked up (it tells the file)."""
    listed = list_live_files(source, storage_options=storage_options).files
    files = [IndexedFile(file_key(e.name), e.path, e.filesystem, _size(e)) for e in listed]
    return sorted(files, key=lambda f: f.key)


def _size(entry: location.Entry) -> int | None:
    if entry.size is not None or entry.filesystem is not None:
        return entry.size
    try:
        return os.stat(entry.path).st_size
    except OSError:
        return None  # opening it says why


def file_columns(
    file: IndexedFile, leaves: Iterable[SchemaLeaf], columns: Iterable[str]
) -> dict[str, str] | None:
    """Each of ``columns`` the file has -> its path in the file (a column it lacks is left
    out): by name, or by field id where ``file.field_ids`` says. None when the file's columns
    cannot be told by id (its schema has no field ids): no column of it can be ruled out."""
    paths = [leaf.path for leaf in leaves]
    if file.field_ids is None:
        present = set(paths)
        return {c: c for c in columns if c in present}
    by_id: dict[int, str] = {}
    for leaf in leaves:
        if leaf.field_id is not None:
            by_id.setdefault(leaf.field_id, leaf.path)
    if paths and not by_id:
        return None
    ids = dict(file.field_ids)
    return {c: by_id[ids[c]] for c in columns if c in ids and ids[c] in by_id}


def same_file(known: tuple[int, int, int], file: IndexedFile) -> bool:
    """Whether ``file`` is the file the index knew as ``known`` (size, modified, sequence): the
    same size, and the same table identity where both have one."""
    size, modified, sequence = known
    return (
        file.size is not None
        and file.size == size
        and (file.modified < 0 or modified < 0 or file.modified == modified)
        and (file.sequence < 0 or sequence < 0 or file.sequence == sequence)
    )

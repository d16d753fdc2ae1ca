"""The files an index knows, and how it tells that a live file is one of them: by its name and
size, and by the identity its table gives it where it has one
(docs/index.md#what-a-lookup-guarantees).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from parquet_bloom._io import location

__all__ = ["IndexedFile", "dataset_files", "file_key", "same_file"]


@dataclass(frozen=True)
class IndexedFile:
    """A file to index or to look up: ``key`` (how the index names it: an absolute local path,
    a URL, or a table's name of the file), where it is read (``path`` on ``filesystem``, None:
    local), ``size`` when known, and the table's identity of it (``modified``: Delta's
    modification time in ms; ``sequence``: Iceberg's data sequence number; -1 where none)."""

    key: str
    path: str
    filesystem: Any | None = None
    size: int | None = None
    modified: int = -1
    sequence: int = -1


def file_key(name: str) -> str:
    """How an index names a dataset's file: a URL as it is, a local path made absolute."""
    return name if location.is_url(name) else os.path.abspath(name)


def dataset_files(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    storage_options: Mapping[str, Any] | None,
) -> list[IndexedFile]:
    """The files of a dataset, listed, each named by :func:`file_key`, in that order."""
    listed = location.list_files(source, storage_options=storage_options)
    files = [IndexedFile(file_key(e.name), e.path, e.filesystem, e.size) for e in listed]
    return sorted(files, key=lambda f: f.key)


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

"""Lookups of a dataset's live files through its Bloom index, never wrong: the index answers for
the files it knows, as they were when it was built (same path, same size); every live file it
does not know (added, or rewritten, since) is probed through its own filters; files it knows
that are gone are dropped (docs/index.md#what-a-lookup-guarantees).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from parquet_bloom._index.files import IndexedFile, dataset_files, file_columns, same_file
from parquet_bloom._index.lookup import BloomIndex
from parquet_bloom._reader import BloomFilterReader
from parquet_bloom._threads import read_pool
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

__all__ = ["DatasetLookup", "lookup", "lookup_files"]


@dataclass
class DatasetLookup:
    """Where ``column`` may equal a value among a dataset's live files: ``files`` (path -> the
    row groups that may hold it; ``[-1]``: the whole file, whose filters could not be read),
    ``from_index`` (live files the index answered for), ``probed`` (live files it did not
    know, or knew at another size, each read through its own filters), ``gone`` (files the
    index knows that are no longer live), and the cost: ``index_reads`` and
    ``index_bytes_read`` (the index's footer included), ``probe_reads`` and
    ``probe_bytes_read``."""

    column: str
    files: dict[str, list[int]] = field(default_factory=dict)
    from_index: int = 0
    probed: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    index_reads: int = 0
    index_bytes_read: int = 0
    probe_reads: int = 0
    probe_bytes_read: int = 0

    def __str__(self) -> str:
        groups = sum(len(g) for g in self.files.values())
        return (
            f"{self.column}: {len(self.files)} files, {groups} row groups may hold it; "
            f"{self.from_index} files answered by the index ({self.index_reads} reads, "
            f"{self.index_bytes_read:,} bytes), {len(self.probed)} probed through their own "
            f"filters ({self.probe_reads} reads, {self.probe_bytes_read:,} bytes), "
            f"{len(self.gone)} indexed files gone"
        )


def lookup(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    column: str,
    values: Any,
    *,
    index: str | os.PathLike[str] | BloomIndex,
    storage_options: Mapping[str, Any] | None = None,
    index_storage_options: Mapping[str, Any] | None = None,
) -> DatasetLookup:
    """The row groups of ``source``'s live Parquet files (listed now) where ``column`` may equal
    one of ``values``, through the index at ``index`` (a location, or an open
    :class:`BloomIndex`) for the files it knows unchanged, and through their own filters for the
    others."""
    files = dataset_files(source, storage_options)
    if isinstance(index, BloomIndex):
        return lookup_files(files, column, values, index)
    options = storage_options if index_storage_options is None else index_storage_options
    with BloomIndex(index, storage_options=options) as idx:
        return lookup_files(files, column, values, idx, opened_here=True)


def lookup_files(
    files: Sequence[IndexedFile],
    column: str,
    values: Any,
    idx: BloomIndex,
    *,
    opened_here: bool = False,
) -> DatasetLookup:
    """The row groups of the live ``files`` where ``column`` may equal one of ``values``: the
    index's answer for the files it knows as they are (:func:`same_file`), each other file's
    own filters for the rest (``opened_here``: count the index's opening in the cost)."""
    live = {f.key: f for f in files}
    reads, read_bytes = (0, 0) if opened_here else (idx.reads, idx.bytes_read)
    answer = idx.lookup(column, values)
    known = idx.file_rows()
    result = DatasetLookup(column)
    result.index_reads = idx.reads - reads
    result.index_bytes_read = idx.bytes_read - read_bytes
    unchanged = {k for k, f in live.items() if k in known and same_file(known[k], f)}
    for entry in answer.row_groups:
        # A path in several segments (rewritten, refreshed since) answers by its entries of
        # the size it has now.
        if entry.path in unchanged and entry.file_size == known[entry.path][0]:
            result.files.setdefault(entry.path, []).append(entry.row_group)
    result.from_index = len(unchanged)
    result.gone = sorted(set(known) - set(live))
    others = sorted(set(live) - unchanged)
    probes = list(read_pool().map(partial(_probe, column, values), [live[p] for p in others]))
    for path, (groups, probe_reads, probe_bytes) in zip(others, probes, strict=True):
        result.probed.append(path)
        result.probe_reads += probe_reads
        result.probe_bytes_read += probe_bytes
        if groups:
            result.files[path] = groups
    result.files = dict(sorted(result.files.items()))
    return result


def _probe(column: str, values: Any, file: IndexedFile) -> tuple[list[int], int, int]:
    """One file's row groups that may hold a value (through its own filters), and the reads."""
    try:
        reader = BloomFilterReader(file.path, filesystem=file.filesystem, size=file.size)
    except (CorruptFileError, UnsupportedFileError):
        return [-1], 0, 0  # not a file we can read: it stays a candidate, whole
    with reader:
        named = file_columns(file, reader.schema_leaves, [column])
        if named is None:
            return [-1], reader.reads, reader.bytes_read  # its columns cannot be told apart
        if column not in named:
            return [], reader.reads, reader.bytes_read
        groups = reader.row_groups_might_contain(named[column], values)
        return groups, reader.reads, reader.bytes_read

"""Paimon's file indexes: read them, probe values, build them byte for byte as Paimon does, and
find which data files of a table may hold values.

Paimon keeps a ``FileIndexFormat`` container of indexes for each data file whose table sets
``file-index.bloom-filter.columns``: in the manifest entry (``_EMBEDDED_FILE_INDEX``) when it is
at most ``file-index.in-manifest-threshold`` (500 bytes by default), else in a
``<data file>.index`` file beside the data file. Its ``bloom-filter`` index of a column is a
``BloomFilter64``: not a Parquet split-block filter, but a classic Bloom filter over Paimon's
own 64-bit hashes (XXH64 of strings and binaries, Thomas Wang's integer hash of numbers, dates,
times and timestamps). Paimon's scan skips a data file when the index of a column in an ``=``
(or ``IN``) predicate says no value matches. docs/paimon.md describes the format, with the
sources of each fact.

::

    from parquet_bloom import paimon

    idx = paimon.read_file_index("t/dt=2024-01-01/bucket-0/data-...-0.parquet.index")
    bf = idx.bloom_filter("id")                         # BloomFilter64
    bf.might_contain(42), bf.might_contain_many(ids)    # bool, numpy bool array
    paimon.build_bloom_filter(ids, "INT", items=1000, fpp=0.01).to_bytes()  # Paimon's bytes
    paimon.prune_files("warehouse/db.db/t", "id", [42, 43]).kept   # the files that may hold them
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._paimon import container
from parquet_bloom._paimon.bloom import (
    DEFAULT_FPP,
    DEFAULT_ITEMS,
    MAX_BITSET_BYTES,
    MAX_NUM_HASHES,
    BloomFilter64,
    FilterSize,
    filter_size,
)
from parquet_bloom._paimon.container import MAX_HEAD_LENGTH, IndexEntry
from parquet_bloom._paimon.fasthash import PaimonType, parse_type
from parquet_bloom._paimon.fasthash import hash_values as _hash_values
from parquet_bloom._paimon.index import (
    BLOOM_FILTER,
    FileIndex,
    build_bloom_filter,
    build_file_index,
    read_file_index,
    serialize_file_index,
)
from parquet_bloom._paimon.table import DataFile, Field, Table, TableSchema

__all__ = [
    "BLOOM_FILTER",
    "DEFAULT_FPP",
    "DEFAULT_IN_MANIFEST_THRESHOLD",
    "DEFAULT_ITEMS",
    "INDEX_MAGIC",
    "MAX_BITSET_BYTES",
    "MAX_HEAD_LENGTH",
    "MAX_NUM_HASHES",
    "BloomFilter64",
    "DataFile",
    "Field",
    "FileIndex",
    "FilePruneResult",
    "FilterSize",
    "IndexEntry",
    "PaimonType",
    "TableSchema",
    "build_bloom_filter",
    "build_file_index",
    "column_order",
    "data_files",
    "files_for_values",
    "filter_size",
    "hash_value",
    "hash_values",
    "parse_type",
    "prune_files",
    "read_file_index",
    "serialize_file_index",
]

# The public classes are defined in private modules: they name this one (repr, pickles).
for _cls in (BloomFilter64, DataFile, Field, FileIndex, FilterSize, IndexEntry, PaimonType):
    _cls.__module__ = __name__
TableSchema.__module__ = __name__

INDEX_MAGIC = container.MAGIC
# file-index.in-manifest-threshold: containers of at most this many bytes go in the manifest.
DEFAULT_IN_MANIFEST_THRESHOLD = 500


def hash_values(values: Any, data_type: str | PaimonType) -> NDArray[np.uint64]:
    """The 64-bit hashes Paimon's bloom-filter index takes of ``values`` (a sequence, numpy or
    Arrow array) of a ``data_type`` column (``FastHash``), as ``uint64``; a null's is 0."""
    hashes, _ = _hash_values(values, parse_type(data_type))
    return hashes


def hash_value(value: Any, data_type: str | PaimonType) -> int:
    """:func:`hash_values` of one value, as an unsigned int."""
    return int(hash_values([value], data_type)[0])


def column_order(columns: list[str]) -> list[str]:
    """The order Paimon's writer puts the indexes of ``columns`` (as the table option lists
    them) in a container: the order its Java hash maps iterate them."""
    return container.paimon_column_order(columns)


def data_files(
    table_uri: str | os.PathLike[str],
    *,
    snapshot_id: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    filesystem: Any | None = None,
) -> list[DataFile]:
    """The live data files of a Paimon table (its directory, a path or URL) at its latest
    snapshot (or ``snapshot_id``), each with its index: ``DataFile.file_index()``,
    ``DataFile.might_contain(column, value)``."""
    table = Table(table_uri, storage_options=storage_options, filesystem=filesystem)
    return table.data_files(snapshot_id)


@dataclass
class FilePruneResult:
    """Which data files may hold ``column`` in ``values``: ``kept`` (their index may hold one
    of the values, or they have no index for the column) and ``skipped`` (their index holds
    none); ``indexes_read`` counts the ``.index`` files read, ``embedded`` the indexes taken
    from manifests."""

    column: str
    kept: list[DataFile] = field(default_factory=list)
    skipped: list[DataFile] = field(default_factory=list)
    indexes_read: int = 0
    embedded: int = 0

    @property
    def paths(self) -> list[str]:
        """The kept files' paths."""
        return [f.path for f in self.kept]

    def __str__(self) -> str:
        total = len(self.kept) + len(self.skipped)
        return (
            f"{self.column}: kept {len(self.kept)} of {total} data files, skipped "
            f"{len(self.skipped)} ({self.embedded} indexes from manifests, "
            f"{self.indexes_read} .index files read)"
        )


def _as_list(values: Any) -> list[Any]:
    """One value, or the values of a sequence, numpy or Arrow array."""
    if hasattr(values, "to_pylist"):
        out: list[Any] = values.to_pylist()
        return out
    if isinstance(values, str | bytes | bytearray | memoryview) or not isinstance(values, Iterable):
        return [values]
    return list(values)


def _file_column(file: DataFile, field_id: int) -> str | None:
    """The name a column (by field id) has in a data file's schema; None if it has none."""
    found = file.schema.field_by_id(field_id)
    return None if found is None else found.name


def _matches(file: DataFile, field_id: int, values: list[Any]) -> tuple[NDArray[np.bool_], bool]:
    """Which values the file's index may hold, and whether a ``.index`` file was read."""
    name = _file_column(file, field_id)
    if name is None or not file.has_index or not values:
        return np.ones(len(values), dtype=bool), False
    index = file.file_index([name])
    assert index is not None
    return index.might_contain_many(name, values), file.embedded_index is None


def _probe(
    table_uri: str | os.PathLike[str],
    column: str,
    values: list[Any],
    *,
    snapshot_id: int | None,
    storage_options: Mapping[str, Any] | None,
    filesystem: Any | None,
    max_workers: int,
) -> tuple[list[DataFile], list[tuple[NDArray[np.bool_], bool]]]:
    table = Table(table_uri, storage_options=storage_options, filesystem=filesystem)
    sid = snapshot_id if snapshot_id is not None else table.latest_snapshot_id()
    if sid is None:
        return [], []
    schema = table.schema(int(table.snapshot(sid).get("schemaId", 0)))
    target = schema.field(column)
    if target is None:
        names = ", ".join(f.name for f in schema.fields)
        raise ValueError(f"column {column!r} is not in the table (columns: {names})")
    if target.type.kind is None:
        raise ValueError(f"Paimon has no bloom-filter index on {target.type} columns")
    files = table.data_files(sid)
    with ThreadPoolExecutor(max_workers=max(1, max_workers)) as pool:
        answers = list(pool.map(lambda f: _matches(f, target.id, values), files))
    return files, answers


def prune_files(
    table_uri: str | os.PathLike[str],
    column: str,
    values: Any,
    *,
    snapshot_id: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    filesystem: Any | None = None,
    max_workers: int = 8,
) -> FilePruneResult:
    """The data files of a table that may hold ``column = value`` (one value) or ``column IN
    values`` (a list), by their bloom-filter indexes, as Paimon's scan skips files. ``column``
    is named as the table's latest schema names it (a file written before a rename is probed
    under its old name); values are hashed by each file's type of the column."""
    items = _as_list(values)
    files, answers = _probe(
        table_uri,
        column,
        items,
        snapshot_id=snapshot_id,
        storage_options=storage_options,
        filesystem=filesystem,
        max_workers=max_workers,
    )
    result = FilePruneResult(column)
    for file, (found, read) in zip(files, answers, strict=True):
        (result.kept if found.any() or not items else result.skipped).append(file)
        result.indexes_read += int(read)
        result.embedded += int(file.embedded_index is not None)
    return result


def files_for_values(
    table_uri: str | os.PathLike[str],
    column: str,
    values: Any,
    *,
    snapshot_id: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    filesystem: Any | None = None,
    max_workers: int = 8,
) -> dict[Hashable, list[str]]:
    """For each value, the paths of the data files whose index may hold it."""
    items = _as_list(values)
    files, answers = _probe(
        table_uri,
        column,
        items,
        snapshot_id=snapshot_id,
        storage_options=storage_options,
        filesystem=filesystem,
        max_workers=max_workers,
    )
    out: dict[Hashable, list[str]] = {v: [] for v in items}
    for file, (found, _) in zip(files, answers, strict=True):
        for value, hit in zip(items, found, strict=True):
            if hit:
                out[value].append(file.path)
    return out

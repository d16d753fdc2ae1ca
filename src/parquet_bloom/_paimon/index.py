"""One data file's indexes: a ``FileIndexFormat`` container read from a ``.index`` file (through
the IO layer) or from the bytes a manifest entry embeds, and built as Paimon builds one.

Reading a file takes one read of its first 64 KiB (the preamble, the head, and all of a small
file), a second only for a longer head, and one more for the range covering the
``bloom-filter`` indexes asked for when the first read does not hold them; the other indexes
(bitmaps, ...) are listed but not read. Every offset and length is checked
(:mod:`.container`) before a byte of it is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._io.source import ByteSource
from parquet_bloom._paimon import container
from parquet_bloom._paimon.bloom import (
    DEFAULT_FPP,
    DEFAULT_ITEMS,
    MAX_BITSET_BYTES,
    BloomFilter64,
)
from parquet_bloom._paimon.fasthash import PaimonType, parse_type
from parquet_bloom.errors import CorruptFileError

__all__ = [
    "BLOOM_FILTER",
    "FIRST_READ",
    "FileIndex",
    "build_bloom_filter",
    "build_file_index",
    "read_file_index",
    "serialize_file_index",
]

BLOOM_FILTER = "bloom-filter"  # BloomFilterFileIndexFactory.BLOOM_FILTER
# The first read of a .index file: its preamble and head, which are a few dozen bytes a
# column, and all of a small file; a longer head costs one more read.
FIRST_READ = 64 * 1024

DataTypes = Mapping[str, "str | PaimonType"]


class FileIndex:
    """The indexes of one Paimon data file.

    ``entries`` lists every index in the head's order (:class:`IndexEntry`: ``column``,
    ``index_type``, ``offset``, ``length``, ``empty``); ``columns`` the columns indexed.
    ``bloom_filter(column)`` gives a column's :class:`BloomFilter64`; ``might_contain(column,
    value)`` answers as Paimon's reader does: True where the column has no bloom-filter index
    (the file is kept), False for an empty index (no value was written), else the filter's
    answer. ``data_types`` (column -> Paimon type) says how values are hashed; without a
    column's type, integers, strings, bytes, dates and times are still understood.
    """

    def __init__(
        self,
        head: container.Head,
        payloads: Mapping[tuple[str, str], bytes],
        *,
        size: int,
        source: str | None = None,
        data_types: DataTypes | None = None,
    ) -> None:
        self.head = head
        self.size = size
        self.source = source
        self.data_types = {c: parse_type(t) for c, t in (data_types or {}).items()}
        self._payloads = dict(payloads)

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        data_types: DataTypes | None = None,
        source: str | None = None,
    ) -> FileIndex:
        """A container held in memory (a manifest entry's ``_EMBEDDED_FILE_INDEX``, or a
        ``.index`` file's bytes)."""
        raw = bytes(data)
        head = container.parse_head(raw, len(raw), source=source)
        payloads = {
            (e.column, e.index_type): raw[e.offset : e.offset + e.length]
            for e in head.entries
            if not e.empty
        }
        return cls(head, payloads, size=len(raw), source=source, data_types=data_types)

    @property
    def entries(self) -> tuple[container.IndexEntry, ...]:
        return self.head.entries

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(e.column for e in self.entries))

    def entry(self, column: str, index_type: str = BLOOM_FILTER) -> container.IndexEntry | None:
        """The head's entry for ``column``'s ``index_type`` index, or None."""
        for e in self.entries:
            if e.column == column and e.index_type == index_type:
                return e
        return None

    def index_bytes(self, column: str, index_type: str = BLOOM_FILTER) -> bytes | None:
        """The bytes of ``column``'s ``index_type`` index; None when there is no such index or
        it is empty. Raises KeyError for an index that was not read (:func:`read_file_index`
        reads the ``bloom-filter`` indexes of the columns asked for)."""
        e = self.entry(column, index_type)
        if e is None or e.empty:
            return None
        if (column, index_type) not in self._payloads:
            raise KeyError(f"index {index_type!r} of column {column!r} was not read")
        return self._payloads[(column, index_type)]

    def bloom_filter(
        self, column: str, data_type: str | PaimonType | None = None
    ) -> BloomFilter64 | None:
        """``column``'s bloom-filter index, or None when it has none (or an empty one). Raises
        CorruptFileError for a payload that is not a filter."""
        payload = self.index_bytes(column, BLOOM_FILTER)
        if payload is None:
            return None
        e = self.entry(column)
        assert e is not None
        typ = data_type if data_type is not None else self.data_types.get(column)
        return BloomFilter64.from_bytes(
            payload, typ, source=self.source, column=column, offset=e.offset
        )

    def might_contain(self, column: str, value: Any) -> bool:
        """Whether the file may hold ``column == value``, as Paimon's reader decides."""
        return bool(self.might_contain_many(column, [value])[0])

    def might_contain_many(self, column: str, values: Any) -> NDArray[np.bool_]:
        """:meth:`might_contain` of every value (a sequence, numpy or Arrow array)."""
        e = self.entry(column)
        f = self.bloom_filter(column)
        if f is not None:
            return f.might_contain_many(values)
        n = len(values) if hasattr(values, "__len__") else len(list(values))
        # No bloom-filter index: the file is kept; an empty one: nothing was written to it.
        return np.full(n, e is None or not e.empty, dtype=bool)

    def __repr__(self) -> str:
        where = f" of {self.source}" if self.source else ""
        return f"FileIndex({len(self.entries)} indexes{where}: {', '.join(self.columns)})"


def read_file_index(
    source: Any,
    *,
    columns: Iterable[str] | None = None,
    data_types: DataTypes | None = None,
    storage_options: Mapping[str, Any] | None = None,
    filesystem: Any | None = None,
) -> FileIndex:
    """The container of ``source``: a ``.index`` file (a path, a URL, a binary file object,
    or a path on ``filesystem``) or its bytes (``bytes``: a manifest entry's embedded index).
    The ``bloom-filter`` indexes of ``columns`` (default: all) are read."""
    if isinstance(source, bytes | bytearray | memoryview):
        return FileIndex.from_bytes(source, data_types=data_types)
    with ByteSource(source, filesystem=filesystem, storage_options=storage_options) as src:
        name = src.name
        size = src.size
        first = src.read_exact(0, min(size, FIRST_READ))
        head_length = container.parse_preamble(first, size, source=name)
        if head_length > len(first):
            first += src.read_exact(len(first), head_length - len(first))
        head = container.parse_head(first, size, source=name)
        wanted = None if columns is None else set(columns)
        chosen = [
            e
            for e in head.entries
            if e.index_type == BLOOM_FILTER
            and not e.empty
            and (wanted is None or e.column in wanted)
        ]
        for e in chosen:
            if e.length > 4 + MAX_BITSET_BYTES:
                raise CorruptFileError(
                    f"a bloom-filter index of {e.length} bytes: Paimon's bit count is a Java int",
                    source=name,
                    column=e.column,
                    offset=e.offset,
                )
        payloads: dict[tuple[str, str], bytes] = {}
        if chosen:
            start = min(e.offset for e in chosen)
            end = max(e.offset + e.length for e in chosen)
            if end <= len(first):  # the first read holds them
                start, body = 0, first
            else:
                body = src.read_exact(start, end - start)
            for e in chosen:
                payloads[(e.column, e.index_type)] = body[
                    e.offset - start : e.offset - start + e.length
                ]
    return FileIndex(head, payloads, size=size, source=name, data_types=data_types)


# -- building ----------------------------------------------------------------------------------


def build_bloom_filter(
    values: Any,
    data_type: str | PaimonType,
    items: int = DEFAULT_ITEMS,
    fpp: float = DEFAULT_FPP,
) -> BloomFilter64:
    """The bloom-filter index Paimon builds of ``values`` (nulls skipped) in a ``data_type``
    column whose index has options ``items`` and ``fpp``: byte for byte the same."""
    f = BloomFilter64.from_size(items, fpp, data_type)
    f.insert(values)
    return f


def serialize_file_index(indexes: Mapping[str, Mapping[str, bytes | None]]) -> bytes:
    """A container of ``indexes`` (column -> index type -> bytes, None for an empty index), in
    the mappings' order, as ``FileIndexFormat.Writer`` writes it."""
    return container.encode((c, list(by_type.items())) for c, by_type in indexes.items())


def build_file_index(
    columns: Mapping[str, Any],
    data_types: Mapping[str, str | PaimonType],
    *,
    items: int | Mapping[str, int] = DEFAULT_ITEMS,
    fpp: float | Mapping[str, float] = DEFAULT_FPP,
    order: Sequence[str] | None = None,
) -> bytes:
    """The ``.index`` container Paimon writes for a data file whose ``columns`` (name ->
    values) have bloom-filter indexes: one :func:`build_bloom_filter` a column, with the
    column's ``items`` and ``fpp`` (one for all, or per column), in the order Paimon's writer
    gives them. ``order`` is the table's ``file-index.bloom-filter.columns`` list (default:
    ``columns``' order), which decides that order when names collide in Java's hash maps."""
    listed = list(order) if order is not None else list(columns)
    missing = [c for c in columns if c not in listed]
    if missing:
        raise ValueError(f"columns {missing} are not in order={listed}")
    built: dict[str, dict[str, bytes | None]] = {}
    for column in container.paimon_column_order([c for c in listed if c in columns]):
        n = items[column] if isinstance(items, Mapping) else items
        p = fpp[column] if isinstance(fpp, Mapping) else fpp
        f = build_bloom_filter(columns[column], data_types[column], n, p)
        built[column] = {BLOOM_FILTER: f.to_bytes()}
    return serialize_file_index(built)

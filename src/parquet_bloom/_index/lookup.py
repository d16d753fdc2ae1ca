"""Lookups in a Bloom index: which row groups may hold a value, from the eight slices its hash
picks in each size class and the entries of the candidates (docs/index.md#lookups).

One value costs, once the footer is read, two rounds of reads: the slices of every class (one
round: planned together, coalesced, fetched at once), then the candidates' entries (and the
entries of the row groups without filters). The footer is one tail read when the index is
opened.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from parquet_bloom import _format as fmt
from parquet_bloom import _logical as logical
from parquet_bloom._index import entries as ent
from parquet_bloom._index import layout, puffin, slices, store, text
from parquet_bloom._index.entries import Entry
from parquet_bloom._io.ranges import MAX_GAP, ByteRange, ReadBuffer, coalesce
from parquet_bloom._io.source import ByteSource
from parquet_bloom._sbbf import BITS_PER_BLOCK, BYTES_PER_BLOCK
from parquet_bloom._threads import read_pool
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

__all__ = ["BloomIndex", "IndexClass", "IndexLookup", "IndexSegment"]

# The index's first read: its footer lists a few blobs a column and size class, so 64 KiB holds
# it for hundreds of columns; a larger footer costs one more read.
_TAIL = 64 * 1024


@dataclass(frozen=True)
class IndexClass:
    """One class of a column: ``num_bytes`` (None: the row groups without filters),
    ``row_groups`` (N), its ``slices`` and ``entries`` blobs, the entries' ``path_width``."""

    column: str
    num_bytes: int | None
    row_groups: int
    slices: puffin.BlobMetadata | None
    entries: puffin.BlobMetadata
    path_width: int

    @property
    def num_blocks(self) -> int:
        return (self.num_bytes or 0) // BYTES_PER_BLOCK

    def entry_range(self, i: int) -> ByteRange:
        size = ent.record_size(self.path_width)
        return ByteRange(self.entries.offset + i * size, size)


@dataclass
class IndexLookup:
    """The answer of :meth:`BloomIndex.lookup`: ``row_groups``, the entries of the row groups
    that may hold a value (every row group whose filter may, and every one without a usable
    filter), sorted by path and row group; ``filtered`` (the row groups whose filters were
    consulted) and ``unfiltered`` (those returned without one); ``reads`` and ``bytes_read``
    (of this lookup, the footer's not counted)."""

    column: str
    row_groups: list[Entry] = field(default_factory=list)
    filtered: int = 0
    unfiltered: int = 0
    reads: int = 0
    bytes_read: int = 0

    def files(self) -> dict[str, list[int]]:
        """The candidates by file: path -> row groups (``[-1]``: the whole file)."""
        out: dict[str, list[int]] = {}
        for e in self.row_groups:
            out.setdefault(e.path, []).append(e.row_group)
        return out


class IndexSegment:
    """One Puffin file of an index, opened for lookups: its footer is read (one read of its
    tail) unless the index's pointer brought it (``known``: the file's size, the footer's
    offset and bytes). ``columns``; ``row_groups(column)``; ``classes(column)``;
    ``num_bytes``; ``reads`` and ``bytes_read`` (all reads so far)."""

    def __init__(
        self,
        segment_location: str,
        *,
        storage_options: Mapping[str, Any] | None = None,
        known: tuple[int, int, bytes] | None = None,
        filesystem: Any | None = None,
    ) -> None:
        size = known[0] if known is not None else None
        self._named = known is not None  # a segment an index directory's pointer names
        with _present(os.fspath(segment_location), self._named):
            if filesystem is None:
                self._source = ByteSource(
                    segment_location, storage_options=storage_options, size=size
                )
            else:  # a path on the index directory's filesystem: its client shared
                self._source = ByteSource(segment_location, filesystem=filesystem, size=size)
        try:
            with _present(self._source.name, self._named):
                self._open(known)
        except BaseException:
            self._source.close()
            raise

    def _open(self, known: tuple[int, int, bytes] | None) -> None:
        source = self._source
        name = source.name
        if known is not None:
            size, footer_offset, footer = known
            if not 0 < footer_offset < size:
                raise CorruptFileError(
                    f"the pointer puts the footer at {footer_offset} in {size} bytes", source=name
                )
        else:
            start, tail = source.read_tail(_TAIL)
            size = source.size
            if size < 2 * len(puffin.MAGIC) + puffin.TRAILER_SIZE:
                raise CorruptFileError(f"a Puffin file of {size} bytes is too short", source=name)
            length = puffin.footer_length(tail[-puffin.TRAILER_SIZE :], file_size=size, source=name)
            footer_offset = size - puffin.TRAILER_SIZE - length - len(puffin.MAGIC)
            if footer_offset >= start:
                footer = tail[footer_offset - start : len(tail) - puffin.TRAILER_SIZE]
            else:
                footer = source.read_exact(footer_offset, length + len(puffin.MAGIC))
        self.footer = puffin.decode_footer(footer, footer_offset=footer_offset, source=name)
        version = self.footer.properties.get(layout.VERSION_PROPERTY)
        if version != layout.FORMAT_VERSION:
            raise UnsupportedFileError(
                f"not a parquet-bloom index of version {layout.FORMAT_VERSION} "
                f"({layout.VERSION_PROPERTY} is {version!r})",
                source=name,
            )
        self._classes: dict[str, list[IndexClass]] = {}
        self._types: dict[str, fmt.SchemaLeaf] = {}
        self._files_blob: puffin.BlobMetadata | None = None
        self._file_rows: list[tuple[str, int, int, int]] | None = None
        # Token and n-gram filters: (column, spec key) -> the spec and its classes.
        self._text: dict[tuple[str, str], tuple[text.TextSpec, list[IndexClass]]] = {}
        self._gather()
        self._gather_text()

    def _gather(self) -> None:
        name = self._source.name
        slices_by: dict[tuple[str, str], puffin.BlobMetadata] = {}
        entries_by: dict[tuple[str, str], puffin.BlobMetadata] = {}
        for meta in self.footer.blobs:
            if meta.type == layout.FILES_BLOB:
                self._files_blob = meta
                continue
            if meta.type not in (layout.SLICES_BLOB, layout.ROW_GROUPS_BLOB):
                continue  # another tool's blob
            key = (_prop(meta, layout.COLUMN, name), _prop(meta, layout.CLASS, name))
            (slices_by if meta.type == layout.SLICES_BLOB else entries_by)[key] = meta
        for key, entries in entries_by.items():
            column, _ = key
            n = _int(entries, layout.ROW_GROUPS, name)
            width = _int(entries, layout.PATH_WIDTH, name)
            if entries.length != n * ent.record_size(width):
                raise CorruptFileError(
                    f"the entries of column {column!r} have {entries.length} bytes, not "
                    f"{n} x {ent.record_size(width)}",
                    source=name,
                    offset=entries.offset,
                )
            blob = slices_by.pop(key, None)
            num_bytes = None
            if entries.properties.get(layout.FILTERS) == "sbbf":
                if blob is None:
                    raise CorruptFileError(
                        f"a class of column {column!r} has entries but no slices", source=name
                    )
                num_bytes = _int(blob, layout.NUM_BYTES, name)
                if num_bytes <= 0 or num_bytes % BYTES_PER_BLOCK:
                    raise CorruptFileError(
                        f"a filter size of {num_bytes} bytes is not whole blocks", source=name
                    )
                expected = slices.slice_bytes(n) * (num_bytes // BYTES_PER_BLOCK) * BITS_PER_BLOCK
                if blob.length != expected or _int(blob, layout.ROW_GROUPS, name) != n:
                    raise CorruptFileError(
                        f"the slices of column {column!r} ({num_bytes} B filters, {n} row "
                        f"groups) have {blob.length} bytes, not {expected}",
                        source=name,
                        offset=blob.offset,
                    )
                if column not in self._types:
                    typed = {
                        k[len(layout.TYPE_PREFIX) :]: v
                        for k, v in blob.properties.items()
                        if k.startswith(layout.TYPE_PREFIX)
                    }
                    self._types[column] = fmt.leaf_from_type_properties(column, typed)
            self._classes.setdefault(column, []).append(
                IndexClass(column, num_bytes, n, blob, entries, width)
            )
        if slices_by:
            column, _ = next(iter(slices_by))
            raise CorruptFileError(f"a class of column {column!r} has no entries", source=name)

    def _gather_text(self) -> None:
        name = self._source.name
        slices_by: dict[tuple[str, str], puffin.BlobMetadata] = {}
        entries_by: dict[tuple[str, str, str], puffin.BlobMetadata] = {}
        for meta in self.footer.blobs:
            if meta.type == layout.TEXT_SLICES_BLOB:
                slices_by[(_prop(meta, layout.COLUMN, name), _prop(meta, layout.TEXT, name))] = meta
            elif meta.type == layout.TEXT_ROW_GROUPS_BLOB:
                where = (
                    _prop(meta, layout.COLUMN, name),
                    _prop(meta, layout.TEXT, name),
                    _prop(meta, layout.CLASS, name),
                )
                entries_by[where] = meta
        for (column, key, number), entries in entries_by.items():
            n = _int(entries, layout.ROW_GROUPS, name)
            width = _int(entries, layout.PATH_WIDTH, name)
            if entries.length != n * ent.record_size(width):
                raise CorruptFileError(
                    f"the text entries of column {column!r} have {entries.length} bytes, not "
                    f"{n} x {ent.record_size(width)}",
                    source=name,
                    offset=entries.offset,
                )
            blob = slices_by.get((column, key)) if number != "none" else None
            if number != "none" and blob is None:
                raise CorruptFileError(
                    f"the text filter {key} of column {column!r} has entries but no slices",
                    source=name,
                )
            spec = _spec_of_key(key, name)
            if blob is not None:
                self._check_text(blob, spec, column, n)
            self._text.setdefault((column, key), (spec, []))[1].append(
                IndexClass(column, None if blob is None else spec.size, n, blob, entries, width)
            )

    def _check_text(
        self, blob: puffin.BlobMetadata, spec: text.TextSpec, column: str, n: int
    ) -> None:
        """A text filter's slices blob agrees with its key and has the bytes it must."""
        name = self._source.name
        parts = (
            _prop(blob, layout.KIND, name),
            _int(blob, layout.NGRAM, name) if spec.n is not None else None,
            _int(blob, layout.NUM_BYTES, name),
            _int(blob, layout.HASHES, name),
            _int(blob, layout.SEED, name),
        )
        expected = slices.slice_bytes(n) * spec.num_bits
        if (
            parts != (spec.kind, spec.n, spec.size, spec.hashes, spec.seed)
            or spec.size == 0
            or spec.hashes == 0
            or blob.length != expected
            or _int(blob, layout.ROW_GROUPS, name) != n
        ):
            raise CorruptFileError(
                f"the text filter {spec.key} of column {column!r} ({n} row groups) has "
                f"{blob.length} bytes of slices, not {expected}, or does not match its parts",
                source=name,
                offset=blob.offset,
            )

    # -- what it holds -----------------------------------------------------------------------

    def text_filters(self, column: str) -> list[text.TextSpec]:
        """The token and n-gram filters the segment holds for ``column``."""
        return [spec for (c, _), (spec, _) in self._text.items() if c == column]

    @property
    def text_columns(self) -> list[str]:
        return list(dict.fromkeys(c for c, _ in self._text))

    def text_classes(self, column: str, spec: text.TextSpec) -> list[IndexClass]:
        """The classes of ``column``'s ``spec`` filter (none: the segment has no such filter):
        the filtered class (``slices`` set) and the one without filters."""
        found = self._text.get((column, spec.key))
        return [] if found is None else list(found[1])

    @property
    def columns(self) -> list[str]:
        return list(self._classes)

    @property
    def num_bytes(self) -> int:
        return self._source.size

    @property
    def reads(self) -> int:
        return self._source.reads

    @property
    def bytes_read(self) -> int:
        return self._source.bytes_read

    def classes(self, column: str) -> dict[int | None, int]:
        """Filter size in bytes (None: without filters) -> the row groups of that class."""
        return {c.num_bytes: c.row_groups for c in self._column(column)}

    def row_groups(self, column: str) -> int:
        return sum(c.row_groups for c in self._column(column))

    def files(self) -> dict[str, int]:
        """Every file the segment was built from: path -> size (one read)."""
        return {path: size for path, size, _, _ in self.file_rows()}

    def file_rows(self) -> list[tuple[str, int, int, int]]:
        """Every file the segment was built from: (path, size, modified, sequence); read once
        (a segment never changes once written)."""
        if self._file_rows is None:
            self._file_rows = self._read_file_rows()
        return list(self._file_rows)

    def _read_file_rows(self) -> list[tuple[str, int, int, int]]:
        blob = self._files_blob
        if blob is None:
            raise CorruptFileError("the index lists no files", source=self._source.name)
        data = self.read_blob(blob)
        try:
            return [
                (str(path), int(size), int(modified), int(sequence))
                for path, size, modified, sequence in json.loads(data)
            ]
        except (ValueError, TypeError) as err:
            raise CorruptFileError(
                f"the index's file list does not decode: {err}",
                source=self._source.name,
                offset=blob.offset,
            ) from None

    def _column(self, column: str) -> list[IndexClass]:
        return self._classes.get(column, [])

    # -- whole blobs, for compaction ---------------------------------------------------------

    def column_classes(self, column: str) -> list[IndexClass]:
        """The column's classes in this segment (none if it has no such column)."""
        return list(self._column(column))

    def type_properties(self, column: str) -> dict[str, str]:
        """The column's type as the segment's slices record it (empty: no filtered class)."""
        for c in self._column(column):
            if c.slices is not None:
                return {
                    k[len(layout.TYPE_PREFIX) :]: v
                    for k, v in c.slices.properties.items()
                    if k.startswith(layout.TYPE_PREFIX)
                }
        return {}

    def column_type(self, column: str) -> fmt.SchemaLeaf | None:
        """The column's Parquet type as the segment records it (None: no filtered class)."""
        return self._types.get(column)

    def arrow_schema(self, column: str) -> pa.Schema | None:
        """The column's top-level field as pyarrow reads the files (one field's schema), or
        None when the segment does not record it."""
        for c in self._column(column):
            if c.slices is not None and layout.ARROW_FIELD in c.slices.properties:
                try:
                    raw = bytes.fromhex(c.slices.properties[layout.ARROW_FIELD])
                    schema: pa.Schema = pa.ipc.read_schema(pa.py_buffer(raw))
                except (ValueError, pa.ArrowException) as err:
                    raise CorruptFileError(
                        f"column {column!r}: its Arrow field does not decode: {err}",
                        source=self._source.name,
                    ) from None
                return schema
        return None

    def read_blob(self, blob: puffin.BlobMetadata) -> bytes:
        with _present(self._source.name, self._named):
            return self._source.read_exact(blob.offset, blob.length)

    def read_entries(self, c: IndexClass) -> list[Entry]:
        """Every entry of a class, in order (one read)."""
        data = self.read_blob(c.entries)
        size = ent.record_size(c.path_width)
        name = self._source.name
        return [
            ent.decode_entry(
                data[i * size : (i + 1) * size],
                c.path_width,
                source=name,
                offset=c.entries.offset + i * size,
            )
            for i in range(c.row_groups)
        ]

    # -- lookups -----------------------------------------------------------------------------

    def lookup(self, column: str, values: Any) -> IndexLookup:
        """The row groups that may hold ``column = value`` for any of ``values`` (one literal,
        or a list: ``IN``), encoded as the files store the column (see
        :meth:`parquet_bloom.BloomFilterReader.row_groups_might_contain`)."""
        classes = self._column(column)
        reads, read_bytes = self._source.reads, self._source.bytes_read
        answer = IndexLookup(column)
        leaf = self._types.get(column)
        probe = logical.literal_probe(values, leaf) if leaf is not None else None
        filtered = [c for c in classes if c.num_bytes is not None]
        answer.filtered = sum(c.row_groups for c in filtered)
        wanted: list[tuple[IndexClass, list[int]]] = [
            (c, list(range(c.row_groups))) for c in classes if c.num_bytes is None
        ]
        answer.unfiltered = sum(len(rows) for _, rows in wanted)
        if probe is not None and probe.always_keep:
            wanted += [(c, list(range(c.row_groups))) for c in filtered]
        elif probe is not None and probe.hashes.size:
            wanted += self._candidates(filtered, probe.hashes)
        answer.row_groups = sorted(self._entries(wanted))
        answer.reads = self._source.reads - reads
        answer.bytes_read = self._source.bytes_read - read_bytes
        return answer

    def _candidates(
        self, classes: Sequence[IndexClass], hashes: np.ndarray
    ) -> list[tuple[IndexClass, list[int]]]:
        """Round one: every class's slices for ``hashes``, read together; each class's
        candidates."""
        plans = []
        ranges: list[ByteRange] = []
        for c in classes:
            positions = slices.lane_positions(hashes, c.num_blocks)
            assert c.slices is not None
            base = c.slices.offset
            wanted = {
                int(p): ByteRange(base + off, length)
                for p, (off, length) in zip(
                    np.unique(positions), slices.slice_ranges(positions, c.row_groups), strict=True
                )
            }
            plans.append((c, positions, wanted))
            ranges += wanted.values()
        held = self._read(ranges)
        out = []
        for c, positions, wanted in plans:
            got = {p: held.get(r) for p, r in wanted.items()}
            found = slices.candidates(positions, got, c.row_groups)
            if found.size:
                out.append((c, [int(i) for i in found]))
        return out

    def lookup_tokens(
        self, column: str, spec: text.TextSpec, tokens: Sequence[bytes]
    ) -> IndexLookup:
        """The row groups whose ``spec`` filter of ``column`` may hold every one of ``tokens``
        (at least one), and every row group without such a filter. A segment without that
        filter returns each of its files whole."""
        reads, read_bytes = self._source.reads, self._source.bytes_read
        answer = IndexLookup(column)
        found = self._text.get((column, spec.key))
        if found is None:
            answer.row_groups = sorted(
                Entry(path, -1, size, -1, modified, sequence)
                for path, size, modified, sequence in self.file_rows()
            )
            answer.unfiltered = len(answer.row_groups)
        else:
            classes = found[1]
            wanted: list[tuple[IndexClass, list[int]]] = []
            ranges: list[ByteRange] = []
            plans = []
            pairs = text.hash_pairs(list(tokens), spec.seed)
            positions = np.unique(text.positions(pairs, spec.hashes, spec.num_bits))
            for c in classes:
                if c.slices is None:
                    wanted.append((c, list(range(c.row_groups))))
                    answer.unfiltered += c.row_groups
                    continue
                answer.filtered += c.row_groups
                s = slices.slice_bytes(c.row_groups)
                plan = {int(p): ByteRange(c.slices.offset + int(p) * s, s) for p in positions}
                plans.append((c, plan))
                ranges += plan.values()
            held = self._read(ranges)
            for c, plan in plans:
                got = {p: held.get(r) for p, r in plan.items()}
                rows = slices.candidates(positions.reshape(1, -1), got, c.row_groups)
                if rows.size:
                    wanted.append((c, [int(i) for i in rows]))
            answer.row_groups = sorted(self._entries(wanted))
        answer.reads = self._source.reads - reads
        answer.bytes_read = self._source.bytes_read - read_bytes
        return answer

    def _entries(self, wanted: Sequence[tuple[IndexClass, list[int]]]) -> list[Entry]:
        """Round two: the entries of ``wanted`` (a class and its row groups' places in it)."""
        ranges = [c.entry_range(i) for c, rows in wanted for i in rows]
        held = self._read(ranges)
        name = self._source.name
        return [
            ent.decode_entry(held.get(r), c.path_width, source=name, offset=r.offset)
            for c, rows in wanted
            for r in (c.entry_range(i) for i in rows)
        ]

    def _read(self, ranges: Sequence[ByteRange]) -> ReadBuffer:
        held = ReadBuffer()
        merged = coalesce(ranges, MAX_GAP)
        with _present(self._source.name, self._named):
            for r, data in zip(merged, self._source.read(merged), strict=True):
                held.add(r.offset, data)
        return held

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> IndexSegment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"IndexSegment({self._source.name!r}, columns={self.columns})"


@contextmanager
def _present(name: str, named: bool) -> Iterator[None]:
    """A segment file the pointer names (``named``) gone is told as what it means: the index
    names a file removed from under it (never a silent miss: its files cannot be answered)."""
    try:
        yield
    except FileNotFoundError as err:
        if not named:
            raise
        raise FileNotFoundError(
            errno.ENOENT,
            f"the Bloom index's segment {name} is missing: the index names it, so it was "
            "removed from under the index (by a compaction whose retain_seconds was shorter "
            "than a concurrent refresh took, or by hand); build the index again "
            "(parquet-bloom index build)",
            name,
        ) from err


def _prop(blob: puffin.BlobMetadata, key: str, source: str) -> str:
    value = blob.properties.get(key)
    if value is None:
        raise CorruptFileError(f"a {blob.type} blob has no {key!r} property", source=source)
    return value


def _spec_of_key(key: str, source: str) -> text.TextSpec:
    """A text filter's spec from its key alone (a class without filters names it so)."""
    kind, _, rest = key.partition("(")
    try:
        parts = [int(p) for p in rest.rstrip(")").split(",")]
        if kind == text.TOKENBF and len(parts) == 3:
            return text.TextSpec(kind, None, *parts)
        if kind == text.NGRAMBF and len(parts) == 4:
            return text.TextSpec(kind, *parts)
    except ValueError:
        pass
    raise CorruptFileError(
        f"a text filter named {key!r} is not one this library writes", source=source
    )


def _int(blob: puffin.BlobMetadata, key: str, source: str) -> int:
    text = _prop(blob, key, source)
    try:
        value = int(text)
    except ValueError:
        raise CorruptFileError(
            f"a {blob.type} blob's {key!r} is {text!r}, not an integer", source=source
        ) from None
    if value < 0:
        raise CorruptFileError(f"a {blob.type} blob's {key!r} is negative", source=source)
    return value


class BloomIndex:
    """A Bloom index, opened for lookups: one Puffin file (a location ending in ``.puffin``:
    its footer read from its tail), or an index directory (its pointer read: it names the
    segments and carries their footers). :meth:`lookup` asks every segment, at once.

    ``columns``; ``row_groups(column)``; ``classes(column)`` (filter size, None for the row
    groups without filters -> row groups, over all segments); ``segments``; ``num_bytes``
    (the segments' sizes); ``generation`` (the pointer's; 0 for one file); ``reads`` and
    ``bytes_read`` (every read so far, the pointer's included). ``pointer``: for an index
    directory, the pointer to open it at, already read (the library's writers); its reads are
    not counted.
    """

    def __init__(
        self,
        index_location: str | os.PathLike[str],
        *,
        storage_options: Mapping[str, Any] | None = None,
        pointer: store.Pointer | None = None,
    ) -> None:
        target = os.fspath(index_location)
        self.location = target
        self._extra_reads = self._extra_bytes = 0
        self.generation = 0
        self.segments: list[IndexSegment] = []
        if store.is_single_file(target):
            self.segments.append(IndexSegment(target, storage_options=storage_options))
            return
        where = store.Directory.of(target, storage_options)
        if pointer is None:
            pointer = store.read_pointer(where, storage_options)
            if pointer is None:
                raise FileNotFoundError(
                    f"no Bloom index at {target}: it has no {store.POINTER} (build one with "
                    "parquet_bloom.index.build_index)"
                )
            self._extra_reads, self._extra_bytes = pointer.reads, pointer.size
        self.generation = pointer.generation
        try:
            for ref in pointer.segments:
                # Its URL (which names it in messages; fsspec strips the protocol), but a
                # chained one's path on the directory's filesystem.
                name = where.path(ref.name) if "::" in target else store.join(target, ref.name)
                self.segments.append(
                    IndexSegment(
                        name,
                        known=(ref.size, ref.footer_offset, ref.footer),
                        filesystem=where.filesystem,
                    )
                )
        except BaseException:
            self.close()
            raise

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(c for s in self.segments for c in s.columns))

    @property
    def num_bytes(self) -> int:
        return sum(s.num_bytes for s in self.segments)

    @property
    def reads(self) -> int:
        return self._extra_reads + sum(s.reads for s in self.segments)

    @property
    def bytes_read(self) -> int:
        return self._extra_bytes + sum(s.bytes_read for s in self.segments)

    def classes(self, column: str) -> dict[int | None, int]:
        """Filter size in bytes (None: without filters) -> row groups, over every segment."""
        self._check(column)
        out: dict[int | None, int] = {}
        for s in self.segments:
            for size, n in s.classes(column).items():
                out[size] = out.get(size, 0) + n
        return out

    def row_groups(self, column: str) -> int:
        self._check(column)
        return sum(s.row_groups(column) for s in self.segments)

    def column_type(self, column: str) -> fmt.SchemaLeaf | None:
        """The column's Parquet type, as the first segment with filters for it records."""
        for segment in self.segments:
            found = segment.column_type(column)
            if found is not None:
                return found
        return None

    def arrow_schema(self, column: str) -> pa.Schema | None:
        """The column's top-level Arrow field (as a one-field schema) the first segment that
        has filters for it records."""
        for segment in self.segments:
            found = segment.arrow_schema(column)
            if found is not None:
                return found
        return None

    def files(self) -> dict[str, int]:
        """Every file the index was built from: path -> size, the newest segment's where a
        path is in several (one read a segment)."""
        return {path: size for path, (size, _, _) in self.file_rows().items()}

    def file_rows(self) -> dict[str, tuple[int, int, int]]:
        """Every file the index was built from: path -> (size, modified, sequence), the newest
        segment's where a path is in several."""
        out: dict[str, tuple[int, int, int]] = {}
        for segment in self.segments:
            for path, size, modified, sequence in segment.file_rows():
                out[path] = (size, modified, sequence)
        return out

    @property
    def text_columns(self) -> list[str]:
        """The columns with a token or n-gram filter in some segment."""
        return list(dict.fromkeys(c for s in self.segments for c in s.text_columns))

    def text_filters(self, column: str) -> list[text.TextSpec]:
        """The token and n-gram filters of ``column``, over every segment."""
        return list(dict.fromkeys(t for s in self.segments for t in s.text_filters(column)))

    def lookup_tokens(
        self, column: str, spec: text.TextSpec, tokens: Sequence[bytes]
    ) -> IndexLookup:
        """The row groups whose ``spec`` filter of ``column`` may hold every one of ``tokens``
        (tokens or n-grams as ``spec`` splits values; at least one), and every row group the
        filter does not cover, over every segment (a segment without the filter: each of its
        files whole)."""
        if not tokens:
            raise ValueError("a token lookup needs at least one token")
        if spec not in self.text_filters(column):
            raise ValueError(f"the index has no {spec.key} filter of column {column!r}")
        return self._merged(column, lambda s: s.lookup_tokens(column, spec, tokens))

    def lookup(self, column: str, values: Any) -> IndexLookup:
        """The row groups that may hold ``column = value`` for any of ``values`` (one literal,
        or a list: ``IN``), encoded as the files store the column (see
        :meth:`parquet_bloom.BloomFilterReader.row_groups_might_contain`), over every segment
        (asked at once)."""
        self._check(column)
        return self._merged(column, lambda s: s.lookup(column, values))

    def _merged(self, column: str, ask: Callable[[IndexSegment], IndexLookup]) -> IndexLookup:
        if len(self.segments) == 1:
            return ask(self.segments[0])
        answers = list(read_pool().map(ask, self.segments))
        merged = IndexLookup(column)
        for a in answers:
            merged.row_groups += a.row_groups
            merged.filtered += a.filtered
            merged.unfiltered += a.unfiltered
            merged.reads += a.reads
            merged.bytes_read += a.bytes_read
        # A file in two segments at the same size (indexed by two writers at once) answers once.
        merged.row_groups = sorted(set(merged.row_groups))
        return merged

    def _check(self, column: str) -> None:
        if column not in self.columns:
            known = ", ".join(map(repr, self.columns)) or "none"
            raise ValueError(f"the index has no column {column!r} (it has {known})")

    def close(self) -> None:
        for s in self.segments:
            s.close()

    def __enter__(self) -> BloomIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"BloomIndex({self.location!r}, segments={len(self.segments)}, columns={self.columns})"
        )

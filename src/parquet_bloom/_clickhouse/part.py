"""A MergeTree part's skip indexes: found through ``checksums.txt``, read through the one io
layer (:class:`parquet_bloom._io.source.ByteSource`), every file checked against its size and
hash there, every compressed block against its checksum, every granule against its marks."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._clickhouse import files as F
from parquet_bloom._clickhouse.blocks import decompress_stream
from parquet_bloom._clickhouse.filters import (
    BLOOM_FILTER,
    DEFAULT_FPP,
    NGRAMBF,
    TOKENBF,
    ClickHouseBloomFilter,
    best_practices,
)
from parquet_bloom._clickhouse.schema import IndexDefinition, TableSchema, parse_table_sql
from parquet_bloom._clickhouse.siphash import stream_file_name
from parquet_bloom._clickhouse.types import ColumnType, parse_type
from parquet_bloom._io import location
from parquet_bloom._io.source import ByteSource
from parquet_bloom.errors import BloomFilterError, CorruptFileError

__all__ = ["Index", "Part", "escape_for_file_name", "find_table_sql", "open_part", "read_whole"]

PACKED = "skp_idx.packed"
# Marks extensions a skip index may have: .mrk (two fields, fixed granularity), .mrk2 (wide
# parts), .mrk3 (compact parts before 26.x), .mrk4 (compact parts of 26.x); a leading c means
# the marks file is compressed (compress_marks).
MARK_EXTENSIONS = (".mrk", ".mrk2", ".mrk3", ".mrk4", ".cmrk", ".cmrk2", ".cmrk3", ".cmrk4")
# The largest small text file (columns.txt, count.txt, a table's .sql) read whole.
MAX_TEXT_FILE = 16 << 20
# The largest index or marks file read whole; ClickHouse's own are far smaller.
MAX_INDEX_FILE = 1 << 31
# A granule's bloom_filter N (distinct hashes) cannot exceed the rows of its granules; this bounds
# N before any allocation when the rows are not known.
MAX_GRANULE_ROWS = 1 << 32


def escape_for_file_name(name: str) -> str:
    """``escapeForFileName``: letters, digits and ``_`` kept, every other byte as ``%XX``."""
    out = []
    for b in name.encode():
        ch = chr(b)
        out.append(ch if (ch.isascii() and ch.isalnum()) or ch == "_" else f"%{b:02X}")
    return "".join(out)


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name if location.is_url(base) else os.path.join(base, name)


def read_whole(path: str, filesystem: Any, limit: int) -> bytes:
    with ByteSource(path, filesystem=filesystem) as src:
        size = src.size
        if size > limit:
            raise CorruptFileError(f"file of {size} bytes, over the {limit} limit", source=path)
        return src.read_exact(0, size) if size else b""


def find_table_sql(part_dir: str) -> str | None:
    """The table statement of a part lying in a ClickHouse data directory: Atomic databases
    keep ``store/<xxx>/<db uuid>/<table>.sql`` naming the table's UUID (the part's parent
    directory); Ordinary ones ``metadata/<db>/<table>.sql`` beside ``data/<db>/<table>``."""
    table_dir = os.path.dirname(os.path.abspath(part_dir.rstrip("/")))
    table_uuid = os.path.basename(table_dir)
    store = os.path.dirname(os.path.dirname(table_dir))
    if re.fullmatch(r"[0-9a-f-]{36}", table_uuid) and os.path.basename(store) == "store":
        needle = f"UUID '{table_uuid}'"
        for prefix in sorted(os.listdir(store)):
            db_dirs = os.path.join(store, prefix)
            if not os.path.isdir(db_dirs):
                continue
            for db in os.listdir(db_dirs):
                d = os.path.join(db_dirs, db)
                if not os.path.isdir(d):
                    continue
                for f in os.listdir(d):
                    if f.endswith(".sql"):
                        text = read_whole(os.path.join(d, f), None, MAX_TEXT_FILE)
                        if needle.encode() in text.split(b"\n", 1)[0]:
                            return text.decode("utf-8")
    db_dir = os.path.dirname(table_dir)
    root = os.path.dirname(os.path.dirname(db_dir))
    candidate = os.path.join(
        root, "metadata", os.path.basename(db_dir), os.path.basename(table_dir) + ".sql"
    )
    if os.path.isfile(candidate):
        return read_whole(candidate, None, MAX_TEXT_FILE).decode("utf-8")
    return None


@dataclass
class Index:
    """One skip index of a part: its definition, the types of its columns, its granules'
    filters (one list a granule, one filter an index column) and the row ranges they cover."""

    definition: IndexDefinition
    column_types: tuple[ColumnType, ...]
    filters: list[list[ClickHouseBloomFilter]]
    granule_rows: list[tuple[int, int]]
    file: str
    num_bytes: int
    fpp_asked: float | None
    bits_per_row: int | None

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def type(self) -> str:
        return self.definition.type


class Part:
    """A MergeTree part's Bloom filter skip indexes (see :func:`open_part`)."""

    def __init__(self, path: str, schema: TableSchema, storage_options: Any = None) -> None:
        self.path = path
        self.name = os.path.basename(path.rstrip("/"))
        self.schema = schema
        # A URL is resolved once: its files are then paths on that filesystem, so that names
        # holding "%" (escaped index names) are not taken for URL escapes.
        self._fs, self._base = location.resolve(path, storage_options=storage_options)
        raw = self._read("checksums.txt", MAX_TEXT_FILE)
        self.checksums = F.parse_checksums(raw, _join(path, "checksums.txt"))
        self.rows = int(self._text("count.txt").strip() or 0)
        self.column_types = self._columns()
        self.compact = any(n.startswith("data.") and n.endswith(".bin") for n in self.checksums)
        self._packed: dict[str, F.PackedMember] | None = None
        self._packed_bytes: bytes | None = None
        self.data_granule_rows = self._data_granule_rows()
        self.indexes: dict[str, Index] = {}
        # Bloom filter indexes not read, and why (an expression other than columns).
        self.skipped: dict[str, str] = {}
        for d in schema.indexes.values():
            if d.type not in (BLOOM_FILTER, TOKENBF, NGRAMBF):
                continue
            if d.columns is None:
                self.skipped[d.name] = f"expression {d.expression!r} is not plain columns"
                continue
            self.indexes[d.name] = self._read_index(d)

    # -- files --------------------------------------------------------------------------------

    def _read(self, name: str, limit: int) -> bytes:
        if self._fs is None:
            return read_whole(os.path.join(self._base, name), None, limit)
        return read_whole(self._base.rstrip("/") + "/" + name, self._fs, limit)

    def _text(self, name: str) -> str:
        return self._read(name, MAX_TEXT_FILE).decode("utf-8", "replace")

    def _checked(self, name: str, data: bytes, where: str) -> bytes:
        entry = self.checksums.get(name)
        if entry is None:
            raise CorruptFileError(f"{name} is not listed in checksums.txt", source=where)
        if len(data) != entry.file_size:
            raise CorruptFileError(
                f"{name} has {len(data)} bytes, checksums.txt says {entry.file_size}", source=where
            )
        if F.file_hash(data) != entry.file_hash:
            # Say which block is damaged when a block's own checksum can tell.
            try:
                if entry.is_compressed:
                    decompress_stream(data, where)
                elif name == PACKED:
                    for m in F.parse_packed(data, where).values():
                        if m.name.endswith(".idx") or m.name.rsplit(".", 1)[-1].startswith("c"):
                            decompress_stream(data[m.offset : m.offset + m.size], where, m.offset)
            except CorruptFileError:
                raise
            except BloomFilterError:
                pass  # an "unsupported" reading of damaged bytes: the hash says damaged
            raise CorruptFileError(f"{name} does not match its hash in checksums.txt", source=where)
        return data

    def _file(self, name: str) -> tuple[bytes, str, int]:
        """A part file's bytes (stand-alone, or a member of skp_idx.packed), where they come
        from, and their offset there."""
        if name in self.checksums:
            where = _join(self.path, name)
            return self._checked(name, self._read(name, MAX_INDEX_FILE), where), where, 0
        if PACKED in self.checksums:
            if self._packed is None:
                where = _join(self.path, PACKED)
                self._packed_bytes = self._checked(
                    PACKED, self._read(PACKED, MAX_INDEX_FILE), where
                )
                self._packed = F.parse_packed(self._packed_bytes, where)
            member = self._packed.get(name)
            if member is not None:
                assert self._packed_bytes is not None
                data = self._packed_bytes[member.offset : member.offset + member.size]
                return data, _join(self.path, PACKED), member.offset
        raise FileNotFoundError(f"{name} is not in part {self.path}")

    def _columns(self) -> dict[str, ColumnType]:
        lines = self._text("columns.txt").splitlines()
        out: dict[str, ColumnType] = {}
        for line in lines[2:]:
            m = re.match(r"`((?:[^`\\]|\\.)*)`\s+(.*)", line)
            if m:
                out[m.group(1)] = parse_type(m.group(2))
        return out

    def _data_granule_rows(self) -> list[int]:
        """Rows of each data granule, from the data marks' row counts."""
        names = list(self.checksums)
        if self.compact:
            marks = [n for n in names if n.startswith("data.") and n.endswith(MARK_EXTENSIONS)]
            if not marks:
                raise CorruptFileError("compact part without data marks", source=self.path)
            name = marks[0]
            try:
                text = self._text("columns_substreams.txt")
                streams = sum(int(m) for m in re.findall(r"^(\d+) substreams", text, re.M))
            except FileNotFoundError:
                streams = len(self.column_types)
            width = 2 * streams + 1
        else:
            # A column's own marks (its first stream's; a skip index's marks are not rows').
            marks = [
                stream_file_name(escape_for_file_name(c)) + ext
                for c in self.column_types
                for ext in MARK_EXTENSIONS
                if stream_file_name(escape_for_file_name(c)) + ext in self.checksums
            ]
            if not marks:
                raise CorruptFileError("wide part without column marks", source=self.path)
            name = marks[0]
            width = 2 if name.endswith((".mrk", ".cmrk")) else 3
        data, where, base = self._file(name)
        marks_list = F.parse_marks(
            data, where, compressed=name.split(".")[-1].startswith("c"), width=width, base=base
        )
        if width == 2:
            g = self.schema.index_granularity
            n = -(-self.rows // g) if self.rows else 0
            return [min(g, self.rows - i * g) for i in range(n)]
        rows = [m[-1] for m in marks_list]
        while rows and rows[-1] == 0:
            rows.pop()
        if sum(rows) != self.rows:
            raise CorruptFileError(
                f"data marks count {sum(rows)} rows, count.txt says {self.rows}", source=where
            )
        return rows

    # -- indexes ------------------------------------------------------------------------------

    def _read_index(self, d: IndexDefinition) -> Index:
        stream_name = f"skp_idx_{escape_for_file_name(d.name)}"
        # Stand-alone files of long stream names are named by the name's hash; members of
        # skp_idx.packed keep the name; 24.8 and 23.6 name the files by the index name
        # as it is, neither escaped nor hashed.
        stem = stream_file_name(stream_name)
        for candidate in (stem, stream_name, f"skp_idx_{d.name}"):
            if f"{candidate}.idx" in self.checksums:
                stem = candidate
                break
        else:
            stem = stream_name
        idx_name = f"{stem}.idx"
        assert d.columns is not None
        types = []
        for c in d.columns:
            t = self.column_types.get(c) or self.schema.columns.get(c)
            if t is None:
                raise CorruptFileError(
                    f"index {d.name!r}: column {c!r} is not in the part", source=self.path
                )
            types.append(t)
        data, where, base = self._file(idx_name)
        stream, blocks = decompress_stream(data, where, base)
        mark_name = None
        names = set(self.checksums) | set(self._packed or ())
        for ext in MARK_EXTENSIONS:
            if f"{stem}{ext}" in names:
                mark_name = f"{stem}{ext}"
        if mark_name is None:
            raise CorruptFileError(
                f"index {d.name!r} has no marks file",
                source=where if where.endswith(PACKED) else self.path,
            )
        mdata, mwhere, mbase = self._file(mark_name)
        ext = mark_name.rsplit(".", 1)[1]
        marks = F.parse_marks(
            mdata,
            mwhere,
            compressed=ext.startswith("c"),
            width=2 if ext in ("mrk", "cmrk") else 3,
            base=mbase,
        )
        g = d.granularity
        n_data = len(self.data_granule_rows)
        n_index = -(-n_data // g)
        if len(marks) < n_index:
            raise CorruptFileError(
                f"index {d.name!r} has {len(marks)} marks for {n_index} granules", source=mwhere
            )
        block_starts: dict[int, int] = {}
        acc = 0
        for b in blocks:
            block_starts[b.offset - base] = acc
            acc += b.decompressed_size
        starts = np.cumsum([0, *self.data_granule_rows])
        rows = [(int(starts[i * g]), int(starts[min((i + 1) * g, n_data)])) for i in range(n_index)]
        filters: list[list[ClickHouseBloomFilter]] = []
        pos = 0
        fpp_asked: float | None = None
        bits_per_row: int | None = None
        if d.type == BLOOM_FILTER:
            fpp_asked = float(d.arguments[0]) if d.arguments else DEFAULT_FPP
            bits_per_row, k = best_practices(fpp_asked)
        for i in range(n_index):
            mark = marks[i]
            at = block_starts.get(mark[0])
            if at is None or mark[1] > len(stream) - at:
                raise CorruptFileError(
                    f"index {d.name!r} granule {i}: mark ({mark[0]}, {mark[1]}) points at no block",
                    source=mwhere,
                )
            if at + mark[1] != pos:
                raise CorruptFileError(
                    f"index {d.name!r} granule {i}: mark at {at + mark[1]}, "
                    f"previous granule ended at {pos}",
                    source=mwhere,
                )
            grow = rows[i][1] - rows[i][0]
            if d.type == BLOOM_FILTER:
                assert bits_per_row is not None
                n, pos = F.read_varuint(stream, pos, where)
                if n > grow and not any(t.is_array for t in types):
                    raise CorruptFileError(
                        f"index {d.name!r} granule {i}: {n} distinct values in {grow} rows",
                        source=where,
                    )
                size = (bits_per_row * n + 7) // 8
                granule = []
                for t in types:
                    if pos + size > len(stream):
                        raise CorruptFileError(
                            f"index {d.name!r} granule {i} truncated", source=where
                        )
                    granule.append(
                        ClickHouseBloomFilter(
                            stream[pos : pos + size],
                            kind=BLOOM_FILTER,
                            column_type=t,
                            num_hashes=k,
                            num_rows=n,
                        )
                    )
                    pos += size
            else:
                if d.type == NGRAMBF:
                    ngram, size, k, seed = (int(a) for a in d.arguments)
                else:
                    ngram = None
                    size, k, seed = (int(a) for a in d.arguments)
                granule = []
                for t in types:
                    if pos + size > len(stream):
                        raise CorruptFileError(
                            f"index {d.name!r} granule {i} truncated", source=where
                        )
                    granule.append(
                        ClickHouseBloomFilter(
                            stream[pos : pos + size],
                            kind=d.type,
                            column_type=t,
                            num_hashes=k,
                            seed=seed,
                            ngram_size=ngram,
                        )
                    )
                    pos += size
            filters.append(granule)
        if pos != len(stream):
            raise CorruptFileError(
                f"index {d.name!r}: {len(stream) - pos} bytes after the last granule", source=where
            )
        return Index(d, tuple(types), filters, rows, where, len(data), fpp_asked, bits_per_row)

    # -- public -------------------------------------------------------------------------------

    def index(self, name: str) -> Index:
        try:
            return self.indexes[name]
        except KeyError:
            if name in self.skipped:
                raise ValueError(f"index {name!r} is not read here: {self.skipped[name]}") from None
            raise ValueError(
                f"part {self.name} has no Bloom filter index {name!r}; "
                f"it has {sorted(self.indexes)}"
            ) from None

    def granule_rows(self, index_name: str) -> list[tuple[int, int]]:
        """The rows [start, end) each granule of the index covers."""
        return list(self.index(index_name).granule_rows)

    def filters(self, index_name: str, column: str | None = None) -> list[ClickHouseBloomFilter]:
        """Each granule's filter of one column of the index (its first by default)."""
        idx = self.index(index_name)
        assert idx.definition.columns is not None
        pos = 0 if column is None else idx.definition.columns.index(column)
        return [g[pos] for g in idx.filters]

    def might_match(self, index_name: str, function: str, *args: Any) -> NDArray[np.bool_]:
        """For each granule of the index, whether ClickHouse would read it for ``function``
        applied to a column of the index and constant arguments (see
        :func:`parquet_bloom._clickhouse.conditions.might_match`)."""
        from parquet_bloom._clickhouse.conditions import might_match

        return might_match(self.index(index_name), function, *args)


def open_part(
    part_dir: str | os.PathLike[str], table_sql: str | None = None, storage_options: Any = None
) -> Part:
    """A MergeTree part's Bloom filter indexes. ``table_sql`` is the table's CREATE or ATTACH
    statement; without it the part must lie in a ClickHouse data directory on local disk."""
    path = os.fspath(part_dir)
    if table_sql is None:
        table_sql = None if location.is_url(path) else find_table_sql(path)
        if table_sql is None:
            raise ValueError(
                f"no table statement found for part {path}: give table_sql (the table's "
                "CREATE or ATTACH TABLE statement)"
            )
    return Part(path, parse_table_sql(table_sql), storage_options)

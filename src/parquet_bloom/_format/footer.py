"""The Parquet footer: its trailer, its FileMetaData, and the column chunks it lists.

A reader finds everything else through the footer: the trailer (the file's last 8 bytes)
gives its length, the FileMetaData it holds lists every column chunk with its pages and its
Bloom filter. Decoding is checked beyond what Thrift checks, so that readers can index the
structs without guarding every access: a schema, one column chunk per schema leaf in every
row group, ColumnMetaData that agrees with its leaf (:func:`column_chunks`). A reader that
needs a column chunk's facts gets them flattened, with its schema leaf resolved
(:class:`ColumnChunkInfo`).
"""

from __future__ import annotations

import copy
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from thrift.protocol.TBase import TFrozenBase

from parquet_bloom._format import _compact as compact
from parquet_bloom._format.schema import SchemaLeaf, enum_name, schema_leaves
from parquet_bloom._thrift.parquet import ttypes as _tt
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

# Re-exported generated classes, so other modules never import ``_thrift`` themselves.
FileMetaData = _tt.FileMetaData
ColumnChunk = _tt.ColumnChunk
ColumnMetaData = _tt.ColumnMetaData
CompressionCodec = _tt.CompressionCodec
ColumnCryptoMetaData = _tt.ColumnCryptoMetaData
EncryptionWithFooterKey = _tt.EncryptionWithFooterKey
EncryptionWithColumnKey = _tt.EncryptionWithColumnKey
FileCryptoMetaData = _tt.FileCryptoMetaData
EncryptionAlgorithm = _tt.EncryptionAlgorithm

# --- File layout (docs/format-notes.md, file layout) --------------------------------------------
# A file is "PAR1" <column chunks> <FileMetaData (Thrift compact)> <4-byte LE length> "PAR1".
# Files whose footer is encrypted end in "PARE" instead (docs/format-notes.md, encryption).
MAGIC = b"PAR1"
ENCRYPTED_MAGIC = b"PARE"
FOOTER_TRAILER_SIZE = 8  # 4-byte little-endian footer length + 4-byte magic

# --- Limits for untrusted input ---------------------------------------------------------------
# The footer length comes from the file itself. Real footers are kilobytes to a few tens of
# megabytes; 256 MiB is far beyond any we know of and still small enough to read into memory.
MAX_FOOTER_SIZE = 256 * 1024 * 1024


# =============================================================================================
# Footer trailer
# =============================================================================================


def parse_footer_trailer(trailer: bytes, *, file_size: int, encrypted: bool = False) -> int:
    """Validate the last ``FOOTER_TRAILER_SIZE`` bytes of a file; return the footer length.

    The footer (Thrift ``FileMetaData``) then occupies
    ``[file_size - FOOTER_TRAILER_SIZE - length, file_size - FOOTER_TRAILER_SIZE)``.
    A file ending in ``PARE`` (an encrypted footer: FileCryptoMetaData and the encrypted
    FileMetaData in that span) is an ``UnsupportedFileError`` unless ``encrypted``.
    """
    if len(trailer) != FOOTER_TRAILER_SIZE:
        raise ValueError(f"the trailer must be the last {FOOTER_TRAILER_SIZE} bytes of the file")
    min_size = len(MAGIC) + FOOTER_TRAILER_SIZE
    if file_size < min_size:
        raise CorruptFileError(
            f"file of {file_size} bytes is too small to be Parquet "
            f"(at least {min_size} bytes: leading magic, footer length, trailing magic)"
        )
    magic = bytes(trailer[4:])
    magic_offset = file_size - len(MAGIC)
    if magic == ENCRYPTED_MAGIC and not encrypted:
        raise UnsupportedFileError(
            "an encrypted Parquet footer, not read without the file's keys: pass "
            "decryption=DecryptionKeys(...) (docs/encryption.md)",
            offset=magic_offset,
        )
    if magic not in (MAGIC, ENCRYPTED_MAGIC):
        raise CorruptFileError(
            f"not a Parquet file: trailing magic is {magic!r}, expected {MAGIC!r}",
            offset=magic_offset,
        )
    (length,) = struct.unpack("<I", trailer[:4])
    length_offset = file_size - FOOTER_TRAILER_SIZE
    room = file_size - FOOTER_TRAILER_SIZE - len(MAGIC)
    if length == 0 or length > room:
        raise CorruptFileError(
            f"footer length {length} at offset {length_offset} does not fit in a file of "
            f"{file_size} bytes (at most {room} bytes lie between the leading magic and "
            "the trailer)",
            offset=length_offset,
        )
    if length > MAX_FOOTER_SIZE:
        raise UnsupportedFileError(
            f"footer length {length} at offset {length_offset} exceeds this library's "
            f"limit of {MAX_FOOTER_SIZE} bytes",
            offset=length_offset,
        )
    return int(length)


# =============================================================================================
# FileMetaData
# =============================================================================================

# The generated code attaches thrift_spec after each class body, which mypy cannot see.
_FULL_FILE_META_DATA_SPEC: tuple[Any, ...] = _tt.FileMetaData.thrift_spec  # type: ignore[attr-defined]

# Only what a Bloom filter reader needs; see decode_file_metadata.
_FAST_COLUMN_META_DATA_SPEC = compact.prune(
    _tt.ColumnMetaData,
    {
        "type",
        "path_in_schema",
        "codec",
        "num_values",
        "total_compressed_size",
        "data_page_offset",
        "index_page_offset",
        "dictionary_page_offset",
        "bloom_filter_offset",
        "bloom_filter_length",
    },
)

# Every column chunk encrypted with the footer key holds the same ColumnCryptoMetaData: a
# union whose member is an empty struct. Two objects a chunk, in a 10,000-chunk footer of a
# file encrypted throughout 20,000 objects: their making costs, and alive they push the
# cyclic GC into a full collection while the file's filters are probed (docs/performance.md,
# "Encrypted files"). The fast decode gives all such chunks one shared instance (which no
# reader changes: never set its fields). The C decoder builds a struct whose class derives
# from TFrozenBase by calling the class with the struct's fields: these classes' __new__
# return the shared instances, or, for any other member, the generated struct.
FOOTER_KEY_CRYPTO_METADATA = _tt.ColumnCryptoMetaData(  # type: ignore[no-untyped-call]
    ENCRYPTION_WITH_FOOTER_KEY=_tt.EncryptionWithFooterKey()
)


class _SharedFooterKey(TFrozenBase):  # type: ignore[misc]
    def __new__(cls) -> Any:
        return FOOTER_KEY_CRYPTO_METADATA.ENCRYPTION_WITH_FOOTER_KEY


class _SharedCryptoMetaData(TFrozenBase):  # type: ignore[misc]
    def __new__(
        cls, ENCRYPTION_WITH_FOOTER_KEY: Any = None, ENCRYPTION_WITH_COLUMN_KEY: Any = None
    ) -> Any:
        shared = FOOTER_KEY_CRYPTO_METADATA
        if (
            ENCRYPTION_WITH_FOOTER_KEY is shared.ENCRYPTION_WITH_FOOTER_KEY
            and ENCRYPTION_WITH_COLUMN_KEY is None
        ):
            return shared
        return _tt.ColumnCryptoMetaData(  # type: ignore[no-untyped-call]
            ENCRYPTION_WITH_FOOTER_KEY, ENCRYPTION_WITH_COLUMN_KEY
        )


def _shared_crypto_spec(entry: tuple[Any, ...]) -> tuple[Any, ...]:
    """ColumnChunk's ``crypto_metadata`` spec entry decoding into the shared instances."""
    fid, ttype, name, (_, union_spec), default = entry
    members = list(union_spec)
    footer_key = members[1]
    members[1] = (*footer_key[:3], [_SharedFooterKey, footer_key[3][1]], footer_key[4])
    return (fid, ttype, name, [_SharedCryptoMetaData, tuple(members)], default)


_FAST_COLUMN_CHUNK_SPEC = compact.prune(
    _tt.ColumnChunk,
    {
        "file_path",
        "file_offset",
        "meta_data",
        "offset_index_offset",
        "offset_index_length",
        "column_index_offset",
        "column_index_length",
        "crypto_metadata",
        "encrypted_column_metadata",
    },
    {"meta_data": _FAST_COLUMN_META_DATA_SPEC},
)
_CRYPTO_METADATA_FIELD_ID = 8  # ColumnChunk.crypto_metadata
_FAST_COLUMN_CHUNK_SPEC = tuple(
    _shared_crypto_spec(entry)
    if entry is not None and entry[0] == _CRYPTO_METADATA_FIELD_ID
    else entry
    for entry in _FAST_COLUMN_CHUNK_SPEC
)
_FAST_ROW_GROUP_SPEC = compact.prune(
    _tt.RowGroup,
    {"columns", "num_rows", "file_offset", "total_compressed_size", "ordinal"},
    {"columns": _FAST_COLUMN_CHUNK_SPEC},
)
_FAST_FILE_META_DATA_SPEC = compact.prune(
    _tt.FileMetaData,
    {"version", "schema", "num_rows", "row_groups", "created_by", "encryption_algorithm"},
    {"row_groups": _FAST_ROW_GROUP_SPEC},
)


def decode_file_metadata(buf: bytes | memoryview, *, full: bool = False) -> FileMetaData:
    """Decode a Thrift compact ``FileMetaData`` (the footer, without its trailer).

    By default only the fields a Bloom filter reader needs are decoded: FileMetaData
    {version, schema, num_rows, row_groups, created_by, encryption_algorithm}, RowGroup
    {columns, num_rows, file_offset, total_compressed_size, ordinal}, all ColumnChunk fields
    but with a ColumnMetaData of only {type, path_in_schema, codec, num_values,
    total_compressed_size, data_page_offset, index_page_offset, dictionary_page_offset,
    bloom_filter_offset, bloom_filter_length}. The rest (statistics, encodings, key-value
    metadata, size and geospatial statistics, column orders) is left ``None``, so such a
    result must not be re-encoded: use ``full=True`` to rewrite a footer losslessly.
    (Without the C extension every field is decoded either way.)

    Returns the generated ``FileMetaData``. Raises ``CorruptFileError`` when the bytes do
    not decode or lack what readers rely on (a schema, one column chunk per schema leaf in
    every row group, ColumnMetaData in every unencrypted column chunk).
    """
    spec = _FULL_FILE_META_DATA_SPEC if full else _FAST_FILE_META_DATA_SPEC
    md = compact.decode_untrusted(
        buf, _tt.FileMetaData, spec, "footer", "the Parquet footer", max_size=MAX_FOOTER_SIZE
    )
    _validate_file_metadata(md)
    result: FileMetaData = md
    return result


def _validate_file_metadata(md: FileMetaData) -> None:
    leaves = schema_leaves(md)  # validates the schema tree
    for i, rg in enumerate(_row_groups(md)):
        columns = _row_group_columns(i, rg, leaves)
        if rg.num_rows is None:
            raise CorruptFileError(f"row group {i} has no num_rows", row_group=i)
        for j, chunk in enumerate(columns):
            if (
                chunk.meta_data is None
                and chunk.crypto_metadata is None
                and chunk.encrypted_column_metadata is None
            ):
                raise _chunk_error(i, j, leaves[j], "no ColumnMetaData")


def _row_groups(md: FileMetaData) -> list[Any]:
    row_groups: list[Any] | None = md.row_groups
    if row_groups is None:
        raise CorruptFileError("the Parquet footer has no row group list")
    return row_groups


def _row_group_columns(i: int, rg: Any, leaves: list[SchemaLeaf]) -> list[Any]:
    """Row group ``i``'s column chunks, one per schema leaf (checked: readers index them)."""
    columns: list[Any] | None = rg.columns
    if columns is None or len(columns) != len(leaves):
        got = "no" if columns is None else len(columns)
        raise CorruptFileError(
            f"row group {i} has {got} column chunks but the schema has {len(leaves)} leaf columns",
            row_group=i,
        )
    return columns


def encode_file_metadata(md: FileMetaData) -> bytes:
    """Serialize a ``FileMetaData`` with the Thrift compact protocol.

    For a footer decoded with ``full=True`` this reproduces the original bytes of footers
    written by Arrow C++ and parquet-java (fields in id order, the canonical compact
    encoding), which is what lets a footer rewrite change only what it means to. It cannot
    where the decoded structs lost something: fields newer than our IDL are dropped, invalid
    UTF-8 in Thrift ``string`` fields (names, created_by) came back as U+FFFD, and a
    ColumnChunk without its required ``file_offset`` gets the IDL default 0 written. A
    rewrite that must be exact can check ``encode_file_metadata(md) == original`` first.
    """
    return compact.encode_struct(md, _tt.FileMetaData, _FULL_FILE_META_DATA_SPEC)


# =============================================================================================
# Column chunks
# =============================================================================================


@dataclass(frozen=True, slots=True)
class ColumnChunkInfo:
    """One column chunk, flattened, with its schema leaf resolved.

    For an encrypted column whose ColumnMetaData is only stored encrypted (``encrypted``
    with no plaintext metadata) the schema supplies path and types, and ``num_values``,
    ``data_page_offset`` and ``total_compressed_size`` are 0: check ``encrypted`` first.
    """

    row_group: int
    column_index: int
    path: str  # dotted path_in_schema, e.g. "a.b", "tags.list.element"
    physical_type: str  # Type enum name, e.g. "INT32"
    type_length: int | None
    logical_type: Any | None  # generated LogicalType union instance
    converted_type: str | None  # ConvertedType enum name
    scale: int | None
    precision: int | None
    num_values: int
    data_page_offset: int
    dictionary_page_offset: int | None
    total_compressed_size: int
    bloom_filter_offset: int | None
    bloom_filter_length: int | None
    encrypted: bool  # column crypto metadata present
    path_in_schema: tuple[str, ...] = ()  # the unambiguous form of ``path``


def column_chunks(
    md: FileMetaData, leaves: list[SchemaLeaf] | None = None
) -> list[ColumnChunkInfo]:
    """All column chunks in (row group, column) order, checked against the schema (whose
    :func:`schema_leaves` a caller that has them passes, saving a walk of a wide schema)."""
    return list(_iter_column_chunks(md, schema_leaves(md) if leaves is None else leaves))


def _iter_column_chunks(md: FileMetaData, leaves: list[SchemaLeaf]) -> Iterator[ColumnChunkInfo]:
    leaf_paths = [list(leaf.path_in_schema) for leaf in leaves]
    for i, rg in enumerate(_row_groups(md)):
        yield from _row_group_chunks(i, rg, leaves, leaf_paths)


def _checked_row_group_size(
    i: int, rg: Any, leaves: list[SchemaLeaf], leaf_paths: list[list[str]]
) -> int:
    """Row group ``i``'s column chunks checked against the schema as :func:`_row_group_chunks`
    checks them (the same errors), without making their :class:`ColumnChunkInfo`; the sum of
    their ``total_compressed_size``."""
    type_names = _tt.Type._VALUES_TO_NAMES
    size = 0
    for j, chunk in enumerate(_row_group_columns(i, rg, leaves)):
        meta = _checked_meta(i, j, chunk, leaves[j], leaf_paths[j], type_names)
        if meta is not None:
            size += meta.total_compressed_size
    return size


def _checked_meta(
    i: int, j: int, chunk: Any, leaf: SchemaLeaf, leaf_path: list[str], type_names: Any
) -> Any:
    """Column chunk ``j`` of row group ``i``'s ColumnMetaData, checked against its schema leaf;
    None for an encrypted chunk whose metadata the footer does not hold. This runs once per
    column chunk (10,000s in wide files), so the common case is one combined check; only a
    failing chunk takes the slow path that says why."""
    meta = chunk.meta_data
    if meta is None:
        if chunk.crypto_metadata is None and chunk.encrypted_column_metadata is None:
            raise _chunk_error(i, j, leaf, "no ColumnMetaData")
        return None
    if not _meta_ok(meta, leaf, leaf_path, type_names):
        _check_chunk(i, j, meta, leaf)
    return meta


def _meta_ok(meta: Any, leaf: SchemaLeaf, leaf_path: list[str], type_names: Any) -> bool:
    """Whether a ColumnMetaData passes every check of :func:`_check_chunk`, in one combined
    test (``leaf_path``: the leaf's path as a list, ``type_names``: Type's value names)."""
    bloom_filter_offset = meta.bloom_filter_offset
    bloom_filter_length = meta.bloom_filter_length
    try:
        return bool(
            meta.num_values >= 0
            and meta.data_page_offset >= 0
            and meta.total_compressed_size >= 0
            and (bloom_filter_offset is None or bloom_filter_offset >= 0)
            and (bloom_filter_length is None or bloom_filter_length >= 0)
            and type_names.get(meta.type) == leaf.physical_type
            and meta.path_in_schema == leaf_path
        )
    except TypeError:  # a required field is None
        return False


def _chunk_info(i: int, j: int, chunk: Any, leaf: SchemaLeaf) -> ColumnChunkInfo:
    """Column chunk ``j`` of row group ``i``, checked before (:func:`_checked_meta`)."""
    encrypted = chunk.crypto_metadata is not None or chunk.encrypted_column_metadata is not None
    meta = chunk.meta_data
    if meta is None:
        return ColumnChunkInfo(
            i, j, leaf.path, leaf.physical_type, leaf.type_length, leaf.logical_type,
            leaf.converted_type, leaf.scale, leaf.precision,
            0, 0, None, 0, None, None, True, leaf.path_in_schema,
        )  # fmt: skip
    return ColumnChunkInfo(
        i, j, leaf.path, leaf.physical_type, leaf.type_length, leaf.logical_type,
        leaf.converted_type, leaf.scale, leaf.precision,
        meta.num_values, meta.data_page_offset, meta.dictionary_page_offset,
        meta.total_compressed_size, meta.bloom_filter_offset, meta.bloom_filter_length,
        encrypted, leaf.path_in_schema,
    )  # fmt: skip


def _row_group_chunks(
    i: int, rg: Any, leaves: list[SchemaLeaf], leaf_paths: list[list[str]]
) -> list[ColumnChunkInfo]:
    """Row group ``i``'s column chunks, checked against the schema."""
    type_names = _tt.Type._VALUES_TO_NAMES
    out = []
    for j, chunk in enumerate(_row_group_columns(i, rg, leaves)):
        _checked_meta(i, j, chunk, leaves[j], leaf_paths[j], type_names)
        out.append(_chunk_info(i, j, chunk, leaves[j]))
    return out


# =============================================================================================
# The footer as a reader sees it: row groups decoded when first asked for
# =============================================================================================

# A row group's own fields, without its column chunks (skipped in C while the footer is
# opened; decoded with _FAST_ROW_GROUP_SPEC when the row group is first asked for).
_ROW_GROUP_HEAD_SPEC = compact.prune(
    _tt.RowGroup, {"num_rows", "file_offset", "total_compressed_size", "ordinal"}
)
_ROW_GROUPS_FIELD_ID = 4  # FileMetaData.row_groups
_NUM_ROWS_FIELD_ID = 3  # FileMetaData.num_rows

# Footers' top-level fields decoded, by what the footer holds besides its row groups and row
# count (schema_key): the files of one table mostly share them, and decoding a schema is most
# of the cost of opening a small footer. A few tables' worth, each a few kilobytes usually;
# keys past SCHEMA_KEY_MAX (schemas of thousands of columns) are not kept, so that the caches
# here and of Arrow schemas hold a few megabytes at most.
_TOPS_CACHED = 16
SCHEMA_KEY_MAX = 256 * 1024
_tops: dict[bytes, tuple[FileMetaData, list[SchemaLeaf]]] = {}
# Where walks of footers met their row count: the bytes before it (version and schema) and the
# id of the field before it, to resume a walk of a footer that begins the same.
_prefixes: dict[bytes, int] = {}
_tops_lock = threading.Lock()
_EMPTY_STRUCT_LIST = bytes([compact.CT_STRUCT])  # a compact list header: 0 elements, structs


class FooterView:
    """A footer decoded as far as a Bloom filter reader needs it, when it needs it.

    Opening decodes the footer's top-level fields and schema, and walks its row group list in
    C, keeping each row group's own fields and the span of its bytes; a row group's column
    chunks are decoded (and checked against the schema) when first asked for. On a 10,000-chunk
    footer, ready to read one filter, that is most of the 10,000 ``ColumnChunkInfo`` objects
    and their Thrift structs never made (see docs/performance.md, "Opening a footer").

    The same checks as :func:`decode_file_metadata` and :func:`column_chunks` apply, a row
    group's only when it is decoded: a corrupt column chunk list raises ``CorruptFileError``
    from :meth:`chunks` rather than from the constructor. Without thrift's C decoder, or on a
    footer whose row group list is not where the walk expects it, everything is decoded at
    once, with the same results. Thread-safe.
    """

    def __init__(self, data: bytes | memoryview) -> None:
        data = bytes(data)
        self._lock = threading.Lock()
        self._groups: list[Any]
        self._spans: list[tuple[int, int]] | None = None
        self._chunks: dict[int, list[ColumnChunkInfo]] = {}
        self._sizes: dict[int, int] = {}  # row groups checked, by compressed_size()
        self._single: dict[tuple[int, int], ColumnChunkInfo] = {}  # by chunk()
        self._cursor: compact.StructCursor | None = None
        if len(data) > MAX_FOOTER_SIZE:
            raise UnsupportedFileError(
                f"footer of {len(data)} bytes exceeds this library's limit of "
                f"{MAX_FOOTER_SIZE} bytes"
            )
        #: The footer's bytes but its row groups and its row count (``num_rows``), with where
        #: the row count was: footers with the same key have the same schema and key-value
        #: metadata (the same Arrow schema), version and writer. None when not known.
        self.schema_key: bytes | None = None
        walked = _walk_row_groups(data) if compact.fastbinary is not None else None
        cached = None
        if walked is None:
            md = decode_file_metadata(data)
            self._groups = _row_groups(md)
        else:
            cursor, start, end, heads, spans, rows = walked
            if (
                rows is not None
                and len(data) - (end - start) - (rows[1] - rows[0]) <= SCHEMA_KEY_MAX
            ):
                rows_at, rows_end = rows
                self.schema_key = b"".join(
                    (rows_at.to_bytes(4, "little"), data[:rows_at], data[rows_end:start],
                     data[end:])
                )  # fmt: skip
                cached = _tops.get(self.schema_key)
            if cached is not None:
                # The same top-level fields as a footer decoded before, but its row count.
                md = copy.copy(cached[0])
                md.num_rows = compact.CompactReader(memoryview(data)[rows_at:rows_end]).zigzag()
            else:
                # The top-level fields and the schema: the footer with an empty row group list.
                top = data[:start] + _EMPTY_STRUCT_LIST + data[end:]
                md = compact.decode_untrusted(
                    top, _tt.FileMetaData, _FAST_FILE_META_DATA_SPEC, "footer",
                    "the Parquet footer", max_size=MAX_FOOTER_SIZE,
                )  # fmt: skip
            if md.row_groups:  # a second row group list: decode as Thrift does (the last wins)
                md = decode_file_metadata(data)
                self._groups = _row_groups(md)
                self.schema_key = None
            else:
                for i, rg in enumerate(heads):
                    if rg.num_rows is None:
                        raise CorruptFileError(f"row group {i} has no num_rows", row_group=i)
                self._groups, self._spans, self._cursor = heads, spans, cursor
        md.row_groups = None
        self._top: FileMetaData = md
        if cached is not None:
            self.leaves = list(cached[1])
        else:
            self.leaves = schema_leaves(md)
            if self.schema_key is not None:
                with _tops_lock:
                    if len(_tops) >= _TOPS_CACHED:
                        del _tops[next(iter(_tops))]
                    _tops[self.schema_key] = (md, list(self.leaves))
        self._leaf_paths = [list(leaf.path_in_schema) for leaf in self.leaves]

    @property
    def num_row_groups(self) -> int:
        return len(self._groups)

    @property
    def encryption_algorithm(self) -> Any | None:
        """The footer's ``encryption_algorithm`` (set in encrypted files with a plaintext
        footer), or None."""
        return self._top.encryption_algorithm

    def row_group_ordinal(self, i: int) -> int:
        """Row group ``i``'s ordinal, as encryption AADs take it: ``RowGroup.ordinal`` when
        set (Encryption.md 5.2), else ``i``."""
        ordinal = self._groups[i].ordinal
        return i if ordinal is None else int(ordinal)

    def column_chunk_struct(self, i: int, j: int) -> Any:
        """Column chunk ``j`` of row group ``i``'s Thrift ColumnChunk (the row group checked
        as by :meth:`chunk`)."""
        if i not in self._chunks:
            self.compressed_size(i)  # decodes and checks the row group
        return self._groups[i].columns[j]

    def row_group_rows(self, i: int) -> int:
        return int(self._groups[i].num_rows)

    def chunks(self, i: int) -> list[ColumnChunkInfo]:
        """Row group ``i``'s column chunks, in column order."""
        found = self._chunks.get(i)
        if found is None:
            with self._lock:
                found = self._chunks.get(i)
                if found is None:
                    found = self._chunks[i] = _row_group_chunks(
                        i, self._row_group(i), self.leaves, self._leaf_paths
                    )
        return found

    def compressed_size(self, i: int) -> int:
        """Row group ``i``'s column chunks' ``total_compressed_size``, the chunks checked as
        :meth:`chunks` checks them, without making their :class:`ColumnChunkInfo` (a reader
        that probes one column of a wide file needs one of them)."""
        found = self._chunks.get(i)
        if found is not None:
            return sum(c.total_compressed_size for c in found)
        size = self._sizes.get(i)
        if size is None:
            with self._lock:
                size = self._sizes.get(i)
                if size is None:
                    size = self._sizes[i] = _checked_row_group_size(
                        i, self._row_group(i), self.leaves, self._leaf_paths
                    )
        return size

    def chunk(self, i: int, j: int) -> ColumnChunkInfo:
        """Column chunk ``j`` of row group ``i`` (the row group checked first, as by
        :meth:`chunks`; only this chunk's :class:`ColumnChunkInfo` made)."""
        found = self._chunks.get(i)
        if found is not None:
            return found[j]
        one = self._single.get((i, j))
        if one is None:
            self.compressed_size(i)  # checks the row group's chunks
            one = _chunk_info(i, j, self._groups[i].columns[j], self.leaves[j])
            self._single[(i, j)] = one
        return one

    def all_chunks(self) -> list[ColumnChunkInfo]:
        """Every column chunk, in (row group, column) order."""
        return [c for i in range(self.num_row_groups) for c in self.chunks(i)]

    def metadata(self) -> FileMetaData:
        """The whole ``FileMetaData``, as :func:`decode_file_metadata` decodes it."""
        row_groups = []
        for i in range(self.num_row_groups):
            self.chunks(i)  # decodes and checks the row group
            row_groups.append(self._row_group(i))
        md = copy.copy(self._top)
        md.row_groups = row_groups
        return md

    def _row_group(self, i: int) -> Any:
        """Row group ``i`` with its column chunks (the caller holds the lock or the result
        is already decoded)."""
        rg = self._groups[i]
        if self._spans is None or rg.columns is not None:
            return rg
        assert self._cursor is not None
        start, end = self._spans[i]
        with compact.gc_paused():
            full, stop = self._cursor.struct_at(start, _tt.RowGroup, _FAST_ROW_GROUP_SPEC)
        if stop != end:  # cannot happen: both decodes walk the same bytes
            raise CorruptFileError(f"row group {i} decodes past its own bytes", row_group=i)
        self._groups[i] = full
        return full


def _walk_row_groups(
    data: bytes,
) -> (
    tuple[compact.StructCursor, int, int, list[Any], list[tuple[int, int]], tuple[int, int] | None]
    | None
):
    """Find the row group list of a FileMetaData: where it starts and ends, each row group's
    own fields and span, and the span of ``num_rows``'s value when it comes before them (as
    every writer puts it). None when the walk cannot tell (no such list, or not of
    structs)."""
    cursor = compact.StructCursor(data, "the Parquet footer")
    reader = cursor.reader
    rows: tuple[int, int] | None = None
    # A footer that begins as one walked before (its version and schema: a table's files
    # share them) resumes the walk where that one's row count began.
    last = 0
    for prefix, field_before in reversed(list(_prefixes.items())):  # a copy: threads add
        if data.startswith(prefix):
            reader.pos, last = len(prefix), field_before
            break
    try:
        with compact.gc_paused():
            before = (reader.pos, last)  # where the next field's header begins
            for ctype, fid in reader.fields(last):
                if fid != _ROW_GROUPS_FIELD_ID or ctype != compact.CT_LIST:
                    at = reader.pos
                    cursor.skip_value(ctype)
                    if fid == _NUM_ROWS_FIELD_ID:
                        rows = (at, reader.pos) if ctype == compact.CT_I64 else None
                        known = 0 < before[0] <= SCHEMA_KEY_MAX
                        if rows is not None and known and data[: before[0]] not in _prefixes:
                            with _tops_lock:
                                if len(_prefixes) >= _TOPS_CACHED:
                                    del _prefixes[next(iter(_prefixes))]
                                _prefixes[data[: before[0]]] = before[1]
                    before = (reader.pos, fid)
                    continue
                start = reader.pos
                etype, count = reader.list_header()
                if etype != compact.CT_STRUCT:
                    return None
                heads, spans, at = [], [], reader.pos
                for _ in range(count):
                    head, end = cursor.struct_at(at, _tt.RowGroup, _ROW_GROUP_HEAD_SPEC)
                    heads.append(head)
                    spans.append((at, end))
                    at = end
                return cursor, start, at, heads, spans, rows
    except (compact.Malformed, CorruptFileError):
        return None  # the full decode says what is wrong, as it would have
    return None


# =============================================================================================
# Encryption structs (Encryption.md 5.2-5.5)
# =============================================================================================

_FOOTER_ENCRYPTION_SPEC = compact.prune(
    _tt.FileMetaData, {"encryption_algorithm", "footer_signing_key_metadata"}
)
_COLUMN_META_DATA_SPEC: tuple[Any, ...] = _tt.ColumnMetaData.thrift_spec  # type: ignore[attr-defined]
_FILE_CRYPTO_META_DATA_SPEC: tuple[Any, ...] = _tt.FileCryptoMetaData.thrift_spec  # type: ignore[attr-defined]
# FileCryptoMetaData is an algorithm (a few ids and an AAD prefix) and key metadata: bytes to
# kilobytes. Its length is not stored; it is where its struct ends.
MAX_FILE_CRYPTO_META_DATA_SIZE = 1024 * 1024


def decode_file_crypto_metadata(buf: bytes | memoryview) -> tuple[Any, int]:
    """Decode the FileCryptoMetaData at the start of an encrypted footer's bytes; return it
    and its length (the encrypted FileMetaData module follows)."""
    view = memoryview(bytes(buf[:MAX_FILE_CRYPTO_META_DATA_SIZE]))
    reader = compact.CompactReader(view)
    try:
        reader.skip_struct(0)
    except compact.Malformed as err:
        raise CorruptFileError(f"cannot decode the FileCryptoMetaData: {err}") from None
    end = reader.pos
    md = compact.decode_untrusted(
        view[:end], _tt.FileCryptoMetaData, _FILE_CRYPTO_META_DATA_SPEC, "FileCryptoMetaData",
        "the FileCryptoMetaData", max_size=MAX_FILE_CRYPTO_META_DATA_SIZE,
    )  # fmt: skip
    if md.encryption_algorithm is None:
        raise CorruptFileError("the FileCryptoMetaData has no encryption_algorithm")
    return md, end


def decode_footer_encryption(buf: bytes | memoryview) -> Any:
    """A plaintext footer's ``encryption_algorithm`` and ``footer_signing_key_metadata``
    (the rest of the FileMetaData left None)."""
    return compact.decode_untrusted(
        buf, _tt.FileMetaData, _FOOTER_ENCRYPTION_SPEC, "footer", "the Parquet footer",
        max_size=MAX_FOOTER_SIZE,
    )  # fmt: skip


def decode_column_metadata(buf: bytes | memoryview, *, full: bool = True) -> Any:
    """A ColumnMetaData serialized on its own (decrypted ``encrypted_column_metadata``):
    every field, or with ``full=False`` only those a Bloom filter reader needs, as
    :func:`decode_file_metadata` decodes a footer's (not to be re-encoded)."""
    if not full:
        return _READER_COLUMN_META_DATA.decode(buf)
    return compact.decode_untrusted(
        buf, _tt.ColumnMetaData, _COLUMN_META_DATA_SPEC, "column metadata",
        "the column metadata", max_size=MAX_FOOTER_SIZE,
    )  # fmt: skip


# The decoder of the reader's ColumnMetaData (a reader decrypts one a chunk).
_READER_COLUMN_META_DATA = compact.SmallStructs(
    _tt.ColumnMetaData, _FAST_COLUMN_META_DATA_SPEC, "column metadata", "the column metadata",
    max_size=MAX_FOOTER_SIZE,
)  # fmt: skip


def encode_column_metadata(meta: Any) -> bytes:
    """A ColumnMetaData serialized on its own (to be encrypted into
    ``encrypted_column_metadata``)."""
    return compact.encode_struct(meta, _tt.ColumnMetaData, _COLUMN_META_DATA_SPEC)


def encode_file_crypto_metadata(crypto: Any) -> bytes:
    """A FileCryptoMetaData serialized, as it starts an encrypted footer."""
    return compact.encode_struct(crypto, _tt.FileCryptoMetaData, _FILE_CRYPTO_META_DATA_SPEC)


def with_column_metadata(info: ColumnChunkInfo, meta: Any, leaf: SchemaLeaf) -> ColumnChunkInfo:
    """``info`` with the facts of ``meta`` (a column chunk's decrypted ColumnMetaData),
    checked against its schema leaf as the footer's own are."""
    i, j = info.row_group, info.column_index
    if meta.path_in_schema is None or meta.type is None:
        raise _chunk_error(i, j, leaf, "decrypted ColumnMetaData lacks path or type")
    if not _meta_ok(meta, leaf, list(leaf.path_in_schema), _tt.Type._VALUES_TO_NAMES):
        _check_chunk(i, j, meta, leaf)
    return ColumnChunkInfo(
        i, j, leaf.path, leaf.physical_type, leaf.type_length, leaf.logical_type,
        leaf.converted_type, leaf.scale, leaf.precision,
        meta.num_values, meta.data_page_offset, meta.dictionary_page_offset,
        meta.total_compressed_size, meta.bloom_filter_offset, meta.bloom_filter_length, True,
        leaf.path_in_schema,
    )  # fmt: skip


def chunk_start(meta: Any) -> int:
    """Where a column chunk's pages begin (``meta``: a ColumnMetaData or ColumnChunkInfo): its
    dictionary page, if it has one, else its first data page.

    Like Arrow C++ (ComputeColumnChunkRange), a dictionary page offset counts only when it is
    positive and before the first data page; some writers put 0 or junk there. Unlike Arrow
    C++, a data page offset inside the leading magic counts for nothing: Arrow C++ writes
    ``data_page_offset`` 0 for a chunk of a dictionary page and no data page (every column of
    an empty table, or of an empty row group), and never reads such a chunk's pages itself.
    """
    start = int(meta.data_page_offset)
    dictionary = meta.dictionary_page_offset
    if dictionary is not None and (0 < dictionary < start or start < len(MAGIC) <= dictionary):
        start = int(dictionary)
    return start


def _chunk_error(i: int, j: int, leaf: SchemaLeaf, what: str) -> CorruptFileError:
    return CorruptFileError(
        f"column chunk {j} of row group {i}: {what}", row_group=i, column=leaf.path
    )


def _check_chunk(i: int, j: int, meta: Any, leaf: SchemaLeaf) -> None:
    """Raise the CorruptFileError that says what is wrong with this ColumnMetaData, if
    anything (the fast check in _iter_column_chunks can fail on unknown enum values)."""
    path = meta.path_in_schema
    if path is None or tuple(path) != leaf.path_in_schema:
        raise _chunk_error(
            i,
            j,
            leaf,
            f"path_in_schema {path!r} does not match schema leaf {leaf.column_index} "
            f"{list(leaf.path_in_schema)!r}",
        )
    physical_type = enum_name(_tt.Type, meta.type)
    if physical_type != leaf.physical_type:
        raise _chunk_error(
            i,
            j,
            leaf,
            f"physical type {physical_type} differs from the schema's {leaf.physical_type}",
        )
    for field, optional in (
        ("num_values", False),
        ("data_page_offset", False),
        ("total_compressed_size", False),
        ("bloom_filter_offset", True),
        ("bloom_filter_length", True),
    ):
        value = getattr(meta, field)
        if value is None:
            if optional:
                continue
            raise _chunk_error(i, j, leaf, f"required field {field} is missing")
        if value < 0:
            raise _chunk_error(i, j, leaf, f"{field} is negative ({value})")

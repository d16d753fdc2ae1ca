"""The Parquet footer and Bloom filter header, as bytes in and typed structs out.

This is the only module that imports the generated Thrift bindings (``parquet_bloom._thrift``),
so the rest of the library depends on a small, typed surface instead of on generated code,
and the Thrift runtime's many exception types are turned into this library's errors in one
place. It does no file IO: callers read the bytes (locally, over fsspec, from a cache) and
hand them in.

Everything here treats its input as untrusted. Footers and Bloom filter headers are decoded
with explicit size limits so that a hostile length field cannot make us allocate gigabytes
or loop for minutes, and every decode failure surfaces as ``CorruptFileError``.

Speed matters because footers of wide, long files are big (10,000 column chunks is a ~1 MB
footer), and a Bloom filter probe needs only a few fields per column chunk. So the default
decode hands the C decoder (``thrift.protocol.fastbinary``) a pruned copy of the Thrift
specs in which the fields we do not need are ``None``: the C code then skips them without
building Python objects for statistics, encodings and key-value metadata.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from thrift.protocol.TCompactProtocol import TCompactProtocol, TCompactProtocolAccelerated
from thrift.transport.TTransport import TMemoryBuffer

from parquet_bloom._thrift.parquet import ttypes as _tt
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

try:  # The C extension is optional in the thrift package (built from an sdist).
    from thrift.protocol import fastbinary as _fastbinary_module

    _fastbinary: ModuleType | None = _fastbinary_module
except ImportError:  # pragma: no cover - depends on how thrift was installed
    _fastbinary = None

__all__ = [
    "ENCRYPTED_MAGIC",
    "FOOTER_TRAILER_SIZE",
    "MAGIC",
    "MAX_BLOOM_FILTER_HEADER_SIZE",
    "MAX_FOOTER_SIZE",
    "MAX_PAGE_HEADER_SIZE",
    "MAX_THRIFT_CONTAINER_SIZE",
    "MAX_THRIFT_STRING_SIZE",
    "BloomFilterHeader",
    "ColumnChunk",
    "ColumnChunkInfo",
    "ColumnCryptoMetaData",
    "ColumnMetaData",
    "CompressionCodec",
    "ConvertedType",
    "Encoding",
    "EncryptionWithColumnKey",
    "EncryptionWithFooterKey",
    "FieldRepetitionType",
    "FileMetaData",
    "KeyValue",
    "LogicalType",
    "OffsetIndex",
    "PageHeader",
    "PageLocation",
    "PageType",
    "RowGroup",
    "SchemaElement",
    "SchemaLeaf",
    "Type",
    "chunk_start",
    "column_chunks",
    "decode_file_metadata",
    "decode_offset_index",
    "encode_bloom_filter_header",
    "encode_file_metadata",
    "encode_offset_index",
    "parse_bloom_filter_header",
    "parse_footer_trailer",
    "parse_page_header",
    "schema_leaves",
]

# Re-exported generated classes, so other modules never import ``_thrift`` themselves.
FileMetaData = _tt.FileMetaData
SchemaElement = _tt.SchemaElement
RowGroup = _tt.RowGroup
ColumnChunk = _tt.ColumnChunk
ColumnMetaData = _tt.ColumnMetaData
KeyValue = _tt.KeyValue
LogicalType = _tt.LogicalType
Type = _tt.Type
ConvertedType = _tt.ConvertedType
FieldRepetitionType = _tt.FieldRepetitionType
CompressionCodec = _tt.CompressionCodec
ColumnCryptoMetaData = _tt.ColumnCryptoMetaData
EncryptionWithFooterKey = _tt.EncryptionWithFooterKey
EncryptionWithColumnKey = _tt.EncryptionWithColumnKey

# --- File layout (parquet-format README "File Format") --------------------------------------
# A file is "PAR1" <column chunks> <FileMetaData (Thrift compact)> <4-byte LE length> "PAR1".
# Files whose footer is encrypted end in "PARE" instead (parquet-format Encryption.md).
MAGIC = b"PAR1"
ENCRYPTED_MAGIC = b"PARE"
FOOTER_TRAILER_SIZE = 8  # 4-byte little-endian footer length + 4-byte magic

# --- Limits for untrusted input ---------------------------------------------------------------
# The footer length comes from the file itself. Real footers are kilobytes to a few tens of
# megabytes; 256 MiB is far beyond any we know of and still small enough to read into memory.
MAX_FOOTER_SIZE = 256 * 1024 * 1024
# Thrift length limits, the same defaults as Arrow C++ (ReaderProperties
# thrift_string_size_limit / thrift_container_size_limit), so we accept what Arrow accepts.
# Each decode additionally caps both at the buffer length: every string byte and every
# container element takes at least one byte on the wire, so a larger declared length is
# corrupt, and the decoder never preallocates more than the input could fill.
MAX_THRIFT_STRING_SIZE = 100_000_000
MAX_THRIFT_CONTAINER_SIZE = 1_000_000
# A Bloom filter header is ~16 bytes (four small fields). We parse it in pure Python, so we
# bound how much of the buffer we are willing to walk when unknown fields pad it out; this
# keeps a hostile header to milliseconds of work however long the buffer handed to us is.
MAX_BLOOM_FILTER_HEADER_SIZE = 64 * 1024
# The Thrift runtime's own nesting limit (TProtocolBase.DEFAULT_RECURSION_DEPTH); we apply
# it to the hand-written Bloom filter header decoder too.
_MAX_THRIFT_DEPTH = 64


# =============================================================================================
# Footer trailer
# =============================================================================================


def parse_footer_trailer(trailer: bytes, *, file_size: int) -> int:
    """Validate the last ``FOOTER_TRAILER_SIZE`` bytes of a file; return the footer length.

    The footer (Thrift ``FileMetaData``) then occupies
    ``[file_size - FOOTER_TRAILER_SIZE - length, file_size - FOOTER_TRAILER_SIZE)``.
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
    if magic == ENCRYPTED_MAGIC:
        raise UnsupportedFileError(
            "encrypted Parquet footers are not supported", offset=magic_offset
        )
    if magic != MAGIC:
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


def _prune(
    cls: Any, keep: set[str], sub: dict[str, tuple[Any, ...]] | None = None
) -> tuple[Any, ...]:
    """Copy ``cls.thrift_spec`` with the fields not in ``keep`` set to ``None`` and the
    nested struct specs in ``sub`` swapped in.

    ``None`` is what the generated code itself uses for unused field ids, and the C decoder
    skips such fields on the wire without creating any Python objects.
    """
    spec: list[Any] = list(cls.thrift_spec)
    names = {entry[2] for entry in spec if entry is not None}
    unknown = (keep | set(sub or ())) - names
    if unknown:  # a typo or an IDL change must not silently drop a field
        raise AssertionError(f"{cls.__name__} has no fields {sorted(unknown)}")
    for i, entry in enumerate(spec):
        if entry is None:
            continue
        fid, ttype, name, typeargs, default = entry
        if name not in keep:
            spec[i] = None
        elif sub and name in sub:
            if ttype == _TTYPE_LIST:  # (element ttype, [class, spec], immutable)
                etype, (eclass, _), immutable = typeargs
                typeargs = (etype, [eclass, sub[name]], immutable)
            else:  # struct: [class, spec]
                typeargs = [typeargs[0], sub[name]]
            spec[i] = (fid, ttype, name, typeargs, default)
    return tuple(spec)


_TTYPE_LIST = 15  # thrift.Thrift.TType.LIST

# The generated code attaches thrift_spec after each class body, which mypy cannot see.
_FULL_FILE_META_DATA_SPEC: tuple[Any, ...] = _tt.FileMetaData.thrift_spec  # type: ignore[attr-defined]

# Only what a Bloom filter reader needs; see decode_file_metadata.
_FAST_COLUMN_META_DATA_SPEC = _prune(
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
_FAST_COLUMN_CHUNK_SPEC = _prune(
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
_FAST_ROW_GROUP_SPEC = _prune(
    _tt.RowGroup,
    {"columns", "num_rows", "file_offset", "total_compressed_size", "ordinal"},
    {"columns": _FAST_COLUMN_CHUNK_SPEC},
)
_FAST_FILE_META_DATA_SPEC = _prune(
    _tt.FileMetaData,
    {"version", "schema", "num_rows", "row_groups", "created_by", "encryption_algorithm"},
    {"row_groups": _FAST_ROW_GROUP_SPEC},
)


def _describe(err: BaseException) -> str:
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


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
    md = _decode_untrusted(buf, _tt.FileMetaData, spec, "footer", "the Parquet footer")
    _validate_file_metadata(md)
    result: FileMetaData = md
    return result


class _CompactProtocolReplacingUtf8(TCompactProtocol):  # type: ignore[misc]
    """The pure-Python decoder, made to decode Thrift ``string`` fields like the C one.

    ``fastbinary`` decodes invalid UTF-8 with U+FFFD replacement characters while the
    pure-Python ``readString`` raises; we want one behaviour whichever is installed, and
    the lenient one: a reader should not reject a file over a mis-encoded column name.
    """

    def readString(self) -> str:
        value: str = self.readBinary().decode("utf-8", errors="replace")
        return value


def _decode_untrusted(
    buf: bytes | memoryview, cls: Any, spec: tuple[Any, ...], name: str, the_name: str
) -> Any:
    """Decode a Thrift compact struct from a file, every failure a BloomFilterError."""
    data = bytes(buf)
    if len(data) > MAX_FOOTER_SIZE:
        raise UnsupportedFileError(
            f"{name} of {len(data)} bytes exceeds this library's limit of {MAX_FOOTER_SIZE} bytes"
        )
    try:
        return _decode_struct(data, cls, spec)
    except Exception as err:
        # The Thrift runtime signals bad input with a zoo of types (EOFError,
        # TProtocolException, TTransportException, UnicodeDecodeError, struct.error,
        # OverflowError, MemoryError, and AssertionError/KeyError/RecursionError in the
        # pure-Python decoder). The call above does nothing but decode these bytes, so any
        # exception from it means they are not a valid struct.
        raise CorruptFileError(f"cannot decode {the_name}: {_describe(err)}") from err


def _decode_struct(data: bytes, cls: Any, spec: tuple[Any, ...]) -> Any:
    limit_string = min(MAX_THRIFT_STRING_SIZE, len(data))
    limit_container = min(MAX_THRIFT_CONTAINER_SIZE, len(data))
    transport = TMemoryBuffer(data)
    fastbinary = _fastbinary
    if fastbinary is None:
        proto = _CompactProtocolReplacingUtf8(
            transport, string_length_limit=limit_string, container_length_limit=limit_container
        )
        obj = cls()
        obj.read(proto)
        return obj
    proto = TCompactProtocolAccelerated(
        transport, string_length_limit=limit_string, container_length_limit=limit_container
    )
    # A 10,000-chunk footer creates ~50,000 objects; the cyclic GC would run dozens of
    # collections over them meanwhile, none of which can free anything (nothing here is
    # garbage until we return). Pausing it cuts decode time by roughly a quarter.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return fastbinary.decode_compact(None, proto, [cls, spec])
    finally:
        if gc_was_enabled:
            gc.enable()


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
    return _encode_struct(md, _tt.FileMetaData, _FULL_FILE_META_DATA_SPEC)


def _encode_struct(obj: Any, cls: Any, spec: tuple[Any, ...]) -> bytes:
    fastbinary = _fastbinary
    if fastbinary is not None:
        out: bytes = fastbinary.encode_compact(obj, [cls, spec])
        return out
    transport = TMemoryBuffer()
    obj.write(TCompactProtocol(transport))  # the generated write() is untyped
    value: bytes = transport.getvalue()
    return value


# =============================================================================================
# Schema and column chunks
# =============================================================================================


def _enum_name(enum_cls: Any, value: int | None) -> str | None:
    if value is None:
        return None
    name: str | None = enum_cls._VALUES_TO_NAMES.get(value)
    return name if name is not None else f"UNKNOWN({value})"


@dataclass(frozen=True, slots=True)
class SchemaLeaf:
    """A primitive column of the schema, with its position among the leaves."""

    column_index: int
    path: str  # dotted path_in_schema, e.g. "a.b"; ambiguous if names contain dots
    path_in_schema: tuple[str, ...]  # the unambiguous form of ``path``
    physical_type: str  # Type enum name, e.g. "INT32"; "UNKNOWN(n)" for a newer type
    type_length: int | None
    logical_type: Any | None  # generated LogicalType union instance
    converted_type: str | None  # ConvertedType enum name
    scale: int | None
    precision: int | None
    repetition: str | None  # "REQUIRED", "OPTIONAL", "REPEATED", "VECTOR"; None if unset
    field_id: int | None
    # The levels a data page stores for this leaf (parquet-format README, "Nested Encoding"):
    # every non-required element on the path from the root adds one definition level, every
    # repeated one a repetition level. None when an element on the path has no repetition.
    max_definition_level: int | None = None
    max_repetition_level: int | None = None


def schema_leaves(md: FileMetaData) -> list[SchemaLeaf]:
    """The schema's primitive columns in depth-first order, i.e. the column chunk order.

    The schema is a depth-first flattening of a tree (parquet.thrift SchemaElement): the
    first element is the root; a group lists its ``num_children`` and is followed by them.
    Like Arrow C++, an element is a leaf when it has a type and no children, and an element
    without children or type is an empty group.
    """
    schema = md.schema
    if not schema:
        raise CorruptFileError("the Parquet footer has an empty schema")
    n_elements = len(schema)
    root = schema[0]
    if root.name is None:
        raise CorruptFileError("schema element 0 (the root) has no name")
    root_children = _children(root, 0)
    leaves: list[SchemaLeaf] = []
    # (index of the group element, children still to visit, path of the group, its levels)
    stack: list[tuple[int, int, tuple[str, ...], tuple[int, int] | None]] = [
        (0, root_children, (), (0, 0))
    ]
    pos = 1
    while stack:
        parent, remaining, prefix, parent_levels = stack[-1]
        if remaining == 0:
            stack.pop()
            continue
        stack[-1] = (parent, remaining - 1, prefix, parent_levels)
        if pos >= n_elements:
            raise CorruptFileError(
                f"schema element {parent} declares more children than the schema's "
                f"{n_elements} elements hold"
            )
        element = schema[pos]
        name = element.name
        if name is None:
            raise CorruptFileError(f"schema element {pos} has no name")
        path = (*prefix, name)
        levels = _levels(parent_levels, element.repetition_type)
        n_children = _children(element, pos)
        if n_children > 0:
            stack.append((pos, n_children, path, levels))
        elif element.type is not None:
            leaves.append(
                SchemaLeaf(
                    column_index=len(leaves),
                    path=".".join(path),
                    path_in_schema=path,
                    physical_type=_enum_name(_tt.Type, element.type) or "",
                    type_length=element.type_length,
                    logical_type=element.logicalType,
                    converted_type=_enum_name(_tt.ConvertedType, element.converted_type),
                    scale=element.scale,
                    precision=element.precision,
                    repetition=_enum_name(_tt.FieldRepetitionType, element.repetition_type),
                    field_id=element.field_id,
                    max_definition_level=None if levels is None else levels[0],
                    max_repetition_level=None if levels is None else levels[1],
                )
            )
        pos += 1
    if pos != n_elements:
        raise CorruptFileError(
            f"the schema has {n_elements} elements but its tree (from the root's "
            f"{root_children} children) holds only {pos}"
        )
    return leaves


def _levels(parent: tuple[int, int] | None, repetition: int | None) -> tuple[int, int] | None:
    """(max definition level, max repetition level) of an element below ``parent``; None
    below an element without a repetition or with one whose levels we do not know (VECTOR)."""
    kinds = _tt.FieldRepetitionType
    if parent is None or repetition not in (kinds.REQUIRED, kinds.OPTIONAL, kinds.REPEATED):
        return None
    optional = repetition != kinds.REQUIRED
    repeated = repetition == kinds.REPEATED
    return parent[0] + optional, parent[1] + repeated


def _children(element: Any, index: int) -> int:
    n = element.num_children
    if n is None:
        return 0
    if n < 0:
        raise CorruptFileError(f"schema element {index} has {n} children")
    return int(n)


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
    type_names = _tt.Type._VALUES_TO_NAMES
    leaf_paths = [list(leaf.path_in_schema) for leaf in leaves]
    for i, rg in enumerate(_row_groups(md)):
        columns = _row_group_columns(i, rg, leaves)
        # This loop runs once per column chunk (10,000s in wide files), so the common case
        # is one combined check; only a failing chunk takes the slow path that says why.
        for j, chunk in enumerate(columns):
            leaf = leaves[j]
            encrypted = (
                chunk.crypto_metadata is not None or chunk.encrypted_column_metadata is not None
            )
            meta = chunk.meta_data
            if meta is None:
                if not encrypted:
                    raise _chunk_error(i, j, leaf, "no ColumnMetaData")
                yield ColumnChunkInfo(
                    i, j, leaf.path, leaf.physical_type, leaf.type_length, leaf.logical_type,
                    leaf.converted_type, leaf.scale, leaf.precision,
                    0, 0, None, 0, None, None, True, leaf.path_in_schema,
                )  # fmt: skip
                continue
            num_values = meta.num_values
            data_page_offset = meta.data_page_offset
            total_compressed_size = meta.total_compressed_size
            bloom_filter_offset = meta.bloom_filter_offset
            bloom_filter_length = meta.bloom_filter_length
            try:
                ok = (
                    num_values >= 0
                    and data_page_offset >= 0
                    and total_compressed_size >= 0
                    and (bloom_filter_offset is None or bloom_filter_offset >= 0)
                    and (bloom_filter_length is None or bloom_filter_length >= 0)
                    and type_names.get(meta.type) == leaf.physical_type
                    and meta.path_in_schema == leaf_paths[j]
                )
            except TypeError:  # a required field is None
                ok = False
            if not ok:
                _check_chunk(i, j, meta, leaf)
            yield ColumnChunkInfo(
                i, j, leaf.path, leaf.physical_type, leaf.type_length, leaf.logical_type,
                leaf.converted_type, leaf.scale, leaf.precision,
                num_values, data_page_offset, meta.dictionary_page_offset, total_compressed_size,
                bloom_filter_offset, bloom_filter_length, encrypted, leaf.path_in_schema,
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
    physical_type = _enum_name(_tt.Type, meta.type)
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


# =============================================================================================
# Bloom filter header
# =============================================================================================
#
# parquet-format BloomFilter.md: each column chunk's filter is a Thrift compact
# BloomFilterHeader followed by numBytes of bitset. The header's algorithm, hash and
# compression are unions with one member each today (BLOCK, XXHASH, UNCOMPRESSED). The
# generated code cannot tell "no member we know" from "no member", and we must report an
# unknown member (a newer writer) differently from garbage, so we decode the header here:
# it is four fields, and a hand-written decoder also bounds exactly how far it reads.

# Thrift compact protocol wire types (thrift/doc/specs/thrift-compact-protocol.md).
_CT_STOP = 0
_CT_BOOL_TRUE = 1
_CT_BOOL_FALSE = 2
_CT_BYTE = 3
_CT_I16 = 4
_CT_I32 = 5
_CT_I64 = 6
_CT_DOUBLE = 7
_CT_BINARY = 8
_CT_LIST = 9
_CT_SET = 10
_CT_MAP = 11
_CT_STRUCT = 12
_CT_UUID = 13
_FIXED_SIZE = {_CT_BYTE: 1, _CT_DOUBLE: 8, _CT_UUID: 16}

# Known union members by field id (parquet.thrift BloomFilterAlgorithm/Hash/Compression).
_BLOOM_ALGORITHMS = {1: "BLOCK"}
_BLOOM_HASHES = {1: "XXHASH"}
_BLOOM_COMPRESSIONS = {1: "UNCOMPRESSED"}

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class BloomFilterHeader:
    """A decoded parquet.thrift BloomFilterHeader.

    ``algorithm``, ``hash`` and ``compression`` name the union member that was set:
    "BLOCK", "XXHASH", "UNCOMPRESSED", or "UNKNOWN(<field id>)" for a member newer than
    this library, which the caller should report as unsupported.
    """

    num_bytes: int
    algorithm: str
    hash: str
    compression: str


class _Malformed(Exception):
    """Internal: the header bytes are not valid Thrift compact."""


class _Truncated(_Malformed):
    """Internal: the header claims more bytes than the buffer holds."""


class _CompactReader:
    """A minimal, bounds-checked Thrift compact protocol reader over a byte buffer."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.pos = 0
        self.end = len(data)

    def byte(self) -> int:
        if self.pos >= self.end:
            raise _Truncated(f"truncated at byte {self.pos}")
        value = self.data[self.pos]
        self.pos += 1
        return int(value)

    def advance(self, n: int) -> None:
        if n > self.end - self.pos:
            raise _Truncated(f"{n} bytes declared at byte {self.pos}, {self.end - self.pos} left")
        self.pos += n

    def varint(self) -> int:
        result = 0
        for shift in range(0, 70, 7):  # at most 10 bytes encode 64 bits
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
        raise _Malformed(f"varint longer than 10 bytes ending at byte {self.pos}")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def field_header(self, last_id: int) -> tuple[int, int]:
        """Return (wire type, field id); wire type ``_CT_STOP`` ends the struct."""
        b = self.byte()
        ctype = b & 0x0F
        if ctype == _CT_STOP:
            return _CT_STOP, 0
        delta = b >> 4
        if delta:
            return ctype, last_id + delta
        fid = self.zigzag()
        if not -(2**15) <= fid < 2**15:
            raise _Malformed(f"field id {fid} out of i16 range at byte {self.pos}")
        return ctype, fid

    def fields(self) -> Iterator[tuple[int, int]]:
        """(wire type, field id) of each field of a struct, up to its stop byte; the caller
        reads or skips each value before asking for the next field."""
        last = 0
        while True:
            ctype, last = self.field_header(last)
            if ctype == _CT_STOP:
                return
            yield ctype, last

    def skip(self, ctype: int, depth: int, *, in_container: bool = False) -> None:
        """Skip one value of wire type ``ctype``."""
        if ctype in (_CT_BOOL_TRUE, _CT_BOOL_FALSE):
            if in_container:  # in a field header the value is the type itself
                self.advance(1)
        elif ctype in (_CT_I16, _CT_I32, _CT_I64):
            self.varint()
        elif ctype in _FIXED_SIZE:
            self.advance(_FIXED_SIZE[ctype])
        elif ctype == _CT_BINARY:
            self.advance(self.varint())
        elif ctype in (_CT_LIST, _CT_SET):
            self._skip_list(depth)
        elif ctype == _CT_MAP:
            self._skip_map(depth)
        elif ctype == _CT_STRUCT:
            self.skip_struct(depth)
        else:
            raise _Malformed(f"invalid wire type {ctype} before byte {self.pos}")

    def _check_depth(self, depth: int) -> int:
        if depth >= _MAX_THRIFT_DEPTH:
            raise _Malformed(f"nesting deeper than {_MAX_THRIFT_DEPTH} at byte {self.pos}")
        return depth + 1

    def _check_count(self, count: int, etype: int) -> None:
        # Every element takes at least one byte, so a count larger than what is left is
        # corrupt; checking it up front keeps a hostile count from looping at all.
        if count * _FIXED_SIZE.get(etype, 1) > self.end - self.pos:
            raise _Truncated(f"{count} elements declared at byte {self.pos} do not fit")

    def _skip_list(self, depth: int) -> None:
        depth = self._check_depth(depth)
        b = self.byte()
        etype = b & 0x0F
        count = b >> 4
        if count == 15:
            count = self.varint()
        self._check_count(count, etype)
        for _ in range(count):
            self.skip(etype, depth, in_container=True)

    def _skip_map(self, depth: int) -> None:
        depth = self._check_depth(depth)
        count = self.varint()
        if count == 0:
            return
        types = self.byte()
        ktype, vtype = types >> 4, types & 0x0F
        self._check_count(2 * count, _CT_BYTE)
        for _ in range(count):
            self.skip(ktype, depth, in_container=True)
            self.skip(vtype, depth, in_container=True)

    def skip_struct(self, depth: int) -> None:
        depth = self._check_depth(depth)
        for ctype, _ in self.fields():
            self.skip(ctype, depth)

    def union_member(self, known: dict[int, str], what: str) -> str:
        """Read a union struct; return the name of the member that is set."""
        depth = self._check_depth(0)
        member: str | None = None
        for ctype, fid in self.fields():
            if member is not None:
                raise _Malformed(f"{what} union has more than one member set")
            if fid in known:
                if ctype != _CT_STRUCT:
                    raise _Malformed(f"{what} member {known[fid]} has wire type {ctype}")
                member = known[fid]
            else:
                member = f"UNKNOWN({fid})"
            self.skip(ctype, depth)
        if member is None:
            raise _Malformed(f"{what} union has no member set")
        return member


def parse_bloom_filter_header(buf: bytes | memoryview) -> tuple[BloomFilterHeader, int]:
    """Decode the BloomFilterHeader at the start of ``buf``.

    Returns the header and the number of bytes it took; the bitset follows right after.
    Bytes after the header struct are ignored. Unknown union members decode as
    "UNKNOWN(<field id>)"; anything that is not a valid header raises ``CorruptFileError``.
    """
    view = memoryview(buf)
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    clipped = len(view) > MAX_BLOOM_FILTER_HEADER_SIZE
    reader = _CompactReader(view[:MAX_BLOOM_FILTER_HEADER_SIZE])
    try:
        num_bytes: int | None = None
        algorithm: str | None = None
        hash_: str | None = None
        compression: str | None = None
        for ctype, fid in reader.fields():
            if fid == 1 and ctype == _CT_I32:
                num_bytes = reader.zigzag()
                if not _INT32_MIN <= num_bytes <= _INT32_MAX:
                    raise _Malformed(f"numBytes {num_bytes} is not an i32")
            elif fid == 2 and ctype == _CT_STRUCT:
                algorithm = reader.union_member(_BLOOM_ALGORITHMS, "algorithm")
            elif fid == 3 and ctype == _CT_STRUCT:
                hash_ = reader.union_member(_BLOOM_HASHES, "hash")
            elif fid == 4 and ctype == _CT_STRUCT:
                compression = reader.union_member(_BLOOM_COMPRESSIONS, "compression")
            else:  # a field from a newer format version: skip it, like Thrift does
                reader.skip(ctype, 1)
    except _Malformed as err:
        reason = str(err)
        if clipped and isinstance(err, _Truncated):
            reason = (
                f"header longer than this library's limit of {MAX_BLOOM_FILTER_HEADER_SIZE} bytes"
            )
        raise CorruptFileError(f"cannot decode the Bloom filter header: {reason}") from None
    missing = [
        name
        for name, value in (
            ("numBytes", num_bytes),
            ("algorithm", algorithm),
            ("hash", hash_),
            ("compression", compression),
        )
        if value is None
    ]
    if missing:
        raise CorruptFileError(
            f"cannot decode the Bloom filter header: required field(s) {', '.join(missing)} missing"
        )
    assert num_bytes is not None and algorithm and hash_ and compression  # for mypy
    if num_bytes < 0:
        raise CorruptFileError(
            f"cannot decode the Bloom filter header: numBytes is negative ({num_bytes})"
        )
    header = BloomFilterHeader(
        num_bytes=num_bytes, algorithm=algorithm, hash=hash_, compression=compression
    )
    return header, reader.pos


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# Field 2, 3 and 4 (each a one-byte header: delta 1, type struct) holding a union whose
# member 1 is an empty struct: 0x1c 0x1c 0x00 (member stop) 0x00 (union stop).
_BLOCK_XXHASH_UNCOMPRESSED = b"\x1c\x1c\x00\x00" * 3


def encode_bloom_filter_header(num_bytes: int) -> bytes:
    """The compact-protocol BloomFilterHeader for a BLOCK / XXHASH / UNCOMPRESSED filter.

    Byte for byte what Arrow C++ and parquet-java write: field 1 (i32, zigzag varint), the
    three one-member unions, and the struct's stop byte.
    """
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, int):
        raise TypeError(f"num_bytes must be an int, not {type(num_bytes).__name__}")
    if not 0 <= num_bytes <= _INT32_MAX:
        raise ValueError(f"num_bytes must be in [0, {_INT32_MAX}], got {num_bytes}")
    return b"\x15" + _varint(num_bytes << 1) + _BLOCK_XXHASH_UNCOMPRESSED + b"\x00"


# =============================================================================================
# Page index: OffsetIndex
# =============================================================================================
#
# parquet.thrift PageLocation.offset is the "offset of the page in the file": an absolute
# position, so a rewrite that moves data pages (removing the Bloom filters that arrow-rs
# writes after each row group) must re-encode the OffsetIndex of every chunk whose pages
# moved. The ColumnIndex holds no offsets and is always copied as it is.

OffsetIndex = _tt.OffsetIndex
PageLocation = _tt.PageLocation
# ColumnMetaData.encoding_stats says which encodings the data pages use; a rewrite reads a chunk
# whose pages are all dictionary-encoded (few distinct values) differently from one that is not.
Encoding = _tt.Encoding
PageType = _tt.PageType
_OFFSET_INDEX_SPEC: tuple[Any, ...] = _tt.OffsetIndex.thrift_spec  # type: ignore[attr-defined]


def decode_offset_index(buf: bytes | memoryview) -> Any:
    """Decode a Thrift compact ``OffsetIndex`` (every field, so that it re-encodes losslessly).

    Returns the generated ``OffsetIndex``. Raises ``CorruptFileError`` when the bytes do not
    decode or a page location lacks a required field.
    """
    offset_index = _decode_untrusted(
        buf, _tt.OffsetIndex, _OFFSET_INDEX_SPEC, "OffsetIndex", "the OffsetIndex"
    )
    locations = offset_index.page_locations
    if locations is None:
        raise CorruptFileError("the OffsetIndex has no page_locations")
    for i, location in enumerate(locations):
        for field in ("offset", "compressed_page_size", "first_row_index"):
            if getattr(location, field) is None:
                raise CorruptFileError(f"page location {i} of the OffsetIndex has no {field}")
    return offset_index


def encode_offset_index(offset_index: Any) -> bytes:
    """Serialize an ``OffsetIndex`` with the Thrift compact protocol (fields in id order, as
    every writer we know encodes it, so an unchanged index re-encodes to the same bytes)."""
    return _encode_struct(offset_index, _tt.OffsetIndex, _OFFSET_INDEX_SPEC)


# =============================================================================================
# Page headers
# =============================================================================================
#
# parquet-format README, "Data Pages": a column chunk is a sequence of pages, each a
# Thrift-compact PageHeader followed by compressed_page_size bytes of body. Building a Bloom
# filter from the pages (parquet_bloom.pages) needs the sizes, the page kind and the encodings,
# never the statistics, so those are skipped by the C decoder like the footer's.

PageHeader = _tt.PageHeader
# A page header is tens of bytes plus its statistics, whose min/max can be long strings. Arrow
# C++ starts with 16 KiB and gives up at 16 MiB (ReaderProperties / kDefaultMaxPageHeaderSize);
# we accept what it accepts.
MAX_PAGE_HEADER_SIZE = 16 * 1024 * 1024

_PAGE_HEADER_SPEC = _prune(
    _tt.PageHeader,
    {
        "type",
        "uncompressed_page_size",
        "compressed_page_size",
        "data_page_header",
        "index_page_header",
        "dictionary_page_header",
        "data_page_header_v2",
    },
    {
        "data_page_header": _prune(
            _tt.DataPageHeader,
            {"num_values", "encoding", "definition_level_encoding", "repetition_level_encoding"},
        ),
        "data_page_header_v2": _prune(
            _tt.DataPageHeaderV2,
            {
                "num_values",
                "num_nulls",
                "num_rows",
                "encoding",
                "definition_levels_byte_length",
                "repetition_levels_byte_length",
                "is_compressed",
            },
        ),
    },
)
# Which sub-header each page type must carry, and the counts in it that must be >= 0.
_PAGE_SUB_HEADERS = {
    _tt.PageType.DATA_PAGE: ("data_page_header", ("num_values",)),
    _tt.PageType.DATA_PAGE_V2: (
        "data_page_header_v2",
        (
            "num_values",
            "num_nulls",
            "num_rows",
            "definition_levels_byte_length",
            "repetition_levels_byte_length",
        ),
    ),
    _tt.PageType.DICTIONARY_PAGE: ("dictionary_page_header", ("num_values",)),
}


def parse_page_header(buf: bytes | memoryview) -> tuple[Any, int]:
    """Decode the PageHeader at the start of ``buf``.

    Returns the generated ``PageHeader`` (statistics and CRC not decoded) and the number of
    bytes it took; the page body follows right after. Raises ``CorruptFileError`` when the
    bytes are not a PageHeader, including when ``buf`` ends inside it (a caller holding only
    a prefix of the chunk can read more and try again), or when its sizes or counts are
    negative or the sub-header its type needs is missing. An unknown page type is returned
    as it is: the caller decides whether to skip it.
    """
    data = bytes(buf[:MAX_PAGE_HEADER_SIZE])
    transport = TMemoryBuffer(data)
    limit = min(MAX_THRIFT_STRING_SIZE, len(data))
    try:
        if _fastbinary is None:
            proto = _CompactProtocolReplacingUtf8(
                transport, string_length_limit=limit, container_length_limit=limit
            )
            header = _tt.PageHeader()  # type: ignore[no-untyped-call]
            header.read(proto)  # type: ignore[no-untyped-call]
        else:
            proto = TCompactProtocolAccelerated(
                transport, string_length_limit=limit, container_length_limit=limit
            )
            header = _fastbinary.decode_compact(None, proto, [_tt.PageHeader, _PAGE_HEADER_SPEC])
    except Exception as err:  # every way bad Thrift fails; see _decode_untrusted
        raise CorruptFileError(f"cannot decode a page header: {_describe(err)}") from err
    consumed = int(transport.cstringio_buf.tell())
    for name in ("type", "uncompressed_page_size", "compressed_page_size"):
        value = getattr(header, name)
        if value is None or value < 0:
            raise CorruptFileError(f"page header field {name} is {value}")
    sub_header = _PAGE_SUB_HEADERS.get(header.type)
    if sub_header is not None:
        name, counts = sub_header
        sub = getattr(header, name)
        if sub is None:
            raise CorruptFileError(f"a page header of type {header.type} has no {name}")
        for count in counts:
            value = getattr(sub, count)
            if value is None or value < 0:
                raise CorruptFileError(f"page header {name}.{count} is {value}")
    return header, consumed

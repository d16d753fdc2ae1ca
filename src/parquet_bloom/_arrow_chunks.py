"""Column chunks read through pyarrow: the fallback for what the page reader does not read.

:mod:`parquet_bloom._pages` hashes a chunk's values straight from its pages; what it does not
read (the DELTA_* encodings, BIT_PACKED levels, LZ4, ...) is read here, through pyarrow, a
chunk at a time. Two callers: the rewrite hashes a chunk a batch of rows at a time
(:func:`chunk_hashes`), so that its decoded values are never all in memory; the audit takes a
leaf's values of one row group whole (:meth:`ChunkReader.leaf`), to name a missing value.

One :class:`ChunkReader` per file opens it with pyarrow on first use (pyarrow parses the footer
again, which costs only when a chunk needs it), through the file's
:class:`~parquet_bloom._io.source.ByteSource`, so that pyarrow too reads what the IO layer gives
it. pyarrow is imported only here and only when
called: importing this module imports no pyarrow.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from parquet_bloom import _format as fmt
from parquet_bloom._io.source import ByteSource
from parquet_bloom.errors import BloomFilterError, CorruptFileError, UnsupportedFileError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "HASH_BATCH_SIZE",
    "READ_BATCH_SIZE",
    "READ_BUFFER_SIZE",
    "ChunkReader",
    "Unmapped",
    "arrow_errors",
    "chunk_hashes",
]

# pyarrow reads a column chunk through a buffer of this size (ParquetFile(buffer_size=...)):
# large enough for sequential reads to cost nothing extra, small next to a chunk.
READ_BUFFER_SIZE = 1024 * 1024

# Rows pyarrow decodes at a time: a chunk's values are hashed a batch at a time, never all in
# memory at once. Large enough that per-batch costs vanish, small next to a chunk.
READ_BATCH_SIZE = 64 * 1024

# Values hashed per call: the hashing's temporaries are a few times this many words, so they
# stay a small fraction of a chunk while the per-call overhead stays negligible.
HASH_BATCH_SIZE = 64 * 1024


class Unmapped(Exception):
    """pyarrow's columns do not line up with the schema's leaves."""


class ChunkReader:
    """The column chunks of one file, read with pyarrow.

    Two pyarrow readers over the file, each opened on first use: one decodes to plain arrays,
    the other keeps the BYTE_ARRAY columns ``dictionary_columns`` dictionary-encoded, which for
    a chunk whose pages are all dictionary-encoded costs a copy of the indices instead of one
    string per value. Each streams a chunk through a small buffer rather than reading it whole
    first: the compressed chunk then never sits in memory next to its decoded values.
    """

    def __init__(
        self,
        source: ByteSource,
        dictionary_columns: Sequence[str] = (),
        decryption_properties: Any | None = None,
    ) -> None:
        """``decryption_properties``: pyarrow's, for a file whose footer is encrypted."""
        self._source = source
        self._dictionary_columns = list(dictionary_columns)
        self._decryption_properties = decryption_properties
        self._files: dict[bool, Any] = {}  # dictionary or not -> pyarrow.parquet.ParquetFile
        self._cached: tuple[tuple[int, str], list[Any]] | None = None

    def _file(self, dictionary: bool) -> Any:
        dictionary = dictionary and bool(self._dictionary_columns)
        if dictionary not in self._files:
            import pyarrow.parquet as pq

            options: dict[str, Any] = {"pre_buffer": False, "buffer_size": READ_BUFFER_SIZE}
            if dictionary:
                options["read_dictionary"] = self._dictionary_columns
            if self._decryption_properties is not None:
                options["decryption_properties"] = self._decryption_properties
            self._files[dictionary] = pq.ParquetFile(self._source.arrow_file(), **options)
        return self._files[dictionary]

    def batches(self, row_group: int, column_index: int, *, dictionary: bool) -> Iterator[Any]:
        """The chunk's values as one-column record batches of READ_BATCH_SIZE rows."""
        batches: Iterator[Any] = self._file(dictionary).reader.iter_batches(
            READ_BATCH_SIZE, [row_group], column_indices=[column_index], use_threads=False
        )
        return batches

    def leaf(self, row_group: int, leaf: fmt.SchemaLeaf, leaves: Sequence[fmt.SchemaLeaf]) -> Any:
        """The leaf's values in ``row_group`` (an Arrow array, nulls included), read with the
        rest of its top-level column (kept for its sibling leaves). ``leaves`` are the file's
        schema leaves; raises :class:`Unmapped` when pyarrow's leaves are not the schema's."""
        top = leaf.path_in_schema[0]
        key = (row_group, top)
        if self._cached is None or self._cached[0] != key:
            table = self._file(False).read_row_group(row_group, columns=[top])
            self._cached = (key, _leaf_arrays(table.column(0).combine_chunks()))
        arrays = self._cached[1]
        siblings = [x for x in leaves if x.path_in_schema[0] == top]
        if len(arrays) != len(siblings):
            raise Unmapped(
                f"pyarrow reads {len(arrays)} leaf columns under {top!r} where the schema has "
                f"{len(siblings)}"
            )
        return arrays[siblings.index(leaf)]

    def close(self) -> None:
        for parquet_file in self._files.values():
            parquet_file.close()
        self._files.clear()
        self._cached = None

    def __enter__(self) -> ChunkReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _leaf_arrays(arr: Any) -> list[Any]:
    """The leaf arrays of a (nested) Arrow array, depth first, as Parquet orders its leaves."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if isinstance(t, pa.BaseExtensionType) and pa.types.is_nested(t.storage_type):
        return _leaf_arrays(arr.storage)
    if pa.types.is_struct(t):
        return [leaf for child in arr.flatten() for leaf in _leaf_arrays(child)]
    if pa.types.is_map(t):
        entries = pa.struct([t.key_field, t.item_field])
        as_list = arr.cast(pa.list_(pa.field("entries", entries, nullable=False)))
        return _leaf_arrays(pc.list_flatten(as_list))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_arrays(pc.list_flatten(arr))
    return [arr]


def chunk_hashes(
    reader: ChunkReader,
    chunk: fmt.ColumnChunkInfo,
    leaf: fmt.SchemaLeaf,
    meta: Any,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The hashes of a chunk's non-null values (duplicates possible), in no particular order,
    read with pyarrow (into ``out`` if it has room, as :func:`parquet_bloom._pages.chunk_hashes`).

    The chunk is read and hashed a batch of rows at a time, so its decoded values are never
    all in memory: what it takes is 8 bytes a value for the hashes plus one batch. A chunk
    whose pages are all dictionary-encoded has few distinct values: each batch's are found
    first (a hash table over the values) and only they are hashed. pyarrow's and the hashing's
    complaints are :class:`~parquet_bloom.errors.BloomFilterError` (see :func:`arrow_errors`).
    """
    from parquet_bloom import _logical as logical
    from parquet_bloom._pages import HashBuffer

    _check_codec(meta)
    few_distinct = _all_pages_dictionary_encoded(meta)
    dictionary = few_distinct and leaf.physical_type == "BYTE_ARRAY"
    hashes = HashBuffer(int(chunk.num_values), out)
    with arrow_errors():
        for batch in reader.batches(chunk.row_group, chunk.column_index, dictionary=dictionary):
            arr = _leaf_array(batch.column(0), leaf)
            del batch
            if few_distinct:
                arr = _distinct_values(arr)
            for start in range(0, len(arr), HASH_BATCH_SIZE):
                hashes.add(logical.column_hashes(arr.slice(start, HASH_BATCH_SIZE), leaf))
    return hashes.hashes()


@contextmanager
def arrow_errors() -> Iterator[None]:
    """pyarrow's and the hashing's complaints about the source file as BloomFilterErrors.

    pyarrow raises OSError for undecodable pages ("Couldn't deserialize thrift"): the file was
    opened and read already, so that is what an OSError while decoding means.
    """
    import pyarrow as pa

    try:
        yield
    except pa.ArrowNotImplementedError as err:
        raise UnsupportedFileError(f"pyarrow cannot read this column chunk: {err}") from err
    except (pa.ArrowInvalid, OSError) as err:
        raise CorruptFileError(f"pyarrow cannot read this column chunk: {err}") from err
    except BloomFilterError:
        raise
    except (TypeError, ValueError) as err:
        raise UnsupportedFileError(f"cannot hash this column chunk's values: {err}") from err


def _check_codec(meta: Any) -> None:
    """Refuse a chunk compressed with a codec pyarrow lacks (LZO always; others where pyarrow
    was built without them): pyarrow reports it as an OSError, which would read as corrupt."""
    import pyarrow as pa

    from parquet_bloom._pages import ARROW_CODECS

    if meta.codec == fmt.CompressionCodec.UNCOMPRESSED:
        return
    name = ARROW_CODECS.get(meta.codec)
    if name is None or not pa.Codec.is_available(name):
        codec = fmt.CompressionCodec._VALUES_TO_NAMES.get(meta.codec, f"codec {meta.codec}")
        raise UnsupportedFileError(
            f"the column chunk is compressed with {codec}, which pyarrow cannot decompress"
        )


def _all_pages_dictionary_encoded(meta: Any) -> bool:
    """Whether the footer's encoding_stats show every data page dictionary-encoded (the writer
    never fell back to plain), i.e. the chunk has at most a dictionary page's worth of values."""
    stats = meta.encoding_stats
    if not stats:
        return False
    data_pages = (fmt.PageType.DATA_PAGE, fmt.PageType.DATA_PAGE_V2)
    dictionary = (fmt.Encoding.PLAIN_DICTIONARY, fmt.Encoding.RLE_DICTIONARY)
    pages = [s for s in stats if s.page_type in data_pages and s.count]
    return bool(pages) and all(s.encoding in dictionary for s in pages)


def _leaf_array(arr: pa.Array, leaf: fmt.SchemaLeaf) -> pa.Array:
    """The leaf values of a one-leaf Arrow array read from Parquet: struct fields and list
    elements are unwrapped (nulls stay; the hashing skips them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    while True:
        t = arr.type
        if pa.types.is_struct(t):
            if t.num_fields != 1:
                raise AssertionError(f"reading one leaf gave a struct of {t.num_fields} fields")
            arr = pc.struct_field(arr, [0])
        elif pa.types.is_map(t):
            name = leaf.path_in_schema[-1]
            arr = arr.keys if name == t.key_field.name else arr.items
        elif (
            pa.types.is_list(t)
            or pa.types.is_large_list(t)
            or pa.types.is_fixed_size_list(t)
            or pa.types.is_list_view(t)
            or pa.types.is_large_list_view(t)
        ):
            arr = pc.list_flatten(arr)
        else:
            return arr


def _distinct_values(arr: pa.Array) -> pa.Array:
    """The distinct values of one Arrow array (nulls may remain), compared bit for bit.

    Floats are compared as their bit patterns: Bloom filters hash raw IEEE bits, so -0.0 and
    +0.0, and NaNs with different payloads, are different values here (docs/format-notes.md,
    floating-point zeros and NaN).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    while isinstance(arr.type, pa.BaseExtensionType):  # e.g. arrow.uuid: stored as its storage
        arr = arr.storage
    t = arr.type
    if pa.types.is_dictionary(t):
        used = pc.unique(arr.indices)
        return arr.dictionary.take(used)
    if pa.types.is_floating(t):
        bits = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[t.bit_width]
        return pc.unique(arr.view(bits)).view(t)
    return pc.unique(arr)

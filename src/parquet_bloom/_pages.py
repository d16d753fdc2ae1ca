"""Column chunk pages -> the hashes of the values they hold, read straight from the file.

A Bloom filter holds the XXH64 of the PLAIN encoding of each distinct value (parquet-format
``BloomFilter.md``), and a column chunk's pages hold exactly those bytes: a PLAIN data page
its non-null values back to back, the dictionary page each value of the dictionary-encoded
pages once, and those pages only indices into it. So building a chunk's filter needs no
decoding into Arrow: each page is decompressed, its levels are skipped (a null stores no
value), and the value bytes are hashed where they lie. That is several times cheaper than
reading the chunk with pyarrow, which makes an array of every value (a string object each)
only for us to take it apart again; and no type can be mistaken on the way, because what is
hashed is what the writer hashed, byte for byte.

Of a dictionary, only the hashes of the entries some page refers to are kept: a writer may
store entries no row uses (Arrow C++ writes a pandas categorical's whole dictionary), and the
filter must hold the chunk's values, sized for their count. Once every entry is referred to, the
remaining dictionary-encoded pages cannot add anything and are skipped unread.

Read here (parquet-format ``Encodings.md``): data pages v1 and v2; PLAIN, PLAIN_DICTIONARY /
RLE_DICTIONARY and BYTE_STREAM_SPLIT values; RLE levels; every codec pyarrow has except the
ambiguous LZ4 (Hadoop-framed or raw), Snappy by the compiled kernel where it is built. Anything
else (the DELTA_* encodings, BIT_PACKED levels, a new page type, or, on numpy alone, BYTE_ARRAY
pages holding many values of varying lengths, which only a value-by-value loop could split
there) raises :class:`NeedsArrow`: the caller reads that chunk with pyarrow instead. So do
pages whose values leave bytes over, or whose bit-packed runs are cut short: damage that would
misread values, or a writer's quirk that pyarrow reads, and pyarrow tells which. Bytes that
cannot be what they claim raise ``CorruptFileError`` with the file offset of the page.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from parquet_bloom import _format as fmt
from parquet_bloom import _xxh64 as xxh64
from parquet_bloom import kernels
from parquet_bloom._io.source import ByteSource
from parquet_bloom.errors import CorruptFileError

__all__ = [
    "ARROW_CODECS",
    "HashBuffer",
    "NeedsArrow",
    "chunk_hashes",
    "page_hashes",
    "rle_hybrid",
    "supported",
]

# parquet.thrift CompressionCodec -> pyarrow.Codec name (None: uncompressed). LZO (3) is missing:
# pyarrow cannot decompress it at all ("not supported by the C++ implementation").
ARROW_CODECS: dict[int, str | None] = {
    fmt.CompressionCodec.UNCOMPRESSED: None,
    fmt.CompressionCodec.SNAPPY: "snappy",
    fmt.CompressionCodec.GZIP: "gzip",
    fmt.CompressionCodec.BROTLI: "brotli",
    fmt.CompressionCodec.LZ4: "lz4",
    fmt.CompressionCodec.ZSTD: "zstd",
    fmt.CompressionCodec.LZ4_RAW: "lz4_raw",
}
# The codecs read here: LZ4 (5) is left out, as files carry it both Hadoop-framed and raw, and
# only pyarrow knows how to guess which.
_CODECS = {k: v for k, v in ARROW_CODECS.items() if k != fmt.CompressionCodec.LZ4}
_DICTIONARY_ENCODINGS = frozenset({fmt.Encoding.PLAIN_DICTIONARY, fmt.Encoding.RLE_DICTIONARY})
# Encodings a chunk may list (ColumnMetaData.encodings) for us to read it. RLE and BIT_PACKED
# are level encodings: parquet-java lists BIT_PACKED for levels that are never written (max
# level 0), so it is only refused on a page that really has such levels.
_READABLE_ENCODINGS = _DICTIONARY_ENCODINGS | {
    fmt.Encoding.PLAIN,
    fmt.Encoding.RLE,
    fmt.Encoding.BIT_PACKED,
    fmt.Encoding.BYTE_STREAM_SPLIT,
}
# Encodings.md, "Plain": the bytes of one value of each fixed-width physical type.
_WIDTHS = {"INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8}

# The first read of a page takes this much, enough for a page header with its statistics
# (and the whole of a small page); a longer header is read again at four times the size, up
# to format.MAX_PAGE_HEADER_SIZE. Arrow C++ starts at 16 KiB too.
PAGE_HEADER_GUESS = 16 * 1024
# Bytes of a chunk read at a time from object storage, where each read is a request: pages are
# typically 1 MiB, so one window serves several, and a page header costs no request of its own.
REMOTE_READ_WINDOW = 8 * 1024 * 1024
# A page may claim to decompress to at most this many bytes: the output is allocated before
# decompressing, so a corrupt size must not ask for gigabytes. Pages are ~1 MiB (the writers'
# default); one huge value can make one larger, and pyarrow is left to read those.
MAX_PAGE_SIZE = 256 * 1024 * 1024
# On numpy alone, BYTE_ARRAY values of varying lengths are split by a Python loop (~0.25 us a
# value), which is fine for a dictionary or a few small pages but slower than pyarrow for a
# whole chunk: past this many values in one chunk, the chunk goes to pyarrow. (The compiled
# kernels split any number.)
MAX_LOOPED_VALUES = 64 * 1024
# Hashes are collected into room for the footer's num_values (an upper bound on the values
# with a hash: nulls have none), at most this many at first (a corrupt footer cannot make us
# reserve an absurd amount), grown if the footer was wrong.
_INITIAL_HASHES = 1 << 26
# Bytes past a page's end that the compiled Snappy kernel may write in its page buffer (its
# SNAPPY_SLOP): with them it moves bytes 8 or 16 at a time up to the page's very end.
SNAPPY_SLOP = 16

_U32 = struct.Struct("<I")


class NeedsArrow(Exception):
    """The chunk uses something this module does not read; read it with pyarrow."""


class HashBuffer:
    """The hashes of one column chunk, collected as they are made.

    Room is made for ``num_values`` (the footer's count, nulls included, so an upper bound),
    in ``out`` (a uint64 array) when it has room: a caller hashing chunk after chunk reuses one
    buffer instead of allocating megabytes each time. Grown if the count was wrong.
    """

    __slots__ = ("_buffer", "_count")

    def __init__(self, num_values: int, out: np.ndarray | None = None) -> None:
        room = min(max(num_values, 0), _INITIAL_HASHES)
        if out is not None and out.dtype == np.uint64 and out.ndim == 1 and out.size >= room:
            self._buffer = out
        else:
            self._buffer = np.empty(room, dtype=np.uint64)
        self._count = 0

    def add(self, hashes: np.ndarray) -> None:
        self.reserve(hashes.size)[:] = hashes
        self._count += hashes.size

    def reserve(self, n: int) -> np.ndarray:
        """Room for the next ``n`` hashes, to be written there and then :meth:`commit`-ed."""
        end = self._count + n
        if end > self._buffer.size:
            grown = np.empty(max(2 * self._buffer.size, end), dtype=np.uint64)
            grown[: self._count] = self._buffer[: self._count]
            self._buffer = grown
        return self._buffer[self._count : end]

    def commit(self, n: int) -> None:
        self._count += n

    def keep_of_first(self, n: int, keep: np.ndarray) -> None:
        """Of the first ``n`` hashes, keep only those at the (ascending) indices ``keep``;
        the hashes after them follow the ones kept."""
        kept = self._buffer[:n][keep]
        rest = self._count - n
        self._buffer[kept.size : kept.size + rest] = self._buffer[n : self._count]  # overlapping
        self._buffer[: kept.size] = kept
        self._count = kept.size + rest

    def hashes(self) -> np.ndarray:
        """The hashes so far: a view of the buffer (``.base`` is the buffer, to keep)."""
        return self._buffer[: self._count]


def supported(meta: Any, leaf: fmt.SchemaLeaf) -> bool:
    """Whether the footer says the chunk is one this module can read (it may still find out
    otherwise on a page and raise :class:`NeedsArrow`)."""
    return (
        meta.codec in _CODECS
        and leaf.max_definition_level is not None
        and leaf.max_repetition_level is not None
        and (leaf.physical_type in _WIDTHS or leaf.physical_type == "BYTE_ARRAY" or _flba(leaf))
        and all(encoding in _READABLE_ENCODINGS for encoding in meta.encodings or ())
    )


def _flba(leaf: fmt.SchemaLeaf) -> bool:
    return (
        leaf.physical_type == "FIXED_LEN_BYTE_ARRAY"
        and leaf.type_length is not None
        and leaf.type_length >= 0
    )


def chunk_hashes(
    source: ByteSource | IO[bytes], meta: Any, leaf: fmt.SchemaLeaf, out: np.ndarray | None = None
) -> np.ndarray:
    """The XXH64 hashes of the non-null values of one column chunk (duplicates possible), in
    no particular order, read from ``source`` (a :class:`ByteSource`, or a binary file object
    read through one).

    ``meta`` is the chunk's ColumnMetaData, ``leaf`` its schema leaf. The hashes are written
    into ``out`` (a uint64 array) when it has room, and the result is then a view of it: a
    caller hashing chunk after chunk reuses one buffer instead of allocating megabytes each
    time. Raises :class:`NeedsArrow` for what this module does not read (see the module
    docstring) and ``CorruptFileError`` (with the page's file offset) for pages that do not
    decode.
    """
    if not isinstance(source, ByteSource):
        source = ByteSource(source)
    return _ChunkScan(source, meta, leaf, out).run()


def page_hashes(
    pages: Iterable[tuple[int, Any, bytes | memoryview]],
    meta: Any,
    leaf: fmt.SchemaLeaf,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`chunk_hashes` of a chunk whose pages come already read: each its file offset
    (for errors), its decoded PageHeader and its body (``compressed_page_size`` bytes, as the
    header says), in order, e.g. pages decrypted (:mod:`parquet_bloom._crypto.pages`)."""
    return _ChunkScan(None, meta, leaf, out).run_pages(pages)


class _ChunkScan:
    """One pass over the pages of one column chunk."""

    def __init__(
        self, source: ByteSource | None, meta: Any, leaf: fmt.SchemaLeaf, out: np.ndarray | None
    ) -> None:
        """``source``: None when the pages are handed in (:meth:`run_pages`)."""
        if not supported(meta, leaf):
            raise NeedsArrow("the footer lists an encoding, codec or type not read here")
        self.source = source
        self.window = REMOTE_READ_WINDOW if source is not None and source.remote else 0
        self._window: tuple[int, bytes] = (0, b"")
        self.max_def = int(leaf.max_definition_level or 0)
        self.max_rep = int(leaf.max_repetition_level or 0)
        # Bytes a value; None for BYTE_ARRAY, whose values carry their own lengths.
        self.width: int | None = (
            None
            if leaf.physical_type == "BYTE_ARRAY"
            else _WIDTHS.get(leaf.physical_type, leaf.type_length)
        )
        codec_name = _CODECS[meta.codec]
        # Snappy pages are decompressed by the compiled kernel where there is one, into one
        # buffer reused page after page (each page is done with before the next is read);
        # every other codec, and Snappy on numpy alone, by pyarrow.
        self.snappy = meta.codec == fmt.CompressionCodec.SNAPPY and kernels.compiled is not None
        self._page_buffer = np.empty(0, dtype=np.uint8)
        if codec_name is None or self.snappy:
            self.codec = None
        else:
            import pyarrow as pa

            self.codec = pa.Codec(codec_name)
        self.start = fmt.chunk_start(meta)
        self.end = self.start + int(meta.total_compressed_size)
        self.num_values = int(meta.num_values)
        self.hashes = HashBuffer(self.num_values, out)
        self.looped = 0  # BYTE_ARRAY values split by the Python loop so far
        self.referenced: npt.NDArray[np.bool_] | None = None
        self.referenced_count = 0  # the compiled scan's count of entries referenced
        self.all_referenced = False
        self.values_seen = 0  # the data pages' num_values (levels, nulls included)
        self.page_offset = self.start

    # -- the pages ------------------------------------------------------------------------

    def run(self) -> np.ndarray:
        pos = self.start
        while pos < self.end:
            self.page_offset = pos
            header, header_size, head = self._read_header(pos)
            body_start = pos + header_size
            body_end = body_start + header.compressed_page_size
            if body_end > self.end:
                raise self._corrupt(
                    f"a page of {header.compressed_page_size} bytes at {body_start} runs past "
                    f"the end of the column chunk at {self.end}"
                )
            self._check_page_size(header)
            self._page(header, head, header_size, body_start)
            pos = body_end
        return self._finish()

    def run_pages(self, pages: Iterable[tuple[int, Any, bytes | memoryview]]) -> np.ndarray:
        """:meth:`run` over pages read already (see :func:`page_hashes`)."""
        for offset, header, body in pages:
            self.page_offset = offset
            if header.compressed_page_size != len(body):
                raise self._corrupt(
                    f"a page header says {header.compressed_page_size} bytes, its body has "
                    f"{len(body)}"
                )
            self._check_page_size(header)
            self._page(header, body, 0, offset)
        return self._finish()

    def _check_page_size(self, header: Any) -> None:
        if header.uncompressed_page_size > MAX_PAGE_SIZE:
            raise NeedsArrow(f"a page of {header.uncompressed_page_size} bytes")

    def _finish(self) -> np.ndarray:
        """The hashes, once every page is scanned: the chunk checked to hold the values its
        footer entry says, the dictionary entries no page refers to dropped."""
        if self.values_seen != self.num_values:
            raise CorruptFileError(
                f"the column chunk's data pages hold {self.values_seen} values, its footer "
                f"entry says {self.num_values}",
                offset=self.start,
            )
        if self.referenced is not None and not self.all_referenced:
            used = np.flatnonzero(self.referenced)
            if used.size < self.referenced.size:  # the entries no page refers to go
                self.hashes.keep_of_first(self.referenced.size, used)
        return self.hashes.hashes()

    def _read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset``: from the last window read when it holds them, else
        in one read of at least ``self.window`` bytes (up to the chunk's end), kept as the
        window. Locally the window is 0 (each read exact); on object storage, where each read
        is a round trip, a window serves many pages."""
        assert self.source is not None  # run_pages' pages are never read here
        start, data = self._window
        if start <= offset and offset + length <= start + len(data):
            return data[offset - start : offset - start + length]
        data = self.source.read_exact(offset, max(length, min(self.window, self.end - offset)))
        self._window = (offset, data)
        return data[:length] if len(data) > length else data

    def _read_header(self, pos: int) -> tuple[Any, int, bytes]:
        size = PAGE_HEADER_GUESS
        while True:
            head = self._read(pos, min(size, self.end - pos))
            try:
                header, header_size = fmt.parse_page_header(head)
            except CorruptFileError as err:
                # Perhaps only cut short: read more, up to the end of the chunk or the limit.
                if len(head) == self.end - pos or size >= fmt.MAX_PAGE_HEADER_SIZE:
                    raise self._corrupt(err.reason) from err
                size = min(4 * size, fmt.MAX_PAGE_HEADER_SIZE)
                continue
            return header, header_size, head

    def _body(
        self, head: bytes | memoryview, header_size: int, body_start: int, size: int
    ) -> bytes | memoryview:
        if header_size + size <= len(head):
            return head[header_size : header_size + size]
        return self._read(body_start, size)

    def _page(
        self, header: Any, head: bytes | memoryview, header_size: int, body_start: int
    ) -> None:
        kind = header.type
        size = header.compressed_page_size
        if kind == fmt.PageType.DICTIONARY_PAGE:
            self._dictionary_page(header, self._body(head, header_size, body_start, size))
        elif kind == fmt.PageType.DATA_PAGE:
            sub = header.data_page_header
            self.values_seen += sub.num_values
            if self._skippable(sub.encoding):
                return
            body = self._body(head, header_size, body_start, size)
            self._data_page_v1(sub, self._decompress(body, header.uncompressed_page_size))
        elif kind == fmt.PageType.DATA_PAGE_V2:
            sub = header.data_page_header_v2
            self.values_seen += sub.num_values
            if self._skippable(sub.encoding):
                return
            self._data_page_v2(header, sub, self._body(head, header_size, body_start, size))
        elif kind != fmt.PageType.INDEX_PAGE:  # index pages are unused by every writer
            raise NeedsArrow(f"page type {kind}")

    def _skippable(self, encoding: int) -> bool:
        """A dictionary-encoded page once every dictionary entry is referred to: it holds
        nothing new, so it is not even read."""
        if encoding not in _DICTIONARY_ENCODINGS:
            return False
        if self.referenced is None:
            raise self._corrupt("a dictionary-encoded page without a dictionary page")
        return self.all_referenced

    def _dictionary_page(self, header: Any, body: bytes | memoryview) -> None:
        sub = header.dictionary_page_header
        if self.referenced is not None or self.values_seen:
            raise self._corrupt("a dictionary page that is not the chunk's first page")
        if sub.encoding not in (fmt.Encoding.PLAIN, fmt.Encoding.PLAIN_DICTIONARY):
            raise NeedsArrow(f"dictionary page encoding {sub.encoding}")
        data = self._decompress(body, header.uncompressed_page_size)
        # Every entry is hashed now, as the chunk's first hashes; run() drops those of the
        # entries no page refers to, once the pages have said which (mostly none: writers
        # store the values they were given).
        self._hash_plain(data, sub.num_values)
        self.referenced = np.zeros(sub.num_values, dtype=bool)
        # Not "all referenced" when empty: a page of indices into an empty dictionary is read,
        # and is corrupt unless it stores only nulls.
        self.all_referenced = False

    def _data_page_v1(self, sub: Any, data: np.ndarray) -> None:
        """Data page v1 (Encodings.md, "RLE"): repetition levels, then definition levels,
        each an RLE stream behind a 4-byte length, then the values, all compressed together."""
        pos = 0
        if self.max_rep > 0:
            self._check_level_encoding(sub.repetition_level_encoding, "repetition")
            pos = self._skip_levels(data, pos)
        count = sub.num_values
        if self.max_def > 0:
            self._check_level_encoding(sub.definition_level_encoding, "definition")
            end = self._skip_levels(data, pos)
            count = self._count_defined(data[pos + 4 : end], sub.num_values)
            pos = end
        self._values(sub.encoding, data[pos:], count)

    def _data_page_v2(self, header: Any, sub: Any, body: bytes | memoryview) -> None:
        """Data page v2: the levels first and never compressed, their lengths in the header;
        then the values, compressed unless ``is_compressed`` is false."""
        levels = sub.repetition_levels_byte_length + sub.definition_levels_byte_length
        if levels > len(body):
            raise self._corrupt(f"levels of {levels} bytes in a page of {len(body)}")
        if sub.num_nulls > sub.num_values:
            raise self._corrupt(f"{sub.num_nulls} nulls among {sub.num_values} values")
        values = body[levels:]
        size = header.uncompressed_page_size - levels
        if size == 0:
            # No value bytes (a page of nulls): parquet-java writes none at all, not a codec's
            # empty frame (docs/format-notes.md#pages); there is nothing to decompress.
            data = np.empty(0, dtype=np.uint8)
        elif sub.is_compressed is None or sub.is_compressed:
            data = self._decompress(values, size)
        else:
            data = np.frombuffer(values, dtype=np.uint8)
        self._values(sub.encoding, data, sub.num_values - sub.num_nulls)

    def _check_level_encoding(self, encoding: int, which: str) -> None:
        if encoding != fmt.Encoding.RLE:
            raise NeedsArrow(f"{which} levels encoded with {encoding}")

    def _skip_levels(self, data: np.ndarray, pos: int) -> int:
        """The end of the length-prefixed level stream at ``pos``."""
        if pos + 4 > data.size:
            raise self._corrupt("the page ends inside its levels")
        end = pos + 4 + int(data[pos : pos + 4].view("<u4")[0])
        if end > data.size:
            raise self._corrupt(f"levels of {end - pos - 4} bytes in a page of {data.size}")
        return end

    def _count_defined(self, levels: np.ndarray, num_values: int) -> int:
        """How many of the page's ``num_values`` definition levels are the maximum, i.e. how
        many values the page stores."""
        bit_width = self.max_def.bit_length()
        compiled = kernels.compiled
        if compiled is not None:
            _, hits = self._scan_compiled(
                compiled, levels, bit_width, num_values, _NO_MARKS, self.max_def
            )
            return hits
        packed, runs = self._rle_hybrid(levels, bit_width, num_values)
        return int(np.count_nonzero(packed == self.max_def)) + sum(
            n for value, n in runs if value == self.max_def
        )

    # -- values ---------------------------------------------------------------------------

    def _values(self, encoding: int, data: np.ndarray, count: int) -> None:
        if count == 0:
            return
        if encoding == fmt.Encoding.PLAIN:
            self._hash_plain(data, count)
        elif encoding in _DICTIONARY_ENCODINGS:
            self._refer(data, count)
        elif encoding == fmt.Encoding.BYTE_STREAM_SPLIT and self.width is not None:
            # Encodings.md, "Byte Stream Split": byte k of every value, then byte k + 1, ...
            self._check_size(count * self.width, data.size, count)
            rows = data.reshape(self.width, count).T
            _Values(rows=rows).hash_into(self.hashes)
        else:
            raise NeedsArrow(f"data page encoding {encoding}")

    def _hash_plain(self, data: np.ndarray, count: int) -> None:
        """Hash ``count`` PLAIN values (Encodings.md, "Plain"): fixed-width values back to
        back, or for BYTE_ARRAY each value's bytes behind its 4-byte little-endian length,
        which the compiled kernel hashes as it walks them."""
        compiled = kernels.compiled
        if self.width is None and compiled is not None:
            if count > data.size // 4:  # each value has its length: no room for them all
                raise self._values_past_end(count, data.size)
            try:
                used = compiled.xxh64_byte_arrays(data, count, self.hashes.reserve(count))
            except ValueError:
                raise self._values_past_end(count, data.size) from None
            if used != data.size:
                raise _left_over(count, used, data.size)
            self.hashes.commit(count)
            return
        self._plain(data, count).hash_into(self.hashes)

    def _plain(self, data: np.ndarray, count: int) -> _Values:
        """PLAIN values, split on numpy alone."""
        if self.width is not None:
            self._check_size(count * self.width, data.size, count)
            return _Values(rows=data.reshape(count, self.width))
        if data.size >= 4:
            # Values of one length (UUIDs or digests as text, fixed-width codes) form a
            # matrix: check that every length field says so, and hash the rows.
            width = int(data[:4].view("<u4")[0])
            stride = 4 + width
            if data.size == count * stride:
                lengths = np.ndarray((count,), dtype="<u4", buffer=data, strides=(stride,))
                if bool((lengths == width).all()):
                    rows = np.ndarray(
                        (count, width), dtype=np.uint8, buffer=data, offset=4, strides=(stride, 1)
                    )
                    return _Values(rows=rows)
        self.looped += count
        if self.looped > MAX_LOOPED_VALUES:
            raise NeedsArrow("BYTE_ARRAY values of many lengths")
        return _Values(spans=self._split(data, count))

    def _split(self, data: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(data, starts, lengths) of ``count`` length-prefixed BYTE_ARRAY values."""
        raw = data.tobytes()
        unpack = _U32.unpack_from
        starts = [0] * count
        lengths = [0] * count
        pos = 0
        size = len(raw)
        try:
            for i in range(count):
                (length,) = unpack(raw, pos)
                pos += 4
                starts[i] = pos
                lengths[i] = length
                pos += length
        except struct.error:
            pos = size + 1
        if pos > size:
            raise self._values_past_end(count, size)
        if pos != size:
            raise _left_over(count, pos, size)
        return data, np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64)

    def _refer(self, data: np.ndarray, count: int) -> None:
        """Mark the dictionary entries a dictionary-encoded page refers to (Encodings.md,
        "Dictionary Encoding": the index bit width in one byte, then an RLE stream)."""
        assert self.referenced is not None  # _skippable checked
        if data.size == 0:
            raise self._corrupt("a dictionary-encoded page without its index bit width")
        bit_width = int(data[0])
        if bit_width > 32:
            raise self._corrupt(f"dictionary index bit width {bit_width}")
        compiled = kernels.compiled
        if compiled is not None and self.referenced.size:  # (none: every index is out of range)
            newly, _ = self._scan_compiled(
                compiled, data[1:], bit_width, count, self.referenced, _NO_TARGET
            )
            self.referenced_count += newly
            self.all_referenced = self.referenced_count == self.referenced.size
            return
        packed, runs = self._rle_hybrid(data[1:], bit_width, count)
        size = self.referenced.size
        for value, _ in runs:
            if value >= size:
                raise self._bad_index(value)
            self.referenced[value] = True
        if packed.size:
            top = int(packed.max())
            if top >= size:
                raise self._bad_index(top)
            self.referenced[packed] = True
        self.all_referenced = bool(self.referenced.all())

    # -- results and errors ---------------------------------------------------------------

    def _decompress(self, body: bytes | memoryview, size: int) -> np.ndarray:
        if self.codec is None and not self.snappy:
            return np.frombuffer(body, dtype=np.uint8)
        if size < 0:
            raise self._corrupt(f"a page that decompresses to {size} bytes")
        if self.codec is None:
            return self._unsnappy(body, size)
        import pyarrow as pa

        try:
            out = self.codec.decompress(body, decompressed_size=size, asbytes=False)
        except (pa.ArrowException, OSError, ValueError) as err:
            raise self._corrupt(f"cannot decompress a page: {err}") from err
        return np.frombuffer(out, dtype=np.uint8)

    def _unsnappy(self, body: bytes | memoryview, size: int) -> np.ndarray:
        """The page's ``size`` bytes, decompressed by the compiled kernel into the scan's page
        buffer (valid until the next page), which has room for the kernel's slop."""
        compiled = kernels.compiled
        assert compiled is not None
        if self._page_buffer.size < size + SNAPPY_SLOP:
            self._page_buffer = np.empty(size + SNAPPY_SLOP, dtype=np.uint8)
        try:
            compiled.snappy_decompress(body, self._page_buffer, size)
        except ValueError as err:
            reason = str(err).removeprefix("snappy_decompress: ")
            raise self._corrupt(f"cannot decompress a page: {reason}") from None
        return self._page_buffer[:size]

    def _corrupt(self, reason: str) -> CorruptFileError:
        return CorruptFileError(reason, offset=self.page_offset)

    def _values_past_end(self, count: int, size: int) -> CorruptFileError:
        return self._corrupt(f"{count} BYTE_ARRAY values run past the {size} bytes of the page")

    def _check_size(self, need: int, have: int, count: int) -> None:
        """PLAIN and BYTE_STREAM_SPLIT values of a fixed width fill their part of a page."""
        if have < need:
            raise self._corrupt(f"{count} values need {need} bytes, the page has {have}")
        if have > need:
            raise _left_over(count, need, have)

    def _rle_hybrid(
        self, data: np.ndarray, bit_width: int, count: int
    ) -> tuple[np.ndarray, list[tuple[int, int]]]:
        try:
            return rle_hybrid(data, bit_width, count)
        except CorruptFileError as err:
            raise self._corrupt(err.reason) from None

    def _scan_compiled(
        self,
        compiled: kernels.Kernels,
        data: np.ndarray,
        bit_width: int,
        count: int,
        marks: np.ndarray,
        target: int,
    ) -> tuple[int, int]:
        """:func:`rle_hybrid` and what is done with its values, by the compiled kernel in one
        pass: sets ``marks[v]`` for each value ``v`` (a dictionary's referenced entries; not
        with an empty ``marks``), and counts the values equal to ``target`` (the maximum
        definition level). Returns (entries newly marked, that count); raises as
        :func:`rle_hybrid` and :meth:`_refer` do."""
        status, a, b = compiled.rle_scan(data, bit_width, count, marks, target)
        if status == 0:
            return a, b
        if status == 1:
            raise self._corrupt(_short_stream(a, count).reason)
        if status == 2:
            raise self._corrupt(_LONG_RUN_HEADER)
        if status == 3:
            raise self._corrupt(_too_wide(a, bit_width))
        if status == 4:
            raise _cut_short(a, bit_width, b)
        if status == 5:
            raise self._bad_index(a)
        raise AssertionError(f"rle_scan status {status}")

    def _bad_index(self, index: int) -> CorruptFileError:
        assert self.referenced is not None
        return self._corrupt(
            f"dictionary index {index} in a dictionary of {self.referenced.size} entries"
        )


class _Values:
    """Decoded PLAIN values: fixed-width ``rows`` (an (n, width) uint8 array, any strides) or
    variable-length ``spans`` (data, starts, lengths)."""

    __slots__ = ("rows", "spans")

    def __init__(
        self,
        rows: np.ndarray | None = None,
        spans: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.rows = rows
        self.spans = spans

    def hash_into(self, buffer: HashBuffer) -> None:
        """Append the hashes of the values to ``buffer``, written in place."""
        if self.rows is not None:
            out = buffer.reserve(self.rows.shape[0])
            xxh64.hash_rows(self.rows, out)  # copied to lanes a cache-sized part at a time
        else:
            assert self.spans is not None
            data, starts, lengths = self.spans
            out = buffer.reserve(starts.size)
            xxh64.hash_spans(data, starts, lengths, out)  # spans found here: in bounds
        buffer.commit(out.size)


def rle_hybrid(
    data: np.ndarray, bit_width: int, count: int
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The first ``count`` values of an RLE / bit-packing hybrid stream (Encodings.md, "RLE"),
    as the values of its bit-packed runs (in order, uint32) and the (value, length) of its RLE
    runs: what is needed here is which values occur and how often, not their order.

    Only the run headers are walked in Python (a run is up to 512 values for Arrow); the
    bit-packed runs are unpacked together, as one stream (each is whole bytes). At bit width 0
    a bit-packed run holds zeros that take no bytes, so it comes back as a run of 0: a few
    bytes claiming billions of values cost no memory. Raises ``CorruptFileError`` when the
    stream ends before ``count`` values or a run's value is wider than ``bit_width``, and
    :class:`NeedsArrow` for a bit-packed run cut short of its groups.
    """
    raw = data.tobytes()
    size = len(raw)
    value_bytes = (bit_width + 7) // 8
    pieces: list[bytes] = []
    packed_count = 0
    runs: list[tuple[int, int]] = []
    pos = 0
    remaining = count
    while remaining > 0:
        header = 0
        shift = 0
        while True:  # ULEB128
            if pos >= size:
                raise _short_stream(count - remaining, count)
            byte = raw[pos]
            pos += 1
            header |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift > 28:
                raise CorruptFileError(_LONG_RUN_HEADER)
        if header & 1 and bit_width == 0:  # bit-packed zeros take no bytes: a run of zeros
            taken = min((header >> 1) * 8, remaining)
            runs.append((0, taken))
        elif header & 1:  # bit-packed: (header >> 1) groups of 8 values
            taken = min((header >> 1) * 8, remaining)
            need = (taken * bit_width + 7) // 8
            if pos + need > size:
                raise _short_stream(count - remaining, count)
            # Writers write whole groups, the last one padded; a run cut short of its groups
            # is either damage (a run header changed: its values would be read as other ones)
            # or an old Polars writer's quirk, which pyarrow reads. pyarrow decides.
            if pos + (header >> 1) * bit_width > size:
                raise _cut_short(header >> 1, bit_width, size - pos)
            pieces.append(raw[pos : pos + need])
            pos += (header >> 1) * bit_width
            packed_count += taken
        else:  # RLE: one value, repeated (header >> 1) times
            taken = min(header >> 1, remaining)
            if pos + value_bytes > size:
                raise _short_stream(count - remaining, count)
            value = int.from_bytes(raw[pos : pos + value_bytes], "little")
            if value >> bit_width:
                raise CorruptFileError(_too_wide(value, bit_width))
            runs.append((value, taken))
            pos += value_bytes
        remaining -= taken
    return _unpack(b"".join(pieces), bit_width, packed_count), runs


def _left_over(count: int, used: int, size: int) -> NeedsArrow:
    # Bytes after a page's last value: damage (a value count or level length that is wrong, so
    # the values would be misread) or a writer's padding that pyarrow, parquet-java and arrow-rs
    # all ignore. Either way pyarrow decides: it reads the chunk or refuses it.
    return NeedsArrow(f"{count} values take {used} of the {size} bytes of the page's values")


def _short_stream(done: int, count: int) -> CorruptFileError:
    return CorruptFileError(f"an RLE stream that ends after {done} of its {count} values")


_LONG_RUN_HEADER = "an RLE run header longer than 5 bytes"
# The compiled scan's marks when nothing is to be marked (definition levels), and its target
# when nothing is to be counted (dictionary indexes: no value is negative).
_NO_MARKS = np.zeros(0, dtype=np.uint8)
_NO_TARGET = -1


def _too_wide(value: int, bit_width: int) -> str:
    return f"an RLE run of {value}, wider than {bit_width} bits"


def _cut_short(groups: int, bit_width: int, left: int) -> NeedsArrow:
    return NeedsArrow(
        f"a bit-packed run of {groups} groups of {bit_width}-bit values with {left} bytes "
        "left in its stream"
    )


def _unpack(packed: bytes, bit_width: int, count: int) -> np.ndarray:
    """The first ``count`` values of a bit-packed stream (Encodings.md, "RLE", note 1: values
    packed from the least significant bit of each byte), as uint32.

    Every 8 values take exactly ``bit_width`` bytes, so value ``j`` of each group sits at the
    same bit offset in its group: eight strided passes, one per position, each reading an
    unaligned 64-bit word (the value's up to 39 bits from there) and shifting it into place.
    """
    if count == 0 or bit_width == 0:
        return np.zeros(count, dtype=np.uint32)
    groups = -(-count // 8)
    buf = np.zeros(groups * bit_width + 8, dtype=np.uint8)
    buf[: len(packed)] = np.frombuffer(packed, dtype=np.uint8)
    out = np.empty((groups, 8), dtype=np.uint32)
    mask = np.uint64((1 << bit_width) - 1)
    for j in range(8):
        byte, shift = divmod(j * bit_width, 8)
        words = np.ndarray((groups,), dtype="<u8", buffer=buf, offset=byte, strides=(bit_width,))
        out[:, j] = (words >> np.uint64(shift)) & mask
    return out.reshape(-1)[:count]

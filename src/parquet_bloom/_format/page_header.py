"""The header in front of each page of a column chunk.

A column chunk is a sequence of pages, each a Thrift-compact PageHeader followed by
compressed_page_size bytes of body (docs/format-notes.md, pages). Building a Bloom filter
from the pages needs the sizes, the page kind and the encodings, never the statistics, so
those are skipped by the C decoder like the footer's, and the checks here are those a page
reader relies on: sizes and counts that are not negative, and the sub-header of its type.
"""

from __future__ import annotations

from typing import Any

from thrift.protocol.TCompactProtocol import TCompactProtocolAccelerated
from thrift.transport.TTransport import TMemoryBuffer

from parquet_bloom._format import _compact as compact
from parquet_bloom._thrift.parquet import ttypes as _tt
from parquet_bloom.errors import CorruptFileError

# Re-exported generated classes, so other modules never import ``_thrift`` themselves.
PageHeader = _tt.PageHeader
PageType = _tt.PageType
# ColumnMetaData.encoding_stats says which encodings the data pages use; a rewrite reads a chunk
# whose pages are all dictionary-encoded (few distinct values) differently from one that is not.
Encoding = _tt.Encoding

# A page header is tens of bytes plus its statistics, whose min/max can be long strings. Arrow
# C++ starts with 16 KiB and gives up at 16 MiB (ReaderProperties / kDefaultMaxPageHeaderSize);
# we accept what it accepts.
MAX_PAGE_HEADER_SIZE = 16 * 1024 * 1024

_PAGE_HEADER_SPEC = compact.prune(
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
        "data_page_header": compact.prune(
            _tt.DataPageHeader,
            {"num_values", "encoding", "definition_level_encoding", "repetition_level_encoding"},
        ),
        "data_page_header_v2": compact.prune(
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
    limit = min(compact.MAX_THRIFT_STRING_SIZE, len(data))
    accelerated = compact.fastbinary
    try:
        if accelerated is None:
            proto = compact.CompactProtocolReplacingUtf8(
                transport, string_length_limit=limit, container_length_limit=limit
            )
            header = _tt.PageHeader()  # type: ignore[no-untyped-call]
            header.read(proto)  # type: ignore[no-untyped-call]
        else:
            proto = TCompactProtocolAccelerated(
                transport, string_length_limit=limit, container_length_limit=limit
            )
            header = accelerated.decode_compact(None, proto, [_tt.PageHeader, _PAGE_HEADER_SPEC])
    except Exception as err:  # every way bad Thrift fails; see compact.decode_untrusted
        raise CorruptFileError(f"cannot decode a page header: {compact.describe(err)}") from err
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


def encode_page_header(header: Any) -> bytes:
    """Serialize a PageHeader (the fields :func:`parse_page_header` decodes) with the Thrift
    compact protocol: a decrypted page's header re-encoded with its plaintext size."""
    return compact.encode_struct(header, _tt.PageHeader, _tt.PageHeader.thrift_spec)  # type: ignore[attr-defined]

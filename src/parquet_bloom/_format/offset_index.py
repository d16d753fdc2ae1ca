"""The OffsetIndex of the page index: where each data page of a column chunk lies.

A PageLocation's offset is the "offset of the page in the file", an absolute position
(docs/format-notes.md, page index), so a rewrite that moves data pages (removing the Bloom
filters that arrow-rs writes after each row group) must re-encode the OffsetIndex of every
chunk whose pages moved. The ColumnIndex holds no offsets and is always copied as it is, so
it has no codec here.
"""

from __future__ import annotations

from typing import Any

from parquet_bloom._format import _compact as compact
from parquet_bloom._format.footer import MAX_FOOTER_SIZE
from parquet_bloom._thrift.parquet import ttypes as _tt
from parquet_bloom.errors import CorruptFileError

# The generated code attaches thrift_spec after each class body, which mypy cannot see.
_OFFSET_INDEX_SPEC: tuple[Any, ...] = _tt.OffsetIndex.thrift_spec  # type: ignore[attr-defined]


def decode_offset_index(buf: bytes | memoryview) -> Any:
    """Decode a Thrift compact ``OffsetIndex`` (every field, so that it re-encodes losslessly).

    Returns the generated ``OffsetIndex``. Raises ``CorruptFileError`` when the bytes do not
    decode or a page location lacks a required field; an index longer than a footer may be
    is an ``UnsupportedFileError``.
    """
    offset_index = compact.decode_untrusted(
        buf,
        _tt.OffsetIndex,
        _OFFSET_INDEX_SPEC,
        "OffsetIndex",
        "the OffsetIndex",
        max_size=MAX_FOOTER_SIZE,
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
    return compact.encode_struct(offset_index, _tt.OffsetIndex, _OFFSET_INDEX_SPEC)

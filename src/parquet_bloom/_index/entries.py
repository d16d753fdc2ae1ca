"""The entries blob: which file and row group each bit of a size class's slices stands for.

Fixed-width records, one per row group, in the order of the class's slice bits, so that a
lookup reads the records of its candidates only (record ``i`` at ``i * record_size``)::

    file_size      uint64   the file's size when the index was built
    rows           int64    the row group's rows
    modified       int64    the file's modification time in ms (Delta's add action), or -1
    sequence       int64    the file's data sequence number (Iceberg), or -1
    row_group      int32    the row group's ordinal in its file (-1: the whole file)
    path_length    uint16   the bytes of the path that follow
    path           path_width bytes, UTF-8, zero-padded

all little-endian; ``path_width`` (the longest path of the class) is in the blob's properties.
Pure: records in, bytes out, and back.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from parquet_bloom.errors import CorruptFileError

__all__ = ["HEAD_SIZE", "MAX_PATH_BYTES", "Entry", "decode_entry", "encode_entries"]

_HEAD = struct.Struct("<QqqqiH")
HEAD_SIZE = _HEAD.size
# The path_length field's range; object keys are at most 1,024 bytes on S3 and GCS.
MAX_PATH_BYTES = 0xFFFF


@dataclass(frozen=True, order=True)
class Entry:
    """One row group the index knows: its file (``path``, ``file_size`` and the table's identity
    of the file, ``modified`` and ``sequence``, -1 where unknown), ``row_group`` and ``rows``."""

    path: str
    row_group: int
    file_size: int
    rows: int
    modified: int = -1
    sequence: int = -1


def record_size(path_width: int) -> int:
    return HEAD_SIZE + path_width


def encode_entries(entries: Sequence[Entry]) -> tuple[bytes, int]:
    """The blob of ``entries`` and its path width."""
    paths = [e.path.encode("utf-8") for e in entries]
    width = max((len(p) for p in paths), default=0)
    if width > MAX_PATH_BYTES:
        raise ValueError(f"a path of {width} bytes is longer than an index entry can hold")
    out = bytearray()
    for entry, path in zip(entries, paths, strict=True):
        out += _HEAD.pack(
            entry.file_size,
            entry.rows,
            entry.modified,
            entry.sequence,
            entry.row_group,
            len(path),
        )
        out += path.ljust(width, b"\0")
    return bytes(out), width


def decode_entry(record: bytes, path_width: int, *, source: str | None, offset: int) -> Entry:
    """One record (``record_size(path_width)`` bytes read at ``offset``)."""
    if len(record) != record_size(path_width):
        raise CorruptFileError(
            f"an index entry of {len(record)} bytes, not {record_size(path_width)}",
            source=source,
            offset=offset,
        )
    file_size, rows, modified, sequence, row_group, length = _HEAD.unpack_from(record)
    if length > path_width:
        raise CorruptFileError(
            f"an index entry's path of {length} bytes is longer than the class's {path_width}",
            source=source,
            offset=offset,
        )
    raw = record[HEAD_SIZE : HEAD_SIZE + length]
    try:
        path = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptFileError(
            "an index entry's path is not UTF-8", source=source, offset=offset
        ) from None
    return Entry(path, row_group, file_size, rows, modified, sequence)

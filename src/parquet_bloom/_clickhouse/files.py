"""The small files of a MergeTree part that say where its skip indexes are (sans-IO).

- ``checksums.txt`` (``MergeTreeDataPartChecksum.cpp``): the text line
  ``checksums format version: 4`` then one compressed stream of: a varuint count, and for each
  file its name (varuint length, bytes), size (varuint), hash (16 bytes), whether it is
  compressed (one byte) and, when it is, its decompressed size (varuint) and hash. A file's
  hash is CityHash128 v1.0.2 chained over 2048-byte pieces (``HashingWriteBuffer``): each
  piece hashed with the previous result as seed, starting from zero.
- ``skp_idx.packed`` (26.x, ``packed_skip_index_max_bytes``): a u8 version, a u64 member count,
  then per member its name (varuint length, bytes), offset and size (u64 each) and, from
  version 1, a u64 uncompressed size; then the members' bytes.
- Marks (``.mrk*``, compressed ``.cmrk*``): per index granule, the offset of its compressed
  block in the index file, its offset in that block once decompressed and (``.mrk2`` and
  later) a third u64.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from parquet_bloom._clickhouse.blocks import decompress_stream
from parquet_bloom._clickhouse.cityhash import city_hash128_with_seed
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

__all__ = [
    "CHECKSUMS_HEADER",
    "HASHING_BLOCK_SIZE",
    "MAX_FILES",
    "MAX_NAME_LENGTH",
    "FileChecksum",
    "PackedMember",
    "file_hash",
    "parse_checksums",
    "parse_marks",
    "parse_packed",
    "read_varuint",
]

CHECKSUMS_HEADER = b"checksums format version: "
# DBMS_DEFAULT_HASHING_BLOCK_SIZE: HashingWriteBuffer hashes files in pieces of this size.
HASHING_BLOCK_SIZE = 2048
# A part holds a few files a column and an index; a count past this is damage, not a part.
MAX_FILES = 1_000_000
# File names in parts are short (ClickHouse hashes names past 127 bytes into 32 hex digits).
MAX_NAME_LENGTH = 4096
PACKED_VERSIONS = (0, 1)


@dataclass(frozen=True)
class FileChecksum:
    """One file of ``checksums.txt``: its size and hash, and for compressed files the size and
    hash of their decompressed contents."""

    name: str
    file_size: int
    file_hash: tuple[int, int]
    is_compressed: bool
    uncompressed_size: int | None = None
    uncompressed_hash: tuple[int, int] | None = None


@dataclass(frozen=True)
class PackedMember:
    """One member of ``skp_idx.packed``: its name, where its bytes lie in the archive."""

    name: str
    offset: int
    size: int
    uncompressed_size: int | None


def read_varuint(data: bytes, pos: int, name: str, base: int = 0) -> tuple[int, int]:
    """A LEB128 varuint at ``pos`` (at most 9 bytes, as ClickHouse writes them); returns the
    value and the position after it."""
    value = 0
    for i in range(10):
        if pos + i >= len(data):
            raise CorruptFileError("truncated varuint", source=name, offset=base + pos)
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, pos + i + 1
    raise CorruptFileError("varuint longer than 10 bytes", source=name, offset=base + pos)


def file_hash(data: bytes) -> tuple[int, int]:
    """The hash ``checksums.txt`` keeps of a file's bytes."""
    state = (0, 0)
    view = memoryview(data)
    for start in range(0, len(data), HASHING_BLOCK_SIZE):
        state = city_hash128_with_seed(bytes(view[start : start + HASHING_BLOCK_SIZE]), state)
    return state


def _take(data: bytes, pos: int, n: int, name: str, base: int, what: str) -> bytes:
    if n < 0 or pos + n > len(data):
        raise CorruptFileError(
            f"truncated {what}: {n} bytes wanted, {max(len(data) - pos, 0)} left",
            source=name,
            offset=base + pos,
        )
    return data[pos : pos + n]


def _name(data: bytes, pos: int, name: str, base: int) -> tuple[str, int]:
    length, pos = read_varuint(data, pos, name, base)
    if length > MAX_NAME_LENGTH:
        raise CorruptFileError(
            f"file name of {length} bytes, over the {MAX_NAME_LENGTH} limit",
            source=name,
            offset=base + pos,
        )
    raw = _take(data, pos, length, name, base, "file name")
    try:
        return raw.decode("utf-8"), pos + length
    except UnicodeDecodeError as err:
        raise CorruptFileError("file name is not UTF-8", source=name, offset=base + pos) from err


def parse_checksums(data: bytes, name: str = "checksums.txt") -> dict[str, FileChecksum]:
    """The files ``checksums.txt`` lists (format version 4, the one ClickHouse writes)."""
    end = data.find(b"\n")
    if not data.startswith(CHECKSUMS_HEADER) or end < 0:
        raise CorruptFileError("not a checksums.txt: no version line", source=name, offset=0)
    try:
        version = int(data[len(CHECKSUMS_HEADER) : end])
    except ValueError as err:
        raise CorruptFileError("bad checksums.txt version line", source=name, offset=0) from err
    if version != 4:
        raise UnsupportedFileError(
            f"checksums.txt format version {version} is not read here (4 is)", source=name, offset=0
        )
    body, _ = decompress_stream(data[end + 1 :], name, end + 1)
    count, pos = read_varuint(body, 0, name)
    if count > MAX_FILES:
        raise CorruptFileError(f"{count} files listed, over the {MAX_FILES} limit", source=name)
    files: dict[str, FileChecksum] = {}
    for _ in range(count):
        file, pos = _name(body, pos, name, 0)
        size, pos = read_varuint(body, pos, name)
        h = struct.unpack("<QQ", _take(body, pos, 16, name, 0, "file hash"))
        pos += 16
        flag = _take(body, pos, 1, name, 0, "compressed flag")[0]
        pos += 1
        if flag > 1:
            raise CorruptFileError(f"compressed flag {flag}", source=name)
        if flag:
            usize, pos = read_varuint(body, pos, name)
            uh = struct.unpack("<QQ", _take(body, pos, 16, name, 0, "file hash"))
            pos += 16
            files[file] = FileChecksum(file, size, (h[0], h[1]), True, usize, (uh[0], uh[1]))
        else:
            files[file] = FileChecksum(file, size, (h[0], h[1]), False)
    if pos != len(body):
        raise CorruptFileError(
            f"{len(body) - pos} bytes after the last file of checksums.txt", source=name
        )
    return files


def parse_packed(data: bytes, name: str = "skp_idx.packed") -> dict[str, PackedMember]:
    """The members of a ``skp_idx.packed`` archive (all of ``data``), checked to lie inside it."""
    head = _take(data, 0, 9, name, 0, "archive header")
    version, count = struct.unpack("<BQ", head)
    if version not in PACKED_VERSIONS:
        raise UnsupportedFileError(
            f"packed skip index archive version {version}", source=name, offset=0
        )
    if count > MAX_FILES:
        raise CorruptFileError(
            f"{count} members, over the {MAX_FILES} limit", source=name, offset=1
        )
    pos = 9
    members: dict[str, PackedMember] = {}
    width = 24 if version >= 1 else 16
    for _ in range(count):
        at = pos
        member, pos = _name(data, pos, name, 0)
        fields = struct.unpack(f"<{width // 8}Q", _take(data, pos, width, name, 0, "member entry"))
        pos += width
        offset, size = fields[0], fields[1]
        if offset + size > len(data) or offset < 9:
            raise CorruptFileError(
                f"member {member!r} at {offset} of {size} bytes lies outside the archive "
                f"({len(data)} bytes)",
                source=name,
                offset=at,
            )
        members[member] = PackedMember(member, offset, size, fields[2] if version >= 1 else None)
    for m in members.values():
        if m.offset < pos:
            raise CorruptFileError(
                f"member {m.name!r} starts at {m.offset}, inside the archive's table of contents",
                source=name,
                offset=pos,
            )
    return members


def parse_marks(
    data: bytes, name: str, *, compressed: bool, width: int, base: int = 0
) -> list[tuple[int, ...]]:
    """The marks of a marks file: ``width`` u64 fields each (2 for ``.mrk``, 3 for skip
    indexes' ``.mrk2``/``.mrk3``/``.mrk4``)."""
    raw = decompress_stream(data, name, base)[0] if compressed else data
    size = 8 * width
    if len(raw) % size:
        raise CorruptFileError(
            f"marks of {len(raw)} bytes are not whole {size}-byte marks", source=name, offset=base
        )
    flat = struct.unpack(f"<{len(raw) // 8}Q", raw)
    return [flat[i : i + width] for i in range(0, len(flat), width)]

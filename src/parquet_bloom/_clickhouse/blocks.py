"""ClickHouse's compressed files: a sequence of self-describing blocks (sans-IO: bytes in).

Each block (``src/Compression/CompressedReadBufferBase.cpp``) is a 16-byte checksum, the
CityHash128 v1.0.2 of the rest of the block (low then high 64 bits, little-endian), then a
9-byte header: the method byte, the compressed size (u32, header included) and the
decompressed size (u32), then the payload. ``Multiple`` (``CompressionCodecMultiple.cpp``)
chains codecs: its payload is the number of codecs, their method bytes, then the data as the
last codec wrote it, each stage again a 9-byte header and payload, undone from the last codec
to the first.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from parquet_bloom._clickhouse.cityhash import city_hash128
from parquet_bloom._extras import require
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

__all__ = [
    "CHECKSUM_SIZE",
    "HEADER_SIZE",
    "MAX_BLOCK_SIZE",
    "MAX_STREAM_SIZE",
    "METHOD_NAMES",
    "Block",
    "decompress_stream",
]

CHECKSUM_SIZE = 16
HEADER_SIZE = 9  # method u8, compressed size u32 (header included), decompressed size u32
# CompressionMethodByte (src/Compression/CompressionInfo.h).
NONE, LZ4, ZSTD, MULTIPLE = 0x02, 0x82, 0x90, 0x91
METHOD_NAMES = {NONE: "NONE", LZ4: "LZ4", ZSTD: "ZSTD", MULTIPLE: "Multiple"}
# ClickHouse refuses blocks over 1 GiB (DBMS_MAX_COMPRESSED_SIZE, CompressedReadBufferBase); no
# index or marks block comes near it, so a larger size is a damaged header, not a reason to
# allocate.
MAX_BLOCK_SIZE = 1 << 30
# The most decompressed bytes one stream (an index or marks file) may expand to here: index files
# of ClickHouse's defaults are kilobytes to megabytes a part.
MAX_STREAM_SIZE = 1 << 31
# A Multiple codec chains at most this many codecs (ClickHouse's own chains are a few long).
MAX_CHAIN = 16


@dataclass(frozen=True)
class Block:
    """One compressed block of a stream: where it starts in the file, its method, its sizes."""

    offset: int
    method: int
    compressed_size: int
    decompressed_size: int


def _decode(method: int, payload: bytes, size: int, name: str, offset: int) -> bytes:
    if method == NONE:
        out = payload
    elif method == LZ4:
        lz4_block = require("lz4.block", "reading LZ4 blocks of ClickHouse parts")
        try:
            out = lz4_block.decompress(payload, uncompressed_size=size)
        except Exception as err:
            raise CorruptFileError(
                f"LZ4 block does not decompress: {err}", source=name, offset=offset
            ) from err
    elif method == ZSTD:
        zstandard = require("zstandard", "reading ZSTD blocks of ClickHouse parts")
        try:
            out = zstandard.ZstdDecompressor().decompress(payload, max_output_size=size)
        except Exception as err:
            raise CorruptFileError(
                f"ZSTD block does not decompress: {err}", source=name, offset=offset
            ) from err
    elif method == MULTIPLE:
        out = _decode_multiple(payload, size, name, offset)
    else:
        raise UnsupportedFileError(
            f"compression method 0x{method:02x} is not read here (NONE, LZ4, LZ4HC, ZSTD and "
            "chains of them are)",
            source=name,
            offset=offset,
        )
    if len(out) != size:
        raise CorruptFileError(
            f"block decompressed to {len(out)} bytes, its header says {size}",
            source=name,
            offset=offset,
        )
    return out


def _decode_multiple(payload: bytes, size: int, name: str, offset: int) -> bytes:
    if not payload or payload[0] > MAX_CHAIN or len(payload) < 1 + payload[0]:
        raise CorruptFileError(
            "Multiple codec block has a bad codec list", source=name, offset=offset
        )
    count = payload[0]
    methods = payload[1 : 1 + count]
    data = payload[1 + count :]
    for method in reversed(methods):
        if method == MULTIPLE:
            raise CorruptFileError("Multiple codec nested in itself", source=name, offset=offset)
        if len(data) < HEADER_SIZE:
            raise CorruptFileError(
                "Multiple codec stage shorter than its header", source=name, offset=offset
            )
        inner, compressed, decompressed = struct.unpack_from("<BII", data)
        if inner != method:
            raise CorruptFileError(
                f"Multiple codec stage says method 0x{inner:02x}, its list 0x{method:02x}",
                source=name,
                offset=offset,
            )
        if compressed != len(data) or decompressed > MAX_BLOCK_SIZE:
            raise CorruptFileError(
                "Multiple codec stage sizes do not match its block", source=name, offset=offset
            )
        data = _decode(method, data[HEADER_SIZE:], decompressed, name, offset)
    if len(data) != size:
        raise CorruptFileError(
            f"Multiple codec chain gave {len(data)} bytes, the block header says {size}",
            source=name,
            offset=offset,
        )
    return data


def decompress_stream(
    data: bytes, name: str, base_offset: int = 0, max_size: int = MAX_STREAM_SIZE
) -> tuple[bytes, list[Block]]:
    """The decompressed bytes of a whole compressed file ``data`` (``name`` and ``base_offset``,
    where ``data`` starts in its file, locate errors), and its blocks. Every block's checksum is
    verified before its header is trusted."""
    out: list[bytes] = []
    blocks: list[Block] = []
    total = 0
    pos = 0
    view = memoryview(data)
    while pos < len(data):
        at = base_offset + pos
        if len(data) - pos < CHECKSUM_SIZE + HEADER_SIZE:
            raise CorruptFileError(
                f"truncated block: {len(data) - pos} bytes left, a block header takes "
                f"{CHECKSUM_SIZE + HEADER_SIZE}",
                source=name,
                offset=at,
            )
        method, compressed, decompressed = struct.unpack_from("<BII", data, pos + CHECKSUM_SIZE)
        if compressed < HEADER_SIZE or compressed > MAX_BLOCK_SIZE or decompressed > MAX_BLOCK_SIZE:
            raise CorruptFileError(
                f"block header sizes out of range (compressed {compressed}, decompressed "
                f"{decompressed})",
                source=name,
                offset=at,
            )
        end = pos + CHECKSUM_SIZE + compressed
        if end > len(data):
            raise CorruptFileError(
                f"truncated block: it takes {compressed + CHECKSUM_SIZE} bytes, "
                f"{len(data) - pos} are left",
                source=name,
                offset=at,
            )
        low, high = struct.unpack_from("<QQ", data, pos)
        if city_hash128(bytes(view[pos + CHECKSUM_SIZE : end])) != (low, high):
            raise CorruptFileError(
                "block checksum mismatch (CityHash128 of the block)", source=name, offset=at
            )
        total += decompressed
        if total > max_size:
            raise CorruptFileError(
                f"stream expands past {max_size} bytes, the limit", source=name, offset=at
            )
        payload = bytes(view[pos + CHECKSUM_SIZE + HEADER_SIZE : end])
        out.append(_decode(method, payload, decompressed, name, at))
        blocks.append(Block(at, method, compressed, decompressed))
        pos = end
    return b"".join(out), blocks

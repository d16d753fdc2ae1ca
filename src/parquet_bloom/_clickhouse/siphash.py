"""ClickHouse's SipHash-2-4 with 128-bit output (``src/Common/SipHash.h``, keys zero): the hash
that names a part's stand-alone files whose stream names are longer than
``max_file_name_length`` (127 bytes; ``replace_long_file_name_to_hash``). It is not the
reference SipHash128: the state starts without the reference's 0xee, and after the final
rounds the halves are ``v0 ^ v1`` and ``v2 ^ v3``."""

from __future__ import annotations

import struct

__all__ = ["MAX_FILE_NAME_LENGTH", "sip_hash128", "stream_file_name"]

# MergeTreeSettings max_file_name_length: stream names longer than this are hashed.
MAX_FILE_NAME_LENGTH = 127
_M = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M


def _round(v: list[int]) -> None:
    v0, v1, v2, v3 = v
    v0 = (v0 + v1) & _M
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 = (v2 + v3) & _M
    v3 = _rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & _M
    v3 = _rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & _M
    v1 = _rotl(v1, 17) ^ v2
    v2 = _rotl(v2, 32)
    v[:] = [v0, v1, v2, v3]


def sip_hash128(data: bytes) -> tuple[int, int]:
    """ClickHouse's ``sipHash128`` of ``data``: (low, high) 64-bit halves."""
    v = [0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573]
    n = len(data)
    full = n - n % 8
    for i in range(0, full, 8):
        (m,) = struct.unpack_from("<Q", data, i)
        v[3] ^= m
        _round(v)
        _round(v)
        v[0] ^= m
    tail = bytearray(data[full:]) + bytes(7 - (n - full))
    tail.append(n & 0xFF)
    (m,) = struct.unpack("<Q", bytes(tail))
    v[3] ^= m
    _round(v)
    _round(v)
    v[0] ^= m
    v[2] ^= 0xFF
    for _ in range(4):
        _round(v)
    return v[0] ^ v[1], v[2] ^ v[3]


def stream_file_name(stream: str) -> str:
    """The file stem ClickHouse gives a stream (``skp_idx_<escaped name>``): itself, or for a
    name over the limit its sipHash128 as a 128-bit hexadecimal number (high half first)."""
    raw = stream.encode()
    if len(raw) <= MAX_FILE_NAME_LENGTH:
        return stream
    low, high = sip_hash128(raw)
    return f"{high:016x}{low:016x}"

"""Paimon's bloom-filter index written straight from its Java source, one value at a time in
Python integers (the scalar reference the vectorised code is tested against):
FastHash.java (getLongHash, hash64), BloomFilter64.java (the constructor's sizing, addHash,
testHash, BitSet) and BloomFilterFileIndex.java (the serialised bytes)."""

from __future__ import annotations

import datetime as dt
import math
import struct

import xxhash

M64 = (1 << 64) - 1


def long(x: int) -> int:
    """Java ``long`` of an integer (two's complement wrap)."""
    x &= M64
    return x - (1 << 64) if x >> 63 else x


def int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >> 31 else x


def get_long_hash(key: int) -> int:
    """FastHash.getLongHash, line by line; Python's >> on a negative int is arithmetic."""
    key = long(key)
    key = long((~key) + (key << 21))
    key = key ^ (key >> 24)
    key = long((key + (key << 3)) + (key << 8))
    key = key ^ (key >> 14)
    key = long((key + (key << 2)) + (key << 4))
    key = key ^ (key >> 28)
    key = long(key + (key << 31))
    return key & M64


def utf8(text: str) -> bytes:
    """Java's UTF-8 of a string's UTF-16 code units: pairs joined, lone surrogates as ?."""
    units = text.encode("utf-16-be", "surrogatepass")
    codes = [int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)]
    out, i = bytearray(), 0
    while i < len(codes):
        c = codes[i]
        if 0xD800 <= c < 0xDC00 and i + 1 < len(codes) and 0xDC00 <= codes[i + 1] < 0xE000:
            out += chr(0x10000 + ((c - 0xD800) << 10) + (codes[i + 1] - 0xDC00)).encode()
            i += 2
            continue
        out += b"?" if 0xD800 <= c < 0xE000 else chr(c).encode()
        i += 1
    return bytes(out)


def value_hash(value: object, root: str, precision: int | None = None) -> int:
    """FastHash.FastHashVisitor's hash of one value of a type."""
    if root in ("CHAR", "VARCHAR"):
        assert isinstance(value, str)
        return xxhash.xxh64_intdigest(utf8(value))
    if root in ("BINARY", "VARBINARY"):
        assert isinstance(value, bytes)
        return xxhash.xxh64_intdigest(value)
    if root == "FLOAT":
        assert isinstance(value, float)
        if math.isnan(value):
            bits = 0x7FC00000
        else:
            try:
                (bits,) = struct.unpack(">i", struct.pack(">f", value))
            except OverflowError:  # Java's (float) cast of a double beyond float: infinity
                (bits,) = struct.unpack(">i", struct.pack(">f", math.copysign(math.inf, value)))
        return get_long_hash(bits)  # an int, sign-extended
    if root == "DOUBLE":
        assert isinstance(value, float)
        bits = (
            0x7FF8000000000000
            if math.isnan(value)
            else struct.unpack(">q", struct.pack(">d", value))[0]
        )
        return get_long_hash(bits)
    if root == "DATE" and isinstance(value, dt.date):
        return get_long_hash((value - dt.date(1970, 1, 1)).days)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        assert isinstance(value, dt.datetime)
        micros = (value.replace(tzinfo=None) - dt.datetime(1970, 1, 1)) // dt.timedelta(
            microseconds=1
        )
        millis = micros // 1000  # Timestamp.getMillisecond: floored
        return get_long_hash(millis if (precision or 0) <= 3 else micros)
    assert isinstance(value, int)
    return get_long_hash(value)


def java_int_cast(x: float) -> int:
    if math.isnan(x):
        return 0
    return int(max(min(x, 2**31 - 1), -(2**31)))


def sizing(items: int, fpp: float) -> tuple[int, int]:
    """BloomFilter64(long items, double fpp): numBits and numHashFunctions."""
    nb = java_int_cast(-items * math.log(fpp) / (math.log(2) * math.log(2)))
    num_bits = nb + (8 - (nb % 8))
    x = num_bits / items * math.log(2)
    rounded = math.floor(x) + (1 if x - math.floor(x) >= 0.5 else 0)  # Math.round
    return num_bits, max(1, rounded)


def positions(hash64: int, num_hashes: int, num_bits: int) -> list[int]:
    """BloomFilter64.addHash's bit positions."""
    hash1 = int32(hash64)
    hash2 = int32(hash64 >> 32)
    out = []
    for i in range(1, num_hashes + 1):
        combined = int32(hash1 + i * hash2)
        if combined < 0:
            combined = ~combined
        out.append(combined % num_bits)
    return out


def build(hashes: list[int], items: int, fpp: float) -> bytes:
    """BloomFilterFileIndex.Writer: the hash count (big-endian) and the bitset."""
    num_bits, k = sizing(items, fpp)
    bits = bytearray(num_bits // 8)
    for h in hashes:
        for p in positions(h, k, num_bits):
            bits[p >> 3] |= 1 << (p & 7)
    return k.to_bytes(4, "big") + bytes(bits)


def test(payload: bytes, hash64: int) -> bool:
    """BloomFilter64.testHash on a serialised index."""
    k = int.from_bytes(payload[:4], "big")
    bits = payload[4:]
    return all(bits[p >> 3] >> (p & 7) & 1 for p in positions(hash64, k, len(bits) * 8))

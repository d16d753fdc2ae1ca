"""Scalar references written straight from Hudi's (and Hadoop's) Java, in Python ints with Java's
32-bit wrap-around: the vectorised code in parquet_bloom._hudi is tested against these.

- ``murmur``: MurmurHash.hash(data, offset=0, length, seed), line by line;
- ``positions``: HashFunction.hash(key): chained seeds from 0, ``Math.abs(h % maxValue)``;
- ``Dynamic``: InternalDynamicBloomFilter's add (getActiveStandardBF, addRow) key by key;
- ``serialize``: InternalFilter.write + InternalBloomFilter.write (+ the dynamic header).
"""

from __future__ import annotations

import struct

M = 0x5BD1E995


def int32(x: int) -> int:
    """Java's int: the low 32 bits, signed."""
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def urshift(x: int, n: int) -> int:
    """Java's ``>>>`` on an int."""
    return (x & 0xFFFFFFFF) >> n


def java_byte(b: int) -> int:
    return b - 256 if b >= 128 else b


def murmur(data: bytes, seed: int) -> int:
    length = len(data)
    h = int32(seed ^ length)
    len4 = length >> 2
    for i in range(len4):
        i4 = i << 2
        k = java_byte(data[i4 + 3])
        k = int32(k << 8)
        k = k | (data[i4 + 2] & 0xFF)
        k = int32(k << 8)
        k = k | (data[i4 + 1] & 0xFF)
        k = int32(k << 8)
        k = k | (data[i4] & 0xFF)
        k = int32(k * M)
        k = int32(k ^ urshift(k, 24))
        k = int32(k * M)
        h = int32(h * M)
        h = int32(h ^ k)
    left = length - (len4 << 2)
    if left != 0:
        if left >= 3:
            h = int32(h ^ (java_byte(data[length - 3]) << 16))
        if left >= 2:
            h = int32(h ^ (java_byte(data[length - 2]) << 8))
        if left >= 1:
            h = int32(h ^ java_byte(data[length - 1]))
        h = int32(h * M)
    h = int32(h ^ urshift(h, 13))
    h = int32(h * M)
    h = int32(h ^ urshift(h, 15))
    return h


def java_rem(a: int, b: int) -> int:
    """Java's ``%``: truncated toward zero, the sign of the dividend."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def chain(data: bytes, num_hashes: int) -> list[int]:
    out, seed = [], 0
    for _ in range(num_hashes):
        seed = murmur(data, seed)
        out.append(seed)
    return out


def positions(data: bytes, num_hashes: int, vector_size: int) -> list[int]:
    return [abs(java_rem(h, vector_size)) for h in chain(data, num_hashes)]


class Row:
    """InternalBloomFilter: a BitSet of vector_size bits."""

    def __init__(self, vector_size: int, num_hashes: int) -> None:
        self.vector_size = vector_size
        self.num_hashes = num_hashes
        self.bits: set[int] = set()

    def add(self, key: bytes) -> None:
        self.bits.update(positions(key, self.num_hashes, self.vector_size))

    def test(self, key: bytes) -> bool:
        return all(p in self.bits for p in positions(key, self.num_hashes, self.vector_size))

    def write(self) -> bytes:
        out = bytearray((self.vector_size + 7) // 8)
        for i in self.bits:
            out[i >> 3] |= 1 << (i & 7)
        return struct.pack(">iibi", -1, self.num_hashes, 1, self.vector_size) + bytes(out)


class Dynamic:
    """InternalDynamicBloomFilter, key by key."""

    def __init__(self, vector_size: int, num_hashes: int, nr: int, max_nr: int) -> None:
        self.vector_size, self.num_hashes, self.nr, self.max_nr = (
            vector_size,
            num_hashes,
            nr,
            max_nr,
        )
        self.current = 0
        self.reached_max = False
        self.cur_index = 0
        self.matrix = [Row(vector_size, num_hashes)]

    def _active(self) -> Row | None:
        if self.reached_max:
            row = self.matrix[self.cur_index % len(self.matrix)]
            self.cur_index += 1
            return row
        if self.current >= self.nr and len(self.matrix) * self.nr < self.max_nr:
            return None
        if self.current >= self.nr and len(self.matrix) * self.nr >= self.max_nr:
            self.reached_max = True
            return self.matrix[0]
        return self.matrix[-1]

    def add(self, key: bytes) -> None:
        row = self._active()
        if row is None:
            self.matrix.append(Row(self.vector_size, self.num_hashes))
            row = self.matrix[-1]
            self.current = 0
        row.add(key)
        self.current = int32(self.current + 1)

    def test(self, key: bytes) -> bool:
        return any(row.test(key) for row in self.matrix)

    def write(self) -> bytes:
        head = struct.pack(">iibi", -1, self.num_hashes, 1, self.vector_size)
        head += struct.pack(">iii", self.nr, self.current, len(self.matrix))
        return head + b"".join(row.write() for row in self.matrix)

"""A scalar split-block Bloom filter written straight from parquet-format's BloomFilter.md.

Deliberately naive: Python ints, one value at a time, no numpy. The vectorised code in
``parquet_bloom.sbbf`` is tested bit for bit against it.
"""

from __future__ import annotations

import struct

SALT = (
    0x47B6137B,
    0x44974D91,
    0x8824AD5B,
    0xA2B7289D,
    0x705495C7,
    0x2DF1424B,
    0x9EFC4947,
    0x5C6BFB31,
)


def mask(key: int) -> list[int]:
    """docs/format-notes.md#sbbf-layout: one bit per 32-bit lane, chosen by key * SALT[i] >> 27."""
    return [1 << (((key * salt) & 0xFFFFFFFF) >> 27) for salt in SALT]


class ReferenceFilter:
    def __init__(self, num_bytes: int) -> None:
        self.z = num_bytes // 32
        self.words = [0] * (self.z * 8)

    @classmethod
    def from_bytes(cls, bitset: bytes) -> ReferenceFilter:
        ref = cls(len(bitset))
        ref.words = list(struct.unpack(f"<{len(bitset) // 4}I", bitset))
        return ref

    def _block(self, h: int) -> int:
        # "the most significant 32 bits from the hash value are used as the index to select a
        # block": multiplied into range as Arrow C++ and parquet-java do.
        return ((h >> 32) * self.z) >> 32

    def insert(self, h: int) -> None:
        b = self._block(h)
        for i, m in enumerate(mask(h & 0xFFFFFFFF)):
            self.words[b * 8 + i] |= m

    def find(self, h: int) -> bool:
        b = self._block(h)
        return all(self.words[b * 8 + i] & m for i, m in enumerate(mask(h & 0xFFFFFFFF)))

    def to_bytes(self) -> bytes:
        return struct.pack(f"<{len(self.words)}I", *self.words)

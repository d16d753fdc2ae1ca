"""Scalar reference implementations, written straight from ClickHouse's sources, of what the
library vectorises: ``intHash64`` and ``Hash128to64`` (``Common/HashTable/Hash.h``, city.h), and
``BloomFilter::addHashWithSeed``/``findHashWithSeed``/``add``/``find`` on 64-bit words
(``Interpreters/BloomFilter.cpp``)."""

from __future__ import annotations

from parquet_bloom._clickhouse.cityhash import city_hash64_with_seed

M = (1 << 64) - 1
SEEDS = [
    13635471485423070496, 10336109063487487899, 17779957404565211594, 8988612159822229247,
    4954614162757618085, 12980113590177089081, 9263883436177860930, 3656772712723269762,
    10362091744962961274, 7582936617938287249, 15033938188484401405, 18286745649494826751,
    6852245486148412312, 8886056245089344681, 10151472371158292780,
]  # fmt: skip


def int_hash64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M
    x ^= x >> 33
    return x


def hash128_to_64(low: int, high: int) -> int:
    k = 0x9DDFEA08EB382D69
    a = ((low ^ high) * k) & M
    a ^= a >> 47
    b = ((high ^ a) * k) & M
    b ^= b >> 47
    return (b * k) & M


class Words:
    """A filter of ``size`` bytes held as ClickHouse holds it: 64-bit words."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.words = [0] * ((size + 7) // 8)

    def set(self, pos: int) -> None:
        self.words[pos // 64] |= 1 << (pos % 64)

    def get(self, pos: int) -> bool:
        return bool(self.words[pos // 64] >> (pos % 64) & 1)

    def add_hash_with_seed(self, h: int, seed: int) -> None:
        self.set(hash128_to_64(h, seed) % (8 * self.size))

    def find_hash_with_seed(self, h: int, seed: int) -> bool:
        return self.get(hash128_to_64(h, seed) % (8 * self.size))

    def _positions(self, data: bytes, hashes: int, seed: int) -> list[int]:
        h1 = city_hash64_with_seed(data, seed)
        h2 = city_hash64_with_seed(data, (845897321 * seed + 217728422) & M)
        return [((h1 + i * h2 + i * i) & M) % (8 * self.size) for i in range(hashes)]

    def add(self, data: bytes, hashes: int, seed: int) -> None:
        for p in self._positions(data, hashes, seed):
            self.set(p)

    def find(self, data: bytes, hashes: int, seed: int) -> bool:
        return all(self.get(p) for p in self._positions(data, hashes, seed))

    def to_bytes(self) -> bytes:
        return b"".join(w.to_bytes(8, "little") for w in self.words)[: self.size]


def bloom_filter_granule(hashes: set[int], bits_per_row: int, k: int) -> bytes:
    """MergeTreeIndexGranuleBloomFilter of one column: sized by the distinct hashes."""
    f = Words((bits_per_row * len(hashes) + 7) // 8)
    if f.size:
        for h in hashes:
            for seed in SEEDS[:k]:
                f.add_hash_with_seed(h, seed)
    return f.to_bytes()

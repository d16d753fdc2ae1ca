"""The Bloom filters of ClickHouse's skip indexes (``src/Interpreters/BloomFilter.cpp``), and
how each index type sizes and serialises a granule's filters.

``bloom_filter([fpp])``: per index column, a bitset of ``ceil(bits_per_row * N / 8)`` bytes where
N is the granule's largest count of distinct value hashes over its columns (written as a varuint
before the bitsets); ``bits_per_row`` and the hash count k come from the fpp asked through
``calculationBestPractices`` (``BloomFilterHash.h``). A value hash h sets, for each of the first
k of fifteen fixed seeds, bit ``Hash128to64(h, seed) mod bits``.

``tokenbf_v1(size, k, seed)`` / ``ngrambf_v1(n, size, k, seed)``: per index column, exactly
``size`` bytes. A token t sets bits ``(h1 + i*h2 + i*i) mod bits`` for i < k, with
``h1 = CityHash64WithSeed(t, seed)`` and ``h2 = CityHash64WithSeed(t, 845897321*seed +
217728422)``. A query's tokens are put in a filter of the same shape and the granule may match
when its filter holds every bit of that one.

Bits are numbered in little-endian 64-bit words, which on disk is bit ``p % 8`` of byte ``p // 8``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._clickhouse.cityhash import MASK64, city_hash64_with_seed, hash128_to_64_array
from parquet_bloom._clickhouse.tokens import Tokenizer
from parquet_bloom._clickhouse.types import ColumnType, convert_literal, hash_values

__all__ = [
    "BF_HASH_SEEDS",
    "BLOOM_FILTER",
    "DEFAULT_FPP",
    "MAX_FILTER_BYTES",
    "NGRAMBF",
    "TOKENBF",
    "ClickHouseBloomFilter",
    "best_practices",
]

BLOOM_FILTER, TOKENBF, NGRAMBF = "bloom_filter", "tokenbf_v1", "ngrambf_v1"
# bloomFilterIndexCreator: the false-positive rate of bloom_filter() without an argument.
DEFAULT_FPP = 0.025
# BloomFilterHash::bf_hash_seed: the seeds of a bloom_filter index's k hashes (k <= 15).
BF_HASH_SEEDS = np.array(
    [
        13635471485423070496,
        10336109063487487899,
        17779957404565211594,
        8988612159822229247,
        4954614162757618085,
        12980113590177089081,
        9263883436177860930,
        3656772712723269762,
        10362091744962961274,
        7582936617938287249,
        15033938188484401405,
        18286745649494826751,
        6852245486148412312,
        8886056245089344681,
        10151472371158292780,
    ],
    dtype=np.uint64,
)
# BloomFilter.cpp: SEED_GEN_A and SEED_GEN_B derive a token filter's second hash seed.
SEED_GEN_A, SEED_GEN_B = 845897321, 217728422
# MAX_BLOOM_FILTER_SIZE (BloomFilter.cpp): no ClickHouse filter is larger.
MAX_FILTER_BYTES = 1 << 30

# calculationBestPractices' table: the false-positive rate of b bits a row and k hashes.
_TABLE: list[list[float]] = [
    [1.0],
    [1.0, 1.0],
    [1.0, 0.393, 0.400],
    [1.0, 0.283, 0.237, 0.253],
    [1.0, 0.221, 0.155, 0.147, 0.160],
    [1.0, 0.181, 0.109, 0.092, 0.092, 0.101],
    [1.0, 0.154, 0.0804, 0.0609, 0.0561, 0.0578, 0.0638],
    [1.0, 0.133, 0.0618, 0.0423, 0.0359, 0.0347, 0.0364],
    [1.0, 0.118, 0.0489, 0.0306, 0.024, 0.0217, 0.0216, 0.0229],
    [1.0, 0.105, 0.0397, 0.0228, 0.0166, 0.0141, 0.0133, 0.0135, 0.0145],
    [1.0, 0.0952, 0.0329, 0.0174, 0.0118, 0.00943, 0.00844, 0.00819, 0.00846],
    [1.0, 0.0869, 0.0276, 0.0136, 0.00864, 0.0065, 0.00552, 0.00513, 0.00509],
    [1.0, 0.08, 0.0236, 0.0108, 0.00646, 0.00459, 0.00371, 0.00329, 0.00314],
    [1.0, 0.074, 0.0203, 0.00875, 0.00492, 0.00332, 0.00255, 0.00217, 0.00199, 0.00194],
    [1.0, 0.0689, 0.0177, 0.00718, 0.00381, 0.00244, 0.00179, 0.00146, 0.00129, 0.00121, 0.0012],
    [1.0, 0.0645, 0.0156, 0.00596, 0.003, 0.00183, 0.00128, 0.001, 0.000852, 0.000775, 0.000744],
    [
        1.0,
        0.0606,
        0.0138,
        0.005,
        0.00239,
        0.00139,
        0.000935,
        0.000702,
        0.000574,
        0.000505,
        0.00047,
        0.000459,
    ],
    [
        1.0,
        0.0571,
        0.0123,
        0.00423,
        0.00193,
        0.00107,
        0.000692,
        0.000499,
        0.000394,
        0.000335,
        0.000302,
        0.000287,
        0.000284,
    ],
    [
        1.0,
        0.054,
        0.0111,
        0.00362,
        0.00158,
        0.000839,
        0.000519,
        0.00036,
        0.000275,
        0.000226,
        0.000198,
        0.000183,
        0.000176,
    ],
    [
        1.0,
        0.0513,
        0.00998,
        0.00312,
        0.0013,
        0.000663,
        0.000394,
        0.000264,
        0.000194,
        0.000155,
        0.000132,
        0.000118,
        0.000111,
        0.000109,
    ],
    [
        1.0,
        0.0488,
        0.00906,
        0.0027,
        0.00108,
        0.00053,
        0.000303,
        0.000196,
        0.00014,
        0.000108,
        8.89e-05,
        7.77e-05,
        7.12e-05,
        6.79e-05,
        6.71e-05,
    ],
]
_MIN_INDEX = [0, 0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 8, 9, 10, 10, 11, 12, 12, 13, 14]


def best_practices(fpp: float) -> tuple[int, int]:
    """``calculationBestPractices``: (bits a row, hash count) a bloom_filter index of false-positive
    rate ``fpp`` uses. (ClickHouse's table is of C ``long double``; the comparisons here are of
    the same decimal constants as doubles.)"""
    fpp = min(1.0, max(fpp, 0.0))
    if fpp >= 0.283:
        return 2, 2
    for bits in range(1, 20):
        row = _TABLE[bits]
        if row[_MIN_INDEX[bits]] <= fpp:
            for k in range(_MIN_INDEX[bits], 0, -1):
                if row[k] > fpp:
                    return bits, k + 1
    return 19, _MIN_INDEX[19]


def _token_positions(
    tokens: Iterable[bytes], num_hashes: int, seed: int, num_bits: int
) -> NDArray[np.int64]:
    seed2 = (SEED_GEN_A * seed + SEED_GEN_B) & MASK64
    out: list[int] = []
    for t in tokens:
        h1 = city_hash64_with_seed(t, seed)
        h2 = city_hash64_with_seed(t, seed2)
        out.extend(((h1 + i * h2 + i * i) & MASK64) % num_bits for i in range(num_hashes))
    return np.array(out, dtype=np.int64)


class ClickHouseBloomFilter:
    """One column's Bloom filter of one index granule.

    ``kind`` is ``bloom_filter``, ``tokenbf_v1`` or ``ngrambf_v1``; ``column_type`` the type of
    the indexed expression; ``num_hashes`` k; ``seed`` and ``ngram_size`` for the text kinds.
    ``bitset`` holds ClickHouse's bytes (:meth:`to_bytes`)."""

    def __init__(
        self,
        bitset: bytes,
        *,
        kind: str,
        column_type: ColumnType | str,
        num_hashes: int,
        seed: int = 0,
        ngram_size: int | None = None,
        num_rows: int | None = None,
    ) -> None:
        if kind not in (BLOOM_FILTER, TOKENBF, NGRAMBF):
            raise ValueError(f"unknown ClickHouse Bloom filter kind {kind!r}")
        if not 1 <= num_hashes <= (15 if kind == BLOOM_FILTER else 1 << 16):
            raise ValueError(f"num_hashes {num_hashes} out of range")
        if len(bitset) > MAX_FILTER_BYTES:
            raise ValueError(f"a filter of {len(bitset)} bytes is over ClickHouse's 1 GiB limit")
        self.kind = kind
        self.column_type = (
            column_type if isinstance(column_type, ColumnType) else _parse(column_type)
        )
        self.num_hashes = num_hashes
        self.seed = seed
        self.ngram_size = ngram_size
        self.num_rows = num_rows  # bloom_filter: the N the granule records
        self._bits = np.unpackbits(np.frombuffer(bytes(bitset), dtype=np.uint8), bitorder="little")
        self._bytes = bytes(bitset)
        self.tokenizer = (
            Tokenizer(ngram_size if kind == NGRAMBF else None) if kind != BLOOM_FILTER else None
        )

    # -- bytes --------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The filter's bytes as the granule stores them."""
        return self._bytes

    @classmethod
    def from_bytes(cls, data: bytes, **kwargs: Any) -> ClickHouseBloomFilter:
        """The filter of ``data`` (see the constructor for the keyword arguments)."""
        return cls(data, **kwargs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ClickHouseBloomFilter):
            return NotImplemented
        return (self.kind, self.num_hashes, self.seed, self.ngram_size, self._bytes) == (
            other.kind,
            other.num_hashes,
            other.seed,
            other.ngram_size,
            other._bytes,
        )

    def __hash__(self) -> int:
        return hash((self.kind, self._bytes))

    def __repr__(self) -> str:
        return (
            f"ClickHouseBloomFilter(kind={self.kind!r}, column_type='{self.column_type}', "
            f"num_bytes={self.num_bytes}, num_hashes={self.num_hashes})"
        )

    @property
    def num_bytes(self) -> int:
        return len(self._bytes)

    @property
    def num_bits(self) -> int:
        return 8 * len(self._bytes)

    # -- building -----------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        values: Iterable[Any],
        *,
        kind: str,
        column_type: ColumnType | str,
        fpp: float = DEFAULT_FPP,
        num_bytes: int | None = None,
        num_hashes: int | None = None,
        seed: int = 0,
        ngram_size: int | None = None,
        num_rows: int | None = None,
    ) -> ClickHouseBloomFilter:
        """The filter ClickHouse writes for a granule's ``values`` of one column (rows; arrays'
        elements are taken; a NULL is hashed as its nested default). bloom_filter: sized by the
        distinct hashes, or by ``num_rows`` when given (the granule's N of a multi-column
        index); text kinds: ``num_bytes`` (the index's ``size``) and ``num_hashes``."""
        t = column_type if isinstance(column_type, ColumnType) else _parse(column_type)
        if kind == BLOOM_FILTER:
            bits_per_row, k = best_practices(fpp)
            hashes = np.unique(element_hashes(values, t))
            n = len(hashes) if num_rows is None else num_rows
            size = (bits_per_row * n + 7) // 8
            bits = np.zeros(8 * size, dtype=np.uint8)
            if size and len(hashes):
                bits[_bf_positions(hashes, k, 8 * size)] = 1
            return cls(
                np.packbits(bits, bitorder="little").tobytes(),
                kind=kind,
                column_type=t,
                num_hashes=k,
                num_rows=n,
            )
        if num_bytes is None or num_hashes is None:
            raise ValueError("a token or n-gram filter needs num_bytes and num_hashes")
        tok = Tokenizer(ngram_size if kind == NGRAMBF else None)
        bits = np.zeros(8 * num_bytes, dtype=np.uint8)
        tokens: list[bytes] = []
        for v in _strings(values, t):
            tokens.extend(tok.tokens(v))
        if tokens:
            bits[_token_positions(tokens, num_hashes, seed, 8 * num_bytes)] = 1
        return cls(
            np.packbits(bits, bitorder="little").tobytes(),
            kind=kind,
            column_type=t,
            num_hashes=num_hashes,
            seed=seed,
            ngram_size=ngram_size,
        )

    # -- probing ------------------------------------------------------------------------------

    def contains_hashes(self, hashes: NDArray[np.uint64]) -> NDArray[np.bool_]:
        """bloom_filter: whether each value hash may be in the filter."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        if self.num_bits == 0:
            return np.zeros(len(hashes), dtype=bool)
        pos = _bf_positions_matrix(hashes, self.num_hashes, self.num_bits)
        return np.asarray(self._bits[pos].all(axis=1), dtype=bool)

    def contains_tokens(self, tokens: list[bytes]) -> bool:
        """Text kinds: whether the filter holds every bit the ``tokens`` set (the query filter's
        ``contains``); no tokens: True."""
        if not tokens:
            return True
        return bool(
            self._bits[_token_positions(tokens, self.num_hashes, self.seed, self.num_bits)].all()
        )

    def might_contain(self, value: Any) -> bool:
        """Whether a row equal to ``value`` may be in the granule (a text filter: whether the
        tokens of ``value`` may all be there)."""
        return bool(self.might_contain_many([value])[0])

    def might_contain_many(self, values: Iterable[Any]) -> NDArray[np.bool_]:
        """:meth:`might_contain` of each value; a value not convertible to the column's type
        (for example out of range) cannot be in it: False."""
        values = list(values)
        if self.kind == BLOOM_FILTER:
            t = self.column_type.primitive
            converted = [convert_literal(v, t, exact=False) for v in values]
            ok = np.array([c is not None for c in converted], dtype=bool)
            out = np.zeros(len(values), dtype=bool)
            if ok.any():
                hashes = hash_values([c for c in converted if c is not None], t)
                out[ok] = self.contains_hashes(hashes)
            return out
        assert self.tokenizer is not None
        return np.array(
            [self.contains_tokens(self.tokenizer.tokens(_to_bytes(v))) for v in values], dtype=bool
        )

    # -- fill ---------------------------------------------------------------------------------

    @property
    def bits_set(self) -> int:
        return int(self._bits.sum())

    def fill(self) -> float:
        """The fraction of bits set."""
        return self.bits_set / self.num_bits if self.num_bits else 1.0

    def estimate_ndv(self) -> float:
        """The distinct values (bloom_filter) or tokens (text kinds) the filter holds, by the
        fraction of bits set (Swamidass and Baldi); ``inf`` when every bit is set."""
        m, x = self.num_bits, self.bits_set
        if m == 0:
            return 0.0
        if x >= m:
            return math.inf
        return -m / self.num_hashes * math.log1p(-x / m)

    def fpp(self) -> float:
        """The false-positive rate of one probe at the current fill: fill ** k."""
        return float(self.fill() ** self.num_hashes)


def _parse(text: str) -> ColumnType:
    from parquet_bloom._clickhouse.types import parse_type

    return parse_type(text)


def _to_bytes(v: Any) -> bytes:
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v)
    raise TypeError(f"a token or n-gram filter holds strings, not {type(v).__name__}")


def _strings(values: Iterable[Any], t: ColumnType) -> list[bytes]:
    """The strings a text index takes of a column's rows: arrays' elements; FixedString values
    padded to their width (the column's bytes); a NULL as the empty string."""
    out: list[bytes] = []
    prim = t.primitive
    for v in values:
        items = v if t.is_array else [v]
        for item in items:
            b = b"" if item is None else _to_bytes(item)
            if prim.name == "FixedString":
                b = b.ljust(int(prim.args[0]), b"\0")
            out.append(b)
    return out


def element_hashes(values: Iterable[Any], t: ColumnType) -> NDArray[np.uint64]:
    """The bloom_filter hashes of a column's rows (``hashWithColumn``): an array row gives its
    elements' hashes; rows whose arrays are all empty give the single hash 0; a NULL row its
    nested default's."""
    prim = t.primitive
    flat: list[Any] = []
    rows = 0
    for v in values:
        rows += 1
        if t.is_array:
            flat.extend(v)
        else:
            flat.append(v)
    if t.is_array and rows and not flat:
        return np.zeros(1, dtype=np.uint64)
    default = convert_literal(b"" if prim.is_string else 0, prim)
    converted = []
    for v in flat:
        c = default if v is None else convert_literal(v, prim, exact=False)
        if c is None:
            raise ValueError(f"{v!r} is not a value of type {prim}")
        converted.append(c)
    return hash_values(converted, prim) if converted else np.zeros(0, dtype=np.uint64)


def _bf_positions_matrix(hashes: NDArray[np.uint64], k: int, num_bits: int) -> NDArray[np.int64]:
    mixed = hash128_to_64_array(hashes[:, None], BF_HASH_SEEDS[None, :k])
    return np.asarray(mixed % np.uint64(num_bits), dtype=np.int64)


def _bf_positions(hashes: NDArray[np.uint64], k: int, num_bits: int) -> NDArray[np.int64]:
    return _bf_positions_matrix(hashes, k, num_bits).ravel()

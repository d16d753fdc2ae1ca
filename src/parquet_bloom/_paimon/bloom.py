"""Paimon's ``BloomFilter64``: the payload of a ``bloom-filter`` file index.

The payload (paimon-common ``fileindex/bloomfilter/BloomFilterFileIndex.java``) is the number
of hash functions as a big-endian int32, then the bitset's bytes; bit ``i`` is byte ``i >> 3``,
mask ``1 << (i & 7)`` (``BloomFilter64.BitSet``). A 64-bit hash sets ``k`` bits: with ``h1`` its
low and ``h2`` its high 32 bits as Java ints, for ``i`` in ``1..k`` the bit
``c % numBits`` where ``c = h1 + i * h2`` (int32, wrapping), flipped (``~c``) when negative
(``BloomFilter64.addHash`` / ``testHash``). Sizing (the ``BloomFilter64(items, fpp)``
constructor): ``nb = (int) (-items * ln(fpp) / (ln 2 * ln 2))``, ``numBits = nb + (8 - nb % 8)``
(always 1 to 8 bits more), ``k = max(1, Math.round(numBits / items * ln 2))``.
docs/paimon.md#bloomfilter64 has the details and the sources.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._java import INT_MAX, java_int
from parquet_bloom._paimon.fasthash import PaimonType, hash_values, parse_type
from parquet_bloom.errors import CorruptFileError

__all__ = [
    "DEFAULT_FPP",
    "DEFAULT_ITEMS",
    "MAX_BITSET_BYTES",
    "MAX_NUM_HASHES",
    "BloomFilter64",
    "FilterSize",
    "filter_size",
]

# BloomFilterFileIndex's defaults: options ``items`` and ``fpp`` of the index.
DEFAULT_ITEMS = 1_000_000
DEFAULT_FPP = 0.1
# numBits is a Java int: no bitset Paimon writes or reads has 2**31 bits or more.
MAX_BITSET_BYTES = (INT_MAX + 1) // 8 - 1
# Paimon's sizing gives at most ~1,076 hash functions (one item at the smallest double fpp:
# numBits 1,552, k = round(1552 x ln 2)); a stored count far above that is corruption, and
# probing with it would cost its count per value.
MAX_NUM_HASHES = 2048
# Bit positions computed at once (8 bytes each): values are probed or added in chunks of
# this many positions' worth.
_POSITIONS = 1 << 20


class FilterSize(NamedTuple):
    """A filter's size by Paimon's rule: bits (a multiple of 8) and hash functions."""

    num_bits: int
    num_hashes: int


def _java_round(x: float) -> int:
    """Java's ``Math.round(double)``: the closest integer, ties towards positive infinity."""
    low = math.floor(x)
    return int(low + 1 if x - low >= 0.5 else low)


def filter_size(items: int, fpp: float) -> FilterSize:
    """The bits and hash count Paimon's ``BloomFilter64(items, fpp)`` gives, in Java's double
    arithmetic (the same IEEE operations, in the same order). The defaults (1,000,000 items,
    fpp 0.1) give 4,792,536 bits and 3 hashes."""
    if isinstance(items, bool) or not isinstance(items, int | np.integer):
        raise TypeError(f"items must be an integer, not {type(items).__name__}")
    if not 0 < items <= INT_MAX:
        raise ValueError(f"items must be from 1 to {INT_MAX} (a Java int), not {items}")
    if isinstance(fpp, bool) or not isinstance(fpp, int | float | np.floating):
        raise TypeError(f"fpp must be a number, not {type(fpp).__name__}")
    if not 0.0 < fpp < 1.0:
        raise ValueError(f"fpp must be between 0 and 1, not {fpp}")
    n = int(items)
    nb = java_int(float(-n) * math.log(fpp) / (math.log(2) * math.log(2)))
    num_bits = nb + (8 - nb % 8)
    if num_bits > INT_MAX:
        raise ValueError(
            f"{items} items at fpp {fpp} need {num_bits} bits, more than Paimon's Java int holds"
        )
    num_hashes = max(1, _java_round(num_bits / n * math.log(2)))
    return FilterSize(num_bits, num_hashes)


def positions(hashes: NDArray[np.uint64], num_hashes: int, num_bits: int) -> NDArray[np.int64]:
    """The bit each of ``num_hashes`` hash functions picks for each 64-bit hash, shape
    ``(len(hashes), num_hashes)`` (``BloomFilter64.addHash``)."""
    h = np.asarray(hashes, dtype=np.uint64)
    h1 = (h & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32).astype(np.int64)
    h2 = (h >> np.uint64(32)).astype(np.uint32).view(np.int32).astype(np.int64)
    i = np.arange(1, num_hashes + 1, dtype=np.int64)
    combined = (h1[:, None] + i[None, :] * h2[:, None]).astype(np.uint32).view(np.int32)
    combined = np.where(combined < 0, ~combined, combined).astype(np.int64)
    return combined % np.int64(num_bits)


def _infer_type(values: Any) -> PaimonType:
    """The type to hash ``values`` by when none was given: integers (every integer type and
    DATE and TIME hash alike), strings, bytes, dates and times; floats and timestamps need
    the column's type (FLOAT and DOUBLE hash differently, timestamps by their precision)."""
    if type(values).__module__.startswith("pyarrow") and hasattr(values, "type"):
        import pyarrow as pa

        typ = values.type
        if pa.types.is_integer(typ):
            return parse_type("BIGINT")
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            return parse_type("STRING")
        if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
            return parse_type("BYTES")
        if pa.types.is_fixed_size_binary(typ):
            return parse_type("BYTES")
        if pa.types.is_date(typ):
            return parse_type("DATE")
        if pa.types.is_time(typ):
            return parse_type("TIME")
        raise TypeError(f"give data_type: Arrow {typ} values do not say how Paimon hashed them")
    if isinstance(values, np.ndarray) and values.dtype.kind != "O":
        kind = values.dtype.kind
        if kind in "iu":
            return parse_type("BIGINT")
        if kind == "U":
            return parse_type("STRING")
        if kind == "S":
            return parse_type("BYTES")
        raise TypeError(
            f"give data_type: numpy {values.dtype} values do not say how Paimon hashed them"
        )
    items = [values] if isinstance(values, str | bytes | int | float) else list(values)
    sample = next((v for v in items if v is not None), None)
    if isinstance(sample, bool):
        raise TypeError("Paimon has no bloom-filter index on BOOLEAN columns")
    if isinstance(sample, int | np.integer) or sample is None:
        return parse_type("BIGINT")
    if isinstance(sample, str):
        return parse_type("STRING")
    if isinstance(sample, bytes | bytearray | memoryview):
        return parse_type("BYTES")
    if isinstance(sample, dt.date) and not isinstance(sample, dt.datetime):
        return parse_type("DATE")
    if isinstance(sample, dt.time):
        return parse_type("TIME")
    raise TypeError(
        f"give data_type: {type(sample).__name__} values do not say how Paimon hashed them "
        "(FLOAT and DOUBLE hash differently; timestamps by their precision)"
    )


class BloomFilter64:
    """One Paimon ``bloom-filter`` index: ``num_hashes`` hash functions over ``num_bits`` bits.

    Read one from a :class:`FileIndex` (``index.bloom_filter(column)``) or with
    :meth:`from_bytes`; build one with :func:`parquet_bloom.paimon.build_bloom_filter` or
    :meth:`from_size`. ``data_type`` is the column's Paimon type (``"INT"``,
    ``"STRING"``, ``"TIMESTAMP(6)"``, ...), which says how values are hashed; without it,
    integers, strings, bytes, dates and times can still be probed (they hash alike whatever
    their exact type), floats and timestamps cannot.
    """

    def __init__(
        self, num_bits: int, num_hashes: int, data_type: str | PaimonType | None = None
    ) -> None:
        """An empty filter of ``num_bits`` bits (a multiple of 8) and ``num_hashes`` hash
        functions."""
        if not 8 <= num_bits <= MAX_BITSET_BYTES * 8 or num_bits % 8:
            raise ValueError(
                f"num_bits must be a multiple of 8 from 8 to {MAX_BITSET_BYTES * 8}, not {num_bits}"
            )
        if not 1 <= num_hashes <= MAX_NUM_HASHES:
            raise ValueError(f"num_hashes must be from 1 to {MAX_NUM_HASHES}, not {num_hashes}")
        self.num_hashes = int(num_hashes)
        self.data_type = None if data_type is None else parse_type(data_type)
        if self.data_type is not None and self.data_type.kind is None:
            raise ValueError(f"Paimon has no bloom-filter index on {self.data_type.root} columns")
        self._bits = np.zeros(num_bits // 8, dtype=np.uint8)

    @classmethod
    def from_size(
        cls, items: int, fpp: float, data_type: str | PaimonType | None = None
    ) -> BloomFilter64:
        """An empty filter sized as Paimon sizes one for ``items`` at ``fpp``
        (:func:`filter_size`)."""
        size = filter_size(items, fpp)
        return cls(size.num_bits, size.num_hashes, data_type)

    @classmethod
    def from_bytes(
        cls,
        payload: bytes | bytearray | memoryview,
        data_type: str | PaimonType | None = None,
        *,
        source: str | None = None,
        column: str | None = None,
        offset: int | None = None,
    ) -> BloomFilter64:
        """A filter from its payload (the hash count, then the bitset). Raises
        CorruptFileError, located by ``source``, ``column`` and ``offset``, for a payload with
        no bitset or a hash count out of 1..MAX_NUM_HASHES."""
        data = bytes(payload)
        if len(data) < 5:
            raise CorruptFileError(
                f"a bloom-filter index of {len(data)} bytes: it needs a 4-byte hash count and "
                "a bitset",
                source=source,
                column=column,
                offset=offset,
            )
        if len(data) - 4 > MAX_BITSET_BYTES:
            raise CorruptFileError(
                f"a bitset of {len(data) - 4} bytes: Paimon's bit count is a Java int",
                source=source,
                column=column,
                offset=offset,
            )
        num_hashes = int.from_bytes(data[:4], "big", signed=True)
        if not 1 <= num_hashes <= MAX_NUM_HASHES:
            raise CorruptFileError(
                f"a bloom-filter index with {num_hashes} hash functions "
                f"(Paimon writes 1 to ~1,100; the limit here is {MAX_NUM_HASHES})",
                source=source,
                column=column,
                offset=offset,
            )
        f = cls.__new__(cls)
        f.num_hashes = num_hashes
        f.data_type = None if data_type is None else parse_type(data_type)
        f._bits = np.frombuffer(data, dtype=np.uint8, offset=4).copy()
        return f

    def to_bytes(self) -> bytes:
        """The payload as Paimon writes it: the hash count (big-endian int32), the bitset."""
        return self.num_hashes.to_bytes(4, "big") + self._bits.tobytes()

    # -- what it holds ------------------------------------------------------------------------

    @property
    def num_bits(self) -> int:
        return int(self._bits.size) * 8

    @property
    def num_bytes(self) -> int:
        """The payload's size: the hash count and the bitset."""
        return 4 + int(self._bits.size)

    @property
    def bits(self) -> NDArray[np.uint8]:
        """A read-only view of the bitset: bit ``i`` is byte ``i >> 3``, mask ``1 << (i & 7)``."""
        view = self._bits.view()
        view.flags.writeable = False
        return view

    def bits_set(self) -> int:
        return int(np.unpackbits(self._bits).sum(dtype=np.int64))

    def fraction_set(self) -> float:
        return self.bits_set() / self.num_bits

    def estimate_items(self) -> float:
        """The distinct values added, estimated from the bits set (Swamidass and Baldi):
        ``-m / k x ln(1 - X / m)``; infinite when every bit is set."""
        m, x = self.num_bits, self.bits_set()
        if x >= m:
            return math.inf
        return -m / self.num_hashes * math.log1p(-x / m)

    def fpp(self, items: float | None = None) -> float:
        """The chance that a value never added passes: ``(1 - e^(-k n / m))^k`` for ``items``
        distinct values (default: :meth:`estimate_items`)."""
        n = self.estimate_items() if items is None else float(items)
        if math.isinf(n):
            return 1.0
        return float((-math.expm1(-self.num_hashes * n / self.num_bits)) ** self.num_hashes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BloomFilter64):
            return NotImplemented
        return self.num_hashes == other.num_hashes and bool(np.array_equal(self._bits, other._bits))

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        typ = f", {self.data_type}" if self.data_type is not None else ""
        return f"BloomFilter64({self.num_bits} bits, {self.num_hashes} hashes{typ})"

    # -- hashing ------------------------------------------------------------------------------

    def hash_values(self, values: Any) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
        """The 64-bit hashes of ``values`` by this filter's type, and which are not null."""
        typ = self.data_type if self.data_type is not None else _infer_type(values)
        return hash_values(values, typ)

    # -- adding -------------------------------------------------------------------------------

    def insert(self, values: Any) -> None:
        """Add values (one, a sequence, a numpy or an Arrow array); nulls are skipped, as
        Paimon's writer skips them."""
        hashes, valid = self.hash_values(values)
        self.insert_hashes(hashes[valid])

    def insert_hashes(self, hashes: Any) -> None:
        """Add 64-bit hashes (``uint64``, or Java ``long`` values)."""
        h = np.asarray(hashes).astype(np.uint64, copy=False).ravel()
        step = max(1, _POSITIONS // self.num_hashes)
        for start in range(0, h.size, step):
            where = positions(h[start : start + step], self.num_hashes, self.num_bits).ravel()
            np.bitwise_or.at(self._bits, where >> 3, (1 << (where & 7)).astype(np.uint8))

    # -- probing ------------------------------------------------------------------------------

    def might_contain(self, value: Any) -> bool:
        """False when ``value`` was certainly never added; True when it may have been (and for
        None: Paimon's reader keeps a file for a null literal)."""
        return bool(self.might_contain_many([value])[0])

    def might_contain_many(self, values: Any) -> NDArray[np.bool_]:
        """:meth:`might_contain` of every value, vectorised."""
        hashes, valid = self.hash_values(values)
        return self.might_contain_hashes(hashes) | ~valid

    def might_contain_hashes(self, hashes: Any) -> NDArray[np.bool_]:
        """:meth:`might_contain_many` of values already hashed (64-bit hashes)."""
        h = np.asarray(hashes).astype(np.uint64, copy=False).ravel()
        found = np.empty(h.size, dtype=bool)
        step = max(1, _POSITIONS // self.num_hashes)
        for start in range(0, h.size, step):
            where = positions(h[start : start + step], self.num_hashes, self.num_bits)
            bit = (self._bits[where >> 3] >> (where & 7).astype(np.uint8)) & np.uint8(1)
            found[start : start + step] = bit.astype(bool).all(axis=1)
        return found

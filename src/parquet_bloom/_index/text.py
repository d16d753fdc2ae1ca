"""Token and n-gram filters in a Bloom index: per row group of a string column, the Bloom
filter ClickHouse's ``tokenbf_v1`` or ``ngrambf_v1`` skip index would write for a granule of the
same values (the same bytes, :mod:`parquet_bloom._clickhouse.filters`), bit-sliced so that a
lookup of a token reads ``hashes`` slices of N bits (docs/index.md#token-and-n-gram-filters).

A filter of ``size`` bytes has ``8 * size`` bit positions; a token ``t`` sets positions
``(h1 + i*h2 + i*i) mod (8 * size)`` for ``i < hashes``, ``h1 = CityHash64WithSeed(t, seed)``,
``h2 = CityHash64WithSeed(t, 845897321 * seed + 217728422)``. Slice ``p`` is the N-bit string of
position ``p`` over the class's row groups, at byte ``p * ceil(N / 8)`` of the blob, bit ``i``
in bit ``i % 8`` of byte ``i // 8``. A row group may hold a value with tokens ``T`` when every
position of every token of ``T`` is set: the AND of their slices.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from parquet_bloom._clickhouse.cityhash import (
    MASK64,
    SHORT_MAX,
    city_hash64_with_seed,
    city_hash64_with_seed_short,
)
from parquet_bloom._clickhouse.filters import MAX_FILTER_BYTES, NGRAMBF, SEED_GEN_A, SEED_GEN_B
from parquet_bloom._clickhouse.filters import TOKENBF as TOKENBF
from parquet_bloom._clickhouse.tokens import Tokenizer

__all__ = [
    "DEFAULT_NGRAM",
    "NGRAMBF",
    "TOKENBF",
    "HashCache",
    "TextFilter",
    "TextSpec",
    "bitset",
    "hash_pairs",
    "is_text_type",
    "positions",
    "row_group_pairs",
    "row_group_tokens",
    "size_for",
    "text_slices",
]

# The n of an ngrambf filter when none is given: ClickHouse's documentation's example.
DEFAULT_NGRAM = 3
# A token of ``tokenbf_v1``: a run of ASCII letters and digits and bytes 0x80 and up (every other
# ASCII byte separates tokens), as ClickHouse's SplitByNonAlpha tokenizer splits.
_TOKEN = re.compile(rb"[0-9A-Za-z\x80-\xff]+")
_KINDS = {"tokenbf": TOKENBF, TOKENBF: TOKENBF, "ngrambf": NGRAMBF, NGRAMBF: NGRAMBF}


@dataclass(frozen=True)
class TextFilter:
    """A token (``kind="tokenbf"``) or n-gram (``"ngrambf"``, ``n`` code points, default 3)
    filter of a string ``column`` to build into an index, per row group, as ClickHouse's
    ``tokenbf_v1(size, hashes, seed)`` / ``ngrambf_v1(n, size, hashes, seed)`` would for a
    granule of the same values. ``size`` (bytes) and ``hashes`` default to a size for the
    largest row group's distinct tokens at false-positive rate ``fpp`` (default 1/N for N row
    groups, at most 1 %)."""

    column: str
    kind: str = "tokenbf"
    n: int | None = None
    size: int | None = None
    hashes: int | None = None
    seed: int = 0
    fpp: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise ValueError("a text filter needs a column name")
        if self.kind not in _KINDS:
            raise ValueError(f'a text filter\'s kind is "tokenbf" or "ngrambf", not {self.kind!r}')
        if _KINDS[self.kind] == TOKENBF and self.n is not None:
            raise ValueError("n is the n-gram length of an ngrambf filter; tokenbf has none")
        if self.n is not None and not 1 <= self.n <= 8:
            raise ValueError(f"n must be 1 to 8 code points, not {self.n}")
        if self.size is not None and not 1 <= self.size <= MAX_FILTER_BYTES:
            raise ValueError(f"size must be 1 byte to 1 GiB, not {self.size}")
        if self.hashes is not None and not 1 <= self.hashes <= 64:
            raise ValueError(f"hashes must be 1 to 64, not {self.hashes}")
        if not 0 <= self.seed <= MASK64:
            raise ValueError(f"seed must be an unsigned 64-bit integer, not {self.seed}")
        if self.fpp is not None and not 0.0 < self.fpp < 1.0:
            raise ValueError(f"fpp must be between 0 and 1, not {self.fpp}")

    @property
    def ngram(self) -> int | None:
        """The n-gram length (None: tokens)."""
        if _KINDS[self.kind] == TOKENBF:
            return None
        return DEFAULT_NGRAM if self.n is None else self.n


@dataclass(frozen=True)
class TextSpec:
    """A text filter's shape, as one index holds it: ``kind`` (``tokenbf_v1``/``ngrambf_v1``),
    ``n`` (None for tokens), ``size`` in bytes, ``hashes``, ``seed``."""

    kind: str
    n: int | None
    size: int
    hashes: int
    seed: int

    @property
    def key(self) -> str:
        """The ClickHouse index type it equals, e.g. ``tokenbf_v1(4096,3,0)``."""
        head = "" if self.n is None else f"{self.n},"
        return f"{self.kind}({head}{self.size},{self.hashes},{self.seed})"

    @property
    def num_bits(self) -> int:
        return 8 * self.size

    def tokenizer(self) -> Tokenizer:
        return Tokenizer(self.n)


def is_text_type(t: pa.DataType) -> bool:
    """Whether a column of Arrow type ``t`` holds strings a text filter takes."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    return bool(
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_string_view(t)
        or pa.types.is_binary_view(t)
    )


def _strings(values: pa.Array | pa.ChunkedArray) -> list[bytes]:
    """A row group's values as bytes, NULLs left out."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], pa.binary())
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    t = values.type
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t) or pa.types.is_large_string(t):
        values = values.cast(pa.large_binary())
    elif pa.types.is_string(t):
        values = values.cast(pa.binary())
    return [v for v in values.to_pylist() if v is not None]


def row_group_tokens(values: pa.Array | pa.ChunkedArray, n: int | None) -> set[bytes]:
    """The distinct tokens (``n`` None) or n-grams of a row group's values (NULLs have none),
    as ClickHouse's tokenizers split each value (:class:`Tokenizer`; this is its fast path)."""
    data = _strings(values)
    if n is None:
        # Tokens never hold a separator, so joining the values with one splits the same.
        return set(_TOKEN.findall(b"\x00".join(data)))
    out: set[bytes] = set()
    slow = Tokenizer(n)
    for v in data:
        if v.isascii():
            out.update(v[i : i + n] for i in range(len(v) - n + 1))
        else:
            out.update(slow.tokens(v))
    return out


def row_group_pairs(
    values: pa.Array | pa.ChunkedArray, n: int | None, cache: HashCache
) -> npt.NDArray[np.uint64]:
    """The ``(h1, h2)`` of each distinct token or n-gram of a row group's values (the pairs
    of :func:`row_group_tokens`, in no particular order): the n-grams of ASCII values are cut
    and hashed in numpy, the rest token by token."""
    if n is None:
        return cache.pairs(sorted(row_group_tokens(values, None)))
    data = _strings(values)
    ascii_values = [v for v in data if v.isascii()]
    slow = Tokenizer(n)
    others: set[bytes] = set()
    for v in data:
        if not v.isascii():
            others.update(slow.tokens(v))
    parts = [cache.pairs(sorted(others))]
    if ascii_values:
        buf = np.frombuffer(b"".join(ascii_values), dtype=np.uint8)
        lengths = np.fromiter((len(v) for v in ascii_values), np.int64, len(ascii_values))
        ends = np.repeat(np.cumsum(lengths), lengths)  # each byte's value's end
        if len(buf) >= n:
            starts = np.flatnonzero(np.arange(len(buf) - n + 1) + n <= ends[: len(buf) - n + 1])
            windows = np.lib.stride_tricks.sliding_window_view(buf, n)[starts]
            codes = np.zeros(len(windows), dtype=np.uint64)
            for j in range(n):
                codes |= windows[:, j].astype(np.uint64) << np.uint64(8 * j)
            codes = np.unique(codes)
            padded = np.zeros((len(codes), SHORT_MAX), dtype=np.uint8)
            padded[:, :8] = codes.astype("<u8").view(np.uint8).reshape(-1, 8)
            parts.append(cache.padded_pairs(padded, np.full(len(codes), n, np.int64)))
    return np.unique(np.concatenate(parts), axis=0)


class HashCache:
    """Each token's two hashes for a seed: tokens of at most 16 bytes hashed together (numpy),
    longer ones one by one, each once a build (tokens repeat across row groups)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.seed2 = (SEED_GEN_A * seed + SEED_GEN_B) & MASK64
        self._known: dict[bytes, tuple[int, int]] = {}

    def pairs(self, tokens: Iterable[bytes]) -> npt.NDArray[np.uint64]:
        """A ``(len(tokens), 2)`` array of ``(h1, h2)``."""
        tokens = list(tokens)
        out = np.empty((len(tokens), 2), dtype=np.uint64)
        lengths = np.fromiter((len(t) for t in tokens), dtype=np.int64, count=len(tokens))
        short = np.flatnonzero(lengths <= SHORT_MAX)
        if short.size:
            joined = b"".join([t.ljust(SHORT_MAX, b"\0") for t in tokens if len(t) <= SHORT_MAX])
            padded = np.frombuffer(joined, dtype=np.uint8).reshape(-1, SHORT_MAX)
            out[short] = self.padded_pairs(padded, lengths[short])
        known = self._known
        for i in np.flatnonzero(lengths > SHORT_MAX):
            t = tokens[i]
            pair = known.get(t)
            if pair is None:
                pair = (city_hash64_with_seed(t, self.seed), city_hash64_with_seed(t, self.seed2))
                known[t] = pair
            out[i] = pair
        return out

    def padded_pairs(
        self, padded: npt.NDArray[np.uint8], lengths: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.uint64]:
        """The pairs of tokens of at most 16 bytes, given zero-padded (numpy)."""
        out = np.empty((len(lengths), 2), dtype=np.uint64)
        out[:, 0] = city_hash64_with_seed_short(padded, lengths, self.seed)
        out[:, 1] = city_hash64_with_seed_short(padded, lengths, self.seed2)
        return out


def hash_pairs(tokens: Sequence[bytes], seed: int) -> npt.NDArray[np.uint64]:
    """The ``(h1, h2)`` of each token for ``seed``."""
    return HashCache(seed).pairs(tokens)


def positions(pairs: npt.NDArray[np.uint64], hashes: int, num_bits: int) -> npt.NDArray[np.int64]:
    """The bit positions the tokens of ``pairs`` set: ``(h1 + i*h2 + i*i) mod num_bits`` for
    ``i < hashes``, in 64-bit wrapping arithmetic; a ``(len(pairs), hashes)`` array."""
    i = np.arange(hashes, dtype=np.uint64)
    with np.errstate(over="ignore"):
        mixed = pairs[:, :1] + i[None, :] * pairs[:, 1:2] + (i * i)[None, :]
    return np.asarray(mixed % np.uint64(num_bits), dtype=np.int64)


def bitset(pairs: npt.NDArray[np.uint64], spec: TextSpec) -> bytes:
    """The filter's bytes for a row group of tokens ``pairs``: ClickHouse's bytes for a
    granule of the same values."""
    bits = np.zeros(spec.num_bits, dtype=np.uint8)
    if len(pairs):
        bits[positions(pairs, spec.hashes, spec.num_bits).ravel()] = 1
    return np.packbits(bits, bitorder="little").tobytes()


def size_for(distinct: int, fpp: float) -> tuple[int, int]:
    """``(size in bytes, hashes)`` for ``distinct`` tokens at false-positive rate ``fpp``: the
    optimal ``m = -n ln p / ln(2)^2`` bits and ``k = m / n ln 2`` hashes (at least 1; at most 16),
    for at least one token; the size rounded up to whole 8-byte words."""
    n = max(distinct, 1)
    bits = -n * math.log(fpp) / (math.log(2) ** 2)
    hashes = min(16, max(1, round(bits / n * math.log(2))))
    size = min(MAX_FILTER_BYTES, max(8, (math.ceil(bits / 8) + 7) // 8 * 8))
    return size, hashes


# How many bit positions one pass of the transposition unpacks for N row groups (bytes).
_PASS = 32 << 20


def text_slices(bitsets: Sequence[bytes], size: int) -> Iterator[bytes]:
    """The slices of N filters of ``size`` bytes each, in position order, a run at a time."""
    n = len(bitsets)
    if n == 0:
        return
    packed = np.frombuffer(b"".join(bitsets), dtype=np.uint8).reshape(n, size)
    step = max(1, _PASS // (8 * n))  # bytes of each filter a pass takes
    for start in range(0, size, step):
        bits = np.unpackbits(packed[:, start : start + step], axis=1, bitorder="little")
        yield np.packbits(np.ascontiguousarray(bits.T), axis=1, bitorder="little").tobytes()

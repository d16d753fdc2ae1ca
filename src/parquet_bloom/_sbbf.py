"""The split-block Bloom filter (SBBF) of the Parquet format.

Spec: parquet-format ``BloomFilter.md``. A filter is ``z`` blocks of 256 bits; a block is eight
32-bit words ("lanes"), stored little-endian, blocks in order. A 64-bit hash ``h`` picks the block
``((h >> 32) * z) >> 32`` from its high half, and its low half ``key`` sets (or tests) one bit in
each lane: bit ``(key * SALT[i] mod 2**32) >> 27`` of word ``i``.

Everything here is pure: arrays and bytes in, arrays and filters out. Values become hashes in
:mod:`parquet_bloom._plain`; files become filters in :mod:`parquet_bloom._reader`.
"""

from __future__ import annotations

import itertools
import math
import struct
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from parquet_bloom import _plain as plain
from parquet_bloom import kernels

# docs/format-notes.md#sbbf-layout: the eight odd constants that turn one 32-bit key into eight bit
# positions, one per lane, by multiplicative hashing.
SALT = np.array(
    [
        0x47B6137B,
        0x44974D91,
        0x8824AD5B,
        0xA2B7289D,
        0x705495C7,
        0x2DF1424B,
        0x9EFC4947,
        0x5C6BFB31,
    ],
    dtype=np.uint32,
)
WORDS_PER_BLOCK = 8
BYTES_PER_BLOCK = 32
BITS_PER_BLOCK = 256

# Size bounds that every major reader enforces (parquet-java and arrow-rs: 32 B to 128 MiB;
# Arrow C++ also requires a power of two). A filter outside them would be refused by someone.
MIN_NUM_BYTES = 32
MAX_NUM_BYTES = 128 * 1024 * 1024

# Hashes are processed in chunks of this many, so that the numpy passes over a chunk (its
# positions, gathered blocks, or the sparse path's (n, 8) masks of 1 MiB) stay in cache.
_CHUNK = 1 << 15
# Dense inserts set bits for this many hashes per numpy pass: large passes leave a second thread
# inserting into another filter fewer hand-overs of the GIL to wait for. Only the lane being set
# needs to stay in cache; the positions (2 MiB of them) are written and read once, in order.
DENSE_CHUNK = 1 << 18
# Dense inserts set one lane of a page at a time, unpacked to one byte per bit: lane i's words
# of a page of 16 Ki blocks (512 KiB of filter) are 512 KiB unpacked, which stay in a 2 MiB L2
# cache while the page's hashes set their bits. A filter of up to 2 MiB is one page: grouping
# the hashes by page would cost more than the cache misses of a 2 MiB lane. A 128 MiB filter
# has 256 pages, so grouping is a radix sort on one byte. (The sizes were chosen by measurement:
# docs/performance.md.)
PAGE_BLOCKS = 1 << 14
ONE_PAGE_BLOCKS = 1 << 16
# Hashes are grouped by page this many at a time (see group_by_page).
GROUP_SIZE = 1 << 16
GROUP_PER_PAGE = 256
# Below one value per this many blocks, unpacking pages costs more than sorting the few values.
_DENSE_RATIO = 8
# Up to this many hashes, probing one at a time beats the fixed cost of the numpy passes.
_SCALAR_PROBES = 16
# might_contain_many hashes and probes a numeric array this many values at a time: their hashes
# (512 KiB) stay in a 1 MiB L2 cache between the two (docs/performance.md).
PROBE_CHUNK = 1 << 16
# Dense inserts keep their work arrays between calls, per thread, up to this many bytes each:
# an insert of 1 M hashes into 2 MiB needs 13 MiB of them, and memory fresh from the kernel is
# faulted in a page at a time, which costs more than the insert's own arithmetic.
_WORK_ARRAY_LIMIT = 4 * 1024 * 1024

_WORD = np.dtype("<u4")
_U32_MASK = 0xFFFFFFFF
# Byte -> its eight bits, one byte each, least significant first (np.unpackbits with
# bitorder="little", but gathered into a buffer of ours instead of a fresh array).
_UNPACKED_BYTES = (
    np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little")
    .view("<u8")
    .reshape(-1)
)
_SALTS = [int(s) for s in SALT]  # Python ints for the scalar probe path


def bits_per_value(fpp: float) -> float:
    """Bits per distinct value for false-positive rate ``fpp``: ``c = -8 / log(1 - pow(p, 1/8))``
    (docs/format-notes.md#how-writers-size-filters)."""
    _check_fpp(fpp)
    return -8.0 / math.log1p(-(fpp ** (1.0 / 8.0)))


def optimal_num_bytes(ndv: int, fpp: float = 0.01) -> int:
    """Bytes for ``ndv`` distinct values at ``fpp``: the spec's bits, rounded up to a power of two
    within [32 B, 128 MiB]."""
    if isinstance(ndv, bool) or not isinstance(ndv, int | np.integer):
        raise TypeError(f"ndv must be an int, not {type(ndv).__name__}")
    if ndv < 0:
        raise ValueError(f"ndv must be >= 0, got {ndv}")
    num_bytes = math.ceil(int(ndv) * bits_per_value(fpp) / 8)
    return min(max(_next_power_of_two(num_bytes), MIN_NUM_BYTES), MAX_NUM_BYTES)


class SplitBlockBloomFilter:
    """A Parquet split-block Bloom filter.

    ``SplitBlockBloomFilter(num_bytes)`` is an empty filter of ``num_bytes`` bytes, a power of two
    in [32 B, 128 MiB]. Filters pickle as their bitset, so they are cheap to broadcast.
    """

    # Pickles and reprs name the class where users import it from, so that moving the
    # implementation between private modules never breaks a pickled filter.
    __module__ = "parquet_bloom"

    __slots__ = ("_words",)

    def __init__(self, num_bytes: int) -> None:
        _check_num_bytes(num_bytes)
        self._words = np.zeros((num_bytes // BYTES_PER_BLOCK, WORDS_PER_BLOCK), dtype=_WORD)

    # -- construction and bytes ------------------------------------------------------------

    @classmethod
    def from_ndv(cls, ndv: int, fpp: float = 0.01) -> SplitBlockBloomFilter:
        """An empty filter sized for ``ndv`` distinct values at false-positive rate ``fpp``."""
        return cls(optimal_num_bytes(ndv, fpp))

    @classmethod
    def from_bytes(cls, bitset: bytes | bytearray | memoryview) -> SplitBlockBloomFilter:
        """A filter over a copy of ``bitset`` (the bitset alone, without the Thrift header)."""
        if not isinstance(bitset, bytes | bytearray | memoryview):
            raise TypeError(f"bitset must be bytes-like, not {type(bitset).__name__}")
        view = memoryview(bitset).cast("B")
        _check_num_bytes(len(view))
        new = cls.__new__(cls)
        words = np.frombuffer(view, dtype=_WORD).reshape(-1, WORDS_PER_BLOCK)
        new._words = words.copy()
        return new

    def to_bytes(self) -> bytes:
        """The bitset as stored in Parquet: blocks in order, words little-endian."""
        return self._words.tobytes()

    @property
    def num_bytes(self) -> int:
        return int(self._words.nbytes)

    @property
    def num_blocks(self) -> int:
        return int(self._words.shape[0])

    @property
    def words(self) -> npt.NDArray[np.uint32]:
        """A read-only (num_blocks, 8) view of the words."""
        view = self._words.view()
        view.flags.writeable = False
        return view

    # -- hashes ----------------------------------------------------------------------------

    def insert_hashes(self, hashes: npt.ArrayLike) -> None:
        """Insert 64-bit XXH64 hashes (any shape; flattened; signed 64-bit integers are read as
        their bit pattern, as JVM tools hand them out).

        With the compiled kernels (:mod:`parquet_bloom.kernels`) each hash sets its eight bits
        in place. On numpy alone, large inserts keep their work arrays for the calling
        thread's next insert: at most 13 MiB a thread, freed with the thread.
        """
        h = _as_hashes(hashes)
        compiled = kernels.compiled
        if compiled is not None:
            compiled.insert(self._words, np.ascontiguousarray(h))
        elif h.size * _DENSE_RATIO < self.num_blocks:
            self._insert_sparse(h)
        else:
            self._insert_dense(h)

    def _insert_sparse(self, h: npt.NDArray[np.uint64]) -> None:
        # Few values into a big filter: sorting the hashes sorts them by block (the block index is
        # monotone in h), so all masks aimed at one block are OR-ed together and written once.
        words = self._words
        z = np.uint64(words.shape[0])
        for start in range(0, h.size, _CHUNK):
            chunk = np.sort(h[start : start + _CHUNK])
            blocks = _block_index(chunk, z)
            first = np.empty(blocks.size, dtype=bool)
            first[0] = True
            np.not_equal(blocks[1:], blocks[:-1], out=first[1:])
            starts = np.flatnonzero(first)
            masks = _masks(chunk)
            words[blocks[starts]] |= np.bitwise_or.reduceat(masks, starts, axis=0)

    def _insert_dense(self, h: npt.NDArray[np.uint64]) -> None:
        # Many values: OR-ing into words through a numpy scatter would lose bits whenever two
        # values hit one word, so set bits instead, which is idempotent. The filter is cut into
        # pages that fit in cache; the hashes are grouped by page (the page is the hash's top
        # bits, so a radix sort on a one- or two-byte key does it); each page is worked one lane
        # at a time: lane i's word of every block of the page is unpacked to one byte per bit,
        # all the page's hashes set their bit in it, and it is packed back.
        words = self._words
        z = words.shape[0]
        log_z = z.bit_length() - 1  # z is a power of two (checked on construction)
        page_blocks = z if z <= ONE_PAGE_BLOCKS else PAGE_BLOCKS
        num_pages = z // page_blocks
        if num_pages > 1:
            h, bounds = group_by_page(h, num_pages.bit_length() - 1)
        else:
            bounds = [0, h.size]
        longest = max(hi - lo for lo, hi in itertools.pairwise(bounds))
        key = _work_array("key", longest, np.uint32)
        block_bit = _work_array("block_bit", longest, np.uint32)
        size = min(longest, DENSE_CHUNK)
        bit = _work_array("bit", size, np.uint32)
        position = _work_array("position", size, np.intp)
        bits = _work_array("bits", page_blocks * 32, np.uint8)  # a lane: one byte a bit
        for p in range(num_pages):
            lo, hi = bounds[p], bounds[p + 1]
            if lo == hi:
                continue
            page = words[p * page_blocks : (p + 1) * page_blocks]
            # The spec's block ((h >> 32) * z) >> 32 is, for z = 2**k, h's top k bits; its low
            # bits are the block within the page, 32 bits a block in each lane. The key is h's
            # low half. A page has at most 2**16 blocks, so 32 bits hold every bit position.
            n = hi - lo
            k = key[:n]
            np.copyto(k, h[lo:hi], casting="unsafe")
            base = block_bit[:n]
            if log_z:
                np.right_shift(h[lo:hi], np.uint64(64 - log_z), out=base, casting="unsafe")
                base &= np.uint32(page_blocks - 1)
                base <<= np.uint32(5)
            else:
                base[:] = 0
            for lane in range(WORDS_PER_BLOCK):
                lane_words = np.ascontiguousarray(page[:, lane])
                if lane_words.any():
                    packed = lane_words.view(np.uint8)  # mode="wrap": see _xxh64.GATHER
                    np.take(_UNPACKED_BYTES, packed, out=bits.view("<u8"), mode="wrap")
                else:  # a new filter's: clearing is cheaper than unpacking
                    bits.fill(0)
                for start in range(0, n, DENSE_CHUNK):
                    stop = min(n, start + DENSE_CHUNK)
                    b = bit[: stop - start]
                    pos = position[: stop - start]
                    # Lane i's bit is the top 5 bits of (key * SALT[i]) mod 2**32. In 32-bit
                    # lanes the multiply wraps where the spec says and vectorises (a 64-bit one
                    # does not, on AVX2). The positions are cast to intp into a reused buffer:
                    # indexing with a uint32 array converts it into a fresh one each time (2.8
                    # ns an element against 1.2).
                    np.multiply(k[start:stop], SALT[lane], out=b)
                    b >>= np.uint32(27)
                    b += base[start:stop]
                    np.copyto(pos, b, casting="unsafe")
                    bits[pos] = 1
                page[:, lane] = np.packbits(bits, bitorder="little").view(_WORD)

    def find_hashes(self, hashes: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """For each hash, False if it was certainly never inserted, True if it might have been.

        With the compiled kernels (:mod:`parquet_bloom.kernels`) one pass probes each hash's
        block; on numpy alone a few passes a chunk of hashes do, bit for bit the same.
        """
        h = _as_hashes(hashes)
        found = np.empty(h.size, dtype=bool)
        self._find_into(h, found)
        return found

    def _find_into(self, h: npt.NDArray[np.uint64], found: npt.NDArray[np.bool_]) -> None:
        compiled = kernels.compiled
        if compiled is not None:
            compiled.find(self._words, np.ascontiguousarray(h), found)
        elif h.size <= _SCALAR_PROBES:
            found[:] = [self.find_hash(x) for x in h.tolist()]
        else:
            self._find_dense(h, found)

    def _find_dense(self, h: npt.NDArray[np.uint64], out: npt.NDArray[np.bool_]) -> None:
        z = np.uint64(self._words.shape[0])
        pos = np.empty(min(h.size, _CHUNK), dtype=np.uint32)
        lane_bit = np.empty_like(pos)
        found = np.empty_like(pos)
        for start in range(0, h.size, _CHUNK):
            chunk = h[start : start + _CHUNK]
            n = chunk.size
            # One gather of whole blocks (32 contiguous bytes each); then, lane by lane, shift the
            # word down by the lane's bit position and keep the low bit in a running AND.
            rows = np.take(self._words, _block_index(chunk, z), axis=0)
            key = chunk.astype(np.uint32)
            found[:n] = 1
            for lane in range(WORDS_PER_BLOCK):
                np.multiply(key, SALT[lane], out=pos[:n])
                np.right_shift(pos[:n], np.uint32(27), out=pos[:n])
                np.right_shift(rows[:, lane], pos[:n], out=lane_bit[:n])
                np.bitwise_and(found[:n], lane_bit[:n], out=found[:n])
            np.bitwise_and(found[:n], np.uint32(1), out=found[:n])
            out[start : start + n] = found[:n]

    def find_hash(self, h: int) -> bool:
        """Scalar :meth:`find_hashes`, without numpy's per-call overhead."""
        h = int(h) & 0xFFFFFFFFFFFFFFFF
        compiled = kernels.compiled
        if compiled is not None:  # a fifth of the cost of the Python below
            found = bytearray(1)
            compiled.find(self._words, h.to_bytes(8, "little"), found)
            return found[0] == 1
        block = self._words[((h >> 32) * self._words.shape[0]) >> 32].tolist()
        key = h & _U32_MASK
        return all(
            word >> (((key * salt) & _U32_MASK) >> 27) & 1
            for word, salt in zip(block, _SALTS, strict=True)
        )

    # -- values ----------------------------------------------------------------------------

    def insert(
        self, values: Any, physical_type: str | None = None, *, type_length: int | None = None
    ) -> None:
        """Insert values (a scalar, a sequence, a numpy or Arrow array), PLAIN-encoded as
        ``physical_type`` (inferred when None; see :func:`parquet_bloom.hash_values`)."""
        self.insert_hashes(plain.hash_values(values, physical_type, type_length=type_length))

    def might_contain(
        self, value: Any, physical_type: str | None = None, *, type_length: int | None = None
    ) -> bool:
        """False if ``value`` is certainly absent; True if it might be present."""
        return self.find_hash(plain.hash_value(value, physical_type, type_length=type_length))

    def might_contain_many(
        self, values: Any, physical_type: str | None = None, *, type_length: int | None = None
    ) -> npt.NDArray[np.bool_]:
        """:meth:`might_contain` for each non-null value."""
        if (
            isinstance(values, np.ndarray)
            and values.ndim == 1
            and values.dtype.kind in "iuf"
            and values.size > PROBE_CHUNK
        ):
            # Numbers cost little to hash, so writing all their hashes out and reading them back
            # would cost as much as probing: they are hashed and probed a part at a time, the
            # part's hashes still in cache when probed. (Only numbers: their hashes and errors
            # are the same a part at a time, as each depends on the dtype and the value alone.)
            found = np.empty(values.size, dtype=bool)
            for start in range(0, values.size, PROBE_CHUNK):
                part = values[start : start + PROBE_CHUNK]
                hashes = plain.hash_values(part, physical_type, type_length=type_length)
                self._find_into(hashes, found[start : start + part.size])
            return found
        return self.find_hashes(plain.hash_values(values, physical_type, type_length=type_length))

    # -- combining and resizing ------------------------------------------------------------

    def __or__(self, other: object) -> SplitBlockBloomFilter:
        if not isinstance(other, SplitBlockBloomFilter):
            return NotImplemented
        return self.copy().__ior__(other)

    def __ior__(self, other: object) -> SplitBlockBloomFilter:
        if not isinstance(other, SplitBlockBloomFilter):
            return NotImplemented
        if other.num_bytes != self.num_bytes:
            raise ValueError(
                f"cannot union filters of {self.num_bytes} and {other.num_bytes} bytes; "
                "fold the larger one first"
            )
        self._words |= other._words
        return self

    def fold(self, num_bytes: int) -> SplitBlockBloomFilter:
        """The filter of ``num_bytes`` bytes that inserting the same hashes would have built.

        With ``z`` a power of two the block index is the top ``log2(z)`` bits of the hash, so
        halving ``z`` sends blocks ``2j`` and ``2j + 1`` to block ``j``: OR-ing groups of adjacent
        blocks is exact, not an approximation.
        """
        _check_num_bytes(num_bytes)
        if num_bytes > self.num_bytes:
            raise ValueError(f"cannot fold a {self.num_bytes}-byte filter up to {num_bytes} bytes")
        if not _is_power_of_two(self.num_blocks):
            raise ValueError(f"only power-of-two filters fold; this one has {self.num_bytes} bytes")
        target = num_bytes // BYTES_PER_BLOCK
        grouped = self._words.reshape(target, self.num_blocks // target, WORDS_PER_BLOCK)
        return _wrap(np.bitwise_or.reduce(grouped, axis=1))

    # -- estimates -------------------------------------------------------------------------

    def bits_set(self) -> int:
        """How many of the bitset's bits are 1."""
        return int(_popcount(self._words).sum())

    def fraction_set(self) -> float:
        """The fraction of the bitset's bits that are 1."""
        return self.bits_set() / (self.num_bytes * 8)

    def estimate_ndv(self) -> float:
        """The number of distinct values whose insertion best explains the bits set.

        Each insert sets one of the ``32 * z`` bits of each lane position, so a given bit stays
        unset with probability ``(1 - 1 / (32 z)) ** n``; invert that at the observed fraction.
        A saturated filter (every bit set) gives the estimate for all bits but one.
        """
        num_bits = self.num_bytes * 8
        bits_set = self.bits_set()
        if bits_set == 0:
            return 0.0  # not the formula's -0.0
        unset = max(num_bits - bits_set, 1) / num_bits
        return math.log(unset) / math.log1p(
            -1.0 / (BITS_PER_BLOCK // WORDS_PER_BLOCK * self.num_blocks)
        )

    def fpp(self, ndv: float | None = None) -> float:
        """False-positive rate for a hash that was never inserted.

        Without ``ndv``: exactly, from the bits actually set (a probe lands in a uniformly random
        block and passes when its eight bits are set: the mean over blocks of the product of the
        lanes' fill fractions). With ``ndv``: the expected rate after ``ndv`` distinct inserts into
        a filter of this size, with the per-block load as a Poisson mixture.
        """
        if ndv is None:
            fill = _popcount(self._words) / 32.0
            return float(np.prod(fill, axis=1).mean())
        return expected_fpp(ndv, self.num_bytes)

    # -- Python protocol -------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SplitBlockBloomFilter):
            return NotImplemented
        return self._words.shape == other._words.shape and bool(
            np.array_equal(self._words, other._words)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        # Pickle as the bitset only: small, fast, and stable across versions, since the class
        # is named by its public home (see __module__ below), not by this private module.
        return (SplitBlockBloomFilter.from_bytes, (self.to_bytes(),))

    def __copy__(self) -> SplitBlockBloomFilter:
        return _wrap(self._words.copy())

    def copy(self) -> SplitBlockBloomFilter:
        return self.__copy__()

    def __repr__(self) -> str:
        return (
            f"SplitBlockBloomFilter(num_bytes={self.num_bytes}, "
            f"fraction_set={self.fraction_set():.4f})"
        )


def expected_fpp(ndv: float, num_bytes: int) -> float:
    """Expected false-positive rate of a ``num_bytes`` filter holding ``ndv`` distinct values.

    A block holding ``x`` values has each lane bit set with probability ``1 - (31/32) ** x``; the
    block loads are Poisson with mean ``ndv / z``. (The spec's sizing formula ignores the load
    variance and so is slightly optimistic.)
    """
    if ndv < 0:
        raise ValueError(f"ndv must be >= 0, got {ndv}")
    _check_num_bytes(num_bytes)
    lam = ndv / (num_bytes // BYTES_PER_BLOCK)
    if lam == 0:
        return 0.0
    top = int(lam + 12 * math.sqrt(lam) + 30)
    x = np.arange(top + 1, dtype=np.float64)
    log_pmf = x * math.log(lam) - lam - np.array([math.lgamma(k + 1) for k in range(top + 1)])
    p_block = (1.0 - (31.0 / 32.0) ** x) ** WORDS_PER_BLOCK
    return float(np.sum(np.exp(log_pmf) * p_block))


def union(filters: Iterable[SplitBlockBloomFilter]) -> SplitBlockBloomFilter:
    """The OR of equally sized filters (the filter of all their values)."""
    it = iter(filters)
    try:
        acc = next(it).copy()
    except StopIteration:
        raise ValueError("union() needs at least one filter") from None
    for f in it:
        acc |= f
    return acc


# -- the arithmetic, vectorised ---------------------------------------------------------------


def _block_index(h: npt.NDArray[np.uint64], z: np.uint64) -> npt.NDArray[np.intp]:
    # (h >> 32) * z < 2**32 * 2**22, so the product cannot wrap.
    return ((h >> np.uint64(32)) * z >> np.uint64(32)).astype(np.intp)


def group_by_page(
    h: npt.NDArray[np.uint64], page_bits: int
) -> tuple[npt.NDArray[np.uint64], list[int]]:
    """``h`` reordered so that the hashes of each page (their top ``page_bits`` bits) lie
    together, pages in order, and where each page's run starts (one more for the end).

    Sorted a group of hashes at a time, each group's runs appended to its pages': a sort of a
    million keys at once (numpy's radix sort of small ints) allocates and fills 16 bytes a hash
    of index arrays, in pages fresh from the kernel each time, while a group's indices stay in
    cache and their memory is reused.
    """
    num_pages = 1 << page_bits
    key = np.empty(h.size, dtype=np.uint8 if page_bits <= 8 else np.uint16)
    np.right_shift(h, np.uint64(64 - page_bits), out=key, casting="unsafe")
    # Each group's runs are copied page by page in Python: enough hashes a page a group keep
    # that loop a few nanoseconds a hash.
    step = max(GROUP_SIZE, num_pages * GROUP_PER_PAGE)
    groups = range(0, h.size, step)
    counts = [np.bincount(key[start : start + step], minlength=num_pages) for start in groups]
    starts = np.zeros(num_pages + 1, dtype=np.int64)
    np.cumsum(sum(counts), out=starts[1:])
    bounds: list[int] = starts.tolist()
    cursor = bounds[:-1]
    grouped = np.empty_like(h)
    group = np.empty(min(h.size, step), dtype=np.uint64)
    for start, count in zip(groups, counts, strict=True):
        order = np.argsort(key[start : start + step], kind="stable")  # radix, for small ints
        # mode="wrap": the indices are in range, and "raise" would gather into a temporary.
        np.take(h[start : start + step], order, out=group[: order.size], mode="wrap")
        lo = 0
        for page, hi in enumerate(np.cumsum(count).tolist()):
            if hi > lo:
                at = cursor[page]
                grouped[at : at + hi - lo] = group[lo:hi]
                cursor[page] = at + hi - lo
                lo = hi
    return grouped, bounds


_work_arrays = threading.local()


def _work_array(name: str, size: int, dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A work array of ``size`` elements, kept for this thread's next call if it is small
    enough (see _WORK_ARRAY_LIMIT); its contents are whatever the last call left."""
    kept: npt.NDArray[Any] | None = getattr(_work_arrays, name, None)
    if kept is not None and kept.size >= size and kept.dtype == dtype:
        return kept[:size]
    array = np.empty(size, dtype=dtype)
    if array.nbytes <= _WORK_ARRAY_LIMIT:
        setattr(_work_arrays, name, array)
    return array


def _masks(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint32]:
    """(n, 8) words with the one bit per lane that each hash sets."""
    key = h.astype(np.uint32)  # the low 32 bits
    bit = np.multiply(key[:, None], SALT[None, :])  # wraps mod 2**32, as the spec says
    np.right_shift(bit, np.uint32(27), out=bit)
    return np.left_shift(np.uint32(1), bit)


def _as_hashes(hashes: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    a = np.asarray(hashes)
    if not a.dtype.isnative:  # e.g. ">u8" read from a big-endian file: the values, not the bytes
        a = a.astype(a.dtype.newbyteorder("="))
    if a.dtype == np.uint64:
        return a.reshape(-1)
    if a.dtype.kind in "iu" and a.dtype.itemsize == 8:
        return a.reshape(-1).view(np.uint64)  # same 64 bits, read unsigned
    if a.size == 0:
        return np.empty(0, dtype=np.uint64)
    if a.dtype.kind == "f" and not isinstance(hashes, np.ndarray):
        # numpy reads a list mixing ints >= 2**63 with smaller ones as floats: keep the ints.
        objects = np.asarray(hashes, dtype=object)
        if all(isinstance(x, int) and not isinstance(x, bool) for x in objects.flat):
            a = objects
    if a.dtype == object or a.dtype.kind in "iu":
        try:
            return np.asarray(hashes, dtype=np.uint64).reshape(-1)
        except (OverflowError, ValueError, TypeError) as err:
            raise ValueError(f"hashes must be unsigned 64-bit integers: {err}") from err
    raise TypeError(f"hashes must be an array of 64-bit integers, not dtype {a.dtype}")


def _popcount(words: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint8]:
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        counts: npt.NDArray[np.uint8] = np.bitwise_count(words)
        return counts
    bits = np.unpackbits(words.view(np.uint8), axis=-1)
    summed: npt.NDArray[np.uint8] = bits.reshape(*words.shape, 32).sum(axis=-1, dtype=np.uint8)
    return summed


def block_index(h: int, num_blocks: int) -> int:
    """The block a hash falls in: ``((h >> 32) * z) >> 32`` for a filter of ``z`` blocks."""
    return (((int(h) & 0xFFFFFFFFFFFFFFFF) >> 32) * num_blocks) >> 32


def num_bytes_given_length(length: int) -> int | None:
    """The bitset size of a filter whose header and bitset take ``length`` bytes, if its header
    is shorter than its bitset (every writer's is: 15 to 19 bytes against at least 32): the
    largest power of two below ``length``. None when no bitset fits. A reader checks the guess
    against the header it then reads."""
    if length <= MIN_NUM_BYTES:
        return None
    return min(1 << ((length - 1).bit_length() - 1), MAX_NUM_BYTES)


class FilterBlocks:
    """Some blocks of a split-block Bloom filter of ``num_bytes`` bytes: enough to probe the
    hashes whose blocks were read (a point lookup needs one block of 32 bytes a value, not the
    whole bitset). ``blocks`` maps a block's index to its 32 bytes. :meth:`find_hash` answers
    as :meth:`SplitBlockBloomFilter.find_hash` does on the whole filter; a hash whose block is
    not held is a ``KeyError``."""

    __slots__ = ("_blocks", "num_blocks")

    def __init__(self, num_bytes: int, blocks: dict[int, bytes]) -> None:
        _check_num_bytes(num_bytes)
        self.num_blocks = num_bytes // BYTES_PER_BLOCK
        self._blocks: dict[int, tuple[int, ...]] = {}
        for index, data in blocks.items():
            if not 0 <= index < self.num_blocks or len(data) != BYTES_PER_BLOCK:
                raise ValueError(f"block {index}: {len(data)} bytes of a {num_bytes}-byte filter")
            self._blocks[index] = _BLOCK_WORDS.unpack(data)

    @property
    def num_bytes(self) -> int:
        return self.num_blocks * BYTES_PER_BLOCK

    def find_hash(self, h: int) -> bool:
        h = int(h) & 0xFFFFFFFFFFFFFFFF
        block = self._blocks[((h >> 32) * self.num_blocks) >> 32]
        key = h & _U32_MASK
        return all(
            word >> (((key * salt) & _U32_MASK) >> 27) & 1
            for word, salt in zip(block, _SALTS, strict=True)
        )


_BLOCK_WORDS = struct.Struct("<8I")


def adopt_bitset(bitset: npt.NDArray[np.uint8]) -> SplitBlockBloomFilter:
    """A filter over ``bitset`` (a 1-D uint8 array) itself, not a copy: for a caller that
    made the array for it (a bitset decrypted into it) and keeps no other reference."""
    if not isinstance(bitset, np.ndarray) or bitset.dtype != np.uint8 or bitset.ndim != 1:
        raise TypeError("bitset must be a 1-D uint8 array")
    _check_num_bytes(len(bitset))
    new = SplitBlockBloomFilter.__new__(SplitBlockBloomFilter)
    new._words = bitset.view(_WORD).reshape(-1, WORDS_PER_BLOCK)
    return new


def _wrap(words: npt.NDArray[np.uint32]) -> SplitBlockBloomFilter:
    new = SplitBlockBloomFilter.__new__(SplitBlockBloomFilter)
    new._words = np.ascontiguousarray(words, dtype=_WORD)
    return new


def _check_num_bytes(num_bytes: int) -> None:
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, int | np.integer):
        raise TypeError(f"num_bytes must be an int, not {type(num_bytes).__name__}")
    if not (MIN_NUM_BYTES <= num_bytes <= MAX_NUM_BYTES and _is_power_of_two(int(num_bytes))):
        raise ValueError(
            f"num_bytes must be a power of two from {MIN_NUM_BYTES} to {MAX_NUM_BYTES}, "
            f"got {num_bytes}"
        )


def _check_fpp(fpp: float) -> None:
    if not 0.0 < fpp < 1.0:
        raise ValueError(f"fpp must be strictly between 0 and 1, got {fpp}")


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _next_power_of_two(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()

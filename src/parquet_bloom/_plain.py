"""XXH64 of Parquet PLAIN-encoded values, vectorised with numpy.

A Parquet split-block Bloom filter stores no values, only bits chosen by a 64-bit hash of
each value. The hash is XXH64 with seed 0 of the value's PLAIN encoding (parquet-format
``BloomFilter.md``, "Technical Approach" and "Hash Function"). So the same number can have
several hashes: ``7`` in an INT32 column is the four bytes ``07 00 00 00``, in an INT64 column
it is eight bytes, in a DOUBLE column it is the IEEE-754 bits of ``7.0``. Probing a filter or
building one therefore needs two things, and this module provides both:

* the exact bytes the writer hashed, which depend on the column's *physical* type (and, for
  Arrow data, on how ``pyarrow.parquet`` converts each Arrow type when it writes it, e.g.
  ``timestamp[s]`` is written as milliseconds and ``date64`` as INT32 days);
* XXH64 over millions of such values. A Python loop over ``xxhash.xxh64_intdigest`` costs
  ~185 ns a value, so the hash is written here in numpy ``uint64`` arithmetic, which wraps
  modulo 2**64 exactly as XXH64 requires. The 4- and 8-byte cases (INT32, INT64, FLOAT,
  DOUBLE) are unrolled and run in cache-sized chunks with in-place operations; variable
  length values (strings) are hashed across all values at once, step by step (values of
  4 KiB or more, where a per-value C call costs nothing in comparison, go to xxhash).
  Where the package carries its compiled kernels (:mod:`parquet_bloom.kernels`), the four
  kernels here (``_hash_u64``, ``_hash_u32``, ``_hash_rows``, ``_hash_spans``) hand the
  bytes to them instead: the same hashes, in one pass a value and without the GIL.

Only :func:`hash_value` (one probe value) goes through the ``xxhash`` package; it encodes with
:func:`plain_encode`, which is written independently of the vectorised encoders so the two
check each other in the tests.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any, Final, TypeAlias

import numpy as np
import xxhash
from numpy.typing import NDArray

from parquet_bloom import kernels

__all__ = [
    "PHYSICAL_TYPES",
    "hash_value",
    "hash_values",
    "plain_encode",
    "xxh64_fixed",
    "xxh64_spans",
    "xxh64_variable",
]

U64: TypeAlias = NDArray[np.uint64]
I64: TypeAlias = NDArray[np.int64]
U8: TypeAlias = NDArray[np.uint8]
# Shows the i-th value in an error message (built lazily: only errors need it).
_Show: TypeAlias = Callable[[int], object]

# The Parquet physical types, in the order of the Thrift ``Type`` enum (parquet.thrift), so
# ``PHYSICAL_TYPES[thrift_value]`` names a column's type.
PHYSICAL_TYPES: tuple[str, ...] = (
    "BOOLEAN",
    "INT32",
    "INT64",
    "INT96",
    "FLOAT",
    "DOUBLE",
    "BYTE_ARRAY",
    "FIXED_LEN_BYTE_ARRAY",
)

# XXH64 primes. parquet-format BloomFilter.md, "Hash Function": the filter hashes with XXH64
# (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md) and seed 0. numpy scalars,
# not Python ints, so that array arithmetic stays in uint64 and wraps modulo 2**64.
_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_M64 = (1 << 64) - 1
# Seed 0 folded into the starting values (spec: "seed = 0"), so no seed arithmetic at run time.
_V1_INIT = np.uint64((0x9E3779B185EBCA87 + 0xC2B2AE3D27D4EB4F) & _M64)  # seed + P1 + P2
_V2_INIT = np.uint64(0xC2B2AE3D27D4EB4F)  # seed + P2
_V3_INIT = np.uint64(0)  # seed
_V4_INIT = np.uint64((-0x9E3779B185EBCA87) & _M64)  # seed - P1
# For inputs shorter than 32 bytes the state starts at seed + P5, then the length is added:
# for the hot fixed widths both are constants.
_H4_INIT = np.uint64(0x27D4EB2F165667C5 + 4)
_H8_INIT = np.uint64(0x27D4EB2F165667C5 + 8)

# Values per chunk in the hot loops: three uint64 buffers of this size (input, state,
# scratch) stay in a 1 MiB L2 cache, which measured ~2.5x faster than whole-array passes.
_CHUNK = 32768
# Strings keep about a dozen arrays of this many values live at once (see _hash_spans_chunk).
_SPAN_CHUNK = 16384
# Values this long are hashed one by one in C (see _hash_huge); shorter ones bound the stripe
# rounds of the vectorised path to 4096 / 32 = 128 per chunk.
_HUGE_VALUE = 4096
# Zero words after a chunk's bytes: a tail (< 32 bytes) is read as up to 4 words, plus the
# straddled next word, from its 8-byte-aligned start.
_SPARE_WORDS = 6

# Days between the Julian day epoch and 1970-01-01: INT96 timestamps store (nanoseconds of
# the day, Julian day) (parquet-format LogicalTypes.md, "INT96 timestamps", deprecated).
_JULIAN_UNIX_EPOCH = 2440588
_NANOS_PER_DAY = 86_400_000_000_000
_MILLIS_PER_DAY = 86_400_000

_BOOLEAN_MESSAGE = (
    "BOOLEAN columns have no usable Bloom filters: writers do not agree on how a boolean is "
    "hashed (and a column of two values gains nothing from one)"
)


# --------------------------------------------------------------------------------------------
# XXH64 kernels. Every function here updates uint64 arrays in place; ``tmp`` is scratch space
# of the same length, passed in so the hot loops allocate nothing per chunk.
# --------------------------------------------------------------------------------------------

# Gathers (np.take into ``out``) use mode="wrap": their indices are in range by construction
# (the word buffer has spare words past the last value), and with the default mode="raise"
# numpy gathers into a temporary buffer first ("out is always buffered", np.take's docs), which
# cost 14 % of hashing strings of mixed lengths.
_GATHER: Final = "wrap"


def _rotl(x: U64, r: int, tmp: U64) -> None:
    """x = rotate_left(x, r), in place."""
    np.right_shift(x, np.uint64(64 - r), out=tmp)
    np.left_shift(x, np.uint64(r), out=x)
    np.bitwise_or(x, tmp, out=x)


def _avalanche(h: U64, tmp: U64) -> None:
    """XXH64's final mix, in place."""
    np.right_shift(h, np.uint64(33), out=tmp)
    h ^= tmp
    h *= _P2
    np.right_shift(h, np.uint64(29), out=tmp)
    h ^= tmp
    h *= _P3
    np.right_shift(h, np.uint64(32), out=tmp)
    h ^= tmp


def _round(acc: U64, lane: NDArray[Any], tmp: U64) -> None:
    """acc = rotl(acc + lane * P2, 31) * P1 (one 8-byte lane of a 32-byte stripe)."""
    np.multiply(lane, _P2, out=tmp)
    acc += tmp
    _rotl(acc, 31, tmp)
    acc *= _P1


def _mix_lane8(h: U64, lane: NDArray[Any], tmp: U64, tmp2: U64) -> None:
    """Consume one 8-byte lane of the tail: h ^= round(0, lane); h = rotl(h, 27) * P1 + P4."""
    np.multiply(lane, _P2, out=tmp)
    _rotl(tmp, 31, tmp2)
    tmp *= _P1
    h ^= tmp
    _rotl(h, 27, tmp)
    h *= _P1
    h += _P4


def _mix_lane4(h: U64, lane: NDArray[Any], tmp: U64) -> None:
    """Consume one 4-byte lane of the tail: h ^= lane * P1; h = rotl(h, 23) * P2 + P3."""
    np.multiply(lane, _P1, out=tmp)
    h ^= tmp
    _rotl(h, 23, tmp)
    h *= _P2
    h += _P3


def _mix_byte(h: U64, byte: NDArray[Any], tmp: U64) -> None:
    """Consume one tail byte: h ^= byte * P5; h = rotl(h, 11) * P1."""
    np.multiply(byte, _P5, out=tmp)
    h ^= tmp
    _rotl(h, 11, tmp)
    h *= _P1


def _converge(v: list[U64]) -> U64:
    """Fold the four stripe accumulators into one state (inputs of 32 bytes or more)."""
    tmp = np.empty_like(v[0])
    tmp2 = np.empty_like(v[0])
    h = np.zeros_like(v[0])
    for acc, r in zip(v, (1, 7, 12, 18), strict=True):
        np.copyto(tmp2, acc)
        _rotl(tmp2, r, tmp)
        h += tmp2
    for acc in v:
        # h ^= round(0, acc); h = h * P1 + P4
        np.multiply(acc, _P2, out=tmp2)
        _rotl(tmp2, 31, tmp)
        tmp2 *= _P1
        h ^= tmp2
        h *= _P1
        h += _P4
    return h


def _hash_u64(lanes: NDArray[np.uint64]) -> U64:
    """XXH64 of every 8-byte value, given as its little-endian uint64 (INT64, DOUBLE).

    Unrolled for one 8-byte input: h = P5 + 8; h ^= rotl(lane * P2, 31) * P1;
    h = rotl(h, 27) * P1 + P4; avalanche.
    """
    compiled = kernels.compiled
    if compiled is not None:
        return _compiled_rows(compiled, _lane_bytes(lanes))
    n = lanes.shape[0]
    out = np.empty(n, dtype=np.uint64)
    tmp = np.empty(min(n, _CHUNK), dtype=np.uint64)
    for lo in range(0, n, _CHUNK):
        o = out[lo : lo + _CHUNK]
        t = tmp[: o.shape[0]]
        np.multiply(lanes[lo : lo + _CHUNK], _P2, out=o)
        _rotl(o, 31, t)
        o *= _P1
        o ^= _H8_INIT
        _rotl(o, 27, t)
        o *= _P1
        o += _P4
        _avalanche(o, t)
    return out


def _hash_u32(lanes: NDArray[np.uint32]) -> U64:
    """XXH64 of every 4-byte value, given as its little-endian uint32 (INT32, FLOAT).

    Unrolled for one 4-byte input: h = (P5 + 4) ^ (lane * P1); h = rotl(h, 23) * P2 + P3;
    avalanche.
    """
    compiled = kernels.compiled
    if compiled is not None:
        return _compiled_rows(compiled, _lane_bytes(lanes))
    n = lanes.shape[0]
    out = np.empty(n, dtype=np.uint64)
    tmp = np.empty(min(n, _CHUNK), dtype=np.uint64)
    for lo in range(0, n, _CHUNK):
        o = out[lo : lo + _CHUNK]
        t = tmp[: o.shape[0]]
        np.multiply(lanes[lo : lo + _CHUNK], _P1, out=o)
        o ^= _H4_INIT
        _rotl(o, 23, t)
        o *= _P2
        o += _P3
        _avalanche(o, t)
    return out


def _hash_rows_chunk(rows: U8) -> U64:
    """XXH64 of every row of a (m, width) uint8 array; every row has the same control flow.

    The rows are viewed (padded to whole words if need be) as (m, words) uint64, so each
    8-byte lane is a column: no gathers, and the steps are the scalar algorithm's, in order.
    """
    m, width = rows.shape
    if width % 8:
        padded = np.zeros((m, width + 8 - width % 8), dtype=np.uint8)
        padded[:, :width] = rows
        rows = padded
    lanes = np.ascontiguousarray(rows).view("<u8")
    tmp = np.empty(m, dtype=np.uint64)
    tmp2 = np.empty(m, dtype=np.uint64)
    at = 0
    if width >= 32:
        v = [np.full(m, c, dtype=np.uint64) for c in (_V1_INIT, _V2_INIT, _V3_INIT, _V4_INIT)]
        while at + 32 <= width:
            for j in range(4):
                _round(v[j], lanes[:, at // 8 + j], tmp)
            at += 32
        h = _converge(v)
    else:
        h = np.full(m, _P5, dtype=np.uint64)
    h += np.uint64(width)
    while at + 8 <= width:
        _mix_lane8(h, lanes[:, at // 8], tmp, tmp2)
        at += 8
    if at < width:  # the last partial word: a 4-byte lane and/or 1-3 bytes
        word = lanes[:, at // 8].astype(np.uint64)
        if at + 4 <= width:
            _mix_lane4(h, word & np.uint64(0xFFFFFFFF), tmp)
            word >>= np.uint64(32)
            at += 4
        while at < width:
            _mix_byte(h, word & np.uint64(0xFF), tmp)
            word >>= np.uint64(8)
            at += 1
    _avalanche(h, tmp)
    return h


def _hash_rows(rows: U8) -> U64:
    """XXH64 of every row of a (n, width) uint8 array, contiguous or not (e.g. the values of
    a page of length-prefixed strings of one length, a row every 4 + width bytes)."""
    compiled = kernels.compiled
    if compiled is not None:
        return _compiled_rows(compiled, rows)
    n, width = rows.shape
    if width == 8:
        lanes = np.ascontiguousarray(rows).view("<u8").reshape(n)
        return _hash_u64(lanes.astype(np.uint64, copy=False))
    if width == 4:
        lanes = np.ascontiguousarray(rows).view("<u4").reshape(n)
        return _hash_u32(lanes.astype(np.uint32, copy=False))
    out = np.empty(n, dtype=np.uint64)
    # Keep one chunk's lanes in cache; long rows need fewer rows per chunk. Rows that are not
    # contiguous are copied a chunk at a time (into the lanes), while in cache.
    step = max(1024, _CHUNK * 16 // max(width, 16))
    for lo in range(0, n, step):
        out[lo : lo + step] = _hash_rows_chunk(rows[lo : lo + step])
    return out


def _lane_bytes(lanes: NDArray[Any]) -> U8:
    """Little-endian integer lanes as the (n, itemsize) rows of their bytes."""
    return np.ascontiguousarray(lanes).view(np.uint8).reshape(-1, lanes.dtype.itemsize)


def _compiled_rows(compiled: ModuleType, rows: U8) -> U64:
    """XXH64 of every row of a (n, width) uint8 array, by the compiled kernel. Rows a fixed
    number of bytes apart, each contiguous (a page of strings of one length, every 4 + width
    bytes), are read where they lie: the kernel takes the bytes from the first row's start to
    the last row's end, and the distance between rows."""
    n, width = rows.shape
    out = np.empty(n, dtype=np.uint64)
    if n == 0:
        return out
    stride = rows.strides[0]
    # Read in place only rows that each lie contiguous, in order and apart: then the bytes
    # from the first row's start to the last row's end all belong to the array's buffer.
    if width == 0 or (rows.strides[1] != 1 and width > 1) or stride < width:
        rows, stride = np.ascontiguousarray(rows), width
    span = np.lib.stride_tricks.as_strided(
        rows, shape=((n - 1) * stride + width,), strides=(1,), writeable=False
    )
    compiled.xxh64_rows(span, 0, stride, width, n, out)
    return out


def _chunk_words(
    data: U8, starts: I64, lengths: I64, scratch: list[NDArray[np.uint64]]
) -> tuple[U64, I64]:
    """Copy the bytes one chunk of spans covers into a zero-padded, aligned uint64 buffer.

    Returns the buffer and the span starts rebased into it. One copy of the chunk's bytes
    (cache-sized) replaces unaligned reads from the whole buffer: every 8-byte read becomes
    two aligned loads and a funnel shift, and spare zero words at the end let reads run past
    a value's last byte without a bounds check (a tail's lanes are read for every value, up
    to four words past its start, see _hash_spans_chunk). Spans far apart (e.g. short values in a
    wide numpy 'S' array) are packed instead of copying the gaps. ``scratch`` holds the
    buffer between chunks, so it is allocated (and page-faulted) once. The words are read
    in native order: this assumes a little-endian host (x86-64, ARM64).
    """
    ends = starts + lengths
    lo, hi = int(starts.min()), int(ends.max())
    total = int(lengths.sum())
    if hi - lo > 8 * total + 4096:
        rebased = np.cumsum(lengths) - lengths
        source = data[np.repeat(starts - rebased, lengths) + np.arange(total)]
    else:
        rebased = starts - lo
        source = data[lo:hi]
    size = source.shape[0]
    nwords = size // 8 + _SPARE_WORDS
    if scratch[0].shape[0] < nwords:
        scratch[0] = np.empty(max(nwords, 2 * scratch[0].shape[0]), dtype=np.uint64)
    words = scratch[0][:nwords]
    words[-_SPARE_WORDS:] = 0
    words.view(np.uint8)[:size] = source
    return words, rebased


def _stripes(words: U64, starts: I64, nstripes: I64) -> U64:
    """Accumulate the 32-byte stripes of values of 32 bytes or more, then converge.

    The values are put in order of their stripe count, most first (a radix argsort), so
    the values that take stripe s are a prefix: no masks, no wasted work.
    """
    m = starts.shape[0]
    top = int(nstripes.max())
    key = top - nstripes
    order = np.argsort(key.astype(np.uint16) if top < 1 << 16 else key, kind="stable")
    ordered = nstripes[order]
    taking = m - np.cumsum(np.bincount(ordered, minlength=top + 1))  # values with > s
    pos = starts[order]
    q = pos >> 3  # a value's stripes all share its alignment: shifts computed once
    sh = ((pos & 7) << 3).astype(np.uint64)
    ish = np.subtract(np.uint64(64), sh)
    acc = np.empty((4, m), dtype=np.uint64)
    for j, init in enumerate((_V1_INIT, _V2_INIT, _V3_INIT, _V4_INIT)):
        acc[j] = init
    lo, hi, lane, t = np.empty((4, m), dtype=np.uint64)
    base = np.empty(m, dtype=np.int64)
    for s in range(top):
        k = int(taking[s])
        b = base[:k]
        np.add(q[:k], 4 * s, out=b)
        np.take(words, b, out=lo[:k], mode=_GATHER)
        for j in range(4):
            b += 1
            np.take(words, b, out=hi[:k], mode=_GATHER)
            np.right_shift(lo[:k], sh[:k], out=lane[:k])
            np.left_shift(hi[:k], ish[:k], out=t[:k])
            lane[:k] |= t[:k]
            _round(acc[j, :k], lane[:k], t[:k])
            lo, hi = hi, lo
    out = np.empty(m, dtype=np.uint64)
    out[order] = _converge([acc[0], acc[1], acc[2], acc[3]])
    return out


def _step_tables() -> tuple[NDArray[np.int64], U64, U64]:
    """Which tail steps a value takes, by its tail length r = length % 32 (0-31).

    Rows: the 8-byte lanes k = 0, 1, 2 (r >= 8k + 8), the 4-byte lane (r & 4), the single
    bytes j = 0, 1, 2 (r & 3 > j). Returns the rows as 0/1 (to count takers from a histogram
    of r), as all-ones/zero uint64 masks (to blend), and the shift that drops the 4-byte lane
    from the last partial word (32 if r & 4 else 0).
    """
    r = np.arange(32)
    rows = [r >= 8 * (k + 1) for k in range(3)] + [(r & 4) > 0] + [(r & 3) > j for j in range(3)]
    applies = np.array(rows, dtype=np.int64)
    masks = np.where(applies > 0, np.uint64(_M64), np.uint64(0)).astype(np.uint64)
    return applies, masks, ((r & 4) << 3).astype(np.uint64)


_STEP_APPLIES, _STEP_MASKS, _LANE4_SHIFT = _step_tables()


class _Chain:
    """Run nested XXH64 steps on the values that take them, branch-free.

    Strings of different lengths take different tail steps, but within one phase the takers
    of each step are a subset of the previous step's (a value with three 8-byte lanes also
    has two). Gathering the takers (fancy indexing) costs more than the step itself, so once
    a step is not taken by all, the phase runs on a copy of every state, ``running``, and
    after each step the takers' states are blended into ``h`` under a mask (looked up by
    tail length). Values that have stopped keep stepping in ``running``, harmlessly.
    """

    def __init__(self, h: U64, running: U64, mask: U64, tmp: U64, rem: I64) -> None:
        self.h, self.running, self.mask, self.tmp, self.rem = h, running, mask, tmp, rem
        self.split = False

    def state(self, takers: int) -> U64:
        """The array to run the next step on."""
        if not self.split and takers == self.h.shape[0]:
            return self.h  # everyone so far: step in place
        if not self.split:
            np.copyto(self.running, self.h)
            self.split = True
        return self.running

    def commit(self, step: int) -> None:
        """Keep the step's result for the values that take it."""
        if self.split:  # h ^= (h ^ running) & mask
            np.take(_STEP_MASKS[step], self.rem, out=self.mask, mode=_GATHER)
            np.bitwise_xor(self.running, self.h, out=self.tmp)
            self.tmp &= self.mask
            self.h ^= self.tmp


def _hash_spans_chunk(
    data: U8,
    starts: I64,
    lengths: I64,
    h: U64,
    ws: U64,
    wi: I64,
    scratch: list[NDArray[np.uint64]],
) -> None:
    """XXH64 of data[starts[i] : starts[i] + lengths[i]] for every i, into ``h``.

    ``ws``/``wi`` are preallocated rows of scratch (uint64, int64), so the steps below
    allocate nothing: fresh temporaries cost page faults that doubled the time. Every pass
    over the chunk counts (about 0.3 ns a value each), hence the lookup tables.
    """
    n = starts.shape[0]
    words, pos = _chunk_words(data, starts, lengths, scratch)
    t, t2, w, lo, hi, sh, ish, running, mask = (row[:n] for row in ws)
    rem, q0, qi = (row[:n] for row in wi)
    longest = int(lengths.max())
    # The state before the tail: P5 + length, or for 32 bytes and more the converged
    # stripes + length. (Lengths are >= 0: their int64 bits are their uint64 bits.)
    np.add(lengths.view(np.uint64), _P5, out=h)
    if longest >= 32:
        big = np.flatnonzero((lengths >= 32) & (lengths < _HUGE_VALUE))
        if big.shape[0]:
            long_lengths = lengths[big]
            h[big] = _stripes(words, pos[big], long_lengths >> 5) + long_lengths.view(np.uint64)
    np.bitwise_and(lengths, 31, out=rem)  # bytes left after the stripes, < 32
    counts = (_STEP_APPLIES @ np.bincount(rem, minlength=32)).tolist()  # takers per step
    # Where the tail starts; all its words share that alignment, so word k is the funnel of
    # words[q0 + k] and words[q0 + k + 1]: each aligned word is loaded once, shifts computed
    # once.
    np.subtract(lengths, rem, out=qi)
    qi += pos
    np.bitwise_and(qi, 7, out=sh, casting="unsafe")
    sh <<= np.uint64(3)
    np.subtract(np.uint64(64), sh, out=ish)
    np.right_shift(qi, 3, out=q0)
    chain = _Chain(h, running, mask, t, rem)
    if counts[0]:
        np.take(words, q0, out=lo, mode=_GATHER)
        np.copyto(qi, q0)
        for k in range(3):  # 8-byte lanes: values with more than k left
            if counts[k] == 0:
                break
            qi += 1
            np.take(words, qi, out=hi, mode=_GATHER)
            np.right_shift(lo, sh, out=w)
            np.left_shift(hi, ish, out=t)
            w |= t
            lo, hi = hi, lo
            _mix_lane8(chain.state(counts[k]), w, t, t2)
            chain.commit(k)
    if counts[3] == 0 and counts[4] == 0:
        _avalanche(h, t)
        _replace_huge(data, starts, lengths, h, longest)
        return
    # The last partial word (a 4-byte lane and/or 1-3 bytes): read once, taken apart. It
    # is word rem // 8 of the tail.
    np.right_shift(rem, 3, out=qi)
    qi += q0
    np.take(words, qi, out=w, mode=_GATHER)
    qi += 1
    np.take(words, qi, out=hi, mode=_GATHER)
    w >>= sh
    hi <<= ish
    w |= hi
    if counts[3]:
        chain = _Chain(h, running, mask, t, rem)
        np.bitwise_and(w, np.uint64(0xFFFFFFFF), out=lo)
        _mix_lane4(chain.state(counts[3]), lo, t2)
        chain.commit(3)
        np.take(_LANE4_SHIFT, rem, out=lo, mode=_GATHER)  # the bytes follow the lane
        w >>= lo
    chain = _Chain(h, running, mask, t, rem)
    for j in range(3):  # single bytes: values with more than j left
        if counts[4 + j] == 0:
            break
        np.bitwise_and(w, np.uint64(0xFF), out=lo)
        _mix_byte(chain.state(counts[4 + j]), lo, t2)
        chain.commit(4 + j)
        w >>= np.uint64(8)
    _avalanche(h, t)
    _replace_huge(data, starts, lengths, h, longest)


def _replace_huge(data: U8, starts: I64, lengths: I64, h: U64, longest: int) -> None:
    """Put the hashes of values of _HUGE_VALUE bytes or more over the garbage the
    vectorised steps left in their states."""
    if longest >= _HUGE_VALUE:
        huge = np.flatnonzero(lengths >= _HUGE_VALUE)
        h[huge] = _hash_huge(data, starts[huge], lengths[huge])


def _hash_huge(data: U8, starts: I64, lengths: I64) -> U64:
    """XXH64 of values of _HUGE_VALUE bytes or more, one xxhash call each.

    The vectorised path costs a round of numpy calls per 32-byte stripe index, so one
    1 MiB value would cost 32768 rounds; xxhash's C loop hashes it at memory speed, and at
    this size its per-call overhead is a few percent.
    """
    spans = zip(starts.tolist(), lengths.tolist(), strict=True)
    view = np.ascontiguousarray(data).data  # a memoryview: xxhash reads it in place
    digests = (xxhash.xxh64_intdigest(view[s : s + n]) for s, n in spans)
    return np.fromiter(digests, dtype=np.uint64, count=starts.shape[0])


def _hash_spans(data: U8, starts: I64, lengths: I64) -> U64:
    """XXH64 of every byte span data[starts[i] : starts[i] + lengths[i]]."""
    starts = starts.astype(np.int64, copy=False)
    lengths = lengths.astype(np.int64, copy=False)
    n = starts.shape[0]
    compiled = kernels.compiled
    if compiled is not None:
        out = np.empty(n, dtype=np.uint64)
        compiled.xxh64_spans(
            np.ascontiguousarray(data),
            np.ascontiguousarray(starts),
            np.ascontiguousarray(lengths),
            out,
        )
        return out
    if n and _back_to_back(starts, lengths):
        # Values of one length stored one after another (UUIDs or digests as text, fixed-width
        # codes) already form an (n, width) matrix, which the fixed-width kernel hashes several
        # times faster than the span-by-span rounds below.
        first, width = int(starts[0]), int(lengths[0])
        return _hash_rows(data[first : first + n * width].reshape(n, width))
    out = np.empty(n, dtype=np.uint64)
    size = min(n, _SPAN_CHUNK)
    ws = np.empty((9, size), dtype=np.uint64)
    wi = np.empty((3, size), dtype=np.int64)
    scratch = [np.empty(0, dtype=np.uint64)]
    for lo in range(0, n, _SPAN_CHUNK):
        _hash_spans_chunk(
            data,
            starts[lo : lo + _SPAN_CHUNK],
            lengths[lo : lo + _SPAN_CHUNK],
            out[lo : lo + _SPAN_CHUNK],
            ws,
            wi,
            scratch,
        )
    return out


def _back_to_back(starts: I64, lengths: I64) -> bool:
    """Whether every span has the first one's length and starts where the previous ends."""
    width = lengths[0]
    return bool((lengths == width).all() and (np.diff(starts) == width).all())


def xxh64_fixed(data: np.ndarray) -> np.ndarray:
    """XXH64 (seed 0) of every row of a 2-D uint8 array ``(n, width)``, any ``width >= 0``.

    Returns a uint64 array of shape ``(n,)``. Widths 4 and 8 take unrolled fast paths. The
    rows need not be contiguous (a strided view is read a cache-sized part at a time).
    """
    if not isinstance(data, np.ndarray):
        raise TypeError(f"xxh64_fixed expects a numpy array, not {type(data).__name__}")
    if data.dtype != np.uint8 or data.ndim != 2:
        raise TypeError(
            f"xxh64_fixed expects a 2-D uint8 array (n, width), not {data.ndim}-D {data.dtype}"
        )
    return _hash_rows(data)  # contiguous or not


def xxh64_variable(
    data: np.ndarray | bytes | bytearray | memoryview, offsets: np.ndarray
) -> np.ndarray:
    """XXH64 (seed 0) of ``data[offsets[i]:offsets[i + 1]]`` for every i (Arrow layout).

    ``data`` is a 1-D uint8 buffer (or any bytes-like object), ``offsets`` an int32/int64
    array of n + 1 non-decreasing offsets into it; ``offsets[0]`` need not be 0. Returns a
    uint64 array of shape ``(n,)``.
    """
    buf = _as_byte_buffer(data)
    offs = np.asarray(offsets)
    if offs.ndim != 1 or offs.dtype.kind not in "iu":
        raise TypeError(f"offsets must be a 1-D integer array, not {offs.ndim}-D {offs.dtype}")
    if offs.shape[0] <= 1:
        return np.empty(0, dtype=np.uint64)
    offs = offs.astype(np.int64)
    lengths = np.diff(offs)
    if offs[0] < 0 or offs[-1] > buf.shape[0] or (lengths < 0).any():
        raise ValueError(
            f"offsets must be non-decreasing and within the {buf.shape[0]}-byte buffer "
            f"(got {int(offs[0])}..{int(offs[-1])}"
            f"{', decreasing' if (lengths < 0).any() else ''})"
        )
    return _hash_spans(buf, offs[:-1], lengths)


def xxh64_spans(
    data: np.ndarray | bytes | bytearray | memoryview, starts: Any, lengths: Any
) -> U64:
    """XXH64 (seed 0) of ``data[starts[i] : starts[i] + lengths[i]]`` for every i: byte strings
    that need not lie in order or back to back (a selection of a dictionary's entries).

    ``starts`` and ``lengths`` are 1-D integer arrays of one length. Returns uint64 ``(n,)``.
    """
    buf = _as_byte_buffer(data)
    s = np.asarray(starts)
    n = np.asarray(lengths)
    if s.ndim != 1 or n.shape != s.shape or s.dtype.kind not in "iu" or n.dtype.kind not in "iu":
        raise TypeError("starts and lengths must be 1-D integer arrays of one length")
    s = s.astype(np.int64, copy=False)
    n = n.astype(np.int64, copy=False)
    if s.size and (int(s.min()) < 0 or int(n.min()) < 0 or int((s + n).max()) > buf.shape[0]):
        raise ValueError(f"spans must lie within the {buf.shape[0]}-byte buffer")
    if s.size == 0:
        return np.empty(0, dtype=np.uint64)
    return _hash_spans(buf, s, n)


def _as_byte_buffer(data: object) -> U8:
    """A 1-D uint8 view of a bytes-like object or uint8 array, without copying."""
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8 or data.ndim != 1:
            raise TypeError(f"data must be a 1-D uint8 array, not {data.ndim}-D {data.dtype}")
        return np.ascontiguousarray(data)
    if isinstance(data, bytes | bytearray | memoryview):
        return np.frombuffer(data, dtype=np.uint8)
    raise TypeError(f"data must be a uint8 array or bytes-like, not {type(data).__name__}")


# --------------------------------------------------------------------------------------------
# PLAIN encoding (parquet-format Encodings.md, "Plain: (PLAIN = 0)") and dispatch.
# --------------------------------------------------------------------------------------------


def _check_physical_type(physical_type: str | None) -> str | None:
    if physical_type is None:
        return None
    if not isinstance(physical_type, str):
        raise TypeError(
            f"physical_type must be a str such as 'INT64', not {type(physical_type).__name__}"
        )
    name = physical_type.upper()
    if name not in PHYSICAL_TYPES:
        raise ValueError(
            f"unknown Parquet physical type {physical_type!r}; expected one of {PHYSICAL_TYPES}"
        )
    if name == "BOOLEAN":
        raise ValueError(_BOOLEAN_MESSAGE)
    return name


def _check_type_length(physical_type: str, type_length: int | None) -> int | None:
    """The width of a FIXED_LEN_BYTE_ARRAY value; ignored for other types, whose schema
    elements may carry a meaningless type_length."""
    if physical_type == "INT96":
        return 12
    if physical_type != "FIXED_LEN_BYTE_ARRAY":
        return None
    if type_length is None:
        raise ValueError("FIXED_LEN_BYTE_ARRAY needs type_length (the width of every value)")
    if isinstance(type_length, bool) or not isinstance(type_length, int | np.integer):
        raise TypeError(f"type_length must be an int, not {type(type_length).__name__}")
    if type_length < 0:
        raise ValueError(f"type_length must be >= 0, not {type_length}")
    return int(type_length)


def _describe(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def _cannot(value: object, physical_type: str, why: str) -> ValueError:
    return ValueError(f"cannot encode {_describe(value)} as {physical_type}: {why}")


def _is_known_scalar(value: object) -> bool:
    """Scalars this module knows how to encode as *some* physical type: a mismatch with the
    requested type is then a ValueError, anything else a TypeError."""
    return isinstance(value, int | float | str | bytes | bytearray | memoryview | np.generic)


def _wrong_value(value: object, physical_type: str, why: str) -> Exception:
    """ValueError for a value of a kind this module encodes, but not as ``physical_type``;
    TypeError for an object that is no value at all."""
    if _is_known_scalar(value):
        return _cannot(value, physical_type, why)
    return TypeError(
        f"cannot encode {_describe(value)} as {physical_type}: not a supported value "
        "(int, float, str, bytes-like or numpy scalar)"
    )


def _empty() -> U64:
    return np.empty(0, dtype=np.uint64)


_INT_RANGE = {
    # Parquet has no unsigned physical types: uint32/uint64 are stored (and hashed) by bit
    # pattern in INT32/INT64, so a value fits if it fits the signed or the unsigned range.
    "INT32": (-(1 << 31), (1 << 32) - 1),
    "INT64": (-(1 << 63), (1 << 64) - 1),
}


def _int_lanes(arr: NDArray[Any], physical_type: str) -> NDArray[Any]:
    """Integer array -> little-endian uint32 (INT32) or uint64 (INT64) bit patterns.

    Narrower types widen as Parquet stores them (sign-extend signed, zero-extend unsigned);
    same-width unsigned keeps its bit pattern; a wider array must hold values that fit.
    """
    if physical_type == "INT32" and arr.dtype.itemsize > 4:
        lo, hi = _INT_RANGE[physical_type]
        bad = (arr > hi) if arr.dtype.kind == "u" else (arr < lo) | (arr > hi)
        if bad.any():
            raise _cannot(arr[int(np.argmax(bad))], physical_type, f"outside [{lo}, {hi}]")
        return (arr & 0xFFFFFFFF).astype(np.uint32)
    if arr.dtype.kind == "i":
        if physical_type == "INT32":
            return arr.astype(np.int32, copy=False).view(np.uint32)
        return arr.astype(np.int64, copy=False).view(np.uint64)
    return arr.astype(np.uint32 if physical_type == "INT32" else np.uint64, copy=False)


def _float_lanes(arr: NDArray[Any], physical_type: str) -> NDArray[Any]:
    """Float (or integer) array -> raw IEEE-754 bits as uint32 (FLOAT) or uint64 (DOUBLE).

    No canonicalisation: -0.0 and +0.0, and NaN payloads, keep their own bits, because the
    writer hashes the bits it stores. A finite value too large for float32 is an error
    rather than silently becoming infinity.
    """
    target = np.dtype(np.float32 if physical_type == "FLOAT" else np.float64)
    if arr.dtype.kind in "iu":
        # An integer becomes a double first, as float(value) does in plain_encode.
        arr = arr.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        cast = arr.astype(target, copy=False)
    if arr.dtype.kind == "f" and arr.dtype.itemsize > target.itemsize:
        bad = np.isinf(cast) & np.isfinite(arr)
        if bad.any():
            raise _cannot(arr[int(np.argmax(bad))], physical_type, "too large for its range")
    return cast.view(np.uint32 if physical_type == "FLOAT" else np.uint64)


def _utf8_from_unicode(arr: NDArray[np.str_]) -> tuple[U8, I64, I64]:
    """UTF-8 of a 1-D numpy 'U' array as (data, starts, lengths), vectorised.

    numpy stores UTF-32; a value ends before its trailing NULs (``np.char.str_len``). ASCII
    (checked with one max over the codepoints) keeps the fixed-width layout, one byte per
    codepoint, so its values are spans with gaps; anything else is encoded codepoint-wise.
    """
    n, chars = arr.shape[0], arr.dtype.itemsize // 4
    native = arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))
    cps = np.ascontiguousarray(native).view(np.uint32).reshape(n, chars)
    nchars = np.char.str_len(native).astype(np.int64)
    if chars == 0 or int(cps.max()) < 0x80:
        starts = np.arange(n, dtype=np.int64) * chars
        return cps.astype(np.uint8).reshape(-1), starts, nchars
    return _utf8_from_codepoints(cps, nchars)


def _utf8_continuation(cps: NDArray[np.uint32], shift: int) -> U8:
    """The UTF-8 continuation byte 10xxxxxx holding bits shift..shift+5 of each codepoint."""
    return (((cps >> shift) & 0x3F) | 0x80).astype(np.uint8)


def _utf8_from_codepoints(cps: NDArray[np.uint32], nchars: I64) -> tuple[U8, I64, I64]:
    """Vectorised UTF-8 encoding of a (n, k) UTF-32 matrix whose rows hold nchars[i] chars.

    Every codepoint gets 4 byte slots (lead byte, then continuation bytes) and a size of
    1-4; keeping the first ``size`` slots of each packs the strings back to back.
    """
    n, k = cps.shape
    surrogate = (cps >= 0xD800) & (cps <= 0xDFFF)  # padding is 0, never a surrogate
    if surrogate.any():
        row = int(np.argmax(surrogate.any(axis=1)))
        text = "".join(map(chr, cps[row, : nchars[row]].tolist()))
        raise _cannot(text, "BYTE_ARRAY", "a lone surrogate has no UTF-8 encoding")
    size = np.where(cps < 0x80, 1, np.where(cps < 0x800, 2, np.where(cps < 0x10000, 3, 4)))
    size[np.arange(k) >= nchars[:, None]] = 0  # padding after the value's last char
    two, three = size == 2, size == 3
    lead = np.where(two, 0xC0 | (cps >> 6), np.where(three, 0xE0 | (cps >> 12), 0xF0 | (cps >> 18)))
    out = np.empty((n, k, 4), dtype=np.uint8)
    out[..., 0] = np.where(size == 1, cps, lead).astype(np.uint8)
    c0, c6, c12 = (_utf8_continuation(cps, s) for s in (0, 6, 12))
    out[..., 1] = np.where(two, c0, np.where(three, c6, c12))
    out[..., 2] = np.where(three, c0, c6)
    out[..., 3] = c0
    data: U8 = out[np.arange(4) < size[..., None]]
    lengths = size.sum(axis=1).astype(np.int64)
    return data, np.cumsum(lengths) - lengths, lengths


def _spans_to_rows(
    data: U8, starts: I64, lengths: I64, width: int, physical_type: str, show: _Show
) -> U8:
    """Fixed-width rows from byte spans that must all be ``width`` bytes long."""
    bad = lengths != width
    if bad.any():
        i = int(np.argmax(bad))
        raise _cannot(show(i), physical_type, f"{int(lengths[i])} bytes, not {width}")
    rows: U8 = data[starts[:, None] + np.arange(width)]
    return rows


def _hash_spans_as(
    data: U8,
    starts: I64,
    lengths: I64,
    physical_type: str,
    type_length: int | None,
    show: _Show,
) -> U64:
    """Hash byte-string values as BYTE_ARRAY (as they are) or fixed width (length-checked)."""
    if physical_type == "BYTE_ARRAY":
        return _hash_spans(data, starts, lengths)
    if physical_type in ("FIXED_LEN_BYTE_ARRAY", "INT96") and type_length is not None:
        return _hash_rows(_spans_to_rows(data, starts, lengths, type_length, physical_type, show))
    raise _cannot(show(0), physical_type, "a byte string is not a number")


def _hash_rows_as(rows: U8, physical_type: str, type_length: int | None, show: _Show) -> U64:
    """Hash fixed-size byte values as FIXED_LEN_BYTE_ARRAY/INT96 (width-checked) or as
    BYTE_ARRAY (all bytes, as they are)."""
    n, width = rows.shape
    if physical_type == "BYTE_ARRAY":
        return _hash_rows(rows)  # the same bytes: BYTE_ARRAY hashes no length prefix
    if physical_type in ("FIXED_LEN_BYTE_ARRAY", "INT96"):
        if n and width != type_length:
            raise _cannot(show(0), physical_type, f"{width} bytes, not {type_length}")
        return _hash_rows(rows)
    raise _cannot(show(0), physical_type, "a byte string is not a number")


# ---- numpy arrays ---------------------------------------------------------------------------


def _infer_dtype(dtype: np.dtype[Any], example: Callable[[], object]) -> tuple[str, int | None]:
    """The physical type a numpy dtype is written as: pyarrow.parquet's choice for the Arrow
    type of the same name (uint32 -> INT32 by bit pattern, float16 -> FLBA(2), ...)."""
    kind, size = dtype.kind, dtype.itemsize
    if kind == "b":
        raise ValueError(_BOOLEAN_MESSAGE)
    if kind in "iu":
        return ("INT32", None) if size <= 4 else ("INT64", None)
    if kind == "f" and size == 2:
        return ("FIXED_LEN_BYTE_ARRAY", 2)
    if kind == "f" and size == 4:
        return ("FLOAT", None)
    if kind == "f" and size == 8:
        return ("DOUBLE", None)
    if kind in "SU":
        return ("BYTE_ARRAY", None)
    hint = " (convert it with pyarrow.array() first)" if kind in "Mm" else ""
    raise TypeError(
        f"cannot hash {_describe(example())}: numpy dtype {dtype} has no Parquet physical "
        f"type{hint}"
    )


def _hash_ndarray(arr: NDArray[Any], physical_type: str | None, type_length: int | None) -> U64:
    """Hash a numpy array's values, flattened in C order (but a 2-D uint8 array holds one
    FIXED_LEN_BYTE_ARRAY/INT96 value per row)."""
    if arr.dtype.kind in "OT":  # Python objects, or numpy 2 variable-width strings
        return _hash_list(arr.ravel().tolist(), physical_type, type_length)
    as_rows = (
        physical_type in ("FIXED_LEN_BYTE_ARRAY", "INT96")
        and arr.ndim == 2
        and arr.dtype == np.uint8
    )
    if not as_rows:
        arr = arr.ravel()

    def show(i: int) -> object:
        return arr[i] if arr.ndim == 1 else arr[i].tobytes()

    if physical_type is None:
        physical_type, type_length = _infer_dtype(arr.dtype, lambda: arr[0] if arr.size else arr)
    if arr.shape[0] == 0:
        return _empty()
    kind = arr.dtype.kind
    if kind == "b":
        raise _cannot(show(0), physical_type, "a boolean is not a number or bytes")
    if physical_type in ("INT32", "INT64"):
        if kind not in "iu":
            raise _cannot(show(0), physical_type, "not an integer")
        lanes = _int_lanes(arr, physical_type)
        return _hash_u32(lanes) if physical_type == "INT32" else _hash_u64(lanes)
    if physical_type in ("FLOAT", "DOUBLE"):
        if kind not in "iuf":
            raise _cannot(show(0), physical_type, "not a number")
        lanes = _float_lanes(arr, physical_type)
        return _hash_u32(lanes) if physical_type == "FLOAT" else _hash_u64(lanes)
    n = arr.shape[0]
    if as_rows:
        return _hash_rows_as(np.ascontiguousarray(arr), physical_type, type_length, show)
    if kind in "SV":
        rows = np.ascontiguousarray(arr).view(np.uint8).reshape(n, arr.dtype.itemsize)
        if physical_type == "BYTE_ARRAY" and kind == "S":
            # A numpy 'S' value ends before its trailing NULs; a fixed-width column keeps
            # every byte instead (a UUID may end in zero bytes).
            starts = np.arange(n, dtype=np.int64) * arr.dtype.itemsize
            lengths = np.char.str_len(arr).astype(np.int64)
            return _hash_spans(rows.reshape(-1), starts, lengths)
        return _hash_rows_as(rows, physical_type, type_length, show)
    if kind == "U":
        data, starts, lengths = _utf8_from_unicode(arr)
        return _hash_spans_as(data, starts, lengths, physical_type, type_length, show)
    if kind == "f" and arr.dtype.itemsize == 2 and physical_type == "FIXED_LEN_BYTE_ARRAY":
        # Half floats: pyarrow writes FIXED_LEN_BYTE_ARRAY(2) of the little-endian bits.
        rows = np.ascontiguousarray(arr.astype("<f2")).view(np.uint8).reshape(n, 2)
        return _hash_rows_as(rows, physical_type, type_length, show)
    raise _cannot(show(0), physical_type, "not a byte string")


# ---- Python values --------------------------------------------------------------------------


def _infer_scalar(value: object) -> tuple[str, int | None]:
    """The physical type a Python or numpy scalar is hashed as when none is given."""
    if isinstance(value, bool | np.bool_):
        raise ValueError(_BOOLEAN_MESSAGE)
    if isinstance(value, str | bytes | bytearray | memoryview):
        return ("BYTE_ARRAY", None)
    if isinstance(value, int):
        return ("INT64", None)
    if isinstance(value, float):  # np.float64 included: DOUBLE either way
        return ("DOUBLE", None)
    if isinstance(value, np.generic):
        return _infer_dtype(value.dtype, lambda: value)
    raise TypeError(
        f"cannot hash {_describe(value)}: expected an int, float, str, bytes-like or numpy "
        "scalar, a sequence of them, a numpy array or a pyarrow Array/ChunkedArray"
    )


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _hash_blobs(values: list[Any], kind: type, physical_type: str, type_length: int | None) -> U64:
    """Hash same-typed str/bytes-like values as spans of one concatenated buffer."""
    if physical_type not in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY", "INT96"):
        raise _cannot(values[0], physical_type, "a string is not a number")
    if issubclass(kind, str) and physical_type == "INT96":
        raise _cannot(values[0], physical_type, "INT96 values are 12 raw bytes")
    packed = _pack_with_arrow(values, kind)
    if packed is None:
        packed = _pack_with_join(values, kind, physical_type)
    data, starts, lengths = packed
    return _hash_spans_as(data, starts, lengths, physical_type, type_length, values.__getitem__)


def _pack_with_arrow(values: list[Any], kind: type) -> tuple[U8, I64, I64] | None:
    """UTF-8 encode and concatenate with pyarrow (a dependency): one C loop, about three
    times faster than str.encode + bytes.join. None if pyarrow refuses the values."""
    import pyarrow as pa

    try:
        arr = pa.array(
            values, type=pa.large_string() if issubclass(kind, str) else pa.large_binary()
        )
    except (pa.ArrowException, UnicodeError, TypeError, ValueError):
        return None
    offsets = _arrow_offsets(arr, "<i8")
    buf = arr.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.empty(0, np.uint8)
    return data, offsets[:-1], np.diff(offsets)


def _pack_with_join(values: list[Any], kind: type, physical_type: str) -> tuple[U8, I64, I64]:
    """The same with C-level str.encode/bytes.join; also finds the value that fails."""
    blobs: list[Any] = values
    if issubclass(kind, str):
        try:
            blobs = list(map(str.encode, values))
        except UnicodeEncodeError:
            bad = next(v for v in values if not _encodes(v))
            raise _cannot(bad, physical_type, "not valid UTF-8 (lone surrogate)") from None
    elif issubclass(kind, memoryview):
        blobs = list(map(memoryview.tobytes, values))
    lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs))
    data = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    return data, np.cumsum(lengths) - lengths, lengths


def _hash_ints(values: list[Any], kind: type, physical_type: str) -> U64:
    """Hash Python ints as INT32/INT64 (range-checked) or FLOAT/DOUBLE (converted)."""
    ints = values if kind is int else list(map(int, values))  # int subclasses, e.g. IntEnum
    if physical_type in ("FLOAT", "DOUBLE"):
        try:
            floats = np.array(ints, dtype=np.float64)
        except OverflowError:
            bad = next(v for v in values if abs(int(v)) >= 2**1024)
            raise _cannot(bad, physical_type, "too large for its range") from None
        return _hash_ndarray(floats, physical_type, None)
    if physical_type not in _INT_RANGE:
        raise _cannot(values[0], physical_type, "an integer is not a byte string")
    lo, hi = _INT_RANGE[physical_type]
    try:
        arr = np.array(ints, dtype=np.int64)
    except OverflowError:
        pass
    else:
        if physical_type == "INT32":  # checked here to name the Python value, not numpy's
            bad = (arr < lo) | (arr > hi)
            if bad.any():
                raise _cannot(values[int(np.argmax(bad))], physical_type, f"outside [{lo}, {hi}]")
        return _hash_ndarray(arr, physical_type, None)
    # Some value is outside int64: check the range exactly on Python ints (object arrays
    # compare in C), then keep the low 64 bits, which is the uint64 bit pattern.
    obj = np.array(ints, dtype=object)
    bad = (obj < lo) | (obj > hi)
    if bad.any():
        raise _cannot(values[int(np.argmax(bad))], physical_type, f"outside [{lo}, {hi}]")
    return _hash_ndarray((obj & _M64).astype(np.uint64), physical_type, None)


def _hash_same_type(
    values: list[Any], kind: type, physical_type: str | None, type_length: int | None
) -> U64:
    """Hash non-empty ``values`` that all have the Python type ``kind``."""
    target, tl = (physical_type, type_length)
    if target is None:
        target, tl = _infer_scalar(values[0])
    if issubclass(kind, str | bytes | bytearray | memoryview):  # np.str_/np.bytes_ too
        return _hash_blobs(values, kind, target, tl)
    if issubclass(kind, bool | np.bool_):
        raise _cannot(values[0], target, "a boolean is not a number or bytes")
    if issubclass(kind, np.generic) and not issubclass(kind, float):
        return _hash_ndarray(np.array(values), target, tl)
    if issubclass(kind, int):
        return _hash_ints(values, kind, target)
    if issubclass(kind, float):
        if target not in ("FLOAT", "DOUBLE"):
            why = "not an integer" if target in _INT_RANGE else "a float is not a byte string"
            raise _cannot(values[0], target, why)
        return _hash_ndarray(np.array(values, dtype=np.float64), target, tl)
    raise _wrong_value(values[0], target, "unsupported value")


_NONE_TYPE = type(None)


def _hash_list(values: list[Any], physical_type: str | None, type_length: int | None) -> U64:
    """Hash a list of scalars, skipping None.

    Values are grouped by Python type (usually one; found by a C-level ``set(map(type))``),
    each group is encoded at once, and the hashes are put back in input order.
    """
    types = set(map(type, values))
    if len(types) == 1 and _NONE_TYPE not in types:
        return _hash_same_type(values, types.pop(), physical_type, type_length)
    code = {kind: i for i, kind in enumerate(types)}
    codes = np.fromiter(map(code.__getitem__, map(type, values)), dtype=np.intp, count=len(values))
    objs = np.fromiter(values, dtype=object, count=len(values))
    present = codes != code.get(_NONE_TYPE, -1)
    codes, objs = codes[present], objs[present]
    out = np.empty(objs.shape[0], dtype=np.uint64)
    for kind, i in code.items():
        if kind is not _NONE_TYPE:
            idx = np.flatnonzero(codes == i)
            out[idx] = _hash_same_type(objs[idx].tolist(), kind, physical_type, type_length)
    return out


# ---- pyarrow arrays -------------------------------------------------------------------------


def _arrow_validity(arr: Any) -> NDArray[np.bool_] | None:
    """Validity of every slot of an Arrow array (respecting its offset), None if no nulls."""
    if arr.null_count == 0:
        return None
    length, offset = len(arr), arr.offset
    bitmap = arr.buffers()[0]
    if bitmap is None:  # e.g. a null-typed array: nothing is valid
        return np.zeros(length, dtype=np.bool_)
    first = offset // 8
    raw = np.frombuffer(bitmap, dtype=np.uint8)[first : (offset + length + 7) // 8]
    bits = np.unpackbits(raw, bitorder="little")
    return bits[offset - 8 * first : offset - 8 * first + length].astype(np.bool_)


def _arrow_fixed(arr: Any, dtype: str, valid: NDArray[np.bool_] | None) -> NDArray[Any]:
    """The values buffer of a fixed-width Arrow array as numpy, nulls dropped."""
    width = np.dtype(dtype).itemsize
    buf = arr.buffers()[1]
    if len(arr) == 0 or buf is None:
        return np.empty(0, dtype=dtype)
    vals = np.frombuffer(buf, dtype=dtype, count=min(arr.offset + len(arr), buf.size // width))
    vals = vals[arr.offset : arr.offset + len(arr)]
    return vals if valid is None else vals[valid]


def _arrow_rows(arr: Any, width: int, valid: NDArray[np.bool_] | None) -> U8:
    """The values buffer of a fixed-size binary/decimal Arrow array as (n, width) bytes."""
    buf = arr.buffers()[1]
    if len(arr) == 0 or buf is None or width == 0:
        n = len(arr) if valid is None else int(valid.sum())
        return np.empty((n, width), dtype=np.uint8)
    raw = np.frombuffer(buf, dtype=np.uint8)
    rows = raw[arr.offset * width : (arr.offset + len(arr)) * width].reshape(-1, width)
    return rows if valid is None else rows[valid]


def _decimal_width(precision: int) -> int:
    """Bytes pyarrow.parquet uses for a decimal of this precision: the fewest whose signed
    range holds 10**precision - 1 (parquet-format LogicalTypes.md, "DECIMAL")."""
    n = 1
    while 10**precision > 1 << (8 * n - 1):
        n += 1
    return n


def _decimal_big_endian(le_rows: U8, width: int, arrow_type: object) -> U8:
    """Little-endian two's-complement decimal words -> big-endian, ``width`` bytes each
    (sign-extended, or narrowed if the dropped bytes are only sign)."""
    size = le_rows.shape[1]
    be = le_rows[:, ::-1]
    if width >= size:
        sign = np.where(be[:, :1] >= 0x80, 0xFF, 0).astype(np.uint8)
        return np.ascontiguousarray(np.hstack([np.repeat(sign, width - size, axis=1), be]))
    kept = be[:, size - width :]
    sign = np.where(kept[:, :1] >= 0x80, 0xFF, 0).astype(np.uint8)
    bad = (be[:, : size - width] != sign).any(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        unscaled = int.from_bytes(le_rows[i].tobytes(), "little", signed=True)
        raise ValueError(
            f"cannot encode unscaled decimal {unscaled} ({arrow_type}) in {width} bytes"
        )
    return np.ascontiguousarray(kept)


def _minimal_twos_complement(be: U8) -> tuple[U8, I64, I64]:
    """Big-endian two's-complement rows -> each value in its fewest bytes, back to back, as
    (data, starts, lengths): a BYTE_ARRAY decimal (LogicalTypes.md, "DECIMAL": "the minimum
    number of bytes"). A leading sign byte is redundant while the next byte has the same sign
    bit; zero and -1 keep one byte."""
    n, width = be.shape
    sign = np.where(be[:, 0] >= 0x80, 0xFF, 0).astype(np.uint8)
    leading = np.logical_and.accumulate(be == sign[:, None], axis=1).sum(axis=1)
    first = be[np.arange(n), np.minimum(leading, width - 1)]
    keeps_sign = (first & 0x80) == (sign & 0x80)
    start = np.where(leading == width, width - 1, np.where(keeps_sign, leading, leading - 1))
    lengths = (width - start).astype(np.int64)
    data = np.ascontiguousarray(be[np.arange(width)[None, :] >= start[:, None]])  # row-major
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return data, starts, lengths


def _scaled(values: NDArray[np.int64], factor: int, arrow_type: object, target: str) -> I64:
    """values * factor, refusing results that overflow int64 (pyarrow's casts refuse too)."""
    limit = (2**63 - 1) // factor
    bad = (values > limit) | (values < -limit)  # not np.abs: it wraps at the int64 minimum
    if bad.any():
        raise _cannot(values[int(np.argmax(bad))], target, f"{arrow_type} overflows when scaled")
    return values * factor


def _narrow_int32(values: I64, arrow_type: object) -> NDArray[np.int32]:
    bad = (values < -(2**31)) | (values >= 2**31)
    if bad.any():
        raise _cannot(values[int(np.argmax(bad))], "INT32", f"{arrow_type} out of range")
    return values.astype(np.int32)


def _int96_rows(values: I64, unit: str, arrow_type: object) -> U8:
    """Timestamps -> INT96 (8 bytes nanoseconds of day, 4 bytes Julian day, little-endian),
    the deprecated layout pyarrow writes with use_deprecated_int96_timestamps=True."""
    factor = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit]
    nanos = _scaled(values, factor, arrow_type, "INT96")
    days = nanos // _NANOS_PER_DAY
    rows = np.empty((values.shape[0], 12), dtype=np.uint8)
    rows[:, :8] = (nanos - days * _NANOS_PER_DAY).astype("<u8").view(np.uint8).reshape(-1, 8)
    julian = (days + _JULIAN_UNIX_EPOCH).astype("<i4")
    rows[:, 8:] = julian.view(np.uint8).reshape(-1, 4)
    return rows


def _hash_arrow(values: Any, physical_type: str | None, type_length: int | None) -> U64:
    pa = sys.modules["pyarrow"]
    if isinstance(values, pa.ChunkedArray):
        _check_arrow_type(pa, values.type)
        parts = [_hash_arrow_array(pa, c, physical_type, type_length) for c in values.chunks]
        return np.concatenate(parts) if parts else _empty()
    return _hash_arrow_array(pa, values, physical_type, type_length)


def _check_arrow_type(pa: Any, t: Any) -> None:
    """Reject types without a hashable leaf early (also for empty chunked arrays)."""
    while isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        raise ValueError(_BOOLEAN_MESSAGE)
    if pa.types.is_run_end_encoded(t):
        raise TypeError(
            f"cannot hash Arrow type {t}: pyarrow.parquet does not write it; decode it first "
            "(arr.cast(arr.type.value_type))"
        )
    if pa.types.is_nested(t):
        raise TypeError(
            f"cannot hash a nested Arrow type ({t}): Bloom filters belong to leaf columns, "
            "so pass the leaf array (e.g. pyarrow.compute.list_flatten(arr) or "
            "arr.field('name'))"
        )


def _hash_arrow_array(pa: Any, arr: Any, target: str | None, tl: int | None) -> U64:
    """Hash one Arrow array's values as ``pyarrow.parquet.write_table`` stores them by default
    (format version 2.6; each conversion below was checked against a written file), or, with
    ``target`` given, as that physical type."""
    _check_arrow_type(pa, arr.type)
    while isinstance(arr.type, pa.BaseExtensionType):  # e.g. arrow.uuid: written as storage
        arr = arr.storage
    t = arr.type
    types = pa.types
    if types.is_dictionary(t):
        return _hash_arrow_dictionary(pa, arr, target, tl)
    if types.is_null(t):
        return _empty()  # written as an all-null INT32 column: nothing to hash
    valid = _arrow_validity(arr)

    def numbers(values: NDArray[Any]) -> U64:
        # Numeric values already as stored; with no target, numpy's dtype inference gives
        # pyarrow's physical type (8-32-bit ints -> INT32, float16 -> FLBA(2), ...).
        return _hash_ndarray(values, target, tl)

    if types.is_integer(t):
        sign = "i" if types.is_signed_integer(t) else "u"
        return numbers(_arrow_fixed(arr, f"<{sign}{t.bit_width // 8}", valid))
    if types.is_floating(t):
        return numbers(_arrow_fixed(arr, f"<f{t.bit_width // 8}", valid))
    if types.is_date32(t):
        return numbers(_arrow_fixed(arr, "<i4", valid))
    if types.is_date64(t):
        # Written as INT32 days; pyarrow's cast truncates toward zero (-1 ms is day 0).
        ms = _arrow_fixed(arr, "<i8", valid)
        return numbers(_narrow_int32((ms - np.fmod(ms, _MILLIS_PER_DAY)) // _MILLIS_PER_DAY, t))
    if types.is_time32(t):
        vals = _arrow_fixed(arr, "<i4", valid)
        if t.unit == "s":  # Parquet TIME has no seconds unit: written as milliseconds
            vals = _narrow_int32(_scaled(vals.astype(np.int64), 1000, t, "INT32"), t)
        return numbers(vals)
    if types.is_time64(t) or types.is_duration(t):  # durations: raw INT64 in their own unit
        return numbers(_arrow_fixed(arr, "<i8", valid))
    if types.is_timestamp(t):
        vals = _arrow_fixed(arr, "<i8", valid)
        if target == "INT96":
            return _hash_rows(_int96_rows(vals, t.unit, t))
        if t.unit == "s":  # Parquet TIMESTAMP has no seconds unit: written as milliseconds
            vals = _scaled(vals, 1000, t, "INT64")
        return numbers(vals)
    if types.is_decimal(t):
        le = _arrow_rows(arr, t.bit_width // 8, valid)
        if target in ("INT32", "INT64"):
            # The store_decimal_as_integer=True layout: the unscaled value as an integer.
            be8 = _decimal_big_endian(le, 8, t)
            return _hash_ndarray(be8.view(">i8").reshape(-1).astype(np.int64), target, None)
        if target == "BYTE_ARRAY":
            return _hash_spans(*_minimal_twos_complement(_decimal_big_endian(le, le.shape[1], t)))
        if target not in (None, "FIXED_LEN_BYTE_ARRAY"):
            raise ValueError(f"cannot encode {t} values as {target}")
        # Default: big-endian two's complement, the fewest bytes that hold the precision.
        width = _decimal_width(t.precision) if tl is None else tl
        return _hash_rows(_decimal_big_endian(le, width, t))
    if types.is_fixed_size_binary(t):
        rows = _arrow_rows(arr, t.byte_width, valid)
        if target is None:
            return _hash_rows(rows)
        return _hash_rows_as(rows, target, tl, lambda i: rows[i].tobytes())
    if any(f(t) for f in (types.is_string_view, types.is_binary_view)):
        # Views point into several buffers; one C-level cast gives the offsets layout.
        return _hash_arrow_array(pa, arr.cast(pa.large_binary()), target, tl)
    if any(f(t) for f in (types.is_string, types.is_binary)):
        offsets = _arrow_offsets(arr, "<i4")
    elif any(f(t) for f in (types.is_large_string, types.is_large_binary)):
        offsets = _arrow_offsets(arr, "<i8")
    else:
        raise TypeError(
            f"cannot hash Arrow type {t}: pyarrow.parquet does not write it as a column "
            "with a Bloom filter"
        )
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    if valid is not None:
        starts, lengths = starts[valid], lengths[valid]
    return _hash_spans_as(
        data,
        starts,
        lengths,
        target or "BYTE_ARRAY",
        tl,
        lambda i: data[starts[i] : starts[i] + lengths[i]].tobytes(),
    )


def _arrow_offsets(arr: Any, dtype: str) -> I64:
    buf = arr.buffers()[1]
    if len(arr) == 0 or buf is None:
        return np.zeros(1, dtype=np.int64)
    offs = np.frombuffer(buf, dtype=dtype)[arr.offset : arr.offset + len(arr) + 1]
    return offs.astype(np.int64)


def _hash_arrow_dictionary(
    pa: Any, arr: Any, physical_type: str | None, type_length: int | None
) -> U64:
    """Hash each dictionary entry once, then pick the hashes by index: the file stores (and
    the writer hashes) the decoded values, and a dictionary is usually far shorter."""
    dictionary = arr.dictionary
    dict_hashes = _hash_arrow_array(pa, dictionary, physical_type, type_length)
    dict_valid = _arrow_validity(dictionary)
    if dict_valid is not None:  # null entries: hashes only for the valid ones, scatter back
        full = np.zeros(len(dictionary), dtype=np.uint64)
        full[dict_valid] = dict_hashes
        dict_hashes = full
    indices = arr.indices
    t = indices.type
    dtype = f"<{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}"
    idx = _arrow_fixed(indices, dtype, _arrow_validity(indices)).astype(np.int64)
    if idx.shape[0] and (idx.min() < 0 or idx.max() >= len(dictionary)):
        raise ValueError(f"dictionary index out of range 0..{len(dictionary) - 1}")
    if dict_valid is not None:
        idx = idx[dict_valid[idx]]
    return dict_hashes[idx]


# ---- public API -----------------------------------------------------------------------------


def hash_values(
    values: object, physical_type: str | None = None, *, type_length: int | None = None
) -> np.ndarray:
    """XXH64 (seed 0) of the PLAIN encoding of every non-null value, as a uint64 array.

    ``values``: a Python scalar (int, float, str, bytes-like), a sequence of them, a numpy
    array, or a pyarrow Array/ChunkedArray (a pandas Series goes through pyarrow, as
    pyarrow.parquet writes it). None and Arrow nulls are skipped (Bloom filters hold no
    nulls), so the result can be shorter than the input.

    ``physical_type`` (one of :data:`PHYSICAL_TYPES`, any case) says how to encode; with None
    it is inferred: Python int -> INT64, float -> DOUBLE, str/bytes -> BYTE_ARRAY; numpy by
    dtype (8-32-bit ints -> INT32, 64-bit -> INT64, float32 -> FLOAT, float64 -> DOUBLE,
    float16 -> FIXED_LEN_BYTE_ARRAY(2), 'S'/'U' -> BYTE_ARRAY); pyarrow exactly as
    ``pyarrow.parquet.write_table`` stores the type by default. ``type_length`` is the
    width of FIXED_LEN_BYTE_ARRAY values (required for it, ignored for other types).

    Raises ValueError for BOOLEAN and for values that do not fit the physical type (naming
    the value and type), TypeError for objects that are not values at all.
    """
    target = _check_physical_type(physical_type)
    tl = _check_type_length(target, type_length) if target is not None else None
    pa = sys.modules.get("pyarrow")  # an Arrow object implies pyarrow is already imported
    if pa is not None and isinstance(values, pa.Array | pa.ChunkedArray):
        return _hash_arrow(values, target, tl)
    if isinstance(values, np.ndarray):
        return _hash_ndarray(values, target, tl)
    if isinstance(values, str | bytes | bytearray | memoryview | int | float | np.generic):
        return _hash_list([values], target, tl)
    if values is None:
        return _empty()
    if type(values).__module__.partition(".")[0] == "pandas":
        # As pyarrow.parquet writes pandas data: missing values (None, NaN, NA) are nulls.
        import pyarrow

        return _hash_arrow(pyarrow.Array.from_pandas(values), target, tl)
    if hasattr(values, "__array__") and not isinstance(values, Sequence):
        return _hash_ndarray(np.asarray(values), target, tl)
    if isinstance(values, Iterable) and not isinstance(values, Mapping):
        return _hash_list(list(values), target, tl)
    raise TypeError(
        f"cannot hash {_describe(values)}: expected a scalar, a sequence, a numpy array or "
        "a pyarrow Array/ChunkedArray"
    )


def plain_encode(
    value: object, physical_type: str | None, *, type_length: int | None = None
) -> bytes:
    """The PLAIN bytes of one value (BYTE_ARRAY without its 4-byte length prefix), exactly
    what a Bloom filter hashes. Written with struct/int.to_bytes, independent of the
    vectorised encoders, so each checks the other."""
    target = _check_physical_type(physical_type)
    if value is None:
        raise ValueError("None is a null: it has no PLAIN encoding and is never in a Bloom filter")
    if target is None:
        target, type_length = _infer_scalar(value)
    tl = _check_type_length(target, type_length)
    if isinstance(value, bool | np.bool_):
        raise _cannot(value, target, "booleans are not numbers or bytes")
    if target in _INT_RANGE:
        if not isinstance(value, int | np.integer):
            raise _wrong_value(value, target, "not an integer")
        lo, hi = _INT_RANGE[target]
        number = int(value)
        if not lo <= number <= hi:
            raise _cannot(value, target, f"outside [{lo}, {hi}]")
        size = 4 if target == "INT32" else 8
        return (number & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    if target in ("FLOAT", "DOUBLE"):
        fmt = "<f" if target == "FLOAT" else "<d"
        if isinstance(value, np.floating) and not isinstance(value, np.float64):
            # float32/float16 keep their exact bits (NaN payloads too) when widened or kept.
            with np.errstate(over="ignore", invalid="ignore"):
                cast = np.asarray(value).astype(fmt)
            if np.isinf(cast) and np.isfinite(value):
                raise _cannot(value, target, "too large for its range")
            return cast.tobytes()
        if not isinstance(value, int | float | np.integer):
            raise _wrong_value(value, target, "not a number")
        try:
            return struct.pack(fmt, float(value))
        except OverflowError:
            raise _cannot(value, target, "too large for its range") from None
    # Byte types.
    if isinstance(value, str):
        if target == "INT96":
            raise _cannot(value, target, "INT96 takes 12 raw bytes")
        try:
            blob = value.encode()
        except UnicodeEncodeError:
            raise _cannot(value, target, "not valid UTF-8 (lone surrogate)") from None
    elif isinstance(value, bytes | bytearray | memoryview):
        blob = bytes(value) if not isinstance(value, memoryview) else value.tobytes()
    elif isinstance(value, np.floating) and value.dtype.itemsize == 2 and tl == 2:
        blob = np.asarray(value).astype("<f2").tobytes()
    else:
        raise _wrong_value(value, target, "not a byte string")
    if tl is not None and len(blob) != tl:
        raise _cannot(value, target, f"{len(blob)} bytes, not {tl}")
    return blob


def hash_value(
    value: object, physical_type: str | None = None, *, type_length: int | None = None
) -> int:
    """XXH64 (seed 0) of one value's PLAIN encoding, via the ``xxhash`` package.

    For a single probe this beats setting up numpy arrays; it equals
    ``hash_values([value], physical_type, type_length=type_length)[0]``.
    """
    return int(xxhash.xxh64_intdigest(plain_encode(value, physical_type, type_length=type_length)))

"""XXH64 (seed 0) of many byte strings at once, in numpy uint64 arithmetic.

A Parquet Bloom filter hashes every value with XXH64, seed 0 (docs/format-notes.md#the-hash). A
Python loop over ``xxhash.xxh64_intdigest`` costs about 185 ns a value, so the hash is written
here over arrays: numpy's uint64 arithmetic wraps modulo 2**64 exactly as XXH64 requires. The
4- and 8-byte cases (INT32, INT64, FLOAT, DOUBLE) are unrolled and run in cache-sized chunks
with in-place operations; rows of one width are read from a strided view; byte strings of mixed
lengths are hashed across all values at once, step by step (values of 4 KiB or more, where a
per-value C call costs nothing in comparison, go to the xxhash package).

Where the package carries its compiled kernels (:mod:`parquet_bloom.kernels`), :func:`hash_u64`,
:func:`hash_u32`, :func:`hash_rows` and :func:`hash_spans` hand the bytes to them instead: the
same hashes, one pass a value, without the GIL. What the bytes of a value are is
:mod:`parquet_bloom._plain`'s business, not this module's.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import numpy as np
import xxhash
from numpy.typing import NDArray

from parquet_bloom import kernels

__all__ = [
    "GATHER",
    "I64",
    "PRIME64_1",
    "PRIME64_2",
    "PRIME64_3",
    "PRIME64_4",
    "PRIME64_5",
    "U8",
    "U64",
    "hash_rows",
    "hash_spans",
    "hash_u32",
    "hash_u64",
    "xxh64_fixed",
    "xxh64_spans",
    "xxh64_variable",
]

U64: TypeAlias = NDArray[np.uint64]
I64: TypeAlias = NDArray[np.int64]
U8: TypeAlias = NDArray[np.uint8]

# XXH64 primes. The filter hashes with XXH64 and seed 0 (docs/format-notes.md#the-hash; the
# hash: https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md). numpy scalars, not
# Python ints, so that array arithmetic stays in uint64 and wraps modulo 2**64.
PRIME64_1 = np.uint64(0x9E3779B185EBCA87)
PRIME64_2 = np.uint64(0xC2B2AE3D27D4EB4F)
PRIME64_3 = np.uint64(0x165667B19E3779F9)
PRIME64_4 = np.uint64(0x85EBCA77C2B2AE63)
PRIME64_5 = np.uint64(0x27D4EB2F165667C5)
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


# --------------------------------------------------------------------------------------------
# XXH64 kernels. Every function here updates uint64 arrays in place; ``tmp`` is scratch space
# of the same length, passed in so the hot loops allocate nothing per chunk.
# --------------------------------------------------------------------------------------------

# Gathers (np.take into ``out``) use mode="wrap": their indices are in range by construction
# (the word buffer has spare words past the last value), and with the default mode="raise"
# numpy gathers into a temporary buffer first ("out is always buffered", np.take's docs), which
# cost 14 % of hashing strings of mixed lengths.
GATHER: Final = "wrap"


def _rotl(x: U64, r: int, tmp: U64) -> None:
    """x = rotate_left(x, r), in place."""
    np.right_shift(x, np.uint64(64 - r), out=tmp)
    np.left_shift(x, np.uint64(r), out=x)
    np.bitwise_or(x, tmp, out=x)


def _avalanche(h: U64, tmp: U64) -> None:
    """XXH64's final mix, in place."""
    np.right_shift(h, np.uint64(33), out=tmp)
    h ^= tmp
    h *= PRIME64_2
    np.right_shift(h, np.uint64(29), out=tmp)
    h ^= tmp
    h *= PRIME64_3
    np.right_shift(h, np.uint64(32), out=tmp)
    h ^= tmp


def _round(acc: U64, lane: NDArray[Any], tmp: U64) -> None:
    """acc = rotl(acc + lane * P2, 31) * P1 (one 8-byte lane of a 32-byte stripe)."""
    np.multiply(lane, PRIME64_2, out=tmp)
    acc += tmp
    _rotl(acc, 31, tmp)
    acc *= PRIME64_1


def _mix_lane8(h: U64, lane: NDArray[Any], tmp: U64, tmp2: U64) -> None:
    """Consume one 8-byte lane of the tail: h ^= round(0, lane); h = rotl(h, 27) * P1 + P4."""
    np.multiply(lane, PRIME64_2, out=tmp)
    _rotl(tmp, 31, tmp2)
    tmp *= PRIME64_1
    h ^= tmp
    _rotl(h, 27, tmp)
    h *= PRIME64_1
    h += PRIME64_4


def _mix_lane4(h: U64, lane: NDArray[Any], tmp: U64) -> None:
    """Consume one 4-byte lane of the tail: h ^= lane * P1; h = rotl(h, 23) * P2 + P3."""
    np.multiply(lane, PRIME64_1, out=tmp)
    h ^= tmp
    _rotl(h, 23, tmp)
    h *= PRIME64_2
    h += PRIME64_3


def _mix_byte(h: U64, byte: NDArray[Any], tmp: U64) -> None:
    """Consume one tail byte: h ^= byte * P5; h = rotl(h, 11) * P1."""
    np.multiply(byte, PRIME64_5, out=tmp)
    h ^= tmp
    _rotl(h, 11, tmp)
    h *= PRIME64_1


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
        np.multiply(acc, PRIME64_2, out=tmp2)
        _rotl(tmp2, 31, tmp)
        tmp2 *= PRIME64_1
        h ^= tmp2
        h *= PRIME64_1
        h += PRIME64_4
    return h


def hash_u64(lanes: NDArray[np.uint64]) -> U64:
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
        np.multiply(lanes[lo : lo + _CHUNK], PRIME64_2, out=o)
        _rotl(o, 31, t)
        o *= PRIME64_1
        o ^= _H8_INIT
        _rotl(o, 27, t)
        o *= PRIME64_1
        o += PRIME64_4
        _avalanche(o, t)
    return out


def hash_u32(lanes: NDArray[np.uint32]) -> U64:
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
        np.multiply(lanes[lo : lo + _CHUNK], PRIME64_1, out=o)
        o ^= _H4_INIT
        _rotl(o, 23, t)
        o *= PRIME64_2
        o += PRIME64_3
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
        h = np.full(m, PRIME64_5, dtype=np.uint64)
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


def hash_rows(rows: U8, out: U64 | None = None) -> U64:
    """XXH64 of every row of a (n, width) uint8 array, contiguous or not (e.g. the values of
    a page of length-prefixed strings of one length, a row every 4 + width bytes); into
    ``out`` (n uint64, contiguous) when given."""
    compiled = kernels.compiled
    if compiled is not None:
        return _compiled_rows(compiled, rows, out)
    if out is not None:
        out[:] = hash_rows(rows)
        return out
    n, width = rows.shape
    if width == 8:
        lanes = np.ascontiguousarray(rows).view("<u8").reshape(n)
        return hash_u64(lanes.astype(np.uint64, copy=False))
    if width == 4:
        lanes = np.ascontiguousarray(rows).view("<u4").reshape(n)
        return hash_u32(lanes.astype(np.uint32, copy=False))
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


def _compiled_rows(compiled: kernels.Kernels, rows: U8, out: U64 | None = None) -> U64:
    """XXH64 of every row of a (n, width) uint8 array, by the compiled kernel. Rows a fixed
    number of bytes apart, each contiguous (a page of strings of one length, every 4 + width
    bytes), are read where they lie: the kernel takes the bytes from the first row's start to
    the last row's end, and the distance between rows."""
    n, width = rows.shape
    if out is None:
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
        np.take(words, b, out=lo[:k], mode=GATHER)
        for j in range(4):
            b += 1
            np.take(words, b, out=hi[:k], mode=GATHER)
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
            np.take(_STEP_MASKS[step], self.rem, out=self.mask, mode=GATHER)
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
    np.add(lengths.view(np.uint64), PRIME64_5, out=h)
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
        np.take(words, q0, out=lo, mode=GATHER)
        np.copyto(qi, q0)
        for k in range(3):  # 8-byte lanes: values with more than k left
            if counts[k] == 0:
                break
            qi += 1
            np.take(words, qi, out=hi, mode=GATHER)
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
    np.take(words, qi, out=w, mode=GATHER)
    qi += 1
    np.take(words, qi, out=hi, mode=GATHER)
    w >>= sh
    hi <<= ish
    w |= hi
    if counts[3]:
        chain = _Chain(h, running, mask, t, rem)
        np.bitwise_and(w, np.uint64(0xFFFFFFFF), out=lo)
        _mix_lane4(chain.state(counts[3]), lo, t2)
        chain.commit(3)
        np.take(_LANE4_SHIFT, rem, out=lo, mode=GATHER)  # the bytes follow the lane
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


def hash_spans(data: U8, starts: I64, lengths: I64, out: U64 | None = None) -> U64:
    """XXH64 of every byte span data[starts[i] : starts[i] + lengths[i]]; into ``out`` (n
    uint64, contiguous) when given."""
    starts = starts.astype(np.int64, copy=False)
    lengths = lengths.astype(np.int64, copy=False)
    n = starts.shape[0]
    compiled = kernels.compiled
    if compiled is not None:
        if out is None:
            out = np.empty(n, dtype=np.uint64)
        compiled.xxh64_spans(
            np.ascontiguousarray(data),
            np.ascontiguousarray(starts),
            np.ascontiguousarray(lengths),
            out,
        )
        return out
    if out is not None:
        out[:] = hash_spans(data, starts, lengths)
        return out
    if n and _back_to_back(starts, lengths):
        # Values of one length stored one after another (UUIDs or digests as text, fixed-width
        # codes) already form an (n, width) matrix, which the fixed-width kernel hashes several
        # times faster than the span-by-span rounds below.
        first, width = int(starts[0]), int(lengths[0])
        return hash_rows(data[first : first + n * width].reshape(n, width))
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
    return hash_rows(data)  # contiguous or not


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
    return hash_spans(buf, offs[:-1], lengths)


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
    return hash_spans(buf, s, n)


def _as_byte_buffer(data: object) -> U8:
    """A 1-D uint8 view of a bytes-like object or uint8 array, without copying."""
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8 or data.ndim != 1:
            raise TypeError(f"data must be a 1-D uint8 array, not {data.ndim}-D {data.dtype}")
        return np.ascontiguousarray(data)
    if isinstance(data, bytes | bytearray | memoryview):
        return np.frombuffer(data, dtype=np.uint8)
    raise TypeError(f"data must be a uint8 array or bytes-like, not {type(data).__name__}")

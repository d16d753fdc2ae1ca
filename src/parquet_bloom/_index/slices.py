"""Bit-sliced split-block Bloom filters: the filters of N row groups, all of ``z`` blocks, turned
sideways so that one lookup reads N bits a bit position instead of one filter a row group.

A filter of ``z`` blocks has ``z * 256`` bit positions: block ``b``, word ``w`` (0-7), bit ``k``
(0-31). Its *slice* at a position is an N-bit string whose bit ``i`` is that position's bit in
row group ``i``'s filter. A value's hash picks one block and one bit in each of the block's eight
words (docs/format-notes.md#sbbf-layout), so the row groups whose filters may hold the value are
the AND of eight slices: exactly the answer each filter would give, read in ``8 * ceil(N / 8)``
bytes, whatever the filters' size.

Layout (docs/index.md#slices): block-major, then position ``w * 32 + k``; slice ``(b, w, k)``
starts at byte ``(b * 256 + w * 32 + k) * S`` with ``S = ceil(N / 8)``; bit ``i`` of a slice is
bit ``i % 8`` of its byte ``i // 8`` (little-endian bit order, as the filter's words are). The
eight slices of one block lie within its ``256 * S`` bytes.

Everything here is pure: arrays in, bytes and offsets out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from parquet_bloom._sbbf import BITS_PER_BLOCK, BYTES_PER_BLOCK, SALT, WORDS_PER_BLOCK

__all__ = [
    "PASS_BITS",
    "candidates",
    "lane_positions",
    "slice_bytes",
    "slice_ranges",
    "slices_of",
    "words_of",
]

# How many unpacked bits (one byte each) one pass of the transposition holds: N row groups
# times the blocks of the pass times 256. 32 MiB keeps a pass in memory comfortably and is
# large enough that numpy's per-call cost does not matter.
PASS_BITS = 32 << 20


def slice_bytes(num_row_groups: int) -> int:
    """``S``: the bytes of one slice of ``num_row_groups`` bits."""
    return (num_row_groups + 7) // 8


def slices_of(words: npt.NDArray[np.uint32]) -> Iterator[bytes]:
    """The slices of N filters of ``z`` blocks, given as their words (an ``(N, z, 8)`` array of
    uint32), in layout order, a run of whole blocks at a time (their concatenation is the
    blob)."""
    if words.ndim != 3 or words.shape[2] != WORDS_PER_BLOCK:
        raise ValueError(f"words must be an (N, z, 8) array, not {words.shape}")
    n, z, _ = words.shape
    if n == 0:
        return
    as_bytes = np.ascontiguousarray(words, dtype="<u4").view(np.uint8).reshape(n, z, 32)
    step = max(1, PASS_BITS // (n * BITS_PER_BLOCK))
    for start in range(0, z, step):
        part = as_bytes[:, start : start + step, :]
        bits = np.unpackbits(part, axis=2, bitorder="little")  # (N, blocks, 256)
        sideways = np.ascontiguousarray(bits.transpose(1, 2, 0))  # (blocks, 256, N)
        yield np.packbits(sideways, axis=2, bitorder="little").tobytes()


def lane_positions(hashes: npt.NDArray[np.uint64], num_blocks: int) -> npt.NDArray[np.int64]:
    """For each hash, the eight positions it tests in a filter of ``num_blocks`` blocks, as slice
    numbers ``b * 256 + w * 32 + k``: an ``(len(hashes), 8)`` array."""
    h = np.asarray(hashes, dtype=np.uint64).reshape(-1)
    block = ((h >> np.uint64(32)) * np.uint64(num_blocks)) >> np.uint64(32)
    key = (h & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    bits = (key[:, None] * SALT[None, :]) >> np.uint32(27)  # uint32 arithmetic wraps mod 2**32
    lanes = np.arange(WORDS_PER_BLOCK, dtype=np.int64) * 32
    out: npt.NDArray[np.int64] = (
        block.astype(np.int64)[:, None] * BITS_PER_BLOCK + lanes[None, :] + bits.astype(np.int64)
    )
    return out


def slice_ranges(positions: npt.NDArray[np.int64], num_row_groups: int) -> list[tuple[int, int]]:
    """The ``(offset, length)`` in the blob of each distinct slice ``positions`` names, in order
    of offset."""
    s = slice_bytes(num_row_groups)
    return [(int(p) * s, s) for p in np.unique(positions)]


def candidates(
    positions: npt.NDArray[np.int64], slices: dict[int, bytes], num_row_groups: int
) -> npt.NDArray[np.int64]:
    """The row groups (indices into the class) that may hold any of the hashed values: for each
    hash (a row of ``positions``), the AND of its eight slices; the OR over the hashes.
    ``slices`` maps a slice number to its bytes."""
    s = slice_bytes(num_row_groups)
    found = np.zeros(s, dtype=np.uint8)
    for row in positions:
        acc = np.full(s, 0xFF, dtype=np.uint8)
        for p in row:
            acc &= np.frombuffer(slices[int(p)], dtype=np.uint8, count=s)
        found |= acc
    bits = np.unpackbits(found, bitorder="little")[:num_row_groups]
    return np.flatnonzero(bits).astype(np.int64)


def words_of(filters: Sequence[bytes], num_bytes: int) -> npt.NDArray[np.uint32]:
    """The ``(N, z, 8)`` words of N filter bitsets of ``num_bytes`` bytes each."""
    z = num_bytes // BYTES_PER_BLOCK
    out = np.empty((len(filters), z, WORDS_PER_BLOCK), dtype=np.uint32)
    for i, bitset in enumerate(filters):
        if len(bitset) != num_bytes:
            raise ValueError(f"filter {i} has {len(bitset)} bytes, not {num_bytes}")
        out[i] = np.frombuffer(bitset, dtype="<u4").reshape(z, WORDS_PER_BLOCK)
    return out

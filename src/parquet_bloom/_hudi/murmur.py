"""Hadoop's MurmurHash2, chained as Hudi's filters chain it, over arrays of keys.

Hudi ports Hadoop's ``MurmurHash`` and ``HashFunction`` (docs/hudi.md#the-hash):

- MurmurHash2 with m = 0x5bd1e995, r = 24, ``h = seed ^ length``; the body in little-endian
  32-bit words; the 1 to 3 tail bytes read as Java ``byte``\\ s, so SIGN-EXTENDED before they
  are shifted and xored in (a byte >= 0x80 sets the high bits: this is not the canonical
  MurmurHash2, whose tail bytes are unsigned);
- a key's ``num_hashes`` values chained: ``h_0 = murmur(key, seed=0)``,
  ``h_i = murmur(key, seed=h_(i-1))``;
- bit positions ``Math.abs(h_i % vector_size)`` in Java int arithmetic (``%`` truncates toward
  zero, so a negative hash gives a negative remainder, made positive by ``abs``).

Only ``h`` depends on the seed: each body word's mixed value ``k`` and the tail's xor are the
same for every hash of a key, so they are computed once per key and the chain re-runs the
cheap part. numpy has no per-element loop over keys of different lengths, so keys are grouped
by length and each group is one 2-D array. Where the package carries its compiled kernels
(:mod:`parquet_bloom.kernels`), ``hudi_hashes`` does the chain in C instead, several keys side
by side and without the GIL; both give the same ``int32`` hashes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from parquet_bloom import kernels
from parquet_bloom._hudi.keys import KeyBuffer

__all__ = ["M", "R", "hash_chains", "positions"]

# MurmurHash2's constants (Hadoop's org.apache.hadoop.util.hash.MurmurHash, Hudi's port).
M = 0x5BD1E995
R = 24

_U32 = np.uint32


def _mix_body(words: NDArray[np.uint32]) -> NDArray[np.uint32]:
    k = words * _U32(M)
    k ^= k >> _U32(R)
    k *= _U32(M)
    return k


def _hash_group(rows: NDArray[np.uint8], num_hashes: int, out: NDArray[np.int32]) -> None:
    """The chains of ``rows.shape[0]`` keys of ``rows.shape[1]`` bytes each, into ``out``
    (shape ``(count, num_hashes)``)."""
    count, length = rows.shape
    blocks = length >> 2
    body = np.ascontiguousarray(rows[:, : 4 * blocks]).view("<u4").astype(_U32)
    mixed = _mix_body(body) if blocks else body
    left = length & 3
    tail = np.zeros(count, dtype=_U32)
    if left:
        # Java bytes: sign-extended to int before the shift (MurmurHash.java's tail).
        signed = rows[:, 4 * blocks :].view(np.int8).astype(np.int32).view(_U32)
        for i in range(left):
            tail ^= signed[:, i] << _U32(8 * (left - 1 - i))
    h = np.zeros(count, dtype=_U32)  # the first seed
    for i in range(num_hashes):
        h ^= _U32(length & 0xFFFFFFFF)
        for j in range(blocks):
            h *= _U32(M)
            h ^= mixed[:, j]
        if left:
            h ^= tail
            h *= _U32(M)
        h ^= h >> _U32(13)
        h *= _U32(M)
        h ^= h >> _U32(15)
        out[:, i] = h.view(np.int32)
        # h is the next hash's seed: murmur(key, seed=h) starts from seed ^ length.


def _numpy_chains(keys: KeyBuffer, num_hashes: int) -> NDArray[np.int32]:
    n = len(keys)
    out = np.empty((n, num_hashes), dtype=np.int32)
    if n == 0 or num_hashes == 0:
        return out
    lengths = keys.lengths()
    starts = keys.offsets[:-1]
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    bounds = np.flatnonzero(np.diff(sorted_lengths)) + 1
    for group in np.split(order, bounds):
        length = int(lengths[group[0]])
        rows = keys.data[starts[group, None] + np.arange(length, dtype=np.int64)]
        chains = np.empty((len(group), num_hashes), dtype=np.int32)
        _hash_group(rows.reshape(len(group), length), num_hashes, chains)
        out[group] = chains
    return out


def hash_chains(keys: KeyBuffer, num_hashes: int) -> NDArray[np.int32]:
    """Each key's ``num_hashes`` chained MurmurHash2 values, as Java ints: shape
    ``(len(keys), num_hashes)``."""
    compiled = kernels.compiled
    if compiled is None:
        return _numpy_chains(keys, num_hashes)
    out = np.empty((len(keys), num_hashes), dtype=np.int32)
    compiled.hudi_hashes(keys.data, keys.offsets, num_hashes, out)
    return out


def positions(chains: NDArray[np.int32], vector_size: int) -> NDArray[np.int32]:
    """``Math.abs(h % vector_size)`` of each hash: Java's ``%`` keeps the dividend's sign,
    as numpy's ``fmod`` does (exact in int32: ``vector_size`` is a positive Java int, and the
    remainder's magnitude is below it, so ``abs`` cannot overflow)."""
    result = np.fmod(chains, np.int32(vector_size))
    np.abs(result, out=result)
    return result

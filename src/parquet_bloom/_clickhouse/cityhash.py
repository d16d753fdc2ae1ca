"""CityHash v1.0.2, the version ClickHouse froze in ``contrib/cityhash102``: written from the
reference C++ (Google's ``city.cc`` 1.0.2) on Python integers, plus numpy forms of the two
small mixers ClickHouse's skip indexes apply to every value.

ClickHouse uses CityHash64 for strings in ``bloom_filter`` indexes, CityHash64WithSeed for the
tokens of ``tokenbf_v1``/``ngrambf_v1``, CityHash128 for each compressed block's checksum and
CityHash128WithSeed, chained over 2048-byte blocks, for the file hashes of ``checksums.txt``.
Later CityHash releases (1.1) give other values: this module is the one version ClickHouse
keeps.
"""

from __future__ import annotations

import struct

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "MASK64",
    "SHORT_MAX",
    "city_hash64",
    "city_hash64_with_seed",
    "city_hash64_with_seed_short",
    "city_hash128",
    "city_hash128_with_seed",
    "hash128_to_64",
    "hash128_to_64_array",
    "int_hash64",
    "int_hash64_array",
]

MASK64 = (1 << 64) - 1
# The constants of city.cc 1.0.2.
K0 = 0xC3A5C85C97CB3127
K1 = 0xB492B66FBE98F273
K2 = 0x9AE16A3B2F90404F
K3 = 0xC949D7C7509E6557
K_MUL = 0x9DDFEA08EB382D69


def _f64(s: bytes, i: int) -> int:
    return int.from_bytes(s[i : i + 8], "little")


def _f32(s: bytes, i: int) -> int:
    return int.from_bytes(s[i : i + 4], "little")


def _rot(v: int, shift: int) -> int:
    return v if shift == 0 else ((v >> shift) | (v << (64 - shift))) & MASK64


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def hash128_to_64(low: int, high: int) -> int:
    """``Hash128to64(uint128(low, high))``: the Murmur-inspired 128-to-64-bit mixer."""
    a = ((low ^ high) * K_MUL) & MASK64
    a ^= a >> 47
    b = ((high ^ a) * K_MUL) & MASK64
    b ^= b >> 47
    return (b * K_MUL) & MASK64


def _len16(u: int, v: int) -> int:
    return hash128_to_64(u & MASK64, v & MASK64)


def _len0to16(s: bytes, n: int) -> int:
    if n > 8:
        a = _f64(s, 0)
        b = _f64(s, n - 8)
        return _len16(a, _rot((b + n) & MASK64, n)) ^ b
    if n >= 4:
        a = _f32(s, 0)
        return _len16(n + (a << 3), _f32(s, n - 4))
    if n > 0:
        a, b, c = s[0], s[n >> 1], s[n - 1]
        y = a + (b << 8)
        z = n + (c << 2)
        return (_shift_mix(((y * K2) ^ (z * K3)) & MASK64) * K2) & MASK64
    return K2


def _len17to32(s: bytes, n: int) -> int:
    a = (_f64(s, 0) * K1) & MASK64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * K2) & MASK64
    d = (_f64(s, n - 16) * K0) & MASK64
    return _len16(
        _rot((a - b) & MASK64, 43) + _rot(c, 30) + d,
        a + _rot(b ^ K3, 20) - c + n,
    )


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = struct.unpack_from("<4Q", s, i)
    a = (a + w) & MASK64
    b = _rot((b + a + z) & MASK64, 21)
    c = a
    a = (a + x + y) & MASK64
    b = (b + _rot(a, 44)) & MASK64
    return (a + z) & MASK64, (b + c) & MASK64


def _len33to64(s: bytes, n: int) -> int:
    z = _f64(s, 24)
    a = (_f64(s, 0) + (n + _f64(s, n - 16)) * K0) & MASK64
    b = _rot((a + z) & MASK64, 52)
    c = _rot(a, 37)
    a = (a + _f64(s, 8)) & MASK64
    c = (c + _rot(a, 7)) & MASK64
    a = (a + _f64(s, 16)) & MASK64
    vf = (a + z) & MASK64
    vs = (b + _rot(a, 31) + c) & MASK64
    a = (_f64(s, 16) + _f64(s, n - 32)) & MASK64
    z = _f64(s, n - 8)
    b = _rot((a + z) & MASK64, 52)
    c = _rot(a, 37)
    a = (a + _f64(s, n - 24)) & MASK64
    c = (c + _rot(a, 7)) & MASK64
    a = (a + _f64(s, n - 16)) & MASK64
    wf = (a + z) & MASK64
    ws = (b + _rot(a, 31) + c) & MASK64
    r = _shift_mix(((vf + ws) * K2 + (wf + vs) * K0) & MASK64)
    return (_shift_mix((r * K0 + vs) & MASK64) * K2) & MASK64


def city_hash64(data: bytes) -> int:
    """CityHash64 (v1.0.2) of ``data``."""
    s = bytes(data)
    n = len(s)
    if n <= 32:
        return _len0to16(s, n) if n <= 16 else _len17to32(s, n)
    if n <= 64:
        return _len33to64(s, n)
    x = _f64(s, 0)
    y = _f64(s, n - 16) ^ K1
    z = _f64(s, n - 56) ^ K0
    v = _weak32(s, n - 64, n, y)
    w = _weak32(s, n - 32, (n * K1) & MASK64, K0)
    z = (z + _shift_mix(v[1]) * K1) & MASK64
    x = (_rot((z + x) & MASK64, 39) * K1) & MASK64
    y = (_rot(y, 33) * K1) & MASK64
    left = (n - 1) & ~63
    i = 0
    while True:
        x = (_rot((x + y + v[0] + _f64(s, i + 16)) & MASK64, 37) * K1) & MASK64
        y = (_rot((y + v[1] + _f64(s, i + 48)) & MASK64, 42) * K1) & MASK64
        x ^= w[1]
        y ^= v[0]
        z = _rot(z ^ w[0], 33)
        v = _weak32(s, i, (v[1] * K1) & MASK64, (x + w[0]) & MASK64)
        w = _weak32(s, i + 32, (z + w[1]) & MASK64, y)
        z, x = x, z
        i += 64
        left -= 64
        if left == 0:
            break
    return _len16(
        _len16(v[0], w[0]) + _shift_mix(y) * K1 + z,
        _len16(v[1], w[1]) + x,
    )


def city_hash64_with_seed(data: bytes, seed: int) -> int:
    """CityHash64WithSeed (v1.0.2): ``HashLen16(CityHash64(data) - k2, seed)``."""
    return _len16((city_hash64(data) - K2) & MASK64, seed & MASK64)


def _city_murmur(s: bytes, n: int, low: int, high: int) -> tuple[int, int]:
    a, b, c, d = low, high, 0, 0
    left = n - 16
    if left <= 0:
        a = (_shift_mix((a * K1) & MASK64) * K1) & MASK64
        c = (b * K1 + _len0to16(s, n)) & MASK64
        d = _shift_mix((a + (_f64(s, 0) if n >= 8 else c)) & MASK64)
    else:
        c = _len16(_f64(s, n - 8) + K1, a)
        d = _len16(b + n, c + _f64(s, n - 16))
        a = (a + d) & MASK64
        i = 0
        while True:
            a ^= (_shift_mix((_f64(s, i) * K1) & MASK64) * K1) & MASK64
            a = (a * K1) & MASK64
            b ^= a
            c ^= (_shift_mix((_f64(s, i + 8) * K1) & MASK64) * K1) & MASK64
            c = (c * K1) & MASK64
            d ^= c
            i += 16
            left -= 16
            if left <= 0:
                break
    a = _len16(a, c)
    b = _len16(d, b)
    return a ^ b, _len16(b, a)


def city_hash128_with_seed(data: bytes, seed: tuple[int, int]) -> tuple[int, int]:
    """CityHash128WithSeed (v1.0.2) of ``data`` with ``seed`` = (low, high); returns (low, high)."""
    s = bytes(data)
    n = len(s)
    low, high = seed[0] & MASK64, seed[1] & MASK64
    if n < 128:
        return _city_murmur(s, n, low, high)
    x, y = low, high
    z = (n * K1) & MASK64
    v0 = (_rot(y ^ K1, 49) * K1 + _f64(s, 0)) & MASK64
    v1 = (_rot(v0, 42) * K1 + _f64(s, 8)) & MASK64
    w0 = (_rot((y + z) & MASK64, 35) * K1 + x) & MASK64
    w1 = (_rot((x + _f64(s, 88)) & MASK64, 53) * K1) & MASK64
    i = 0
    while True:
        for _ in range(2):
            x = (_rot((x + y + v0 + _f64(s, i + 16)) & MASK64, 37) * K1) & MASK64
            y = (_rot((y + v1 + _f64(s, i + 48)) & MASK64, 42) * K1) & MASK64
            x ^= w1
            y ^= v0
            z = _rot(z ^ w0, 33)
            v0, v1 = _weak32(s, i, (v1 * K1) & MASK64, (x + w0) & MASK64)
            w0, w1 = _weak32(s, i + 32, (z + w1) & MASK64, y)
            z, x = x, z
            i += 64
        n -= 128
        if n < 128:
            break
    y = (y + _rot(w0, 37) * K0 + z) & MASK64
    x = (x + _rot((v0 + z) & MASK64, 49) * K0) & MASK64
    done = 0
    while done < n:
        done += 32
        y = (_rot((y - x) & MASK64, 42) * K0 + v1) & MASK64
        w0 = (w0 + _f64(s, i + n - done + 16)) & MASK64
        x = (_rot(x, 49) * K0 + w0) & MASK64
        w0 = (w0 + v0) & MASK64
        v0, v1 = _weak32(s, i + n - done, v0, v1)
    x = _len16(x, v0)
    y = _len16(y, w0)
    return (_len16(x + v1, w1) + y) & MASK64, _len16(x + w1, y + v1)


def city_hash128(data: bytes) -> tuple[int, int]:
    """CityHash128 (v1.0.2) of ``data``; returns (low, high)."""
    s = bytes(data)
    n = len(s)
    if n >= 16:
        return city_hash128_with_seed(s[16:], (_f64(s, 0) ^ K3, _f64(s, 8)))
    if n >= 8:
        return city_hash128_with_seed(b"", (_f64(s, 0) ^ ((n * K0) & MASK64), _f64(s, n - 8) ^ K1))
    return city_hash128_with_seed(s, (K0, K1))


def int_hash64(x: int) -> int:
    """ClickHouse's ``intHash64`` (the MurmurHash3 finaliser) of a 64-bit integer."""
    x &= MASK64
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & MASK64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & MASK64
    x ^= x >> 33
    return x


def int_hash64_array(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """:func:`int_hash64` of each element (numpy, wrapping arithmetic)."""
    x = np.asarray(x, dtype=np.uint64).copy()
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


def hash128_to_64_array(
    low: NDArray[np.uint64], high: NDArray[np.uint64] | int
) -> NDArray[np.uint64]:
    """:func:`hash128_to_64` of each (low, high) pair (numpy, broadcasting)."""
    lo = np.asarray(low, dtype=np.uint64)
    hi = np.asarray(high, dtype=np.uint64)
    k = np.uint64(K_MUL)
    s47 = np.uint64(47)
    with np.errstate(over="ignore"):
        a = (lo ^ hi) * k
        a ^= a >> s47
        b = (hi ^ a) * k
        b ^= b >> s47
        return b * k


# The longest string :func:`city_hash64_with_seed_short` hashes (``HashLen0to16``).
SHORT_MAX = 16


def city_hash64_with_seed_short(
    padded: NDArray[np.uint8], lengths: NDArray[np.int64], seed: int
) -> NDArray[np.uint64]:
    """:func:`city_hash64_with_seed` of many strings of at most 16 bytes (numpy, wrapping
    arithmetic): ``padded`` is an ``(M, 16)`` array of each string's bytes, zero-padded,
    ``lengths`` their lengths."""
    padded = np.ascontiguousarray(padded, dtype=np.uint8)
    n = np.asarray(lengths, dtype=np.int64)
    if padded.ndim != 2 or padded.shape[1] != SHORT_MAX or len(n) != len(padded):
        raise ValueError("padded must be an (M, 16) array with M lengths")
    if len(n) and (n.min() < 0 or n.max() > SHORT_MAX):
        raise ValueError("a string of more than 16 bytes")
    rows = np.arange(len(n))[:, None]
    wide = np.concatenate([padded, np.zeros((len(n), 8), np.uint8)], axis=1)

    def fetch(offset: NDArray[np.int64], width: int) -> NDArray[np.uint64]:
        at = np.clip(offset, 0, None)[:, None] + np.arange(width)[None, :]
        raw = np.ascontiguousarray(wide[rows, at])
        return raw.view("<u8" if width == 8 else "<u4").reshape(-1).astype(np.uint64)

    u = np.uint64
    out = np.full(len(n), K2, dtype=np.uint64)
    n64 = n.astype(np.uint64)
    with np.errstate(over="ignore"):
        big = n > 8
        if big.any():
            a = fetch(np.zeros(len(n), np.int64), 8)[big]
            b = fetch(n - 8, 8)[big]
            shift = n64[big]
            v = b + shift
            rot = (v >> shift) | (v << (u(64) - shift))
            out[big] = hash128_to_64_array(a, rot) ^ b
        mid = (n >= 4) & (n <= 8)
        if mid.any():
            a = fetch(np.zeros(len(n), np.int64), 4)[mid]
            b = fetch(n - 4, 4)[mid]
            out[mid] = hash128_to_64_array(n64[mid] + (a << u(3)), b)
        small = (n > 0) & (n < 4)
        if small.any():
            ns = n[small]
            idx = np.flatnonzero(small)
            a = padded[idx, 0].astype(np.uint64)
            b = padded[idx, ns >> 1].astype(np.uint64)
            c = padded[idx, ns - 1].astype(np.uint64)
            y = a + (b << u(8))
            z = ns.astype(np.uint64) + (c << u(2))
            mixed = (y * u(K2)) ^ (z * u(K3))
            out[small] = (mixed ^ (mixed >> u(47))) * u(K2)
        return hash128_to_64_array(out - u(K2), seed & MASK64)

"""Hudi's chained MurmurHash2 over arrays of keys, numpy and compiled, against the scalar
reference written from Hudi's Java (tests/hudi/reference.py); keys as Hudi encodes them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquet_bloom import kernels
from parquet_bloom._hudi.keys import KeyBuffer, encode_keys
from parquet_bloom._hudi.murmur import hash_chains, positions
from tests import skips
from tests.hudi import reference as ref

keys_strategy = st.lists(st.binary(min_size=1, max_size=80), min_size=0, max_size=40)


BUILT = kernels.compiled  # before the implementation fixture swaps it
pytestmark = pytest.mark.usefixtures("implementation")  # compiled, then numpy alone


@settings(max_examples=150, deadline=None)
@given(keys=keys_strategy, num_hashes=st.integers(0, 40))
def test_chains_equal_the_reference(keys: list[bytes], num_hashes: int) -> None:
    chains = hash_chains(encode_keys(keys), num_hashes)
    assert chains.shape == (len(keys), num_hashes)
    assert chains.tolist() == [ref.chain(k, num_hashes) for k in keys]


@settings(max_examples=100, deadline=None)
@given(
    keys=st.lists(st.binary(min_size=1, max_size=24), min_size=1, max_size=20),
    vector_size=st.one_of(st.integers(1, 5000), st.integers(1, 2**31 - 1)),
    num_hashes=st.integers(1, 35),
)
def test_positions_equal_the_reference(
    keys: list[bytes], vector_size: int, num_hashes: int
) -> None:
    found = positions(hash_chains(encode_keys(keys), num_hashes), vector_size)
    assert found.tolist() == [ref.positions(k, num_hashes, vector_size) for k in keys]
    assert ((found >= 0) & (found < vector_size)).all()


@pytest.mark.parametrize(
    "lengths",
    [
        [36] * 9,  # the lanes of equal lengths, and one key left over
        [36, 36, 36, 35, 36],  # lanes broken by a key of another length
        [256] * 4 + [257] * 4 + [1000] * 5,  # mixed words kept; longer keys mixed again
        [1, 2, 3, 4, 5, 6, 7, 8],
    ],
)
def test_lengths_the_kernel_treats_apart(lengths: list[int]) -> None:
    rng = np.random.default_rng(sum(lengths))
    keys = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in lengths]
    assert hash_chains(encode_keys(keys), 9).tolist() == [ref.chain(k, 9) for k in keys]


def test_tail_bytes_are_sign_extended() -> None:
    # Keys whose tail bytes are >= 0x80 hash differently from the unsigned-tail MurmurHash2:
    # the reference follows Java's (int) byte, and so must we.
    keys = [b"\x80", b"ab\xff", b"abcd\xc3\xa9", b"\xf0\x9f\x98"]
    unsigned = [_canonical(k, 0) for k in keys]
    ours = hash_chains(encode_keys(keys), 1)[:, 0].tolist()
    assert ours == [ref.murmur(k, 0) for k in keys]
    assert all(a != b for a, b in zip(ours, unsigned, strict=True))


def _canonical(data: bytes, seed: int) -> int:
    """The canonical MurmurHash2 (unsigned tail bytes), for contrast."""
    m, length = ref.M, len(data)
    h = ref.int32(seed ^ length)
    blocks = length >> 2
    for i in range(blocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ref.int32(ref.int32(h * m) ^ k)
    tail = data[4 * blocks :]
    if tail:
        for i, b in enumerate(tail):
            h = ref.int32(h ^ (b << (8 * (len(tail) - 1 - i))))
        h = ref.int32(h * m)
    h = ref.int32(h ^ ref.urshift(h, 13))
    h = ref.int32(h * m)
    return ref.int32(h ^ ref.urshift(h, 15))


def test_offsets_need_not_start_at_zero() -> None:
    buffer = encode_keys([b"first", b"second", b"third"])
    tail = KeyBuffer(buffer.data, buffer.offsets[1:])
    assert hash_chains(tail, 3).tolist() == [ref.chain(k, 3) for k in (b"second", b"third")]


# -- the kernel's bounds --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offsets", "num_hashes", "out_size"),
    [
        ([0, 3, 20], 2, 4),  # past the data
        ([0, 5, 3], 2, 4),  # decreasing
        ([-1, 3], 2, 2),  # negative
        ([0, 3, 6], 2, 3),  # output too small
        ([0, 3, 6], 2, 5),  # output too large
        ([0, 3], -1, 0),  # negative hash count
        ([], 2, 0),  # no offsets at all
    ],
)
def test_the_kernel_refuses_spans_outside_its_buffers(
    offsets: list[int], num_hashes: int, out_size: int
) -> None:
    compiled = BUILT
    if compiled is None:
        pytest.skip(skips.kernels_off_reason())
    data = np.frombuffer(b"abcdefghij", dtype=np.uint8)
    out = np.zeros(out_size, dtype=np.int32)
    with pytest.raises(ValueError, match="hudi_hashes"):
        compiled.hudi_hashes(data, np.array(offsets, dtype=np.int64), num_hashes, out)
    assert not out.any()

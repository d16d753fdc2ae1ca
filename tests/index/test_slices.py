"""The bit slices against filters probed one by one, with the scalar reference filter."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from parquet_bloom._index import slices
from tests.reference import ReferenceFilter


def _filters(seed: int, n: int, num_blocks: int, fill: int) -> list[ReferenceFilter]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ref = ReferenceFilter(num_blocks * 32)
        for h in rng.integers(0, 2**64, size=fill, dtype=np.uint64):
            ref.insert(int(h))
        out.append(ref)
    return out


def _blob(filters: list[ReferenceFilter], num_blocks: int) -> bytes:
    words = slices.words_of([f.to_bytes() for f in filters], num_blocks * 32)
    return b"".join(slices.slices_of(words))


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 70),
    num_blocks=st.sampled_from([1, 2, 3, 5, 8, 13, 32]),  # sizes that are not powers of two too
    fill=st.integers(0, 60),
)
def test_each_slice_bit_is_that_bit_of_that_filter(
    seed: int, n: int, num_blocks: int, fill: int
) -> None:
    filters = _filters(seed, n, num_blocks, fill)
    blob = _blob(filters, num_blocks)
    s = slices.slice_bytes(n)
    assert len(blob) == num_blocks * 256 * s
    rng = np.random.default_rng(seed ^ 0x5EED)
    for _ in range(50):
        b, w, k = int(rng.integers(num_blocks)), int(rng.integers(8)), int(rng.integers(32))
        at = (b * 256 + w * 32 + k) * s
        sliced = np.unpackbits(np.frombuffer(blob[at : at + s], np.uint8), bitorder="little")
        expected = [(f.words[b * 8 + w] >> k) & 1 for f in filters]
        assert sliced[:n].tolist() == expected
        assert not sliced[n:].any()  # the padding bits stay clear


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 70),
    num_blocks=st.sampled_from([1, 3, 4, 7, 16]),
    fill=st.integers(0, 40),
)
def test_a_lookup_gives_exactly_the_filters_answers(
    seed: int, n: int, num_blocks: int, fill: int
) -> None:
    filters = _filters(seed, n, num_blocks, fill)
    blob = _blob(filters, num_blocks)
    rng = np.random.default_rng(seed + 1)
    # Values inserted into a filter (the first filter's hashes, drawn again) and others: both
    # kinds of answer.
    probes = list(rng.integers(0, 2**64, size=20, dtype=np.uint64))
    first = np.random.default_rng(seed).integers(0, 2**64, size=fill, dtype=np.uint64)
    probes += list(first[:5])
    for h in probes:
        hashes = np.array([h], dtype=np.uint64)
        positions = slices.lane_positions(hashes, num_blocks)
        got = {
            int(p): blob[off : off + length]
            for p, (off, length) in zip(
                np.unique(positions), slices.slice_ranges(positions, n), strict=True
            )
        }
        found = slices.candidates(positions, got, n).tolist()
        assert found == [i for i, f in enumerate(filters) if f.find(int(h))]
    # An IN list: the union of each value's answer.
    hashes = np.array(probes[:7], dtype=np.uint64)
    positions = slices.lane_positions(hashes, num_blocks)
    ranges = slices.slice_ranges(positions, n)
    got = {
        int(p): blob[o : o + ln] for p, (o, ln) in zip(np.unique(positions), ranges, strict=True)
    }
    union = [i for i, f in enumerate(filters) if any(f.find(int(h)) for h in probes[:7])]
    assert slices.candidates(positions, got, n).tolist() == union


def test_a_lookup_reads_eight_slices_of_n_bits() -> None:
    n, num_blocks = 1000, 32
    positions = slices.lane_positions(np.array([0x0123456789ABCDEF], np.uint64), num_blocks)
    ranges = slices.slice_ranges(positions, n)
    assert len(ranges) == 8
    assert sum(length for _, length in ranges) == 8 * 125
    # All eight in one block's region.
    block = int(positions[0, 0]) // 256
    assert all(block * 256 * 125 <= o < (block + 1) * 256 * 125 for o, _ in ranges)


def test_the_transposition_runs_in_passes() -> None:
    # Enough filters that one pass cannot hold every block: the passes' concatenation is the
    # same blob as slicing each block on its own.
    filters = _filters(7, 300, 16, 30)
    words = slices.words_of([f.to_bytes() for f in filters], 16 * 32)
    original = slices.PASS_BITS
    try:
        slices.PASS_BITS = 300 * 256 * 3  # three blocks a pass
        parts = list(slices.slices_of(words))
    finally:
        slices.PASS_BITS = original
    assert len(parts) == 6
    assert b"".join(parts) == b"".join(slices.slices_of(words))

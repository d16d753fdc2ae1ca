"""The vectorised split-block Bloom filter against the scalar spec reference."""

from __future__ import annotations

import copy
import math
import pickle
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import parquet_bloom as pb
from parquet_bloom import _sbbf as sbbf
from tests.reference import ReferenceFilter

# Every test here runs with the compiled kernels and on numpy alone (see conftest.py).
pytestmark = pytest.mark.usefixtures("implementation")

U64 = st.integers(min_value=0, max_value=2**64 - 1)
NUM_BYTES = st.sampled_from([32, 64, 128, 1024, 8192, 65536, 1 << 17, 1 << 20])


@st.composite
def hash_lists(draw: st.DrawFn, max_size: int = 3000) -> list[int]:
    """Many full 64-bit hashes, spread over every block of any filter (a seeded generator's, as
    XXH64's are), plus a few that Hypothesis picks (0, 2**64 - 1 and their neighbours).

    ``st.lists(U64)`` alone yields a handful of mostly small integers: all in block 0 or 1, so
    a fold or an insert that mixes up blocks goes unseen."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    spread = rng.integers(0, 2**64, draw(st.integers(1, max_size)), dtype=np.uint64)
    return spread.tolist() + draw(st.lists(U64, max_size=10))


def filled(num_bytes: int, hashes: list[int]) -> tuple[pb.SplitBlockBloomFilter, ReferenceFilter]:
    ours, ref = pb.SplitBlockBloomFilter(num_bytes), ReferenceFilter(num_bytes)
    ours.insert_hashes(np.array(hashes, dtype=np.uint64))
    for h in hashes:
        ref.insert(h)
    return ours, ref


@settings(max_examples=60, deadline=None)
@given(NUM_BYTES, hash_lists())
def test_insert_matches_reference_bit_for_bit(num_bytes: int, hashes: list[int]) -> None:
    ours, ref = filled(num_bytes, hashes)
    assert ours.to_bytes() == ref.to_bytes()


# Hashes per call and filter sizes (in bytes) of the two numpy paths: dense (at least one hash
# per block: bits set lane by lane, a page at a time) and sparse (fewer than one hash per 8
# blocks: masks OR-ed into the few blocks hit). The sparse calls are big enough that the later
# calls hit blocks the earlier ones set (2,000 hashes into 16 Ki blocks: about 240 of them).
INSERT_PATHS = {
    "dense": (st.sampled_from([32, 1024, 1 << 16, 1 << 19]), lambda blocks: (blocks, 40_000)),
    "sparse": (st.sampled_from([1 << 16, 1 << 19, 1 << 20]), lambda blocks: (1, blocks // 16)),
}


@pytest.mark.parametrize("path", INSERT_PATHS)
@settings(max_examples=20, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**32), parts=st.integers(2, 5))
def test_dense_and_sparse_paths_match_reference(
    path: str, data: st.DataObject, seed: int, parts: int
) -> None:
    # Several calls into one filter: a later call must OR its bits into the earlier ones'.
    sizes, per_call = INSERT_PATHS[path]
    num_bytes = data.draw(sizes)
    low, high = per_call(num_bytes // 32)
    rng = np.random.default_rng(seed)
    calls = [
        rng.integers(0, 2**64, size=int(rng.integers(low, high + 1)), dtype=np.uint64)
        for _ in range(parts)
    ]
    ours, ref = pb.SplitBlockBloomFilter(num_bytes), ReferenceFilter(num_bytes)
    for hashes in calls:
        ours.insert_hashes(hashes)
        for h in hashes.tolist():
            ref.insert(h)
    assert ours.to_bytes() == ref.to_bytes()
    assert ours.find_hashes(np.concatenate(calls)).all()


@pytest.mark.parametrize("page_blocks", [4, 64])
def test_hashes_grouped_by_page_in_many_groups_match_reference(
    monkeypatch: pytest.MonkeyPatch, page_blocks: int
) -> None:
    # Small pages and groups, so that a filter has many pages (past 256 the page keys take two
    # bytes) and the hashes many groups, whose runs are appended to each page's.
    monkeypatch.setattr(sbbf, "PAGE_BLOCKS", page_blocks)
    monkeypatch.setattr(sbbf, "ONE_PAGE_BLOCKS", page_blocks)
    monkeypatch.setattr(sbbf, "GROUP_SIZE", 1000)
    monkeypatch.setattr(sbbf, "GROUP_PER_PAGE", 2)
    monkeypatch.setattr(sbbf, "DENSE_CHUNK", 100)  # a page of 64 blocks gets ~600 hashes
    num_bytes = 1 << 16  # 2048 blocks: 512 pages of 4 blocks, or 32 of 64
    hashes = np.random.default_rng(page_blocks).integers(0, 2**64, 20_000, dtype=np.uint64)
    page_bits = (2048 // page_blocks).bit_length() - 1
    grouped, bounds = sbbf.group_by_page(hashes, page_bits)
    pages = grouped >> np.uint64(64 - page_bits)
    assert sorted(grouped.tolist()) == sorted(hashes.tolist())
    assert bounds == np.searchsorted(pages, np.arange(2**page_bits + 1)).tolist()

    ours, ref = filled(num_bytes, hashes.tolist())
    assert ours.to_bytes() == ref.to_bytes()


def test_one_page_in_many_passes_matches_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    # A filter of one page (up to 2 MiB) is not grouped; each lane's bits are set a pass of
    # DENSE_CHUNK hashes at a time, every pass reading its part of the keys and blocks.
    monkeypatch.setattr(sbbf, "DENSE_CHUNK", 777)
    hashes = np.random.default_rng(7).integers(0, 2**64, 10_000, dtype=np.uint64)
    ours, ref = filled(1 << 14, hashes.tolist())
    assert ours.to_bytes() == ref.to_bytes()


def test_work_arrays_kept_between_inserts_carry_nothing_over() -> None:
    # Dense inserts keep their work arrays per thread: larger then smaller filters, refilled
    # ones, and two threads at once must each get exactly the reference's bits.
    rng = np.random.default_rng(11)
    jobs = [
        (num_bytes, rng.integers(0, 2**64, n, dtype=np.uint64))
        for num_bytes, n in [(1 << 16, 9_000), (1 << 12, 3_000), (1 << 16, 5_000), (1 << 10, 900)]
    ]

    def build(num_bytes: int, hashes: np.ndarray) -> bytes:
        bloom_filter = pb.SplitBlockBloomFilter(num_bytes)
        for part in np.array_split(hashes, 3):  # the second and third find bits set
            bloom_filter.insert_hashes(part)
        return bloom_filter.to_bytes()

    with ThreadPoolExecutor(2) as pool:
        built = list(pool.map(lambda job: build(*job), jobs * 3))
    for (num_bytes, hashes), got in zip(jobs * 3, built, strict=True):
        ref = ReferenceFilter(num_bytes)
        for h in hashes.tolist():
            ref.insert(h)
        assert got == ref.to_bytes()


@settings(max_examples=60, deadline=None)
@given(NUM_BYTES, hash_lists(), hash_lists())
def test_find_matches_reference(num_bytes: int, inserted: list[int], probes: list[int]) -> None:
    ours, ref = filled(num_bytes, inserted)
    assert ours.find_hashes(np.array(inserted, dtype=np.uint64)).all()  # no false negatives
    expected = [ref.find(h) for h in probes]
    assert ours.find_hashes(np.array(probes, dtype=np.uint64)).tolist() == expected
    assert [ours.find_hash(h) for h in probes] == expected


def test_find_takes_any_layout_and_no_hashes() -> None:
    rng = np.random.default_rng(4)
    hashes = rng.integers(0, 2**64, 4000, dtype=np.uint64)
    f = pb.SplitBlockBloomFilter(1024)
    f.insert_hashes(hashes[::4])
    expected = f.find_hashes(hashes).tolist()
    assert expected[::4] == [True] * 1000 and not all(expected)
    assert f.find_hashes(hashes[::2]).tolist() == expected[::2]  # strided
    assert (
        f.find_hashes(hashes.reshape(40, 100).T).tolist()
        == np.array(expected).reshape(40, 100).T.ravel().tolist()
    )  # flattened in C order, as insert_hashes does
    assert f.find_hashes(hashes.view(np.int64)).tolist() == expected  # signed
    small = hashes[hashes < 2**63][:5]
    assert f.find_hashes(small.tolist()).tolist() == f.find_hashes(small).tolist()  # Python ints
    none = f.find_hashes(np.empty(0, dtype=np.uint64))
    assert none.dtype == bool and none.shape == (0,)
    assert f.find_hashes([]).shape == (0,)


# Numbers of each dtype, as might_contain_many hashes them a part at a time, and the physical
# types each can be written as (None: as inferred from the dtype).
NUMBERS = [
    ("int64", [None, "INT64", "DOUBLE"]),
    ("uint64", [None, "INT64"]),
    ("int32", [None, "INT32", "INT64", "FLOAT"]),
    ("uint32", [None, "INT32", "INT64"]),
    ("int16", [None, "INT32"]),
    ("float64", [None, "DOUBLE", "FLOAT"]),
    ("float32", [None, "FLOAT", "DOUBLE"]),
    ("float16", [None, "FIXED_LEN_BYTE_ARRAY"]),
]


@pytest.mark.parametrize(("dtype", "physical_types"), NUMBERS)
def test_might_contain_many_in_parts_is_find_of_the_hashes(
    monkeypatch: pytest.MonkeyPatch, dtype: str, physical_types: list[str | None]
) -> None:
    # A part smaller than the values, and not dividing them: the last part is short.
    monkeypatch.setattr(sbbf, "PROBE_CHUNK", 700)
    rng = np.random.default_rng(9)
    info = np.finfo(dtype) if dtype.startswith("float") else np.iinfo(dtype)
    values = rng.uniform(max(float(info.min), -1e6), min(float(info.max), 1e6), 5000).astype(dtype)
    for physical_type in physical_types:
        type_length = 2 if physical_type == "FIXED_LEN_BYTE_ARRAY" else None
        f = pb.SplitBlockBloomFilter(4096)
        f.insert(values[::3], physical_type, type_length=type_length)
        found = f.might_contain_many(values, physical_type, type_length=type_length)
        hashes = pb.hash_values(values, physical_type, type_length=type_length)
        assert found.tolist() == f.find_hashes(hashes).tolist()
        assert found[::3].all() and not found.all()


def test_might_contain_many_in_parts_raises_as_a_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first value that does not fit is named, though it lies in a later part.
    monkeypatch.setattr(sbbf, "PROBE_CHUNK", 700)
    values = np.arange(5000, dtype=np.int64)
    values[3000] = 2**40
    values[4000] = -(2**40)
    f = pb.SplitBlockBloomFilter(1024)
    with pytest.raises(ValueError) as whole:
        pb.hash_values(values, "INT32")
    with pytest.raises(ValueError) as in_parts:
        f.might_contain_many(values, "INT32")
    assert str(in_parts.value) == str(whole.value) and str(2**40) in str(whole.value)
    with pytest.raises(TypeError, match="no Parquet physical type"):
        f.might_contain_many(np.arange(5000).astype("datetime64[s]"))
    with pytest.raises(ValueError, match="BOOLEAN"):
        f.might_contain_many(np.zeros(5000, dtype=bool))


@settings(max_examples=40, deadline=None)
@given(NUM_BYTES, hash_lists())
def test_bytes_round_trip(num_bytes: int, hashes: list[int]) -> None:
    ours, _ = filled(num_bytes, hashes)
    again = pb.SplitBlockBloomFilter.from_bytes(ours.to_bytes())
    assert again == ours and again.to_bytes() == ours.to_bytes()
    assert pickle.loads(pickle.dumps(ours)) == ours
    assert len(pickle.dumps(ours)) < num_bytes + 200  # pickles as its bitset, nothing more


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 15), st.data(), hash_lists())
def test_fold_equals_direct_build(log_blocks: int, data: st.DataObject, hashes: list[int]) -> None:
    # From 2 to 32 Ki blocks (up to 1 MiB), folded 1 to log_blocks times: a fold that OR-ed
    # the wrong blocks together would give other bits than the reference's at the small size.
    big = 32 << log_blocks
    small = big >> data.draw(st.integers(1, log_blocks))
    folded = filled(big, hashes)[0].fold(small)
    direct, ref = filled(small, hashes)
    assert folded == direct
    assert folded.to_bytes() == ref.to_bytes()


def test_union_is_the_filter_of_all_values() -> None:
    rng = np.random.default_rng(7)
    a, b = (
        rng.integers(0, 2**64, 5000, dtype=np.uint64),
        rng.integers(0, 2**64, 5000, dtype=np.uint64),
    )
    fa, fb, both = (pb.SplitBlockBloomFilter(4096) for _ in range(3))
    fa.insert_hashes(a)
    fb.insert_hashes(b)
    both.insert_hashes(np.concatenate([a, b]))
    assert fa | fb == both
    assert sbbf.union([fa, fb]) == both
    with pytest.raises(ValueError, match="cannot union"):
        fa | pb.SplitBlockBloomFilter(8192)


@pytest.mark.parametrize("num_bytes", [0, 16, 48, 100, 2**28, -32])
def test_sizes_outside_the_spec_are_refused(num_bytes: int) -> None:
    with pytest.raises(ValueError, match="power of two"):
        pb.SplitBlockBloomFilter(num_bytes)
    with pytest.raises(ValueError, match="power of two"):
        pb.SplitBlockBloomFilter.from_bytes(b"\0" * max(num_bytes, 0) if num_bytes < 2**20 else b"")


def test_an_adopted_bitset_is_the_filter_itself() -> None:
    """adopt_bitset: a filter over the array given (no copy), as from_bytes reads it."""
    bitset = np.frombuffer(bytes(range(256)) * 4, np.uint8).copy()
    f = sbbf.adopt_bitset(bitset)
    assert f == pb.SplitBlockBloomFilter.from_bytes(bitset.tobytes())
    assert np.shares_memory(f.words, bitset)
    f.insert_hashes([12345])
    assert f.find_hash(12345) and bitset.tobytes() == f.to_bytes()
    with pytest.raises(ValueError, match="power of two"):
        sbbf.adopt_bitset(np.zeros(100, np.uint8))
    for wrong in (bytearray(64), np.zeros(64, np.uint32), np.zeros((2, 32), np.uint8)):
        with pytest.raises(TypeError):
            sbbf.adopt_bitset(wrong)  # type: ignore[arg-type]


def test_wrong_types_are_type_errors() -> None:
    with pytest.raises(TypeError):
        pb.SplitBlockBloomFilter(32.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pb.SplitBlockBloomFilter.from_bytes("not bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pb.SplitBlockBloomFilter(32).insert_hashes(np.array([1.5]))
    with pytest.raises(ValueError, match="unsigned 64-bit"):
        pb.SplitBlockBloomFilter(32).insert_hashes([2**64])


def test_signed_hashes_are_read_as_their_bit_pattern() -> None:
    # Spark's xxhash64 and other JVM tools hand out signed longs.
    signed, unsigned = pb.SplitBlockBloomFilter(64), pb.SplitBlockBloomFilter(64)
    signed.insert_hashes(np.array([-1, -(2**63)], dtype=np.int64))
    unsigned.insert_hashes(np.array([2**64 - 1, 2**63], dtype=np.uint64))
    assert signed == unsigned


def test_big_endian_hashes_are_read_as_their_values() -> None:
    hashes = np.array([1, 2**63 + 5, 2**64 - 1], dtype=np.uint64)
    native = pb.SplitBlockBloomFilter(1024)
    native.insert_hashes(hashes)
    for dtype in (">u8", ">i8"):
        swapped = hashes.astype(">u8").view(dtype)
        f = pb.SplitBlockBloomFilter(1024)
        f.insert_hashes(swapped)
        assert f == native, dtype
        assert f.find_hashes(swapped).all()


def test_fold_refuses_growing_and_bad_sizes() -> None:
    f = pb.SplitBlockBloomFilter(1024)
    with pytest.raises(ValueError, match="cannot fold"):
        f.fold(2048)
    with pytest.raises(ValueError, match="power of two"):
        f.fold(96)


@pytest.mark.parametrize(
    ("bits", "fpp"), [(6.0, 0.1), (10.5, 0.01), (16.9, 0.001), (26.4, 0.0001), (41.0, 0.00001)]
)
def test_expected_fpp_reproduces_the_spec_table(bits: float, fpp: float) -> None:
    # The spec's table of bits per distinct value (docs/format-notes.md, where the writers
    # disagree) was measured; the Poisson mixture over block loads must agree with it (the
    # closed formula c = -8 / ln(1 - p ** (1/8)) does not: it ignores the load variance and
    # gives 9.68 bits for 1 %).
    num_bytes = 1 << 20
    assert sbbf.expected_fpp(num_bytes * 8 / bits, num_bytes) == pytest.approx(fpp, rel=0.03)


def test_bits_per_value_is_the_spec_formula() -> None:
    for fpp in (0.1, 0.01, 0.001):
        assert sbbf.bits_per_value(fpp) == pytest.approx(-8 / math.log(1 - fpp ** (1 / 8)))
    assert sbbf.bits_per_value(0.01) == pytest.approx(9.68, abs=0.01)


@pytest.mark.parametrize(
    ("ndv", "fpp", "num_bytes"),
    [
        (0, 0.01, 32),
        (1, 0.01, 32),
        (27, 0.01, 64),
        (100, 0.01, 128),
        (1693, 0.01, 4096),
        (1_000_000, 0.01, 2 << 20),
        (10**12, 0.01, 128 << 20),
    ],
)
def test_from_ndv_rounds_the_spec_bits_up_to_a_power_of_two(
    ndv: int, fpp: float, num_bytes: int
) -> None:
    assert pb.SplitBlockBloomFilter.from_ndv(ndv, fpp).num_bytes == num_bytes
    expected = min(
        max(32, 1 << max(0, math.ceil(ndv * sbbf.bits_per_value(fpp) / 8) - 1).bit_length()),
        128 << 20,
    )
    assert num_bytes == expected


@pytest.mark.parametrize("fpp", [0.0, 1.0, -0.5, 2.0])
def test_fpp_must_be_a_probability(fpp: float) -> None:
    with pytest.raises(ValueError, match="fpp"):
        pb.SplitBlockBloomFilter.from_ndv(100, fpp)


def test_estimates_track_what_was_inserted() -> None:
    rng = np.random.default_rng(3)
    ndv = 20_000
    f = pb.SplitBlockBloomFilter.from_ndv(ndv, 0.01)
    f.insert_hashes(rng.integers(0, 2**64, ndv, dtype=np.uint64))
    assert f.estimate_ndv() == pytest.approx(ndv, rel=0.03)
    probes = rng.integers(0, 2**64, 400_000, dtype=np.uint64)
    measured = f.find_hashes(probes).mean()
    assert f.fpp() == pytest.approx(measured, rel=0.15)  # exact from the bits set
    assert f.fpp(ndv) == pytest.approx(measured, rel=0.15)  # expected for this size and NDV
    assert f.fpp() < 0.01


def test_empty_and_saturated_filters() -> None:
    empty = pb.SplitBlockBloomFilter(64)
    assert empty.bits_set() == 0 and empty.fpp() == 0.0
    assert empty.estimate_ndv() == 0 and math.copysign(1.0, empty.estimate_ndv()) == 1.0  # not -0
    assert not empty.find_hashes(np.arange(100, dtype=np.uint64)).any()
    full = pb.SplitBlockBloomFilter.from_bytes(b"\xff" * 64)
    assert full.fraction_set() == 1.0 and full.fpp() == 1.0
    assert math.isfinite(full.estimate_ndv())
    assert full.find_hashes(np.arange(100, dtype=np.uint64)).all()


def test_copies_are_independent() -> None:
    f = pb.SplitBlockBloomFilter(32)
    g = copy.copy(f)
    g.insert_hashes([12345])
    assert f.bits_set() == 0 and g.bits_set() == 8
    with pytest.raises(ValueError):
        f.words[0, 0] = 1  # read-only view


def test_a_list_mixing_hashes_above_and_below_2_63_is_taken_as_integers() -> None:
    """numpy reads such a list as float64, which would round the hashes; it is read exactly."""
    hashes = [2**63 + 7, 5, 2**64 - 1]
    f = pb.SplitBlockBloomFilter(1024)
    f.insert_hashes(hashes)
    expected = pb.SplitBlockBloomFilter(1024)
    expected.insert_hashes(np.array(hashes, dtype=np.uint64))
    assert f == expected
    assert f.find_hashes(hashes).all()
    with pytest.raises(TypeError):
        f.insert_hashes([2**63 + 0.5, 1.0])  # floats stay refused


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=5, max_value=14),
    st.lists(st.integers(min_value=0, max_value=2**64 - 1), min_size=1, max_size=40),
    st.lists(st.integers(min_value=0, max_value=2**64 - 1), min_size=1, max_size=20),
)
def test_filter_blocks_answer_as_the_whole_filter(
    log_bytes: int, inserted: list[int], probed: list[int]
) -> None:
    from parquet_bloom._sbbf import FilterBlocks, block_index

    whole = pb.SplitBlockBloomFilter(1 << log_bytes)
    whole.insert_hashes(np.array(inserted, dtype=np.uint64))
    bitset = whole.to_bytes()
    hashes = probed + inserted[:5]
    blocks = {
        b: bitset[b * 32 : b * 32 + 32] for b in (block_index(h, whole.num_blocks) for h in hashes)
    }
    part = FilterBlocks(whole.num_bytes, blocks)
    assert [part.find_hash(h) for h in hashes] == [whole.find_hash(h) for h in hashes]
    assert all(part.find_hash(h) for h in inserted[:5])


def test_num_bytes_given_length() -> None:
    from parquet_bloom._sbbf import num_bytes_given_length

    assert num_bytes_given_length(65536 + 17) == 65536
    assert num_bytes_given_length(32 + 15) == 32
    assert num_bytes_given_length(32) is None  # no room for a header
    assert num_bytes_given_length((1 << 27) + 19) == 1 << 27

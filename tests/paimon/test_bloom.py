"""BloomFilter64: builds and probes against the scalar reference; sizing; decoding hostile
payloads; what a filter says about itself."""

from __future__ import annotations

import datetime as dt
import math
import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from parquet_bloom import paimon
from parquet_bloom.errors import CorruptFileError
from parquet_bloom.paimon import BloomFilter64, build_bloom_filter, filter_size
from tests.paimon import reference


@given(st.integers(1, 2**31 - 1), st.floats(1e-300, 0.999999))
def test_sizing_is_the_references(items: int, fpp: float) -> None:
    expected = reference.sizing(items, fpp)
    if expected[0] > 2**31 - 1:
        with pytest.raises(ValueError, match="Java int"):
            filter_size(items, fpp)
    else:
        assert tuple(filter_size(items, fpp)) == expected


def test_the_default_size() -> None:
    assert filter_size(paimon.DEFAULT_ITEMS, paimon.DEFAULT_FPP) == (4_792_536, 3)
    assert filter_size(1, 0.5).num_bits == 8  # nb = 1, one byte


@pytest.mark.parametrize(
    ("items", "fpp", "error"),
    [(0, 0.1, ValueError), (2**31, 0.1, ValueError), (10, 0.0, ValueError), (10, 1.0, ValueError)],
)
def test_sizing_refuses_what_paimon_cannot_size(items: int, fpp: float, error: type) -> None:
    with pytest.raises(error):
        filter_size(items, fpp)


def test_sizing_refuses_non_numbers() -> None:
    with pytest.raises(TypeError):
        filter_size(10.0, 0.1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        filter_size(True, 0.1)
    with pytest.raises(TypeError):
        filter_size(10, "0.1")  # type: ignore[arg-type]


@given(
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=60),
    st.integers(1, 200),
    st.sampled_from([0.5, 0.1, 0.01, 1e-6]),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20),
)
def test_builds_and_probes_are_the_references(
    values: list[int], items: int, fpp: float, probes: list[int]
) -> None:
    hashes = [reference.value_hash(v, "BIGINT") for v in values]
    expected = reference.build(hashes, items, fpp)
    built = build_bloom_filter(values, "BIGINT", items, fpp)
    assert built.to_bytes() == expected
    answers = [reference.test(expected, reference.value_hash(v, "BIGINT")) for v in probes]
    assert built.might_contain_many(probes).tolist() == answers
    assert built.might_contain_many(values).all()  # no false negatives


@given(st.lists(st.binary(max_size=30), max_size=40), st.integers(1, 100))
def test_a_large_hash_count_probes_as_the_reference(values: list[bytes], items: int) -> None:
    """Tiny fpp: hundreds of hash functions, chunked."""
    hashes = [reference.value_hash(v, "VARBINARY") for v in values]
    assert build_bloom_filter(values, "BYTES", items, 1e-200).to_bytes() == reference.build(
        hashes, items, 1e-200
    )


def test_the_positions_are_the_references() -> None:
    from parquet_bloom._paimon.bloom import positions

    rng = np.random.default_rng(1)
    hashes = rng.integers(0, 2**64, size=500, dtype=np.uint64)
    for k, m in [(1, 8), (3, 4_792_536), (7, 2**31 - 8), (1076, 1552)]:
        got = positions(hashes, k, m)
        assert got.tolist() == [reference.positions(int(h), k, m) for h in hashes]


def test_nulls_are_skipped_and_kept() -> None:
    f = build_bloom_filter([1, None, 2], "INT", 10, 0.01)
    assert f == build_bloom_filter([1, 2], "INT", 10, 0.01)
    assert f.might_contain(None)
    assert f.might_contain_many([None, 1, 2]).tolist() == [True, True, True]


def test_from_bytes_round_trips_and_compares() -> None:
    f = build_bloom_filter(["a", "b"], "STRING", 100, 0.01)
    g = BloomFilter64.from_bytes(f.to_bytes(), "STRING")
    assert g == f and g.num_bits == f.num_bits and g.num_hashes == f.num_hashes
    assert g.num_bytes == len(f.to_bytes())
    assert g != build_bloom_filter(["a"], "STRING", 100, 0.01)
    assert pickle.loads(pickle.dumps(g)) == g
    assert "STRING" in repr(g)
    with pytest.raises(ValueError, match="read-only"):
        g.bits[0] = 1


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", "needs a 4-byte hash count"),
        (b"\x00\x00\x00\x03", "needs a 4-byte hash count"),
        (b"\x00\x00\x00\x00\xff", "0 hash functions"),
        (b"\xff\xff\xff\xff\xff", "-1 hash functions"),
        ((2049).to_bytes(4, "big") + b"\x00", "2049 hash functions"),
    ],
)
def test_hostile_payloads_are_located_corruption(payload: bytes, message: str) -> None:
    with pytest.raises(CorruptFileError, match=message) as caught:
        BloomFilter64.from_bytes(payload, source="f.index", column="c", offset=40)
    assert (caught.value.source, caught.value.column, caught.value.offset) == ("f.index", "c", 40)


def test_a_filter_says_what_it_holds() -> None:
    values = list(range(1000))
    f = build_bloom_filter(values, "INT", 1000, 0.01)
    assert 0 < f.fraction_set() < 1 and f.bits_set() == round(f.fraction_set() * f.num_bits)
    assert abs(f.estimate_items() - 1000) < 50
    assert 0.005 < f.fpp() < 0.02
    assert f.fpp(0) == 0.0
    full = BloomFilter64.from_bytes(b"\x00\x00\x00\x02" + b"\xff" * 8)
    assert math.isinf(full.estimate_items()) and full.fpp() == 1.0


def test_the_constructor_checks_its_sizes() -> None:
    with pytest.raises(ValueError, match="multiple of 8"):
        BloomFilter64(12, 2)
    with pytest.raises(ValueError, match="num_hashes"):
        BloomFilter64(16, 0)
    with pytest.raises(ValueError, match="no bloom-filter index"):
        BloomFilter64(16, 1, "BOOLEAN")
    f = BloomFilter64(16, 2, "INT")
    f.insert([1, 2])
    f.insert_hashes(paimon.hash_values([3], "INT"))
    assert f.might_contain_many([1, 2, 3]).all()


def test_values_without_a_type_hash_where_their_type_says_how() -> None:
    typed = {
        "BIGINT": [1, -5, 2**40],
        "STRING": ["x", "\u00e9"],
        "BYTES": [b"\x00", b"ab"],
        "DATE": [dt.date(2020, 1, 1)],
        "TIME": [dt.time(1, 2, 3)],
    }
    for data_type, values in typed.items():
        f = build_bloom_filter(values, data_type, 10, 0.01)
        untyped = BloomFilter64.from_bytes(f.to_bytes())
        assert untyped.might_contain_many(values).all()
        assert untyped.might_contain_many(pa.array(values)).all()
    ints = BloomFilter64.from_bytes(build_bloom_filter([7], "SMALLINT", 10, 0.01).to_bytes())
    assert ints.might_contain(7) and ints.might_contain_many(np.array([7], np.int16)).all()
    floats = BloomFilter64.from_bytes(build_bloom_filter([1.5], "DOUBLE", 10, 0.01).to_bytes())
    with pytest.raises(TypeError, match="FLOAT and DOUBLE"):
        floats.might_contain(1.5)
    with pytest.raises(TypeError, match="give data_type"):
        floats.might_contain_many(np.array([1.5]))
    with pytest.raises(TypeError, match="BOOLEAN"):
        floats.might_contain(True)

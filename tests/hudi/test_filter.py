"""Building and probing filters: SIMPLE, and DYNAMIC_V0's growth a row at a time and its
round-robin once bounded, each equal byte for byte to the reference written from Hudi's add()
(tests/hudi/reference.py); what the filter estimates, checked against what it does."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquet_bloom import hudi
from tests.hudi import reference as ref

pytestmark = pytest.mark.usefixtures("implementation")  # compiled, then numpy alone


def _keys(n: int, prefix: str = "key") -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


@pytest.mark.parametrize(
    ("nr", "max_nr", "n"),
    [
        (10, 35, 9),  # inside the first row
        (10, 35, 10),  # the first row full
        (10, 35, 11),  # a second row
        (10, 35, 40),  # the bound: 4 rows (4 x 10 >= 35), exactly full
        (10, 35, 41),  # the key that reaches the bound goes to row 0
        (10, 35, 42),  # then round-robin from row 0 again
        (10, 35, 137),
        (10, 5, 30),  # a bound below one row: one row, round-robin over itself
        (7, 21, 100),  # a bound that is a multiple of the row
        (1, 4, 20),
    ],
)
def test_dynamic_growth_and_round_robin_are_hudis(nr: int, max_nr: int, n: int) -> None:
    keys = _keys(n)
    expected = ref.Dynamic(211, 3, nr, max_nr)
    for k in keys:
        expected.add(k)
    f = hudi.HudiBloomFilter("DYNAMIC_V0", 3, 211, keys_per_row=nr, max_entries=max_nr)
    f.add_many(keys)
    assert f.to_bytes() == expected.write()
    assert f.rows == len(expected.matrix)
    assert f.keys_added == n
    # Added in batches of every size, the same state and bytes.
    g = hudi.HudiBloomFilter("DYNAMIC_V0", 3, 211, keys_per_row=nr, max_entries=max_nr)
    at, step = 0, 1
    while at < n:
        g.add_many(keys[at : at + step])
        at, step = at + step, step + 2
    assert g.to_bytes() == expected.write()
    probes = _keys(300, "probe") + keys
    assert f.might_contain_many(probes).tolist() == [expected.test(p) for p in probes]


def test_adding_to_a_filter_that_was_read_goes_as_in_hudi() -> None:
    # Hudi's deserialised filter has maxNr = 0: once its last row holds nr keys, keys go
    # round-robin over the rows it has.
    f = hudi.HudiBloomFilter("DYNAMIC_V0", 3, 97, keys_per_row=5, max_entries=12)
    first = _keys(13)
    f.add_many(first)
    g = hudi.HudiBloomFilter.from_footer_value(f.to_footer_value(), "DYNAMIC_V0")
    expected = ref.Dynamic(97, 3, 5, 0)
    expected.matrix = [ref.Row(97, 3) for _ in range(g.rows)]
    for row, keys in zip(expected.matrix, (first[:5], first[5:10], first[10:]), strict=True):
        for k in keys:
            row.add(k)
    expected.current = 3
    assert g.to_bytes() == expected.write()
    more = _keys(9, "more")
    g.add_many(more)
    for k in more:
        expected.add(k)
    assert g.to_bytes() == expected.write()


@settings(max_examples=40, deadline=None)
@given(
    keys=st.lists(st.text(min_size=1, max_size=12), min_size=0, max_size=60),
    kind=st.sampled_from(hudi.TYPES),
)
def test_no_false_negatives_and_the_references_answers(keys: list[str], kind: str) -> None:
    f = hudi.build_bloom_filter(keys, kind, num_entries=8, fpp=0.2, max_entries=20)
    encoded = [k.encode("utf-8", "surrogatepass") for k in keys]
    expected: ref.Dynamic | ref.Row
    if kind == "SIMPLE":
        expected = ref.Row(f.vector_size, f.num_hashes)
    else:
        expected = ref.Dynamic(f.vector_size, f.num_hashes, 8, 20)
    for k in encoded:
        expected.add(k)
    assert f.to_bytes() == expected.write()
    assert f.might_contain_many(keys).all()
    probes = [f"p{i}" for i in range(50)]
    assert f.might_contain_many(probes).tolist() == [expected.test(p.encode()) for p in probes]
    assert [f.might_contain(p) for p in probes[:5]] == [
        expected.test(p.encode()) for p in probes[:5]
    ]


def test_keys_of_every_kind_build_the_same_filter() -> None:
    texts = [f"rec-{i:05d}-é" for i in range(500)]
    built = [
        hudi.build_bloom_filter(keys, num_entries=200, fpp=1e-3, max_entries=400)
        for keys in (
            texts,
            [t.encode() for t in texts],
            np.array(texts),
            pa.array(texts),
            iter(texts),
        )
    ]
    assert len({f.to_footer_value() for f in built}) == 1


def test_the_key_range_follows_java_string_order() -> None:
    # Java compares UTF-16 code units: U+FFFD sorts above U+10000 (a surrogate pair), unlike
    # code points.
    f = hudi.build_bloom_filter(["b", "\ufffd", "\U00010000", "a"], "SIMPLE", 10, 0.01)
    assert (f.min_record_key, f.max_record_key) == ("a", "\ufffd")
    assert f.key_in_range("\U00010000") and f.key_in_range("b")
    assert not f.key_in_range("0")
    g = hudi.HudiBloomFilter.from_footer_value(f.to_footer_value())
    assert g.key_in_range("anything")  # no range known


def test_footer_metadata_is_what_hudi_writes() -> None:
    f = hudi.build_bloom_filter(["a", "b"])
    assert f.footer_metadata() == {
        hudi.FOOTER_KEY: f.to_footer_value(),
        hudi.TYPE_CODE_KEY: "DYNAMIC_V0",
        hudi.MIN_RECORD_KEY_KEY: "a",
        hudi.MAX_RECORD_KEY_KEY: "b",
    }
    simple = hudi.build_bloom_filter([b"a"], "SIMPLE")
    assert set(simple.footer_metadata()) == {hudi.FOOTER_KEY}  # no type code, no str range


def test_the_rate_it_predicts_is_the_rate_it_has() -> None:
    # 2,000 keys in a SIMPLE filter sized for 1,000 at 1%: the predicted rate at the estimated
    # count must match the rate measured on 40,000 keys never added, within 5 standard errors.
    keys = _keys(2000)
    f = hudi.build_bloom_filter(keys, "SIMPLE", num_entries=1000, fpp=0.01)
    assert f.might_contain_many(keys).all()
    estimate = f.estimate_num_keys()
    assert abs(estimate - 2000) < 2000 * 0.05
    predicted = f.fpp(estimate)
    trials = 40_000
    measured = f.might_contain_many(_keys(trials, "absent")).mean()
    error = math.sqrt(predicted * (1 - predicted) / trials)
    assert abs(measured - predicted) < 5 * error
    assert abs(f.fpp() - predicted) < 5 * error  # from the bits set
    assert 0 < f.fraction_set() < 1


def test_dynamic_rates_combine_the_rows() -> None:
    f = hudi.build_bloom_filter(_keys(3000), num_entries=1000, fpp=0.01, max_entries=2000)
    assert f.rows == 2 and f.keys_added == 3000
    trials = 40_000
    measured = f.might_contain_many(_keys(trials, "absent")).mean()
    predicted = f.fpp(f.estimate_num_keys())
    error = math.sqrt(predicted * (1 - predicted) / trials)
    assert abs(measured - predicted) < 5 * error
    assert abs(f.fpp(3000) - predicted) < 5 * error
    assert f.describe()["keys_added"] == 3000


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"type": "BLOOM"}, ValueError),
        ({"num_entries": 0}, ValueError),
        ({"num_entries": 2**31}, ValueError),
        ({"num_entries": 1.5}, TypeError),
        ({"fpp": 0.0}, ValueError),
        ({"fpp": 1.0}, ValueError),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        hudi.build_bloom_filter(["a"], **kwargs)  # type: ignore[arg-type]


def test_sizes_saturate_as_java_ints() -> None:
    # (int) Math.ceil(...) of a size past 2**31 - 1 is Integer.MAX_VALUE.
    assert hudi.filter_size(2**31 - 1, 1e-300).num_bits == 2**31 - 1


def test_pickles_and_equality() -> None:
    f = hudi.build_bloom_filter(["a", "b", "c"], num_entries=2, fpp=0.1, max_entries=4)
    g = pickle.loads(pickle.dumps(f))
    assert g == f and g.to_footer_value() == f.to_footer_value()
    g.add("d")
    assert g != f
    assert "DYNAMIC_V0" in repr(f)
    with pytest.raises(ValueError):
        f.bits[0, 0] = 1  # read-only view


def test_hashing_once_serves_every_filter_with_that_hash_count() -> None:
    keys = [f"k{i}" for i in range(100)]
    a = hudi.build_bloom_filter(keys[:50], "SIMPLE", 100, 1e-3)
    b = hudi.HudiBloomFilter("SIMPLE", a.num_hashes, a.vector_size + 12345)
    b.add_many(keys[50:])
    hashes = hudi.hash_keys(keys, a.num_hashes)
    assert (a.might_contain_hashes(hashes) == a.might_contain_many(keys)).all()
    assert (b.might_contain_hashes(hashes) == b.might_contain_many(keys)).all()
    with pytest.raises(ValueError, match="shape"):
        a.might_contain_hashes(hudi.hash_keys(keys, a.num_hashes + 1))

"""The hashes and filters against their references: CityHash v1.0.2 against the
clickhouse-cityhash package (which matches ClickHouse for CityHash64/128, FORMATS.md) and
ClickHouse's own ``cityHash64``; the numpy mixers and filters against the scalar references of
tests/clickhouse/reference.py; the tokenizers against ClickHouse's ``tokens``/``ngrams``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquet_bloom import clickhouse as pbch
from parquet_bloom._clickhouse import cityhash
from parquet_bloom._clickhouse.filters import best_practices
from parquet_bloom._clickhouse.tokens import Tokenizer
from tests.clickhouse import reference
from tests.clickhouse.conftest import ClickHouse

cityhash_ref = pytest.importorskip("clickhouse_cityhash.cityhash")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.integers(0, (1 << 64) - 1))
def test_cityhash_against_the_package(data: bytes, seed: int) -> None:
    assert cityhash.city_hash64(data) == cityhash_ref.CityHash64(data)
    assert cityhash.city_hash64_with_seed(data, seed) == cityhash_ref.CityHash64WithSeed(data, seed)
    low, high = cityhash.city_hash128(data)
    # The package returns the 128-bit value with the low half in the high bits.
    assert (low << 64) | high == cityhash_ref.CityHash128(data)


def test_cityhash_against_clickhouse(clickhouse: ClickHouse) -> None:
    words = ["", "a", "abc", "hello world", "été", "x" * 17, "y" * 33, "z" * 65, "q" * 300]
    got = clickhouse.query(
        "SELECT s, cityHash64(s) AS h FROM (SELECT arrayJoin(["
        + ", ".join(f"'{w}'" for w in words)
        + "]) AS s) SETTINGS output_format_json_quote_64bit_integers = 0"
    )
    assert {r["s"]: r["h"] for r in got} == {w: cityhash.city_hash64(w.encode()) for w in words}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, (1 << 64) - 1), max_size=50), st.integers(0, (1 << 64) - 1))
def test_numpy_mixers_against_reference(values: list[int], seed: int) -> None:
    arr = np.array(values, dtype=np.uint64)
    assert cityhash.int_hash64_array(arr).tolist() == [reference.int_hash64(v) for v in values]
    assert cityhash.hash128_to_64_array(arr, seed).tolist() == [
        reference.hash128_to_64(v, seed) for v in values
    ]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=80),
    st.sampled_from([0.5, 0.2, 0.05, 0.025, 0.01, 0.001, 0.0001, 0.0]),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20),
)
def test_bloom_filter_against_reference(values: list[int], fpp: float, probes: list[int]) -> None:
    f = pbch.build_filter(values, "Int64", "bloom_filter", fpp)
    bits, k = best_practices(fpp)
    hashes = {reference.int_hash64(v & reference.M) for v in values}
    assert f.to_bytes() == reference.bloom_filter_granule(hashes, bits, k)
    words = reference.Words(f.num_bytes)
    words.words = [
        int.from_bytes(f.to_bytes()[i : i + 8].ljust(8, b"\0"), "little")
        for i in range(0, f.num_bytes, 8)
    ]
    want = [
        bool(words.size)
        and all(
            words.find_hash_with_seed(reference.int_hash64(p & reference.M), s)
            for s in reference.SEEDS[:k]
        )
        for p in probes
    ]
    assert f.might_contain_many(probes).tolist() == want
    assert f.might_contain_many(values).all()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(max_size=30), max_size=20),
    st.integers(1, 64),
    st.integers(1, 5),
    st.integers(0, 2**32),
    st.lists(st.text(max_size=12), max_size=8),
)
def test_token_filter_against_reference(
    rows: list[str], size: int, k: int, seed: int, probes: list[str]
) -> None:
    f = pbch.build_filter(rows, "String", "tokenbf_v1", size, k, seed)
    tok = Tokenizer(None)
    ref = reference.Words(size)
    for r in rows:
        for t in tok.tokens(r.encode()):
            ref.add(t, k, seed)
    assert f.to_bytes() == ref.to_bytes()
    for p in probes:
        want = all(ref.find(t, k, seed) for t in tok.tokens(p.encode()))
        assert f.might_contain(p) == want


def test_best_practices() -> None:
    # From the table: the fewest bits a row reaching the rate, then the fewest hashes there
    # (tests/clickhouse/test_rebuild.py checks the sizes against ClickHouse's own granules).
    assert best_practices(0.025) == (8, 4)
    assert best_practices(0.01) == (10, 5)
    assert best_practices(0.5) == (2, 2)
    assert best_practices(0.0) == (19, 13)


STRINGS = [
    "",
    "abc",
    "hello, world!",
    "été au lac",
    "a1_b2-c3",
    "日本語テキスト",
    "x\x01y",
    "  lead",
]


def test_tokens_against_clickhouse(clickhouse: ClickHouse) -> None:
    tok = Tokenizer(None)
    for s in STRINGS:
        literal = "'" + s.replace("'", "\\'") + "'"
        (row,) = clickhouse.query(f"SELECT tokens({literal}) AS t")
        assert [t.decode() for t in tok.tokens(s.encode())] == row["t"], s


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_ngrams_against_clickhouse(clickhouse: ClickHouse, n: int) -> None:
    tok = Tokenizer(n)
    for s in STRINGS:
        literal = "'" + s.replace("'", "\\'") + "'"
        (row,) = clickhouse.query(f"SELECT ngrams({literal}, {n}) AS t")
        assert [t.decode() for t in tok.tokens(s.encode())] == row["t"], s


def test_siphash128_against_clickhouse(clickhouse: ClickHouse) -> None:
    from parquet_bloom._clickhouse.siphash import sip_hash128

    words = ["", "a", "abcdefg", "abcdefgh", "abcdefghi", "skp_idx_" + "x" * 140, "été" * 9]
    got = clickhouse.query(
        "SELECT s, hex(sipHash128(s)) AS h FROM (SELECT arrayJoin(["
        + ", ".join(f"'{w}'" for w in words)
        + "]) AS s)"
    )
    for r in got:
        low, high = sip_hash128(r["s"].encode())
        assert (low.to_bytes(8, "little") + high.to_bytes(8, "little")).hex().upper() == r["h"]
    assert len(got) == len(words)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(max_size=20), max_size=15),
    st.integers(1, 4),
    st.integers(1, 64),
    st.integers(1, 4),
    st.integers(0, 2**32),
    st.lists(st.text(max_size=10), max_size=6),
)
def test_ngram_filter_against_reference(
    rows: list[str], n: int, size: int, k: int, seed: int, probes: list[str]
) -> None:
    f = pbch.build_filter(rows, "String", "ngrambf_v1", n, size, k, seed)
    tok = Tokenizer(n)
    ref = reference.Words(size)
    for r in rows:
        for t in tok.tokens(r.encode()):
            ref.add(t, k, seed)
    assert f.to_bytes() == ref.to_bytes()
    assert f.might_contain_many(rows).all()
    for p in probes:
        assert f.might_contain(p) == all(ref.find(t, k, seed) for t in tok.tokens(p.encode()))

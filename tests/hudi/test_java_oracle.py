"""Hadoop's own Bloom filters as the oracle (HadoopOracle.java, compiled with the local JDK
against pyspark's hadoop-client-api): Hudi ported Hadoop's Filter, BloomFilter, HashFunction
and MurmurHash, so for keys of every length, non-ASCII included, our positions, our SIMPLE
bytes and our answers must be Hadoop's; DYNAMIC_V0 is Hadoop's DynamicBloomFilter up to the
bound, and differs from it after (Hadoop keeps adding rows, Hudi goes round-robin)."""

from __future__ import annotations

import random

import pytest

from parquet_bloom import hudi
from parquet_bloom._hudi.murmur import positions
from parquet_bloom._java import java_utf8
from tests.hudi.conftest import HadoopOracle

pytestmark = pytest.mark.usefixtures("implementation")  # compiled, then numpy alone


def _random_keys(seed: int, count: int) -> list[bytes]:
    """Keys of 1 to 70 bytes: ASCII, UTF-8 of non-ASCII text, and raw bytes >= 0x80 in every
    position of the tail (where Java's signed bytes matter)."""
    rnd = random.Random(seed)
    alphabet = "abcXYZ019-_/ éüß€中文😀\u0800\uffff"
    keys = []
    for i in range(count):
        kind = i % 3
        if kind == 0:
            keys.append("".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 20))).encode())
        elif kind == 1:
            keys.append(bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 70))))
        else:
            keys.append(f"{rnd.getrandbits(64):x}-{i}".encode())
    return keys


@pytest.mark.parametrize(
    ("vector_size", "num_hashes"),
    [(2_587_966, 30), (1, 3), (97, 7), (2**31 - 1, 5), (64, 1)],
)
def test_positions_are_hadoops(hadoop: HadoopOracle, vector_size: int, num_hashes: int) -> None:
    keys = _random_keys(vector_size, 900)
    expected = hadoop.positions(keys, vector_size, num_hashes)
    ours = positions(hudi.hash_keys(keys, num_hashes), vector_size)
    assert ours.ravel().tolist() == expected
    assert len(expected) == 900 * num_hashes


@pytest.mark.parametrize(("num_entries", "fpp"), [(60, 0.01), (1000, 1e-6), (7, 0.3)])
def test_simple_filters_are_hadoops_byte_for_byte(
    hadoop: HadoopOracle, num_entries: int, fpp: float
) -> None:
    keys = _random_keys(num_entries, num_entries * 3)  # over-filled: false positives happen
    probes = keys + _random_keys(num_entries + 1, 3000)
    size = hudi.filter_size(num_entries, fpp)
    written, answers = hadoop.simple(keys, probes, size.num_bits, size.num_hashes)
    ours = hudi.build_bloom_filter(keys, "SIMPLE", num_entries, fpp)
    # Hudi's SIMPLE is Hadoop's layout exactly: the versioned header (version -1, nbHash,
    # hashType 1, vectorSize), then the bits; nothing differs.
    assert ours.to_bytes() == written
    assert ours.might_contain_many(probes).tolist() == answers
    assert not all(answers[len(keys) :]), "some absent keys must pass for the test to bite"
    read = hudi.HudiBloomFilter.from_bytes(written, "SIMPLE")
    assert read.might_contain_many(probes).tolist() == answers


@pytest.mark.parametrize(("nr", "n"), [(50, 1), (50, 50), (50, 51), (50, 200), (13, 130)])
def test_dynamic_below_the_bound_is_hadoops(hadoop: HadoopOracle, nr: int, n: int) -> None:
    keys = _random_keys(n, n)
    probes = keys + _random_keys(n + 7, 2000)
    size = hudi.filter_size(nr, 0.05)
    written, answers = hadoop.dynamic(keys, probes, size.num_bits, size.num_hashes, nr)
    # A bound that n keys do not pass: Hudi grows exactly as Hadoop does.
    ours = hudi.build_bloom_filter(keys, "DYNAMIC_V0", nr, 0.05, max_entries=n + nr)
    assert ours.to_bytes() == written
    assert ours.might_contain_many(probes).tolist() == answers


def test_dynamic_past_the_bound_differs_from_hadoop_as_hudi_meant(hadoop: HadoopOracle) -> None:
    nr, bound, n = 20, 50, 170
    keys = _random_keys(99, n)
    size = hudi.filter_size(nr, 0.05)
    written, _ = hadoop.dynamic(keys, [], size.num_bits, size.num_hashes, nr)
    hadoop_filter = hudi.HudiBloomFilter.from_bytes(written, "DYNAMIC_V0")
    ours = hudi.build_bloom_filter(keys, "DYNAMIC_V0", nr, 0.05, max_entries=bound)
    # Hadoop adds a row every nr keys (9 rows); Hudi stops at ceil(bound / nr) = 3 rows.
    assert hadoop_filter.rows == -(-n // nr) and ours.rows == -(-bound // nr)
    # Up to the bound both hold the same rows: Hadoop's first 3 rows are ours before the
    # round-robin began.
    at_bound = hudi.build_bloom_filter(keys[: ours.rows * nr], "DYNAMIC_V0", nr, 0.05, bound)
    assert (hadoop_filter.bits[: ours.rows] == at_bound.bits).all()
    # Past it, Hudi's rows take the later keys round-robin: every key is still found, and
    # the header's count keeps rising past nr (currentNbRecord is never reset).
    assert ours.might_contain_many(keys).all()
    assert ours.current_records == nr + (n - ours.rows * nr)
    assert hadoop_filter.current_records == n - (hadoop_filter.rows - 1) * nr


def test_sizing_is_hudis_in_java_arithmetic(hadoop: HadoopOracle) -> None:
    rnd = random.Random(5)
    pairs = [(60_000, 1e-9), (100_000, 1e-9), (1, 0.5), (2**31 - 1, 1e-12)]
    pairs += [(rnd.randint(1, 10**7), 10 ** rnd.uniform(-15, -0.01)) for _ in range(3000)]
    expected = hadoop.sizing(pairs)
    assert [tuple(hudi.filter_size(n, p)) for n, p in pairs] == expected


def test_keys_are_javas_utf8(hadoop: HadoopOracle) -> None:
    strings = ["plain", "é", "€uro", "中文", "😀", "a\ud800b", "\udc00", "\ud83d\ude00x"]
    strings += ["\ud83d", "x\ud83d", "\ud83d\ud83d\ude00", "\uffff\u0800"]
    assert [java_utf8(s) for s in strings] == hadoop.utf8(strings)

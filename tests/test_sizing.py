"""Each writer's sizing rule, against the writers' own numbers and against files they write."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import parquet_bloom as pb
from parquet_bloom import _sizing as sizing
from parquet_bloom._sizing import expected_num_bytes, fold_to_fpp, matching_flavors
from tests.writers import chunk_hashes

KIB = 1024
MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("ndv", "java", "cpp", "rs", "duckdb"),
    [(27, 64, 64, 32, 32), (100, 256, 128, 128, 128), (1693, 2048, 4096, 2048, 2048)],
)
def test_spec_facts_examples(ndv: int, java: int, cpp: int, rs: int, duckdb: int) -> None:
    # The four writers disagree on these at fpp 0.01 (docs/format-notes.md, "Where the writers
    # disagree").
    got = [
        expected_num_bytes(ndv, 0.01, f)
        for f in ("parquet-java", "arrow-cpp", "arrow-rs", "duckdb")
    ]
    assert got == [java, cpp, rs, duckdb]


def test_parquet_java_clears_bit_8_instead_of_rounding_to_a_block() -> None:
    # 1693 values at 1 %: m = 16390.8, numBits = 16390, and (16390 + 255) & ~256 = 16389: bit 8
    # cleared, 2048 bytes. Rounding up to whole blocks, (16390 + 255) & ~255 = 16640 bits, would
    # give 2080 bytes and so 4096.
    assert (16390 + 255) & ~256 == 16389
    assert (16390 + 255) & ~255 == 16640
    assert expected_num_bytes(1693, 0.01, "parquet-java") == 2048


def test_parquet_java_max_bytes() -> None:
    # Default parquet.bloom.filter.max.bytes is 1 MiB: a large NDV is capped there.
    assert expected_num_bytes(10_000_000, 0.01, "parquet-java") == MIB
    assert expected_num_bytes(10_000_000, 0.01, "parquet-java", max_bytes=64 * MIB) == 16 * MIB
    # The cap is used as given, power of two or not ...
    assert expected_num_bytes(10_000, 0.01, "parquet-java", max_bytes=3000) == 3000
    # ... unless it lies outside (32, 128 MiB), when the constructor keeps its 128 MiB bound.
    assert expected_num_bytes(10_000_000, 0.01, "parquet-java", max_bytes=32) == 16 * MIB
    assert expected_num_bytes(0, 0.01, "parquet-java") == 32


@pytest.mark.parametrize(
    ("fpp", "ndv", "num_bits"),
    # arrow-rs parquet/src/bloom_filter/mod.rs test_num_of_bits_from_ndv_fpp
    [
        (0.1, 10, 57), (0.01, 10, 96), (0.001, 10, 146), (0.1, 100, 577), (0.01, 100, 968),
        (0.001, 100, 1460), (0.1, 1000, 5772), (0.01, 1000, 9681), (0.001, 1000, 14607),
        (0.1, 10000, 57725), (0.01, 10000, 96815), (0.001, 10000, 146076),
        (0.1, 100000, 577254), (0.01, 100000, 968152), (0.001, 100000, 1460769),
        (0.1, 1000000, 5772541), (0.01, 1000000, 9681526), (0.001, 1000000, 14607697),
    ],
)  # fmt: skip
def test_arrow_rs_bits_table(fpp: float, ndv: int, num_bits: int) -> None:
    expected = min(max(num_bits // 8, 32), 128 * MIB)
    expected = 1 << (expected - 1).bit_length()
    assert expected_num_bytes(ndv, fpp, "arrow-rs") == expected


@pytest.mark.parametrize(
    ("ndv", "fpp", "size"),
    # The table in Arrow C++ parquet/properties.h BloomFilterOptions.
    [
        (100_000, 0.10, 128 * KIB), (100_000, 0.05, 128 * KIB), (100_000, 0.01, 128 * KIB),
        (1_000_000, 0.10, 1024 * KIB), (1_000_000, 0.05, 1024 * KIB),
        (1_000_000, 0.01, 2048 * KIB), (10_000_000, 0.10, 8192 * KIB),
        (10_000_000, 0.05, 16384 * KIB), (10_000_000, 0.01, 16384 * KIB),
    ],
)  # fmt: skip
def test_arrow_cpp_documented_table(ndv: int, fpp: float, size: int) -> None:
    assert expected_num_bytes(ndv, fpp, "arrow-cpp") == size


@pytest.mark.parametrize(
    ("ndv", "fpp", "size"),
    # The table in arrow-rs parquet/src/bloom_filter/mod.rs ("Bloom Filter Size").
    [
        (10_000, 0.1, 8 * KIB), (10_000, 0.01, 16 * KIB), (10_000, 0.001, 32 * KIB),
        (100_000, 0.0001, 512 * KIB), (1_000_000, 0.1, 1024 * KIB),
        (1_000_000, 0.000001, 8192 * KIB),
    ],
)  # fmt: skip
def test_arrow_rs_documented_table(ndv: int, fpp: float, size: int) -> None:
    assert expected_num_bytes(ndv, fpp, "arrow-rs") == size


def test_caps_and_floors() -> None:
    for flavor in sizing.FLAVORS:
        assert expected_num_bytes(0, 0.01, flavor) == 32, flavor
        assert expected_num_bytes(1, 0.5, flavor) == 32, flavor
    # Arrow C++, arrow-rs and the spec stop at 128 MiB; DuckDB has no upper bound.
    huge = 2_000_000_000
    assert expected_num_bytes(huge, 0.01, "arrow-cpp") == 128 * MIB
    assert expected_num_bytes(huge, 0.01, "arrow-rs") == 128 * MIB
    assert expected_num_bytes(huge, 0.01, "spec") == 128 * MIB
    assert expected_num_bytes(huge, 0.01, "duckdb") == 4096 * MIB
    assert expected_num_bytes(huge, 0.01, "duckdb", max_bytes=MIB) == MIB


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 50_000_000), st.floats(1e-6, 0.5))
def test_every_flavor_is_a_power_of_two_near_the_formula(ndv: int, fpp: float) -> None:
    formula_bits = -8 * ndv / math.log(1 - fpp ** (1 / 8))
    for flavor in sizing.FLAVORS:
        n = expected_num_bytes(ndv, fpp, flavor, max_bytes=128 * MIB)
        assert n & (n - 1) == 0 and 32 <= n <= 128 * MIB, (flavor, n)
        bits = formula_bits
        if flavor == "clickhouse" and fpp == sizing.DEFAULT_FPP["clickhouse"]:
            # ClickHouse's default is 10.5 bits a value, not the formula's 9.68 at 1 %.
            bits = ndv * sizing.CLICKHOUSE_DEFAULT_BITS_PER_VALUE
        if 32 * 8 * 2 < bits < 64 * MIB * 8:
            # Rounding differs, but never by more than a factor of two either way (beyond
            # parquet-java's rounding up to a block, 255 bits, before its power of two).
            assert bits / 8 / 2 <= n <= (bits + 255) / 8 * 2, (flavor, n, bits)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown flavor"):
        expected_num_bytes(10, 0.01, "parquet-mr")
    with pytest.raises(ValueError, match="ndv"):
        expected_num_bytes(-1, 0.01)
    with pytest.raises(TypeError, match="ndv"):
        expected_num_bytes(True, 0.01)
    with pytest.raises(TypeError, match="ndv"):
        expected_num_bytes(10.0, 0.01)  # type: ignore[arg-type]
    for fpp in (0.0, 1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="fpp"):
            expected_num_bytes(10, fpp)
    with pytest.raises(ValueError, match="max_bytes"):
        expected_num_bytes(10, 0.01, "arrow-rs", max_bytes=3000)
    with pytest.raises(TypeError, match="filter"):
        fold_to_fpp(b"\0" * 32, 0.01)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="hashes"):
        matching_flavors(64, 27, 0.01, hashes=np.zeros(3, dtype=np.float64))


# -- folding ---------------------------------------------------------------------------------------


def random_hashes(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**64, n, dtype=np.uint64)


def filter_of(num_bytes: int, hashes: np.ndarray) -> pb.SplitBlockBloomFilter:
    f = pb.SplitBlockBloomFilter(num_bytes)
    f.insert_hashes(hashes)
    return f


def test_fold_of_an_empty_filter_is_one_block() -> None:
    folded = fold_to_fpp(pb.SplitBlockBloomFilter(MIB), 0.01)
    assert folded.num_bytes == 32 and folded.bits_set() == 0
    assert fold_to_fpp(pb.SplitBlockBloomFilter(32), 0.01).num_bytes == 32


def test_fold_never_goes_below_one_block() -> None:
    assert fold_to_fpp(filter_of(1024, random_hashes(1)), 0.99).num_bytes == 32


def test_fold_keeps_a_filter_that_needs_its_size() -> None:
    f = filter_of(4096, random_hashes(2000))  # ~39 % of bits set: folding once gives ~2.3 %
    assert fold_to_fpp(f, 0.01) == f
    assert fold_to_fpp(f, 0.01) is not f


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([1024, 8 * KIB, 64 * KIB, MIB]),
    st.integers(1, 20_000),
    st.sampled_from([0.001, 0.01, 0.05, 0.2]),
)
def test_fold_rule_and_exactness(num_bytes: int, n: int, fpp: float) -> None:
    hashes = random_hashes(n, seed=n)
    f = filter_of(num_bytes, hashes)
    folded = fold_to_fpp(f, fpp)
    k = (num_bytes // folded.num_bytes).bit_length() - 1
    # The rule of docs/format-notes.md, "Folding after insertion", written directly: k is the
    # largest with the estimate <= fpp.
    fill = f.fraction_set()

    def estimate(j: int) -> float:
        return float((1 - (1 - fill) ** (2**j)) ** 8)

    assert k == 0 or estimate(k) <= fpp
    assert folded.num_bytes == 32 or estimate(k + 1) > fpp
    # Folding is exact: the folded filter is the one built at that size.
    assert folded == filter_of(folded.num_bytes, hashes)
    assert sizing.num_folds(f, fpp) == k


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 5000), st.integers(0, 2**32))
def test_bits_set_by_size_without_building(n: int, seed: int) -> None:
    hashes = random_hashes(n, seed)
    hashes[: n // 10] = hashes[n // 10 : 2 * (n // 10)]  # repeated values count once
    counts = sizing.bits_set_by_size(hashes)
    assert len(counts) == 23  # 32 B .. 128 MiB
    for log2_blocks in range(0, 16):
        assert counts[log2_blocks] == filter_of(32 << log2_blocks, hashes).bits_set()
    assert counts[-1] <= 8 * len(np.unique(hashes))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=300), st.booleans())
def test_distinct_hashes_are_the_sorted_set_of_bit_patterns(
    values: list[int], signed: bool
) -> None:
    unsigned = [v % 2**64 for v in values + values[: len(values) // 3]]  # with repeats
    hashes = np.array(unsigned, dtype=np.uint64)
    given_as = hashes.view(np.int64) if signed else hashes  # JVM tools hand out signed longs
    distinct = sizing.distinct_hashes(given_as)
    assert distinct.dtype == np.uint64
    assert distinct.tolist() == sorted(set(unsigned))


def test_distinct_hashes_refuses_other_types() -> None:
    assert sizing.distinct_hashes(np.array([], dtype=np.float64)).size == 0
    with pytest.raises(TypeError, match="64-bit integers"):
        sizing.distinct_hashes(np.array([1.5, 2.5]))
    with pytest.raises(TypeError, match="64-bit integers"):
        sizing.distinct_hashes(np.array([1, 2], dtype=np.int32))


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 5000), st.sampled_from([0.001, 0.01, 0.05]))
def test_written_num_bytes_is_the_fold_of_each_initial_size(n: int, fpp: float) -> None:
    hashes = random_hashes(n, seed=n)
    written = sizing.written_num_bytes(fpp, hashes=hashes)
    assert sorted(written) == [32 << j for j in range(23)]
    for initial in (32, 1024, 64 * KIB, MIB):
        assert written[initial] == fold_to_fpp(filter_of(initial, hashes), fpp).num_bytes
    # Once the initial filter is much larger than needed, the written size stops changing.
    assert written[64 * MIB] == written[128 * MIB]
    # The expected-fill estimate lands within one halving of the exact answer.
    estimated = sizing.written_num_bytes(fpp, ndv=n)
    assert estimated[MIB] in (written[MIB] // 2, written[MIB], written[MIB] * 2)


# -- matching ----------------------------------------------------------------------------------


def test_matching_flavors_by_rule() -> None:
    # arrow-rs sizes 27 values at 32 bytes, but folding from a larger filter stops at 64.
    # ClickHouse asks for 27 * 10.5 / 256 = 1.1 blocks (64 bytes) and 100 * 10.5 / 256 = 4.1
    # blocks (256 bytes).
    assert matching_flavors(64, 27, 0.01) == [
        "spec", "parquet-java", "arrow-cpp", "arrow-rs", "clickhouse",
    ]  # fmt: skip
    assert matching_flavors(32, 27, 0.01) == ["arrow-rs", "duckdb"]
    assert matching_flavors(256, 100, 0.01) == ["parquet-java", "clickhouse"]
    assert matching_flavors(1 << 20, 100, 0.01) == []


def test_matching_flavors_folded() -> None:
    # A folding writer sized for a million values writes, for 500 of them, the folded size.
    hashes = random_hashes(500)
    initial = expected_num_bytes(1_048_576, 0.01, "arrow-cpp")
    folded = fold_to_fpp(filter_of(initial, hashes), 0.01).num_bytes
    assert folded < initial
    # Asked about the chunk's own NDV, the folding writers match: sized for 500 or more, folded.
    assert {"arrow-cpp", "arrow-rs"} <= set(matching_flavors(folded, 500, 0.01, hashes=hashes))
    # Without the hashes, the expected fill of 500 values gives the same answer here.
    assert {"arrow-cpp", "arrow-rs"} <= set(matching_flavors(folded, 500, 0.01))
    # A size bigger than folding leaves is no folding writer's, nor anyone's.
    assert matching_flavors(4 * folded, 500, 0.01, hashes=hashes) == []


# -- ClickHouse ----------------------------------------------------------------------------------


def clickhouse_as_written(ndv: int, bits_per_value: float) -> int | None:
    """ClickHouse's makeBloomFilter (Write.cpp), statement for statement: no filter without
    values; double blocks from one while below the request; give up past 4 Mi blocks."""
    if ndv == 0:
        return None
    requested = float(ndv) * bits_per_value / 256
    num_blocks = 1
    while num_blocks < requested:
        if num_blocks >= 4 * 1024 * 1024:
            return None
        num_blocks *= 2
    return num_blocks * 32


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.integers(0, 2_000_000_000),
        # Right at a boundary: n * bits / 256 a power of two, or one value either side.
        st.tuples(st.integers(0, 26), st.integers(-1, 1)).map(
            lambda t: max(2 ** t[0] * 32 + t[1], 0)
        ),
    ),
    st.one_of(st.sampled_from([6.0, 8.0, 10.5, 16.9, 26.4, 41.0]), st.floats(0.0, 200.0)),
)
def test_clickhouse_rule_is_its_loop(ndv: int, bits: float) -> None:
    assert sizing.clickhouse_num_bytes(ndv, bits) == clickhouse_as_written(ndv, bits)


def test_clickhouse_boundaries_and_cap() -> None:
    # At 10.5 bits a value, 24 values ask for 0.98 of a block and 25 for 1.03.
    for k in range(23):
        n = math.floor(256 * 2**k / 10.5)
        assert n * 10.5 / 256 <= 2**k < (n + 1) * 10.5 / 256
        assert sizing.clickhouse_num_bytes(n) == 32 * 2**k
        expected_next = 32 * 2 ** (k + 1) if k < 22 else None  # past 128 MiB: no filter
        assert sizing.clickhouse_num_bytes(n + 1) == expected_next
    assert sizing.clickhouse_num_bytes(0) is None  # a chunk without values gets no filter
    assert sizing.clickhouse_num_bytes(1, 0.0) == 32


def test_clickhouse_flavor() -> None:
    for ndv in (1, 24, 25, 1000, 1561, 123_456, 10_000_000):
        # Its default, 10.5 bits, at the rate ClickHouse documents for it.
        assert expected_num_bytes(ndv, 0.01, "clickhouse") == sizing.clickhouse_num_bytes(ndv)
        # A configured setting, whatever rate is named.
        for fpp in (0.01, 0.3):
            got = expected_num_bytes(ndv, fpp, "clickhouse", bits_per_value=16.9)
            assert got == sizing.clickhouse_num_bytes(ndv, 16.9)
        # Another rate without a setting: the spec formula's bits per value for it.
        bits = -8 / math.log1p(-(0.001 ** (1 / 8)))
        assert expected_num_bytes(ndv, 0.001, "clickhouse") == sizing.clickhouse_num_bytes(
            ndv, bits
        )
    # ClickHouse's 10.5 bits exceed the formula's 9.68 at 1 %: 1561 values get twice the bytes.
    assert [expected_num_bytes(1561, 0.01, f) for f in sizing.FLAVORS] == [
        2048, 2048, 2048, 2048, 2048, 4096,
    ]  # fmt: skip
    # Where ClickHouse writes no filter the flavour gives the size it would have needed.
    huge = 200_000_000
    assert sizing.clickhouse_num_bytes(huge) is None
    assert expected_num_bytes(huge, 0.01, "clickhouse") == 256 * MIB
    assert expected_num_bytes(huge, 0.01, "clickhouse", max_bytes=MIB) == MIB


def test_matching_flavors_names_clickhouse_only_for_its_sizes() -> None:
    only_clickhouse = 0
    for ndv in range(1, 20_000, 37):
        size = sizing.clickhouse_num_bytes(ndv)
        assert size is not None
        matches = matching_flavors(size, ndv, 0.01)
        assert "clickhouse" in matches
        only_clickhouse += matches == ["clickhouse"]
        for other in (size // 2, size * 2):
            if other >= 32:
                assert "clickhouse" not in matching_flavors(other, ndv, 0.01)
    # Sizes no other writer's rule gives at 1 %: the reason for the flavour.
    assert only_clickhouse > 0


def test_clickhouse_bad_arguments() -> None:
    with pytest.raises(ValueError, match="bits_per_value"):
        expected_num_bytes(10, 0.01, "arrow-cpp", bits_per_value=10.5)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="bits_per_value"):
            sizing.clickhouse_num_bytes(10, bad)
        with pytest.raises(ValueError, match="bits_per_value"):
            expected_num_bytes(10, 0.01, "clickhouse", bits_per_value=bad)
    with pytest.raises(TypeError, match="bits_per_value"):
        sizing.clickhouse_num_bytes(10, True)
    with pytest.raises(TypeError, match="ndv"):
        sizing.clickhouse_num_bytes(10.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="overflows"):
        sizing.clickhouse_num_bytes(2**62, 1e300)


# -- real writers --------------------------------------------------------------------------------

CARDINALITIES = (1, 27, 100, 700, 1693, 2000)


def varied_table(rows: int = 2000) -> pa.Table:
    """One column per cardinality, so that some filters fold a lot, some little, some not."""
    i = np.arange(rows)
    columns = {f"i{c}": pa.array((i % c) * 7919 + c, pa.int64()) for c in CARDINALITIES}
    columns["s"] = pa.array([f"k{v % 300}" for v in i])
    return pa.table(columns)


@pytest.mark.parametrize(("ndv", "fpp"), [(2000, 0.01), (None, 0.05), (100_000, 0.001)])
def test_pyarrow_filters_are_our_fold_of_the_unfolded_size(
    tmp_path: Path, ndv: int | None, fpp: float
) -> None:
    table = varied_table()
    options = {
        c: ({"fpp": fpp} if ndv is None else {"ndv": ndv, "fpp": fpp}) for c in table.column_names
    }
    path = tmp_path / "a.parquet"
    pq.write_table(table, path, bloom_filter_options=options)
    # Arrow C++ resolves an unset NDV to the writer's max_row_group_length (1024 * 1024).
    initial = expected_num_bytes(ndv or sizing.DEFAULT_NDV["arrow-cpp"], fpp, "arrow-cpp")
    sizes = set()
    with pb.BloomFilterReader(path) as reader:
        for column in table.column_names:
            f = reader.filter(0, column)
            assert f is not None
            hashes = chunk_hashes(path, 0, column)
            assert fold_to_fpp(filter_of(initial, hashes), fpp) == f, column
            assert "arrow-cpp" in matching_flavors(f.num_bytes, len(hashes), fpp, hashes=hashes)
            sizes.add(f.num_bytes)
    assert len(sizes) >= 3  # the fold really depends on the values


def test_deltalake_filters_are_our_fold_of_the_unfolded_size(tmp_path: Path) -> None:
    import deltalake

    table = varied_table()
    fpp, ndv = 0.01, 5000
    props = deltalake.WriterProperties(
        default_column_properties=deltalake.ColumnProperties(
            bloom_filter_properties=deltalake.BloomFilterProperties(True, fpp, ndv)
        )
    )
    deltalake.write_deltalake(str(tmp_path), table, writer_properties=props)
    (path,) = tmp_path.glob("*.parquet")
    initial = expected_num_bytes(ndv, fpp, "arrow-rs")
    with pb.BloomFilterReader(path) as reader:
        assert (reader.metadata.created_by or "").startswith("parquet-rs")
        for column in table.column_names:
            f = reader.filter(0, column)
            assert f is not None
            hashes = chunk_hashes(path, 0, column)
            assert fold_to_fpp(filter_of(initial, hashes), fpp) == f, column
            assert "arrow-rs" in matching_flavors(f.num_bytes, len(hashes), fpp, hashes=hashes)


def test_duckdb_sizes_for_the_dictionary(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "d.parquet"
    selects = ", ".join(f"((i % {c}) * 7919 + {c})::bigint as i{c}" for c in CARDINALITIES)
    with duckdb.connect() as con:
        con.sql(f"copy (select {selects} from range(6000) t(i)) to '{path}' (format parquet)")
    checked = 0
    with pb.BloomFilterReader(path) as reader:
        for c in CARDINALITIES:
            f = reader.filter(0, f"i{c}")
            if f is None:  # DuckDB writes filters for dictionary-encoded chunks only
                continue
            ndv = len(chunk_hashes(path, 0, f"i{c}"))
            assert ndv == c
            assert f.num_bytes == expected_num_bytes(ndv, sizing.DEFAULT_FPP["duckdb"], "duckdb")
            assert "duckdb" in matching_flavors(f.num_bytes, ndv, 0.01)
            checked += 1
    assert checked >= 4

"""ClickHouse (in chDB) as a fifth independent writer, and as a reader of the filters we write.

As a writer: every filter ClickHouse's Parquet writer puts in a file is rebuilt byte for byte
from its chunk's values, is sized by the ``clickhouse`` rule of ``_sizing`` (checked at the block
boundaries against the writer itself), and ``check_file`` and ``parquet-bloom check`` find the
files valid. As a reader: on a file without filters or dictionaries, the filters this library
adds make chDB read exactly the row groups our own probes keep (its ``rows_read`` statistic),
with the right answers; turning its Bloom filter push-down off, or removing the filters, makes
it read every row group again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import _logical as logical
from parquet_bloom import _sizing as sizing
from parquet_bloom.cli import main
from tests import writers

chdb = pytest.importorskip("chdb", reason="chDB (ClickHouse in a Python module) is not installed")

DEFAULT_BITS = sizing.CLICKHOUSE_DEFAULT_BITS_PER_VALUE
# Three ways ClickHouse writes the same columns: its defaults; its Arrow-based encoder; and other
# settings (16.9 bits a value, which its documentation puts at 0.1 %; a 1 KiB dictionary limit, so
# most chunks fall back to PLAIN; small pages; filters flushed after each row group; dates,
# datetimes, strings, fixed strings and enums mapped to other Parquet types).
VARIANTS: dict[str, dict[str, object]] = {
    "defaults": {},
    "arrow-encoder": {"output_format_parquet_use_custom_encoder": 0},
    "settings": {
        "output_format_parquet_bloom_filter_bits_per_value": 16.9,
        "output_format_parquet_max_dictionary_size": 1024,
        "output_format_parquet_data_page_size": 4096,
        "output_format_parquet_bloom_filter_flush_threshold_bytes": 0,
        "output_format_parquet_date_as_uint16": 1,
        "output_format_parquet_datetime_as_uint32": 1,
        "output_format_parquet_string_as_string": 0,
        "output_format_parquet_fixed_string_as_fixed_byte_array": 0,
        "output_format_parquet_enum_as_byte_array": 0,
    },
}


def bits_per_value(variant: str) -> float:
    value = VARIANTS[variant].get("output_format_parquet_bloom_filter_bits_per_value", DEFAULT_BITS)
    assert isinstance(value, float)
    return value


@pytest.fixture(scope="module")
def chdb_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("chdb")
    return {
        name: writers.write_chdb(directory / f"{name}.parquet", settings=settings)
        for name, settings in VARIANTS.items()
    }


def chunk_hashes(path: Path, row_group: int, leaf: Any) -> np.ndarray:
    """The hashes of one chunk's values, found from pyarrow's reading of the file."""
    values = writers.leaf_values(path, row_group, leaf.path)
    if leaf.physical_type == "BOOLEAN":
        # ClickHouse hashes a boolean as its one byte, 0 or 1 (Write.cpp hashes the converted
        # value's bytes; a C++ bool is one byte); this library declines to hash BOOLEAN.
        return pb.hash_values([bytes([v]) for v in values.drop_null().to_pylist()], "BYTE_ARRAY")
    return np.asarray(logical.column_hashes(values, leaf))


# -- ClickHouse as a writer ----------------------------------------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_chdb_filters_are_rebuilt_byte_for_byte(chdb_files: dict[str, Path], variant: str) -> None:
    path = chdb_files[variant]
    bits = bits_per_value(variant)
    rebuilt_chunks = 0
    with pb.BloomFilterReader(path) as reader:
        assert (reader.metadata.created_by or "").startswith("ClickHouse")
        assert reader.num_row_groups == writers.NUM_ROW_GROUPS
        filters = reader.filters()
        leaves = reader.schema_leaves
        types = {leaf.physical_type for leaf in leaves}
        for row_group in range(reader.num_row_groups):
            for leaf in leaves:
                f = filters.get((row_group, leaf.path))
                if leaf.path == "all_null":
                    assert f is None  # no value hashed, no filter
                    continue
                assert f is not None, (row_group, leaf.path)  # every other chunk has one
                hashes = chunk_hashes(path, row_group, leaf)
                rebuilt = pb.SplitBlockBloomFilter(f.num_bytes)
                rebuilt.insert_hashes(hashes)
                assert rebuilt.to_bytes() == f.to_bytes(), (row_group, leaf.path)
                ndv = int(sizing.distinct_hashes(hashes).size)
                assert f.num_bytes == sizing.clickhouse_num_bytes(ndv, bits), (leaf.path, ndv)
                rebuilt_chunks += 1
    assert rebuilt_chunks == writers.NUM_ROW_GROUPS * (len(leaves) - 1)
    assert {"BOOLEAN", "INT32", "INT64", "FLOAT", "DOUBLE", "BYTE_ARRAY"} <= types
    assert "FIXED_LEN_BYTE_ARRAY" in types


def test_chdb_filter_placement(chdb_files: dict[str, Path]) -> None:
    # By default ClickHouse keeps the filters until 128 MiB of them are pending
    # (output_format_parquet_bloom_filter_flush_threshold_bytes): all after the last row group.
    # With a threshold of 0, each row group's filters follow it.
    for variant, path in chdb_files.items():
        with pb.BloomFilterReader(path) as reader:
            chunks = reader.column_chunks
        data: dict[int, list[tuple[int, int]]] = {}
        for c in chunks:
            start = c.dictionary_page_offset or c.data_page_offset
            data.setdefault(c.row_group, []).append((start, start + c.total_compressed_size))
        starts = [min(s for s, _ in data[rg]) for rg in sorted(data)]
        ends = [max(e for _, e in data[rg]) for rg in sorted(data)]
        offsets = [(c.row_group, c.bloom_filter_offset) for c in chunks if c.bloom_filter_offset]
        assert offsets
        for row_group, offset in offsets:
            if variant == "settings":
                assert ends[row_group] <= offset, (row_group, offset)
                if row_group + 1 < len(starts):
                    assert offset < starts[row_group + 1], (row_group, offset)
            else:
                assert offset >= ends[-1], (row_group, offset)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_check_finds_chdb_files_valid(
    chdb_files: dict[str, Path], variant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = chdb_files[variant]
    report = pb.check_file(path)
    assert report.ok and report.violations == ()
    checked = [c for c in report.chunks if c.physical_type != "BOOLEAN"]
    with pb.BloomFilterReader(path) as reader:
        num_leaves = len(reader.schema_leaves)
    # Every chunk but those of all_null (no filter) and bool (which the audit does not hash).
    assert len(checked) == writers.NUM_ROW_GROUPS * (num_leaves - 2)
    named = 0
    for c in checked:
        assert c.exact and c.missing == 0, c
        assert c.ndv is not None
        # The audit asks ClickHouse's rule at its default (10.5 bits, documented as 1 %): it
        # names ClickHouse exactly where that rule gives the size found.
        default_size = sizing.expected_num_bytes(c.ndv, 0.01, "clickhouse")
        assert ("clickhouse" in c.matching_flavors) == (c.num_bytes == default_size), c
        named += "clickhouse" in c.matching_flavors
    if bits_per_value(variant) == DEFAULT_BITS:
        assert named == len(checked)
    else:  # written at 16.9 bits: most sizes are not the default's
        assert 0 < named < len(checked) / 2
    status = main(["check", str(path)])
    out, err = capsys.readouterr()
    assert status == 0 and err == ""
    assert out.splitlines()[-1] == f"OK: {len(report.chunks)} filters checked, no violations"


# Distinct counts on either side of each of ClickHouse's block boundaries at these settings:
# n * bits / 256 blocks just below and just above a power of two.
def boundary_counts(bits: float, max_count: int) -> list[int]:
    counts = []
    for k in range(23):
        n = math.floor(256 * 2**k / bits)
        if n >= 1 and n + 1 <= max_count:
            counts += [n, n + 1]
    return counts


@pytest.mark.parametrize("bits", [DEFAULT_BITS, 6.0, 16.9, 26.4])
def test_chdb_sizes_follow_the_clickhouse_rule_at_every_boundary(
    tmp_path: Path, bits: float
) -> None:
    rows = 6000
    counts = boundary_counts(bits, rows)
    columns = [(f"n{n}", f"toInt64(number % {n}) * 7919") for n in counts]
    path = writers.write_chdb(
        tmp_path / "sizes.parquet",
        rows=rows,
        row_group_size=rows,
        columns=columns,
        settings={"output_format_parquet_bloom_filter_bits_per_value": bits},
    )
    sizes = {}
    with pb.BloomFilterReader(path) as reader:
        for n in counts:
            f = reader.filter(0, f"n{n}")
            assert f is not None
            sizes[n] = f.num_bytes
            assert f.num_bytes == sizing.clickhouse_num_bytes(n, bits), n
            assert f.num_bytes == sizing.expected_num_bytes(
                n, 0.01, "clickhouse", bits_per_value=bits
            )
    # Each pair straddles a boundary: one more distinct value doubles the filter.
    assert all(sizes[n + 1] == 2 * sizes[n] for n in counts[::2])
    if bits == DEFAULT_BITS:
        # Some of these sizes are ClickHouse's alone: no rate-based writer's rule gives them.
        only = [n for n in counts if sizing.matching_flavors(sizes[n], n, 0.01) == ["clickhouse"]]
        assert only


# -- ClickHouse as a reader of our filters --------------------------------------------------------

ROWS = 60_000
ROW_GROUP_ROWS = 6_000
READER_COLUMNS = ["id", "i32", "s", "fixed"]


@pytest.fixture(scope="module")
def keys() -> np.ndarray:
    # Shuffled, so that every row group spans nearly the whole range of every column.
    return np.random.default_rng(7).permutation(ROWS).astype(np.int64) * 7 + 3


def value_of(column: str, key: int) -> Any:
    """The value of ``column`` in the row of ``key``, as Python holds it."""
    return {
        "id": key,
        "i32": int(np.int32(key * 3)),
        "s": f"user-{key}",
        "fixed": key.to_bytes(16, "big"),
    }[column]


def sql_literal(column: str, key: int) -> str:
    value = value_of(column, key)
    if isinstance(value, bytes):
        return f"unhex('{value.hex()}')"
    if isinstance(value, str):
        return f"'{value}'"
    return str(value)


@pytest.fixture(scope="module")
def plain_file(tmp_path_factory: pytest.TempPathFactory, keys: np.ndarray) -> Path:
    """No filters, no dictionaries (ClickHouse's dictionary filter would answer first), and no
    statistics (its min/max pruning would too)."""
    table = pa.table(
        {
            "id": keys,
            "i32": pa.array((keys * 3).astype(np.int32)),
            "s": pa.array([value_of("s", int(k)) for k in keys]),
            "fixed": pa.array([value_of("fixed", int(k)) for k in keys], pa.binary(16)),
        }
    )
    path = tmp_path_factory.mktemp("reader") / "plain.parquet"
    pq.write_table(
        table, path, row_group_size=ROW_GROUP_ROWS, use_dictionary=False, write_statistics=False
    )
    return path


@pytest.fixture(scope="module", autouse=True)
def connection() -> Iterator[Any]:
    """One chDB connection for the module: without one open, each query starts ClickHouse's
    session anew (tens of milliseconds)."""
    conn = chdb.connect(":memory:")
    yield conn
    conn.close()


def chdb_count(path: Path, where: str, push_down: bool = True) -> tuple[int, int]:
    """chDB's answer to ``count() ... WHERE where`` and the rows it read from the file."""
    setting = "" if push_down else " SETTINGS input_format_parquet_bloom_filter_push_down = 0"
    result = chdb.query(
        f"SELECT count() AS c FROM file('{path}', Parquet) WHERE {where}{setting}", "JSON"
    )
    answer = json.loads(result.bytes())
    return int(answer["data"][0]["c"]), int(answer["statistics"]["rows_read"])


def probe_keys(keys: np.ndarray) -> list[list[int]]:
    """Lookups: single present keys from different row groups, absent ones, and an IN list."""
    present = [int(keys[i]) for i in range(500, ROWS, ROWS // 8)]
    absent = [4, 5, 6, 1_000_000]  # ids are 3 mod 7
    return [[k] for k in present + absent] + [[present[0], present[3], absent[0]]]


def where(column: str, group: list[int]) -> str:
    literals = [sql_literal(column, k) for k in group]
    if len(literals) == 1:
        return f"{column} = {literals[0]}"
    return f"{column} IN ({', '.join(literals)})"


def lookups_read_what_our_filters_keep(path: Path, keys: np.ndarray) -> tuple[int, int, int]:
    """Every lookup on ``path``: chDB's answer is right both ways, and with push-down its
    rows_read is the rows of the row groups our probes of the same filters keep, without it
    every row. Returns (lookups, rows read with push-down, row groups kept beyond the key's)."""
    present = set(keys.tolist())
    lookups = rows_read_total = false_positives = 0
    with pb.BloomFilterReader(path) as reader:
        rows = [rg.num_rows for rg in reader.metadata.row_groups]
        for column in READER_COLUMNS:
            for group in probe_keys(keys):
                truth = sum(k in present for k in group)
                kept = reader.row_groups_might_contain(column, [value_of(column, k) for k in group])
                count, rows_read = chdb_count(path, where(column, group))
                assert count == truth, (column, group)
                assert rows_read == sum(rows[i] for i in kept), (column, group, kept)
                count, rows_read = chdb_count(path, where(column, group), push_down=False)
                assert (count, rows_read) == (truth, ROWS), (column, group)
                lookups += 1
                rows_read_total += sum(rows[i] for i in kept)
                holding = {
                    int(np.flatnonzero(keys == k)[0]) // ROW_GROUP_ROWS
                    for k in group
                    if k in present
                }
                false_positives += len(set(kept) - holding)
    return lookups, rows_read_total, false_positives


def test_chdb_skips_row_groups_through_filters_we_add(
    plain_file: Path, keys: np.ndarray, tmp_path: Path
) -> None:
    # Without filters chDB reads every row group, whatever the key.
    for column in READER_COLUMNS:
        for group in probe_keys(keys)[:3]:
            assert chdb_count(plain_file, where(column, group))[1] == ROWS

    added = tmp_path / "added.parquet"
    report = pb.rewrite_bloom_filters(plain_file, added, columns=READER_COLUMNS)
    assert len(report.filters_written) == len(READER_COLUMNS) * ROWS // ROW_GROUP_ROWS
    lookups, rows_read, _ = lookups_read_what_our_filters_keep(added, keys)
    # At 1 %, a key present once reads about its one row group of ten; absent keys about none.
    assert rows_read < lookups * ROWS / 4

    # Smaller filters (20 %): chDB follows their false positives row group for row group.
    resized = tmp_path / "resized.parquet"
    pb.rewrite_bloom_filters(added, resized, columns="existing", fpp=0.2)
    with pb.BloomFilterReader(added) as before, pb.BloomFilterReader(resized) as after:
        assert all(
            after.filter(rg, c).num_bytes < before.filter(rg, c).num_bytes  # type: ignore[union-attr]
            for rg in range(after.num_row_groups)
            for c in READER_COLUMNS
        )
    lookups_resized, rows_read_resized, false_positives = lookups_read_what_our_filters_keep(
        resized, keys
    )
    assert false_positives > 0  # the comparison above covered row groups kept by chance
    assert rows_read < rows_read_resized < lookups_resized * ROWS

    # Filters removed: every lookup reads every row group again.
    removed = tmp_path / "removed.parquet"
    pb.rewrite_bloom_filters(resized, removed, remove="all")
    with pb.BloomFilterReader(removed) as reader:
        assert reader.filters() == {}
    for column in READER_COLUMNS:
        for group in probe_keys(keys):
            count, rows_read = chdb_count(removed, where(column, group))
            assert (count, rows_read) == (sum(k in set(keys.tolist()) for k in group), ROWS)


def test_a_zeroed_filter_we_write_is_trusted_by_chdb(plain_file: Path, tmp_path: Path) -> None:
    # Why the filters must be exact: chDB takes a filter's word. A chunk whose bits are all zero
    # makes it skip the row group that holds the key and answer 0.
    added = pb.rewrite_bloom_filters(plain_file, tmp_path / "added.parquet", columns=["id"]).dst
    key = int(pq.ParquetFile(plain_file).read_row_group(2, columns=["id"]).column(0)[0].as_py())
    zeroed = writers.zero_bitset(Path(added), tmp_path / "zeroed.parquet", 2, "id")
    assert chdb_count(Path(added), f"id = {key}")[0] == 1
    assert chdb_count(zeroed, f"id = {key}") == (0, 0)
    assert pb.check_file(zeroed).violations[0].kind == "false-negative"

"""parquet_bloom.spark._types against Spark's own Parquet writer (parquet-java): the filters in
files written with Spark's Bloom filter options must equal, byte for byte, a filter rebuilt from
each chunk's values as pyarrow reads them back (:func:`parquet_bloom._logical.column_hashes`),
Spark must have written the layouts its settings ask for, and a build follows the session's
layout, type by type and for each timestamp and decimal layout Spark can be told to use.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame

import parquet_bloom as pb
from parquet_bloom import _format as fmt
from parquet_bloom import _logical as logical
from parquet_bloom import spark as pbs
from parquet_bloom._sbbf import SplitBlockBloomFilter
from tests.spark.data import COLUMNS, TIMESTAMP_AND_DECIMALS, WRITES, session_conf

pytestmark = pytest.mark.spark


def check_file_filters(path: Path) -> dict[str, int]:
    """Each filter must equal the one rebuilt from its chunk; returns filters per column."""
    checked: dict[str, int] = {}
    parquet = pq.ParquetFile(path)
    with pb.BloomFilterReader(path) as reader:
        leaves = {leaf.path: leaf for leaf in fmt.schema_leaves(reader.metadata)}
        for (row_group, column), bloom_filter in reader.filters().items():
            values = parquet.read_row_group(row_group, columns=[column]).column(column)
            hashes = logical.column_hashes(values, leaves[column])
            assert hashes.size == values.length() - values.null_count
            rebuilt = SplitBlockBloomFilter(bloom_filter.num_bytes)
            rebuilt.insert_hashes(hashes)
            assert rebuilt.to_bytes() == bloom_filter.to_bytes(), (path.parent.name, column)
            assert bloom_filter.find_hashes(hashes).all()
            checked[column] = checked.get(column, 0) + 1
    return checked


@pytest.mark.parametrize("name", list(WRITES))
def test_spark_written_filters_are_rebuilt_byte_for_byte(
    written: dict[str, Path], name: str
) -> None:
    checked = check_file_filters(written[name])
    metadata = pq.ParquetFile(written[name]).metadata
    with pb.BloomFilterReader(written[name]) as reader:
        present = set(reader.filters())
    # parquet-java writes a filter for every chunk asked for, except a chunk whose data pages
    # are all dictionary encoded (PARQUET-2251): only a chunk with PLAIN pages has one.
    for row_group in range(metadata.num_row_groups):
        for j in range(metadata.num_columns):
            chunk = metadata.row_group(row_group).column(j)
            if chunk.path_in_schema in COLUMNS:
                has_plain_pages = "PLAIN" in chunk.encodings
                assert ((row_group, chunk.path_in_schema) in present) == has_plain_pages
    high_cardinality = {"long", "int", "double", "string", "binary", "ts", "dec18", "dec30"}
    assert high_cardinality <= set(checked)
    if WRITES[name]["options"].get("parquet.enable.dictionary") == "false":
        assert set(checked) == set(COLUMNS)
        assert set(checked.values()) == {metadata.num_row_groups}


def test_spark_wrote_the_layouts_asked_for(written: dict[str, Path]) -> None:
    def physical(name: str) -> dict[str, tuple[str, int | None]]:
        with pb.BloomFilterReader(written[name]) as reader:
            return {
                leaf.path: (leaf.physical_type, leaf.type_length)
                for leaf in fmt.schema_leaves(reader.metadata)
            }

    default = physical("int96_no_dictionary")
    assert default["ts"][0] == "INT96"
    assert [default[c][0] for c in ("dec9", "dec18", "dec30")] == [
        "INT32",
        "INT64",
        "FIXED_LEN_BYTE_ARRAY",
    ]
    assert default["dec30"][1] == 13
    legacy = physical("millis_legacy_decimals")
    assert legacy["ts"][0] == "INT64"
    assert [legacy[c] for c in ("dec9", "dec18", "dec30")] == [
        ("FIXED_LEN_BYTE_ARRAY", 4),
        ("FIXED_LEN_BYTE_ARRAY", 8),
        ("FIXED_LEN_BYTE_ARRAY", 13),
    ]
    with pb.BloomFilterReader(written["adaptive_row_groups"]) as reader:
        sizes = {f.num_bytes for f in reader.filters().values()}
    assert max(sizes) < 65536  # the adaptive filter chose a candidate below the maximum


@pytest.mark.parametrize("name", ["micros_dictionary", "millis_legacy_decimals"])
def test_build_filters_follow_the_session_layout(
    typed_df: DataFrame, written: dict[str, Path], name: str
) -> None:
    with pb.BloomFilterReader(written[name]) as reader:
        expected = {column: f for (_, column), f in reader.filters().items()}
    assert set(TIMESTAMP_AND_DECIMALS) <= set(expected)
    sizes = {column: f.num_bytes for column, f in expected.items()}
    with session_conf(typed_df.sparkSession, WRITES[name]["conf"]):
        built = pbs.build_filters(typed_df.repartition(3), list(expected), num_bytes=sizes)
    assert [c for c in expected if built[c] != expected[c]] == []
    # the same column hashes differently under another layout
    if name == "millis_legacy_decimals":
        default_sizes = {c: sizes[c] for c in TIMESTAMP_AND_DECIMALS}
        default = pbs.build_filters(typed_df, TIMESTAMP_AND_DECIMALS, num_bytes=default_sizes)
        changed = [c for c in TIMESTAMP_AND_DECIMALS if default[c] != expected[c]]
        assert changed == ["ts", "dec9", "dec18"]  # decimal(30, 6) is 13 bytes either way

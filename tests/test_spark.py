"""parquet_bloom.spark against a real local Spark (``local[2]``, one session for the run).

The oracle is Spark's own Parquet writer (parquet-java): files written here with Spark's Bloom
filter options carry filters whose bytes must equal (1) a filter rebuilt from each chunk's values
as pyarrow reads them back (:func:`parquet_bloom._logical.column_hashes`), and (2) the filter
:func:`build_filter` builds from the same DataFrame at the same size, however it is partitioned.
The second is what makes a filter built here probe like the filters Spark writes, type by type
and for each timestamp and decimal layout Spark can be told to use.
"""

from __future__ import annotations

import contextlib
import decimal
import os
import pickle
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

import parquet_bloom as pb
from parquet_bloom import _format as fmt
from parquet_bloom import _logical as logical
from parquet_bloom._sbbf import SplitBlockBloomFilter, optimal_num_bytes

pytest.importorskip("pyspark", reason="pyspark is not installed: pip install -e '.[test]'")

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from parquet_bloom import spark as pbs

pytestmark = pytest.mark.spark

ROWS = 4_000
# Every column of the typed table; BOOLEAN aside, these are all the types Spark stores as
# something a Bloom filter can hold.
COLUMNS = [
    "long", "int", "short", "byte", "float", "double", "string", "binary", "date", "ts",
    "ts_ntz", "interval", "dec9", "dec18", "dec30",
]  # fmt: skip
TIMESTAMP_AND_DECIMALS = ["ts", "dec9", "dec18", "dec30"]


def typed_table(rows: int = ROWS, seed: int = 7) -> pa.Table:
    """Mostly distinct values of every type, with nulls, extremes, signed zeros, NaN, empty
    strings and timestamps before 1970 with sub-millisecond digits (where rounding to
    milliseconds must round down)."""
    rng = np.random.default_rng(seed)
    valid = rng.random(rows) > 0.05

    def with_nulls(arr: pa.Array) -> pa.Array:
        return pa.array(arr.to_pylist(), arr.type, mask=~valid)

    longs = rng.integers(-(2**63), 2**63 - 1, rows, dtype=np.int64, endpoint=True)
    longs[:2] = [-(2**63), 2**63 - 1]
    doubles = rng.normal(0, 1e6, rows)
    doubles[:5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
    micros = rng.integers(-(2**50), 2**50, rows)
    micros[:4] = [-1, -999, -1001, 1]
    strings = [f"v{int(x):x}" * int(x % 4) + ("é🙂" if x % 7 == 0 else "") for x in longs]
    unscaled = rng.integers(-(10**9) + 1, 10**9, rows)

    def decimals(precision: int, scale: int, factor: int) -> pa.Array:
        values = [decimal.Decimal(int(u) * factor).scaleb(-scale) for u in unscaled]
        return pa.array(values, pa.decimal128(precision, scale))

    return pa.table(
        {
            "id": pa.array(np.arange(rows), pa.int64()),
            "long": with_nulls(pa.array(longs)),
            "int": pa.array(longs >> 32, pa.int32()),
            "short": pa.array(longs >> 48, pa.int16()),
            "byte": pa.array(longs >> 56, pa.int8()),
            "float": pa.array(doubles.astype(np.float32)),
            "double": with_nulls(pa.array(doubles)),
            "string": with_nulls(pa.array(strings, pa.string())),
            "binary": pa.array([s.encode()[::-1] for s in strings], pa.binary()),
            "date": pa.array(rng.integers(-25_000, 30_000, rows), pa.int32()).cast(pa.date32()),
            "ts": with_nulls(pa.array(micros, pa.timestamp("us", tz="UTC"))),
            "ts_ntz": pa.array(micros // 7, pa.timestamp("us", tz="UTC")),  # cast to NTZ below
            "interval": pa.array(micros // 3, pa.duration("us")),
            "dec9": with_nulls(decimals(9, 2, 1)),
            "dec18": decimals(18, 4, 10**8 + 1),
            "dec30": decimals(30, 6, 10**20 + 3),
        }
    )


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return typed_table()


@pytest.fixture(scope="module")
def typed_df(spark: SparkSession, table: pa.Table) -> Iterator[DataFrame]:
    df = spark.createDataFrame(table).withColumn("ts_ntz", F.col("ts_ntz").cast("timestamp_ntz"))
    assert df.schema["ts_ntz"].dataType.simpleString() == "timestamp_ntz"
    df = df.cache()
    assert df.count() == ROWS
    yield df
    df.unpersist()


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Set SQL confs for the block, restoring the previous values after."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


# How Spark writes each test file: SQL confs (timestamp layout, legacy decimals), parquet-java
# options, whether one row group is wanted (for the build_filter comparisons) and which columns
# must end up with filters.
NDV_OPTIONS = {f"parquet.bloom.filter.expected.ndv#{c}": str(ROWS) for c in COLUMNS}
FPP_OPTIONS = {f"parquet.bloom.filter.fpp#{c}": "0.02" for c in COLUMNS}
WRITES: dict[str, dict[str, Any]] = {
    "int96_no_dictionary": {
        "conf": {"spark.sql.parquet.outputTimestampType": "INT96"},
        "options": {"parquet.enable.dictionary": "false", **NDV_OPTIONS},
        "one_row_group": True,
    },
    # Dictionary on with a small dictionary page: chunks start dictionary encoded and fall back
    # to PLAIN. parquet-java writes no filter for a chunk that stays all dictionary (PARQUET-2251),
    # which is the fate of the low-cardinality byte column.
    "micros_dictionary": {
        "conf": {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"},
        "options": {
            "parquet.enable.dictionary": "true",
            "parquet.dictionary.page.size": "2048",
            **NDV_OPTIONS,
            **FPP_OPTIONS,
        },
        "one_row_group": True,
    },
    "millis_legacy_decimals": {
        "conf": {
            "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
            "spark.sql.parquet.writeLegacyFormat": "true",
        },
        "options": {"parquet.enable.dictionary": "false", **NDV_OPTIONS},
        "one_row_group": True,
    },
    # No NDV: the adaptive filter picks among candidate sizes after seeing the chunk.
    "adaptive_row_groups": {
        "conf": {"spark.sql.parquet.outputTimestampType": "INT96"},
        "options": {
            "parquet.enable.dictionary": "false",
            "parquet.bloom.filter.adaptive.enabled": "true",
            "parquet.bloom.filter.max.bytes": "65536",
            "parquet.block.size": "32768",
        },
        "one_row_group": False,
    },
    # No NDV, not adaptive: every filter is parquet.bloom.filter.max.bytes.
    "fixed_size_row_groups": {
        "conf": {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"},
        "options": {"parquet.bloom.filter.max.bytes": "8192", "parquet.block.size": "32768"},
        "one_row_group": False,
    },
}


def spark_write(
    df: DataFrame, path: Path, conf: dict[str, str], options: dict[str, str], filters: bool = True
) -> list[Path]:
    writer = df.coalesce(1).write.mode("overwrite")
    for key, value in options.items():
        writer = writer.option(key, value)
    if filters:
        for column in COLUMNS:
            writer = writer.option(f"parquet.bloom.filter.enabled#{column}", "true")
    with session_conf(df.sparkSession, conf):
        writer.parquet(str(path))
    return sorted(path.glob("*.parquet"))


@pytest.fixture(scope="module")
def written(typed_df: DataFrame, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each configuration of WRITES as one Parquet file written by Spark."""
    root = tmp_path_factory.mktemp("spark-written")
    out = {}
    for name, how in WRITES.items():
        (file,) = spark_write(typed_df, root / name, how["conf"], how["options"])
        num_row_groups = pq.ParquetFile(file).metadata.num_row_groups
        assert (num_row_groups == 1) == how["one_row_group"], (name, num_row_groups)
        out[name] = file
    return out


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


def file_filter(path: Path, column: str) -> SplitBlockBloomFilter:
    with pb.BloomFilterReader(path) as reader:
        bloom_filter = reader.filter(0, column)
    assert bloom_filter is not None, column
    return bloom_filter


@pytest.mark.parametrize("partitions", [1, 3, 8])
def test_build_filters_equal_the_filters_spark_writes(
    typed_df: DataFrame, written: dict[str, Path], partitions: int
) -> None:
    path = written["int96_no_dictionary"]
    expected = {column: file_filter(path, column) for column in COLUMNS}
    sizes = {column: f.num_bytes for column, f in expected.items()}
    df = typed_df.repartition(partitions)
    with session_conf(typed_df.sparkSession, WRITES["int96_no_dictionary"]["conf"]):
        built = pbs.build_filters(df, COLUMNS, num_bytes=sizes)
    assert list(built) == COLUMNS
    assert [c for c in COLUMNS if built[c] != expected[c]] == []


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


def test_build_filter_one_column(typed_df: DataFrame, written: dict[str, Path]) -> None:
    expected = file_filter(written["int96_no_dictionary"], "dec30")
    assert pbs.build_filter(typed_df, "dec30", num_bytes=expected.num_bytes) == expected


def test_build_filter_equals_a_local_build(typed_df: DataFrame, table: pa.Table) -> None:
    longs = table.column("long").drop_null().to_numpy()
    ndv = len(np.unique(longs))
    built = pbs.build_filter(typed_df.repartition(5), "long", fpp=0.001, ndv=ndv)
    local = SplitBlockBloomFilter.from_ndv(ndv, 0.001)
    local.insert(longs, "INT64")
    assert built == local
    strings = pbs.build_filter(typed_df, F.upper("string"), num_bytes=4096)
    local = SplitBlockBloomFilter(4096)
    local.insert([s.upper() for s in table.column("string").drop_null().to_pylist()], "BYTE_ARRAY")
    assert strings == local


def test_build_restores_the_arrow_batch_size(typed_df: DataFrame) -> None:
    spark = typed_df.sparkSession
    for setting in ("5000", "500000"):  # raised for the build and restored; never lowered
        with session_conf(spark, {pbs.MAX_RECORDS_PER_BATCH_CONF: setting}):
            pbs.build_filter(typed_df, "int", num_bytes=1024)
            assert spark.conf.get(pbs.MAX_RECORDS_PER_BATCH_CONF) == setting
    before = spark.conf.get(pbs.MAX_RECORDS_PER_BATCH_CONF)
    pbs.build_filter(typed_df, "int", num_bytes=1024)
    assert spark.conf.get(pbs.MAX_RECORDS_PER_BATCH_CONF) == before


def test_partial_filters_reduced_on_executors(
    typed_df: DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = pbs.build_filter(typed_df.repartition(8), "string", num_bytes=8192)
    monkeypatch.setattr(pbs, "MAX_COLLECT_BYTES", 2 * 8192)  # 8 bitsets no longer fit
    assert pbs._tree_depth(8, 8192) == 3
    reduced = pbs.build_filter(typed_df.repartition(8), "string", num_bytes=8192)
    assert reduced == direct
    assert reduced.bits_set() > 0


@pytest.mark.parametrize("route", ["fold", "estimate"])
def test_build_filter_sizes_itself(
    typed_df: DataFrame, table: pa.Table, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    longs = table.column("long").drop_null()
    truth = len(np.unique(longs.to_numpy()))
    if route == "estimate":  # partials sized for the row count would be too much to ship
        monkeypatch.setattr(pbs, "MAX_COLLECT_BYTES", 4096)
    built = pbs.build_filter(typed_df, "long", fpp=0.01)
    assert built.num_bytes == optimal_num_bytes(truth, 0.01)
    local = SplitBlockBloomFilter(built.num_bytes)
    local.insert(longs)
    assert built == local
    assert built.fpp() <= 0.01


def test_build_filter_of_no_values(spark: SparkSession) -> None:
    empty = spark.range(0).select(F.col("id").alias("x"))
    assert pbs.build_filter(empty, "x") == SplitBlockBloomFilter(32)
    nulls = spark.range(10).select(F.lit(None).cast("string").alias("x")).repartition(3)
    assert pbs.build_filter(nulls, "x", ndv=100) == SplitBlockBloomFilter.from_ndv(100)


def test_build_filters_sizes_per_column(typed_df: DataFrame, table: pa.Table) -> None:
    built = pbs.build_filters(typed_df, ["long", "byte"], fpp=0.01, ndv={"long": 10_000})
    assert built["long"].num_bytes == optimal_num_bytes(10_000, 0.01)
    byte_ndv = len(set(table.column("byte").to_pylist()))
    assert built["byte"].num_bytes == optimal_num_bytes(byte_ndv, 0.01)
    local = SplitBlockBloomFilter(built["byte"].num_bytes)
    local.insert(table.column("byte"), "INT32")
    assert built["byte"] == local
    with pytest.raises(ValueError, match="not built"):
        pbs.build_filters(typed_df, ["long"], ndv={"other": 3})
    with pytest.raises(ValueError, match="no size for"):
        pbs.build_filters(typed_df, ["long", "int"], num_bytes={"long": 64})
    with pytest.raises(ValueError, match="distinct names"):
        pbs.build_filters(typed_df, ["long", "long"])


def test_build_filter_refuses_what_has_no_filter(spark: SparkSession) -> None:
    df = spark.range(3).select(
        (F.col("id") > 1).alias("flag"), F.array("id").alias("ids"), F.col("id")
    )
    with pytest.raises(ValueError, match="BooleanType"):
        pbs.build_filter(df, "flag")
    with pytest.raises(TypeError, match="array<bigint>"):
        pbs.build_filter(df, "ids")
    with pytest.raises(ValueError, match="not both"):
        pbs.build_filter(df, "id", ndv=10, num_bytes=64)
    with pytest.raises(ValueError, match="power of two"):
        pbs.build_filter(df, "id", num_bytes=100)
    with pytest.raises(ValueError, match="fpp"):
        pbs.build_filter(df, "id", fpp=1.5)
    with pytest.raises(TypeError, match="name or a Column"):
        pbs.build_filter(df, 3)  # type: ignore[arg-type]


# -- might_contain ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["int96_no_dictionary", "millis_legacy_decimals"])
def test_might_contain_keeps_every_value_spark_wrote(
    typed_df: DataFrame, written: dict[str, Path], name: str
) -> None:
    """Probing Spark's column with the filter Spark wrote for it never says no."""
    with pb.BloomFilterReader(written[name]) as reader:
        filters = {column: f for (_, column), f in reader.filters().items()}
    assert set(filters) == set(COLUMNS)
    with session_conf(typed_df.sparkSession, WRITES[name]["conf"]):
        checks = [
            F.min(pbs.might_contain(f, c) == F.col(c).isNotNull()).alias(c)
            for c, f in filters.items()
        ]
    (row,) = typed_df.select(*checks).collect()
    assert row.asDict() == dict.fromkeys(filters, True)


@pytest.mark.parametrize("column", ["long", "string", "dec30", "ts", "double"])
def test_might_contain_agrees_with_isin(typed_df: DataFrame, column: str) -> None:
    present_rows = typed_df.filter(F.col("id") % 4 == 0)
    bloom_filter = pbs.build_filter(present_rows, column, fpp=0.01, ndv=ROWS // 4)
    # Spark's own idea of "the value is among the present ones": a semi join (= semantics).
    members = typed_df.join(present_rows.select(column).distinct(), column, "left_semi")
    member_ids = {r.id for r in members.select("id").collect()}
    values = [r[0] for r in present_rows.select(column).dropna().distinct().collect()]
    rows = typed_df.select(
        "id",
        F.col(column).isNull().alias("null"),
        pbs.might_contain(bloom_filter, column).alias("hit"),
        F.col(column).isin(values).alias("isin"),
    ).collect()
    assert len(member_ids) > ROWS // 5
    assert all(r.hit for r in rows if r.id in member_ids), (
        "a row whose value is present was dropped"
    )
    assert not any(r.hit for r in rows if r.null), "a null matched"
    absent = [r for r in rows if r.id not in member_ids and not r.null]
    false_hits = sum(r.hit for r in absent)
    assert false_hits <= 0.03 * len(absent) + 3, (false_hits, len(absent))
    if column != "double":  # isin misses NaN
        assert {r.id for r in rows if r.isin} == member_ids
        assert {r.id for r in rows if r.isin and r.hit} == member_ids


def test_might_contain_follows_spark_equality_for_doubles(spark: SparkSession) -> None:
    bloom_filter = SplitBlockBloomFilter(64)
    bloom_filter.insert([0.0, 2.5], "DOUBLE")
    df = spark.createDataFrame(
        [(0.0,), (-0.0,), (2.5,), (-2.5,), (float("nan"),), (None,)], "x double"
    )
    hits = [r.hit for r in df.select(pbs.might_contain(bloom_filter, "x").alias("hit")).collect()]
    assert hits[:3] == [True, True, True]
    assert hits[4] is True  # NaN = NaN in Spark: never excluded
    assert hits[5] is False  # null
    floats = SplitBlockBloomFilter(64)
    floats.insert(np.array([-0.0], np.float32))
    df = spark.createDataFrame([(0.0,), (-0.0,)], "x float")
    assert [r[0] for r in df.select(pbs.might_contain(floats, "x")).collect()] == [True, True]


def test_might_contain_takes_a_broadcast(spark: SparkSession) -> None:
    bloom_filter = SplitBlockBloomFilter(256)
    bloom_filter.insert(list(range(0, 1000, 10)), "INT64")
    handle = spark.sparkContext.broadcast(bloom_filter)
    df = spark.range(1000)
    kept = {r.id for r in df.filter(pbs.might_contain(handle, "id")).collect()}
    assert set(range(0, 1000, 10)) <= kept
    assert len(kept) < 200
    ints = df.select(F.col("id").cast("int").alias("id"))
    int_filter = SplitBlockBloomFilter(256)
    int_filter.insert(list(range(0, 1000, 10)), "INT32")
    assert set(range(0, 1000, 10)) <= {
        r.id for r in ints.filter(pbs.might_contain(int_filter, "id")).collect()
    }


def uses_python(df: DataFrame) -> bool:
    return "ArrowEvalPython" in df._jdf.queryExecution().executedPlan().toString()


def test_seed_zero_prefix_makes_spark_hash_with_seed_zero() -> None:
    prefix = pbs.SEED_ZERO_PREFIX.to_bytes(8, "little", signed=True)
    assert xxhash.xxh64_intdigest(prefix, seed=pbs.SPARK_HASH_SEED) == 0


@pytest.mark.parametrize(
    ("num_bytes", "columns"),
    [(512, COLUMNS), (32768, ["long", "string", "double", "dec18"])],
    ids=["literal", "subquery"],  # where the words come from: see _LITERAL_MAX_BYTES
)
def test_might_contain_in_spark_answers_as_the_arrow_udf(
    typed_df: DataFrame, num_bytes: int, columns: list[str]
) -> None:
    """Spark's expressions give, row for row, the Arrow UDF's answers (the UDF hashes with the
    numpy core, checked against the files Spark writes), for every type and both word sources;
    the types Spark cannot hash as Parquet stores them stay with the UDF."""
    spark = typed_df.sparkSession
    present = typed_df.filter(F.col("id") % 3 == 0)
    with session_conf(spark, WRITES["micros_dictionary"]["conf"]):
        filters = pbs.build_filters(present, columns, num_bytes=dict.fromkeys(columns, num_bytes))
        layout = pbs._SparkLayout.of(spark)
        handles = {c: spark.sparkContext.broadcast(f) for c, f in filters.items()}
        rows = typed_df.select(
            *[pbs.might_contain(h, c).alias(f"hit_{c}") for c, h in handles.items()],
            *[pbs._arrow_probe(h, F.col(c), layout).alias(f"udf_{c}") for c, h in handles.items()],
        ).collect()
    for column in columns:
        hits = [r[f"hit_{column}"] for r in rows]
        assert hits == [r[f"udf_{column}"] for r in rows], column
        assert sum(hits) >= ROWS // 3 - ROWS // 10, column
        assert sum(hits) < ROWS or column == "byte", column  # 256 values, all present


@pytest.mark.parametrize(
    ("conf", "by_udf"),
    [
        ({"outputTimestampType": "TIMESTAMP_MICROS"}, {"dec9", "dec30"}),
        ({"outputTimestampType": "INT96"}, {"ts", "dec9", "dec30"}),
        ({"outputTimestampType": "TIMESTAMP_MILLIS"}, {"ts", "dec9", "dec30"}),
        (
            {"outputTimestampType": "TIMESTAMP_MICROS", "writeLegacyFormat": "true"},
            {"dec9", "dec18", "dec30"},
        ),
    ],
)
def test_might_contain_leaves_to_python_only_what_spark_hashes_otherwise(
    typed_df: DataFrame, conf: dict[str, str], by_udf: set[str]
) -> None:
    bloom_filter = SplitBlockBloomFilter(32)
    with session_conf(
        typed_df.sparkSession, {f"spark.sql.parquet.{k}": v for k, v in conf.items()}
    ):
        for column in ["long", "string", *TIMESTAMP_AND_DECIMALS]:
            query = typed_df.filter(pbs.might_contain(bloom_filter, column))
            assert uses_python(query) == (column in by_udf), column


def test_might_contain_in_spark_for_any_nan_and_zero(spark: SparkSession) -> None:
    """Every NaN bit pattern and both zeros, as Spark's = sees them, in Spark's expressions."""
    other_nan = np.array([0x7FF0000000000001, 0xFFF8000000000000], np.uint64).view(np.float64)
    doubles = pa.array([1.5, 0.0, -0.0, np.nan, *other_nan, -1.5, None], pa.float64())
    df = spark.createDataFrame(pa.table({"x": doubles, "y": doubles.cast(pa.float32())}))
    for column, physical_type, dtype in (("x", "DOUBLE", np.float64), ("y", "FLOAT", np.float32)):
        for stored in ([1.5], [1.5, -0.0], [1.5, 0.0]):
            bloom_filter = SplitBlockBloomFilter(32)
            bloom_filter.insert(np.array(stored, dtype), physical_type)
            query = df.select(pbs.might_contain(bloom_filter, column).alias("hit"))
            assert not uses_python(query)
            zero = len(stored) > 1
            expected = [True, zero, zero, True, True, True, False, False]
            assert [r.hit for r in query.collect()] == expected, (column, stored)


def test_might_contain_bad_arguments(spark: SparkSession) -> None:
    with pytest.raises(TypeError, match="SplitBlockBloomFilter"):
        pbs.might_contain(b"\x00" * 32, "id")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="name or a Column"):
        pbs.might_contain(SplitBlockBloomFilter(32), 3)  # type: ignore[arg-type]


# -- semi joins ---------------------------------------------------------------------------------


def test_semi_join_prefilter_keeps_the_join(spark: SparkSession) -> None:
    left = spark.range(20_000).select(
        F.col("id").alias("k"), (F.col("id") % 7).alias("payload"),
        F.when(F.col("id") % 1000 == 0, None).otherwise(F.col("id") % 50).cast("int").alias("k2"),
    )  # fmt: skip
    right = (
        spark.range(600)
        .select(
            (F.col("id") * 37 + 5).alias("k"),
            # matches the left's k2 (k % 50) for two rows in three
            F.when(F.col("id") % 3 == 0, 99).otherwise((F.col("id") * 37 + 5) % 50).alias("k2"),
            F.col("id").alias("r"),
        )
        .union(spark.range(5).select(F.lit(None).cast("long"), F.lit(1).cast("long"), F.col("id")))
    )
    right = right.cache()
    pruned = pbs.semi_join_prefilter(left, right, "k", ndv=605).cache()
    assert pruned.count() < 600 + 0.03 * 20_000
    assert sorted(pruned.join(right, "k").collect()) == sorted(left.join(right, "k").collect())
    # two keys (one scan of the right side), and an int key on the left against a long one
    pruned = pbs.semi_join_prefilter(left, right, ["k", "k2"], fpp=0.001)
    joined = sorted(pruned.join(right, ["k", "k2"]).collect())
    assert joined == sorted(left.join(right, ["k", "k2"]).collect())
    assert len(joined) > 0


def test_semi_join_prefilter_refuses_mixed_key_types(spark: SparkSession) -> None:
    left = spark.range(10).select(F.col("id").cast("string").alias("k"))
    right = spark.range(10).select(F.col("id").alias("k"))
    with pytest.raises(TypeError, match="cast both"):
        pbs.semi_join_prefilter(left, right, "k")
    with pytest.raises(ValueError, match="no column 'x'"):
        pbs.semi_join_prefilter(left, right, "x")
    with pytest.raises(TypeError, match="non-empty"):
        pbs.semi_join_prefilter(left, right, [])


# -- filters as broadcast variables and inside UDFs ------------------------------------------------


# pyspark 4.3 warns about pandas 3 when a Python UDF is made, though this one never uses pandas.
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
def test_filters_pickle_as_their_bitset(spark: SparkSession) -> None:
    bloom_filter = SplitBlockBloomFilter.from_ndv(50_000, 0.01)
    bloom_filter.insert(np.arange(50_000, dtype=np.int64) * 3)
    data = pickle.dumps(bloom_filter)
    assert bloom_filter.num_bytes <= len(data) <= bloom_filter.num_bytes + 128
    assert pickle.loads(data) == bloom_filter

    handle = spark.sparkContext.broadcast(bloom_filter)

    # Plain row-at-a-time UDFs, as a user writes them (no type hints: pyspark would take
    # hints as a request for a vectorised UDF).
    @F.udf("boolean")
    def in_broadcast(x):  # type: ignore[no-untyped-def]
        import parquet_bloom  # noqa: F401  # what a user's UDF does on an executor

        return bool(handle.value.might_contain(x, "INT64"))

    @F.udf("boolean")
    def in_closure(x):  # type: ignore[no-untyped-def]
        return bool(bloom_filter.might_contain(x, "INT64"))

    df = spark.range(0, 3000).select(
        in_broadcast("id").alias("a"), in_closure("id").alias("b"),
        pbs.might_contain(bloom_filter, "id").alias("c"), (F.col("id") % 3 == 0).alias("member"),
    )  # fmt: skip
    rows = df.collect()
    assert all(r.a == r.b == r.c for r in rows)
    assert all(r.a for r in rows if r.member)


# -- files Spark reads after we change their filters ----------------------------------------------


@pytest.fixture(scope="module")
def plain_file(typed_df: DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Several row groups, no filters, no dictionary (so only statistics and filters prune)."""
    (file,) = spark_write(
        typed_df.orderBy("id"),
        tmp_path_factory.mktemp("plain") / "t",
        {"spark.sql.parquet.outputTimestampType": "INT96"},
        {"parquet.block.size": "32768", "parquet.enable.dictionary": "false"},
        filters=False,
    )
    with pb.BloomFilterReader(file) as reader:
        assert reader.num_row_groups > 2
        assert not reader.filters()
    return file


def rows_of(spark: SparkSession, path: Path) -> list[tuple[Any, ...]]:
    """The file's rows as Spark reads them, sorted, with NaN made comparable."""
    rows = spark.read.parquet(str(path)).collect()
    return sorted(tuple("NaN" if v != v else v for v in row) for row in rows)


def test_spark_reads_a_file_whose_filters_we_added(
    spark: SparkSession, plain_file: Path, tmp_path: Path, typed_df: DataFrame
) -> None:
    from parquet_bloom._rewrite import rewrite_bloom_filters

    added = tmp_path / "added.parquet"
    rewrite_bloom_filters(plain_file, added, columns=["long", "string", "dec30", "ts", "date"])
    with pb.BloomFilterReader(added) as reader:
        assert {c for _, c in reader.filters()} == {"long", "string", "dec30", "ts", "date"}
    assert rows_of(spark, added) == rows_of(spark, plain_file)

    # Spark prunes with our filters: probe a value of row group 1, then blank that row group's
    # filter; Spark must now skip the row group (the statistics alone would keep it).
    value = (
        pq.ParquetFile(added)
        .read_row_group(1, columns=["long"])
        .column("long")
        .drop_null()[5]
        .as_py()
    )
    query = spark.read.parquet(str(added)).filter(F.col("long") == value)
    assert query.count() == 1
    blanked = tmp_path / "blanked.parquet"
    shutil.copyfile(added, blanked)
    with pb.BloomFilterReader(added) as reader:
        chunk = reader.column_chunk(1, "long")
    data = bytearray(blanked.read_bytes())
    assert chunk.bloom_filter_offset is not None
    header, header_len = fmt.parse_bloom_filter_header(
        bytes(data[chunk.bloom_filter_offset :][:64])
    )
    start = chunk.bloom_filter_offset + header_len
    data[start : start + header.num_bytes] = bytes(header.num_bytes)
    blanked.write_bytes(bytes(data))
    assert spark.read.parquet(str(blanked)).filter(F.col("long") == value).count() == 0


def test_spark_reads_a_file_whose_filters_we_resized(
    spark: SparkSession, written: dict[str, Path], tmp_path: Path
) -> None:
    from parquet_bloom._rewrite import rewrite_bloom_filters

    source = written["fixed_size_row_groups"]  # every filter 8192 bytes, chunks of ~300 rows
    resized = tmp_path / "resized.parquet"
    rewrite_bloom_filters(source, resized, columns="existing", fpp=0.01)
    with pb.BloomFilterReader(source) as before, pb.BloomFilterReader(resized) as after:
        old, new = before.filters(), after.filters()
    assert old.keys() == new.keys()
    assert all(new[k].num_bytes < old[k].num_bytes for k in old)
    assert rows_of(spark, resized) == rows_of(spark, source)
    table = pq.read_table(source, columns=["long", "string"])
    for column in ("long", "string"):
        values = table.column(column).drop_null().to_pylist()[::1999]
        for path in (source, resized):
            found = spark.read.parquet(str(path)).filter(F.col(column).isin(values))
            assert found.select(column).distinct().count() == len(set(values))


# -- auditing datasets --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dataset(written: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of Spark's files, partition-style, with files Spark would skip and one that is
    not Parquet at all."""
    root = tmp_path_factory.mktemp("dataset")
    for name in ("adaptive_row_groups", "fixed_size_row_groups", "int96_no_dictionary"):
        part = root / f"kind={name}"
        part.mkdir()
        shutil.copyfile(written[name], part / written[name].name)
    (root / "_SUCCESS").write_bytes(b"")
    (root / "kind=adaptive_row_groups" / ".part.crc").write_bytes(b"crc")
    (root / "_delta_log").mkdir()
    (root / "_delta_log" / "0.json").write_text("{}")
    (root / "kind=broken").mkdir()
    (root / "kind=broken" / "part-0.parquet").write_bytes(b"PAR1 not really")
    return root


def parquet_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.parquet") if "broken" not in str(p))


def test_bloom_filter_index_matches_the_reader(spark: SparkSession, dataset: Path) -> None:
    rows = pbs.bloom_filter_index(spark, str(dataset)).collect()
    assert {r.file for r in rows} == {str(p) for p in parquet_files(dataset)} | {
        str(dataset / "kind=broken" / "part-0.parquet")
    }
    (broken,) = [r for r in rows if "broken" in r.file]
    assert broken.error.startswith("CorruptFileError") and broken.row_group is None
    by_key = {(r.file, r.row_group, r.column): r for r in rows if r.error is None}
    expected = 0
    for path in parquet_files(dataset):
        with pb.BloomFilterReader(path) as reader:
            filters = reader.filters()
            for chunk in reader.column_chunks:
                expected += 1
                row = by_key[(str(path), chunk.row_group, chunk.path)]
                assert row.physical_type == chunk.physical_type
                assert row.num_values == chunk.num_values
                assert row.has_bloom_filter == (chunk.bloom_filter_offset is not None)
                assert row.bloom_filter_offset == chunk.bloom_filter_offset
                assert row.bloom_filter_length == chunk.bloom_filter_length
                f = filters.get((chunk.row_group, chunk.path))
                if f is None:
                    assert row.num_bytes is None and row.fraction_set is None
                    continue
                assert row.num_bytes == f.num_bytes
                assert row.fraction_set == pytest.approx(f.fraction_set())
                assert row.estimated_ndv == pytest.approx(f.estimate_ndv())
                assert row.fpp == pytest.approx(f.fpp())
    assert len(by_key) == expected
    assert sum(r.has_bloom_filter for r in by_key.values()) > 30


def test_bloom_filter_index_over_fsspec_urls(spark: SparkSession, dataset: Path) -> None:
    pytest.importorskip("fsspec")
    directory = dataset / "kind=adaptive_row_groups"
    local = {
        (r.file, r.row_group, r.column): r.asDict()
        for r in pbs.bloom_filter_index(spark, directory).collect()
    }
    remote = pbs.bloom_filter_index(spark, f"file://{directory}").collect()
    assert len(remote) == len(local) > 0
    for row in remote:
        got = row.asDict()
        url = got.pop("file")
        assert url.startswith("file://")
        expected = local[(url[len("file://") :], row.row_group, row.column)]
        expected.pop("file")
        assert got == expected


def row_groups_holding(path: Path, column: str, value: Any) -> set[tuple[str, int]]:
    parquet = pq.ParquetFile(path)
    return {
        (str(path), rg)
        for rg in range(parquet.metadata.num_row_groups)
        if value in parquet.read_row_group(rg, columns=[column]).column(column).to_pylist()
    }


def test_files_might_contain_keeps_every_row_group_holding_the_value(
    spark: SparkSession, dataset: Path, table: pa.Table
) -> None:
    files = parquet_files(dataset)
    filtered: dict[str, set[tuple[str, int]]] = {}
    every: dict[str, set[tuple[str, int]]] = {}
    for column in ("long", "string", "dec30"):
        filtered[column], every[column] = set(), set()
        for path in files:
            with pb.BloomFilterReader(path) as reader:
                filtered[column] |= {(str(path), rg) for rg, _ in reader.filters([column])}
                every[column] |= {(str(path), rg) for rg in range(reader.num_row_groups)}
    for column, picks in (("long", [3, 1500, 3999]), ("string", [10, 2000]), ("dec30", [77])):
        for i in picks:
            value = table.column(column)[i].as_py()
            if value is None:
                continue
            truth = set().union(*(row_groups_holding(p, column, value) for p in files))
            found = pbs.files_might_contain(spark, files, column, [value]).collect()
            kept = {(r.file, r.row_group) for r in found}
            assert truth and truth <= kept, (column, value)
            # Row groups without a filter (all-dictionary chunks) are kept; of those with one,
            # only false positives may be kept.
            assert len((kept - truth) & filtered[column]) <= 2, (column, value)
            assert kept - truth - filtered[column] == every[column] - truth - filtered[column]
    every = {(str(p), rg) for p in files for rg in range(pq.ParquetFile(p).metadata.num_row_groups)}
    absent = pbs.files_might_contain(spark, files, "long", [11, 12, 13]).collect()
    assert len(absent) < 0.2 * len(every)
    # a null literal, or a column that a file lacks, keeps everything
    assert {
        (r.file, r.row_group)
        for r in pbs.files_might_contain(spark, files, "long", [None]).collect()
    } == every
    assert {
        (r.file, r.row_group) for r in pbs.files_might_contain(spark, files, "kind", "x").collect()
    } == every


def test_files_might_contain_bad_literals_fail_on_the_driver(
    spark: SparkSession, dataset: Path
) -> None:
    with pytest.raises(TypeError, match="long"):
        pbs.files_might_contain(spark, dataset, "long", ["not a number"])
    with pytest.raises(FileNotFoundError):
        pbs.files_might_contain(spark, dataset / "missing", "long", [1])
    assert pbs.files_might_contain(spark, [], "long", [1]).count() == 0


def test_listing_skips_what_spark_skips(dataset: Path) -> None:
    listed = pbs._list_files(dataset, None)
    assert [Path(p) for p in listed] == sorted(
        [*parquet_files(dataset), dataset / "kind=broken" / "part-0.parquet"]
    )
    assert os.path.basename(listed[0]).startswith("part-")

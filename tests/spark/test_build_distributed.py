"""The distributed build on a real local Spark: filters combined on the executors (slices
shuffled by index and OR-ed there) equal, byte for byte, the local SplitBlockBloomFilter of the
same values, at 1 to 200 partitions, with empty and skewed partitions, several types and sizes
in one build, with and without ndv; and the driver receives each slice once."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import parquet_bloom as pb
from parquet_bloom import spark as pbs
from parquet_bloom._sbbf import SplitBlockBloomFilter, optimal_num_bytes
from parquet_bloom.spark import _build as build
from parquet_bloom.spark import _jvm
from parquet_bloom.spark import _slices as slices
from parquet_bloom.spark._types import SparkLayout
from tests.spark.data import session_conf
from tests.spark.test_probe_layouts import uses_python

pytestmark = pytest.mark.spark

# A type of each kind: INT64, BYTE_ARRAY, a FIXED_LEN_BYTE_ARRAY decimal, an INT32 date, an
# INT96 timestamp and a byte (INT32), as Spark stores them under LAYOUT.
STORED_AS = {
    "long": ("INT64", None),
    "string": ("BYTE_ARRAY", None),
    "dec30": ("FIXED_LEN_BYTE_ARRAY", 13),  # 10**30 < 2**103: 13 bytes
    "date": ("INT32", None),
    "ts": ("INT96", None),
    "byte": ("INT32", None),  # 256 values: its filter sized for the rows folds
}
COLUMNS = list(STORED_AS)
LAYOUT = {
    "spark.sql.parquet.outputTimestampType": "INT96",
    "spark.sql.parquet.writeLegacyFormat": "false",
}
# Three columns sized by ndv (different sizes in one build; 8 KiB filters have 16 slices of the
# 512 bytes SLICE_BYTES is set to here), the others sized from the data (filters for the 4,000
# rows, folded after).
NDV = {"long": 4000, "string": 500, "ts": 30_000}
FPP = 0.01


def local_filter(table: pa.Table, column: str, num_bytes: int) -> SplitBlockBloomFilter:
    physical_type, type_length = STORED_AS[column]
    bloom_filter = SplitBlockBloomFilter(num_bytes)
    bloom_filter.insert(table.column(column), physical_type, type_length=type_length)
    return bloom_filter


def skewed(df: DataFrame, partitions: int) -> DataFrame:
    """70 % of the rows in partition 0, the rest spread over the even partitions; the odd ones
    are empty."""
    spread = F.col("id") % max(partitions // 2, 1) * 2
    partition = F.when(F.col("id") % 10 < 7, 0).otherwise(spread).cast("int")
    return df.repartitionById(partitions, partition)


@pytest.fixture
def small_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slices, "SLICE_BYTES", 512)  # read on the driver, when planning


@pytest.mark.usefixtures("small_slices")
@pytest.mark.parametrize(
    ("partitions", "coalesced"),
    [(1, True), (3, False), (8, False), (64, False), (200, True)],
    ids=["1", "3", "8", "64", "200-coalesced"],
)
def test_distributed_build_equals_the_local_build(
    typed_df: DataFrame,
    table: pa.Table,
    monkeypatch: pytest.MonkeyPatch,
    partitions: int,
    coalesced: bool,
    jvm: bool,
) -> None:
    if not coalesced:  # every partition its own map task, sending its own partial filter
        monkeypatch.setattr(build, "MAP_TASKS_PER_CORE", 1000)
    with session_conf(typed_df.sparkSession, LAYOUT):
        built = pbs.build_filters(skewed(typed_df, partitions), COLUMNS, fpp=FPP, ndv=NDV, jvm=jvm)
    expected = {}
    for column in COLUMNS:
        if column in NDV:
            expected[column] = local_filter(table, column, optimal_num_bytes(NDV[column], FPP))
        else:
            unfolded = local_filter(table, column, optimal_num_bytes(table.num_rows, FPP))
            expected[column] = pb.fold_to_fpp(unfolded, FPP)
    assert expected["byte"].num_bytes < optimal_num_bytes(table.num_rows, FPP)  # folded
    assert {c: f.num_bytes for c, f in built.items()} == {
        c: f.num_bytes for c, f in expected.items()
    }
    assert [c for c in COLUMNS if built[c] != expected[c]] == []


def test_the_driver_receives_each_slice_once(
    typed_df: DataFrame, monkeypatch: pytest.MonkeyPatch, jvm: bool
) -> None:
    monkeypatch.setattr(slices, "SLICE_BYTES", 256)
    monkeypatch.setattr(build, "MAP_TASKS_PER_CORE", 1000)
    plans = slices.slice_plans([8192, 32])  # 32 slices, then 1
    df = skewed(typed_df, 8).select("long", "date")
    layout = SparkLayout.of(typed_df.sparkSession)
    if jvm:
        accelerator = _jvm.accelerator(typed_df.sparkSession, True)
        merged = build.jvm_reduce_scatter(accelerator, df, plans, layout)
        assert uses_python(merged) == []
    else:
        merged = build.reduce_scatter(df, plans, layout)
        assert uses_python(merged) != []
    received = merged.toArrow()
    keys = received.column("slice").to_pylist()
    lengths = [len(b) for b in received.column("bitset").to_pylist()]
    assert sorted(zip(keys, lengths, strict=True)) == [(k, 256) for k in range(32)] + [(32, 32)]

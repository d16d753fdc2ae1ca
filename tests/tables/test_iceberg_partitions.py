"""Lookups of an identity partition's column on an Iceberg table whose data files do not all
store it: a file added from a Hive-style layout (the value in its path, as Iceberg's
``add_files``/``migrate`` procedures register one) holds no ``region`` column, and pyiceberg's
scan reads its rows with the partition's value. ``iceberg.lookup`` and ``lookup_text`` decide
such files by the partition value, as ``iceberg.prune`` does: never a file dropped that the scan
returns rows of."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import parquet_file_to_data_file, schema_to_pyarrow
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record

import parquet_bloom.iceberg as pbi
from parquet_bloom.index import TextFilter
from tests.tables import iceberg_tables as it


def _add_without_region(
    table: Table, ids: range, region: Any, name: str, column: str = "region"
) -> str:
    """A file of ``ids`` without the ``column`` column (filters on ``id``), committed in the
    partition ``region`` (its value) by pyiceberg's own fast append; its path."""
    schema = schema_to_pyarrow(table.schema(), include_field_ids=True)
    schema = pa.schema([f for f in schema if f.name != column])
    data = it.values(ids).select(schema.names).cast(schema)
    buffer = io.BytesIO()
    pq.write_table(
        data, buffer, row_group_size=5, bloom_filter_options={"id": {"ndv": 20, "fpp": 0.01}}
    )
    path = f"{table.location()}/data/{column}={region}/{name}"
    with table.io.new_output(path).create(overwrite=False) as out:
        out.write(buffer.getvalue())
    data_file = parquet_file_to_data_file(table.io, table.metadata, path)
    data_file[3] = Record(region)  # the partition (a read-only property): from the path
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(data_file)
    return path


def _us_table(root: Path) -> Table:
    """Partitioned by identity(region): ids 0-19 in "us", a file storing region, with filters."""
    made = it.catalog(root).create_table("db.t", it.SCHEMA, partition_spec=it.BY_REGION)
    it.add_data_file(
        made,
        it.values(range(20), region="us"),
        "region=us/us.parquet",
        row_group_size=5,
        bloom=(*it.BLOOM_COLUMNS, "region"),
    )
    return made


@pytest.fixture
def table(tmp_path: Path) -> Table:
    """:func:`_us_table` and ids 100-119 in "eu" (a file without the column)."""
    made = _us_table(tmp_path)
    _add_without_region(made, range(100, 120), "eu", "eu.parquet")
    return made


def _files(table: Table) -> dict[str, str]:
    return {p.rsplit("/", 1)[-1]: p for p in it.live_data_files(table)}


def test_the_scan_reads_the_partition_value_into_a_file_without_the_column(table: Table) -> None:
    eu = table.scan(row_filter="region = 'eu'").to_arrow()
    assert sorted(eu["id"].to_pylist()) == list(range(100, 120))
    assert set(eu["region"].to_pylist()) == {"eu"}


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "added-after-the-build"])
def test_a_lookup_of_the_partition_column_keeps_the_file_without_it(
    tmp_path: Path, indexed: bool
) -> None:
    made = _us_table(tmp_path)
    if indexed:
        _add_without_region(made, range(100, 120), "eu", "eu.parquet")
    pbi.build_index(made, ["id", "region"])
    if not indexed:
        _add_without_region(made, range(100, 120), "eu", "eu.parquet")
    files = _files(made)

    eu = pbi.lookup(made, "region", ["eu"])
    assert eu.files == {files["eu.parquet"]: [-1]}
    us = pbi.lookup(made, "region", "us")
    assert list(us.files) == [files["us.parquet"]] and us.files[files["us.parquet"]]
    both = pbi.lookup(made, "region", pa.array(["eu", "us"]))
    assert set(both.files) == set(files.values())
    assert pbi.lookup(made, "region", ["asia"]).files == {}
    # Another column of the same files is answered by their filters as ever.
    assert list(pbi.lookup(made, "id", [105]).files) == [files["eu.parquet"]]


def test_a_text_lookup_of_the_partition_column_keeps_the_file_without_it(table: Table) -> None:
    pbi.build_index(table, ["id"], text=[TextFilter("region")])
    files = _files(table)
    found = pbi.lookup_text(table, "region", "eu")
    assert found.files.get(files["eu.parquet"]) == [-1]
    # A file of a non-null partition the index has nothing of stays a candidate whole (its
    # value is not matched against the pattern: over-inclusive, never a miss).
    assert set(found.files) <= set(files.values())


@pytest.mark.parametrize(
    ("column", "field_id", "value", "stored", "other", "exact"),
    [
        ("day", 4, dt.date(2030, 5, 1), 22035, dt.date(2030, 5, 2), True),
        ("score", 9, 2.5, 2.5, 99.0, False),
    ],
)
def test_other_types_of_identity_partitions(
    tmp_path: Path, column: str, field_id: int, value: Any, stored: Any, other: Any, exact: bool
) -> None:
    """A date partition is decided by its value exactly; a double's is kept whenever it is not
    null (its value read back from Avro may differ in representation: never dropped)."""
    spec = PartitionSpec(PartitionField(field_id, 1000, IdentityTransform(), column))
    made = it.catalog(tmp_path).create_table("db.t", it.SCHEMA, partition_spec=spec)
    data = it.values(range(20))
    i = data.schema.get_field_index(column)
    data = data.set_column(i, column, pa.array([other] * 20, data.schema.field(i).type))
    it.add_data_file(made, data, "with.parquet", row_group_size=5)  # a partition of `other`
    path = _add_without_region(made, range(100, 120), stored, "without.parquet", column=column)
    pbi.build_index(made, ["id", column])
    rows = made.scan(row_filter=f"{column} = '{value}'").to_arrow()
    assert sorted(rows["id"].to_pylist()) == list(range(100, 120))

    assert pbi.lookup(made, column, [value]).files.get(path) == [-1]
    assert (path in pbi.lookup(made, column, [other]).files) is not exact

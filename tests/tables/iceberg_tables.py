"""Iceberg tables for the tests, made through pyiceberg's SqlCatalog (sqlite) on local disk or
on the loopback S3 server.

pyiceberg 0.12 writes no Bloom filters (``write.parquet.bloom-filter-enabled.column.*`` only
draws its "not implemented" warning), so data files with filters are written by pyarrow, with
the table's field ids, and registered with ``add_files`` (:func:`add_data_file`); files without
are appended by pyiceberg itself. pyiceberg cannot write delete files either: a position delete
file is written by pyarrow and committed in a delete manifest by pyiceberg's own snapshot
producer (:func:`add_position_deletes`), which is what Spark would have committed.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

# Every type a Bloom filter can answer for, by field id.
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "region", StringType(), required=False),
    NestedField(4, "day", DateType(), required=False),
    NestedField(5, "ts", TimestampType(), required=False),
    NestedField(6, "tstz", TimestamptzType(), required=False),
    NestedField(7, "price", DecimalType(10, 2), required=False),
    NestedField(8, "big", DecimalType(30, 3), required=False),
    NestedField(9, "score", DoubleType(), required=False),
    NestedField(10, "ratio", FloatType(), required=False),
    NestedField(11, "code", FixedType(4), required=False),
    NestedField(12, "payload", BinaryType(), required=False),
    NestedField(13, "uid", UUIDType(), required=False),
    NestedField(14, "small", IntegerType(), required=False),
    NestedField(15, "clock", TimeType(), required=False),
)
BLOOM_COLUMNS = tuple(f.name for f in SCHEMA.fields if f.name != "region")
REGIONS = ("eu", "us")
BY_REGION = PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "region"))
EPOCH_DAY = dt.date(2024, 1, 1)
EPOCH = dt.datetime(2024, 1, 1)


def catalog(root: Path, warehouse: str | None = None, **properties: str) -> SqlCatalog:
    """A SqlCatalog on sqlite under ``root``, its warehouse a ``file://`` directory there or
    ``warehouse`` (an ``s3://`` URL, with the ``s3.*`` properties to reach it)."""
    root.mkdir(parents=True, exist_ok=True)
    made = SqlCatalog(
        "test",
        uri=f"sqlite:///{root / 'catalog.db'}",
        warehouse=warehouse or (root / "warehouse").as_uri(),
        **properties,
    )
    made.create_namespace("db")
    return made


def appended_and_renamed(root: Path) -> Table:
    """A table written by pyiceberg alone (no filters): partitioned, two appends of two files
    each, row groups of 10 rows, then ``name`` renamed ``label`` (old files call it ``name``)."""
    table = catalog(root).create_table(
        "db.t",
        SCHEMA,
        partition_spec=BY_REGION,
        properties={"write.parquet.row-group-limit": "10"},
    )
    table.append(values(range(40)))
    table.append(values(range(40, 60)))
    with table.update_schema() as update:
        update.rename_column("name", "label")
    return table


def s3_properties(endpoint_url: str) -> dict[str, str]:
    """The FileIO properties that reach the loopback S3 server."""
    return {
        "s3.endpoint": endpoint_url,
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    }


def values(ids: Iterable[int], region: str | None = None) -> pa.Table:
    """Rows of :data:`SCHEMA` derived from each id (every column's value unique to its id),
    typed as pyiceberg types the schema in Arrow."""
    ids = list(ids)
    columns: dict[str, list[Any]] = {
        "id": ids,
        "name": [f"name-{i}" for i in ids],
        "region": [region or REGIONS[i % 2] for i in ids],
        "day": [EPOCH_DAY + dt.timedelta(days=i) for i in ids],
        "ts": [EPOCH + dt.timedelta(seconds=i) for i in ids],
        "tstz": [(EPOCH + dt.timedelta(minutes=i)).replace(tzinfo=dt.timezone.utc) for i in ids],
        "price": [decimal.Decimal(i).scaleb(-2) for i in ids],
        "big": [decimal.Decimal(10**20 + i).scaleb(-3) for i in ids],
        "score": [i / 4 for i in ids],
        "ratio": [i / 8 for i in ids],
        "code": [i.to_bytes(4, "big") for i in ids],
        "payload": [b"p" + i.to_bytes(3, "big") for i in ids],
        "uid": [uuid.UUID(int=i).bytes for i in ids],
        "small": ids,
        "clock": [(EPOCH + dt.timedelta(seconds=i)).time() for i in ids],
    }
    return pa.table(columns).cast(schema_to_pyarrow(SCHEMA, include_field_ids=False))


def parquet_bytes(
    table: Table, data: pa.Table, *, row_group_size: int, bloom: Sequence[str] = BLOOM_COLUMNS
) -> bytes:
    """``data`` as a Parquet file with the table's field ids (as pyiceberg's own writer puts
    them), ``row_group_size`` rows a row group and a Bloom filter (fpp 1 %) on ``bloom``."""
    schema = schema_to_pyarrow(table.schema(), include_field_ids=True)
    data = data.select(schema.names).cast(schema)
    buffer = io.BytesIO()
    pq.write_table(
        data,
        buffer,
        row_group_size=row_group_size,
        store_decimal_as_integer=True,  # as pyiceberg writes decimals
        bloom_filter_options={c: {"ndv": max(len(data), 1), "fpp": 0.01} for c in bloom},
    )
    return buffer.getvalue()


def add_data_file(
    table: Table,
    data: pa.Table,
    name: str,
    *,
    row_group_size: int,
    bloom: Sequence[str] = BLOOM_COLUMNS,
    renames: Mapping[str, str] | None = None,
) -> str:
    """Write ``data`` with Bloom filters as ``data/<name>`` in the table's location and add it
    to the table (a new snapshot); its path. ``renames``: columns the table has renamed since
    ``data``'s names (old -> new), applied to the data and to ``bloom``."""
    renames = renames or {}
    data = data.rename_columns([renames.get(c, c) for c in data.column_names])
    bloom = [renames.get(c, c) for c in bloom]
    path = f"{table.location().rstrip('/')}/data/{name}"
    with table.io.new_output(path).create(overwrite=False) as out:
        out.write(parquet_bytes(table, data, row_group_size=row_group_size, bloom=bloom))
    table.add_files([path])
    return path


# The position delete file's schema (Iceberg spec, "Position Delete Files").
_FILE_PATH_ID, _POS_ID = 2147483546, 2147483545
_POSITION_DELETE_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": str(_FILE_PATH_ID)}),
        pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": str(_POS_ID)}),
    ]
)


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _AddDeleteFiles(_FastAppendFiles):
    """pyiceberg's fast append, its added files written to a delete manifest."""

    def _manifests(self) -> list[ManifestFile]:
        meta = self._transaction.table_metadata
        writer = _DeleteManifestWriter(
            meta.spec(), meta.schema(), self.new_manifest_output(), self._snapshot_id, "null"
        )
        with writer:
            for delete_file in self._added_data_files:
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=self._snapshot_id,
                        data_file=delete_file,
                    )
                )
        return [writer.to_manifest_file(), *self._existing_manifests()]


def add_position_deletes(table: Table, data_file: DataFile, positions: Sequence[int]) -> str:
    """Commit a position delete file deleting ``positions`` (row numbers in the whole file) of
    ``data_file``; its path."""
    path = f"{table.location().rstrip('/')}/data/deletes-{uuid.uuid4().hex[:8]}.parquet"
    rows = pa.table(
        {"file_path": [data_file.file_path] * len(positions), "pos": sorted(positions)},
        schema=_POSITION_DELETE_SCHEMA,
    )
    buffer = io.BytesIO()
    pq.write_table(rows, buffer)
    with table.io.new_output(path).create(overwrite=False) as out:
        out.write(buffer.getvalue())
    bound = data_file.file_path.encode()
    delete_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=data_file.partition,
        record_count=len(positions),
        file_size_in_bytes=len(buffer.getvalue()),
        lower_bounds={_FILE_PATH_ID: bound},
        upper_bounds={_FILE_PATH_ID: bound},
    )
    delete_file.spec_id = data_file.spec_id
    with table.transaction() as tx:
        producer = _AddDeleteFiles(Operation.DELETE, tx, table.io)
        producer.append_data_file(delete_file)
        producer.commit()
    return path


def add_equality_deletes(table: Table, column: str, deleted: Sequence[Any]) -> str:
    """Commit an equality delete file deleting the rows whose ``column`` is one of
    ``deleted`` (in an unpartitioned table: it applies table-wide); its path."""
    field = table.schema().find_field(column)
    arrow_type = schema_to_pyarrow(table.schema(), include_field_ids=True).field(column)
    rows = pa.table({column: pa.array(deleted, arrow_type.type)}, schema=pa.schema([arrow_type]))
    path = f"{table.location().rstrip('/')}/data/eq-deletes-{uuid.uuid4().hex[:8]}.parquet"
    buffer = io.BytesIO()
    pq.write_table(rows, buffer)
    with table.io.new_output(path).create(overwrite=False) as out:
        out.write(buffer.getvalue())
    delete_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=len(deleted),
        file_size_in_bytes=len(buffer.getvalue()),
        equality_ids=[field.field_id],
    )
    delete_file.spec_id = table.spec().spec_id
    with table.transaction() as tx:
        producer = _AddDeleteFiles(Operation.DELETE, tx, table.io)
        producer.append_data_file(delete_file)
        producer.commit()
    return path


def live_data_files(table: Table) -> list[str]:
    """The paths of the current snapshot's data files, read from its manifests (pyiceberg
    0.12 refuses to plan a scan of a table with equality deletes)."""
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return [
        entry.data_file.file_path
        for manifest in snapshot.manifests(table.io)
        if manifest.content == ManifestContent.DATA
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    ]


def catalog_table(table: Table) -> Table:
    """A second handle on ``table``, loaded from its catalog: another writer."""
    return table.catalog.load_table(table.name())


def data_files(table: Table) -> dict[str, DataFile]:
    """The live data files of the table's current snapshot, by path."""
    return {task.file.file_path: task.file for task in table.scan().plan_files()}


def sorted_rows(data: pa.Table) -> list[dict[str, Any]]:
    """Rows as dicts, ordered by id: scans' row order is the plan's, not the data's."""
    return sorted(data.to_pylist(), key=lambda row: row["id"])

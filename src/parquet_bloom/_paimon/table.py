"""A Paimon table's live data files and their indexes, from its latest snapshot.

The chain (docs/paimon.md#a-tables-files; paimon-core ``utils/SnapshotManager.java``,
``operation/FileStoreScan``, ``manifest/FileEntry.java``, ``utils/FileStorePathFactory.java``):

- ``snapshot/LATEST`` holds a hint of the latest snapshot's id; it is the latest unless
  ``snapshot-<id + 1>`` exists, else the directory is listed. ``snapshot/snapshot-<id>`` is
  JSON naming the ``baseManifestList`` and ``deltaManifestList`` (files in ``manifest/``) and
  the ``schemaId``;
- a manifest list (Avro) names manifests (``_FILE_NAME``); a manifest (Avro) holds entries:
  ``_KIND`` (0 add, 1 delete), ``_PARTITION`` (a serialised ``BinaryRow``), ``_BUCKET`` and
  ``_FILE`` (``_FILE_NAME``, ``_LEVEL``, ``_SCHEMA_ID``, ``_EXTRA_FILES``,
  ``_EMBEDDED_FILE_INDEX``, ...). Entries are merged in order by (partition, bucket, level,
  file name): a delete cancels the add before it;
- a data file lies at ``<table>/<partition path>/bucket-<bucket>/<file name>`` (partition
  path ``k=v/``, values as Java's ``toString``), or at its ``_EXTERNAL_PATH`` (Paimon 1.x);
  its ``.index`` file, named in ``_EXTRA_FILES``, lies beside it. Where a partition key's type
  is not decoded here, the table is listed once and files found by name.
- ``schema/schema-<id>`` is JSON: ``fields`` (``id``, ``name``, ``type``), ``partitionKeys``,
  ``primaryKeys``, ``options``.

Every read goes through the IO layer; metadata files are read whole, up to
:data:`MAX_METADATA_BYTES`.
"""

from __future__ import annotations

import io
import json
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._io import location
from parquet_bloom._io.source import ByteSource
from parquet_bloom._paimon import avro
from parquet_bloom._paimon.fasthash import PaimonType, parse_type
from parquet_bloom._paimon.index import FileIndex, read_file_index
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

__all__ = [
    "MAX_METADATA_BYTES",
    "DataFile",
    "Field",
    "Table",
    "TableSchema",
    "decode_partition",
]

# Snapshots, schemas, manifest lists and manifests are read whole. Manifests roll at 8 MiB
# (manifest.target-file-size); a metadata file past 256 MiB is refused before it is read.
MAX_METADATA_BYTES = 256 * 1024 * 1024
DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"  # partition.default-name
_ADD, _DELETE = 0, 1  # FileKind
_POSTPONE_BUCKET = -2  # BucketMode.POSTPONE_BUCKET: "bucket-postpone"
# Characters a partition path escapes as %XX (PartitionPathUtils.CHAR_TO_ESCAPE): control
# characters and these.
_ESCAPED = frozenset("\"#%'*/:=?\\\x7f{}[]^")
_BINARY_ROW_HEADER_BITS = 8  # BinaryRow.HEADER_SIZE_IN_BITS: the row kind


@dataclass(frozen=True)
class Field:
    """A column of a schema: its field ``id`` (kept across renames), ``name`` and ``type``."""

    id: int
    name: str
    type: PaimonType


@dataclass(frozen=True)
class TableSchema:
    """One ``schema/schema-<id>`` file."""

    id: int
    fields: tuple[Field, ...]
    partition_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    options: dict[str, str]

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)

    def field_by_id(self, field_id: int) -> Field | None:
        return next((f for f in self.fields if f.id == field_id), None)

    @property
    def data_types(self) -> dict[str, PaimonType]:
        return {f.name: f.type for f in self.fields}


@dataclass(frozen=True)
class DataFile:
    """One live data file of a table: its ``path`` (or URL), ``file_name``, ``partition``
    (column -> value), ``bucket``, ``level``, ``row_count``, ``file_size``, ``schema_id``,
    ``schema`` (the columns as that file has them), its index (``embedded_index``: the bytes
    the manifest holds, or ``index_path``: its ``.index`` file; neither: no index)."""

    path: str
    file_name: str
    partition: dict[str, Any]
    bucket: int
    level: int
    row_count: int
    file_size: int
    schema_id: int
    schema: TableSchema = field(repr=False)
    embedded_index: bytes | None = field(default=None, repr=False)
    index_path: str | None = None
    _filesystem: Any = field(default=None, repr=False, compare=False)

    @property
    def has_index(self) -> bool:
        return self.embedded_index is not None or self.index_path is not None

    def file_index(self, columns: list[str] | None = None) -> FileIndex | None:
        """The file's indexes (the ``bloom-filter`` ones of ``columns``, default all), from
        the manifest or its ``.index`` file; None when it has none."""
        types = self.schema.data_types
        if self.embedded_index is not None:
            return FileIndex.from_bytes(
                self.embedded_index, data_types=types, source=f"{self.path} (embedded index)"
            )
        if self.index_path is None:
            return None
        return read_file_index(
            _fs_path(self.index_path, self._filesystem),
            columns=columns,
            data_types=types,
            filesystem=self._filesystem,
        )

    def might_contain(self, column: str, value: Any) -> bool:
        """Whether this file may hold ``column == value``: False only when its bloom-filter
        index says no (as Paimon decides, ``FileIndexPredicate``)."""
        return bool(self.might_contain_many(column, [value]).any())

    def might_contain_many(self, column: str, values: Any) -> NDArray[np.bool_]:
        """:meth:`might_contain` of each value; ``.any()`` of it is ``column IN values``."""
        index = self.file_index([column])
        if index is None:
            n = len(values) if hasattr(values, "__len__") else len(list(values))
            return np.ones(n, dtype=bool)
        return index.might_contain_many(column, values)


def _fs_path(name: str, filesystem: Any) -> str:
    """The path a filesystem takes for a name we show (a URL on a remote one)."""
    if filesystem is None:
        return name
    strip = getattr(filesystem, "_strip_protocol", None)
    return str(strip(name)) if strip is not None else name


def _parse_schema(raw: bytes, source: str) -> TableSchema:
    try:
        doc = json.loads(raw.decode("utf-8"))
        fields = tuple(
            Field(int(f["id"]), str(f["name"]), parse_type(f["type"])) for f in doc["fields"]
        )
        return TableSchema(
            int(doc["id"]),
            fields,
            tuple(doc.get("partitionKeys") or ()),
            tuple(doc.get("primaryKeys") or ()),
            {str(k): str(v) for k, v in (doc.get("options") or {}).items()},
        )
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise CorruptFileError(f"not a Paimon schema: {err}", source=source) from err


# -- partitions ---------------------------------------------------------------------------------


def decode_partition(
    raw: bytes, types: list[PaimonType], *, source: str | None = None
) -> list[Any]:
    """The values of a serialised ``BinaryRow`` (``SerializationUtils.serializeBinaryRow``:
    the arity as a big-endian int32, then the row: null bits after an 8-bit header, 8 bytes a
    field, little-endian, strings of up to 7 bytes inline and longer ones by offset and
    length). Types without a plain text form are UnsupportedFileError."""
    if len(raw) < 4:
        raise CorruptFileError(f"a partition of {len(raw)} bytes", source=source)
    arity = int.from_bytes(raw[:4], "big", signed=True)
    if arity != len(types):
        raise CorruptFileError(
            f"a partition of {arity} fields for {len(types)} partition keys", source=source
        )
    row = raw[4:]
    null_bytes = ((arity + 63 + _BINARY_ROW_HEADER_BITS) // 64) * 8
    if len(row) < null_bytes + 8 * arity:
        raise CorruptFileError(f"a partition row of {len(row)} bytes", source=source)
    values: list[Any] = []
    for i, typ in enumerate(types):
        bit = i + _BINARY_ROW_HEADER_BITS
        if row[bit >> 3] & (1 << (bit & 7)):
            values.append(None)
            continue
        at = null_bytes + 8 * i
        slot = row[at : at + 8]
        root = typ.root
        if root in ("VARCHAR", "CHAR", "VARBINARY", "BINARY"):
            word = int.from_bytes(slot, "little")
            if word >> 63:
                length = (word >> 56) & 0x7F
                data = slot[: min(length, 7)]
            else:
                offset, length = word >> 32, word & 0xFFFFFFFF
                if offset + length > len(row):
                    raise CorruptFileError(
                        f"a partition string at {offset}, {length} bytes, past the row's end",
                        source=source,
                    )
                data = row[offset : offset + length]
            if root in ("VARCHAR", "CHAR"):
                try:
                    values.append(data.decode("utf-8"))
                except UnicodeDecodeError as err:
                    raise CorruptFileError("a partition string not UTF-8", source=source) from err
            else:
                values.append(bytes(data))
        elif root == "BOOLEAN":
            values.append(slot[0] != 0)
        elif root == "TINYINT":
            values.append(struct.unpack("<b", slot[:1])[0])
        elif root == "SMALLINT":
            values.append(struct.unpack("<h", slot[:2])[0])
        elif root in ("INT", "DATE", "TIME"):
            values.append(struct.unpack("<i", slot[:4])[0])
        elif root == "BIGINT":
            values.append(struct.unpack("<q", slot[:8])[0])
        else:
            raise UnsupportedFileError(f"a {typ} partition key is not decoded here", source=source)
    return values


def _partition_text(value: Any, typ: PaimonType, legacy: bool) -> str | None:
    """The text Paimon puts in the path for a value (``toString`` of the internal value; a
    cast to string when ``partition.legacy-name`` is false), or None where that is not sure."""
    if value is None:
        return ""
    if typ.root in ("VARCHAR", "CHAR"):
        return str(value)
    if typ.root == "BOOLEAN":
        return "true" if value else "false"
    if typ.root in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        return str(value)
    if typ.root == "DATE":
        if legacy:
            return str(value)
        import datetime as dt

        return (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat()
    return None


def _escape(text: str) -> str:
    """``PartitionPathUtils.escapePathName``."""
    return "".join(f"%{ord(c):02X}" if ord(c) < 0x20 or c in _ESCAPED else c for c in text)


# -- the table ----------------------------------------------------------------------------------


class Table:
    """A Paimon table's directory (a path or URL), read through the IO layer."""

    def __init__(
        self,
        uri: str | os.PathLike[str],
        *,
        storage_options: Mapping[str, Any] | None = None,
        filesystem: Any | None = None,
    ) -> None:
        self.uri = os.fspath(uri).rstrip("/")
        self.filesystem, self.root = location.resolve(
            self.uri, filesystem=filesystem, storage_options=storage_options
        )
        self.root = self.root.rstrip("/")
        self._schemas: dict[int, TableSchema] = {}
        self._listing: dict[str, str] | None = None

    # -- IO -------------------------------------------------------------------------------------

    def path(self, relative: str) -> str:
        """The name we show for a file of the table (its URL on a remote filesystem)."""
        return f"{self.uri}/{relative}"

    def read(self, relative: str) -> bytes:
        """A metadata file, whole."""
        name = f"{self.root}/{relative}"
        with ByteSource(name, filesystem=self.filesystem) as src:
            size = src.size
            if size > MAX_METADATA_BYTES:
                raise CorruptFileError(
                    f"a Paimon metadata file of {size} bytes, over MAX_METADATA_BYTES "
                    f"({MAX_METADATA_BYTES})",
                    source=self.path(relative),
                )
            return src.read_exact(0, size)

    def _list(self, relative: str) -> list[location.Entry]:
        return location.list_files(f"{self.root}/{relative}/", filesystem=self.filesystem)

    # -- snapshots and schemas ------------------------------------------------------------------

    def latest_snapshot_id(self) -> int | None:
        """The latest snapshot's id (``SnapshotManager.latestSnapshotId``), None for a table
        with none."""
        try:
            hint = int(self.read("snapshot/LATEST").decode("ascii").strip())
        except (FileNotFoundError, ValueError, UnicodeDecodeError):
            hint = None
        if hint is not None and hint > 0:
            try:
                self.read(f"snapshot/snapshot-{hint + 1}")
            except FileNotFoundError:
                return hint
        try:
            entries = self._list("snapshot")
        except (FileNotFoundError, NotADirectoryError):  # no snapshot directory: no snapshot
            return None
        ids = [
            int(name[len("snapshot-") :])
            for e in entries
            if (name := e.path.rstrip("/").rsplit("/", 1)[-1]).startswith("snapshot-")
            and name[len("snapshot-") :].isdigit()
        ]
        return max(ids) if ids else None

    def snapshot(self, snapshot_id: int) -> dict[str, Any]:
        relative = f"snapshot/snapshot-{snapshot_id}"
        try:
            doc = json.loads(self.read(relative).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise CorruptFileError(
                f"not a Paimon snapshot: {err}", source=self.path(relative)
            ) from err
        if not isinstance(doc, dict):
            raise CorruptFileError("not a Paimon snapshot", source=self.path(relative))
        return doc

    def schema(self, schema_id: int) -> TableSchema:
        if schema_id not in self._schemas:
            relative = f"schema/schema-{schema_id}"
            self._schemas[schema_id] = _parse_schema(self.read(relative), self.path(relative))
        return self._schemas[schema_id]

    # -- manifests ------------------------------------------------------------------------------

    def _objects(self, relative: str) -> list[Any]:
        raw = self.read(relative)
        if raw[:4] == avro.MAGIC:
            return avro.read_container(raw, source=self.path(relative))[1]
        try:
            if raw[:4] == b"PAR1":
                import pyarrow.parquet as pq

                rows: list[Any] = pq.read_table(io.BytesIO(raw)).to_pylist()
                return rows
            if raw[:3] == b"ORC":
                import pyarrow.orc as orc

                rows = orc.read_table(io.BytesIO(raw)).to_pylist()
                return rows
        except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
            raise CorruptFileError(
                f"a manifest pyarrow cannot read: {err}", source=self.path(relative)
            ) from err
        raise UnsupportedFileError(
            "a manifest neither Avro, Parquet nor ORC (manifest.format)", source=self.path(relative)
        )

    def data_files(self, snapshot_id: int | None = None) -> list[DataFile]:
        """The live data files of a snapshot (default: the latest), in manifest order."""
        if snapshot_id is None:
            snapshot_id = self.latest_snapshot_id()
            if snapshot_id is None:
                return []
        snap = self.snapshot(snapshot_id)
        table_schema = self.schema(int(snap.get("schemaId", 0)))
        merged: dict[tuple[bytes, int, int, str], dict[str, Any]] = {}
        for key in ("baseManifestList", "deltaManifestList"):
            listed = snap.get(key)
            if not listed:
                continue
            for meta in self._objects(f"manifest/{listed}"):
                for entry in self._objects(f"manifest/{meta['_FILE_NAME']}"):
                    f = entry["_FILE"]
                    ident = (
                        bytes(entry["_PARTITION"]),
                        int(entry["_BUCKET"]),
                        int(f["_LEVEL"]),
                        str(f["_FILE_NAME"]),
                    )
                    if entry["_KIND"] == _ADD:
                        merged[ident] = entry
                    elif entry["_KIND"] == _DELETE and merged.pop(ident, None) is None:
                        merged[ident] = entry  # its add is in an older manifest
        return [
            self._data_file(entry, table_schema)
            for entry in merged.values()
            if entry["_KIND"] == _ADD
        ]

    def _data_file(self, entry: dict[str, Any], table_schema: TableSchema) -> DataFile:
        f = entry["_FILE"]
        name = str(f["_FILE_NAME"])
        file_schema = self.schema(int(f["_SCHEMA_ID"]))
        keys = list(table_schema.partition_keys)
        types = [t.type for k in keys if (t := table_schema.field(k)) is not None]
        if len(types) != len(keys):
            raise CorruptFileError(f"partition keys {keys} not all in the schema", source=self.uri)
        source = self.path(f"manifest entry of {name}")
        partition_values: list[Any] | None
        try:
            partition_values = decode_partition(bytes(entry["_PARTITION"]), types, source=source)
        except UnsupportedFileError:
            partition_values = None
        partition = dict(zip(keys, partition_values or [], strict=False))
        external = f.get("_EXTERNAL_PATH")
        if external:
            path = str(external)
            if path.startswith("file:") and not path.startswith("file://"):
                path = "/" + path[len("file:") :].lstrip("/")  # Hadoop's file:/path
        else:
            relative = self._relative_dir(keys, types, partition_values, table_schema, entry)
            path = self.path(f"{relative}{name}") if relative is not None else self._find(name)
        extra = [str(x) for x in (f.get("_EXTRA_FILES") or ()) if str(x).endswith(".index")]
        index_path = f"{path.rsplit('/', 1)[0]}/{extra[0]}" if extra else None
        embedded = f.get("_EMBEDDED_FILE_INDEX")
        return DataFile(
            path=path,
            file_name=name,
            partition=partition,
            bucket=int(entry["_BUCKET"]),
            level=int(f["_LEVEL"]),
            row_count=int(f["_ROW_COUNT"]),
            file_size=int(f["_FILE_SIZE"]),
            schema_id=int(f["_SCHEMA_ID"]),
            schema=file_schema,
            embedded_index=bytes(embedded) if embedded is not None else None,
            index_path=index_path,
            _filesystem=self.filesystem,
        )

    def _relative_dir(
        self,
        keys: list[str],
        types: list[PaimonType],
        values: list[Any] | None,
        table_schema: TableSchema,
        entry: dict[str, Any],
    ) -> str | None:
        """``<partition path>/bucket-<n>/`` under the table (``FileStorePathFactory``), or
        None for a partition type not decoded here."""
        if values is None:
            return None
        options = table_schema.options
        legacy = options.get("partition.legacy-name", "true").lower() != "false"
        default = options.get("partition.default-name", DEFAULT_PARTITION_NAME)
        parts = []
        for key, typ, value in zip(keys, types, values, strict=True):
            text = _partition_text(value, typ, legacy)
            if text is None:
                return None
            if not text.strip():
                text = default
            parts.append(f"{_escape(key)}={_escape(text)}/")
        bucket = int(entry["_BUCKET"])
        bucket_dir = "bucket-postpone" if bucket == _POSTPONE_BUCKET else f"bucket-{bucket}"
        directory = options.get("data-file.path-directory")
        prefix = f"{directory.strip('/')}/" if directory else ""
        return f"{prefix}{''.join(parts)}{bucket_dir}/"

    def _find(self, name: str) -> str:
        """A data file found by name in one listing of the table."""
        if self._listing is None:
            self._listing = {}
            for e in location.list_files(f"{self.root}/", filesystem=self.filesystem):
                self._listing.setdefault(e.path.rsplit("/", 1)[-1], e.name)
        if name not in self._listing:
            raise FileNotFoundError(f"data file {name} of table {self.uri} not found")
        return self._listing[name]

"""A Delta table's snapshot as parquet_bloom.delta reads it through deltalake: where the table
is, its data files with what a commit must carry for each (the log's partition values and
statistics), which files have deletion vectors, and which table features the rewrite's commit
cannot carry (docs/tables.md#delta-lake).

deltalake gives a snapshot's files typed (``DeltaTable.get_add_actions``): partition values
and min/max statistics as Arrow values. A commit needs them serialized again: partition values
are taken, string for string, from the table's own (``DeltaTable.partitions``), and statistics
are written as deltalake writes them (:func:`stats_json`). Only this module and the other
``delta_*`` modules import deltalake; :mod:`parquet_bloom.delta` checks that it is installed.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from parquet_bloom._io.advice import what_to_do
from parquet_bloom._io.limits import delta_storage_options
from parquet_bloom.errors import FileReadError, TableVersionError

__all__ = [
    "DeltaFile",
    "deletion_vectors",
    "file_location",
    "file_storage_options",
    "is_local",
    "load_table",
    "maps_column_names",
    "partition_strings",
    "reader_feature_refusal",
    "relative_path",
    "snapshot_files",
    "stats_json",
    "table_columns",
    "table_root",
    "writer_feature_refusals",
]

# Reader features whose tables deltalake's pyarrow dataset reads (deltalake.table's
# SUPPORTED_READER_FEATURES), and deletion vectors, which prune applies itself.
READABLE_FEATURES = frozenset(
    {"timestampNtz", "variantType", "variantType-preview", "deletionVectors"}
)

# Writer features the rewrite's commit carries (remove + add, dataChange=false, the same rows
# in new files), each with why; every other feature refuses the table, unknown ones included.
CARRIED_FEATURES = {
    "appendOnly": "removes with dataChange=false are allowed in append-only tables",
    "invariants": "the rows do not change",
    "checkConstraints": "the rows do not change",
    "generatedColumns": "the rows do not change",
    "identityColumns": "the rows do not change, nor the identity high-water mark",
    "allowColumnDefaults": "the rows do not change",
    "changeDataFeed": "a commit with dataChange=false has no change data",
    "deletionVectors": "files with deletion vectors are refused one by one",
    "timestampNtz": "a type, not a writer rule",
    "variantType": "a type, not a writer rule",
    "variantType-preview": "a type, not a writer rule",
    "typeWidening": "a type, not a writer rule",
    "typeWidening-preview": "a type, not a writer rule",
    "domainMetadata": "the commit touches no domain",
    "v2Checkpoint": "checkpoints are deltalake's business",
    "vacuumProtocolCheck": "vacuum's business",
}
REFUSED_FEATURES = {
    "rowTracking": (
        "the commit's add actions cannot carry baseRowId and defaultRowCommitVersion, so the "
        "rows would get new row ids"
    ),
    "columnMapping": (
        "the data files name their columns by physical names, not the names columns= takes"
    ),
    "clustering": (
        "the commit's add actions cannot carry clusteringProvider, so the files would count as "
        "unclustered"
    ),
    "icebergCompatV1": "Iceberg metadata must be written with each commit (UniForm)",
    "icebergCompatV2": "Iceberg metadata must be written with each commit (UniForm)",
}
# The writer features a legacy protocol (minWriterVersion below 7) implies.
_LEGACY_WRITER_FEATURES = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
    6: ("identityColumns",),
}
_COLUMN_MAPPING_MODE = "delta.columnMapping.mode"

# Decimals of up to this many digits are written to statistics as doubles (JSON numbers, as
# deltalake writes them) and read back exactly; longer ones are left out of the statistics.
_EXACT_DECIMAL_DIGITS = 15


@dataclass(frozen=True)
class DeltaFile:
    """One data file of a snapshot: ``key``, the path as the log writes it (URI-encoded,
    relative to the table root); ``path``, the file's path under the root (decoded), as
    deltalake's actions and filesystem take it; ``size``; ``modification_time`` (ms);
    ``partition_values`` as the log's strings (None when they could not be matched to the
    table's, see :func:`partition_strings`); ``stats``, the statistics as JSON (None if none);
    ``partitions``, the typed partition values."""

    key: str
    path: str
    size: int
    modification_time: int
    partition_values: Mapping[str, str | None] | None
    stats: str | None
    partitions: Mapping[str, Any]


def load_table(
    table_or_uri: DeltaTable | str | os.PathLike[str],
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> DeltaTable:
    """The table at ``table_or_uri`` (its ``version``, or the latest), or the DeltaTable given
    (which brings its own version and storage options)."""
    if isinstance(table_or_uri, DeltaTable):
        if version is not None or storage_options is not None:
            raise ValueError(
                "a DeltaTable brings its own version and storage options; pass its URI to "
                "choose them"
            )
        return table_or_uri
    if not isinstance(table_or_uri, str | os.PathLike):
        raise TypeError(
            f"expected a DeltaTable, a path or a URI, not {type(table_or_uri).__name__}"
        )
    uri = os.fspath(table_or_uri)
    options = delta_storage_options(uri, storage_options)
    try:
        return DeltaTable(uri, version=version, storage_options=options)
    except DeltaError as err:
        raise _opening_error(uri, version, options, err) from err


def _opening_error(
    uri: str, version: int | None, options: Mapping[str, str] | None, err: DeltaError
) -> Exception:
    """What opening the table at ``uri`` failed on, as the user's mistake it is: a version
    the table does not have (TableVersionError), the store's credentials or endpoint
    (FileReadError, with what to do); else ``err`` itself (deltalake's TableNotFoundError
    for no table there)."""
    if isinstance(err, TableNotFoundError):
        return err
    advice = what_to_do(err)
    if advice is not None:
        detail = " ".join(str(err).split())
        return FileReadError(f"cannot open the Delta table: {detail}; {advice}", source=uri)
    if version is None:
        return err
    try:
        reopened = DeltaTable(uri, storage_options=None if options is None else dict(options))
        latest: int | None = reopened.version()
    except DeltaError:
        latest = None
    if latest is not None and version > latest:
        return TableVersionError(
            f"the Delta table at {uri} has no version {version}: its latest is {latest}",
            table=uri,
            asked=version,
            latest=latest,
        )
    return TableVersionError(
        f"version {version} of the Delta table at {uri} cannot be read (its log no longer "
        f"holds it: checkpointed and cleaned up?): {' '.join(str(err).split())}",
        table=uri,
        asked=version,
        latest=latest,
    )


def table_columns(table: DeltaTable) -> list[str]:
    """The table schema's top-level column names."""
    return [f.name for f in table.schema().fields]


def table_root(table: DeltaTable) -> str:
    """The table's root without a trailing slash: a local path, or a URL."""
    uri = table.table_uri.rstrip("/")
    if uri.startswith("file:"):
        return url2pathname(urlparse(uri).path)
    return uri


def is_local(root: str) -> bool:
    return "://" not in root


def file_location(root: str, path: str) -> str:
    """Where the file at ``path`` (decoded, relative to the root) is: a local path or a URL."""
    return os.path.join(root, *path.split("/")) if is_local(root) else f"{root}/{path}"


def relative_path(key: str) -> str | None:
    """The decoded path under the root of a log ``key``, or None for an absolute one (a file
    outside the table, as a shallow clone's log names them)."""
    path = unquote(key)
    if "://" in path or path.startswith("/"):
        return None
    return path


def snapshot_files(table: DeltaTable) -> list[DeltaFile]:
    """The snapshot's data files, in the log's order, with what a commit carries for each."""
    actions = pa.table(table.get_add_actions(flatten=False))
    table_strings = partition_table_strings(table)
    files = []
    for row in actions.to_pylist():
        partitions = row.get("partition") or {}
        stats = stats_json(
            row.get("num_records"), row.get("min"), row.get("max"), row.get("null_count")
        )
        key = row["path"]
        files.append(
            DeltaFile(
                key=key,
                path=unquote(key),
                size=int(row["size_bytes"]),
                modification_time=int(row["modification_time"]),
                partition_values=partition_strings(partitions, table_strings),
                stats=stats,
                partitions=partitions,
            )
        )
    return files


def deletion_vectors(table: DeltaTable) -> dict[str, list[bool]]:
    """The keep masks (deltalake's own reading of each deletion vector: False for a deleted
    row; a mask may stop before the file's last rows, which are kept) of the files that have
    one, by decoded path under the root; empty when the table cannot have any."""
    if "deletionVectors" not in (table.protocol().reader_features or ()):
        return {}
    prefix = table.table_uri.rstrip("/") + "/"
    found = pa.table(table.deletion_vectors()).to_pydict()
    masks: dict[str, list[bool]] = {}
    for uri, mask in zip(found["filepath"], found["selection_vector"], strict=True):
        path = uri[len(prefix) :] if uri.startswith(prefix) else uri
        masks[unquote(path)] = list(mask)
    return masks


# -- table features --------------------------------------------------------------------------


def reader_feature_refusal(table: DeltaTable) -> str | None:
    """Why the table's rows cannot be read as a pyarrow dataset here (None: they can)."""
    protocol = table.protocol()
    unreadable = sorted(set(protocol.reader_features or ()) - READABLE_FEATURES)
    if protocol.min_reader_version > 3:
        return f"its minimum reader version is {protocol.min_reader_version}"
    if unreadable:
        return f"it has the reader features {unreadable}, which deltalake's pyarrow reading lacks"
    if _column_mapping(table):
        return "it maps column names (columnMapping), which deltalake's pyarrow reading lacks"
    return None


def writer_feature_refusals(table: DeltaTable) -> list[str]:
    """Why the rewrite's commit cannot carry the table's writer features: one reason a
    feature, none when it can (docs/tables.md#delta-lake lists them)."""
    protocol = table.protocol()
    if protocol.min_writer_version >= 7:
        features = list(protocol.writer_features or ())
    else:
        features = [
            feature
            for version, implied in _LEGACY_WRITER_FEATURES.items()
            if protocol.min_writer_version >= version
            for feature in implied
        ]
        if not _column_mapping(table) and "columnMapping" in features:
            features.remove("columnMapping")  # implied by version 5, but not in use
    reasons = []
    for feature in features:
        if feature in CARRIED_FEATURES:
            continue
        reason = REFUSED_FEATURES.get(feature, "a feature parquet-bloom does not know to be safe")
        reasons.append(f"{feature}: {reason}")
    return reasons


def maps_column_names(table: DeltaTable) -> bool:
    """Whether the table's files name its columns by physical names of their own
    (``delta.columnMapping.mode`` ``name`` or ``id``), not by the names its schema gives."""
    return _column_mapping(table)


def _column_mapping(table: DeltaTable) -> bool:
    mode = table.metadata().configuration.get(_COLUMN_MAPPING_MODE)
    return mode not in (None, "none")


# -- partition values ------------------------------------------------------------------------


PartitionKey = frozenset[tuple[str, str | None]]


def partition_table_strings(table: DeltaTable) -> dict[PartitionKey, dict[str, str | None]]:
    """The table's partition values as its log writes them (``DeltaTable.partitions``), by
    their normal form (:func:`_normal`)."""
    found: dict[PartitionKey, dict[str, str | None]] = {}
    for values in table.partitions():
        strings: dict[str, str | None] = {
            str(k): (None if v is None else str(v)) for k, v in values.items()
        }
        found.setdefault(_normal(strings), strings)
    return found


def partition_strings(
    partitions: Mapping[str, Any],
    table_strings: Mapping[PartitionKey, Mapping[str, str | None]],
) -> dict[str, str | None] | None:
    """A file's partition values as the log's strings: the typed values serialized as
    deltalake serializes them (the Delta protocol's partition value serialization), then
    taken from the table's own strings, which must hold them. None when they do not (a type
    serialized otherwise, or an unusual spelling in the log): the file's values cannot be
    carried exactly, and it is refused."""
    if not partitions:
        return {}
    serialized = {name: _partition_string(value) for name, value in partitions.items()}
    if any(value is _UNSERIALIZABLE for value in serialized.values()):
        return None
    strings = table_strings.get(_normal(serialized))
    return dict(strings) if strings is not None else None


_UNSERIALIZABLE: Any = object()


def _normal(values: Mapping[str, str | None]) -> PartitionKey:
    # An empty string and null are the same partition value (the protocol's null).
    return frozenset((k, v if v else None) for k, v in values.items())


def _partition_string(value: Any) -> Any:
    """``value`` as deltalake writes a partition value; _UNSERIALIZABLE if not known."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return _UNSERIALIZABLE
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, dt.date):
        return value.isoformat()
    return _UNSERIALIZABLE


# -- statistics ------------------------------------------------------------------------------


def stats_json(
    num_records: int | None,
    minimum: Mapping[str, Any] | None,
    maximum: Mapping[str, Any] | None,
    null_count: Mapping[str, Any] | None,
) -> str | None:
    """A file's statistics as the log's JSON, from deltalake's typed reading of them, written
    as deltalake writes them: numbers, ``YYYY-MM-DD`` dates, timestamps in UTC as
    ``YYYY-MM-DDTHH:MM:SS.fffZ`` (without a time zone: ``YYYY-MM-DD HH:MM:SS.fff``; microseconds
    when they are not whole milliseconds), decimals of up to 15 digits as numbers. A value of
    another type (binary, NaN, a longer decimal) is left out: a reader keeps every file for a
    column without statistics, so leaving one out loses pruning, never rows."""
    if num_records is None:
        return None
    stats: dict[str, Any] = {"numRecords": int(num_records)}
    for name, values in (("minValues", minimum), ("maxValues", maximum), ("nullCount", null_count)):
        tree = _stats_tree(values or {})
        if tree:
            stats[name] = tree
    return json.dumps(stats, separators=(",", ":"), allow_nan=False)


def _stats_tree(values: Mapping[str, Any]) -> dict[str, Any]:
    tree = {}
    for name, value in values.items():
        if isinstance(value, Mapping):
            child = _stats_tree(value)
            if child:
                tree[name] = child
            continue
        written = _stats_value(value)
        if written is not _UNSERIALIZABLE:
            tree[name] = written
    return tree


def _stats_value(value: Any) -> Any:
    if value is None:
        return _UNSERIALIZABLE
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _UNSERIALIZABLE
    if isinstance(value, decimal.Decimal):
        digits = len(value.as_tuple().digits)
        if not value.is_finite() or digits > _EXACT_DECIMAL_DIGITS:
            return _UNSERIALIZABLE
        return float(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return _timestamp(value, " ", "")
        return _timestamp(value.astimezone(dt.timezone.utc).replace(tzinfo=None), "T", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    return _UNSERIALIZABLE


def _timestamp(value: dt.datetime, sep: str, zone: str) -> str:
    text = value.strftime(f"%Y-%m-%d{sep}%H:%M:%S.%f")
    if value.microsecond % 1000 == 0:
        text = text[:-3]  # whole milliseconds, as deltalake writes them
    return text + zone


# -- storage options -------------------------------------------------------------------------

# deltalake's (object_store's) S3 options, lower-cased without "aws_", and what s3fs calls them.
_S3_OPTIONS = {
    "access_key_id": "key",
    "secret_access_key": "secret",
    "session_token": "token",
    "token": "token",
    "endpoint_url": "endpoint_url",
    "endpoint": "endpoint_url",
}
_S3_REGION = ("region", "default_region")


def file_storage_options(
    table_uri: str, storage_options: Mapping[str, str] | None
) -> dict[str, Any]:
    """fsspec options for the data files of the table at ``table_uri``, from deltalake's
    ``storage_options``: on ``s3://`` (and ``s3a://``) the access key, secret, session token,
    endpoint and region (deltalake's ``AWS_*`` names); nothing elsewhere, where fsspec's
    backend finds credentials itself, as it does for anything not given here."""
    scheme = table_uri.split("://", 1)[0].lower() if "://" in table_uri else ""
    if scheme not in ("s3", "s3a") or not storage_options:
        return {}
    options: dict[str, Any] = {}
    for name, value in storage_options.items():
        bare = name.lower().removeprefix("aws_")
        if bare in _S3_OPTIONS:
            options[_S3_OPTIONS[bare]] = value
        elif bare in _S3_REGION:
            options["client_kwargs"] = {"region_name": value}
    return options

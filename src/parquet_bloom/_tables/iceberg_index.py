"""An Iceberg table's Bloom index: one Puffin file a snapshot, registered as that snapshot's
statistics file (``table.update_statistics().set_statistics``), so that Iceberg's tools list
it and expiring the snapshot takes it out of the table's metadata
(docs/index.md#iceberg).

- Files are known by their path as the manifests name it, their size
  (``file_size_in_bytes``) and their data sequence number: a path written again is another
  file.
- Columns are named by their name in the table's schema and indexed by field id: each file's
  column is its leaf with that Parquet ``field_id``, so a column renamed since a file was
  written is found under its old name. Each blob's ``fields`` holds the field id, its
  ``snapshot-id`` and ``sequence-number`` the snapshot the index was made for.
- Each build, refresh and compaction writes one whole Puffin file,
  ``<metadata>/bloom-index-<snapshot id>-<uuid>.puffin``, and registers it for the table's
  snapshot (the one built from; the current one for a refresh or compaction). A refresh
  merges the newest index with the files it lacks; nothing chains across snapshots, so a
  snapshot's expiry cannot break another's index.
- A lookup of a snapshot uses the index of that snapshot, else of its nearest ancestor that has
  one, else the newest one of the table; the index answers for the files it knows as the
  snapshot has them, every other live file is probed through its own filters: never wrong.

The statistics file's ``blob-metadata`` in the table's metadata is left empty: pyiceberg 0.12
admits only the two standard blob types there (``BlobMetadata.type`` is a Literal of
``apache-datasketches-theta-v1`` and ``deletion-vector-v1``), so listing ours would make the
table's metadata unreadable to it. The Puffin file's own footer lists every blob.
"""

from __future__ import annotations

import os
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from pyiceberg.expressions.literals import literal
from pyiceberg.manifest import ManifestContent
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.statistics import StatisticsFile
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    BooleanType,
    DateType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
)

from parquet_bloom._index import layout
from parquet_bloom._index.build import (
    FromData,
    IndexBuildReport,
    Segment,
    check_columns,
    check_from_data,
    target_fpp,
    write_segment,
)
from parquet_bloom._index.files import IndexedFile, same_file
from parquet_bloom._index.live import DatasetLookup, lookup_files
from parquet_bloom._index.lookup import BloomIndex, IndexSegment
from parquet_bloom._index.maintain import CompactReport, index_text_filters, merge_segments
from parquet_bloom._index.text import TextFilter
from parquet_bloom._index.text_build import check_text_filters
from parquet_bloom._index.text_lookup import TextLookup, lookup_text_files
from parquet_bloom._io import location
from parquet_bloom._reader import BloomFilterWarning
from parquet_bloom._tables.iceberg_io import local_or_url, storage_options_for
from parquet_bloom.errors import BloomFilterError, TableVersionError

__all__ = [
    "INDEX_PREFIX",
    "SegmentWriter",
    "TableIndex",
    "build_index",
    "build_index_with",
    "compact_index",
    "has_index",
    "index_columns",
    "index_statistics",
    "lookup",
    "lookup_text",
    "open_table_index",
    "refresh_index",
    "table_snapshot",
]

# The names of the index's Puffin files in the table's metadata directory: how a statistics
# file is told to be ours without opening it (its blob-metadata in the table's metadata is
# empty, see above).
INDEX_PREFIX = "bloom-index-"
_SUFFIX = ".puffin"


def _is_index(statistics: StatisticsFile) -> bool:
    name = statistics.statistics_path.rstrip("/").rsplit("/", 1)[-1]
    return name.startswith(INDEX_PREFIX) and name.endswith(_SUFFIX)


def _options(table: Table, storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(storage_options if storage_options is not None else storage_options_for(table))


def table_snapshot(table: Table, snapshot_id: int | None) -> Snapshot:
    """The snapshot ``snapshot_id`` of ``table`` (None: its current one); one it does not have
    is the caller's mistake (TableVersionError), never an empty scan."""
    if snapshot_id is None:
        found = table.current_snapshot()
        if found is None:
            raise ValueError(f"the Iceberg table {table.name()} has no snapshot: nothing to index")
        return found
    found = table.metadata.snapshot_by_id(snapshot_id)
    if found is None:
        current = table.metadata.current_snapshot_id
        raise TableVersionError(
            f"the Iceberg table {'.'.join(table.name())} has no snapshot {snapshot_id} "
            f"(its current one is {current})",
            table=".".join(table.name()),
            asked=snapshot_id,
            latest=current,
        )
    return found


def index_statistics(metadata: TableMetadata, snapshot: Snapshot) -> StatisticsFile | None:
    """The index a read of ``snapshot`` uses: the snapshot's own, else its nearest ancestor's,
    else the newest of the table (by its snapshot's sequence number); None when it has none."""
    ours = {s.snapshot_id: s for s in metadata.statistics if _is_index(s)}
    if not ours:
        return None
    current: Snapshot | None = snapshot
    while current is not None:
        if current.snapshot_id in ours:
            return ours[current.snapshot_id]
        parent = current.parent_snapshot_id
        current = None if parent is None else metadata.snapshot_by_id(parent)

    def age(s: StatisticsFile) -> int:
        found = metadata.snapshot_by_id(s.snapshot_id)
        return -1 if found is None or found.sequence_number is None else found.sequence_number

    return max(ours.values(), key=age)


def _field_ids(schema: Schema, columns: Sequence[str]) -> dict[str, int]:
    """Each column's field id, by its name in ``schema`` (as the scan names it: the full dotted
    name, case-sensitive); a name it lacks, or a nested type, is a ValueError."""
    out = {}
    for column in columns:
        try:
            field = schema.find_field(column, case_sensitive=True)
        except ValueError:
            raise ValueError(f"the table's schema has no column {column!r}") from None
        if not isinstance(field.field_type, PrimitiveType):
            raise ValueError(
                f"column {column!r} is a {field.field_type}: a Bloom index holds primitive columns"
            )
        out[column] = field.field_id
    return out


def snapshot_files(
    table: Table, snapshot: Snapshot, fields: Mapping[str, int], options: Mapping[str, Any]
) -> list[IndexedFile]:
    """The snapshot's live data files as the index knows them: the path the manifests give,
    where it is read, its size, its data sequence number, and ``fields`` (index column -> field
    id) to find its columns by."""
    ids = tuple(sorted(fields.items()))
    out = []
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DATA:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            data_file = entry.data_file
            source = local_or_url(data_file.file_path)
            filesystem, path = location.resolve(
                source, storage_options=options if location.is_url(source) else None
            )
            sequence = entry.sequence_number
            out.append(
                IndexedFile(
                    data_file.file_path,
                    path,
                    filesystem,
                    data_file.file_size_in_bytes,
                    sequence=-1 if sequence is None else sequence,
                    field_ids=ids,
                )
            )
    return sorted(out, key=lambda f: f.key)


def data_sequences(table: Table, snapshot: Snapshot) -> dict[str, int]:
    """Each live data file's data sequence number, by the path the manifests give."""
    out = {}
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DATA:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.sequence_number is not None:
                out[entry.data_file.file_path] = entry.sequence_number
    return out


def _check_slot(metadata: TableMetadata, snapshot_id: int) -> None:
    """Refuse to replace another tool's statistics file: a snapshot has one."""
    for s in metadata.statistics:
        if s.snapshot_id == snapshot_id and not _is_index(s):
            raise ValueError(
                f"snapshot {snapshot_id} already has a statistics file, {s.statistics_path}, "
                "that is not a Bloom index; a snapshot has one statistics file and registering "
                "the index would drop it: build the index for another snapshot"
            )


def _new_location(table: Table, snapshot_id: int) -> str:
    name = f"{INDEX_PREFIX}{snapshot_id}-{uuid.uuid4().hex}{_SUFFIX}"
    uri: str = table.location_provider().new_metadata_location(name)
    return uri


def _register(table: Table, snapshot_id: int, uri: str, segment: Segment) -> None:
    statistics = StatisticsFile.model_validate(
        {
            "snapshot-id": snapshot_id,
            "statistics-path": uri,
            "file-size-in-bytes": segment.size,
            # The spec's footer size: from the footer's magic to the end of the file.
            "file-footer-size-in-bytes": segment.size - segment.footer_offset,
            "blob-metadata": [],
        }
    )
    with table.update_statistics() as update:
        update.set_statistics(statistics)


def index_columns(idx: BloomIndex) -> dict[int, str]:
    """Field id -> the index's column, from its blobs' ``fields``."""
    out: dict[int, str] = {}
    for segment in idx.segments:
        for blob in segment.footer.blobs:
            column = blob.properties.get(layout.COLUMN)
            if column is not None and len(blob.fields) == 1:
                out.setdefault(blob.fields[0], column)
    return out


def has_index(table: Table, *, snapshot_id: int | None = None) -> bool:
    """Whether a read of the snapshot (default the current one) has an index to use: its own,
    an ancestor's, or another snapshot's (no file is read: the table's metadata says)."""
    snapshot = table.current_snapshot() if snapshot_id is None else None
    if snapshot_id is not None:
        snapshot = table.metadata.snapshot_by_id(snapshot_id)
    return snapshot is not None and index_statistics(table.metadata, snapshot) is not None


def build_index(
    table: Table,
    columns: Sequence[str],
    *,
    snapshot_id: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    from_data: FromData = None,
    fpp: float | None = None,
    text: Sequence[TextFilter] = (),
) -> IndexBuildReport:
    """Build the table's Bloom index of ``columns`` (names in the table's current schema;
    indexed by field id) from the filters in the data files of the snapshot (default the
    current one), write it as one Puffin file in the table's metadata directory and register
    it as that snapshot's statistics file. ``storage_options``: fsspec's, for the table's
    files (default :func:`parquet_bloom.iceberg.storage_options_for` the table).
    ``from_data`` and ``fpp``: as for :func:`parquet_bloom.index.build_index` (pyiceberg
    writes no filters: ``from_data="missing"`` builds them from the values for the index).
    ``text``: token and n-gram filters (:class:`~parquet_bloom.index.TextFilter`) of string
    columns, built from the values and found by field id as ``columns`` are
    (docs/index.md#token-and-n-gram-filters); ``columns`` may then be empty.

    Raises ValueError for a column the schema lacks or no file has, and when the snapshot
    already has a statistics file that is not an index (it would be replaced)."""
    texts = check_text_filters(text)
    check_from_data(from_data, fpp)
    write = partial(write_segment, from_data=from_data, fpp=fpp, text=texts)
    return build_index_with(
        table, columns, write, snapshot_id=snapshot_id, storage_options=storage_options, text=texts
    )


# Writes one Puffin file of an Iceberg table's index: (files, columns, target, storage options,
# what=, fields=, snapshot=) -> the report and the file written (write_segment's signature).
SegmentWriter = Callable[..., tuple[IndexBuildReport, Segment]]


def build_index_with(
    table: Table,
    columns: Sequence[str],
    write: SegmentWriter,
    *,
    snapshot_id: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    text: Sequence[TextFilter] = (),
) -> IndexBuildReport:
    """:func:`build_index` with the Puffin file written by ``write`` (a distributed build
    writes it from what its tasks send); ``text``: the token and n-gram filters ``write``
    builds, whose columns are found by field id with ``columns``."""
    wanted = check_columns(columns, allow_empty=bool(text))
    snapshot = table_snapshot(table, snapshot_id)
    fields = _field_ids(table.schema(), [*wanted, *(f.column for f in text)])
    _check_slot(table.metadata, snapshot.snapshot_id)
    options = _options(table, storage_options)
    files = snapshot_files(table, snapshot, fields, options)
    uri = _new_location(table, snapshot.snapshot_id)
    report, segment = write(
        files,
        wanted,
        local_or_url(uri),
        options,
        what=f"the Iceberg table {table.name()}",
        fields=fields,
        snapshot=(snapshot.snapshot_id, snapshot.sequence_number or 0),
    )
    _register(table, snapshot.snapshot_id, uri, segment)
    report.location = uri
    return report


def _open(table: Table, statistics: StatisticsFile, options: Mapping[str, Any]) -> BloomIndex:
    return BloomIndex(local_or_url(statistics.statistics_path), storage_options=options)


def _nearest(table: Table, snapshot: Snapshot) -> StatisticsFile:
    found = index_statistics(table.metadata, snapshot)
    if found is None:
        raise FileNotFoundError(
            f"no Bloom index for the Iceberg table {table.name()}: none of its statistics files "
            "is one (build one with parquet_bloom.iceberg.build_index)"
        )
    return found


def lookup(
    table: Table,
    column: str,
    values: Any,
    *,
    snapshot_id: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> DatasetLookup:
    """The row groups of the snapshot's data files (default the current snapshot) where
    ``column`` (its name in the table's current schema) may equal one of ``values``: the
    index's answer for the files it knows as the snapshot has them (path, size, data sequence
    number), each other live file's own filters for the rest, its column found by field id.
    ``files`` are keyed by the data file paths the manifests give."""
    snapshot = table_snapshot(table, snapshot_id)
    field_id = _field_ids(table.schema(), [column])[column]
    options = _options(table, storage_options)
    with _open(table, _nearest(table, snapshot), options) as idx:
        name = index_columns(idx).get(field_id)
        if name is None:
            raise ValueError(
                f"the Bloom index has no column {column!r} (field id {field_id}); it has "
                f"{', '.join(map(repr, idx.columns)) or 'none'}"
            )
        files = snapshot_files(table, snapshot, {name: field_id}, options)
        found = lookup_files(files, name, values, idx, opened_here=True)
    partitions = identity_partitions(table, snapshot, field_id)
    if partitions:
        wanted = _partition_values(table.schema().find_field(field_id).field_type, values)
        for path, value in partitions.items():
            if value is None:
                found.files.pop(path, None)  # every row's value is null: equal to none
            elif wanted is None or value in wanted:
                found.files[path] = found.files.get(path) or [-1]
            else:
                found.files.pop(path, None)
        found.files = dict(sorted(found.files.items()))
    found.column = column
    return found


def identity_partitions(table: Table, snapshot: Snapshot, field_id: int) -> dict[str, Any]:
    """The snapshot's live data files whose partition spec has an identity field of
    ``field_id``, by path, each with its partition value (None: null). Every row of such a file
    holds that value, whether or not the file stores the column: a file without it (one added
    from a Hive-style layout, the value in its path) is read with the partition's value, as
    pyiceberg's scan fills it; so a lookup decides these files by the value, not the index."""
    specs = table.metadata.specs()
    out: dict[str, Any] = {}
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DATA:
            continue
        spec = specs.get(manifest.partition_spec_id)
        if spec is None:
            continue
        positions = [
            i
            for i, f in enumerate(spec.fields)
            if f.source_id == field_id and isinstance(f.transform, IdentityTransform)
        ]
        if not positions:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            out[entry.data_file.file_path] = entry.data_file.partition[positions[0]]
    return out


# The types whose identity partition values equal pyiceberg's literal of a value exactly.
_EXACT_PARTITION_TYPES = (StringType, IntegerType, LongType, DateType, BooleanType)


def _partition_values(field_type: Any, values: Any) -> set[Any] | None:
    """``values`` as an identity partition holds them (pyiceberg's literal of the column's
    type); None when one cannot be converted, or the type's partition values may differ from
    it in representation (floats read back from Avro, decimals, times): the caller then keeps
    every such file."""
    if not isinstance(field_type, _EXACT_PARTITION_TYPES):
        return None
    if hasattr(values, "to_pylist"):
        values = values.to_pylist()
    elif isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        values = [values]
    out = set()
    try:
        for value in values:
            if value is None:
                continue
            converted = literal(value).to(field_type)
            if not hasattr(converted, "value") or converted.value is None:
                return None
            out.add(converted.value)
    except (TypeError, ValueError, AttributeError):
        return None
    return out


def lookup_text(
    table: Table,
    column: str,
    patterns: str | Sequence[str],
    *,
    function: str = "has_token",
    snapshot_id: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> TextLookup:
    """The row groups of the snapshot's data files (default the current snapshot) whose
    ``column`` (its name in the table's current schema) may hold a value matching
    ``function(value, pattern)`` for one of ``patterns``, through the index's token and n-gram
    filters of that column's field id (:func:`parquet_bloom.index.lookup_text` says the
    functions); live files the index does not know are candidates whole."""
    snapshot = table_snapshot(table, snapshot_id)
    field_id = _field_ids(table.schema(), [column])[column]
    options = _options(table, storage_options)
    with _open(table, _nearest(table, snapshot), options) as idx:
        name = index_columns(idx).get(field_id)
        if name is None or name not in idx.text_columns:
            raise ValueError(
                f"the Bloom index has no token or n-gram filter of column {column!r} (field id "
                f"{field_id}): build one with build_index(..., text=[TextFilter({column!r})])"
            )
        files = snapshot_files(table, snapshot, {name: field_id}, options)
        found = lookup_text_files(files, name, patterns, idx, function=function, opened_here=True)
    # A file of an identity partition of the column may not store it (its rows read the
    # partition's value): unless that value is null, it stays a candidate, whole, when the
    # index has nothing of it.
    for path, value in identity_partitions(table, snapshot, field_id).items():
        if value is None:
            found.files.pop(path, None)
        elif not found.files.get(path):
            found.files[path] = [-1]
    found.files = dict(sorted(found.files.items()))
    found.column = column
    return found


def refresh_index(
    table: Table,
    *,
    storage_options: Mapping[str, Any] | None = None,
    from_data: FromData = None,
    fpp: float | None = None,
) -> IndexBuildReport:
    """Register for the current snapshot an index of its live files: the newest index's row
    groups of the files it knows as they are, and the filters of the others, read now (one
    Puffin file, merged; ``from_data`` and ``fpp`` as for :func:`build_index`, the default
    ``fpp`` counting the index's row groups too). Nothing is written when the current
    snapshot's own index already knows every live file as it is (``files`` 0). The report
    counts the files read now (``files``) and the merged index (``row_groups``,
    ``columns``, ``index_bytes``)."""
    check_from_data(from_data, fpp)
    snapshot = table_snapshot(table, None)
    _check_slot(table.metadata, snapshot.snapshot_id)
    options = _options(table, storage_options)
    statistics = _nearest(table, snapshot)
    with _open(table, statistics, options) as idx:
        fields = {column: field_id for field_id, column in index_columns(idx).items()}
        files = snapshot_files(table, snapshot, fields, options)
        known = idx.file_rows()
        new = [f for f in files if f.key not in known or not same_file(known[f.key], f)]
        fresh = {f.key for f in new}
        kept = {f.key: known[f.key][0] for f in files if f.key in known and f.key not in fresh}
        if statistics.snapshot_id == snapshot.snapshot_id and not new and len(kept) == len(known):
            return IndexBuildReport(location=statistics.statistics_path)
        columns = list(idx.columns)
        if from_data is not None and fpp is None:
            # About one false candidate over the whole index (the new files' row groups are
            # not known before their footers are read: counted as one a file).
            indexed = max((idx.row_groups(c) for c in columns), default=0)
            fpp = target_fpp(indexed + len(new))
        uri = _new_location(table, snapshot.snapshot_id)
        merged = CompactReport(location=uri, segments_before=len(idx.segments))
        with tempfile.TemporaryDirectory(prefix="bloom-index-") as scratch:
            # The new files' filters, sliced into a segment on local disk, then merged.
            report, _ = write_segment(
                new,
                columns,
                os.path.join(scratch, "new.puffin"),
                None,
                require_columns=False,
                from_data=from_data,
                fpp=fpp,
                fields=fields,
                text=index_text_filters(idx),
            )
            with IndexSegment(os.path.join(scratch, "new.puffin")) as added:
                rows = {**known, **{p: (s, m, q) for p, s, m, q in added.file_rows()}}
                segment = merge_segments(
                    [*idx.segments, added],
                    [*([kept] * len(idx.segments)), added.files()],
                    rows,
                    columns,
                    local_or_url(uri),
                    options,
                    merged,
                    fields=fields,
                    snapshot=(snapshot.snapshot_id, snapshot.sequence_number or 0),
                )
    _register(table, snapshot.snapshot_id, uri, segment)
    report.location = uri
    report.index_bytes = segment.size
    report.row_groups = merged.row_groups
    report.columns = merged.columns
    return report


def compact_index(
    table: Table, *, storage_options: Mapping[str, Any] | None = None
) -> CompactReport:
    """Register for the current snapshot the newest index without the row groups of files no
    longer live as it knows them (files it lacks stay unindexed: :func:`refresh_index` adds
    them)."""
    snapshot = table_snapshot(table, None)
    _check_slot(table.metadata, snapshot.snapshot_id)
    options = _options(table, storage_options)
    statistics = _nearest(table, snapshot)
    uri = _new_location(table, snapshot.snapshot_id)
    with _open(table, statistics, options) as idx:
        fields = {column: field_id for field_id, column in index_columns(idx).items()}
        files = snapshot_files(table, snapshot, fields, options)
        known = idx.file_rows()
        kept = {
            f.key: known[f.key][0] for f in files if f.key in known and same_file(known[f.key], f)
        }
        report = CompactReport(location=uri, segments_before=len(idx.segments))
        segment = merge_segments(
            idx.segments,
            [kept] * len(idx.segments),
            known,
            list(idx.columns),
            local_or_url(uri),
            options,
            report,
            fields=fields,
            snapshot=(snapshot.snapshot_id, snapshot.sequence_number or 0),
        )
    _register(table, snapshot.snapshot_id, uri, segment)
    report.index_bytes = segment.size
    return report


# -- for prune ---------------------------------------------------------------------------------


@dataclass
class TableIndex:
    """A table's index, opened for a prune of one snapshot: ``index``, ``columns`` (field id
    -> the index's column), ``known`` (the files it knows: path -> size, modified, sequence),
    ``sequences`` (the snapshot's live data files' data sequence numbers, by path)."""

    index: BloomIndex
    columns: dict[int, str]
    known: dict[str, tuple[int, int, int]]
    sequences: dict[str, int]
    identity_sources: frozenset[int]

    def knows(self, path: str, size: int) -> bool:
        """Whether the index knows this live data file as it is."""
        known = self.known.get(path)
        file = IndexedFile(path, path, size=size, sequence=self.sequences.get(path, -1))
        return known is not None and path in self.sequences and same_file(known, file)


@contextmanager
def open_table_index(
    table: Table,
    snapshot: Snapshot | None,
    wanted: bool | None,
    storage_options: Mapping[str, Any],
) -> Iterator[TableIndex | None]:
    """The index a prune of ``snapshot`` uses, opened, when ``wanted`` (None: if the table's
    metadata lists one, and with a :class:`~parquet_bloom.BloomFilterWarning` and no index
    when its file cannot be read; True: FileNotFoundError without, its read errors raised)."""
    if wanted is False:
        yield None
        return
    if wanted not in (None, True):
        raise TypeError(f"index must be None, True or False, not {wanted!r}")
    if snapshot is None:
        if wanted:
            raise FileNotFoundError(f"no Bloom index: the table {table.name()} has no snapshot")
        yield None
        return
    statistics = index_statistics(table.metadata, snapshot)
    if statistics is None:
        if wanted:
            _nearest(table, snapshot)  # raises, saying so
        yield None
        return
    metadata = table.metadata
    identity = frozenset(
        f.source_id
        for spec in metadata.specs().values()
        for f in spec.fields
        if isinstance(f.transform, IdentityTransform)
    )
    try:
        idx = _open(table, statistics, storage_options)
        try:
            known = idx.file_rows()
        except BaseException:
            idx.close()
            raise
    except (FileNotFoundError, BloomFilterError) as err:
        if wanted:
            raise
        # An accelerator, not the table: without it every file is probed, as it would be.
        warnings.warn(
            f"the Bloom index {statistics.statistics_path} cannot be read ({err}); pruning "
            "without it",
            BloomFilterWarning,
            stacklevel=4,
        )
        yield None
        return
    with idx:
        yield TableIndex(idx, index_columns(idx), known, data_sequences(table, snapshot), identity)

"""An Iceberg table scan pruned twice: by pyiceberg's own planning (manifests, partitions,
column metrics), then by the Bloom filters of the files it left, row group by row group.

The filter each file is probed with is the one pyiceberg's scan applies to that file. For each
:class:`FileScanTask` the task's residual (what is left of the row filter once the file's
partition is known; nothing to probe when it is ``AlwaysTrue``) is bound to the table schema,
its columns translated to the file's own by field id (``translate_column_names``: a renamed
column is found under its old name), bound to the file's schema and turned into the Arrow
expression pyiceberg's ``ArrowScan`` filters the file's rows with (``expression_to_pyarrow``).
Its literals are typed by the file's column (an ``int`` column promoted to ``long`` compares
``int32`` values; a ``float`` literal is a float32), so probing that expression's ``==`` and
``isin`` (:func:`parquet_bloom._prune.dataset.prune_reader`, which encodes each literal as the
column stores it: days, microseconds, unscaled decimals, UUID bytes) keeps every row group
that holds a row the scan returns.

Reading only the row groups kept (:meth:`IcebergPruneResult.to_arrow`) goes through
pyiceberg's own ``ArrowScan``: a file with some row groups skipped is handed to it through a
FileIO whose input presents the file's bytes unchanged before its footer and, in place of the
footer, one listing only the row groups kept. Schema evolution, name mapping, projection and
the row filter stay pyiceberg's. Position deletes (and deletion vectors) name rows by their
position in the whole file, so for such a file the positions are moved to where the rows sit
among the row groups kept, and those in skipped row groups dropped, before pyiceberg applies
them: no deleted row comes back.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import bind, rewrite_not, translate_column_names
from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile
from pyiceberg.io.pyarrow import ArrowScan, expression_to_pyarrow, pyarrow_to_schema
from pyiceberg.manifest import FileFormat, ManifestContent
from pyiceberg.schema import Schema
from pyiceberg.table import (
    DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE,
    DataScan,
    FileScanTask,
    Table,
)
from pyiceberg.table.name_mapping import NameMapping
from pyiceberg.types import StringType
from pyiceberg.utils.config import Config

from parquet_bloom import _format as fmt
from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._io import location
from parquet_bloom._prune.compare import value_type
from parquet_bloom._prune.dataset import DEFAULT_MAX_WORKERS, file_schema, prune_reader
from parquet_bloom._prune.expression import (
    UNKNOWN,
    Equal,
    IsIn,
    Node,
    TextMatch,
    conjunction,
    members,
    text_matches,
    translate,
)
from parquet_bloom._prune.indexed import Decision, decide
from parquet_bloom._prune.report import PruneReport
from parquet_bloom._reader import BloomFilterReader, BloomFilterWarning
from parquet_bloom._tables.iceberg_crypto import (
    encrypted_files,
    is_encrypted,
    raise_wrong_key,
    raise_wrong_keys,
    refuse_rows,
)
from parquet_bloom._tables.iceberg_index import TableIndex, open_table_index, table_snapshot
from parquet_bloom._tables.iceberg_io import local_or_url, storage_options_for
from parquet_bloom._tables.scan import TablePruneReport
from parquet_bloom.errors import BloomFilterError

__all__ = ["IcebergPruneResult", "prune"]

# pyiceberg applies a file's position deletes in this ArrowScan method, given them keyed by
# file path; overriding it is how a row-group subset gets its deletes moved. Without it (a
# pyiceberg that reads differently), files with delete files are left whole to pyiceberg.
_DELETES_HOOK = "_record_batches_from_scan_tasks_and_deletes"
_CAN_MOVE_DELETES = callable(getattr(ArrowScan, _DELETES_HOOK, None))

# What pyiceberg raises when it cannot project or translate a file's schema; its own scan of
# that file raises the same, so the file is kept whole here and the scan reports the problem.
# NotImplementedError is pyiceberg's own, for a type or promotion it does not support: caught,
# not raised, here (no code of ours is unfinished).
_PROJECTION_ERRORS = (ValueError, TypeError, KeyError, NotImplementedError, pa.ArrowException)
# The default row filter: every row (an arrow_filter alone).
_EVERY_ROW = AlwaysTrue()


@dataclass(frozen=True)
class IcebergPruneResult:
    """What :func:`parquet_bloom.iceberg.prune` left.

    ``tasks``: the FileScanTasks of pyiceberg's plan whose files might hold a matching row, in
    the plan's order. ``row_groups``: for each of their files (``task.file.file_path``), the
    row groups to read, in file order, or None for all of them (files whose footer was not
    read: the residual is ``AlwaysTrue``, or the file is left to pyiceberg). ``report``: a
    :class:`~parquet_bloom._tables.scan.TablePruneReport`. ``scan``: pyiceberg's DataScan.
    :meth:`to_arrow` reads the result as ``scan.to_arrow()`` would, skipping what was pruned.
    """

    tasks: list[FileScanTask]
    row_groups: dict[str, list[int] | None]
    report: TablePruneReport
    scan: DataScan
    _subsets: Mapping[str, _Subset] = field(repr=False, default_factory=dict)
    arrow_filter: pc.Expression | None = None
    # Whether each file whose footer the prune read is encrypted; the keys and storage
    # options to tell it of the others (with keys only).
    _encrypted: Mapping[str, bool] = field(repr=False, default_factory=dict)
    _decryption: tuple[DecryptionKeys, Mapping[str, Any]] | None = field(repr=False, default=None)

    def to_arrow(self) -> pa.Table:
        """The rows ``table.scan(row_filter=...).to_arrow()`` returns (same schema, same rows
        in the same order), read from the row groups kept only, deletes applied; with an
        ``arrow_filter``, those of them it keeps (``.filter(arrow_filter)``).

        An encrypted data file among them is an
        :class:`~parquet_bloom.errors.UnsupportedFileError` naming it, raised before any file
        is read: pyiceberg reads files with pyarrow and passes it no decryption properties
        (read ``row_groups`` with pyarrow's own instead; docs/encryption.md#iceberg-tables).
        Known as such: the files whose footer the prune read, and, when the prune was given
        ``decryption=``, every other file (its footer read here); without it a file the prune
        did not read (no Bloom filter decides the filter) is left to pyiceberg, which fails or
        hangs on an encrypted one.
        """
        keys, options = self._decryption if self._decryption is not None else (None, {})
        refuse_rows(encrypted_files(self.tasks, self._encrypted, keys, options))
        scan = self.scan
        io: FileIO = _SubsetIO(scan.io, self._subsets) if self._subsets else scan.io
        arrow_scan = _SubsetScan(
            self._subsets,
            scan.table_metadata,
            io,
            scan.projection(),
            scan.row_filter,
            scan.case_sensitive,
            scan.limit,
        )
        table: pa.Table = arrow_scan.to_table(self.tasks)
        return table if self.arrow_filter is None else table.filter(self.arrow_filter)


def prune(
    table: Table,
    row_filter: str | BooleanExpression = _EVERY_ROW,
    *,
    snapshot_id: int | None = None,
    case_sensitive: bool = True,
    selected_fields: tuple[str, ...] = ("*",),
    max_workers: int = DEFAULT_MAX_WORKERS,
    tail_size: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    index: bool | None = None,
    arrow_filter: pc.Expression | None = None,
    decryption: DecryptionKeys | None = None,
) -> IcebergPruneResult:
    """Plan ``table.scan(row_filter=row_filter, ...)`` and drop the files and row groups whose
    Bloom filters rule out every row the filter keeps.

    ``row_filter``: a pyiceberg ``BooleanExpression`` or a string pyiceberg parses
    (``"id = 5 and region in ('eu', 'us')"``). pyiceberg plans first (manifests, partitions,
    column metrics); then each planned file's ``=`` and ``IN`` predicates (and AND/OR of them)
    are probed in its Bloom filters: the predicate is mapped to the file's column by Iceberg
    field id (a renamed column is found under its old name in old files), and each literal
    is encoded as the column stores it (days, microseconds, unscaled decimals, UUID bytes,
    a float literal as the float32 the scan compares). Anything else keeps its row group:
    ranges, ``!=``, ``NOT IN``, nulls, NaN, a file without filters or with filters that cannot
    be read (with a :class:`~parquet_bloom.BloomFilterWarning`). A file whose partition alone
    satisfies the filter (residual ``AlwaysTrue``) is kept without reading its footer.

    ``snapshot_id``, ``case_sensitive``, ``selected_fields`` as for ``table.scan``. Files are
    probed ``max_workers`` at once, each one request when its filters lie in the tail read of
    ``tail_size`` bytes (see :class:`~parquet_bloom.BloomFilterReader`), the file's size
    taken from its manifest entry (no size lookup). Files are read through fsspec with
    ``storage_options`` (default :func:`storage_options_for` the table).

    Returns an :class:`IcebergPruneResult`: ``.tasks`` (the FileScanTasks left, with their
    delete files), ``.row_groups[file_path]`` (the row groups to read, None for all),
    ``.report`` (:class:`TablePruneReport`) and ``.to_arrow()``, equal to
    ``table.scan(row_filter=row_filter, ...).to_arrow()``: read by pyiceberg's ArrowScan, row
    groups skipped, position deletes moved to the rows kept, so no deleted row comes back.

    ``index``: the table's Bloom index (a statistics file, see
    :func:`parquet_bloom.iceberg.build_index`; the snapshot's own, or its nearest ancestor's)
    decides the files it knows as the snapshot has them (path, size, data sequence number)
    without opening them: None uses it when the table's metadata lists one, True requires it
    (FileNotFoundError without), False never. Files it does not know are probed as without
    it; ``report.bloom.index_files``, ``index_reads`` and ``index_bytes_read`` say what it
    decided and cost. The index's token and n-gram filters (``build_index(..., text=...)``)
    decide string matches: the ``starts_with`` of ``row_filter``, and those of
    ``arrow_filter``.

    ``arrow_filter``: a pyarrow expression on the table's columns (current names, among the
    ``selected_fields``), ANDed with ``row_filter``: what pyiceberg's filters cannot say, such
    as ``pc.match_substring``, ``ends_with``, ``match_like`` and
    :func:`parquet_bloom.index.has_token`. pyiceberg plans and reads by ``row_filter`` alone;
    :meth:`~IcebergPruneResult.to_arrow` then keeps the rows ``arrow_filter`` keeps (its
    rows equal ``table.scan(row_filter=...).to_arrow().filter(arrow_filter)``), and the index's
    text filters drop the row groups whose values cannot match it (docs/tables.md#iceberg).
    ``row_filter`` defaults to every row (an ``arrow_filter`` alone).

    ``decryption``: the keys of encrypted data files (:class:`parquet_bloom.DecryptionKeys`,
    docs/encryption.md#iceberg-tables), their filters read with them. A column whose key is
    missing (not given, or not unwrapped by the KMS) keeps its row groups, counted in
    ``report.bloom.filters_unreadable`` with a :class:`~parquet_bloom.BloomFilterWarning`; a
    key given that does not decrypt (or a plaintext file the keys do not allow) is a located
    :class:`~parquet_bloom.errors.DecryptionError`. ``to_arrow()`` cannot read encrypted
    files (pyiceberg gives pyarrow no decryption properties): it refuses them, naming one.
    """
    if decryption is not None and not isinstance(decryption, DecryptionKeys):
        raise TypeError(f"decryption must be a DecryptionKeys, not {type(decryption).__name__}")
    if not isinstance(max_workers, int) or max_workers < 1:
        raise ValueError(f"max_workers must be a positive integer, not {max_workers!r}")
    if snapshot_id is not None:
        table_snapshot(table, snapshot_id)  # pyiceberg scans an unknown snapshot as empty
    scan = table.scan(
        row_filter=row_filter,
        selected_fields=selected_fields,
        case_sensitive=case_sensitive,
        snapshot_id=snapshot_id,
    )
    tasks = list(scan.plan_files())
    table_files, table_bytes = _snapshot_totals(scan)
    metadata = scan.table_metadata
    schema = metadata.schema()
    downcast = Config().get_bool(DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE)
    probing = _Probing(
        schema=schema,
        case_sensitive=case_sensitive,
        name_mapping=metadata.name_mapping(),
        format_version=metadata.format_version,
        # As pyiceberg's _task_to_record_batches reads a file's nanosecond timestamps.
        downcast=downcast if downcast is not None else metadata.format_version <= 2,
        storage_options=dict(
            storage_options if storage_options is not None else storage_options_for(table)
        ),
        tail_size=tail_size,
        decryption=decryption,
    )
    extra = _arrow_tree(arrow_filter, selected_fields)
    # Equality members are decided by the index or the files' filters, string matches by the
    # index's text filters alone: without either, nothing to probe.
    whole = conjunction([_tree(schema, scan.row_filter, case_sensitive), extra])
    decidable = any(members(whole)) or any(text_matches(whole))
    decided: dict[int, _FileOutcome] = {}
    narrowed: dict[int, frozenset[int]] = {}
    index_cost = PruneReport()
    if decidable and tasks:
        with open_table_index(table, scan.snapshot(), index, probing.storage_options) as opened:
            if opened is not None:
                decided, narrowed, index_cost = _by_index(tasks, opened, probing, extra)
        probed = [(i, t) for i, t in enumerate(tasks) if i not in decided]
        with ThreadPoolExecutor(max_workers, thread_name_prefix="iceberg-prune") as pool:
            done = dict(
                zip(
                    [i for i, _ in probed],
                    pool.map(lambda it: _probe_task(it[1], probing, narrowed.get(it[0])), probed),
                    strict=True,
                )
            )
        outcomes = [decided[i] if i in decided else done[i] for i in range(len(tasks))]
    else:  # nothing a Bloom filter decides: read no footer at all
        with open_table_index(table, scan.snapshot(), index, probing.storage_options):
            pass  # index=True still requires one
        outcomes = [_FileOutcome(task, None, PruneReport(files=1)) for task in tasks]
    for outcome in outcomes:
        if outcome.problem is not None:
            warnings.warn(outcome.problem, BloomFilterWarning, stacklevel=3)
    kept = [o for o in outcomes if o.kept is None or o.kept]
    report = TablePruneReport(
        table_files=table_files,
        table_bytes=table_bytes,
        files_after_table=len(tasks),
        bytes_after_table=sum(t.file.file_size_in_bytes for t in tasks),
        bloom=sum((o.report for o in outcomes), index_cost),
        files_left_to_table=sum(o.left_to_table for o in outcomes),
    )
    return IcebergPruneResult(
        tasks=[o.task for o in kept],
        row_groups={o.task.file.file_path: o.kept for o in kept},
        report=report,
        scan=scan,
        _subsets={o.task.file.file_path: o.subset for o in kept if o.subset is not None},
        arrow_filter=arrow_filter,
        _encrypted={o.task.file.file_path: o.encrypted for o in kept if o.encrypted is not None},
        _decryption=None if decryption is None else (decryption, probing.storage_options),
    )


def _arrow_tree(arrow_filter: pc.Expression | None, selected: tuple[str, ...]) -> Node:
    """What the index may decide of ``arrow_filter``; a mistake is a TypeError or ValueError."""
    if arrow_filter is None:
        return UNKNOWN
    if not isinstance(arrow_filter, pc.Expression):
        raise TypeError(
            f"arrow_filter must be a pyarrow.compute.Expression, not {type(arrow_filter).__name__}"
        )
    tree = translate(arrow_filter)
    if "*" not in selected:
        named = {m.column[0] for m in (*members(tree), *text_matches(tree))}
        missing = sorted(named - set(selected))
        if missing:
            raise ValueError(
                f"arrow_filter reads {', '.join(map(repr, missing))}, not among the "
                "selected_fields: select them too"
            )
    return tree


def _by_index(
    tasks: list[FileScanTask], opened: TableIndex, probing: _Probing, extra: Node
) -> tuple[dict[int, _FileOutcome], dict[int, frozenset[int]], PruneReport]:
    """The tasks (by place) whose files the index knows as they are: those it decided alone
    (every member of the filter answered by its lookups), and those it narrowed that their
    own filters then decide (the row groups it left them); and what it cost (all its reads:
    the footer, the file list, the lookups)."""
    idx = opened.index
    schema = probing.schema

    def probe(member: Equal | IsIn) -> tuple[str, Any] | None:
        # The tree is the residual on the table's schema: its names are the current ones.
        if len(member.column) != 1:
            return None  # a nested field: its path in the files may have other names
        try:
            found = schema.find_field(member.column[0], case_sensitive=True)
        except ValueError:
            return None
        column = opened.columns.get(found.field_id)
        if column is None or found.field_id in opened.identity_sources:
            return None  # not indexed; or a partition's value, which a file may not hold
        stored = idx.arrow_schema(column)
        values = member.values
        if stored is None or value_type(stored.field(0).type) != value_type(values.type):
            return None  # the files store another type than the scan compares (promoted)
        return column, values

    def text(member: TextMatch) -> str | None:
        # A string match of a top-level string column the index has token or n-gram filters of
        # by its field id (a column dropped and added again is another id: not those).
        if len(member.column) != 1:
            return None
        try:
            found = schema.find_field(member.column[0], case_sensitive=True)
        except ValueError:
            return None
        column = opened.columns.get(found.field_id)
        if (
            column is None
            or found.field_id in opened.identity_sources
            or not isinstance(found.field_type, StringType)
            or column not in idx.text_columns
        ):
            return None
        return column

    decisions: dict[str, tuple[Decision, bool]] = {}
    decided: dict[int, _FileOutcome] = {}
    narrowed: dict[int, frozenset[int]] = {}
    for i, task in enumerate(tasks):
        data_file = task.file
        path: str = data_file.file_path
        if (
            data_file.file_format != FileFormat.PARQUET
            or (task.delete_files and not _CAN_MOVE_DELETES)
            or (task.residual == AlwaysTrue() and not any(text_matches(extra)))
            or not opened.knows(path, data_file.file_size_in_bytes)
        ):
            continue
        key = repr(task.residual)
        if key not in decisions:
            tree = conjunction([_tree(schema, task.residual, probing.case_sensitive), extra])
            decisions[key] = decide(tree, probe, idx, text)
        decision, complete = decisions[key]
        if decision is None and not complete:
            continue  # the index decided nothing of this filter: the file's own filters
        report = PruneReport(files=1, index_files=1)
        if decision is not None and path not in decision:
            decided[i] = _FileOutcome(task, [], replace(report, files_skipped=1))
            continue
        allowed = None if decision is None else decision[path]
        if not complete:
            if allowed is not None:
                narrowed[i] = allowed
            continue
        if allowed is None:
            decided[i] = _FileOutcome(task, None, report)
            continue
        kept = sorted(allowed)
        source = local_or_url(path)
        options = probing.storage_options if location.is_url(source) else None
        subset = _Subset(tuple(kept), source=(source, options, data_file.file_size_in_bytes))
        decided[i] = _FileOutcome(task, kept, report, subset=subset)
    cost = PruneReport(
        reads=idx.reads,
        requests=idx.reads,
        bytes_read=idx.bytes_read,
        index_reads=idx.reads,
        index_bytes_read=idx.bytes_read,
    )
    return decided, narrowed, cost


def _snapshot_totals(scan: DataScan) -> tuple[int, int]:
    """The data files of the snapshot scanned and their bytes: from the snapshot summary when
    it says (``total-data-files``, and ``total-files-size`` when there are no delete files to
    count in it), else from its data manifests."""
    snapshot = scan.snapshot()
    if snapshot is None:
        return 0, 0
    totals = snapshot.summary.additional_properties if snapshot.summary is not None else {}
    files, size = totals.get("total-data-files"), totals.get("total-files-size")
    if files is not None and size is not None and totals.get("total-delete-files") == "0":
        return int(files), int(size)
    count = total = 0
    for manifest in snapshot.manifests(scan.io):
        if manifest.content != ManifestContent.DATA:
            continue
        for entry in manifest.fetch_manifest_entry(scan.io, discard_deleted=True):
            count += 1
            total += entry.data_file.file_size_in_bytes
    return count, total


def _tree(schema: Schema, expression: BooleanExpression, case_sensitive: bool) -> Node:
    """What Bloom filters can decide of ``expression`` on ``schema``, as pyiceberg's Arrow
    conversion of it reads."""
    bound = bind(schema, rewrite_not(expression), case_sensitive)
    return translate(expression_to_pyarrow(bound, schema))


@dataclass(frozen=True)
class _Probing:
    """What probing each file needs, the same for all of them."""

    schema: Schema
    case_sensitive: bool
    name_mapping: NameMapping | None
    format_version: Any
    downcast: bool
    storage_options: dict[str, Any]
    tail_size: int | None
    decryption: DecryptionKeys | None = None


@dataclass(frozen=True)
class _FileOutcome:
    task: FileScanTask
    kept: list[int] | None  # None: every row group, the footer unread
    report: PruneReport
    problem: str | None = None
    subset: _Subset | None = None
    left_to_table: bool = False
    encrypted: bool | None = None  # None: unknown (the footer unread, or it does not decode)


def _probe_task(
    task: FileScanTask, probing: _Probing, allowed: frozenset[int] | None = None
) -> _FileOutcome:
    """One task's file probed through its own filters; ``allowed``: the row groups the index
    left it (the filter has members the index could not decide), the most it keeps."""
    data_file = task.file
    path: str = data_file.file_path
    if data_file.file_format != FileFormat.PARQUET or (task.delete_files and not _CAN_MOVE_DELETES):
        return _FileOutcome(task, None, PruneReport(files=1), left_to_table=True)
    if task.residual == AlwaysTrue():
        # The file's partition alone satisfies the filter: every row matches, nothing to probe.
        return _FileOutcome(task, None, PruneReport(files=1))
    source = local_or_url(path)
    try:
        reader = BloomFilterReader(
            source,
            storage_options=probing.storage_options if location.is_url(source) else None,
            size=data_file.file_size_in_bytes,
            tail_size=probing.tail_size,
            decryption=probing.decryption,
        )
    except BloomFilterError as err:
        raise_wrong_key(err, probing.decryption, path)
        return _FileOutcome(
            task, None, PruneReport(files=1), f"{err}; keeping all row groups of the file"
        )
    with reader:
        problem = None
        try:
            tree = _file_tree(reader, task.residual, probing)
        except _PROJECTION_ERRORS as err:
            tree = UNKNOWN
            problem = f"{path}: the filter could not be translated to the file's schema ({err})"
        pruned = prune_reader(reader, tree, path)
        raise_wrong_keys(reader, probing.decryption, path)
        kept, report = pruned.kept, pruned.report
        if allowed is not None:
            kept, report = _narrowed(reader, kept, report, allowed)
        num_row_groups = reader.num_row_groups
        encrypted = is_encrypted(reader)
        subset = None
        if 0 < len(kept) < num_row_groups and encrypted is False:  # (encrypted: never read)
            subset = _Subset(tuple(kept), (reader.footer_start, bytes(reader.footer_bytes)))
    return _FileOutcome(task, kept, report, problem or pruned.problem, subset, encrypted=encrypted)


def _narrowed(
    reader: BloomFilterReader, kept: list[int], report: PruneReport, allowed: frozenset[int]
) -> tuple[list[int], PruneReport]:
    """The row groups both the file's filters and the index keep, and the report saying so."""
    kept = [rg for rg in kept if rg in allowed]
    sizes = [
        sum(c.total_compressed_size for c in reader.row_group(rg))
        for rg in range(reader.num_row_groups)
    ]
    return kept, replace(
        report,
        files_skipped=int(not kept),
        row_groups_skipped=reader.num_row_groups - len(kept),
        compressed_bytes_skipped=sum(sizes) - sum(sizes[rg] for rg in kept),
        index_files=1,
    )


def _file_tree(reader: BloomFilterReader, residual: BooleanExpression, probing: _Probing) -> Node:
    """The filter pyiceberg's ArrowScan applies to this file, as a tree: the residual bound to
    the table schema, its columns renamed to the file's by field id, bound to the file schema
    (pyiceberg's reading of the file's Arrow schema) and converted to Arrow."""
    iceberg_schema = pyarrow_to_schema(
        file_schema(reader),
        probing.name_mapping,
        downcast_ns_timestamp_to_us=probing.downcast,
        format_version=probing.format_version,
    )
    bound = bind(probing.schema, rewrite_not(residual), probing.case_sensitive)
    renamed = translate_column_names(bound, iceberg_schema, probing.case_sensitive)
    return _tree(iceberg_schema, renamed, probing.case_sensitive)


# -- reading the row groups kept ---------------------------------------------------------------


@dataclass(frozen=True)
class _Subset:
    """A data file's row groups kept: the file's bytes before its footer, then a footer that
    lists only them (row groups keep their offsets, so nothing else moves). The file's footer
    is given (``given``: where it starts, its bytes) when the prune read it, else read from
    ``source`` (path, storage options, size) when the scan first needs it: a file the index
    decided was not opened by the prune."""

    kept: tuple[int, ...]
    given: tuple[int, bytes] | None = None
    source: tuple[str, Mapping[str, Any] | None, int] | None = None

    @cached_property
    def _footer(self) -> tuple[int, bytes]:
        if self.given is not None:
            return self.given
        assert self.source is not None
        path, options, size = self.source
        with BloomFilterReader(path, storage_options=options, size=size) as reader:
            return reader.footer_start, bytes(reader.footer_bytes)

    @property
    def footer_start(self) -> int:
        return self._footer[0]

    @property
    def footer(self) -> bytes:
        return self._footer[1]

    @cached_property
    def _layout(self) -> tuple[bytes, np.ndarray, np.ndarray]:
        """The new footer with its trailer; each row group's first row and row count."""
        metadata = fmt.decode_file_metadata(self.footer, full=True)
        groups = list(metadata.row_groups)
        rows = np.array([group.num_rows for group in groups], dtype=np.int64)
        metadata.row_groups = [groups[i] for i in self.kept]
        metadata.num_rows = int(rows[list(self.kept)].sum())
        encoded = fmt.encode_file_metadata(metadata)
        tail = encoded + len(encoded).to_bytes(4, "little") + fmt.MAGIC
        starts = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)
        return tail, starts, rows

    @property
    def tail(self) -> bytes:
        return self._layout[0]

    @property
    def size(self) -> int:
        return self.footer_start + len(self.tail)

    def move_deletes(self, deletes: list[pa.ChunkedArray]) -> list[pa.ChunkedArray]:
        """Deleted row positions of the whole file as positions among the rows of the row
        groups kept; those in skipped row groups are dropped."""
        _, starts, rows = self._layout
        positions = np.concatenate(
            [np.asarray(chunk, dtype=np.int64) for array in deletes for chunk in array.chunks]
            or [np.empty(0, np.int64)]
        )
        positions = positions[(positions >= 0) & (positions < rows.sum())]
        group = np.searchsorted(starts, positions, side="right") - 1
        kept = np.array(self.kept, dtype=np.int64)
        # Where each kept row group's rows start among the rows kept; -1 for skipped groups.
        new_starts = np.full(len(starts), -1, dtype=np.int64)
        new_starts[kept] = np.concatenate([[0], np.cumsum(rows[kept])[:-1]])
        inside = new_starts[group] >= 0
        moved = positions[inside] - starts[group[inside]] + new_starts[group[inside]]
        return [pa.chunked_array([pa.array(moved, pa.int64())])] if moved.size else []


class _SubsetStream:
    """A file's bytes up to its footer, then the subset's footer: what pyarrow reads a file
    through when only some of its row groups are to be read."""

    def __init__(self, opener: InputFile, subset: _Subset) -> None:
        self._opener = opener
        self._inner: InputStream | None = None
        self._subset = subset
        self._position = 0
        self.closed = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self._subset.size}
        self._position = max(0, base[whence] + offset)
        return self._position

    def read(self, size: int | None = -1) -> bytes:
        end = self._subset.size
        if size is not None and size >= 0:
            end = min(end, self._position + size)
        cut = self._subset.footer_start
        parts = []
        if self._position < min(end, cut):
            parts.append(self._read_inner(self._position, min(end, cut) - self._position))
        if end > cut:
            parts.append(self._subset.tail[max(self._position, cut) - cut : end - cut])
        self._position = max(self._position, end)
        return b"".join(parts)

    def _read_inner(self, offset: int, length: int) -> bytes:
        if self._inner is None:
            self._inner = self._opener.open(seekable=True)
        self._inner.seek(offset)
        parts, got = [], 0
        while got < length:
            part = self._inner.read(length - got)
            if not part:
                raise OSError(
                    f"{self._opener.location}: ends at {offset + got}, before the "
                    f"{offset + length} bytes its footer describes"
                )
            parts.append(part)
            got += len(part)
        return b"".join(parts)

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()
        self.closed = True

    def __enter__(self) -> _SubsetStream:
        return self

    def __exit__(
        self,
        exctype: type[BaseException] | None,
        excinst: BaseException | None,
        exctb: TracebackType | None,
    ) -> None:
        self.close()


class _SubsetInputFile(InputFile):
    def __init__(self, inner: InputFile, subset: _Subset) -> None:
        super().__init__(inner.location)
        self._inner = inner
        self._subset = subset

    def __len__(self) -> int:
        return self._subset.size

    def exists(self) -> bool:
        return bool(self._inner.exists())

    def open(self, seekable: bool = True) -> InputStream:
        return _SubsetStream(self._inner, self._subset)


class _SubsetIO(FileIO):
    """The table's FileIO, but the data files with row groups skipped read as subsets."""

    def __init__(self, inner: FileIO, subsets: Mapping[str, _Subset]) -> None:
        super().__init__(inner.properties)
        self._inner = inner
        self._subsets = subsets

    def new_input(self, location: str) -> InputFile:
        found = self._inner.new_input(location)
        subset = self._subsets.get(location)
        return found if subset is None else _SubsetInputFile(found, subset)

    def new_output(self, location: str) -> OutputFile:
        return self._inner.new_output(location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        self._inner.delete(location)


class _SubsetScan(ArrowScan):
    """pyiceberg's ArrowScan, with the position deletes of subset files moved."""

    def __init__(self, subsets: Mapping[str, _Subset], *args: Any) -> None:
        super().__init__(*args)
        self._subsets = subsets

    def _record_batches_from_scan_tasks_and_deletes(
        self, tasks: Iterable[FileScanTask], deletes_per_file: dict[str, list[pa.ChunkedArray]]
    ) -> Iterator[pa.RecordBatch]:
        # Called per task by to_record_batches: only these tasks' deletes are looked up.
        tasks = list(tasks)
        moved = {}
        for task in tasks:
            path = task.file.file_path
            if path not in deletes_per_file:
                continue
            subset = self._subsets.get(path)
            deletes = deletes_per_file[path]
            moved[path] = deletes if subset is None else subset.move_deletes(deletes)
        batches: Iterator[pa.RecordBatch] = super()._record_batches_from_scan_tasks_and_deletes(
            tasks, moved
        )
        return batches

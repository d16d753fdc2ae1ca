"""Add, resize or remove the Bloom filters of an Iceberg table's data files, in one snapshot.

The three stages of :mod:`parquet_bloom._tables.jobs`:

1. :func:`plan_rewrite` reads the current snapshot's manifests once: every live Parquet data
   file becomes a :class:`~parquet_bloom._tables.jobs.RewriteJob` (a new name beside it), or
   is refused with the reason: delete files apply to it (the new file would get a new
   sequence number and a new path, and the deletes would stop applying: deleted rows would
   come back), it was written under an older partition spec (pyiceberg records added files
   under the current spec), it is not Parquet, or the table is format v3 (pyiceberg 0.12
   writes no v3 manifests, and a new file would give its rows new row ids). Columns are named
   as the table names them and resolved by field id in each file.
2. :func:`~parquet_bloom._tables.jobs.run_job` rewrites each file, anywhere.
3. :func:`commit_rewrite` checks that every new file is there, with its size and its rows, and
   swaps old for new in one OVERWRITE snapshot: pyiceberg 0.12 has no metadata-only replace
   (docs/tables.md#iceberg), so ``delete_data_file(old)`` and ``append_data_file(new)``, the
   new DataFile a copy of the old one's fields (partition, metrics, bounds, sort order, key
   metadata) with the new path, size and split offsets (row groups may have moved). Each
   attempt refreshes the table and, if it moved on from what was last checked (its snapshot,
   its default partition spec), drops the jobs whose old file is no longer live and clean in
   it (their new files deleted, reported ``to_retry``), then commits on exactly that
   metadata: pyiceberg asserts the branch still points at its snapshot
   (AssertRefSnapshotId) and, if it does not, rebuilds the snapshot on the new one only when
   every file deleted is still live there without new deletes (else ValidationException). A
   commit refused (CommitFailedException or ValidationException) is tried again.

The old files stay, as every Iceberg overwrite leaves them, until snapshot expiry removes
them (and orphan-file cleanup, for new files left by a failure that could not be deleted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.manifest import (
    DATA_FILE_TYPE,
    INITIAL_SEQUENCE_NUMBER,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
)
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.delete_file_index import DeleteFileIndex
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import TableVersion
from pyiceberg.types import ListType, MapType, NestedField, StructType

from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._io import location
from parquet_bloom._reader import BloomFilterReader
from parquet_bloom._rewrite.build import Ndv
from parquet_bloom._tables.iceberg_io import local_or_url, storage_options_for
from parquet_bloom._tables.jobs import (
    DEFAULT_MAX_WORKERS,
    FilterOptions,
    JobOutcome,
    RewriteJob,
    TableRewriteReport,
    delete_files,
    new_file_path,
    refuse_unfiltered,
    run_jobs,
    unfiltered,
)
from parquet_bloom.errors import BloomFilterError

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "SNAPSHOT_PROPERTY",
    "IcebergRewritePlan",
    "commit_rewrite",
    "leaf_ids",
    "plan_rewrite",
    "rewrite_bloom_filters",
    "table_name",
]

# Commits tried: the first, then one on the refreshed table after each concurrent commit.
# (pyiceberg itself retries a commit that lost a race, commit.retry.num-retries times, when
# its validation allows; these are the attempts after it gave up.)
DEFAULT_MAX_ATTEMPTS = 3
# The snapshot summary property that marks a rewrite's snapshot; its value says what was done,
# columns by field id ("build 1,2; remove 5", "build existing", "remove all").
SNAPSHOT_PROPERTY = "parquet-bloom.rewrite"
# The first format version whose tables this commit cannot carry: pyiceberg 0.12 writes no v3
# manifests, and v3 row lineage gives the rows of a new file new row ids.
_ROW_LINEAGE_VERSION = 3


@dataclass(frozen=True)
class IcebergRewritePlan:
    """What :func:`plan_rewrite` decided, picklable (no table handle in it).

    ``table``: the table's name; ``snapshot_id``: the snapshot whose files were planned (None
    for a table without one); ``options``: the filters to write, columns by field id;
    ``jobs``: one per file to rewrite (``key`` the file's URI as the manifest has it);
    ``refused``: ``(uri, reason)`` per file left as it is; ``data_files``: the DataFile of
    each job's file, to swap at commit.
    """

    table: str
    snapshot_id: int | None
    options: FilterOptions
    jobs: tuple[RewriteJob, ...]
    refused: tuple[tuple[str, str], ...]
    data_files: Mapping[str, DataFile] = field(repr=False)


def plan_rewrite(
    table: Table,
    *,
    columns: Sequence[str] | Literal["existing"] | None = None,
    fpp: float = 0.01,
    ndv: Ndv = "exact",
    num_bytes: int | None = None,
    flavor: str | None = None,
    remove: Sequence[str] | Literal["all"] = (),
    files: Iterable[str] | None = None,
    case_sensitive: bool = True,
    existing_only: bool = False,
) -> IcebergRewritePlan:
    """Which data files of the current snapshot to rewrite, and which not, and why.

    ``columns``: the table's column names to build filters for (a struct, list or map names
    all its primitive columns), resolved to field ids and found in each file by field id;
    ``"existing"`` rebuilds the filters each file has; None builds none. ``remove``: column
    names whose filters go, or ``"all"``. ``fpp``, ``ndv``, ``num_bytes``, ``flavor`` size
    each filter as :func:`parquet_bloom.rewrite_bloom_filters` does. ``files``: only these
    data file URIs (as the manifests name them); one that is not a live data file is refused.
    ``existing_only=True`` (a resize of ``columns``): each file's chunks of them that have a
    filter are rebuilt, none is added; a file with no filter of them is left as it is.

    Refused (never rewritten, listed in ``.refused`` with the reason): files that delete files
    apply to (the new file's new path and sequence number would stop them applying, bringing
    deleted rows back), files written under an older partition spec, files that are not
    Parquet, and every file of a format v3 table. Reads every manifest of the current
    snapshot once. The plan is picklable and holds no table handle.
    """
    schema = table.schema()
    options = FilterOptions(
        columns=columns if columns is None or columns == "existing" else None,
        fpp=fpp,
        ndv=ndv,
        num_bytes=num_bytes,
        flavor=flavor,
        remove=remove if remove == "all" else (),
        column_ids=leaf_ids(schema, columns, case_sensitive),
        remove_ids=leaf_ids(schema, remove, case_sensitive),
        existing_only=existing_only,
    )
    name = table_name(table)
    snapshot = table.current_snapshot()
    if snapshot is None:
        return IcebergRewritePlan(name, None, options, (), (), {})
    wanted = None if files is None else list(dict.fromkeys(files))
    live, reasons = _live_files(table, None if wanted is None else set(wanted))
    refused = dict(reasons)
    if wanted is not None:
        for uri in wanted:
            if uri not in live:
                refused[uri] = f"not a live data file of snapshot {snapshot.snapshot_id}"
    jobs = []
    for uri in live if wanted is None else [u for u in wanted if u in live]:
        new = new_file_path(uri)
        jobs.append(RewriteJob(uri, new, local_or_url(uri), local_or_url(new)))
    return IcebergRewritePlan(
        table=name,
        snapshot_id=snapshot.snapshot_id,
        options=options,
        jobs=tuple(jobs),
        refused=tuple(refused.items()),
        data_files={job.key: live[job.key] for job in jobs},
    )


def table_name(table: Table) -> str:
    try:
        return ".".join(table.name())
    except (AttributeError, TypeError):  # a table without a catalog name
        return str(table.metadata.location)


def leaf_ids(
    schema: Schema, names: Sequence[str] | str | None, case_sensitive: bool
) -> tuple[int, ...]:
    """The field ids of the primitive columns under each named column (itself, for a
    primitive one), in schema order; a name the schema lacks is a ValueError."""
    if names is None or isinstance(names, str):
        return ()
    ids: dict[int, None] = {}
    for name in names:
        try:
            found = schema.find_field(name, case_sensitive)
        except ValueError:
            raise ValueError(
                f"no column {name!r} in the table's schema; its columns are "
                f"{', '.join(repr(n) for n in schema.column_names)}"
            ) from None
        ids.update(dict.fromkeys(_primitive_ids(found)))
    return tuple(ids)


def _primitive_ids(column: NestedField) -> Iterable[int]:
    kind = column.field_type
    if isinstance(kind, StructType):
        children: list[NestedField] = list(kind.fields)
    elif isinstance(kind, ListType):
        children = [kind.element_field]
    elif isinstance(kind, MapType):
        children = [kind.key_field, kind.value_field]
    else:
        return [column.field_id]
    return [i for child in children for i in _primitive_ids(child)]


def _live_files(
    table: Table, wanted: set[str] | None
) -> tuple[dict[str, DataFile], dict[str, str]]:
    """The current snapshot's data files that a rewrite may swap (by URI, among ``wanted``
    if given), and the reason each other one may not."""
    metadata = table.metadata
    snapshot = table.current_snapshot()
    if snapshot is None:
        return {}, {}
    manifests = snapshot.manifests(table.io)
    with ThreadPoolExecutor(DEFAULT_MAX_WORKERS, thread_name_prefix="iceberg-manifests") as pool:
        entries: list[list[ManifestEntry]] = list(
            pool.map(lambda m: m.fetch_manifest_entry(table.io, discard_deleted=True), manifests)
        )
    data: list[ManifestEntry] = []
    positions = DeleteFileIndex()
    equality: list[ManifestEntry] = []
    for manifest, found in zip(manifests, entries, strict=True):
        for entry in found:
            content = entry.data_file.content
            if manifest.content == ManifestContent.DATA and content == DataFileContent.DATA:
                if wanted is None or entry.data_file.file_path in wanted:
                    data.append(entry)
            elif content == DataFileContent.POSITION_DELETES:
                positions.add_delete_file(entry, partition_key=entry.data_file.partition)
            elif content == DataFileContent.EQUALITY_DELETES:
                equality.append(entry)
    live: dict[str, DataFile] = {}
    refused: dict[str, str] = {}
    for entry in data:
        data_file = entry.data_file
        uri = data_file.file_path
        reason = None
        if metadata.format_version >= _ROW_LINEAGE_VERSION:
            reason = (
                f"format v{metadata.format_version} table: pyiceberg 0.12 cannot commit to it, "
                "and a new file would give its rows new row ids"
            )
        elif data_file.file_format != FileFormat.PARQUET:
            reason = f"a {data_file.file_format.name} file, not Parquet"
        elif data_file.spec_id != metadata.default_spec_id:
            reason = (
                f"written under partition spec {data_file.spec_id}, not the current spec "
                f"{metadata.default_spec_id}: pyiceberg records an added file under the "
                "current spec, so the new file would get a partition it was not written for"
            )
        else:
            deletes = _deletes_for(entry, positions, equality, metadata.specs())
            if deletes:
                reason = (
                    f"delete files apply to it ({', '.join(sorted(deletes))}): a new file "
                    "gets a new path and sequence number, so they would stop applying"
                )
        if reason is None:
            live[uri] = data_file
        else:
            refused[uri] = reason
    return live, refused


def _deletes_for(
    entry: ManifestEntry,
    positions: DeleteFileIndex,
    equality: list[ManifestEntry],
    specs: Mapping[int, Any],
) -> set[str]:
    """The delete files that apply to a data file: position deletes as pyiceberg's scan
    matches them, and equality deletes of a later sequence number in its partition (or in an
    unpartitioned spec, which applies table-wide)."""
    data_file = entry.data_file
    sequence = entry.sequence_number or INITIAL_SEQUENCE_NUMBER
    found = {
        d.file_path
        for d in positions.for_data_file(sequence, data_file, partition_key=data_file.partition)
    }
    for delete in equality:
        delete_file = delete.data_file
        if (delete.sequence_number or INITIAL_SEQUENCE_NUMBER) <= sequence:
            continue
        spec = specs.get(delete_file.spec_id)
        global_delete = spec is None or spec.is_unpartitioned()
        same_partition = (
            delete_file.spec_id == data_file.spec_id
            and delete_file.partition == data_file.partition
        )
        if global_delete or same_partition:
            found.add(delete_file.file_path)
    return found


# -- commit ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Checked:
    """A new file found as the outcome says, and what its DataFile needs from its footer."""

    outcome: JobOutcome
    split_offsets: list[int]


def commit_rewrite(
    table: Table,
    plan: IcebergRewritePlan,
    outcomes: Iterable[JobOutcome],
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    storage_options: Mapping[str, Any] | None = None,
    max_workers: int = DEFAULT_MAX_WORKERS,
    decryption: DecryptionKeys | None = None,
) -> TableRewriteReport:
    """Swap the rewritten files into ``table`` in one OVERWRITE snapshot.

    ``outcomes``: the :class:`JobOutcome` of each of the plan's jobs (from
    :func:`run_job`, wherever it ran). Each new file is first checked (``max_workers`` at
    once): it must exist with the size written and the old file's row count; its split
    offsets are read from its footer. The new DataFile copies the old one's partition,
    metrics, bounds, sort order id, spec id and key metadata, with the new path, size and
    split offsets. The snapshot's summary carries :data:`SNAPSHOT_PROPERTY`.

    Each attempt refreshes ``table`` and checks the jobs' old files in its current snapshot
    (unless it is the plan's, under the same spec): jobs whose old file is no longer live and
    clean are dropped (``.to_retry``), and the commit is made on that snapshot. A commit
    refused by a concurrent one (pyiceberg's ``CommitFailedException`` or
    ``ValidationException``, after its own retries) is tried again, ``max_attempts`` times in
    all; after the last, every job left is in ``.to_retry``. Nothing another commit did is
    undone. New files not committed (failed checks, jobs dropped, attempts exhausted) are
    deleted; those that cannot be are listed in ``.leftovers``. Any other error is raised and
    leaves the new files (the commit's outcome is unknown). The old files stay until snapshot
    expiry. A resize (the plan's ``existing_only``) of a column no file has a filter of raises
    ValueError, the new files deleted, nothing committed. ``decryption``: the keys the jobs
    rewrote encrypted files with, to read the new files' footers (encrypted as the old ones).
    """
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError(f"max_attempts must be a positive integer, not {max_attempts!r}")
    options = dict(storage_options if storage_options is not None else storage_options_for(table))
    outcomes = list(outcomes)
    # A resize of columns no file has a filter of: refused (their new files deleted).
    ids = unfiltered(plan.options, outcomes)
    schema = table.schema()
    names = dict.fromkeys(
        (schema.find_column_name(i) if isinstance(i, int) else i) or f"field id {i}" for i in ids
    )
    refuse_unfiltered(list(names), outcomes, options)
    report = TableRewriteReport(table=plan.table, format="iceberg", refused=list(plan.refused))
    jobs = {job.key: job for job in plan.jobs}
    done: dict[str, JobOutcome] = {}
    for outcome in outcomes:
        key = outcome.job.key
        if jobs.get(key) != outcome.job:
            report.failed.append((key, "not a job of this plan"))
        elif outcome.unchanged and key not in done:
            report.unchanged.append(key)
        elif outcome.ok and key not in done:
            done[key] = outcome
        elif not outcome.ok and key not in done:
            report.failed.append((key, outcome.error or "failed"))
    answered = {key for key, _ in report.failed} | set(done) | set(report.unchanged)
    for key in jobs.keys() - answered:
        report.failed.append((key, "no outcome was given for it"))
    with ThreadPoolExecutor(max_workers, thread_name_prefix="iceberg-check") as pool:
        checks = list(
            pool.map(
                lambda o: _check_new_file(o, plan.data_files[o.job.key], options, decryption),
                done.values(),
            )
        )
    pending: dict[str, _Checked] = {}
    for outcome, checked in zip(done.values(), checks, strict=True):
        if isinstance(checked, str):
            report.failed.append((outcome.job.key, checked))
        else:
            pending[outcome.job.key] = checked
    failed_keys = {key for key, _ in report.failed}
    discard = [jobs[key].target for key in failed_keys if key in jobs]

    data_files = dict(plan.data_files)
    planned_specs = {f.spec_id for f in plan.data_files.values()}
    verified: _Base | None = None  # the table state whose files were last checked
    while pending and report.attempts < max_attempts:
        # Each attempt commits on the catalog's current metadata, its files checked first.
        table.refresh()
        base = _base(table.metadata)
        snapshot_id, spec_id, format_version = base
        if (
            snapshot_id == plan.snapshot_id
            and planned_specs == {spec_id}
            and format_version < _ROW_LINEAGE_VERSION
        ):
            verified = base  # what the plan itself checked
        if base != verified:
            # The table moved on: swap only files still live, without deletes, in this spec.
            live, _ = _live_files(table, set(pending))
            for key in [k for k in pending if k not in live]:
                report.to_retry.append(key)
                discard.append(jobs[key].target)
                del pending[key]
            data_files.update(live)
            verified = base
            if not pending:
                break
        report.attempts += 1
        try:
            report.version = _commit(table, plan, pending, data_files, base)
        except (CommitFailedException, ValidationException):
            continue
        report.rewritten = [pending[key].outcome for key in pending]
        pending = {}
    for key in pending:  # attempts exhausted
        report.to_retry.append(key)
        discard.append(jobs[key].target)
    report.leftovers = delete_files(discard, options)
    return report


def _check_new_file(
    outcome: JobOutcome,
    old: DataFile,
    storage_options: Mapping[str, Any],
    decryption: DecryptionKeys | None = None,
) -> _Checked | str:
    """The new file's split offsets once it is found with the outcome's size and the old
    file's rows; else why not (a file of the wrong size is deleted with the others)."""
    target = outcome.job.target
    try:
        with BloomFilterReader(
            target,
            storage_options=storage_options if location.is_url(target) else None,
            decryption=decryption,
        ) as reader:
            if reader.size != outcome.size:
                return f"{target} has {reader.size} bytes, not the {outcome.size} written"
            rows = 0
            offsets = []
            for rg in range(reader.num_row_groups):
                chunks = reader.row_group(rg)
                rows += _row_group_rows(reader, rg)
                first = chunks[0]
                dictionary = first.dictionary_page_offset
                if dictionary is not None and 0 < dictionary < first.data_page_offset:
                    offsets.append(dictionary)
                else:
                    offsets.append(first.data_page_offset)
    except FileNotFoundError:
        return f"{target} is missing"
    except (BloomFilterError, OSError, IndexError) as err:
        return f"{target} cannot be read: {err}"
    if rows != old.record_count:
        return f"{target} has {rows} rows, not the {old.record_count} of {outcome.job.key}"
    return _Checked(outcome, sorted(offsets))


def _row_group_rows(reader: BloomFilterReader, row_group: int) -> int:
    groups = reader.metadata.row_groups or []
    return int(groups[row_group].num_rows)


# A table's state as far as the commit's check goes: its current snapshot id, its default
# partition spec id (an added file is recorded under it), its format version.
_Base = tuple[int | None, int, int]


def _base(metadata: TableMetadata) -> _Base:
    return metadata.current_snapshot_id, metadata.default_spec_id, metadata.format_version


def _commit(
    table: Table,
    plan: IcebergRewritePlan,
    pending: Mapping[str, _Checked],
    data_files: Mapping[str, DataFile],
    base: _Base,
) -> int:
    """One OVERWRITE snapshot swapping each old DataFile for its new one, built on the table
    state ``base`` (whose files were checked); its id. pyiceberg's commit asserts that the
    branch is still at that snapshot; if it is not, pyiceberg's own retries rebuild the
    snapshot on the new one only after checking that every file deleted is still live there,
    with no new deletes for it (else ValidationException)."""
    properties = {SNAPSHOT_PROPERTY: _describe(plan.options)}
    with table.transaction() as transaction:
        if _base(transaction.table_metadata) != base:
            raise CommitFailedException("the table changed after its files were checked")
        update = transaction.update_snapshot(snapshot_properties=properties)
        with update.overwrite() as overwrite:
            for key, checked in pending.items():
                old = data_files[key]
                overwrite.delete_data_file(old)
                overwrite.append_data_file(_new_data_file(old, checked))
            snapshot_id: int = overwrite.snapshot_id
    return snapshot_id


def _describe(options: FilterOptions) -> str:
    """What the rewrite did, for the snapshot summary: ``build 1,2; remove 5`` (field ids),
    ``build existing``, ``remove all``."""
    parts = []
    if options.columns == "existing":
        parts.append("build existing")
    elif options.column_ids:
        parts.append("build " + ",".join(map(str, options.column_ids)))
    if options.remove == "all":
        parts.append("remove all")
    elif options.remove_ids:
        parts.append("remove " + ",".join(map(str, options.remove_ids)))
    return "; ".join(parts)


def _new_data_file(old: DataFile, checked: _Checked) -> DataFile:
    """``old``'s fields (partition, metrics, bounds, sort order, key metadata...) for the new
    file: its path, size and split offsets."""
    versions: tuple[TableVersion, ...] = (1, 2, 3)
    version = next(v for v in versions if len(DATA_FILE_TYPE[v].fields) == len(old))
    fields = {f.name: old[i] for i, f in enumerate(DATA_FILE_TYPE[version].fields)}
    fields.update(
        file_path=checked.outcome.job.new_key,
        file_size_in_bytes=checked.outcome.size,
        split_offsets=checked.split_offsets,
    )
    new = DataFile.from_args(_table_format_version=version, **fields)
    new.spec_id = old.spec_id
    return new


def rewrite_bloom_filters(
    table: Table,
    *,
    columns: Sequence[str] | Literal["existing"] | None = None,
    fpp: float = 0.01,
    ndv: Ndv = "exact",
    num_bytes: int | None = None,
    flavor: str | None = None,
    remove: Sequence[str] | Literal["all"] = (),
    files: Iterable[str] | None = None,
    max_workers: int = DEFAULT_MAX_WORKERS,
    progress: Callable[[JobOutcome], None] | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    storage_options: Mapping[str, Any] | None = None,
    case_sensitive: bool = True,
    existing_only: bool = False,
    decryption: DecryptionKeys | None = None,
) -> TableRewriteReport:
    """Add, resize or remove the Bloom filters of a table's data files in one snapshot:
    :func:`plan_rewrite`, :func:`run_job` on ``max_workers`` threads (``progress(outcome)``
    after each file), :func:`commit_rewrite`. Files are read and written through fsspec with
    ``storage_options`` (default :func:`storage_options_for` the table). Returns the
    :class:`TableRewriteReport`: files rewritten, refused, failed, to retry, the snapshot id
    committed (``.version``). The old files stay until snapshot expiry. ``existing_only``: as
    for :func:`plan_rewrite`; a column no file has a filter of is then a ValueError (nothing is
    committed, no new file stays). ``decryption``: the keys of encrypted data files, rewritten
    encrypted with them (docs/encryption.md#iceberg-tables); without them such a file fails,
    its error saying to pass ``decryption=``."""
    plan = plan_rewrite(
        table,
        columns=columns,
        fpp=fpp,
        ndv=ndv,
        num_bytes=num_bytes,
        flavor=flavor,
        remove=remove,
        files=files,
        case_sensitive=case_sensitive,
        existing_only=existing_only,
    )
    options = dict(storage_options if storage_options is not None else storage_options_for(table))
    outcomes = run_jobs(
        plan.jobs,
        plan.options,
        options,
        max_workers=max_workers,
        progress=progress,
        decryption=decryption,
    )
    return commit_rewrite(
        table,
        plan,
        outcomes,
        max_attempts=max_attempts,
        storage_options=options,
        decryption=decryption,
    )

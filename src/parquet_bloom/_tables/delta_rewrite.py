"""A Delta table's data files rewritten with new Bloom filters, in one commit: plan (the files,
their new names, the files refused), run (:func:`parquet_bloom._tables.jobs.run_job`, here or
on Spark executors), commit (one ``remove`` + ``add`` pair a file, every action
``dataChange=false``, through ``DeltaTable.create_write_transaction``).

Each attempt commits on the latest snapshot, checked first: the jobs whose old file is no
longer in it, unchanged (same size and modification time, the same partition values, no
deletion vector), are left out (``to_retry``) and their new files deleted. The commit is made
without deltalake's retries, so it lands on that snapshot's next version or not at all:
with them, deltalake 1.6.6 finds no conflict with a concurrent compaction (its removes are
``dataChange=false``) and rebases the commit over it, which removes files already removed
and keeps the compacted copies of their rows: every row twice (issue #27). A commit
that loses the race fails with ``CommitFailedError``; then the latest snapshot is read and
checked again, up to ``max_attempts`` commits; after them every new file is deleted. The old
files stay until the table's vacuum removes them.
"""

from __future__ import annotations

import json
import os
import stat
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, unquote

from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError
from deltalake.fs import DeltaStorageHandler
from deltalake.transaction import AddAction, CommitProperties, RemoveAction

from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._io.limits import delta_storage_options
from parquet_bloom._rewrite.build import Ndv
from parquet_bloom._tables.check import check_table_columns
from parquet_bloom._tables.delta_snapshot import (
    DeltaFile,
    deletion_vectors,
    file_location,
    is_local,
    load_table,
    relative_path,
    snapshot_files,
    table_columns,
    table_root,
    writer_feature_refusals,
)
from parquet_bloom._tables.delta_snapshot import file_storage_options as derived_options
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
from parquet_bloom.errors import UnsupportedFileError

__all__ = [
    "COMMIT_TAG",
    "DEFAULT_MAX_ATTEMPTS",
    "DeltaRewritePlan",
    "commit_rewrite",
    "plan_rewrite",
    "rewrite_bloom_filters",
]

# Commits tried before giving up: the first, and a retry on the latest snapshot after each
# conflict. A conflict means another writer removed files; two in a row on one table is rare.
DEFAULT_MAX_ATTEMPTS = 3

# The key of the commit's custom metadata (commitInfo), which says what parquet-bloom did and
# lets the commit be found in the table's history.
COMMIT_TAG = "parquet-bloom"

_REASON_DELETION_VECTOR = (
    "it has a deletion vector, which the new file's add action could not carry: the deleted "
    "rows would come back (rewrite it after an OPTIMIZE or REORG ... APPLY (PURGE) removes it)"
)
_REASON_ABSOLUTE = (
    "the log names it by an absolute path (a shallow clone's file, outside the table): its "
    "new file would be written outside the table"
)
_REASON_PARTITION = (
    "its partition values could not be written back exactly as the log has them (a type "
    "deltalake serializes otherwise)"
)


@dataclass(frozen=True)
class DeltaRewritePlan:
    """What :func:`plan_rewrite` chose: picklable, for the jobs to run anywhere.

    ``table``: the table's root (a local path or a URL); ``table_uri``: deltalake's URI of it;
    ``version``: the version read, which the commit is made on; ``options``: the filter
    options for every job; ``jobs``: one :class:`RewriteJob` per file to rewrite (``key``, the
    log's path; ``new_key``, the new file's; ``source`` and ``target``, where they are);
    ``files``: each job's old file as the log has it (size, partition values, statistics: what
    the commit carries to the new file); ``refused``: ``(key, reason)`` of the files chosen
    but never to be rewritten."""

    table: str
    table_uri: str
    version: int
    options: FilterOptions
    jobs: tuple[RewriteJob, ...]
    files: Mapping[str, DeltaFile] = field(default_factory=dict)
    refused: tuple[tuple[str, str], ...] = ()


def plan_rewrite(
    uri: DeltaTable | str | os.PathLike[str],
    *,
    columns: Sequence[str] | Literal["existing"] | None = None,
    fpp: float = 0.01,
    ndv: Ndv = "exact",
    num_bytes: int | None = None,
    flavor: str | None = None,
    remove: Sequence[str] | Literal["all"] = (),
    files: Iterable[str] | None = None,
    storage_options: Mapping[str, str] | None = None,
    existing_only: bool = False,
) -> DeltaRewritePlan:
    """Plan the rewrite of the latest snapshot's data files (``files``: only these, named as
    the log names them, by their path under the root, or by their full path or URI; a name
    that is not a data file of the snapshot raises ValueError naming it). A column that is not
    in the table's schema raises ValueError naming the columns there are, before any file is
    read or written.

    Raises :class:`~parquet_bloom.errors.UnsupportedFileError`, before anything is written,
    for a table whose writer features the commit cannot carry (docs/tables.md#delta-lake).
    Refuses, one by one, files with deletion vectors, files outside the table, and files whose
    partition values could not be written back exactly. ``existing_only=True`` (a resize of
    ``columns``): each file's chunks of them that have a filter are rebuilt, none is added; a
    file with no filter of them is left as it is."""
    options = FilterOptions(
        columns, fpp, ndv, num_bytes, flavor, remove, existing_only=existing_only
    )
    table = load_table(uri, None, storage_options)
    root = table_root(table)
    # Every name checked against the schema before any file is touched: one error, not one
    # a file.
    there = table_columns(table)
    check_table_columns(columns, there, f"the Delta table at {root}")
    check_table_columns(remove, there, f"the Delta table at {root}")
    refusals = writer_feature_refusals(table)
    if refusals:
        raise UnsupportedFileError(
            f"the Delta table at {root} has writer features a Bloom filter rewrite's commit "
            f"cannot carry, so nothing was written: {'; '.join(refusals)}"
        )
    entries = snapshot_files(table)
    chosen = entries if files is None else _chosen(files, entries, root, table.table_uri)
    masks = deletion_vectors(table)
    jobs, refused, kept = [], [], {}
    for entry in chosen:
        path = relative_path(entry.key)
        if path is None:
            refused.append((entry.key, _REASON_ABSOLUTE))
        elif entry.path in masks:
            refused.append((entry.key, _REASON_DELETION_VECTOR))
        elif entry.partition_values is None:
            refused.append((entry.key, _REASON_PARTITION))
        else:
            new_path = new_file_path(path)
            head, _, _ = entry.key.rpartition("/")
            name = quote(new_path.rpartition("/")[2])
            jobs.append(
                RewriteJob(
                    key=entry.key,
                    new_key=f"{head}/{name}" if head else name,
                    source=file_location(root, path),
                    target=file_location(root, new_path),
                )
            )
            kept[entry.key] = entry
    return DeltaRewritePlan(
        table=root,
        table_uri=table.table_uri,
        version=table.version(),
        options=options,
        jobs=tuple(jobs),
        files=kept,
        refused=tuple(refused),
    )


def _chosen(
    names: Iterable[str], entries: Sequence[DeltaFile], root: str, table_uri: str
) -> list[DeltaFile]:
    """The entries ``names`` name (each once, in the log's order)."""
    if isinstance(names, str):
        raise TypeError("files must be a list of names, not one string")
    by_key = {e.key: e for e in entries}
    by_path = {e.path: e for e in entries}
    prefixes = [f"{root.rstrip('/')}/", table_uri.rstrip("/") + "/"]
    if "://" not in root:
        prefixes.append(root.rstrip(os.sep) + os.sep)
    wanted, unknown = set(), []
    for name in names:
        text = os.fspath(name)
        found = by_key.get(text) or by_path.get(text)
        for prefix in prefixes:
            if found is None and text.startswith(prefix):
                below = text[len(prefix) :].replace(os.sep, "/")
                found = by_path.get(below) or by_path.get(unquote(below)) or by_key.get(below)
        if found is None:
            unknown.append(text)
        else:
            wanted.add(found.key)
    if unknown:
        raise ValueError(
            f"not data files of the Delta table at {root}'s latest snapshot: "
            + ", ".join(map(repr, unknown))
        )
    return [e for e in entries if e.key in wanted]


def commit_rewrite(
    plan: DeltaRewritePlan,
    outcomes: Iterable[JobOutcome],
    *,
    storage_options: Mapping[str, str] | None = None,
    file_storage_options: Mapping[str, Any] | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    snapshot: DeltaTable | None = None,
) -> TableRewriteReport:
    """Commit the files the jobs wrote: one commit that removes each old file and adds its new
    one (``dataChange=false``, the old file's partition values and statistics, the new file's
    size and modification time).

    Each new file is first checked to exist with the size its outcome reports; failed jobs,
    jobs with no outcome and files that do not check out are reported in ``failed`` and their
    new files deleted. Each attempt reads the latest snapshot and commits on it alone (on its
    next version, without deltalake's retries): the jobs whose old file is not in it,
    unchanged, are reported in ``to_retry`` and their new files deleted. An attempt that
    another commit beats to that version fails, and the next one reads the latest snapshot
    again, up to ``max_attempts`` commits in all; then every job left is in ``to_retry`` and
    its new file deleted. ``storage_options`` are deltalake's, for the log;
    ``file_storage_options`` fsspec's, for deleting new files (default:
    :func:`file_storage_options` of ``storage_options``). ``snapshot``: the table as the plan
    read it, if still at hand (it serves the first attempt while the log has no later
    version). The old files stay, for the table's vacuum to remove. A resize (the plan's
    ``existing_only``) of a column no file has a filter of raises ValueError, the new files
    deleted, nothing committed."""
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError(f"max_attempts must be a positive integer, not {max_attempts!r}")
    report = TableRewriteReport(table=plan.table, format="delta", refused=list(plan.refused))
    options = delta_storage_options(plan.table_uri, storage_options)
    if file_storage_options is None:
        file_storage_options = derived_options(plan.table_uri, storage_options)
    outcomes = list(outcomes)
    # A resize of columns no file has a filter of: refused (their new files deleted).
    missing = unfiltered(plan.options, outcomes)
    refuse_unfiltered([str(c) for c in missing], outcomes, file_storage_options or None)
    results = _results(plan, outcomes)
    doomed = []  # jobs whose new files go
    for job in plan.jobs:
        outcome = results.get(job.key)
        if outcome is None:
            report.failed.append((job.key, "no outcome: the job was not run"))
            doomed.append(job)
        elif not outcome.ok:
            report.failed.append((job.key, outcome.error or "failed"))
            doomed.append(job)
        elif outcome.unchanged:
            report.unchanged.append(job.key)
    written = [
        results[j.key]
        for j in plan.jobs
        if j.key in results and results[j.key].ok and not results[j.key].unchanged
    ]
    infos = _file_infos(plan, options, [_path(o.job.new_key) for o in written])
    pending = []
    for outcome in written:
        size, mtime = infos.get(_path(outcome.job.new_key), (None, None))
        if size is None or size != outcome.size:
            found = "missing" if size is None else f"{size} bytes"
            report.failed.append(
                (outcome.job.key, f"new file {outcome.job.new_key}: {found}, not {outcome.size}")
            )
            doomed.append(outcome.job)
        else:
            pending.append((outcome, mtime if mtime is not None else int(time.time() * 1000)))
    report.leftovers += _delete(doomed, file_storage_options)
    token = uuid.uuid4().hex
    planned = snapshot if snapshot is not None and snapshot.version() == plan.version else None
    try:
        while pending:
            if report.attempts >= max_attempts:
                report.to_retry += [o.job.key for o, _ in pending]
                break
            # The snapshot this attempt commits on, and the jobs whose old file is live in it.
            table, entries, pending, dropped = _snapshot(plan, options, pending, planned)
            planned = None  # (the plan's snapshot serves the first attempt only)
            report.to_retry += [o.job.key for o, _ in dropped]
            report.leftovers += _delete([o.job for o, _ in dropped], file_storage_options)
            if not pending:
                break
            base = table.version()
            report.attempts += 1
            version: int | None = base + 1  # the only version a commit without retries takes
            try:
                _commit(table, entries, pending, token)
            except CommitFailedError:
                # Another commit took version base + 1: read the latest snapshot and check
                # again. Unless that commit is ours after all (a store that retried our write
                # after its answer was lost, then refused its own copy).
                try:
                    version = _tagged_version(plan, options, [base + 1], token)
                except Exception:
                    pending = []  # not known either way: keep the new files (below)
                    raise
                if version is None:
                    continue
            except Exception:
                # Not a conflict: the commit may still have been written (a lost response).
                try:
                    version = _find_commit(plan, options, token, base)
                except Exception:
                    # Not known either way: keep the new files. A file the log does not
                    # name is harmless (the table's vacuum removes it); one it names that
                    # is gone breaks the table.
                    pending = []
                    raise
                if version is None:
                    raise
            report.version = version
            report.rewritten = [o for o, _ in pending]
            pending = []
    finally:
        # Whatever was not committed (given up, or an error raised) leaves no new file.
        report.leftovers += _delete([o.job for o, _ in pending], file_storage_options)
    return report


def _results(plan: DeltaRewritePlan, outcomes: Iterable[JobOutcome]) -> dict[str, JobOutcome]:
    jobs = {j.key: j for j in plan.jobs}
    results = {}
    for outcome in outcomes:
        if jobs.get(outcome.job.key) != outcome.job:
            raise ValueError(f"an outcome of a job not in the plan: {outcome.job}")
        results[outcome.job.key] = outcome
    return results


def _path(key: str) -> str:
    return unquote(key)


def _file_infos(
    plan: DeltaRewritePlan, options: dict[str, str] | None, paths: list[str]
) -> dict[str, tuple[int, int | None]]:
    """Size and modification time (ms, None if not known) of each path (under the table's root)
    that exists: on local disk by stat (deltalake's storage handler took 85 us a file, a
    sixth of the commit of 200 files), in a store through that handler."""
    found: dict[str, tuple[int, int | None]] = {}
    if is_local(plan.table):
        for path in paths:
            try:
                info = os.stat(file_location(plan.table, path))
            except (FileNotFoundError, NotADirectoryError):
                continue
            if stat.S_ISREG(info.st_mode):
                found[path] = (info.st_size, info.st_mtime_ns // 1_000_000)
        return found
    import pyarrow.fs as pafs

    store = DeltaStorageHandler(plan.table_uri, options)
    for path, info in zip(paths, store.get_file_info(paths) if paths else [], strict=True):
        if info.type == pafs.FileType.File:
            mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else None
            found[path] = (int(info.size), mtime)
    return found


def _delete(jobs: Iterable[RewriteJob], file_options: Mapping[str, Any] | None) -> list[str]:
    """Delete the new files of ``jobs`` (through fsspec: deltalake 1.6.6's storage handler holds
    the GIL while it deletes); those that could not be (missing counts as deleted)."""
    return delete_files([job.target for job in jobs], file_options or None)


def _snapshot(
    plan: DeltaRewritePlan,
    options: dict[str, str] | None,
    pending: list[tuple[JobOutcome, int]],
    planned: DeltaTable | None,
) -> tuple[
    DeltaTable, Mapping[str, DeltaFile], list[tuple[JobOutcome, int]], list[tuple[JobOutcome, int]]
]:
    """The snapshot to commit on (the latest), its files, the pending jobs whose old file is
    live in it unchanged (the same size, modification time and partition values, no deletion
    vector), and the others. ``planned``: the plan's own snapshot, used (with the plan's files,
    checked when it was read) while the log has no later version."""
    if planned is not None and not _has_version(plan, options, plan.version + 1):
        return planned, plan.files, pending, []
    table = DeltaTable(plan.table_uri, storage_options=options)
    if table.version() == plan.version:
        return table, plan.files, pending, []
    refusals = writer_feature_refusals(table)
    entries = {e.key: e for e in snapshot_files(table)}
    masks = deletion_vectors(table)
    kept: list[tuple[JobOutcome, int]] = []
    dropped: list[tuple[JobOutcome, int]] = []
    for outcome, mtime in pending:
        old, now = plan.files[outcome.job.key], entries.get(outcome.job.key)
        unchanged = (
            not refusals
            and now is not None
            and now.size == old.size
            and now.modification_time == old.modification_time
            and now.path not in masks
            and now.partition_values == old.partition_values
        )
        (kept if unchanged else dropped).append((outcome, mtime))
    return table, entries, kept, dropped


def _has_version(plan: DeltaRewritePlan, options: dict[str, str] | None, version: int) -> bool:
    """Whether the log has the commit of ``version``."""
    path = f"_delta_log/{version:020d}.json"
    if is_local(plan.table):
        return os.path.isfile(file_location(plan.table, path))
    import pyarrow.fs as pafs

    (info,) = DeltaStorageHandler(plan.table_uri, options).get_file_info([path])
    return bool(info.type == pafs.FileType.File)


def _commit(
    table: DeltaTable,
    entries: Mapping[str, DeltaFile],
    pending: list[tuple[JobOutcome, int]],
    token: str,
) -> None:
    now = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = []
    for outcome, mtime in pending:
        old = entries[outcome.job.key]
        values = dict(old.partition_values or {})
        actions.append(RemoveAction(old.path, False, now, old.size, values))
        actions.append(
            AddAction(
                path=_path(outcome.job.new_key),
                size=int(outcome.size or 0),
                partition_values=values,
                modification_time=mtime,
                data_change=False,
                stats=old.stats,  # type: ignore[arg-type]  # None: the old file had none
            )
        )
    table.create_write_transaction(
        actions,
        mode="append",
        schema=table.schema(),
        partition_by=table.metadata().partition_columns or None,
        # No retries: deltalake's own conflict checks let this commit through, rebased, over a
        # compaction that removed its files first (dataChange=false). With none, the commit
        # lands on the snapshot's next version or fails with CommitFailedError (deltalake's
        # MaxCommitAttempts: a later version exists, or another writer took that one).
        commit_properties=CommitProperties(
            max_commit_retries=0,
            custom_metadata={
                COMMIT_TAG: {
                    "operation": "rewrite_bloom_filters",
                    "files": len(pending),
                    "token": token,
                }
            },
        ),
    )


def _find_commit(
    plan: DeltaRewritePlan, options: dict[str, str] | None, token: str, base: int
) -> int | None:
    """The version of the commit tagged ``token``, or None if the table has none: the commits
    after ``base`` (the version the attempt was made on), read from the log. The one right
    after it is read first: a commit lands there or nowhere (it is made without retries), and
    then the table is not loaded to learn its latest version. (Not ``DeltaTable.history``,
    which reads up to its limit of commits.)"""
    found = _tagged_version(plan, options, [base + 1], token)
    if found is not None:
        return found
    latest = DeltaTable(plan.table_uri, storage_options=options).version()
    return _tagged_version(plan, options, list(range(latest, base + 1, -1)), token)


def _tagged_version(
    plan: DeltaRewritePlan, options: dict[str, str] | None, versions: list[int], token: str
) -> int | None:
    """The first of ``versions`` whose commit is tagged ``token``, None if none is (a version
    the log does not have is passed over). Each commit's size is looked up first, because
    deltalake 1.6.6 holds the GIL while its storage handler looks a size up itself, or lists
    the log for ``history``: a store served from this process, as in the tests, would never
    answer."""
    import pyarrow.fs as pafs

    paths = [f"_delta_log/{v:020d}.json" for v in versions]
    if not paths:
        return None
    store = DeltaStorageHandler(plan.table_uri, options)
    sizes = {
        p: int(i.size)
        for p, i in zip(paths, store.get_file_info(paths), strict=True)
        if i.type == pafs.FileType.File
    }
    store = DeltaStorageHandler(plan.table_uri, options, sizes)
    for version, path in zip(versions, paths, strict=True):
        if path not in sizes:
            continue
        data = store.open_input_file(path).read(sizes[path])
        for line in bytes(data).decode().splitlines():
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if info is not None:
                tag = info.get(COMMIT_TAG)
                if isinstance(tag, Mapping) and tag.get("token") == token:
                    return version
                break
    return None


def rewrite_bloom_filters(
    uri: DeltaTable | str | os.PathLike[str],
    *,
    columns: Sequence[str] | Literal["existing"] | None = None,
    fpp: float = 0.01,
    ndv: Ndv = "exact",
    num_bytes: int | None = None,
    flavor: str | None = None,
    remove: Sequence[str] | Literal["all"] = (),
    files: Iterable[str] | None = None,
    storage_options: Mapping[str, str] | None = None,
    file_storage_options: Mapping[str, Any] | None = None,
    max_workers: int = DEFAULT_MAX_WORKERS,
    progress: Callable[[JobOutcome], None] | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    decryption: DecryptionKeys | None = None,
    existing_only: bool = False,
) -> TableRewriteReport:
    """:func:`plan_rewrite`, the jobs run here ``max_workers`` at once
    (:func:`parquet_bloom._tables.jobs.run_jobs`, ``progress(outcome)`` after each file), then
    :func:`commit_rewrite`. ``storage_options`` are deltalake's, for the log;
    ``file_storage_options`` fsspec's, for the data files (default: derived from
    ``storage_options`` by :func:`parquet_bloom._tables.delta_snapshot.file_storage_options`).
    ``decryption``: the keys of encrypted data files, rewritten encrypted with them
    (docs/encryption.md#rewriting-encrypted-files). ``existing_only``: as for
    :func:`plan_rewrite`; a column no file has a filter of is then a ValueError (nothing is
    committed, no new file stays)."""
    table = load_table(uri, None, storage_options)
    plan = plan_rewrite(
        table,
        columns=columns,
        fpp=fpp,
        ndv=ndv,
        num_bytes=num_bytes,
        flavor=flavor,
        remove=remove,
        files=files,
        existing_only=existing_only,
    )
    if isinstance(uri, DeltaTable) and storage_options is None:
        storage_options = getattr(uri, "_storage_options", None)  # what it was loaded with
    if file_storage_options is None:
        file_storage_options = derived_options(plan.table_uri, storage_options)
    outcomes = run_jobs(
        plan.jobs,
        plan.options,
        file_storage_options or None,
        max_workers=max_workers,
        progress=progress,
        decryption=decryption,
    )
    report = commit_rewrite(
        plan,
        outcomes,
        storage_options=storage_options,
        file_storage_options=file_storage_options,
        max_attempts=max_attempts,
        snapshot=None if isinstance(uri, DeltaTable) else table,  # (a caller's own: not ours)
    )
    if not isinstance(uri, DeltaTable):
        report.table = os.fspath(uri)  # named as the caller named it (a relative path stays so)
    return report

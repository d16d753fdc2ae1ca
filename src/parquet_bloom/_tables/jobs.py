"""A table rewrite's three stages, shared by Delta and Iceberg and by the Spark runner.

1. *Plan* (the table module, on the driver): which data files to rewrite, each a
   :class:`RewriteJob` naming the file the table has and the new file that will replace it,
   in the same directory under a new name (:func:`new_file_path`); files the commit could not
   carry are refused then, with the reason.
2. *Run* (:func:`run_job`, anywhere: threads here, Spark executors in
   :mod:`parquet_bloom.spark`): each job is :func:`parquet_bloom.rewrite_bloom_filters` from the
   old file to the new one; the old file is only read. A job and its :class:`JobOutcome` are
   small, picklable values.
3. *Commit* (the table module): one commit swaps every old file for its new one; on failure,
   or for jobs left out of the commit, the new files are deleted (:func:`delete_files`).

The table's old files stay until its own vacuum or snapshot expiry removes them.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._io import location, sink
from parquet_bloom._reader import BloomFilterReader
from parquet_bloom._rewrite.api import RewriteReport, check_options, rewrite_bloom_filters
from parquet_bloom._rewrite.build import Ndv
from parquet_bloom.errors import BloomFilterError

__all__ = [
    "DEFAULT_MAX_WORKERS",
    "FilterOptions",
    "JobOutcome",
    "RewriteJob",
    "TableRewriteReport",
    "delete_files",
    "new_file_path",
    "run_job",
    "run_jobs",
]

# Files rewritten at once by the local runner: each rewrite overlaps its copy (IO) with its
# filter builds, which run on the process's build threads (parquet_bloom._threads, one a core),
# so a few files at once keep the cores and the disk busy on local disk and hide a store's
# latency on object storage. On local disk the copies (which wait on the disk) must run ahead
# of the builds (which wait on the cores): 6 files at once rewrote the benchmark's table 10 %
# faster than 4 or 8 (docs/performance.md, the table rewrite).
DEFAULT_MAX_WORKERS = 6

# The tag a rewritten file's name carries: ".bloom-" and 12 hex digits of a random UUID,
# replaced (not stacked) when a file is rewritten again.
_TAG = re.compile(r"\.bloom-[0-9a-f]{12}$")
_PARQUET = ".parquet"


@dataclass(frozen=True)
class FilterOptions:
    """What to do to each file's filters: the options of
    :func:`parquet_bloom.rewrite_bloom_filters`, checked once for the whole table."""

    columns: Sequence[str] | Literal["existing"] | None = None
    fpp: float = 0.01
    ndv: Ndv = "exact"
    num_bytes: int | None = None
    flavor: str | None = None
    remove: Sequence[str] | Literal["all"] = ()
    # Columns named by Parquet field id (Iceberg's field ids), resolved in each file by its
    # schema's field_id, so that a renamed column is found under its old name in old files:
    # their leaf columns are added to ``columns`` and ``remove`` file by file.
    column_ids: Sequence[int] = ()
    remove_ids: Sequence[int] = ()
    # A resize of ``columns`` (and ``column_ids``): only the chunks that have a filter are
    # rebuilt; a file with no filter of a column is left as it is (its outcome ``lacking`` it).
    existing_only: bool = False

    def __post_init__(self) -> None:
        # Lists become tuples: the options are hashed, compared and pickled with the jobs.
        for name in ("columns", "remove", "column_ids", "remove_ids"):
            value = getattr(self, name)
            if not isinstance(value, str | None) and isinstance(value, Iterable):
                object.__setattr__(self, name, tuple(value))
        check_options(self.columns, self.remove, self.fpp, self.ndv, self.num_bytes, self.flavor)
        if self.column_ids and self.columns == "existing":
            raise ValueError('column_ids= adds columns to a list, not to columns="existing"')
        if self.remove_ids and self.remove == "all":
            raise ValueError('remove_ids= adds columns to a list, not to remove="all"')
        if self.columns is None and not (self.remove or self.column_ids or self.remove_ids):
            raise ValueError("nothing to do: pass columns= to build filters, or remove=")
        if self.existing_only and (
            self.columns == "existing" or not (self.columns or self.column_ids)
        ):
            raise ValueError("existing_only=True resizes the filters of a list of columns")


@dataclass(frozen=True)
class RewriteJob:
    """One data file to rewrite: ``source`` and ``target`` as the rewrite opens them (local
    paths or URLs), ``key`` and ``new_key`` as the table's metadata names them (Delta: a path
    relative to the table root, as the log writes it; Iceberg: the file's full URI)."""

    key: str
    new_key: str
    source: str
    target: str


@dataclass(frozen=True)
class JobOutcome:
    """What became of one :class:`RewriteJob`: the new file's ``size`` and the rewrite's
    ``report``, or the ``error`` that stopped it (no new file is left then)."""

    job: RewriteJob
    size: int | None = None
    report: RewriteReport | None = None
    error: str | None = None
    # With ``existing_only``: the options' columns (paths, or field ids) this file has no
    # filter of, left without one.
    lacking: tuple[str | int, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def unchanged(self) -> bool:
        """The file's filters were already as asked: no new file was written."""
        return self.report is not None and self.report.unchanged


@dataclass
class TableRewriteReport:
    """What a table rewrite did.

    ``rewritten``: the jobs committed (old file -> new file, with each file's report).
    ``refused``: ``(key, reason)`` of files the commit could not carry, never rewritten
    (deletion vectors, delete files, an old partition spec...). ``failed``: ``(key, error)``
    of files whose rewrite failed; their new files were deleted. ``to_retry``: keys of files
    rewritten but not committed because a concurrent commit changed them or the table; their
    new files were deleted, and a later call may retry them. ``version``: the table version
    (Delta) or snapshot id (Iceberg) committed, None when nothing was. ``attempts``: commits
    tried. ``leftovers``: new files that could not be deleted after a failure (to remove by
    hand or by the table's vacuum). ``table``: the table as the caller named it (a path or URL
    as given; the table's root when it was given as a table object). ``unchanged``: keys of
    files whose filters were already as asked (nothing to remove, or every filter to build the
    same): no new file was written for them and the commit leaves them be; when every file is,
    nothing is committed.
    """

    table: str
    format: str
    rewritten: list[JobOutcome] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    to_retry: list[str] = field(default_factory=list)
    version: int | None = None
    attempts: int = 0
    leftovers: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def bytes_before(self) -> int:
        return sum(o.report.bytes_before for o in self.rewritten if o.report is not None)

    @property
    def bytes_after(self) -> int:
        return sum(o.size or 0 for o in self.rewritten)

    @property
    def filters_written(self) -> int:
        return sum(len(o.report.filters_written) for o in self.rewritten if o.report is not None)

    def __str__(self) -> str:
        committed = (
            f"committed {'version' if self.format == 'delta' else 'snapshot'} {self.version}"
            if self.version is not None
            else "nothing committed"
        )
        if self.unchanged and not (self.rewritten or self.failed or self.to_retry):
            n = len(self.unchanged)
            return (
                f"{self.table}: nothing to change: the filters of {n} file{'s' if n != 1 else ''} "
                "are already as asked; nothing committed, no file written"
                + (f", {len(self.refused)} refused" if self.refused else "")
            )
        parts = [
            f"{self.table}: {committed}; {len(self.rewritten)} files rewritten "
            f"({self.filters_written} filters written, {self.bytes_before:,} -> "
            f"{self.bytes_after:,} bytes)"
        ]
        for label, items in (("refused", self.refused), ("failed", self.failed)):
            if items:
                parts.append(f"{len(items)} {label}")
        if self.unchanged:
            parts.append(f"{len(self.unchanged)} already as asked (left as they are)")
        if self.to_retry:
            parts.append(f"{len(self.to_retry)} to retry after a concurrent commit")
        if self.leftovers:
            parts.append(f"{len(self.leftovers)} new files left to delete")
        return ", ".join(parts)


def new_file_path(path: str) -> str:
    """A new name, in the same directory, for the file at ``path`` (a path or URL): its name
    with ``.bloom-`` and 12 random hex digits before ``.parquet`` (an earlier tag replaced)."""
    head, sep, name = path.rpartition("/")
    stem = name[: -len(_PARQUET)] if name.endswith(_PARQUET) else name
    stem = _TAG.sub("", stem)
    return f"{head}{sep}{stem}.bloom-{uuid.uuid4().hex[:12]}{_PARQUET}"


def run_job(
    job: RewriteJob,
    options: FilterOptions,
    storage_options: Mapping[str, Any] | None = None,
    *,
    in_place: bool = False,
    decryption: DecryptionKeys | None = None,
) -> JobOutcome:
    """Rewrite one file into its new name (``in_place=True``: replace ``job.source`` itself,
    never a table's data file); a failure is returned, not raised (the rewrite leaves no
    partial file behind). Options naming columns by field id cost one more footer read, to
    find their paths in this file. ``decryption``: the keys of encrypted files, which stay
    encrypted (:func:`parquet_bloom.rewrite_bloom_filters`); kept out of ``options``, which
    travel with the jobs. A table's file (not ``in_place``) whose filters are already as
    asked gets no new file: its outcome is ``unchanged``."""
    lacking: tuple[str | int, ...] = ()
    columns: Sequence[str] | Literal["existing"] | None
    try:
        if options.existing_only:
            columns, remove, lacking = _filtered_columns(job, options, storage_options, decryption)
            if not columns and not remove:
                # No filter of the columns to resize: the file is left as it is.
                report = RewriteReport(job.source, job.source, unchanged=True)
                return JobOutcome(job, report=report, lacking=lacking)
        else:
            columns, remove = _file_columns(job, options, storage_options, decryption)
        report = rewrite_bloom_filters(
            job.source,
            None if in_place else job.target,
            in_place=in_place,
            existing_only=options.existing_only,
            columns=columns or None,
            fpp=options.fpp,
            ndv=options.ndv,
            num_bytes=options.num_bytes,
            flavor=options.flavor,
            remove=remove,
            storage_options=storage_options,
            decryption=decryption,
            skip_unchanged=not in_place,
        )
    except (BloomFilterError, OSError, ValueError) as err:
        return JobOutcome(job, error=f"{type(err).__name__}: {err}")
    size = None if report.unchanged else report.bytes_after
    return JobOutcome(job, size=size, report=report, lacking=lacking)


def _leaves(
    job: RewriteJob, storage_options: Mapping[str, Any] | None, decryption: DecryptionKeys | None
) -> tuple[dict[int, list[str]], set[str]]:
    """The file's leaf paths by field id, and the paths of the columns with a filter in some
    row group (one footer read)."""
    options = storage_options if location.is_url(job.source) else None
    with BloomFilterReader(job.source, storage_options=options, decryption=decryption) as r:
        paths: dict[int, list[str]] = {}
        for leaf in r.schema_leaves:
            if leaf.field_id is not None:
                paths.setdefault(leaf.field_id, []).append(leaf.path)
        filtered = {c.path for c in r.column_chunks if c.bloom_filter_offset is not None}
    return paths, filtered


def _filtered_columns(
    job: RewriteJob,
    options: FilterOptions,
    storage_options: Mapping[str, Any] | None,
    decryption: DecryptionKeys | None = None,
) -> tuple[list[str], Sequence[str] | Literal["all"], tuple[str | int, ...]]:
    """For a resize (``existing_only``): the leaf paths of the options' columns (by path, and
    by field id) that have a filter in some row group of this file, ``remove``, and the
    options' columns the file has no filter of."""
    paths, filtered = _leaves(job, storage_options, decryption)
    assert options.columns != "existing"  # __post_init__ refused
    asked: list[tuple[str | int, list[str]]] = [(c, [c]) for c in options.columns or ()]
    asked += [(i, paths.get(i, [])) for i in options.column_ids]
    columns: list[str] = []
    lacking: list[str | int] = []
    for column, leaves in asked:
        having = [p for p in leaves if p in filtered]
        columns += having
        if not having:
            lacking.append(column)
    remove: Sequence[str] | Literal["all"] = options.remove
    if options.remove_ids and remove != "all":
        remove = [*remove, *(p for i in options.remove_ids for p in paths.get(i, ()))]
    return list(dict.fromkeys(columns)), remove, tuple(lacking)


def unfiltered(options: FilterOptions, outcomes: Sequence[JobOutcome]) -> list[str | int]:
    """For a resize (``existing_only``): the options' columns (paths, field ids) that no file
    rewritten or left as it is has a filter of, when any file was read."""
    read = [o for o in outcomes if o.ok]
    if not options.existing_only or not read:
        return []
    asked: list[str | int] = [*(options.columns or ()), *options.column_ids]
    return [c for c in asked if all(c in o.lacking for o in read)]


def refuse_unfiltered(
    names: Sequence[str], outcomes: Sequence[JobOutcome], storage_options: Mapping[str, Any] | None
) -> None:
    """Refuse a resize of columns no file of the table has a filter of (``names``, as the
    caller asked them): the new files of ``outcomes`` are deleted, and a ValueError says to
    add the filters instead."""
    if not names:
        return
    delete_files([o.job.target for o in outcomes if o.ok and not o.unchanged], storage_options)
    listed = ", ".join(map(repr, names))
    flags = " ".join(f"--column {n}" for n in names)
    raise ValueError(
        f"no data file of the table has a Bloom filter of {listed} to resize: a resize rebuilds "
        "the filters files have and adds none; add them with "
        f"columns=[{listed}] (parquet-bloom table add {flags}); nothing was committed"
    )


def _file_columns(
    job: RewriteJob,
    options: FilterOptions,
    storage_options: Mapping[str, Any] | None,
    decryption: DecryptionKeys | None = None,
) -> tuple[Sequence[str] | Literal["existing"] | None, Sequence[str] | Literal["all"]]:
    """``columns`` and ``remove`` for this file: the options' paths, and the paths its schema
    gives the options' field ids (ids it lacks are left out: a column added after the file was
    written). A file where nothing is left to do is an error, not a copy."""
    if not (options.column_ids or options.remove_ids):
        return options.columns, options.remove
    paths, _ = _leaves(job, storage_options, decryption)
    assert options.columns != "existing" and options.remove != "all"  # __post_init__ refused
    columns = [*(options.columns or ()), *(p for i in options.column_ids for p in paths.get(i, ()))]
    remove = [*options.remove, *(p for i in options.remove_ids for p in paths.get(i, ()))]
    if not columns and not remove:
        ids = sorted({*options.column_ids, *options.remove_ids})
        raise ValueError(f"{job.source} has no column with field id {', '.join(map(str, ids))}")
    return (columns or None), remove


def run_jobs(
    jobs: Sequence[RewriteJob],
    options: FilterOptions,
    storage_options: Mapping[str, Any] | None = None,
    *,
    max_workers: int = DEFAULT_MAX_WORKERS,
    progress: Callable[[JobOutcome], None] | None = None,
    decryption: DecryptionKeys | None = None,
) -> list[JobOutcome]:
    """:func:`run_job` over ``jobs``, ``max_workers`` at once; outcomes in the jobs' order.
    ``progress(outcome)`` is called, on the calling thread, as each file finishes. The local
    directories written to are fsynced once each at the end: a file whose directory could not
    be is deleted and returned failed (though ``progress`` saw it done). An exception (an
    interrupt, a failing ``progress``) stops the files not yet started, and the new files of
    every job are deleted before it is raised."""
    if not isinstance(max_workers, int) or max_workers < 1:
        raise ValueError(f"max_workers must be a positive integer, not {max_workers!r}")
    # Local files are renamed into a few directories (a table's partitions): each is fsynced
    # once at the end, not once a file, before any outcome is returned as done.
    syncs = sink.DirectorySyncs()

    def one(job: RewriteJob) -> JobOutcome:
        with sink.deferred_directory_syncs(syncs):
            return run_job(job, options, storage_options, decryption=decryption)

    outcomes: list[JobOutcome] = []
    pool = ThreadPoolExecutor(max_workers, thread_name_prefix="table-rewrite")
    try:
        for outcome in pool.map(one, jobs):
            outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
    except BaseException:
        # Interrupted (Ctrl-C) or a progress callback failed: start no more files, wait for
        # those being written, and leave none of the new files behind.
        pool.shutdown(wait=True, cancel_futures=True)
        delete_files([job.target for job in jobs], storage_options)
        raise
    pool.shutdown(wait=True)
    failed = syncs.sync()
    if failed:
        outcomes = [_unsynced(o, failed, storage_options) for o in outcomes]
    return outcomes


def _unsynced(
    outcome: JobOutcome, failed: Mapping[str, OSError], storage_options: Mapping[str, Any] | None
) -> JobOutcome:
    """A file renamed into a directory whose fsync failed is not durable: deleted, and failed."""
    if not outcome.ok:
        return outcome
    filesystem, path = location.resolve(
        outcome.job.target,
        storage_options=storage_options if location.is_url(outcome.job.target) else None,
    )
    error = None if filesystem is not None else failed.get(os.path.dirname(os.path.abspath(path)))
    if error is None:
        return outcome
    left = delete_files([outcome.job.target], storage_options)
    kept = f"; the new file {left[0]} could not be deleted" if left else ""
    return JobOutcome(outcome.job, error=f"{type(error).__name__}: {error}{kept}")


def delete_files(
    paths: Iterable[str], storage_options: Mapping[str, Any] | None = None
) -> list[str]:
    """Delete the new files of a failed or partial commit; the paths that could not be deleted
    (already missing counts as deleted)."""
    left = []
    for path in paths:
        filesystem, resolved = location.resolve(
            path, storage_options=storage_options if location.is_url(path) else None
        )
        try:
            if filesystem is None:
                os.remove(resolved)
            else:
                filesystem.rm_file(resolved)
        except FileNotFoundError:
            continue
        except OSError:
            left.append(path)
    return left

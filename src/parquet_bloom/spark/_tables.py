"""Table and file rewrites with the per-file work on Spark's executors.

The driver plans (:func:`parquet_bloom.delta.plan_rewrite`,
:func:`parquet_bloom.iceberg.plan_rewrite`: small, picklable jobs), the executors run
:func:`parquet_bloom._tables.jobs.run_job` on one job per task (reading the old file and writing
the new one straight to storage, through fsspec with the standard credential chains), and only
each job's outcome, the new file's name, size and report, comes back to the driver, which
commits once. No data passes through the driver.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, Literal

from pyspark.sql import SparkSession

from parquet_bloom._crypto import DecryptionKeys
from parquet_bloom._io import location
from parquet_bloom._rewrite.build import Ndv
from parquet_bloom._tables.jobs import (
    FilterOptions,
    JobOutcome,
    RewriteJob,
    TableRewriteReport,
    run_job,
)
from parquet_bloom.spark._keys import executor_keys

__all__ = ["rewrite_files", "rewrite_table"]

_FORMATS = ("delta", "iceberg")


def _run_on_executors(
    spark: SparkSession, jobs: Sequence[RewriteJob], work: Callable[[RewriteJob], JobOutcome]
) -> list[JobOutcome]:
    """``work(job)`` for every job, one task a job (files differ in size: small tasks
    balance), the outcomes back in the jobs' order. ``work`` must pickle."""
    if not jobs:
        return []

    def run(indexed: Iterable[tuple[int, RewriteJob]]) -> Iterator[tuple[int, JobOutcome]]:
        for index, job in indexed:
            yield index, work(job)

    rdd = spark.sparkContext.parallelize(list(enumerate(jobs)), numSlices=len(jobs))
    results = dict(rdd.mapPartitions(run).collect())
    return [results[i] for i in range(len(jobs))]


def _table_work(
    options: FilterOptions,
    storage_options: Mapping[str, Any] | None,
    decryption: DecryptionKeys | None = None,
) -> Callable[[RewriteJob], JobOutcome]:
    return partial(
        run_job,
        options=options,
        storage_options=dict(storage_options) if storage_options else None,
        decryption=decryption,
    )


def rewrite_table(
    spark: SparkSession,
    table: Any,
    *,
    format: Literal["delta", "iceberg"] | None = None,
    columns: Sequence[str] | Literal["existing"] | None = None,
    fpp: float = 0.01,
    ndv: Ndv = "exact",
    num_bytes: int | None = None,
    flavor: str | None = None,
    remove: Sequence[str] | Literal["all"] = (),
    files: Iterable[str] | None = None,
    storage_options: Mapping[str, str] | None = None,
    file_storage_options: Mapping[str, Any] | None = None,
    existing_only: bool = False,
    decryption: DecryptionKeys | None = None,
) -> TableRewriteReport:
    """Add, resize or remove the Bloom filters of a table's data files, the files rewritten on
    the executors, in one commit made by the driver.

    ``table``: a Delta table (its URI or path, or a ``deltalake.DeltaTable``) or an Iceberg
    table (a ``pyiceberg.table.Table``, loaded from its catalog: the commit goes through it).
    ``format`` is told from ``table`` when not given. The options are those of
    :func:`parquet_bloom.delta.rewrite_bloom_filters` and
    :func:`parquet_bloom.iceberg.rewrite_bloom_filters`, and so is the result: the same
    plan, the same new filters byte for byte, the same one commit, with the same handling of
    refused and failed files and of a concurrent commit. ``existing_only=True`` resizes only
    the filters ``columns`` have (a file without one is left as it is; a column no file has a
    filter of is a ValueError, nothing committed).

    ``storage_options``: deltalake's, for a Delta table's log. ``file_storage_options``: fsspec's,
    for the data files, shipped to the executors with each task (default: derived from the
    table's own options, as the local rewrite does). Where the executors find credentials
    through the standard chain (environment, instance metadata), pass none.

    ``decryption``: the keys of a Delta table's encrypted data files, rewritten encrypted with
    them (docs/encryption.md#rewriting-encrypted-files), sent to the executors with each task
    (so they must pickle: a TypeError before anything runs names the part that does not).
    An Iceberg table takes none, as :func:`parquet_bloom.iceberg.rewrite_bloom_filters`.
    """
    kind = format or _format_of(table)
    if kind not in _FORMATS:
        raise ValueError(f"format must be one of {', '.join(_FORMATS)}, not {format!r}")
    keys = executor_keys(decryption)
    filters: dict[str, Any] = dict(
        columns=columns, fpp=fpp, ndv=ndv, num_bytes=num_bytes, flavor=flavor, remove=remove
    )
    filters["existing_only"] = existing_only
    if kind == "delta":
        from parquet_bloom import delta
        from parquet_bloom._tables.delta_snapshot import file_storage_options as delta_files

        if storage_options is None:
            storage_options = getattr(table, "_storage_options", None)
        plan = delta.plan_rewrite(table, files=files, storage_options=storage_options, **filters)
        if file_storage_options is None:
            file_storage_options = delta_files(plan.table_uri, storage_options)
        work = _table_work(plan.options, file_storage_options, keys)
        outcomes = _run_on_executors(spark, plan.jobs, work)
        return delta.commit_rewrite(plan, outcomes, storage_options=storage_options)
    if storage_options is not None:
        raise ValueError("storage_options= is deltalake's; an Iceberg table brings its own FileIO")
    if keys is not None:
        raise ValueError(
            "decryption= rewrites the encrypted files of Delta tables and plain files; an "
            "Iceberg table's are not rewritten encrypted yet (docs/encryption.md)"
        )
    from parquet_bloom import iceberg
    from parquet_bloom._tables.iceberg_io import storage_options_for

    iceberg_plan = iceberg.plan_rewrite(table, files=files, **filters)
    if file_storage_options is None:
        file_storage_options = storage_options_for(table)
    work = _table_work(iceberg_plan.options, file_storage_options)
    outcomes = _run_on_executors(spark, iceberg_plan.jobs, work)
    return iceberg.commit_rewrite(
        table, iceberg_plan, outcomes, storage_options=file_storage_options
    )


def _format_of(table: Any) -> str:
    module = type(table).__module__
    if module.startswith("pyiceberg"):
        return "iceberg"
    if module.startswith("deltalake") or isinstance(table, str | os.PathLike):
        return "delta"
    raise TypeError(
        "table must be a Delta table's URI or path, a deltalake.DeltaTable or a "
        f"pyiceberg Table, not {type(table).__name__}"
    )


def rewrite_files(
    spark: SparkSession,
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    dst: str | os.PathLike[str] | None = None,
    *,
    in_place: bool = False,
    columns: Sequence[str] | Literal["existing"] | None = None,
    fpp: float = 0.01,
    ndv: Ndv = "exact",
    num_bytes: int | None = None,
    flavor: str | None = None,
    remove: Sequence[str] | Literal["all"] = (),
    storage_options: Mapping[str, Any] | None = None,
    decryption: DecryptionKeys | None = None,
) -> list[JobOutcome]:
    """:func:`parquet_bloom.rewrite_bloom_filters` over the Parquet files ``paths`` stands for
    (files, directories, prefixes, globs: listed once on the driver, as the CLI lists them),
    one file a task on the executors.

    Each file is written under its own name into the directory ``dst``, keeping its path
    relative to the directory listed, or with ``in_place=True`` replaces itself (never a table's
    data file: use :func:`rewrite_table`). Returns one
    :class:`~parquet_bloom._tables.jobs.JobOutcome` a file, in listing order: the new file's
    size and report, or the error that stopped it (the file is then untouched, and no partial
    output is left).

    ``decryption``: the keys of encrypted files, which stay encrypted
    (docs/encryption.md#rewriting-encrypted-files); sent to the executors with each task, so
    they must pickle (a TypeError before anything runs names the part that does not).
    """
    if (dst is None) == (not in_place):
        raise ValueError("pass dst, a directory to write into, or in_place=True")
    keys = executor_keys(decryption)
    options = FilterOptions(
        columns=columns, fpp=fpp, ndv=ndv, num_bytes=num_bytes, flavor=flavor, remove=remove
    )
    names = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    jobs = []
    for name in names:
        root = os.fspath(name)
        for entry in location.list_files(root, storage_options=_url_options(root, storage_options)):
            source = entry.name
            if in_place:
                jobs.append(RewriteJob(source, source, source, source))
                continue
            assert dst is not None  # not in place
            target = f"{os.fspath(dst).rstrip('/')}/{_relative(source, root)}"
            jobs.append(RewriteJob(source, target, source, target))
    shipped = dict(storage_options) if storage_options else None
    if in_place:
        work = partial(
            run_job, options=options, storage_options=shipped, in_place=True, decryption=keys
        )
        return _run_on_executors(spark, jobs, work)
    return _run_on_executors(
        spark,
        jobs,
        partial(_into_directory, options=options, storage_options=shipped, decryption=keys),
    )


def _url_options(name: str, options: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return options if location.is_url(name) else None


def _relative(source: str, root: str) -> str:
    """``source``'s path under the listed ``root`` (its name alone for a file or a glob)."""
    base = root.rstrip("/")
    if location.has_glob(base) or source == base or not source.startswith(base + "/"):
        return source.rsplit("/", 1)[-1]
    return source[len(base) + 1 :]


def _into_directory(
    job: RewriteJob,
    options: FilterOptions,
    storage_options: Mapping[str, Any] | None,
    decryption: DecryptionKeys | None = None,
) -> JobOutcome:
    """:func:`~parquet_bloom._tables.jobs.run_job`, making a local target's directory first
    (object stores have none to make)."""
    if not location.is_url(job.target):
        os.makedirs(os.path.dirname(job.target) or ".", exist_ok=True)
    return run_job(job, options, storage_options, decryption=decryption)

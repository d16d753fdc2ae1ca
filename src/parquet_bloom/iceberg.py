"""Iceberg tables (pyiceberg): scans pruned by the Bloom filters of their data files, and
filters added, resized or removed across a table in one snapshot.

- :func:`prune`: the FileScanTasks of ``table.scan(row_filter).plan_files()`` (after
  pyiceberg's own manifest, partition and metrics pruning) whose Parquet Bloom filters might
  hold a matching row, the row groups to read in each, and ``to_arrow()``, equal to the
  scan's ``to_arrow()`` while reading only those row groups.
- :func:`rewrite_bloom_filters`: every live data file rewritten to a new file beside it (the
  same pages, new filters), then one OVERWRITE snapshot swapping old files for new. In three
  stages, so that the middle one can run anywhere (Spark executors): :func:`plan_rewrite`,
  :func:`parquet_bloom._tables.jobs.run_job` per file, :func:`commit_rewrite`.
- :func:`storage_options_for`: the table FileIO's properties as the fsspec storage options
  the rewrite opens its files with.

Needs pyiceberg (``pip install 'parquet-bloom[iceberg]'``). docs/tables.md says how it works
and what it refuses.
"""

from __future__ import annotations

try:
    import pyiceberg  # noqa: F401  # fail here, with what to install, rather than in a submodule
except ImportError as err:  # pragma: no cover - exercised only without pyiceberg
    raise ImportError(
        "parquet_bloom.iceberg needs pyiceberg: pip install 'parquet-bloom[iceberg]'"
    ) from err

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from pyiceberg.expressions import BooleanExpression
from pyiceberg.table import Table

from parquet_bloom._prune.dataset import DEFAULT_MAX_WORKERS as DEFAULT_PRUNE_WORKERS
from parquet_bloom._rewrite.build import Ndv
from parquet_bloom._tables import iceberg_rewrite, iceberg_scan
from parquet_bloom._tables.iceberg_io import storage_options_for
from parquet_bloom._tables.iceberg_rewrite import (
    DEFAULT_MAX_ATTEMPTS,
    SNAPSHOT_PROPERTY,
    IcebergRewritePlan,
)
from parquet_bloom._tables.iceberg_scan import IcebergPruneResult
from parquet_bloom._tables.jobs import (
    DEFAULT_MAX_WORKERS,
    FilterOptions,
    JobOutcome,
    RewriteJob,
    TableRewriteReport,
    run_job,
)
from parquet_bloom._tables.scan import TablePruneReport

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "SNAPSHOT_PROPERTY",
    "FilterOptions",
    "IcebergPruneResult",
    "IcebergRewritePlan",
    "JobOutcome",
    "RewriteJob",
    "TablePruneReport",
    "TableRewriteReport",
    "commit_rewrite",
    "plan_rewrite",
    "prune",
    "rewrite_bloom_filters",
    "run_job",
    "storage_options_for",
]


def prune(
    table: Table,
    row_filter: str | BooleanExpression,
    *,
    snapshot_id: int | None = None,
    case_sensitive: bool = True,
    selected_fields: tuple[str, ...] = ("*",),
    max_workers: int = DEFAULT_PRUNE_WORKERS,
    tail_size: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
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
    """
    return iceberg_scan.prune(
        table,
        row_filter,
        snapshot_id=snapshot_id,
        case_sensitive=case_sensitive,
        selected_fields=selected_fields,
        max_workers=max_workers,
        tail_size=tail_size,
        storage_options=storage_options,
    )


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
) -> IcebergRewritePlan:
    """Which data files of the current snapshot to rewrite, and which not, and why.

    ``columns``: the table's column names to build filters for (a struct, list or map names
    all its primitive columns), resolved to field ids and found in each file by field id;
    ``"existing"`` rebuilds the filters each file has; None builds none. ``remove``: column
    names whose filters go, or ``"all"``. ``fpp``, ``ndv``, ``num_bytes``, ``flavor`` size
    each filter as :func:`parquet_bloom.rewrite_bloom_filters` does. ``files``: only these
    data file URIs (as the manifests name them); one that is not a live data file is refused.

    Refused (never rewritten, listed in ``.refused`` with the reason): files that delete files
    apply to (the new file's new path and sequence number would stop them applying, bringing
    deleted rows back), files written under an older partition spec, files that are not
    Parquet, and every file of a format v3 table. Reads every manifest of the current
    snapshot once. The plan is picklable and holds no table handle.
    """
    return iceberg_rewrite.plan_rewrite(
        table,
        columns=columns,
        fpp=fpp,
        ndv=ndv,
        num_bytes=num_bytes,
        flavor=flavor,
        remove=remove,
        files=files,
        case_sensitive=case_sensitive,
    )


def commit_rewrite(
    table: Table,
    plan: IcebergRewritePlan,
    outcomes: Iterable[JobOutcome],
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    storage_options: Mapping[str, Any] | None = None,
    max_workers: int = DEFAULT_MAX_WORKERS,
) -> TableRewriteReport:
    """Swap the rewritten files into ``table`` in one OVERWRITE snapshot.

    ``outcomes``: the :class:`JobOutcome` of each of the plan's jobs (from
    :func:`run_job`, wherever it ran). Each new file is first checked (``max_workers`` at
    once): it must exist with the size written and the old file's row count; its split
    offsets are read from its footer. The new DataFile copies the old one's partition,
    metrics, bounds, sort order id, spec id and key metadata, with the new path, size and
    split offsets. The snapshot's summary carries :data:`SNAPSHOT_PROPERTY`.

    A concurrent commit (pyiceberg's ``CommitFailedException`` or ``ValidationException``,
    after its own retries) refreshes ``table``; jobs whose old file is no longer live and
    clean are dropped (``.to_retry``) and the commit is tried again, ``max_attempts`` times in
    all; after the last, every job left is in ``.to_retry``. Nothing another commit did is
    undone. New files not committed (failed checks, jobs dropped, attempts exhausted) are
    deleted; those that cannot be are listed in ``.leftovers``. Any other error is raised and
    leaves the new files (the commit's outcome is unknown). The old files stay until snapshot
    expiry.
    """
    return iceberg_rewrite.commit_rewrite(
        table,
        plan,
        outcomes,
        max_attempts=max_attempts,
        storage_options=storage_options,
        max_workers=max_workers,
    )


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
) -> TableRewriteReport:
    """Add, resize or remove the Bloom filters of a table's data files in one snapshot:
    :func:`plan_rewrite`, :func:`run_job` on ``max_workers`` threads (``progress(outcome)``
    after each file), :func:`commit_rewrite`. Files are read and written through fsspec with
    ``storage_options`` (default :func:`storage_options_for` the table). Returns the
    :class:`TableRewriteReport`: files rewritten, refused, failed, to retry, the snapshot id
    committed (``.version``). The old files stay until snapshot expiry."""
    return iceberg_rewrite.rewrite_bloom_filters(
        table,
        columns=columns,
        fpp=fpp,
        ndv=ndv,
        num_bytes=num_bytes,
        flavor=flavor,
        remove=remove,
        files=files,
        max_workers=max_workers,
        progress=progress,
        max_attempts=max_attempts,
        storage_options=storage_options,
        case_sensitive=case_sensitive,
    )

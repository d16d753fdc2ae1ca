"""Iceberg tables (pyiceberg): scans pruned by the Bloom filters of their data files, and
filters added, resized or removed across a table in one snapshot.

- :func:`check`: every live Parquet data file of a snapshot checked as
  :func:`parquet_bloom.check_file` checks a file (``require=``, ``allow_empty=``), one verdict.
- :func:`prune`: the FileScanTasks of ``table.scan(row_filter).plan_files()`` (after
  pyiceberg's own manifest, partition and metrics pruning) whose Parquet Bloom filters might
  hold a matching row, the row groups to read in each, and ``to_arrow()``, equal to the
  scan's ``to_arrow()`` while reading only those row groups; ``arrow_filter=`` adds string
  matches pyiceberg's filters cannot say (``pc.match_substring``, ...).
- :func:`build_index`, :func:`refresh_index`, :func:`compact_index`, :func:`lookup`,
  :func:`lookup_text`, :func:`has_index`: the table's Bloom index (docs/index.md#iceberg),
  one Puffin file a snapshot registered as its statistics file, looked up against a
  snapshot, never wrong; :func:`prune` uses it (``index=``), its token and n-gram filters
  (``build_index(..., text=...)``) for string matches.
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

from parquet_bloom.errors import MissingExtraError

try:
    import pyiceberg  # noqa: F401  # fail here, with what to install, rather than in a submodule
except ImportError as err:  # tests/test_extras.py makes it missing
    raise MissingExtraError(
        "reading Iceberg tables (parquet_bloom.iceberg)", package="pyiceberg", extra="iceberg"
    ) from err

from parquet_bloom._tables.check import TableCheckReport
from parquet_bloom._tables.iceberg_check import check
from parquet_bloom._tables.iceberg_index import (
    build_index,
    compact_index,
    has_index,
    lookup,
    lookup_text,
    refresh_index,
)
from parquet_bloom._tables.iceberg_io import storage_options_for
from parquet_bloom._tables.iceberg_rewrite import (
    DEFAULT_MAX_ATTEMPTS,
    SNAPSHOT_PROPERTY,
    IcebergRewritePlan,
    commit_rewrite,
    plan_rewrite,
    rewrite_bloom_filters,
)
from parquet_bloom._tables.iceberg_scan import IcebergPruneResult, prune
from parquet_bloom._tables.jobs import (
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
    "TableCheckReport",
    "TablePruneReport",
    "TableRewriteReport",
    "build_index",
    "check",
    "commit_rewrite",
    "compact_index",
    "has_index",
    "lookup",
    "lookup_text",
    "plan_rewrite",
    "prune",
    "refresh_index",
    "rewrite_bloom_filters",
    "run_job",
    "storage_options_for",
]

"""Delta Lake tables: prune a table's scan with the Bloom filters of its files, and add, resize
or remove the filters of its files in one commit (extra ``parquet-bloom[delta]``: deltalake).

- :func:`check`: every live file of the table's snapshot checked as
  :func:`parquet_bloom.check_file` checks a file (``require=``, ``allow_empty=``), one verdict.
- :func:`prune`: the table's own pruning (partition values, min/max statistics) first, then
  the files' Bloom filters; a pyarrow dataset of the row groups left, the files and a report.
- :func:`build_index`, :func:`refresh_index`, :func:`compact_index`, :func:`lookup`,
  :func:`lookup_text`: the table's Bloom index under ``<table>/_bloom_index/``
  (docs/index.md), looked up against the table's snapshot.
- :func:`rewrite_bloom_filters`: every chosen data file rewritten to a new file beside it (the
  same pages, new filters), then one commit that swaps old for new (``dataChange=false``).
  Its three stages are public so that they can run apart (the jobs on Spark executors):
  :func:`plan_rewrite` -> :func:`run_job` per job -> :func:`commit_rewrite`.

The old files stay in the table's directory, no longer in its snapshot, until the table's
vacuum removes them (``DeltaTable.vacuum``, after its retention period); time travel to older
versions reads them until then. docs/tables.md#delta-lake says what is refused and why.
"""

from __future__ import annotations

from parquet_bloom.errors import MissingExtraError

try:
    import deltalake  # noqa: F401  # the extra this module needs, checked once here
except ImportError as err:  # tests/test_extras.py makes it missing
    raise MissingExtraError(
        "reading Delta Lake tables (parquet_bloom.delta)", package="deltalake", extra="delta"
    ) from err

from parquet_bloom._tables.check import TableCheckReport
from parquet_bloom._tables.delta_check import check
from parquet_bloom._tables.delta_index import (
    INDEX_DIRECTORY,
    build_index,
    compact_index,
    has_index,
    index_location,
    lookup,
    lookup_text,
    refresh_index,
)
from parquet_bloom._tables.delta_prune import DeltaPruneResult, prune
from parquet_bloom._tables.delta_rewrite import (
    COMMIT_TAG,
    DEFAULT_MAX_ATTEMPTS,
    DeltaRewritePlan,
    commit_rewrite,
    plan_rewrite,
    rewrite_bloom_filters,
)
from parquet_bloom._tables.delta_snapshot import DeltaFile, file_storage_options
from parquet_bloom._tables.jobs import (
    FilterOptions,
    JobOutcome,
    RewriteJob,
    TableRewriteReport,
    run_job,
)
from parquet_bloom._tables.scan import TablePruneReport

__all__ = [
    "COMMIT_TAG",
    "DEFAULT_MAX_ATTEMPTS",
    "INDEX_DIRECTORY",
    "DeltaFile",
    "DeltaPruneResult",
    "DeltaRewritePlan",
    "FilterOptions",
    "JobOutcome",
    "RewriteJob",
    "TableCheckReport",
    "TablePruneReport",
    "TableRewriteReport",
    "build_index",
    "check",
    "commit_rewrite",
    "compact_index",
    "file_storage_options",
    "has_index",
    "index_location",
    "lookup",
    "lookup_text",
    "plan_rewrite",
    "prune",
    "refresh_index",
    "rewrite_bloom_filters",
    "run_job",
]

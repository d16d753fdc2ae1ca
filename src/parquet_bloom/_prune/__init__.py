"""Pruning a pyarrow dataset's row groups with Bloom filters: the filter expression read as a
tree of what Bloom filters can decide (:mod:`~parquet_bloom._prune.expression`), then each
file's row groups probed against it (:mod:`~parquet_bloom._prune.dataset`)."""

from parquet_bloom._prune.dataset import prune
from parquet_bloom._prune.report import PruneReport, PruneResult

__all__ = ["PruneReport", "PruneResult", "prune"]

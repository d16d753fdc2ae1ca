"""parquet-bloom: read, probe and write the split-block Bloom filters of Parquet files.

Data flows one way: bytes -> :mod:`~parquet_bloom._format` (footer structs) ->
:mod:`~parquet_bloom._reader` (checked filters) -> :mod:`~parquet_bloom._sbbf` (answers); values
flow through :mod:`~parquet_bloom._plain` (PLAIN bytes, XXH64) into the filters.
"""

from parquet_bloom._audit import CheckReport, FileReport, Violation, check_file, inspect_file
from parquet_bloom._plain import PHYSICAL_TYPES, hash_value, hash_values
from parquet_bloom._prune import PruneReport, PruneResult, prune
from parquet_bloom._reader import BloomFilterReader, BloomFilterWarning
from parquet_bloom._rewrite import (
    RewriteReport,
    rewrite_bloom_filters,
    rewrite_files,
    serialize_bloom_filter,
    set_bloom_filter_location,
)
from parquet_bloom._sbbf import SplitBlockBloomFilter, optimal_num_bytes
from parquet_bloom._sizing import FLAVORS, expected_num_bytes, fold_to_fpp, matching_flavors
from parquet_bloom.errors import BloomFilterError, CorruptFileError, UnsupportedFileError

__all__ = [
    "FLAVORS",
    "PHYSICAL_TYPES",
    "BloomFilterError",
    "BloomFilterReader",
    "BloomFilterWarning",
    "CheckReport",
    "CorruptFileError",
    "FileReport",
    "PruneReport",
    "PruneResult",
    "RewriteReport",
    "SplitBlockBloomFilter",
    "UnsupportedFileError",
    "Violation",
    "check_file",
    "expected_num_bytes",
    "fold_to_fpp",
    "hash_value",
    "hash_values",
    "inspect_file",
    "matching_flavors",
    "optimal_num_bytes",
    "prune",
    "rewrite_bloom_filters",
    "rewrite_files",
    "serialize_bloom_filter",
    "set_bloom_filter_location",
]
__version__ = "0.1.0"

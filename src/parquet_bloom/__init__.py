"""parquet-bloom: read, probe, check and write the split-block Bloom filters of Parquet files.

The public API is what this package exports (``__all__``), with :mod:`parquet_bloom.spark`,
:mod:`parquet_bloom.testing` and :mod:`parquet_bloom.errors`; every module whose name starts
with an underscore is private (docs/api.md lists the API, docs/architecture.md the modules).

Names are imported on first use (PEP 562), so ``import parquet_bloom`` costs only what a name
needs: a filter needs numpy and xxhash, a file's footer thrift, and pruning and checking load
pyarrow when they are first called for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from parquet_bloom.errors import (
    BloomFilterError,
    CorruptFileError,
    DecryptionError,
    FileReadError,
    MissingKeyError,
    TableFileError,
    UnsupportedFileError,
)

if TYPE_CHECKING:
    from parquet_bloom._advise import Advice, advise
    from parquet_bloom._audit import (
        CheckReport,
        FileReport,
        Violation,
        check_file,
        inspect_file,
    )
    from parquet_bloom._crypto import DecryptionKeys
    from parquet_bloom._io.limits import RequestLimits, get_request_limits, request_limits
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

__version__ = "0.1.0"

# Where each public name lives: the private module imported when the name is first used.
_HOMES = {
    "Advice": "_advise",
    "advise": "_advise",
    "CheckReport": "_audit",
    "FileReport": "_audit",
    "Violation": "_audit",
    "check_file": "_audit",
    "inspect_file": "_audit",
    "DecryptionKeys": "_crypto",
    "RequestLimits": "_io.limits",
    "get_request_limits": "_io.limits",
    "request_limits": "_io.limits",
    "PHYSICAL_TYPES": "_plain",
    "hash_value": "_plain",
    "hash_values": "_plain",
    "PruneReport": "_prune",
    "PruneResult": "_prune",
    "prune": "_prune",
    "BloomFilterReader": "_reader",
    "BloomFilterWarning": "_reader",
    "RewriteReport": "_rewrite",
    "rewrite_bloom_filters": "_rewrite",
    "rewrite_files": "_rewrite",
    "serialize_bloom_filter": "_rewrite",
    "set_bloom_filter_location": "_rewrite",
    "SplitBlockBloomFilter": "_sbbf",
    "optimal_num_bytes": "_sbbf",
    "FLAVORS": "_sizing",
    "expected_num_bytes": "_sizing",
    "fold_to_fpp": "_sizing",
    "matching_flavors": "_sizing",
}

__all__ = [
    "FLAVORS",
    "PHYSICAL_TYPES",
    "Advice",
    "BloomFilterError",
    "BloomFilterReader",
    "BloomFilterWarning",
    "CheckReport",
    "CorruptFileError",
    "DecryptionError",
    "DecryptionKeys",
    "FileReadError",
    "FileReport",
    "MissingKeyError",
    "PruneReport",
    "PruneResult",
    "RequestLimits",
    "RewriteReport",
    "SplitBlockBloomFilter",
    "TableFileError",
    "UnsupportedFileError",
    "Violation",
    "advise",
    "check_file",
    "expected_num_bytes",
    "fold_to_fpp",
    "get_request_limits",
    "hash_value",
    "hash_values",
    "inspect_file",
    "matching_flavors",
    "optimal_num_bytes",
    "prune",
    "request_limits",
    "rewrite_bloom_filters",
    "rewrite_files",
    "serialize_bloom_filter",
    "set_bloom_filter_location",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'parquet_bloom' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"parquet_bloom.{home}"), name)
    globals()[name] = value  # later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

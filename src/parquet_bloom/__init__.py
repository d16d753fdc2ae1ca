"""parquet-bloom: read, probe and write the split-block Bloom filters of Parquet files.

Data flows one way: bytes -> :mod:`~parquet_bloom.format` (footer structs) ->
:mod:`~parquet_bloom.reader` (checked filters) -> :mod:`~parquet_bloom.sbbf` (answers); values
flow through :mod:`~parquet_bloom.hashing` (PLAIN bytes, XXH64) into the filters.
"""

from parquet_bloom.errors import BloomFilterError, CorruptFileError, UnsupportedFileError
from parquet_bloom.hashing import PHYSICAL_TYPES, hash_value, hash_values
from parquet_bloom.prune import PruneReport, PruneResult, prune
from parquet_bloom.reader import BloomFilterReader, BloomFilterWarning
from parquet_bloom.sbbf import SplitBlockBloomFilter, optimal_num_bytes

__all__ = [
    "PHYSICAL_TYPES",
    "BloomFilterError",
    "BloomFilterReader",
    "BloomFilterWarning",
    "CorruptFileError",
    "PruneReport",
    "PruneResult",
    "SplitBlockBloomFilter",
    "UnsupportedFileError",
    "hash_value",
    "hash_values",
    "optimal_num_bytes",
    "prune",
]
__version__ = "0.1.0"

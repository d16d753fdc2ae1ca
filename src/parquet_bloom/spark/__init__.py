"""Parquet split-block Bloom filters at cluster scale, with PySpark.

Spark is the distributed engine here; this package only adds what Spark lacks: the Parquet
filter's hashing and bit layout, run on the executors with the numpy core. It builds filters
over DataFrame columns (:func:`build_filter`, :func:`build_filters`), probes them in queries
(:func:`might_contain`, :func:`semi_join_prefilter`) and reads the filters of a dataset's files
(:func:`bloom_filter_index`, :func:`files_might_contain`) and builds a Bloom index of them
(:func:`build_index`), always hashing values as Spark writes
them to Parquet, so that its filters and Spark's agree.

Needs PySpark (``pip install 'parquet-bloom[spark]'``), a Java 17+ runtime and a classic (not
Spark Connect) session. Importing it starts no JVM. An optional jar (:func:`jar_path`) takes the
build and the INT96 hash into the JVM. How to use it, and why it works as it does:
docs/spark.md.
"""

from __future__ import annotations

from parquet_bloom.errors import MissingExtraError

try:
    import pyspark  # noqa: F401  # fail here, with what to install, rather than in a submodule
except ImportError as err:  # tests/test_extras.py makes it missing
    raise MissingExtraError(
        "parquet_bloom.spark (with a Java 17+ runtime)", package="pyspark", extra="spark"
    ) from err

from parquet_bloom.spark._build import build_filter, build_filters
from parquet_bloom.spark._files import (
    INDEX_SCHEMA,
    ROW_GROUPS_SCHEMA,
    bloom_filter_index,
    files_might_contain,
)
from parquet_bloom.spark._index import build_index
from parquet_bloom.spark._jvm import jar_path
from parquet_bloom.spark._probe import might_contain, semi_join_prefilter
from parquet_bloom.spark._tables import rewrite_files, rewrite_table

__all__ = [
    "INDEX_SCHEMA",
    "ROW_GROUPS_SCHEMA",
    "bloom_filter_index",
    "build_filter",
    "build_filters",
    "build_index",
    "files_might_contain",
    "jar_path",
    "might_contain",
    "rewrite_files",
    "rewrite_table",
    "semi_join_prefilter",
]

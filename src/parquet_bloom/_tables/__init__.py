"""What Delta Lake and Iceberg tables share here: telling that a file belongs to a table
(:mod:`~parquet_bloom._tables.markers`), the plan/run/commit stages of a table rewrite
(:mod:`~parquet_bloom._tables.jobs`) and the report of a table scan's pruning
(:mod:`~parquet_bloom._tables.scan`). The table formats themselves are
:mod:`parquet_bloom.delta` and :mod:`parquet_bloom.iceberg`; this package never imports a table
library.
"""

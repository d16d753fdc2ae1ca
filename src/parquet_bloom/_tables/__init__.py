"""What Delta Lake and Iceberg tables share here: telling that a file belongs to a table
(:mod:`~parquet_bloom._tables.markers`), a directory that is a table read as its live files
(:mod:`~parquet_bloom._tables.directories`, which imports a table library only when it finds
a table), the plan/run/commit stages of a table rewrite
(:mod:`~parquet_bloom._tables.jobs`) and the report of a table scan's pruning
(:mod:`~parquet_bloom._tables.scan`), none of which imports a table library; and each format's
own modules, named after it (``delta_*.py``, ``iceberg_*.py``), which import theirs and are
imported by :mod:`parquet_bloom.delta`, :mod:`parquet_bloom.iceberg` and the Spark runner only
when a table of that format is at hand.
"""

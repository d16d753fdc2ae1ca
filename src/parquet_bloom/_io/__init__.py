"""The one place bytes cross the process boundary.

- :mod:`~parquet_bloom._io.ranges`: byte ranges, coalescing and a buffer of what was read;
  pure planning, no IO.
- :mod:`~parquet_bloom._io.source`: :class:`~parquet_bloom._io.source.ByteSource`, counted
  and exact positioned reads from a local file, a file object, an fsspec filesystem or a
  pyarrow filesystem; and :func:`~parquet_bloom._io.source.read_footer`, the one footer read.
- :mod:`~parquet_bloom._io.failures`: a store's failures to read, list or look up an object, as
  the library's located errors (reads and listings share it).
- :mod:`~parquet_bloom._io.sink`: atomic output (a temporary file, fsync, rename) and the
  copies of unchanged bytes into it.

Everything above this package plans reads as ranges from metadata and hands them here.
"""

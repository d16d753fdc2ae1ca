"""Add, resize and remove the Bloom filters of an existing Parquet file without re-encoding it.

Most files were written without filters, or with filters of the wrong size (1 MiB for a chunk
of 300 values). Rewriting the data fixes that at the price of decoding and re-encoding every
page; here the pages stay as they are, byte for byte, and only the filters and the footer
change:

1. The footer is decoded with every field and must re-encode to exactly its own bytes, else a
   field our parquet.thrift does not know would be dropped silently (``force=True`` allows it).
2. Each chosen chunk's values are hashed as the file stores them, from its pages, and a filter
   is sized for the chunk's own distinct count (:mod:`~parquet_bloom._rewrite.build`).
3. The new file is the old one minus the old filters' byte ranges, wherever the writer put them
   (docs/format-notes.md, where writers place filters), then every filter together, then the
   new footer (:mod:`~parquet_bloom._rewrite.output`).
4. Removing bytes moves what came after them: every absolute offset in the footer and in the
   offset indexes is relocated (docs/format-notes.md, page index), planned from the footer
   before any output is written (:mod:`~parquet_bloom._rewrite.plan`, pure).
5. The output appears only when complete (:class:`~parquet_bloom._io.sink.FileSink`); ``src``
   is only ever read, through one :class:`~parquet_bloom._io.source.ByteSource`
   (:mod:`~parquet_bloom._rewrite.api`).
"""

from parquet_bloom._rewrite.api import RewriteReport, rewrite_bloom_filters, rewrite_files
from parquet_bloom._rewrite.plan import serialize_bloom_filter, set_bloom_filter_location

__all__ = [
    "RewriteReport",
    "rewrite_bloom_filters",
    "rewrite_files",
    "serialize_bloom_filter",
    "set_bloom_filter_location",
]

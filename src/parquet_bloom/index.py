"""A Bloom index of many Parquet files: their row groups' filters for a column, bit-sliced into
one Puffin file, so that a lookup of a value reads eight slices of N bits (N row groups) and the
entries of its candidates, instead of a filter a file (docs/index.md).

    >>> from parquet_bloom import index
    >>> report = index.build_index("lake/orders/", ["order_id"], "lake/orders.bloom-index")
    >>> index.lookup("lake/orders/", "order_id", 42, index="lake/orders.bloom-index").files

:func:`lookup` answers for the dataset's live files: the index for the files it knows
unchanged, each other file through its own filters. :class:`BloomIndex` answers for the files
the index was built from, as they were (docs/index.md, "What a lookup guarantees").

Token and n-gram filters (:class:`TextFilter`, ``build_index(..., text=[...])``): ClickHouse's
``tokenbf_v1``/``ngrambf_v1`` per row group of a string column, so that ``prune`` with the index
decides ``match_substring``, ``starts_with``, ``ends_with``, ``match_like`` and
:func:`has_token` (docs/index.md#token-and-n-gram-filters); :func:`lookup_text` lists the files
and row groups that may match a token or substring.
"""

from __future__ import annotations

from parquet_bloom._index.build import ColumnSummary, IndexBuildReport, build_index
from parquet_bloom._index.entries import Entry
from parquet_bloom._index.files import IndexedFile, dataset_files
from parquet_bloom._index.live import DatasetLookup, lookup
from parquet_bloom._index.lookup import BloomIndex, IndexLookup
from parquet_bloom._index.maintain import CompactReport, compact_index, refresh_index
from parquet_bloom._index.text import TextFilter, TextSpec
from parquet_bloom._index.text_build import TextSummary
from parquet_bloom._index.text_lookup import TextLookup, lookup_text
from parquet_bloom._prune.text import has_token

__all__ = [
    "BloomIndex",
    "ColumnSummary",
    "CompactReport",
    "DatasetLookup",
    "Entry",
    "IndexBuildReport",
    "IndexLookup",
    "IndexedFile",
    "TextFilter",
    "TextLookup",
    "TextSpec",
    "TextSummary",
    "build_index",
    "compact_index",
    "dataset_files",
    "has_token",
    "lookup",
    "lookup_text",
    "refresh_index",
]

"""The names an index's Puffin file uses: its blob types and their properties (docs/index.md).

For each indexed column, its row groups fall into *classes*:

- one class per filter size: a ``parquet-bloom-sbbf-slices-v1`` blob (the bit slices of the
  class's filters, :mod:`.slices`) and a ``parquet-bloom-row-groups-v1`` blob (its entries,
  :mod:`.entries`, in the order of the slices' bits), joined by their ``class`` property;
- one class without filters (``filters`` = ``none``): the row groups that have no usable
  filter for the column (none written, one that could not be read, a column stored as another
  type than the index's), and files that could not be read at all (``row_group`` -1: the whole
  file). Its entries blob alone; every lookup returns all of them.

A ``parquet-bloom-files-v1`` blob lists every file the index was built from (JSON: path, size,
modification time, sequence number), for lookups that check the index against a table's or a
dataset's live files.
"""

from __future__ import annotations

__all__ = [
    "ARROW_FIELD",
    "CLASS",
    "COLUMN",
    "FILES_BLOB",
    "FILTERS",
    "FORMAT_VERSION",
    "HASHES",
    "KIND",
    "NGRAM",
    "NUM_BYTES",
    "PATH_WIDTH",
    "ROW_GROUPS",
    "ROW_GROUPS_BLOB",
    "SEED",
    "SLICES_BLOB",
    "TEXT",
    "TEXT_ROW_GROUPS_BLOB",
    "TEXT_SLICES_BLOB",
    "TYPE_PREFIX",
    "VERSION_PROPERTY",
]

SLICES_BLOB = "parquet-bloom-sbbf-slices-v1"
ROW_GROUPS_BLOB = "parquet-bloom-row-groups-v1"
FILES_BLOB = "parquet-bloom-files-v1"
# A token or n-gram filter of a column (docs/index.md#token-and-n-gram-filters): the slices of
# its row groups' filters, and the entries of its class ("0") and of the row groups without one
# ("none"), joined by ``column``, ``text`` and ``class``.
TEXT_SLICES_BLOB = "parquet-bloom-text-slices-v1"
TEXT_ROW_GROUPS_BLOB = "parquet-bloom-text-row-groups-v1"

# Blob properties.
COLUMN = "column"  # the column's dotted path
CLASS = "class"  # the class's number within its column
NUM_BYTES = "num-bytes"  # the class's filter size
ROW_GROUPS = "row-groups"  # N
PATH_WIDTH = "path-width"  # the entries' path field width
FILTERS = "filters"  # "sbbf", or "none" for the class without filters
TYPE_PREFIX = "type."  # the column's type (parquet_bloom._format.leaf_type_properties)
# A text filter's blob properties: ``text``, its ClickHouse index type (``tokenbf_v1(size,
# hashes,seed)``, ``ngrambf_v1(n,size,hashes,seed)``), and the parts of it, each on its own.
TEXT = "text"
KIND = "kind"
NGRAM = "ngram-size"
HASHES = "hashes"
SEED = "seed"
# The column's top-level Arrow field as pyarrow reads the first file that has it (an Arrow IPC
# schema of that one field, hex): what a scan's comparison is checked against.
ARROW_FIELD = "arrow-field"

# File properties.
VERSION_PROPERTY = "parquet-bloom.index-version"
FORMAT_VERSION = "1"

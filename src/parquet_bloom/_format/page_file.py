"""A Parquet file made of a few pages of one column chunk of another file.

pyarrow reads a Parquet file by row groups; it cannot decode one page of a column chunk. To
read the rows of a few data pages only (the pages a lookup's matching rows lie in, found
through the OffsetIndex), those pages' bytes are copied unchanged, after the chunk's
dictionary page if it has one, into a file of their own: one row group of one column chunk,
whose footer is the original's for that column (its schema element, its codec and encodings,
its writer's ``created_by``, which readers consult for known writer bugs, its column order,
and its ``ARROW:schema`` narrowed to the one field, so that pyarrow gives the column the Arrow
type it gives it in the original file). Only flat columns (a top-level primitive field) can be
cut so: a data page of a flat column holds one value, or one null, a row, so its rows are its
values and a row group of its pages alone is a valid one. There is no IO here: the caller
reads the bytes and hands them in (parquet-format ``README.md``, file layout; ``PageIndex.md``,
the OffsetIndex).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from parquet_bloom._format.footer import FOOTER_TRAILER_SIZE, MAGIC, encode_file_metadata

__all__ = ["FlatColumn", "flat_columns", "page_file"]

# SchemaElement.repetition_type REPEATED (parquet.thrift FieldRepetitionType).
_REPEATED = 2
ARROW_SCHEMA_KEY = "ARROW:schema"


@dataclass(frozen=True)
class FlatColumn:
    """A top-level primitive field of a footer: its schema element's index in ``schema`` and
    its column chunk's index in each row group."""

    element: int
    leaf: int


def flat_columns(metadata: Any) -> dict[str, FlatColumn]:
    """The footer's flat columns (a primitive field at the top level, not repeated) by name;
    a name that two top-level fields share is left out."""
    schema = metadata.schema or []
    if not schema:
        return {}
    found: dict[str, FlatColumn] = {}
    seen: set[str] = set()
    at, leaf = 1, 0
    for _ in range(schema[0].num_children or 0):
        if at >= len(schema):
            return {}  # a schema shorter than it says: nothing here
        element = schema[at]
        name = element.name
        end, leaves = _subtree_end(schema, at)
        if name in seen:
            found.pop(name, None)
        elif end == at + 1 and not element.num_children and element.repetition_type != _REPEATED:
            found[name] = FlatColumn(at, leaf)
        seen.add(name)
        at, leaf = end, leaf + leaves
    return found


def _subtree_end(schema: Sequence[Any], at: int) -> tuple[int, int]:
    """The index after the subtree at ``at`` and the leaves it holds."""
    pending, leaves, i = 1, 0, at
    while pending and i < len(schema):
        children = schema[i].num_children or 0
        if not children:
            leaves += 1
        pending += children - 1
        i += 1
    return i, leaves


def page_file(
    metadata: Any,
    row_group: int,
    column: FlatColumn,
    dictionary: bytes,
    pages: Sequence[bytes],
    rows: int,
    arrow_schema: str | None,
) -> bytes:
    """A Parquet file of one row group of ``rows`` rows: the column chunk ``column`` of
    ``metadata``'s row group ``row_group``, holding its ``dictionary`` page's bytes (empty
    when it has none) then the data ``pages`` given (each a whole page, header and all, as
    the file holds it). ``arrow_schema``: the ``ARROW:schema`` value to carry (the field's
    own, base64), or None for none."""
    group = metadata.row_groups[row_group]
    chunk = group.columns[column.leaf]
    meta = copy.copy(chunk.meta_data)
    body = dictionary + b"".join(pages)
    start = len(MAGIC)
    meta.dictionary_page_offset = start if dictionary else None
    meta.data_page_offset = start + len(dictionary)
    meta.index_page_offset = None
    meta.num_values = rows  # a flat column's page: one value (or null) a row
    meta.total_compressed_size = len(body)
    meta.total_uncompressed_size = len(body)  # not read by readers; the pages say their own
    for name in (
        "statistics",
        "encoding_stats",
        "bloom_filter_offset",
        "bloom_filter_length",
        "size_statistics",
        "geospatial_statistics",
    ):
        if hasattr(meta, name):
            setattr(meta, name, None)
    new_chunk = copy.copy(chunk)
    new_chunk.file_path = None
    new_chunk.file_offset = start
    new_chunk.meta_data = meta
    for index in ("offset_index", "column_index"):  # the page index is not carried
        setattr(new_chunk, f"{index}_offset", None)
        setattr(new_chunk, f"{index}_length", None)
    new_chunk.crypto_metadata = new_chunk.encrypted_column_metadata = None
    new_group = copy.copy(group)
    new_group.columns = [new_chunk]
    new_group.num_rows = rows
    new_group.total_byte_size = len(body)
    new_group.total_compressed_size = len(body)
    new_group.file_offset = start
    new_group.sorting_columns = None
    new_group.ordinal = 0
    root = copy.copy(metadata.schema[0])
    root.num_children = 1
    footer = copy.copy(metadata)
    footer.schema = [root, metadata.schema[column.element]]
    footer.num_rows = rows
    footer.row_groups = [new_group]
    footer.key_value_metadata = None
    if arrow_schema is not None:
        pair = next(kv for kv in metadata.key_value_metadata if kv.key == ARROW_SCHEMA_KEY)
        pair = copy.copy(pair)
        pair.value = arrow_schema
        footer.key_value_metadata = [pair]
    orders = metadata.column_orders
    footer.column_orders = [orders[column.leaf]] if orders and column.leaf < len(orders) else None
    footer.encryption_algorithm = None
    footer.footer_signing_key_metadata = None
    encoded = encode_file_metadata(footer)
    trailer = len(encoded).to_bytes(FOOTER_TRAILER_SIZE - len(MAGIC), "little") + MAGIC
    return MAGIC + body + encoded + trailer


def arrow_schema_value(metadata: Any) -> str | None:
    """The footer's ``ARROW:schema`` value, or None."""
    for pair in metadata.key_value_metadata or ():
        if pair.key == ARROW_SCHEMA_KEY:
            value: str | None = pair.value
            return value
    return None

"""Tests for parquet_bloom._format.schema: schema leaves against pyarrow's view of the same
file, and schemas whose tree does not add up or holds enum values newer than our IDL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from parquet_bloom import _format as fmt
from parquet_bloom.errors import CorruptFileError
from tests.format.helpers import mutated


def test_schema_leaves_match_pyarrow(rich_file: Path, rich_footer: bytes) -> None:
    md = fmt.decode_file_metadata(rich_footer)
    leaves = fmt.schema_leaves(md)
    schema = pq.ParquetFile(rich_file).schema
    assert len(leaves) == len(schema)
    for j, leaf in enumerate(leaves):
        col = schema.column(j)
        assert leaf.column_index == j
        assert leaf.path == col.path
        assert leaf.path_in_schema == tuple(col.path.split("."))
        assert leaf.physical_type == col.physical_type
        # pyarrow reports NONE where the footer holds a converted type that Arrow ignores
        # (e.g. TIMESTAMP_MILLIS for a timestamp not adjusted to UTC); we report the footer.
        if col.converted_type != "NONE":
            assert leaf.converted_type == col.converted_type
        if col.physical_type == "FIXED_LEN_BYTE_ARRAY":
            assert leaf.type_length == col.length
    by_path = {leaf.path: leaf for leaf in leaves}
    d = by_path["d"]
    assert (d.precision, d.scale, d.converted_type) == (10, 2, "DECIMAL")
    assert d.logical_type is not None
    assert d.logical_type.DECIMAL.precision == 10 and d.logical_type.DECIMAL.scale == 2
    s_type, ts_type = by_path["s"].logical_type, by_path["ts"].logical_type
    assert s_type is not None and s_type.STRING is not None
    assert ts_type is not None
    ts = ts_type.TIMESTAMP
    assert ts.isAdjustedToUTC and ts.unit.MICROS is not None
    assert by_path["i64"].logical_type is None
    assert by_path["i64"].repetition == "OPTIONAL"
    assert by_path["tags.list.element"].repetition == "OPTIONAL"
    assert {leaf.path for leaf in leaves} >= {"st.a", "st.b.c", "m.key_value.key"}


def test_empty_schema(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.schema = []

    with pytest.raises(CorruptFileError, match="empty schema"):
        fmt.decode_file_metadata(mutated(rich_footer, change))


@pytest.mark.parametrize("delta", [-1, 1, 10**6])
def test_inconsistent_schema_tree(rich_footer: bytes, delta: int) -> None:
    def change(md: Any) -> None:
        md.schema[0].num_children += delta

    with pytest.raises(CorruptFileError, match="schema"):
        fmt.decode_file_metadata(mutated(rich_footer, change))


def test_newer_enum_values_are_named_unknown(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        leaf = md.schema[1]  # i64
        leaf.repetition_type = fmt.FieldRepetitionType.VECTOR
        leaf.converted_type = 99
        for rg in md.row_groups:
            rg.columns[0].meta_data.type = 42
        leaf.type = 42

    md = fmt.decode_file_metadata(mutated(rich_footer, change))
    leaf = fmt.schema_leaves(md)[0]
    assert (leaf.repetition, leaf.converted_type, leaf.physical_type) == (
        "VECTOR",
        "UNKNOWN(99)",
        "UNKNOWN(42)",
    )
    assert fmt.column_chunks(md)[0].physical_type == "UNKNOWN(42)"

"""Tests for parquet_bloom.format: footer and Bloom filter header decoding against files
written by pyarrow, byte-exact re-encoding, and hostile input (truncation, bit flips,
lying lengths) that must only ever raise CorruptFileError."""

from __future__ import annotations

import datetime
import decimal
import random
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquet_bloom import _format as fmt
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

# --------------------------------------------------------------------------------------------
# Helpers and fixtures
# --------------------------------------------------------------------------------------------

ROWS = 300
ROWS_PER_GROUP = 100
BLOOM_COLUMNS = ("i64", "s", "st.b.c", "tags.list.element")


def _rich_table() -> pa.Table:
    n = ROWS
    table = pa.table(
        {
            "i64": pa.array(range(n), pa.int64()),
            "s": pa.array([f"v{i}" for i in range(n)]),
            "st": pa.array([{"a": i, "b": {"c": str(i)}} for i in range(n)]),
            "tags": pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int32())),
            "m": pa.array([[("k", i)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
            "d": pa.array([decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(10, 2)),
            "d38": pa.array([decimal.Decimal(i) for i in range(n)], pa.decimal128(38, 0)),
            "ts": pa.array(
                [datetime.datetime(2020, 1, 1) + datetime.timedelta(seconds=i) for i in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "ts_ms": pa.array(range(n), pa.timestamp("ms")),
            "day": pa.array(range(n), pa.date32()),
            "f": pa.array([float(i) if i % 7 else float("nan") for i in range(n)]),
            "b": pa.array([i % 2 == 0 for i in range(n)]),
            "fixed": pa.array([i.to_bytes(4, "big") for i in range(n)], pa.binary(4)),
            "u8": pa.array([i % 256 for i in range(n)], pa.uint8()),
            "maybe": pa.array([None if i % 3 else i for i in range(n)], pa.int32()),
        }
    )
    # Key-value metadata that is not valid UTF-8: kept as bytes thanks to KeyValue: binary.
    return table.replace_schema_metadata({b"k\xff": b"\xfe\x00v", "plain": "text"})


def _write(path: Path, table: pa.Table, **kwargs: Any) -> Path:
    pq.write_table(table, path, **kwargs)
    return path


def _footer(path: Path) -> bytes:
    data = path.read_bytes()
    length = fmt.parse_footer_trailer(data[-fmt.FOOTER_TRAILER_SIZE :], file_size=len(data))
    return data[-fmt.FOOTER_TRAILER_SIZE - length : -fmt.FOOTER_TRAILER_SIZE]


@pytest.fixture(scope="module")
def rich_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("format") / "rich.parquet"
    return _write(
        path,
        _rich_table(),
        row_group_size=ROWS_PER_GROUP,
        write_statistics=True,
        write_page_index=True,
        bloom_filter_options={
            "i64": {"ndv": 1000, "fpp": 0.01},
            "s": True,
            "st.b.c": True,
            "tags.list.element": {"ndv": 50, "fpp": 0.05},
        },
    )


@pytest.fixture(scope="module")
def rich_footer(rich_file: Path) -> bytes:
    return _footer(rich_file)


@pytest.fixture(scope="module")
def small_footer(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A small but complete footer (stats, page index, bloom filter, nesting) for the
    exhaustive byte-flip tests."""
    path = tmp_path_factory.mktemp("format") / "small.parquet"
    table = pa.table(
        {
            "x": pa.array([1, 2, 3], pa.int64()),
            "st": pa.array([{"a": "p"}, {"a": "q"}, None]),
            "l": pa.array([[1.5], [], None], pa.list_(pa.float64())),
        }
    )
    _write(path, table, write_page_index=True, bloom_filter_options={"x": True})
    return _footer(path)


def _only_corrupt(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call fn; success and CorruptFileError are fine, any other exception fails the test."""
    try:
        return fn(*args, **kwargs)
    except CorruptFileError:
        return None


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# --------------------------------------------------------------------------------------------
# Footer trailer
# --------------------------------------------------------------------------------------------


def test_trailer_of_a_pyarrow_file(rich_file: Path) -> None:
    data = rich_file.read_bytes()
    length = fmt.parse_footer_trailer(data[-8:], file_size=len(data))
    assert length == pq.read_metadata(rich_file).serialized_size
    assert data[:4] == fmt.MAGIC


def test_trailer_encrypted_footer_is_unsupported() -> None:
    with pytest.raises(UnsupportedFileError, match="encrypted Parquet footers are not supported"):
        fmt.parse_footer_trailer(struct.pack("<I", 100) + b"PARE", file_size=1000)


@pytest.mark.parametrize("magic", [b"PAR0", b"\x00\x00\x00\x00", b"1RAP"])
def test_trailer_bad_magic(magic: bytes) -> None:
    with pytest.raises(CorruptFileError, match=r"trailing magic.*offset 996") as info:
        fmt.parse_footer_trailer(struct.pack("<I", 100) + magic, file_size=1000)
    assert info.value.offset == 996


@pytest.mark.parametrize("length", [0, 989, 2**32 - 1])
def test_trailer_length_that_does_not_fit(length: int) -> None:
    # 1000 bytes leave 1000 - 8 - 4 = 988 for the footer.
    with pytest.raises(CorruptFileError, match=rf"footer length {length} at offset 992") as info:
        fmt.parse_footer_trailer(struct.pack("<I", length) + b"PAR1", file_size=1000)
    assert "988" in str(info.value)
    assert fmt.parse_footer_trailer(struct.pack("<I", 988) + b"PAR1", file_size=1000) == 988


def test_trailer_of_a_tiny_file() -> None:
    with pytest.raises(CorruptFileError, match="too small"):
        fmt.parse_footer_trailer(struct.pack("<I", 0) + b"PAR1", file_size=8)


def test_trailer_over_the_footer_limit() -> None:
    length = fmt.MAX_FOOTER_SIZE + 1
    with pytest.raises(UnsupportedFileError, match="limit"):
        fmt.parse_footer_trailer(struct.pack("<I", length) + b"PAR1", file_size=2 * length)


def test_trailer_must_be_8_bytes() -> None:
    with pytest.raises(ValueError, match="last 8 bytes"):
        fmt.parse_footer_trailer(b"PAR1", file_size=100)


# --------------------------------------------------------------------------------------------
# Footer decoding against pyarrow
# --------------------------------------------------------------------------------------------


def test_column_chunks_match_pyarrow(rich_file: Path, rich_footer: bytes) -> None:
    md = fmt.decode_file_metadata(rich_footer)
    chunks = fmt.column_chunks(md)
    arrow = pq.ParquetFile(rich_file).metadata
    assert len(chunks) == arrow.num_row_groups * arrow.num_columns
    assert md.num_rows == arrow.num_rows == ROWS
    assert md.created_by == arrow.created_by
    with_bloom = set()
    for info in chunks:
        col = arrow.row_group(info.row_group).column(info.column_index)
        assert info.path == col.path_in_schema
        assert info.physical_type == col.physical_type
        assert info.num_values == col.num_values
        assert info.data_page_offset == col.data_page_offset
        assert info.total_compressed_size == col.total_compressed_size
        assert info.dictionary_page_offset == col.dictionary_page_offset
        assert info.bloom_filter_offset == col.bloom_filter_offset
        assert info.bloom_filter_length == col.bloom_filter_length
        assert not info.encrypted
        if info.bloom_filter_offset is not None:
            with_bloom.add(info.path)
    assert with_bloom == set(BLOOM_COLUMNS)
    assert [(c.row_group, c.column_index) for c in chunks] == [
        (i, j) for i in range(arrow.num_row_groups) for j in range(arrow.num_columns)
    ]


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


def test_fast_decode_skips_what_readers_do_not_need(rich_footer: bytes) -> None:
    fast = fmt.decode_file_metadata(rich_footer)
    full = fmt.decode_file_metadata(rich_footer, full=True)
    assert full.key_value_metadata and full.column_orders
    assert fast.key_value_metadata is None and fast.column_orders is None
    assert fast.schema == full.schema
    for rg_fast, rg_full in zip(fast.row_groups, full.row_groups, strict=True):
        assert rg_fast.total_byte_size is None
        assert rg_fast.num_rows == rg_full.num_rows
        assert rg_fast.file_offset == rg_full.file_offset
        assert rg_fast.ordinal == rg_full.ordinal
        for c_fast, c_full in zip(rg_fast.columns, rg_full.columns, strict=True):
            m_fast, m_full = c_fast.meta_data, c_full.meta_data
            assert m_full.statistics is not None and m_full.encodings
            assert m_fast.statistics is None and m_fast.encodings is None
            assert m_fast.encoding_stats is None and m_fast.size_statistics is None
            assert c_fast.offset_index_offset == c_full.offset_index_offset is not None
            assert c_fast.column_index_offset == c_full.column_index_offset is not None
            for name in ("type", "path_in_schema", "codec", "num_values", "data_page_offset"):
                assert getattr(m_fast, name) == getattr(m_full, name)
            assert m_fast.bloom_filter_offset == m_full.bloom_filter_offset
    assert fmt.column_chunks(fast) == fmt.column_chunks(full)


def test_decode_accepts_memoryview(rich_footer: bytes) -> None:
    md = fmt.decode_file_metadata(memoryview(rich_footer))
    assert md == fmt.decode_file_metadata(rich_footer)


def test_non_utf8_key_value_metadata_is_kept_as_bytes(rich_footer: bytes) -> None:
    md = fmt.decode_file_metadata(rich_footer, full=True)
    pairs = {kv.key: kv.value for kv in md.key_value_metadata}
    assert pairs[b"k\xff"] == b"\xfe\x00v"
    assert pairs[b"plain"] == b"text"


# --------------------------------------------------------------------------------------------
# Lossless round trip
# --------------------------------------------------------------------------------------------


def _variants(tmp_path: Path) -> list[Path]:
    table = _rich_table()
    return [
        _write(
            tmp_path / "rich.parquet",
            table,
            row_group_size=ROWS_PER_GROUP,
            write_page_index=True,
            bloom_filter_options={"i64": True, "s": {"ndv": 10, "fpp": 0.1}},
        ),
        _write(tmp_path / "v2.parquet", table, data_page_version="2.0", compression="zstd"),
        _write(
            tmp_path / "nodict.parquet",
            table,
            use_dictionary=False,
            write_statistics=False,
            compression="none",
        ),
        _write(tmp_path / "v1.parquet", table.select(["i64", "s", "d"]), version="1.0"),
        _write(
            tmp_path / "sorted.parquet",
            table.select(["i64"]),
            sorting_columns=[pq.SortingColumn(0, descending=True, nulls_first=True)],
        ),
        _write(tmp_path / "empty.parquet", table.slice(0, 0)),
        _write(tmp_path / "nocols.parquet", pa.table({})),
    ]


def test_full_decode_reencodes_byte_for_byte(tmp_path: Path) -> None:
    for path in _variants(tmp_path):
        footer = _footer(path)
        md = fmt.decode_file_metadata(footer, full=True)
        assert fmt.encode_file_metadata(md) == footer, path.name


def test_reencode_after_a_change_is_read_by_pyarrow(tmp_path: Path, rich_file: Path) -> None:
    """What a footer rewrite does: decode fully, change a field, write the file back."""
    data = rich_file.read_bytes()
    footer = _footer(rich_file)
    md = fmt.decode_file_metadata(footer, full=True)
    md.created_by = "parquet-bloom test"
    new_footer = fmt.encode_file_metadata(md)
    body = data[: -fmt.FOOTER_TRAILER_SIZE - len(footer)]
    out = tmp_path / "rewritten.parquet"
    out.write_bytes(body + new_footer + struct.pack("<I", len(new_footer)) + fmt.MAGIC)
    assert pq.read_metadata(out).created_by == "parquet-bloom test"
    before, after = pq.read_table(rich_file), pq.read_table(out)
    assert after.drop_columns(["f"]).equals(before.drop_columns(["f"]))
    np.testing.assert_array_equal(after["f"].to_numpy(), before["f"].to_numpy())  # NaN == NaN


def test_pure_python_fallback_matches_the_c_decoder(
    rich_footer: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = fmt.decode_file_metadata(rich_footer)
    full = fmt.decode_file_metadata(rich_footer, full=True)
    monkeypatch.setattr(fmt, "_fastbinary", None)
    slow_full = fmt.decode_file_metadata(rich_footer, full=True)
    assert slow_full == full
    assert fmt.encode_file_metadata(slow_full) == rich_footer
    assert fmt.column_chunks(fmt.decode_file_metadata(rich_footer)) == fmt.column_chunks(fast)
    for cut in range(0, len(rich_footer), 97):
        with pytest.raises(CorruptFileError, match="cannot decode the Parquet footer"):
            fmt.decode_file_metadata(rich_footer[:cut])


# --------------------------------------------------------------------------------------------
# Hostile footers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("full", [False, True])
def test_truncated_footer_at_every_offset(rich_footer: bytes, full: bool) -> None:
    for cut in range(len(rich_footer)):
        with pytest.raises(CorruptFileError, match="cannot decode the Parquet footer"):
            fmt.decode_file_metadata(rich_footer[:cut], full=full)


@pytest.mark.parametrize("full", [False, True])
def test_every_byte_of_a_footer_flipped(small_footer: bytes, full: bool) -> None:
    for pos in range(len(small_footer)):
        for flip in (0xFF, 0x01, 0x80):
            bad = bytearray(small_footer)
            bad[pos] ^= flip
            md = _only_corrupt(fmt.decode_file_metadata, bytes(bad), full=full)
            if md is not None:
                _only_corrupt(fmt.column_chunks, md)


def test_random_byte_changes_in_a_large_footer(rich_footer: bytes) -> None:
    rng = random.Random(20260522)
    for _ in range(300):
        bad = bytearray(rich_footer)
        for _ in range(rng.choice((1, 1, 2, 8))):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        md = _only_corrupt(fmt.decode_file_metadata, bytes(bad))
        if md is not None:
            _only_corrupt(fmt.column_chunks, md)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_escape_as_another_error(data: bytes) -> None:
    for full in (False, True):
        md = _only_corrupt(fmt.decode_file_metadata, data, full=full)
        if md is not None:
            _only_corrupt(fmt.column_chunks, md)


# version=1 (0x15 0x02), then field 2 (schema) or field 4 (row_groups) as a list of 2**30
# structs, or an unknown field 15 as a list of 2**30 i64.
HOSTILE_LISTS = {
    "schema": b"\x15\x02" + b"\x19\xfc" + _varint(2**30) + b"\x00" * 16,
    "row_groups": b"\x15\x02" + b"\x39\xfc" + _varint(2**30) + b"\x00" * 16,
    "unknown_field": b"\xf9\xf6" + _varint(2**30) + b"\x00" * 16,
    "string": b"\x15\x02\x58" + _varint(2**31 - 1) + b"\x00" * 16,  # created_by (field 6)
}


@pytest.mark.parametrize("name", sorted(HOSTILE_LISTS))
@pytest.mark.parametrize("full", [False, True])
def test_hostile_lengths_fail_fast(name: str, full: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    for fastbinary in (fmt._fastbinary, None):
        monkeypatch.setattr(fmt, "_fastbinary", fastbinary)
        start = time.perf_counter()
        with pytest.raises(CorruptFileError, match="cannot decode the Parquet footer"):
            fmt.decode_file_metadata(HOSTILE_LISTS[name], full=full)
        assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deeply_nested_unknown_field(depth: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Field 15 holding a struct whose field 1 holds a struct whose field 1 ...
    data = b"\xfc" + b"\x1c" * depth + b"\x00" * (depth + 1)
    for fastbinary in (fmt._fastbinary, None):
        monkeypatch.setattr(fmt, "_fastbinary", fastbinary)
        with pytest.raises(CorruptFileError, match="cannot decode the Parquet footer"):
            fmt.decode_file_metadata(data)


def test_invalid_utf8_in_a_string_field(
    rich_footer: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thrift `string` fields (names, created_by) with invalid UTF-8 decode with U+FFFD,
    the C decoder's behaviour, which the pure-Python fallback is made to share."""
    at = rich_footer.index(b"parquet-cpp-arrow")
    bad = rich_footer[:at] + b"\xff" + rich_footer[at + 1 :]
    for fastbinary in (fmt._fastbinary, None):
        monkeypatch.setattr(fmt, "_fastbinary", fastbinary)
        for full in (False, True):
            md = fmt.decode_file_metadata(bad, full=full)
            assert md.created_by.startswith("\ufffdarquet-cpp-arrow")


def test_footer_over_the_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fmt, "MAX_FOOTER_SIZE", 10)
    with pytest.raises(UnsupportedFileError, match="limit"):
        fmt.decode_file_metadata(b"\x00" * 11)


# --------------------------------------------------------------------------------------------
# Structural validation
# --------------------------------------------------------------------------------------------


def _mutated(footer: bytes, change: Any) -> bytes:
    md = fmt.decode_file_metadata(footer, full=True)
    change(md)
    return fmt.encode_file_metadata(md)


def test_empty_schema(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.schema = []

    with pytest.raises(CorruptFileError, match="empty schema"):
        fmt.decode_file_metadata(_mutated(rich_footer, change))


def test_missing_row_groups(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups = None

    with pytest.raises(CorruptFileError, match="no row group list"):
        fmt.decode_file_metadata(_mutated(rich_footer, change))


def test_row_group_with_too_few_columns(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups[1].columns.pop()

    with pytest.raises(
        CorruptFileError, match=r"row group 1 has 16 column chunks but the schema has 17"
    ) as info:
        fmt.decode_file_metadata(_mutated(rich_footer, change))
    assert info.value.row_group == 1


def test_column_chunk_without_metadata(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups[2].columns[3].meta_data = None

    with pytest.raises(CorruptFileError, match="column chunk 3 of row group 2") as info:
        fmt.decode_file_metadata(_mutated(rich_footer, change))
    assert (info.value.row_group, info.value.column) == (2, "st.b.c")


def test_encrypted_column_without_plaintext_metadata(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        chunk = md.row_groups[0].columns[1]
        chunk.meta_data = None
        chunk.crypto_metadata = fmt.ColumnCryptoMetaData(
            ENCRYPTION_WITH_FOOTER_KEY=fmt.EncryptionWithFooterKey()
        )
        chunk.encrypted_column_metadata = b"\x01\x02"

    md = fmt.decode_file_metadata(_mutated(rich_footer, change))
    chunks = fmt.column_chunks(md)
    info = chunks[1]
    assert (info.row_group, info.column_index, info.path) == (0, 1, "s")
    assert info.encrypted and info.physical_type == "BYTE_ARRAY"
    assert info.bloom_filter_offset is None
    assert not chunks[0].encrypted


def test_path_in_schema_mismatch(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups[1].columns[0].meta_data.path_in_schema = ["s"]

    md = fmt.decode_file_metadata(_mutated(rich_footer, change))
    with pytest.raises(CorruptFileError, match=r"column chunk 0 of row group 1: path_in_schema"):
        fmt.column_chunks(md)


def test_dotted_names_are_not_confused_with_nesting(rich_footer: bytes) -> None:
    # A top-level column literally named "st.a" has the dotted path of the nested st.a.
    def change(md: Any) -> None:
        md.row_groups[0].columns[2].meta_data.path_in_schema = ["st.a"]

    md = fmt.decode_file_metadata(_mutated(rich_footer, change))
    with pytest.raises(CorruptFileError, match="path_in_schema"):
        fmt.column_chunks(md)


def test_physical_type_mismatch(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups[0].columns[0].meta_data.type = fmt.Type.INT32

    md = fmt.decode_file_metadata(_mutated(rich_footer, change))
    with pytest.raises(CorruptFileError, match="physical type INT32 differs"):
        fmt.column_chunks(md)


@pytest.mark.parametrize("field", ["bloom_filter_offset", "bloom_filter_length", "num_values"])
def test_negative_offsets_and_counts(rich_footer: bytes, field: str) -> None:
    def change(md: Any) -> None:
        setattr(md.row_groups[0].columns[0].meta_data, field, -5)

    md = fmt.decode_file_metadata(_mutated(rich_footer, change))
    with pytest.raises(CorruptFileError, match=f"{field} is negative"):
        fmt.column_chunks(md)


def test_missing_required_column_metadata_field(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups[0].columns[0].meta_data.data_page_offset = None

    md = fmt.decode_file_metadata(_mutated(rich_footer, change))
    with pytest.raises(CorruptFileError, match="data_page_offset is missing"):
        fmt.column_chunks(md)


@pytest.mark.parametrize("delta", [-1, 1, 10**6])
def test_inconsistent_schema_tree(rich_footer: bytes, delta: int) -> None:
    def change(md: Any) -> None:
        md.schema[0].num_children += delta

    with pytest.raises(CorruptFileError, match="schema"):
        fmt.decode_file_metadata(_mutated(rich_footer, change))


def test_newer_enum_values_are_named_unknown(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        leaf = md.schema[1]  # i64
        leaf.repetition_type = fmt.FieldRepetitionType.VECTOR
        leaf.converted_type = 99
        for rg in md.row_groups:
            rg.columns[0].meta_data.type = 42
        leaf.type = 42

    md = fmt.decode_file_metadata(_mutated(rich_footer, change))
    leaf = fmt.schema_leaves(md)[0]
    assert (leaf.repetition, leaf.converted_type, leaf.physical_type) == (
        "VECTOR",
        "UNKNOWN(99)",
        "UNKNOWN(42)",
    )
    assert fmt.column_chunks(md)[0].physical_type == "UNKNOWN(42)"


def _offset_index_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    chunk = fmt.decode_file_metadata(_footer(path)).row_groups[0].columns[0]
    start, length = chunk.offset_index_offset, chunk.offset_index_length
    return data[start : start + length]


def test_offset_index_round_trips_byte_for_byte(rich_file: Path) -> None:
    raw = _offset_index_bytes(rich_file)
    offset_index = fmt.decode_offset_index(memoryview(raw))
    assert offset_index.page_locations
    assert offset_index.page_locations[0].first_row_index == 0
    assert fmt.encode_offset_index(offset_index) == raw


def test_corrupt_offset_index_is_a_corrupt_file(rich_file: Path) -> None:
    raw = _offset_index_bytes(rich_file)
    for end in range(len(raw)):
        _only_corrupt(fmt.decode_offset_index, raw[:end])
    with pytest.raises(CorruptFileError, match="cannot decode the OffsetIndex"):
        fmt.decode_offset_index(b"\x19\xfc")  # a list of 15+ structs that is not there
    offset_index = fmt.decode_offset_index(raw)
    offset_index.page_locations[-1].compressed_page_size = None
    with pytest.raises(
        CorruptFileError, match=r"page location \d+ of the OffsetIndex has no compressed"
    ):
        fmt.decode_offset_index(fmt.encode_offset_index(offset_index))


# --------------------------------------------------------------------------------------------
# Bloom filter header
# --------------------------------------------------------------------------------------------

HEADER_1024 = bytes.fromhex("15 8010 1c1c0000 1c1c0000 1c1c0000 00")


def test_bloom_filter_headers_written_by_pyarrow(rich_file: Path) -> None:
    data = rich_file.read_bytes()
    arrow = pq.ParquetFile(rich_file).metadata
    seen = 0
    for i in range(arrow.num_row_groups):
        for j in range(arrow.num_columns):
            col = arrow.row_group(i).column(j)
            if col.bloom_filter_offset is None:
                continue
            seen += 1
            blob = data[col.bloom_filter_offset : col.bloom_filter_offset + col.bloom_filter_length]
            header, size = fmt.parse_bloom_filter_header(blob)
            assert header == fmt.BloomFilterHeader(
                num_bytes=header.num_bytes,
                algorithm="BLOCK",
                hash="XXHASH",
                compression="UNCOMPRESSED",
            )
            assert size + header.num_bytes == col.bloom_filter_length
            assert fmt.encode_bloom_filter_header(header.num_bytes) == blob[:size]
    assert seen == len(BLOOM_COLUMNS) * arrow.num_row_groups


def test_encode_1024_matches_pyarrow(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "bf.parquet",
        pa.table({"col": pa.array(range(1000), pa.int64())}),
        bloom_filter_options={"col": {"ndv": 500, "fpp": 0.01}},
    )
    col = pq.ParquetFile(path).metadata.row_group(0).column(0)
    data = path.read_bytes()
    blob = data[col.bloom_filter_offset : col.bloom_filter_offset + col.bloom_filter_length]
    assert fmt.encode_bloom_filter_header(1024) == HEADER_1024 == blob[: len(HEADER_1024)]
    header, size = fmt.parse_bloom_filter_header(memoryview(data)[col.bloom_filter_offset :])
    assert (header.num_bytes, size) == (1024, len(HEADER_1024))


@pytest.mark.parametrize("num_bytes", [0, 32, 127, 128, 2**20, 2**31 - 1])
def test_bloom_header_round_trip(num_bytes: int) -> None:
    blob = fmt.encode_bloom_filter_header(num_bytes)
    assert fmt.parse_bloom_filter_header(blob + b"trailing padding") == (
        fmt.BloomFilterHeader(num_bytes, "BLOCK", "XXHASH", "UNCOMPRESSED"),
        len(blob),
    )


@pytest.mark.parametrize("bad", [-1, 2**31, 1.0, True, "8"])
def test_encode_bloom_header_rejects_bad_sizes(bad: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        fmt.encode_bloom_filter_header(bad)


def test_bloom_header_truncated_at_every_offset() -> None:
    for cut in range(len(HEADER_1024)):
        with pytest.raises(CorruptFileError, match="cannot decode the Bloom filter header"):
            fmt.parse_bloom_filter_header(HEADER_1024[:cut])


def test_bloom_header_every_byte_every_value() -> None:
    for pos in range(len(HEADER_1024)):
        for value in range(256):
            bad = bytearray(HEADER_1024)
            bad[pos] = value
            result = _only_corrupt(fmt.parse_bloom_filter_header, bytes(bad))
            if result is not None:
                header, size = result
                assert 0 < size <= len(bad)
                assert header.num_bytes >= 0


def _union(member_id: int, payload: bytes = b"\x00", ctype: int = 0x0C) -> bytes:
    """A union struct holding member ``member_id`` (short field header form if possible)."""
    head = (
        bytes([member_id << 4 | ctype])
        if member_id <= 15
        else bytes([ctype]) + _varint(member_id << 1)
    )
    return head + payload + b"\x00"


def _header(
    algorithm: bytes = b"\x1c\x00\x00",
    hash_: bytes = b"\x1c\x00\x00",
    compression: bytes = b"\x1c\x00\x00",
    num_bytes: int = 1024,
    extra: bytes = b"",
) -> bytes:
    return (
        b"\x15"
        + _varint(num_bytes << 1 if num_bytes >= 0 else (-num_bytes << 1) - 1)
        + b"\x1c"
        + algorithm
        + b"\x1c"
        + hash_
        + b"\x1c"
        + compression
        + extra
        + b"\x00"
    )


def test_bloom_header_builder_matches_encoder() -> None:
    assert _header() == HEADER_1024


def test_unknown_union_members_decode_as_unknown() -> None:
    blob = _header(algorithm=_union(2), hash_=_union(7), compression=_union(300))
    header, size = fmt.parse_bloom_filter_header(blob)
    assert header == fmt.BloomFilterHeader(1024, "UNKNOWN(2)", "UNKNOWN(7)", "UNKNOWN(300)")
    assert size == len(blob)


def test_unknown_member_with_payload_and_other_type() -> None:
    # A newer algorithm whose struct has fields, and a hash member that is an i32.
    algorithm = _union(3, payload=b"\x15\x04\x18\x03abc\x00")
    hash_ = _union(2, payload=b"\x08", ctype=0x05)
    header, _ = fmt.parse_bloom_filter_header(_header(algorithm=algorithm, hash_=hash_))
    assert (header.algorithm, header.hash) == ("UNKNOWN(3)", "UNKNOWN(2)")


def test_unknown_header_fields_are_skipped() -> None:
    # field 5 binary, 6 list<i32> of 3, 7 bool true, 8 map<i32, i32> of 1, 9 double
    extra = (
        b"\x18\x05hello"
        + b"\x19\x35\x02\x04\x06"
        + b"\x11"
        + b"\x1b\x01\x55\x02\x04"
        + b"\x17"
        + struct.pack("<d", 1.5)
    )
    blob = _header(extra=extra)
    header, size = fmt.parse_bloom_filter_header(blob + b"\xff" * 40)
    assert header.algorithm == "BLOCK" and header.num_bytes == 1024
    assert size == len(blob)


def test_known_member_inner_fields_are_skipped() -> None:
    header, _ = fmt.parse_bloom_filter_header(_header(algorithm=_union(1, payload=b"\x15\x02\x00")))
    assert header.algorithm == "BLOCK"


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (_header(algorithm=b"\x00"), "algorithm union has no member"),
        (_header(hash_=b"\x1c\x00\x1c\x00\x00"), "hash union has more than one member"),
        (_header(compression=_union(1, payload=b"", ctype=0x01)), "member UNCOMPRESSED"),
        (b"\x15\x80\x10\x00", "algorithm, hash, compression missing"),
        (_header(num_bytes=-32), "numBytes is negative"),
        (b"\x15" + _varint(2**33) + b"\x00", "not an i32"),
        (b"\x1e\x00", "invalid wire type 14"),
        (b"\x15" + b"\xff" * 11, "varint longer than 10 bytes"),
        (b"\x18" + _varint(2**40) + b"\x00", "do not fit|declared"),
        (b"\x19\xf6" + _varint(2**30) + b"\x00", "do not fit"),
        (b"\x1b" + _varint(2**30) + b"\x66\x00", "do not fit"),
        (b"\x1c" * 100 + b"\x00" * 101, "nesting deeper"),
        (b"\x0c" + _varint(2**20) + b"\x00", "out of i16 range"),
    ],
)
def test_malformed_bloom_headers(blob: bytes, message: str) -> None:
    start = time.perf_counter()
    with pytest.raises(CorruptFileError, match=message):
        fmt.parse_bloom_filter_header(blob)
    assert time.perf_counter() - start < 0.5


def test_bloom_header_longer_than_the_limit() -> None:
    # An unknown binary field padding the header past MAX_BLOOM_FILTER_HEADER_SIZE.
    pad = fmt.MAX_BLOOM_FILTER_HEADER_SIZE
    blob = b"\x58" + _varint(pad) + b"\x00" * pad + HEADER_1024
    with pytest.raises(CorruptFileError, match="longer than"):
        fmt.parse_bloom_filter_header(blob)


def test_bloom_header_from_a_wider_memoryview() -> None:
    import array

    words = array.array("I", HEADER_1024 + b"\x00" * 4)  # 20 bytes as five uint32
    header, size = fmt.parse_bloom_filter_header(memoryview(words))
    assert (header.num_bytes, size) == (1024, 16)

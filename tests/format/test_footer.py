"""Tests for parquet_bloom._format.footer: the trailer, FileMetaData decoding against files
written by pyarrow, byte-exact re-encoding, the checks readers rely on, and hostile footers
(truncation, bit flips, random bytes) that must only ever raise CorruptFileError."""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquet_bloom import _format as fmt
from parquet_bloom._format import _compact as compact
from parquet_bloom._format import footer as footer_codec
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError
from tests.format.helpers import (
    BLOOM_COLUMNS,
    ROWS,
    ROWS_PER_GROUP,
    footer_of,
    mutated,
    only_corrupt,
    rich_table,
    write,
)

# --------------------------------------------------------------------------------------------
# Footer trailer
# --------------------------------------------------------------------------------------------


def test_trailer_of_a_pyarrow_file(rich_file: Path) -> None:
    data = rich_file.read_bytes()
    length = fmt.parse_footer_trailer(data[-8:], file_size=len(data))
    assert length == pq.read_metadata(rich_file).serialized_size
    assert data[:4] == fmt.MAGIC


def test_trailer_encrypted_footer_is_unsupported() -> None:
    with pytest.raises(
        UnsupportedFileError, match="encrypted Parquet footer, not read without the file's keys"
    ):
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
    table = rich_table()
    return [
        write(
            tmp_path / "rich.parquet",
            table,
            row_group_size=ROWS_PER_GROUP,
            write_page_index=True,
            bloom_filter_options={"i64": True, "s": {"ndv": 10, "fpp": 0.1}},
        ),
        write(tmp_path / "v2.parquet", table, data_page_version="2.0", compression="zstd"),
        write(
            tmp_path / "nodict.parquet",
            table,
            use_dictionary=False,
            write_statistics=False,
            compression="none",
        ),
        write(tmp_path / "v1.parquet", table.select(["i64", "s", "d"]), version="1.0"),
        write(
            tmp_path / "sorted.parquet",
            table.select(["i64"]),
            sorting_columns=[pq.SortingColumn(0, descending=True, nulls_first=True)],
        ),
        write(tmp_path / "empty.parquet", table.slice(0, 0)),
        write(tmp_path / "nocols.parquet", pa.table({})),
    ]


def test_full_decode_reencodes_byte_for_byte(tmp_path: Path) -> None:
    for path in _variants(tmp_path):
        footer = footer_of(path)
        md = fmt.decode_file_metadata(footer, full=True)
        assert fmt.encode_file_metadata(md) == footer, path.name


def test_reencode_after_a_change_is_read_by_pyarrow(tmp_path: Path, rich_file: Path) -> None:
    """What a footer rewrite does: decode fully, change a field, write the file back."""
    data = rich_file.read_bytes()
    footer = footer_of(rich_file)
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
            md = only_corrupt(fmt.decode_file_metadata, bytes(bad), full=full)
            if md is not None:
                only_corrupt(fmt.column_chunks, md)


def test_random_byte_changes_in_a_large_footer(rich_footer: bytes) -> None:
    rng = random.Random(20260522)
    for _ in range(300):
        bad = bytearray(rich_footer)
        for _ in range(rng.choice((1, 1, 2, 8))):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        md = only_corrupt(fmt.decode_file_metadata, bytes(bad))
        if md is not None:
            only_corrupt(fmt.column_chunks, md)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_escape_as_another_error(data: bytes) -> None:
    for full in (False, True):
        md = only_corrupt(fmt.decode_file_metadata, data, full=full)
        if md is not None:
            only_corrupt(fmt.column_chunks, md)


def test_footer_over_the_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(footer_codec, "MAX_FOOTER_SIZE", 10)
    with pytest.raises(UnsupportedFileError, match="limit"):
        fmt.decode_file_metadata(b"\x00" * 11)


# --------------------------------------------------------------------------------------------
# Structural validation
# --------------------------------------------------------------------------------------------


def test_missing_row_groups(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups = None

    with pytest.raises(CorruptFileError, match="no row group list"):
        fmt.decode_file_metadata(mutated(rich_footer, change))


def test_row_group_with_too_few_columns(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups[1].columns.pop()

    with pytest.raises(
        CorruptFileError, match=r"row group 1 has 16 column chunks but the schema has 17"
    ) as info:
        fmt.decode_file_metadata(mutated(rich_footer, change))
    assert info.value.row_group == 1


def test_column_chunk_without_metadata(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups[2].columns[3].meta_data = None

    with pytest.raises(CorruptFileError, match="column chunk 3 of row group 2") as info:
        fmt.decode_file_metadata(mutated(rich_footer, change))
    assert (info.value.row_group, info.value.column) == (2, "st.b.c")


def test_encrypted_column_without_plaintext_metadata(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        chunk = md.row_groups[0].columns[1]
        chunk.meta_data = None
        chunk.crypto_metadata = fmt.ColumnCryptoMetaData(
            ENCRYPTION_WITH_FOOTER_KEY=fmt.EncryptionWithFooterKey()
        )
        chunk.encrypted_column_metadata = b"\x01\x02"

    md = fmt.decode_file_metadata(mutated(rich_footer, change))
    chunks = fmt.column_chunks(md)
    info = chunks[1]
    assert (info.row_group, info.column_index, info.path) == (0, 1, "s")
    assert info.encrypted and info.physical_type == "BYTE_ARRAY"
    assert info.bloom_filter_offset is None
    assert not chunks[0].encrypted


def test_footer_key_chunks_share_their_crypto_metadata(rich_footer: bytes) -> None:
    """The fast decode gives every chunk encrypted with the footer key one shared
    ColumnCryptoMetaData, and any other its own: each equal to what the full decode gives."""
    members = {
        0: fmt.ColumnCryptoMetaData(ENCRYPTION_WITH_FOOTER_KEY=fmt.EncryptionWithFooterKey()),
        1: fmt.ColumnCryptoMetaData(
            ENCRYPTION_WITH_COLUMN_KEY=fmt.EncryptionWithColumnKey(["s"], b"key metadata")
        ),
        2: fmt.ColumnCryptoMetaData(
            ENCRYPTION_WITH_FOOTER_KEY=fmt.EncryptionWithFooterKey(),
            ENCRYPTION_WITH_COLUMN_KEY=fmt.EncryptionWithColumnKey(["x"]),
        ),
        3: fmt.ColumnCryptoMetaData(),  # no member this library knows
    }

    def change(md: Any) -> None:
        for rg in md.row_groups:
            for j, crypto in members.items():
                rg.columns[j].crypto_metadata = crypto

    data = mutated(rich_footer, change)
    full = fmt.decode_file_metadata(data, full=True)
    for md in (fmt.decode_file_metadata(data), fmt.FooterView(data).metadata()):
        shared = md.row_groups[0].columns[0].crypto_metadata
        for i, rg in enumerate(md.row_groups):
            for j in members:
                crypto = rg.columns[j].crypto_metadata
                assert type(crypto) is fmt.ColumnCryptoMetaData
                assert crypto == full.row_groups[i].columns[j].crypto_metadata == members[j]
                assert (crypto is shared) == (j == 0)


def test_path_in_schema_mismatch(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups[1].columns[0].meta_data.path_in_schema = ["s"]

    md = fmt.decode_file_metadata(mutated(rich_footer, change))
    with pytest.raises(CorruptFileError, match=r"column chunk 0 of row group 1: path_in_schema"):
        fmt.column_chunks(md)


def test_dotted_names_are_not_confused_with_nesting(rich_footer: bytes) -> None:
    # A top-level column literally named "st.a" has the dotted path of the nested st.a.
    def change(md: Any) -> None:
        md.row_groups[0].columns[2].meta_data.path_in_schema = ["st.a"]

    md = fmt.decode_file_metadata(mutated(rich_footer, change))
    with pytest.raises(CorruptFileError, match="path_in_schema"):
        fmt.column_chunks(md)


def test_physical_type_mismatch(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups[0].columns[0].meta_data.type = fmt.Type.INT32

    md = fmt.decode_file_metadata(mutated(rich_footer, change))
    with pytest.raises(CorruptFileError, match="physical type INT32 differs"):
        fmt.column_chunks(md)


@pytest.mark.parametrize("field", ["bloom_filter_offset", "bloom_filter_length", "num_values"])
def test_negative_offsets_and_counts(rich_footer: bytes, field: str) -> None:
    def change(md: Any) -> None:
        setattr(md.row_groups[0].columns[0].meta_data, field, -5)

    md = fmt.decode_file_metadata(mutated(rich_footer, change))
    with pytest.raises(CorruptFileError, match=f"{field} is negative"):
        fmt.column_chunks(md)


def test_missing_required_column_metadata_field(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups[0].columns[0].meta_data.data_page_offset = None

    md = fmt.decode_file_metadata(mutated(rich_footer, change))
    with pytest.raises(CorruptFileError, match="data_page_offset is missing"):
        fmt.column_chunks(md)


# --------------------------------------------------------------------------------------------
# FooterView: row groups decoded when first asked for
# --------------------------------------------------------------------------------------------


def both_decoders(monkeypatch: pytest.MonkeyPatch, c_decoder: bool) -> None:
    if not c_decoder:
        monkeypatch.setattr(compact, "fastbinary", None)


@pytest.mark.parametrize("c_decoder", [True, False])
def test_footer_view_decodes_what_decode_file_metadata_does(
    rich_footer: bytes, monkeypatch: pytest.MonkeyPatch, c_decoder: bool
) -> None:
    both_decoders(monkeypatch, c_decoder)
    md = fmt.decode_file_metadata(rich_footer)
    view = fmt.FooterView(rich_footer)
    assert view.num_row_groups == len(md.row_groups)
    assert view.leaves == fmt.schema_leaves(md)
    assert view.chunks(2) == fmt.column_chunks(md)[2 * len(view.leaves) : 3 * len(view.leaves)]
    assert view.all_chunks() == fmt.column_chunks(md)
    assert view.metadata() == md
    assert [view.row_group_rows(i) for i in range(view.num_row_groups)] == [
        rg.num_rows for rg in md.row_groups
    ]


def test_footer_view_decodes_only_the_row_groups_asked_for(rich_footer: bytes) -> None:
    # A corrupt column chunk list in row group 1: the view opens, reads row groups 0 and 2,
    # and refuses row group 1 when it is asked for, as decode_file_metadata refuses it all.
    def change(md: Any) -> None:
        md.row_groups[1].columns.pop()

    footer = mutated(rich_footer, change)
    with pytest.raises(CorruptFileError, match="row group 1 has 16 column chunks"):
        fmt.decode_file_metadata(footer)
    view = fmt.FooterView(footer)
    assert view.num_row_groups == 3
    assert [c.row_group for c in view.chunks(0)] == [0] * 17
    assert [c.row_group for c in view.chunks(2)] == [2] * 17
    for _ in range(2):  # refused again on a second ask, not cached as good
        with pytest.raises(CorruptFileError, match="row group 1 has 16 column chunks") as info:
            view.chunks(1)
        assert info.value.row_group == 1
    with pytest.raises(CorruptFileError, match="row group 1"):
        view.metadata()


def test_footer_view_checks_num_rows_when_opened(rich_footer: bytes) -> None:
    def change(md: Any) -> None:
        md.row_groups[2].num_rows = None

    with pytest.raises(CorruptFileError, match="row group 2 has no num_rows"):
        fmt.FooterView(mutated(rich_footer, change))


def test_footer_view_of_a_footer_with_two_row_group_lists(rich_footer: bytes) -> None:
    # Thrift keeps the last value of a repeated field; the view falls back to the whole
    # decode, and so reads the second list, as decode_file_metadata does.
    md = fmt.decode_file_metadata(rich_footer, full=True)
    only_first = fmt.encode_file_metadata(fmt.FileMetaData(row_groups=md.row_groups[:1]))
    assert only_first[0] == 0x49 and only_first[-1] == 0  # field 4 (delta 4), a list; stop
    # The rich footer without its stop byte, a long-form header for field 4 (a list; zigzag
    # 4 = 8), the one-row-group list, a stop byte.
    twice = rich_footer[:-1] + b"\x09\x08" + only_first[1:-1] + b"\x00"
    whole = fmt.decode_file_metadata(twice)
    assert len(whole.row_groups) == 1
    view = fmt.FooterView(twice)
    assert view.num_row_groups == 1
    assert view.metadata() == whole


@pytest.mark.parametrize("c_decoder", [True, False])
def test_footer_view_of_hostile_bytes_raises_only_corrupt_file_error(
    small_footer: bytes, monkeypatch: pytest.MonkeyPatch, c_decoder: bool
) -> None:
    # Every byte flipped, each seventh prefix: the view and its row groups either decode as
    # decode_file_metadata does, or raise CorruptFileError, never another error.
    both_decoders(monkeypatch, c_decoder)
    variants = [small_footer[:n] for n in range(0, len(small_footer), 7)]
    for pos in range(len(small_footer)):
        flipped = bytearray(small_footer)
        flipped[pos] ^= 0xFF
        variants.append(bytes(flipped))
    for data in variants:
        view = only_corrupt(fmt.FooterView, data)
        if view is None:
            continue
        # The view checks its chunks as column_chunks does (path_in_schema against the schema).
        whole = only_corrupt(fmt.decode_file_metadata, data)
        if whole is not None and only_corrupt(fmt.column_chunks, whole) is None:
            whole = None
        got = only_corrupt(view.metadata)
        assert (got is None) == (whole is None)
        if whole is not None:
            assert got == whole


def test_footer_views_of_one_schema_share_it_and_keep_their_own_rows(
    rich_footer: bytes,
) -> None:
    # Footers that differ only in their row count and row groups have one schema key: the
    # second view resumes the walk and takes the decoded schema, with its own row count; a
    # footer of another schema (or key-value metadata) has another key.
    def fewer_rows(md: Any) -> None:
        md.num_rows -= 7
        md.row_groups = md.row_groups[:2]

    def renamed(md: Any) -> None:
        md.schema[1].name = "other"
        md.row_groups[0].columns[0].meta_data.path_in_schema[0] = "other"
        md.row_groups[1].columns[0].meta_data.path_in_schema[0] = "other"
        md.row_groups[2].columns[0].meta_data.path_in_schema[0] = "other"

    first = fmt.FooterView(rich_footer)
    other = mutated(rich_footer, fewer_rows)
    for _ in range(2):  # the second time from the caches
        second = fmt.FooterView(other)
        assert second.schema_key == first.schema_key is not None
        assert second.metadata() == fmt.decode_file_metadata(other)
        assert first.metadata() == fmt.decode_file_metadata(rich_footer)
        assert second.leaves == first.leaves and second.num_row_groups == 2
        assert second.chunk(1, 3) == second.chunks(1)[3]
        assert second.compressed_size(1) == sum(c.total_compressed_size for c in second.chunks(1))
    third = fmt.FooterView(mutated(rich_footer, renamed))
    assert third.schema_key != first.schema_key
    assert third.leaves[0].path.startswith("other")

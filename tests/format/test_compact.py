"""Tests for parquet_bloom._format._compact through the footer decode: the pure-Python
protocol stands in for the C decoder with the same results, hostile lengths are refused where
they are declared, and deep nesting and invalid UTF-8 are handled alike by both."""

from __future__ import annotations

import pytest
from thrift.transport.TTransport import TMemoryBuffer

from parquet_bloom import _format as fmt
from parquet_bloom._format import _compact as compact
from parquet_bloom._format import footer as footer_codec
from parquet_bloom.errors import CorruptFileError


def test_pure_python_fallback_matches_the_c_decoder(
    rich_footer: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = fmt.decode_file_metadata(rich_footer)
    full = fmt.decode_file_metadata(rich_footer, full=True)
    monkeypatch.setattr(compact, "fastbinary", None)
    slow_full = fmt.decode_file_metadata(rich_footer, full=True)
    assert slow_full == full
    assert fmt.encode_file_metadata(slow_full) == rich_footer
    assert fmt.column_chunks(fmt.decode_file_metadata(rich_footer)) == fmt.column_chunks(fast)
    for cut in range(0, len(rich_footer), 97):
        with pytest.raises(CorruptFileError, match="cannot decode the Parquet footer"):
            fmt.decode_file_metadata(rich_footer[:cut])


# version=1 (0x15 0x02), then field 2 (schema) or field 4 (row_groups) as a list of 2**30
# structs, or an unknown field 15 as a list of 2**30 i64; and the same lengths just under
# Arrow's limits, which only the cap at the length of the buffer refuses. Each is followed by
# PADDING, bytes that the length claims and a decoder refusing it at once never reads.
PADDING = b"\x00" * 16
HOSTILE_LISTS = {
    "schema": b"\x15\x02" + b"\x19\xfc" + compact.varint(2**30) + PADDING,
    "row_groups": b"\x15\x02" + b"\x39\xfc" + compact.varint(2**30) + PADDING,
    "unknown_field": b"\xf9\xf6" + compact.varint(2**30) + PADDING,
    "string": b"\x15\x02\x58" + compact.varint(2**31 - 1) + PADDING,  # created_by (field 6)
    "schema_under_the_limit": (
        b"\x15\x02" + b"\x19\xfc" + compact.varint(compact.MAX_THRIFT_CONTAINER_SIZE - 1) + PADDING
    ),
    "string_under_the_limit": (
        b"\x15\x02\x58" + compact.varint(compact.MAX_THRIFT_STRING_SIZE - 1) + PADDING
    ),
}


def _bytes_read(data: bytes, full: bool, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many bytes of ``data`` the decoder read before it refused them as a footer."""
    transports: list[TMemoryBuffer] = []

    class Recording(TMemoryBuffer):
        def __init__(self, value: bytes) -> None:
            super().__init__(value)
            transports.append(self)

    monkeypatch.setattr(compact, "TMemoryBuffer", Recording)
    with pytest.raises(CorruptFileError, match="cannot decode the Parquet footer"):
        fmt.decode_file_metadata(data, full=full)
    (transport,) = transports
    return int(transport.cstringio_buf.tell())


@pytest.mark.parametrize("name", sorted(HOSTILE_LISTS))
@pytest.mark.parametrize("full", [False, True])
def test_hostile_lengths_fail_fast(name: str, full: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A length the buffer cannot hold is refused where it is declared: the decoder reads none
    of the bytes after it, instead of walking (or preallocating) what the length claims."""
    data = HOSTILE_LISTS[name]
    for fastbinary in (compact.fastbinary, None):
        monkeypatch.setattr(compact, "fastbinary", fastbinary)
        assert _bytes_read(data, full, monkeypatch) <= len(data) - len(PADDING)


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deeply_nested_unknown_field(depth: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Field 15 holding a struct whose field 1 holds a struct whose field 1 ...
    data = b"\xfc" + b"\x1c" * depth + b"\x00" * (depth + 1)
    for fastbinary in (compact.fastbinary, None):
        monkeypatch.setattr(compact, "fastbinary", fastbinary)
        with pytest.raises(CorruptFileError, match="cannot decode the Parquet footer"):
            fmt.decode_file_metadata(data)


def test_invalid_utf8_in_a_string_field(
    rich_footer: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thrift `string` fields (names, created_by) with invalid UTF-8 decode with U+FFFD,
    the C decoder's behaviour, which the pure-Python fallback is made to share."""
    at = rich_footer.index(b"parquet-cpp-arrow")
    bad = rich_footer[:at] + b"\xff" + rich_footer[at + 1 :]
    for fastbinary in (compact.fastbinary, None):
        monkeypatch.setattr(compact, "fastbinary", fastbinary)
        for full in (False, True):
            md = fmt.decode_file_metadata(bad, full=full)
            assert md.created_by.startswith("\ufffdarquet-cpp-arrow")


def column_metadata_bytes(rich_footer: bytes) -> list[bytes]:
    """Every ColumnMetaData of the rich footer, serialized on its own."""
    md = fmt.decode_file_metadata(rich_footer, full=True)
    return [fmt.encode_column_metadata(c.meta_data) for rg in md.row_groups for c in rg.columns]


def decoded_by_both(data: bytes) -> tuple[object, object]:
    """The reader's ColumnMetaData decoded by the shared decoder and by decode_untrusted:
    each the struct, or the CorruptFileError's message."""
    out = []
    for decode in (
        lambda: fmt.decode_column_metadata(data, full=False),
        lambda: compact.decode_untrusted(
            data,
            fmt.ColumnMetaData,
            footer_codec._FAST_COLUMN_META_DATA_SPEC,
            "column metadata",
            "the column metadata",
            max_size=fmt.MAX_FOOTER_SIZE,
        ),
    ):
        try:
            out.append(decode())
        except CorruptFileError as err:
            out.append(str(err))
    return out[0], out[1]


def test_small_structs_decode_as_decode_untrusted(rich_footer: bytes) -> None:
    """The shared decoder of the reader's decrypted ColumnMetaData: the same struct or the
    same error as decode_untrusted, for each real one, each cut short and each with a byte
    flipped, one after another through the one decoder (a long one before a short one does
    not lift the short one's limits)."""
    seen = 0
    for data in column_metadata_bytes(rich_footer):
        ours, theirs = decoded_by_both(data)
        assert ours == theirs and not isinstance(ours, str)
        for cut in range(len(data)):
            assert decoded_by_both(data[:cut])[0] == decoded_by_both(data[:cut])[1]
        for at in range(len(data)):
            flipped = bytearray(data)
            flipped[at] ^= 0x40
            ours, theirs = decoded_by_both(bytes(flipped))
            assert ours == theirs
            seen += isinstance(ours, str)
    assert seen > 0


@pytest.mark.parametrize("name", sorted(HOSTILE_LISTS))
def test_small_structs_refuse_lengths_beyond_their_buffer(name: str) -> None:
    """A length claimed beyond the buffer is refused as decode_untrusted refuses it (the
    same error), after a long buffer as after none: each buffer's limits are its own."""
    for before in (b"", b"\x00" * 100_000):
        if before:
            fmt.decode_column_metadata(before, full=False)  # an empty struct: nothing set
        ours, theirs = decoded_by_both(HOSTILE_LISTS[name])
        assert isinstance(ours, str) and ours == theirs


def test_small_structs_without_the_c_decoder(
    rich_footer: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = [
        fmt.decode_column_metadata(d, full=False) for d in column_metadata_bytes(rich_footer)
    ]
    monkeypatch.setattr(compact, "fastbinary", None)
    decoder = compact.SmallStructs(
        fmt.ColumnMetaData,
        footer_codec._FAST_COLUMN_META_DATA_SPEC,
        "column metadata",
        "the column metadata",
        max_size=fmt.MAX_FOOTER_SIZE,
    )
    data = column_metadata_bytes(rich_footer)
    decoded = [decoder.decode(d) for d in data]
    # The pure-Python decoder decodes every field: the reader's fields are the same.
    for got, want in zip(decoded, expected, strict=True):
        for field in ("type", "path_in_schema", "num_values", "data_page_offset"):
            assert getattr(got, field) == getattr(want, field)
    with pytest.raises(CorruptFileError, match="cannot decode the column metadata"):
        decoder.decode(data[0][:5])

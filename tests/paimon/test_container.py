"""The FileIndexFormat container: round trips, reading files through the IO layer, and
untrusted bytes (truncated at every offset, flipped, lengths and counts out of range) giving
located errors before anything of the size they claim is made."""

from __future__ import annotations

import random
import struct
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parquet_bloom import paimon
from parquet_bloom._io.source import ByteSource
from parquet_bloom._paimon import container
from parquet_bloom.errors import BloomFilterError, CorruptFileError, UnsupportedFileError
from parquet_bloom.paimon import BloomFilter64, FileIndex, build_bloom_filter, read_file_index


def _sample() -> bytes:
    ids = build_bloom_filter(list(range(50)), "INT", 50, 0.05).to_bytes()
    names = build_bloom_filter(["a", "b"], "STRING", 20, 0.1).to_bytes()
    return paimon.serialize_file_index(
        {"id": {"bloom-filter": ids}, "name": {"bloom-filter": names, "bitmap": b"\x01\x02"}}
        | {"m[k]": {"bloom-filter": None}}
    )


def _head(
    columns: list[tuple[str, list[tuple[str, int, int]]]], *, redundant: bytes = b""
) -> bytes:
    """A head written by hand, with any starts and lengths."""

    def utf(s: str) -> bytes:
        raw = container.encode_modified_utf8(s)
        return struct.pack(">H", len(raw)) + raw

    body = struct.pack(">i", len(columns))
    for name, indexes in columns:
        body += utf(name) + struct.pack(">i", len(indexes))
        for index_type, start, length in indexes:
            body += utf(index_type) + struct.pack(">ii", start, length)
    body += struct.pack(">i", len(redundant)) + redundant
    return struct.pack(">qii", container.MAGIC, 1, 16 + len(body)) + body


def test_a_container_round_trips() -> None:
    data = _sample()
    index = FileIndex.from_bytes(data, data_types={"id": "INT", "name": "STRING"})
    assert index.columns == ["id", "name", "m[k]"]
    assert [(e.column, e.index_type, e.empty) for e in index.entries] == [
        ("id", "bloom-filter", False),
        ("name", "bloom-filter", False),
        ("name", "bitmap", False),
        ("m[k]", "bloom-filter", True),
    ]
    assert index.index_bytes("name", "bitmap") == b"\x01\x02"
    assert index.index_bytes("nothing") is None and index.bloom_filter("nothing") is None
    assert index.bloom_filter("m[k]") is None
    ids = index.bloom_filter("id")
    assert ids is not None and ids.might_contain_many(list(range(50))).all()
    # No bloom-filter index: kept; an empty one: nothing was written, skipped.
    assert index.might_contain("other", 1) and not index.might_contain("m[k]", 1)
    assert index.might_contain_many("name", ["a", "b"]).all()
    assert repr(index).startswith("FileIndex(4 indexes")
    head = container.parse_head(data, len(data))
    assert head.head_length == index.entries[0].offset and head.redundant == b""


@given(
    st.lists(
        st.tuples(
            st.text(max_size=20),
            st.lists(
                st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=30))),
                max_size=3,
            ),
        ),
        max_size=6,
        unique_by=lambda c: c[0],
    )
)
def test_any_container_round_trips(
    columns: list[tuple[str, list[tuple[str, bytes | None]]]],
) -> None:
    indexes = {name: dict(items) for name, items in columns}
    data = paimon.serialize_file_index(indexes)
    index = FileIndex.from_bytes(data)
    assert index.columns == [c for c, items in indexes.items() if items]
    for column, items in indexes.items():
        for index_type, payload in items.items():
            assert index.index_bytes(column, index_type) == payload
            entry = index.entry(column, index_type)
            assert entry is not None and entry.empty == (payload is None)


@given(st.text())
def test_modified_utf8_round_trips(text: str) -> None:
    raw = container.encode_modified_utf8(text)
    assert b"\x00" not in raw
    decoded = container.decode_modified_utf8(raw)
    assert decoded.encode("utf-16-be", "surrogatepass") == text.encode("utf-16-be", "surrogatepass")


def test_every_truncation_is_a_located_error() -> None:
    data = _sample()
    for n in range(len(data)):
        with pytest.raises(CorruptFileError) as caught:
            index = FileIndex.from_bytes(data[:n], source="t.index")
            index.bloom_filter("id")  # a payload cut short
            index.bloom_filter("name")
        assert caught.value.source == "t.index" and caught.value.offset is not None


def test_flipped_bytes_never_escape_as_other_errors() -> None:
    rng = random.Random(5)
    data = _sample()
    for _ in range(3000):
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        try:
            index = FileIndex.from_bytes(bytes(flipped), data_types={"name": "STRING"})
            for column in index.columns:
                f = index.bloom_filter(column)
                if f is not None:
                    f.might_contain_many(["a"] if column == "name" else [1])
        except (CorruptFileError, UnsupportedFileError):
            pass


@pytest.mark.parametrize(
    ("data", "message", "offset"),
    [
        (b"", "shorter than the smallest head", 0),
        (b"\x00" * 24, "not a Paimon file index: magic 0", 0),
        (struct.pack(">qii", container.MAGIC, 2, 24) + bytes(8), "version 2", 8),
        (
            struct.pack(">qii", container.MAGIC, 1, 2**31 - 1) + bytes(8),
            "head length 2147483647",
            12,
        ),
        (struct.pack(">qii", container.MAGIC, 1, 8) + bytes(8), "head length 8", 12),
        (_head([("c", [("bloom-filter", 10, 4)])]), "not within the body", 27),
        (_head([("c", [("bloom-filter", 40, 1_000_000)])]), "not within the body", 27),
        (_head([("c", [("bloom-filter", 40, -4)])]), "not within the body", 27),
        (_head([("c", []), ("c", [])]), "named twice", 27),
        (_head([("c", [("x", -1, 0), ("x", -1, 0)])]), "named twice", 38),
        (
            struct.pack(">qiii", container.MAGIC, 1, 28, 2**30) + bytes(8),
            "column count 1073741824",
            16,
        ),
    ],
)
def test_hostile_heads(data: bytes, message: str, offset: int | None) -> None:
    with pytest.raises(BloomFilterError, match=message) as caught:
        FileIndex.from_bytes(data, source="h.index")
    if offset is not None:
        assert caught.value.offset == offset
    assert caught.value.source == "h.index"


def test_a_bad_column_name_is_located() -> None:
    data = _head([("c", [])]).replace(b"\x00\x01c", b"\x00\x01\xff")
    with pytest.raises(CorruptFileError, match="modified UTF-8") as caught:
        FileIndex.from_bytes(data)
    assert caught.value.offset == 20


def test_hostile_counts_allocate_nothing_of_their_size() -> None:
    """A head claiming 2**31 - 1 columns or indexes is refused before any is made."""
    claims = [
        struct.pack(">qiii", container.MAGIC, 1, 40, 2**31 - 1) + bytes(20),
        _head([("c", [])]).replace(b"\x00\x01c\x00\x00\x00\x00", b"\x00\x01c\x7f\xff\xff\xff"),
    ]
    tracemalloc.start()
    try:
        for data in claims:
            with pytest.raises(CorruptFileError, match="cannot fit"):
                FileIndex.from_bytes(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[ByteSource]:
    """The ByteSources read_file_index opens, kept to count their reads."""
    from parquet_bloom._paimon import index as index_module

    made: list[ByteSource] = []

    class Counting(ByteSource):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(index_module, "ByteSource", Counting)
    return made


def test_reading_a_small_file_takes_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _sample()
    path = tmp_path / "d.parquet.index"
    path.write_bytes(data)
    made = _counting(monkeypatch)
    index = read_file_index(path)
    assert (made[0].reads, made[0].bytes_read) == (1, len(data))
    assert index.columns == ["id", "name", "m[k]"] and index.size == len(data)
    assert index.source == str(path)
    with pytest.raises(KeyError, match="not read"):
        index.index_bytes("name", "bitmap")  # a bitmap is listed, not read
    only = read_file_index(str(path), columns=["name"])
    with pytest.raises(KeyError):
        only.bloom_filter("id")
    assert only.bloom_filter("name") == FileIndex.from_bytes(data).bloom_filter("name")
    with open(path, "rb") as f:
        assert read_file_index(f).columns == index.columns
    assert read_file_index(data).columns == index.columns


def test_a_large_file_is_read_where_the_filters_asked_lie(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = build_bloom_filter(list(range(10)), "INT", 1_000_000, 0.1).to_bytes()  # 599 KB
    small = build_bloom_filter(list(range(10)), "INT", 10, 0.1).to_bytes()
    data = paimon.serialize_file_index(
        {"big": {"bloom-filter": big}, "small": {"bloom-filter": small}}
    )
    path = tmp_path / "large.index"
    path.write_bytes(data)
    made = _counting(monkeypatch)
    index = read_file_index(path, columns=["small"])
    entry = index.entry("small")
    assert entry is not None
    assert (made[0].reads, made[0].bytes_read) == (2, 64 * 1024 + len(small))
    assert index.bloom_filter("small") == BloomFilter64.from_bytes(small)


def test_a_long_head_takes_a_second_read(tmp_path: Path) -> None:
    names = {f"column_{i:05d}": {"bloom-filter": b"\x00\x00\x00\x01\x00"} for i in range(4000)}
    data = paimon.serialize_file_index(names)
    assert container.parse_preamble(data[:16], len(data)) > 64 * 1024
    path = tmp_path / "wide.index"
    path.write_bytes(data)
    index = read_file_index(path, columns=["column_03999"])
    assert len(index.entries) == 4000
    assert index.bloom_filter("column_03999") is not None


def test_a_truncated_file_is_a_located_error(tmp_path: Path) -> None:
    data = _sample()
    path = tmp_path / "cut.index"
    for n in (0, 10, 40, len(data) - 1):
        path.write_bytes(data[:n])
        with pytest.raises(CorruptFileError) as caught:
            read_file_index(path)
        assert caught.value.source == str(path)


def test_an_oversized_filter_entry_is_refused_before_reading(tmp_path: Path) -> None:
    head = _head([("c", [("bloom-filter", 0, 0)])])
    bad = _head([("c", [("bloom-filter", len(head), paimon.MAX_BITSET_BYTES + 5)])])
    path = tmp_path / "big.index"
    with open(path, "wb") as f:
        f.write(bad)
        f.truncate(len(bad) + paimon.MAX_BITSET_BYTES + 5)  # sparse: nothing written
    with pytest.raises(CorruptFileError, match="Java int") as caught:
        read_file_index(path)
    assert caught.value.column == "c"


def test_writeutf_refuses_names_past_65535_bytes() -> None:
    with pytest.raises(ValueError, match="writeUTF"):
        paimon.serialize_file_index({"x" * 70000: {"bloom-filter": b"\x00\x00\x00\x01\x00"}})

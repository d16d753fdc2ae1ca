"""The compiled Snappy decoder (``_kernels.snappy_decompress``), which decompresses Snappy pages
for ``_pages`` where the kernels are built, against pyarrow's Snappy and against a reference
decoder written here from the format (docs/format-notes.md#snappy).

pyarrow's compressor emits only part of the format (literals, and copies with 1- and 2-byte
offsets, within blocks of 64 KiB), so streams are also built here element by element: copies
with 4-byte offsets, literal lengths of 1 to 4 bytes, copies that overlap themselves. The
reference says what any bytes decode to, or why they do not, so damaged and random streams are
checked too: the kernel decodes what the reference decodes and refuses what it refuses, for the
same reason, and writes nothing outside ``out[:length + 16]`` (nor outside its buffers at all:
``make asan`` runs these tests).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import skips

SLOP = 16  # _pages.SNAPPY_SLOP: what the kernel may write past the end
SENTINEL = 0xA5


def _kernels() -> ModuleType:
    """The extension (hypothesis' tests cannot take a fixture)."""
    if not skips.kernels_built():
        pytest.skip(skips.KERNELS_NOT_BUILT)
    from parquet_bloom import _kernels

    return _kernels


@pytest.fixture
def compiled() -> ModuleType:
    return _kernels()


# -- the reference ------------------------------------------------------------------------------


def stated_length(data: bytes) -> tuple[int, int] | None:
    """(the decompressed length, where the elements start), or None: the varint does not end
    within 5 bytes, or holds more than 32 bits (a fifth byte over 0x0F), which Google's
    library refuses."""
    value = 0
    for i, byte in enumerate(data[:5]):
        if i == 4 and byte > 0x0F:
            return None
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return value, i + 1
    return None


def reference(data: bytes) -> bytes | str:
    """What a raw Snappy block decodes to, or why it does not (the kernel's reasons)."""
    stated = stated_length(data)
    if stated is None:
        return "no length"
    length, pos = stated
    out = bytearray()
    while pos < len(data):
        tag = data[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:  # a literal: 1 + (tag >> 2) bytes, or from 60, its length in 1-4 bytes
            size = (tag >> 2) + 1
            if size > 60:
                extra = size - 60
                if pos + extra > len(data):
                    return "past the end"
                # In 32 bits, as Google's library: a length field of 2^32 - 1 is 0 bytes.
                size = (int.from_bytes(data[pos : pos + extra], "little") + 1) & 0xFFFFFFFF
                pos += extra
            if pos + size > len(data):
                return "past the end"
            if len(out) + size > length:
                return "more"
            out += data[pos : pos + size]
            pos += size
            continue
        extra = {1: 1, 2: 2, 3: 4}[kind]
        if pos + extra > len(data):
            return "past the end"
        field = int.from_bytes(data[pos : pos + extra], "little")
        pos += extra
        if kind == 1:
            size, distance = 4 + ((tag >> 2) & 7), ((tag >> 5) << 8) | field
        else:
            size, distance = 1 + (tag >> 2), field
        if distance == 0 or distance > len(out):
            return "before the start"
        if len(out) + size > length:
            return "more"
        for _ in range(size):  # one byte at a time: a copy may overlap itself
            out.append(out[-distance])
    return bytes(out) if len(out) == length else "fewer"


REASONS = {
    "no length at the start": "no length",
    "runs past the end": "past the end",
    "before the start": "before the start",
    "more bytes than stated": "more",
    "fewer bytes than stated": "fewer",
}


def decoded(compiled: ModuleType, data: bytes, length: int, room: int) -> bytes | str:
    """The kernel's bytes, or the reference's name for its reason; checks that nothing past
    ``length + SLOP`` was written."""
    out = np.full(room, SENTINEL, dtype=np.uint8)
    try:
        compiled.snappy_decompress(data, out, length)
    except ValueError as err:
        reasons = [name for text, name in REASONS.items() if text in str(err)]
        assert len(reasons) == 1, err
        return reasons[0]
    finally:
        assert (out[length + SLOP :] == SENTINEL).all()
    return out[:length].tobytes()


def check_like_reference(compiled: ModuleType, data: bytes) -> bytes | str:
    """The kernel decodes ``data`` as the reference does, with any room past the end."""
    expected = reference(data)
    stated = stated_length(data)
    length = 0 if stated is None else stated[0]
    if length >= 1 << 20:  # more than these few bytes can make: refused for want of room
        assert not isinstance(expected, bytes)
        with pytest.raises(ValueError, match=f"the data holds {length} bytes"):
            compiled.snappy_decompress(data, np.empty(SLOP, dtype=np.uint8), length)
        return expected
    for room in (length, length + 1, length + SLOP, length + 3 * SLOP):
        assert decoded(compiled, data, length, room) == expected, (data, room)
    return expected


# -- streams built element by element -----------------------------------------------------------


def literal(data: bytes, extra: int | None = None) -> bytes:
    """A literal element; ``extra``: its length in that many bytes after the tag (1-4), even
    where it would fit in the tag."""
    n = len(data) - 1
    if extra is None:
        extra = 0 if n < 60 else (n.bit_length() + 7) // 8
    if extra == 0:
        return bytes([n << 2]) + data
    return bytes([(59 + extra) << 2]) + n.to_bytes(extra, "little") + data


def copy(size: int, distance: int, kind: int) -> bytes:
    """A copy element with a 1-, 2- or 4-byte offset (``kind`` 1, 2, 3)."""
    if kind == 1:
        assert 4 <= size <= 11 and distance < 1 << 11
        return bytes([1 | (size - 4) << 2 | (distance >> 8) << 5, distance & 0xFF])
    assert 1 <= size <= 64
    return bytes([kind | (size - 1) << 2]) + distance.to_bytes(2 if kind == 2 else 4, "little")


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out) + bytes([value])


@st.composite
def streams(draw: Any) -> tuple[bytes, bytes]:
    """(a valid stream, what it decodes to), using every kind of element."""
    out = bytearray()
    body = bytearray()
    for _ in range(draw(st.integers(1, 12))):
        if not out or draw(st.booleans()):
            data = draw(st.binary(min_size=1, max_size=300))
            extra = draw(st.sampled_from([None, None, 1, 2, 3, 4]))
            if extra is not None and len(data) - 1 >= 1 << (8 * extra):
                extra = None
            body += literal(data, extra)
            out += data
            continue
        kind = draw(st.sampled_from([1, 2, 3]))
        if kind == 1:
            size = draw(st.integers(4, 11))
            distance = draw(st.integers(1, min(len(out), (1 << 11) - 1)))
        else:
            size = draw(st.integers(1, 64))
            distance = draw(st.integers(1, min(len(out), (1 << 16) - 1 if kind == 2 else 1 << 20)))
            distance = draw(st.sampled_from([distance, min(distance, 7), 1]))
        body += copy(size, distance, kind)
        for _ in range(size):
            out.append(out[-distance])
    return varint(len(out)) + bytes(body), bytes(out)


@settings(max_examples=300, deadline=None)
@given(streams())
def test_every_kind_of_element_decodes_as_the_reference_does(stream: tuple[bytes, bytes]) -> None:
    compiled = _kernels()
    data, expected = stream
    assert reference(data) == expected
    assert check_like_reference(compiled, data) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.binary(min_size=1, max_size=24), st.integers(1, 80)), min_size=1, max_size=12
    )
)
def test_what_pyarrow_compresses_comes_back(parts: list[tuple[bytes, int]]) -> None:
    # Repeated patterns of 1-24 bytes: copies from every distance, overlapping themselves.
    compiled = _kernels()
    data = b"".join(pattern * times for pattern, times in parts)
    block = pa.Codec("snappy").compress(data, asbytes=True)
    assert check_like_reference(compiled, block) == data


def test_blocks_of_a_megabyte_come_back(compiled: ModuleType) -> None:
    # Past one 64 KiB block of the compressor: incompressible bytes (long literals), text with
    # repeats far back, and runs of one byte.
    rng = np.random.default_rng(7)
    words = [f"key-{i}".encode() for i in rng.integers(0, 10**7, 120_000)]
    for data in (
        rng.bytes(1 << 20),
        b"".join(len(w).to_bytes(4, "little") + w for w in words),
        bytes(1 << 20),
        np.sort(rng.integers(0, 1 << 25, 1 << 17)).astype("<i8").tobytes(),
    ):
        block = pa.Codec("snappy").compress(data, asbytes=True)
        for room in (len(data), len(data) + SLOP):
            assert decoded(compiled, block, len(data), room) == data


@settings(max_examples=300, deadline=None)
@given(streams(), st.data())
def test_damaged_streams_fail_as_the_reference_does(
    stream: tuple[bytes, bytes], data: st.DataObject
) -> None:
    # Cut anywhere, a byte overwritten anywhere: the same bytes or the same refusal.
    compiled = _kernels()
    valid, _ = stream
    cut = data.draw(st.integers(0, len(valid) - 1))
    check_like_reference(compiled, valid[:cut])
    pos = data.draw(st.integers(0, len(valid) - 1))
    byte = data.draw(st.integers(0, 255))
    check_like_reference(compiled, valid[:pos] + bytes([byte]) + valid[pos + 1 :])


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_decode_as_the_reference_says(data: bytes) -> None:
    check_like_reference(_kernels(), data)


def test_each_refusal_names_its_reason(compiled: ModuleType) -> None:
    cases = {
        b"\x80\x80\x80\x80\x80\x01": "no length",
        b"": "no length",
        varint(4) + b"\x0c\x61": "past the end",  # a literal of 4 bytes with 1 there
        varint(70) + b"\xf0": "past the end",  # its length's byte missing
        varint(4) + b"\x0c\x61\x62\x63\x64\x01": "past the end",  # a copy's offset missing
        varint(8) + literal(b"abcd") + copy(4, 5, 1): "before the start",
        varint(8) + literal(b"abcd") + copy(4, 0, 2): "before the start",
        varint(4) + literal(b"abcde"): "more",
        varint(6) + literal(b"abcd") + copy(4, 4, 1): "more",
        varint(9) + literal(b"abcd") + copy(4, 4, 3): "fewer",
        varint(1): "fewer",
    }
    for data, reason in cases.items():
        assert reference(data) == reason, data
        stated = stated_length(data)
        length = 0 if stated is None else stated[0]
        assert decoded(compiled, data, length, length + SLOP) == reason, data
    assert decoded(compiled, varint(0), 0, 0) == b""


def test_where_the_text_is_unclear_google_s_library_decides(compiled: ModuleType) -> None:
    # A literal whose 4-byte length field is 2^32 - 1: Google's library counts its length in
    # 32 bits, so it is an empty literal, not one of 2^32 bytes running past the end.
    for data in (b"\x01\x00a\xfc\xff\xff\xff\xff", b"\x01\xfc\xff\xff\xff\xff\x00a"):
        expected = pa.Codec("snappy").decompress(data, decompressed_size=1, asbytes=True)
        assert expected == b"a"
        assert reference(data) == expected
        assert decoded(compiled, data, 1, 1 + SLOP) == expected


def test_lengths_are_checked_first(compiled: ModuleType) -> None:
    # A stated length other than the one expected (the page header's), or more than `out`
    # holds: refused before anything is written.
    block = pa.Codec("snappy").compress(b"abcdefgh" * 100, asbytes=True)
    out = np.full(1000, SENTINEL, dtype=np.uint8)
    for length, room in ((799, 1000), (801, 1000), (800, 799), (-1, 1000)):
        with pytest.raises(ValueError, match="the data holds 800 bytes"):
            compiled.snappy_decompress(block, out[:room], length)
        assert (out == SENTINEL).all()
    with pytest.raises(ValueError, match="the data holds 4294967295 bytes"):
        compiled.snappy_decompress(b"\xff\xff\xff\xff\x0f", out, 800)
    for more_than_32_bits in (b"\xff\xff\xff\xff\x10", b"\x80\x80\x80\x80\x10\x00\x61"):
        with pytest.raises(ValueError, match="no length at the start"):
            compiled.snappy_decompress(more_than_32_bits, out, 800)
    with pytest.raises(TypeError):
        compiled.snappy_decompress(block, b"read-only" * 100, 800)


def test_snappy_pages_are_decompressed_without_pyarrow(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, compiled: ModuleType
) -> None:
    # Where the kernels are built, _pages never asks pyarrow to decompress a Snappy page; the
    # hashes are those of numpy alone, which does.
    import pyarrow.parquet as pq

    from parquet_bloom import _format as fmt
    from parquet_bloom import _pages, kernels
    from parquet_bloom._io.source import ByteSource, read_footer

    path = tmp_path / "s.parquet"
    table = pa.table({"s": [f"value-{i % 5000}" for i in range(40_000)], "n": range(40_000)})
    pq.write_table(table, path, compression="snappy", data_page_size=4096)

    def hashes() -> list[np.ndarray]:
        with ByteSource(str(path)) as source:
            md = fmt.decode_file_metadata(read_footer(source).data, full=True)
            leaves = fmt.schema_leaves(md)
            return [
                np.sort(_pages.chunk_hashes(source, rg.columns[i].meta_data, leaf))
                for rg in md.row_groups
                for i, leaf in enumerate(leaves)
            ]

    monkeypatch.setattr(kernels, "compiled", None)
    on_numpy = hashes()
    monkeypatch.setattr(kernels, "compiled", compiled)

    class NoCodec:
        def __init__(self, name: str) -> None:
            raise AssertionError(f"pyarrow asked to decompress {name}")

    monkeypatch.setattr(pa, "Codec", NoCodec)
    compiled_hashes = hashes()
    assert len(compiled_hashes) == len(on_numpy) == 2
    for a, b in zip(compiled_hashes, on_numpy, strict=True):
        assert np.array_equal(a, b)

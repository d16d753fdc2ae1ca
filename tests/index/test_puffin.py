"""The Puffin container: our footer as the spec and pyiceberg read it, and hostile footers."""

from __future__ import annotations

import json
import struct

import pytest

from parquet_bloom._index import puffin
from parquet_bloom.errors import BloomFilterError, CorruptFileError, UnsupportedFileError


def _file(blobs: list[bytes], properties: dict[str, str] | None = None) -> bytes:
    out = bytearray(puffin.MAGIC)
    metas = []
    for i, data in enumerate(blobs):
        metas.append(
            puffin.BlobMetadata(
                f"t{i}", offset=len(out), length=len(data), properties={"i": str(i)}
            )
        )
        out += data
    out += puffin.encode_footer(metas, properties or {"created-by": "test"})
    return bytes(out)


def _read(data: bytes) -> puffin.PuffinFooter:
    size = len(data)
    length = puffin.footer_length(data[-puffin.TRAILER_SIZE :], file_size=size)
    start = size - puffin.TRAILER_SIZE - length - len(puffin.MAGIC)
    return puffin.decode_footer(data[start : size - puffin.TRAILER_SIZE], footer_offset=start)


def test_the_layout_is_the_specs() -> None:
    data = _file([b"abc", b"defgh"])
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1"
    size, flags = struct.unpack("<ii", data[-12:-4])
    assert flags == 0
    payload = data[-12 - size : -12]
    assert data[-12 - size - 4 : -12 - size] == b"PFA1"
    document = json.loads(payload)
    assert document["blobs"][1] == {
        "type": "t1",
        "fields": [],
        "snapshot-id": -1,
        "sequence-number": -1,
        "offset": 7,
        "length": 5,
        "properties": {"i": "1"},
    }
    footer = _read(data)
    assert [(b.type, b.offset, b.length) for b in footer.blobs] == [("t0", 4, 3), ("t1", 7, 5)]
    assert footer.properties == {"created-by": "test"}


def test_pyiceberg_reads_our_container() -> None:
    from pyiceberg.table.puffin import PuffinFile

    data = _file([b"abc", b"defgh"])
    parsed = PuffinFile(data)
    assert [b.type for b in parsed.footer.blobs] == ["t0", "t1"]
    assert parsed.get_blob_payload(parsed.footer.blobs[1]) == b"defgh"


def test_every_truncation_and_flip_is_a_located_library_error() -> None:
    data = _file([b"x" * 40, b"y" * 9], {"k": "v"})
    outcomes = {"ok": 0, "error": 0}
    mutants = [data[:cut] for cut in range(len(data))]
    for at in range(len(data)):
        for bit in (0x01, 0x80):
            flipped = bytearray(data)
            flipped[at] ^= bit
            mutants.append(bytes(flipped))
    for mutant in mutants:
        try:
            footer = _read(mutant)
        except (CorruptFileError, UnsupportedFileError):
            outcomes["error"] += 1
            continue
        outcomes["ok"] += 1
        for blob in footer.blobs:  # whatever decoded lies inside the file
            assert blob.offset >= 4 and blob.offset + blob.length <= len(mutant)
    assert outcomes["error"] > len(data)  # every truncation at least
    assert outcomes["ok"] > 0  # flips inside blob bytes change nothing the footer says


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (
            {
                "type": "t",
                "fields": [],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": 4,
                "length": 10**12,
            },
            "outside the blobs' area",
        ),
        (
            {
                "type": "t",
                "fields": [],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": -5,
                "length": 1,
            },
            "outside the blobs' area",
        ),
        (
            {
                "type": 3,
                "fields": [],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": 4,
                "length": 1,
            },
            "type is 3",
        ),
        (
            {
                "type": "t",
                "fields": ["a"],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": 4,
                "length": 1,
            },
            "not a list of integers",
        ),
        (
            {"type": "t", "fields": [], "sequence-number": -1, "offset": 4, "length": 1},
            "snapshot-id is None",
        ),
    ],
)
def test_hostile_blob_metadata(blob: dict[str, object], message: str) -> None:
    payload = json.dumps({"blobs": [blob]}).encode()
    data = b"PFA1" + b"z" * 8 + b"PFA1" + payload + struct.pack("<ii", len(payload), 0) + b"PFA1"
    with pytest.raises(CorruptFileError, match=message):
        _read(data)


def test_compressed_footers_and_blobs_are_refused_as_unsupported() -> None:
    payload = b"\x04\x22\x4d\x18"  # an LZ4 frame's magic: never decoded
    data = b"PFA1" + b"PFA1" + payload + struct.pack("<ii", len(payload), 1) + b"PFA1"
    with pytest.raises(UnsupportedFileError, match="LZ4-compressed"):
        _read(data)
    blob = {
        "type": "t",
        "fields": [],
        "snapshot-id": -1,
        "sequence-number": -1,
        "offset": 4,
        "length": 1,
        "compression-codec": "zstd",
    }
    payload = json.dumps({"blobs": [blob]}).encode()
    data = b"PFA1" + b"z" + b"PFA1" + payload + struct.pack("<ii", len(payload), 0) + b"PFA1"
    with pytest.raises(UnsupportedFileError, match="zstd"):
        _read(data)


def test_a_footer_length_past_the_file_or_the_limit() -> None:
    with pytest.raises(CorruptFileError, match="does not fit"):
        puffin.footer_length(struct.pack("<ii", 10**6, 0) + b"PFA1", file_size=100)
    with pytest.raises(CorruptFileError, match="does not fit"):
        puffin.footer_length(struct.pack("<ii", -1, 0) + b"PFA1", file_size=100)
    with pytest.raises(UnsupportedFileError, match="limit"):
        puffin.footer_length(
            struct.pack("<ii", puffin.MAX_FOOTER_SIZE + 1, 0) + b"PFA1", file_size=1 << 30
        )
    with pytest.raises(CorruptFileError, match="not a Puffin file"):
        puffin.footer_length(struct.pack("<ii", 1, 0) + b"PAR1", file_size=100)
    assert issubclass(CorruptFileError, BloomFilterError)

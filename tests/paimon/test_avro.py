"""The Avro container reader behind the manifests: values of every Avro type in every codec
Paimon's writer may use, and untrusted bytes (truncations, flips, claimed counts, bombs)
giving located errors. Manifests Java Paimon wrote are read in test_tables.py."""

from __future__ import annotations

import contextlib
import json
import random
import struct
import zlib
from typing import Any

import pyarrow as pa
import pytest

from parquet_bloom._paimon import avro
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

SYNC = bytes(range(16))
SCHEMA = {
    "type": "record",
    "name": "record",
    "namespace": "org.apache.paimon.avro.generated",
    "fields": [
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_NAME", "type": "string"},
        {"name": "_FLAG", "type": "boolean"},
        {"name": "_F", "type": "float"},
        {"name": "_D", "type": "double"},
        {"name": "_MAYBE", "type": ["null", "long"], "default": None},
        {"name": "_LIST", "type": {"type": "array", "items": ["null", "long"]}},
        {"name": "_MAP", "type": {"type": "map", "values": "string"}},
        {"name": "_E", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "_FIX", "type": {"type": "fixed", "name": "F4", "size": 4}},
        {
            "name": "_FILE",
            "type": {
                "type": "record",
                "name": "record__FILE",
                "fields": [{"name": "_FILE_NAME", "type": "string"}],
            },
        },
        {"name": "_AGAIN", "type": ["null", "record__FILE"], "default": None},
    ],
}


def zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _string(s: str | bytes) -> bytes:
    raw = s.encode() if isinstance(s, str) else s
    return zigzag(len(raw)) + raw


def _record(i: int) -> tuple[bytes, dict[str, Any]]:
    value = {
        "_KIND": i % 2,
        "_PARTITION": bytes([i % 256]) * (i % 5),
        "_NAME": f"data-{i}-\u00e9",
        "_FLAG": bool(i % 3),
        "_F": 0.5,
        "_D": i / 7,
        "_MAYBE": None if i % 2 else -i,
        "_LIST": [i, None, -(2**62)],
        "_MAP": {"k": str(i)},
        "_E": "B",
        "_FIX": b"abcd",
        "_FILE": {"_FILE_NAME": f"f{i}"},
        "_AGAIN": {"_FILE_NAME": "again"} if i % 2 else None,
    }
    raw = zigzag(value["_KIND"]) + _string(value["_PARTITION"]) + _string(value["_NAME"])
    raw += bytes([value["_FLAG"]]) + struct.pack("<f", 0.5) + struct.pack("<d", value["_D"])
    raw += zigzag(0) if value["_MAYBE"] is None else zigzag(1) + zigzag(value["_MAYBE"])
    # The list as one block with its byte size (a negative count), then the end.
    items = zigzag(1) + zigzag(i) + zigzag(0) + zigzag(1) + zigzag(-(2**62))
    raw += zigzag(-3) + zigzag(len(items)) + items + zigzag(0)
    raw += zigzag(1) + _string("k") + _string(str(i)) + zigzag(0)
    raw += zigzag(1) + b"abcd" + _string(f"f{i}")
    raw += zigzag(1) + _string("again") if i % 2 else zigzag(0)
    return raw, value


def _compress(codec: str, data: bytes) -> bytes:
    if codec == "null":
        return data
    if codec == "deflate":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    if codec == "zstandard":
        return pa.Codec("zstd").compress(data, asbytes=True)
    if codec != "snappy":
        return data  # a codec the reader does not know
    return pa.Codec("snappy").compress(data, asbytes=True) + struct.pack(">I", zlib.crc32(data))


def container(blocks: list[list[bytes]], codec: str = "null", schema: Any = SCHEMA) -> bytes:
    meta = {"avro.schema": json.dumps(schema).encode(), "avro.codec": codec.encode()}
    out = bytearray(b"Obj\x01") + zigzag(len(meta))
    for k, v in meta.items():
        out += _string(k) + _string(v)
    out += zigzag(0) + SYNC
    for block in blocks:
        body = _compress(codec, b"".join(block))
        out += zigzag(len(block)) + zigzag(len(body)) + body + SYNC
    return bytes(out)


@pytest.mark.parametrize("codec", ["null", "deflate", "zstandard", "snappy"])
def test_every_type_in_every_codec(codec: str) -> None:
    records = [_record(i) for i in range(30)]
    data = container([[r for r, _ in records[:10]], [r for r, _ in records[10:]]], codec)
    schema, objects = avro.read_container(data, source="m")
    assert schema == SCHEMA
    assert objects == [v for _, v in records]


def test_every_truncation_is_a_located_error() -> None:
    data = container([[_record(i)[0] for i in range(5)]], "zstandard")
    header = len(container([], "zstandard"))
    assert avro.read_container(data[:header])[1] == []  # no block yet: a valid, empty file
    for n in range(len(data)):
        if n == header:
            continue
        with pytest.raises(CorruptFileError) as caught:
            avro.read_container(data[:n], source="m")
        assert caught.value.source == "m" and caught.value.offset is not None


def test_flipped_bytes_never_escape_as_other_errors() -> None:
    rng = random.Random(11)
    data = container([[_record(i)[0] for i in range(5)]], "null")
    for _ in range(2000):
        flipped = bytearray(data)
        flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        with contextlib.suppress(CorruptFileError, UnsupportedFileError):
            avro.read_container(bytes(flipped))


def test_a_wrong_sync_marker_is_corruption() -> None:
    data = bytearray(container([[_record(0)[0]]]))
    data[-1] ^= 1
    with pytest.raises(CorruptFileError, match="sync marker"):
        avro.read_container(bytes(data))


def test_claimed_counts_are_checked_before_items_are_made() -> None:
    schema = {"type": "array", "items": "long"}
    block = zigzag(2**40) + zigzag(1)  # 2**40 longs claimed, one byte there
    with pytest.raises(CorruptFileError, match="block of 1099511627776 items"):
        avro.read_container(container([[block]], schema=schema))
    many_objects = bytearray(container([[zigzag(0) + zigzag(0)]], schema=schema))
    with pytest.raises(CorruptFileError):
        avro.read_container(bytes(many_objects).replace(b"\x02\x04", b"\xfe\xff\xff\xff\x0f\x04"))


def test_a_decompression_bomb_stops_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(avro, "MAX_BLOCK_BYTES", 4096)
    schema = {"type": "bytes"}
    big = _string(b"\x00" * 100_000)
    for codec in ("deflate", "zstandard", "snappy"):
        with pytest.raises(CorruptFileError, match="MAX_BLOCK_BYTES"):
            avro.read_container(container([[big]], codec, schema=schema))


def test_varints_and_unions_out_of_range() -> None:
    for body, schema, message in [
        (b"\xff" * 11, "long", "longer than 10 bytes"),
        (zigzag(5), ["null", "long"], "union branch 5"),
        (zigzag(9), {"type": "enum", "name": "E", "symbols": ["A"]}, "enum index 9"),
        (_string(b"\xff\xfe"), "string", "not UTF-8"),
    ]:
        with pytest.raises(CorruptFileError, match=message):
            avro.read_container(container([[body]], schema=schema))


def test_what_is_not_read_here() -> None:
    with pytest.raises(CorruptFileError, match="not an Avro container"):
        avro.read_container(b"PAR1....")
    with pytest.raises(UnsupportedFileError, match="codec 'lzma'"):
        avro.read_container(container([[zigzag(1)]], "lzma", schema="long"))
    header = b"Obj\x01" + zigzag(1) + _string("avro.schema") + _string("{not json") + zigzag(0)
    with pytest.raises(CorruptFileError, match="schema that is not JSON"):
        avro.read_container(header + SYNC)

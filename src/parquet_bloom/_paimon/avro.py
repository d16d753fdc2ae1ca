"""Avro object container files, decoded: Paimon's manifests and manifest lists.

Paimon writes both as Avro by default (``manifest.format``), compressed with zstd
(``manifest.compression``). The container (Avro 1.11 specification, "Object Container Files")
is the magic ``Obj\\x01``, a metadata map (``avro.schema``, ``avro.codec``), a 16-byte sync
marker, then blocks: an object count, a byte count, the (compressed) objects and the marker.
Objects use Avro's binary encoding: zigzag varints for int and long, little-endian float and
double, length-prefixed bytes and strings, a branch index for unions, blocked arrays and maps,
record fields in order.

This is a reader of untrusted bytes: every length and count is checked against the bytes that
remain before anything of that size is made, and a block may not decompress to more than
:data:`MAX_BLOCK_BYTES`. Codecs: null, deflate, zstandard, snappy (through pyarrow).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from typing import Any

from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

__all__ = ["MAGIC", "MAX_BLOCK_BYTES", "read_container"]

MAGIC = b"Obj\x01"
# A manifest is rolled at manifest.target-file-size (8 MiB by default); a block of objects
# that decompresses past 256 MiB is not one Paimon wrote, and stops before it is held.
MAX_BLOCK_BYTES = 256 * 1024 * 1024
# Nesting of the schema (records in records, unions, arrays): Paimon's manifests nest 3 deep.
_MAX_DEPTH = 32
_SYNC = 16
_CHUNK = 1024 * 1024


class _Decoder:
    """Avro binary values from one buffer, each length checked against the buffer's end."""

    def __init__(self, data: bytes, source: str | None, base: int = 0) -> None:
        self.data, self.at, self.source, self.base = data, 0, source, base

    def fail(self, message: str) -> CorruptFileError:
        return CorruptFileError(message, source=self.source, offset=self.base + self.at)

    def remaining(self) -> int:
        return len(self.data) - self.at

    def long(self) -> int:
        shift = result = 0
        for _ in range(10):
            if self.at >= len(self.data):
                raise self.fail("a varint runs past the end of the data")
            b = self.data[self.at]
            self.at += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7
        raise self.fail("a varint longer than 10 bytes")

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or n > self.remaining():
            raise self.fail(f"{what} of {n} bytes, with {self.remaining()} left")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def value(self, schema: Any, names: dict[str, Any], depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise self.fail(f"a schema nested deeper than {_MAX_DEPTH}")
        if isinstance(schema, str):
            schema = names.get(schema, schema)
        if isinstance(schema, list):
            branch = self.long()
            if not 0 <= branch < len(schema):
                raise self.fail(f"union branch {branch} of {len(schema)}")
            return self.value(schema[branch], names, depth + 1)
        kind = schema if isinstance(schema, str) else schema.get("type")
        if isinstance(kind, dict | list):
            return self.value(kind, names, depth + 1)
        if kind == "null":
            return None
        if kind == "boolean":
            return self.take(1, "a boolean") != b"\x00"
        if kind in ("int", "long"):
            return self.long()
        if kind == "float":
            return struct.unpack("<f", self.take(4, "a float"))[0]
        if kind == "double":
            return struct.unpack("<d", self.take(8, "a double"))[0]
        if kind in ("bytes", "string"):
            raw = self.take(self.long(), kind)
            if kind == "bytes":
                return raw
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise self.fail(f"a string that is not UTF-8: {err.reason}") from err
        if kind == "fixed":
            return self.take(int(schema["size"]), "a fixed")
        if kind == "enum":
            symbols = schema["symbols"]
            i = self.long()
            if not 0 <= i < len(symbols):
                raise self.fail(f"enum index {i} of {len(symbols)}")
            return symbols[i]
        if kind == "record":
            return {f["name"]: self.value(f["type"], names, depth + 1) for f in schema["fields"]}
        if kind == "array":
            return [self.value(schema["items"], names, depth + 1) for _ in self._blocks()]
        if kind == "map":
            out = {}
            for _ in self._blocks():
                key = self.value("string", names, depth + 1)
                out[key] = self.value(schema["values"], names, depth + 1)
            return out
        raise UnsupportedFileError(f"an Avro type {kind!r} not read here", source=self.source)

    def _blocks(self) -> Iterator[None]:
        """One step per item of a blocked array or map. Every item but a null takes a byte at
        least: a count beyond the bytes left is refused before any item is made."""
        while True:
            count = self.long()
            if count == 0:
                return
            if count < 0:
                count = -count
                self.long()  # the block's byte size
            if count > self.remaining():
                raise self.fail(f"a block of {count} items, with {self.remaining()} bytes left")
            for _ in range(count):
                yield None


def _register(schema: Any, names: dict[str, Any], namespace: str = "") -> None:
    """Named types (records, enums, fixed) by their full and short names."""
    if isinstance(schema, list):
        for s in schema:
            _register(s, names, namespace)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error", "enum", "fixed") and "name" in schema:
            space = schema.get("namespace", namespace)
            name = schema["name"]
            full = name if "." in name or not space else f"{space}.{name}"
            names[full] = names[name.rsplit(".", 1)[-1]] = schema
            namespace = full.rsplit(".", 1)[0] if "." in full else ""
        if kind in ("record", "error"):
            for field in schema.get("fields", []):
                _register(field.get("type"), names, namespace)
        elif kind == "array":
            _register(schema.get("items"), names, namespace)
        elif kind == "map":
            _register(schema.get("values"), names, namespace)
        elif isinstance(kind, dict | list):
            _register(kind, names, namespace)


def _decompress(codec: str, data: bytes, source: str | None, offset: int) -> bytes:
    def too_big() -> CorruptFileError:
        return CorruptFileError(
            f"an Avro block that decompresses past MAX_BLOCK_BYTES ({MAX_BLOCK_BYTES})",
            source=source,
            offset=offset,
        )

    try:
        if codec == "null":
            return data
        if codec == "deflate":
            inflater = zlib.decompressobj(-15)
            out = inflater.decompress(data, MAX_BLOCK_BYTES + 1)
            if len(out) > MAX_BLOCK_BYTES:
                raise too_big()
            return out
        import pyarrow as pa

        if codec == "zstandard":
            stream = pa.CompressedInputStream(pa.BufferReader(data), "zstd")
            parts: list[bytes] = []
            total = 0
            while True:
                part = stream.read(_CHUNK)
                if not part:
                    return b"".join(parts)
                total += len(part)
                if total > MAX_BLOCK_BYTES:
                    raise too_big()
                parts.append(part)
        if codec == "snappy":
            # Avro's snappy blocks end with the CRC-32 (big-endian) of the uncompressed bytes;
            # a raw snappy block starts with its uncompressed length as a varint.
            body, crc = data[:-4], data[-4:]
            size = shift = 0
            for i in range(min(5, len(body))):
                size |= (body[i] & 0x7F) << shift
                shift += 7
                if not body[i] & 0x80:
                    break
            if size > MAX_BLOCK_BYTES:
                raise too_big()
            out = pa.Codec("snappy").decompress(body, decompressed_size=size, asbytes=True)
            if len(crc) != 4 or zlib.crc32(out) != int.from_bytes(crc, "big"):
                raise CorruptFileError(
                    "an Avro snappy block whose CRC does not match", source=source, offset=offset
                )
            return bytes(out)
    except (zlib.error, OSError, ValueError) as err:
        if isinstance(err, CorruptFileError):
            raise
        raise CorruptFileError(
            f"an Avro {codec} block that does not decompress: {err}", source=source, offset=offset
        ) from err
    raise UnsupportedFileError(f"Avro codec {codec!r} is not read here", source=source)


def read_container(data: bytes, *, source: str | None = None) -> tuple[Any, list[Any]]:
    """The schema (parsed JSON) and every object of an Avro object container file."""
    if data[:4] != MAGIC:
        raise CorruptFileError(
            f"not an Avro container file: starts {data[:4]!r}", source=source, offset=0
        )
    head = _Decoder(data, source)
    head.at = 4
    metadata = head.value({"type": "map", "values": "bytes"}, {})
    sync = head.take(_SYNC, "the sync marker")
    try:
        schema = json.loads(metadata.get("avro.schema", b"").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorruptFileError(
            f"an Avro schema that is not JSON: {err}", source=source, offset=4
        ) from err
    codec = metadata.get("avro.codec", b"null").decode("ascii", "replace")
    names: dict[str, Any] = {}
    _register(schema, names)
    objects: list[Any] = []
    while head.remaining():
        block_at = head.at
        count = head.long()
        size = head.long()
        raw = head.take(size, "an Avro block")
        if head.take(_SYNC, "a sync marker") != sync:
            raise CorruptFileError(
                "an Avro block not followed by the file's sync marker",
                source=source,
                offset=head.at - _SYNC,
            )
        block = _Decoder(_decompress(codec, raw, source, block_at), source)
        if count < 0 or count > max(block.remaining(), 1) * 8:
            raise CorruptFileError(
                f"an Avro block of {count} objects in {block.remaining()} bytes",
                source=source,
                offset=block_at,
            )
        try:
            for _ in range(count):
                objects.append(block.value(schema, names))
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            if isinstance(err, CorruptFileError | UnsupportedFileError):
                raise
            raise CorruptFileError(
                f"an Avro schema this data does not follow: {type(err).__name__} {err}",
                source=source,
                offset=block_at,
            ) from err
        if block.remaining():
            raise CorruptFileError(
                f"{block.remaining()} bytes left over in an Avro block",
                source=source,
                offset=block_at,
            )
    return schema, objects

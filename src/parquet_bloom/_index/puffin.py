"""Iceberg's Puffin container: a magic, blobs, and a JSON footer that says where each blob lies.

Spec: Iceberg's ``format/puffin-spec.md`` (docs/index.md#the-container says it in our words)::

    Magic Blob_1 ... Blob_n Magic FooterPayload FooterPayloadSize Flags Magic

``Magic`` is ``PFA1``; ``FooterPayloadSize`` and ``Flags`` are 4-byte little-endian signed
integers; bit 0 of the flags' first byte says the payload is LZ4-compressed (we write it
uncompressed, and refuse a compressed one: only our own indexes are read here). The payload is a
UTF-8 JSON object ``{"blobs": [BlobMetadata...], "properties": {...}}``; a blob's metadata has
``type``, ``fields`` (field ids), ``snapshot-id``, ``sequence-number``, ``offset``, ``length``,
optionally ``compression-codec`` and ``properties`` (string values).

Pure: bytes in, structs out; every length from the file is checked before it is used.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

__all__ = [
    "MAGIC",
    "TRAILER_SIZE",
    "BlobMetadata",
    "PuffinFooter",
    "decode_footer",
    "encode_footer",
    "footer_length",
]

MAGIC = b"PFA1"
# FooterPayloadSize, Flags, Magic.
TRAILER_SIZE = 12
_TRAILER = struct.Struct("<ii4s")
_FLAG_COMPRESSED = 0x01
# The largest footer read: an index's footer lists a few blobs per column and size class, a few
# hundred bytes each. 16 MiB is far past any index we write, small enough that a hostile length
# allocates nothing much.
MAX_FOOTER_SIZE = 16 << 20


@dataclass(frozen=True)
class BlobMetadata:
    """One blob: where it lies (``offset``, ``length``), what it is (``type``, ``properties``),
    and what it was computed for (``fields``: Iceberg field ids; ``snapshot_id`` and
    ``sequence_number``: -1 where there is no Iceberg snapshot)."""

    type: str
    offset: int
    length: int
    fields: tuple[int, ...] = ()
    snapshot_id: int = -1
    sequence_number: int = -1
    properties: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "fields": list(self.fields),
            "snapshot-id": self.snapshot_id,
            "sequence-number": self.sequence_number,
            "offset": self.offset,
            "length": self.length,
        }
        if self.properties:
            out["properties"] = dict(self.properties)
        return out


@dataclass(frozen=True)
class PuffinFooter:
    blobs: tuple[BlobMetadata, ...]
    properties: Mapping[str, str] = field(default_factory=dict)


def encode_footer(blobs: Sequence[BlobMetadata], properties: Mapping[str, str]) -> bytes:
    """The footer (from its leading magic to the final one) for ``blobs``."""
    payload = json.dumps(
        {"blobs": [b.to_json() for b in blobs], "properties": dict(properties)},
        separators=(",", ":"),
        sort_keys=False,
    ).encode()
    return MAGIC + payload + _TRAILER.pack(len(payload), 0, MAGIC)


def footer_length(trailer: bytes, *, file_size: int, source: str | None = None) -> int:
    """The length of the footer payload, from the file's last ``TRAILER_SIZE`` bytes; checked
    against the file's size and the limit."""
    if len(trailer) != TRAILER_SIZE:
        raise CorruptFileError(
            f"a Puffin file of {file_size} bytes is too short for its footer", source=source
        )
    size, flags, magic = _TRAILER.unpack(trailer)
    if magic != MAGIC:
        raise CorruptFileError(
            f"not a Puffin file: it ends in {magic!r}, not {MAGIC!r}", source=source
        )
    if flags & _FLAG_COMPRESSED:
        raise UnsupportedFileError(
            "the Puffin footer is LZ4-compressed; parquet-bloom writes and reads uncompressed "
            "footers only",
            source=source,
        )
    # Magic, blobs (none is fine), Magic, payload, trailer.
    room = file_size - len(MAGIC) - len(MAGIC) - TRAILER_SIZE
    if size < 0 or size > room:
        raise CorruptFileError(
            f"a Puffin footer of {size} bytes does not fit in a file of {file_size} bytes",
            source=source,
        )
    if size > MAX_FOOTER_SIZE:
        raise UnsupportedFileError(
            f"a Puffin footer of {size} bytes exceeds this library's limit of "
            f"{MAX_FOOTER_SIZE} bytes",
            source=source,
        )
    return int(size)


def decode_footer(footer: bytes, *, footer_offset: int, source: str | None = None) -> PuffinFooter:
    """The footer's blobs and properties, from the footer's bytes (its leading magic, the
    payload; without the trailer) that start at ``footer_offset``. Every blob must lie between
    the file's leading magic and the footer."""
    if footer[: len(MAGIC)] != MAGIC:
        raise CorruptFileError(
            "the Puffin footer does not start with its magic", source=source, offset=footer_offset
        )
    try:
        document = json.loads(bytes(footer[len(MAGIC) :]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorruptFileError(
            f"the Puffin footer is not UTF-8 JSON: {err}", source=source, offset=footer_offset
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("blobs"), list):
        raise CorruptFileError(
            "the Puffin footer has no list of blobs", source=source, offset=footer_offset
        )
    blobs = tuple(
        _blob(entry, i, footer_offset, source) for i, entry in enumerate(document["blobs"])
    )
    return PuffinFooter(blobs, _strings(document.get("properties", {}), "the file", source))


def _blob(entry: Any, i: int, footer_offset: int, source: str | None) -> BlobMetadata:
    def bad(reason: str) -> CorruptFileError:
        return CorruptFileError(f"Puffin blob {i}: {reason}", source=source)

    if not isinstance(entry, dict):
        raise bad("its metadata is not an object")
    values: dict[str, int] = {}
    for name in ("offset", "length", "snapshot-id", "sequence-number"):
        value = entry.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad(f"{name} is {value!r}, not an integer")
        values[name] = value
    kind = entry.get("type")
    if not isinstance(kind, str):
        raise bad(f"type is {kind!r}, not a string")
    fields = entry.get("fields")
    if not isinstance(fields, list) or not all(
        isinstance(f, int) and not isinstance(f, bool) for f in fields
    ):
        raise bad(f"fields is {fields!r}, not a list of integers")
    if entry.get("compression-codec") is not None:
        raise UnsupportedFileError(
            f"Puffin blob {i} ({kind}) is compressed with {entry['compression-codec']!r}: an "
            "index's blobs are read by range and stored uncompressed",
            source=source,
        )
    offset, length = values["offset"], values["length"]
    if offset < len(MAGIC) or length < 0 or offset + length > footer_offset:
        raise bad(
            f"it lies at {offset} for {length} bytes, outside the blobs' area "
            f"[{len(MAGIC)}, {footer_offset})"
        )
    return BlobMetadata(
        type=kind,
        offset=offset,
        length=length,
        fields=tuple(fields),
        snapshot_id=values["snapshot-id"],
        sequence_number=values["sequence-number"],
        properties=_strings(entry.get("properties", {}), f"blob {i}", source),
    )


def _strings(value: Any, what: str, source: str | None) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise CorruptFileError(
            f"the Puffin properties of {what} are not an object of strings", source=source
        )
    return dict(value)

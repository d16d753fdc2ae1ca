"""Hudi's serialised record-key filter: the Java ``DataOutput`` bytes, and their Base64.

The layout (docs/hudi.md#the-serialised-filter; Hudi's ``InternalFilter``,
``InternalBloomFilter``, ``InternalDynamicBloomFilter``, ported from Hadoop's ``Filter``,
``BloomFilter``, ``DynamicBloomFilter``), all integers big-endian:

- a filter header of 13 bytes: int32 version (-1), int32 ``nbHash``, int8 ``hashType``
  (1 = MurmurHash, 0 = Jenkins), int32 ``vectorSize`` (bits). A positive first int is the
  older, unversioned header (8 bytes: that int is ``nbHash``, the hash is Jenkins);
- SIMPLE: the header, then ``ceil(vectorSize / 8)`` bytes of bits, bit ``i`` in byte
  ``i >> 3`` under mask ``1 << (i & 7)``;
- DYNAMIC_V0: the header, int32 ``nr`` (keys per row), int32 ``currentNbRecord``, int32 rows,
  then each row as a whole SIMPLE filter (its own header and bits).

The footer holds the standard Base64 (with padding) of those bytes (``Base64CodecUtil``).

Decoding treats the bytes as untrusted: every size is checked against the bytes that are
actually there before anything of that size is allocated, so a hostile string costs at most
the memory of its own decoded bytes; each error is a :class:`CorruptFileError` (or
:class:`UnsupportedFileError` for a well-formed filter this library does not read: the Jenkins
hash) naming the byte offset and, from a file, the file.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

__all__ = [
    "DYNAMIC_V0",
    "HEADER_SIZE",
    "JENKINS_HASH",
    "MAX_NUM_HASHES",
    "MURMUR_HASH",
    "SIMPLE",
    "VERSION",
    "Decoded",
    "decode",
    "decode_base64",
    "encode",
    "encode_base64",
    "mask_padding",
    "row_bytes",
]

# Filter types, as BloomFilterTypeCode names them (the footer's hoodie_bloom_filter_type_code).
SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"

VERSION = -1  # InternalFilter.VERSION: "negative to accommodate for old format"
MURMUR_HASH = 1  # org.apache.hadoop.util.hash.Hash.MURMUR_HASH (Hudi's Hash too)
JENKINS_HASH = 0  # Hash.JENKINS_HASH
_HEADER = struct.Struct(">iibi")
HEADER_SIZE = _HEADER.size  # 13
_DYNAMIC = struct.Struct(">iii")

# Limits for untrusted filters (sizes are also checked against the bytes present, which bounds
# memory; these bound work). A filter's probe costs num_hashes hashes per key per row: Hudi's
# sizing gives ceil(log2(1 / fpp)) hashes, at most 1075 for the smallest positive double, so a
# header claiming more did not come from Hudi's sizing and would make every probe loop that
# many times (2**31 - 1 at worst).
MAX_NUM_HASHES = 4096


def row_bytes(vector_size: int) -> int:
    """Bytes of one row's bits: ``(int)(((long) vectorSize + 7) / 8)``."""
    return (vector_size + 7) // 8


@dataclass(frozen=True)
class Decoded:
    """A decoded filter: its parameters and its rows of bits, shape ``(rows, row_bytes)``."""

    type: str
    num_hashes: int
    hash_type: int
    vector_size: int
    bits: NDArray[np.uint8]
    keys_per_row: int | None  # DYNAMIC_V0's nr
    current_records: int | None  # DYNAMIC_V0's currentNbRecord


def _header(data: memoryview, at: int, source: str | None, what: str) -> tuple[int, int, int, int]:
    """``(num_hashes, hash_type, vector_size, header_length)`` of the filter header at ``at``."""
    if len(data) - at < 4:
        raise CorruptFileError(
            f"{what} ends {len(data) - at} bytes into its header, which needs {HEADER_SIZE}",
            source=source,
            offset=at,
        )
    (version,) = struct.unpack_from(">i", data, at)
    if version > 0:
        # The unversioned header of Hadoop's Filter before versions: nbHash, then vectorSize,
        # hashed with Jenkins (InternalFilter.readFields).
        raise UnsupportedFileError(
            f"{what} uses the unversioned header (Jenkins hash), which this library does not read",
            source=source,
            offset=at,
        )
    if version != VERSION:
        raise UnsupportedFileError(
            f"{what} has version {version}; Hudi writes {VERSION}", source=source, offset=at
        )
    if len(data) - at < HEADER_SIZE:
        raise CorruptFileError(
            f"{what} ends {len(data) - at} bytes into its header, which needs {HEADER_SIZE}",
            source=source,
            offset=at,
        )
    _, num_hashes, hash_type, vector_size = _HEADER.unpack_from(data, at)
    if vector_size <= 0:
        raise CorruptFileError(
            f"{what} has a vector of {vector_size} bits (HashFunction: maxValue must be > 0)",
            source=source,
            offset=at + 9,
        )
    if not 0 < num_hashes <= MAX_NUM_HASHES:
        raise CorruptFileError(
            f"{what} has {num_hashes} hash functions; a filter has 1 to {MAX_NUM_HASHES}",
            source=source,
            offset=at + 4,
        )
    if hash_type == JENKINS_HASH:
        raise UnsupportedFileError(
            f"{what} hashes with Jenkins; this library reads MurmurHash filters (what Hudi writes)",
            source=source,
            offset=at + 8,
        )
    if hash_type != MURMUR_HASH:
        raise CorruptFileError(
            f"{what} has hash type {hash_type}; Hadoop knows 0 (Jenkins) and 1 (Murmur)",
            source=source,
            offset=at + 8,
        )
    return num_hashes, hash_type, vector_size, HEADER_SIZE


def decode(raw: bytes | memoryview, type_code: str, *, source: str | None = None) -> Decoded:
    """Decode the ``DataOutput`` bytes of a filter of type ``type_code`` (SIMPLE or
    DYNAMIC_V0, as Hudi compares them: ignoring case). Raises CorruptFileError when the bytes
    and the sizes they state disagree (short, or bytes left over), before allocating."""
    kind = type_code.upper()
    if kind not in (SIMPLE, DYNAMIC_V0):
        raise UnsupportedFileError(
            f"unknown Hudi Bloom filter type {type_code!r} (Hudi knows {SIMPLE} and {DYNAMIC_V0})",
            source=source,
        )
    data = memoryview(raw).cast("B")
    num_hashes, hash_type, vector_size, at = _header(data, 0, source, "the filter")
    size = row_bytes(vector_size)
    if kind == SIMPLE:
        if len(data) - at != size:
            raise CorruptFileError(
                f"a SIMPLE filter of {vector_size} bits needs {size} bytes after its header, "
                f"the value has {len(data) - at}",
                source=source,
                offset=at,
            )
        bits = np.frombuffer(data, dtype=np.uint8, count=size, offset=at).reshape(1, size).copy()
        mask_padding(bits, vector_size)
        return Decoded(kind, num_hashes, hash_type, vector_size, bits, None, None)
    if len(data) - at < _DYNAMIC.size:
        raise CorruptFileError(
            f"a DYNAMIC_V0 filter ends {len(data) - at} bytes after its header, before its "
            f"{_DYNAMIC.size} bytes of row counts",
            source=source,
            offset=at,
        )
    keys_per_row, current, rows = _DYNAMIC.unpack_from(data, at)
    if keys_per_row < 1:
        # Hudi's nr is the configured entry count its sizing divides by: a filter with
        # nr <= 0 has no bits or no hashes, which HashFunction refuses, so no writer made it.
        raise CorruptFileError(
            f"a DYNAMIC_V0 filter with {keys_per_row} keys per row (nr); Hudi's rows hold "
            "at least one",
            source=source,
            offset=at,
        )
    if current < 0:
        # currentNbRecord starts at 0 and rises by one a key (reset to 0 with each new row); it
        # would turn negative only after 2**31 keys added to one base file's filter.
        raise CorruptFileError(
            f"a DYNAMIC_V0 filter with {current} keys in its last row (currentNbRecord); "
            "Hudi counts up from 0",
            source=source,
            offset=at + 4,
        )
    at += _DYNAMIC.size
    if rows <= 0:
        raise CorruptFileError(
            f"a DYNAMIC_V0 filter with {rows} rows (Hudi starts with one)",
            source=source,
            offset=at - 4,
        )
    stride = HEADER_SIZE + size
    if (len(data) - at) != rows * stride:
        raise CorruptFileError(
            f"a DYNAMIC_V0 filter of {rows} rows of {vector_size} bits needs {rows * stride:,} "
            f"bytes after its row counts, the value has {len(data) - at:,}",
            source=source,
            offset=at,
        )
    # Bounded: the bytes are there. Every row's header must be the filter's (Hudi's addRow
    # gives each row the filter's parameters); the first that is not is decoded for the error.
    table = np.frombuffer(data, dtype=np.uint8, offset=at).reshape(rows, stride)
    expected = np.frombuffer(data, dtype=np.uint8, count=HEADER_SIZE)
    differ = np.flatnonzero((table[:, :HEADER_SIZE] != expected).any(axis=1))
    if len(differ):
        r = int(differ[0])
        row_at = at + r * stride
        row = _header(data, row_at, source, f"row {r}")
        raise CorruptFileError(
            f"row {r} has {row[0]} hashes of type {row[1]} over {row[2]} bits, the filter "
            f"{num_hashes} of type {hash_type} over {vector_size} (Hudi's rows share them)",
            source=source,
            offset=row_at,
        )
    bits = table[:, HEADER_SIZE:].copy()
    mask_padding(bits, vector_size)
    return Decoded(kind, num_hashes, hash_type, vector_size, bits, keys_per_row, current)


def mask_padding(bits: NDArray[np.uint8], vector_size: int) -> None:
    """Clear the bits past ``vector_size`` in each row's last byte: Hudi reads only bits below
    it and writes the rest as zeros (InternalBloomFilter.readFields / write)."""
    spare = row_bytes(vector_size) * 8 - vector_size
    if spare:
        bits[:, -1] &= np.uint8(0xFF >> spare)


def encode(filter: Decoded) -> bytes:
    """The ``DataOutput`` bytes Hudi writes for ``filter``."""
    bits = filter.bits.copy()
    mask_padding(bits, filter.vector_size)
    header = _HEADER.pack(VERSION, filter.num_hashes, filter.hash_type, filter.vector_size)
    if filter.type == SIMPLE:
        return header + bits.tobytes()
    assert filter.keys_per_row is not None and filter.current_records is not None
    table = np.empty((len(bits), HEADER_SIZE + bits.shape[1]), dtype=np.uint8)
    table[:, :HEADER_SIZE] = np.frombuffer(header, dtype=np.uint8)  # each row's own header
    table[:, HEADER_SIZE:] = bits
    counts = _DYNAMIC.pack(filter.keys_per_row, filter.current_records, len(bits))
    return header + counts + table.tobytes()


def decode_base64(text: str | bytes, *, source: str | None = None) -> bytes:
    """The bytes of the footer's Base64 value (standard alphabet, padded, nothing else: what
    ``java.util.Base64`` writes). CorruptFileError otherwise, at the first bad character."""
    raw = text.encode("ascii", "replace") if isinstance(text, str) else bytes(text)
    try:
        return base64.b64decode(raw, validate=True)
    except binascii.Error as e:
        bad = next(
            (
                i
                for i, c in enumerate(raw)
                if not (chr(c).isascii() and (chr(c).isalnum() or chr(c) in "+/="))
            ),
            None,
        )
        where = f" (character {bad})" if bad is not None else ""
        raise CorruptFileError(
            f"the Hudi Bloom filter is not valid Base64{where}: {e}", source=source
        ) from e


def encode_base64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")

"""The header in front of each Bloom filter's bitset: decoding it, and encoding ours.

Each column chunk's filter is a Thrift compact BloomFilterHeader followed by numBytes of
bitset (docs/format-notes.md, Bloom filter header). The header's algorithm, hash and
compression are unions with one member each today (BLOCK, XXHASH, UNCOMPRESSED). The
generated code cannot tell "no member we know" from "no member", and we must report an
unknown member (a newer writer) differently from garbage, so we decode the header with the
hand-written :class:`~parquet_bloom._format._compact.CompactReader`: it is four fields, and
a hand-written decoder also bounds exactly how far it reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from parquet_bloom._format import _compact as compact
from parquet_bloom.errors import CorruptFileError

# A Bloom filter header is ~16 bytes (four small fields). We parse it in pure Python, so we
# bound how much of the buffer we are willing to walk when unknown fields pad it out; this
# keeps a hostile header to milliseconds of work however long the buffer handed to us is.
MAX_BLOOM_FILTER_HEADER_SIZE = 64 * 1024

# Known union members by field id (docs/format-notes.md, Bloom filter header).
_BLOOM_ALGORITHMS = {1: "BLOCK"}
_BLOOM_HASHES = {1: "XXHASH"}
_BLOOM_COMPRESSIONS = {1: "UNCOMPRESSED"}

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class BloomFilterHeader:
    """A decoded parquet.thrift BloomFilterHeader.

    ``algorithm``, ``hash`` and ``compression`` name the union member that was set:
    "BLOCK", "XXHASH", "UNCOMPRESSED", or "UNKNOWN(<field id>)" for a member newer than
    this library, which the caller should report as unsupported.
    """

    num_bytes: int
    algorithm: str
    hash: str
    compression: str


def parse_bloom_filter_header(buf: bytes | memoryview) -> tuple[BloomFilterHeader, int]:
    """Decode the BloomFilterHeader at the start of ``buf``.

    Returns the header and the number of bytes it took; the bitset follows right after.
    Bytes after the header struct are ignored. Unknown union members decode as
    "UNKNOWN(<field id>)"; anything that is not a valid header raises ``CorruptFileError``.
    """
    view = memoryview(buf)
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    canonical = _canonical_header(view)
    if canonical is not None:
        return canonical
    clipped = len(view) > MAX_BLOOM_FILTER_HEADER_SIZE
    reader = compact.CompactReader(view[:MAX_BLOOM_FILTER_HEADER_SIZE])
    try:
        num_bytes: int | None = None
        algorithm: str | None = None
        hash_: str | None = None
        compression: str | None = None
        for ctype, fid in reader.fields():
            if fid == 1 and ctype == compact.CT_I32:
                num_bytes = reader.zigzag()
                if not _INT32_MIN <= num_bytes <= _INT32_MAX:
                    raise compact.Malformed(f"numBytes {num_bytes} is not an i32")
            elif fid == 2 and ctype == compact.CT_STRUCT:
                algorithm = reader.union_member(_BLOOM_ALGORITHMS, "algorithm")
            elif fid == 3 and ctype == compact.CT_STRUCT:
                hash_ = reader.union_member(_BLOOM_HASHES, "hash")
            elif fid == 4 and ctype == compact.CT_STRUCT:
                compression = reader.union_member(_BLOOM_COMPRESSIONS, "compression")
            else:  # a field from a newer format version: skip it, like Thrift does
                reader.skip(ctype, 1)
    except compact.Malformed as err:
        reason = str(err)
        if clipped and isinstance(err, compact.Truncated):
            reason = (
                f"header longer than this library's limit of {MAX_BLOOM_FILTER_HEADER_SIZE} bytes"
            )
        raise CorruptFileError(f"cannot decode the Bloom filter header: {reason}") from None
    missing = [
        name
        for name, value in (
            ("numBytes", num_bytes),
            ("algorithm", algorithm),
            ("hash", hash_),
            ("compression", compression),
        )
        if value is None
    ]
    if missing:
        raise CorruptFileError(
            f"cannot decode the Bloom filter header: required field(s) {', '.join(missing)} missing"
        )
    assert num_bytes is not None and algorithm and hash_ and compression  # for mypy
    if num_bytes < 0:
        raise CorruptFileError(
            f"cannot decode the Bloom filter header: numBytes is negative ({num_bytes})"
        )
    header = BloomFilterHeader(
        num_bytes=num_bytes, algorithm=algorithm, hash=hash_, compression=compression
    )
    return header, reader.pos


# Field 2, 3 and 4 (each a one-byte header: delta 1, type struct) holding a union whose
# member 1 is an empty struct: 0x1c 0x1c 0x00 (member stop) 0x00 (union stop).
_BLOCK_XXHASH_UNCOMPRESSED = b"\x1c\x1c\x00\x00" * 3
# What follows numBytes in the header every writer writes: the three unions, the stop byte.
_CANONICAL_TAIL = _BLOCK_XXHASH_UNCOMPRESSED + b"\x00"
_I32_FIELD_1 = 0x15  # field header: delta 1, wire type i32


def _canonical_header(view: memoryview) -> tuple[BloomFilterHeader, int] | None:
    """The header as :func:`encode_bloom_filter_header` writes it (Arrow C++, parquet-java
    and this library), decoded without the general reader: numBytes as a varint of up to 5
    bytes, then exactly the BLOCK, XXHASH and UNCOMPRESSED unions and the stop byte. None for
    anything else, which the general reader decodes (the same result where both apply)."""
    if len(view) < 2 or view[0] != _I32_FIELD_1:
        return None
    n = shift = 0
    at = 1
    for at in range(1, min(len(view), 6)):
        b = view[at]
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    else:
        return None
    end = at + 1 + len(_CANONICAL_TAIL)
    if view[at + 1 : end] != _CANONICAL_TAIL:
        return None
    num_bytes = (n >> 1) ^ -(n & 1)
    if not 0 <= num_bytes <= _INT32_MAX:
        return None
    return _block_header(num_bytes), end


def _block_header(num_bytes: int) -> BloomFilterHeader:
    return BloomFilterHeader(
        num_bytes=num_bytes, algorithm="BLOCK", hash="XXHASH", compression="UNCOMPRESSED"
    )


def encode_bloom_filter_header(num_bytes: int) -> bytes:
    """The compact-protocol BloomFilterHeader for a BLOCK / XXHASH / UNCOMPRESSED filter.

    Byte for byte what Arrow C++ and parquet-java write: field 1 (i32, zigzag varint), the
    three one-member unions, and the struct's stop byte.
    """
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, int):
        raise TypeError(f"num_bytes must be an int, not {type(num_bytes).__name__}")
    if not 0 <= num_bytes <= _INT32_MAX:
        raise ValueError(f"num_bytes must be in [0, {_INT32_MAX}], got {num_bytes}")
    return b"\x15" + compact.varint(num_bytes << 1) + _BLOCK_XXHASH_UNCOMPRESSED + b"\x00"

"""Where a Bloom filter may lie, and what its header must say: the one set of rules every
caller applies (the reader, the audit, the rewrite). A filter lies after the leading magic and
before the footer, with a length that can hold a header and a bitset; a filter of an encrypted
column is two length-prefixed GCM modules there; a header must be spec-valid and agree with
the length. Pure: footer structs and bytes in, locations and errors out.
"""

from __future__ import annotations

from dataclasses import dataclass

from parquet_bloom import _format as fmt
from parquet_bloom._crypto import cipher
from parquet_bloom._io.ranges import ByteRange
from parquet_bloom._sbbf import MAX_NUM_BYTES, MIN_NUM_BYTES
from parquet_bloom.errors import BloomFilterError, CorruptFileError, UnsupportedFileError

__all__ = [
    "GUESS_READ_SIZE",
    "MAX_ENCRYPTED_HEADER_MODULE_SIZE",
    "MODULE_PREFIX",
    "FilterLocation",
    "check_header",
    "locate_encrypted_filter",
    "locate_filter",
]

# A filter without bloom_filter_length: read this much and hope it holds header and bitset. The
# header is 15 to 19 bytes, so this covers whole filters up to about 256 KiB (a 1 % filter for
# about 200,000 values); a bigger one costs one more read for the rest.
GUESS_READ_SIZE = 256 * 1024


# Magic at both ends of a Parquet file (parquet-format README, "File format").
_HEAD = len(fmt.MAGIC)

# The filter of an encrypted column is two GCM modules, each with its 4-byte length prefix
# (BloomFilter.md, "Encryption"): the header and the bitset. The header's module is its
# plaintext (bounded as any header) plus nonce and tag; a longer claim is corrupt, and bounds
# what a hostile length prefix can make us read before anything is authenticated.
MAX_ENCRYPTED_HEADER_MODULE_SIZE = fmt.MAX_BLOOM_FILTER_HEADER_SIZE + cipher.GCM_OVERHEAD
MODULE_PREFIX = cipher.LENGTH_SIZE
# The smallest encrypted filter: two length prefixes, two nonces and tags, a header byte and
# the smallest bitset.
_MIN_ENCRYPTED_FILTER = 2 * (MODULE_PREFIX + cipher.GCM_OVERHEAD) + 1 + MIN_NUM_BYTES


@dataclass(frozen=True)
class FilterLocation:
    """Where one column chunk's filter lies, as far as the footer tells."""

    chunk: fmt.ColumnChunkInfo
    offset: int
    length: int | None  # header + bitset, when the footer says (format >= 2.10)

    def first_read(self, footer_start: int) -> ByteRange:
        """The range to read first: the whole filter, or a guess when its length is unknown."""
        if self.length is not None:
            return ByteRange(self.offset, self.length)
        return ByteRange(self.offset, min(GUESS_READ_SIZE, footer_start - self.offset))


def locate_filter(
    chunk: fmt.ColumnChunkInfo, *, footer_start: int, source: str | None = None
) -> FilterLocation | None:
    """Check a column chunk's filter offset and length against the file layout.

    Returns None when the chunk has no filter. Raises :class:`CorruptFileError` when the footer
    points outside the data region (after the leading magic, before the footer).
    """
    offset, length = chunk.bloom_filter_offset, chunk.bloom_filter_length
    if offset is None:
        return None

    def corrupt(reason: str) -> CorruptFileError:
        return CorruptFileError(
            reason, source=source, row_group=chunk.row_group, column=chunk.path, offset=offset
        )

    if chunk.encrypted:
        raise UnsupportedFileError(
            "the Bloom filter of an encrypted column: read the file with decryption= and "
            "the column's key (docs/encryption.md)",
            source=source,
            row_group=chunk.row_group,
            column=chunk.path,
            offset=offset,
        )
    if not _HEAD <= offset < footer_start:
        raise corrupt(
            f"bloom_filter_offset {offset} is outside the data region [{_HEAD}, {footer_start})"
        )
    if length is not None:
        if length <= MIN_NUM_BYTES:
            raise corrupt(f"bloom_filter_length {length} cannot hold a header and a bitset")
        if offset + length > footer_start:
            raise corrupt(
                f"Bloom filter of {length} bytes at offset {offset} runs past the footer, "
                f"which starts at {footer_start}"
            )
    return FilterLocation(chunk, offset, length)


def locate_encrypted_filter(
    chunk: fmt.ColumnChunkInfo, *, footer_start: int, source: str | None = None
) -> FilterLocation | None:
    """:func:`locate_filter` for an encrypted column chunk (decrypted metadata): the filter is
    two encrypted modules, each with its length prefix, in the data region."""
    offset, length = chunk.bloom_filter_offset, chunk.bloom_filter_length
    if offset is None:
        return None

    def corrupt(reason: str) -> CorruptFileError:
        return CorruptFileError(
            reason, source=source, row_group=chunk.row_group, column=chunk.path, offset=offset
        )

    if not _HEAD <= offset < footer_start:
        raise corrupt(
            f"bloom_filter_offset {offset} is outside the data region [{_HEAD}, {footer_start})"
        )
    if length is not None:
        if length < _MIN_ENCRYPTED_FILTER:
            raise corrupt(
                f"bloom_filter_length {length} cannot hold an encrypted header and bitset"
            )
        if offset + length > footer_start:
            raise corrupt(
                f"Bloom filter of {length} bytes at offset {offset} runs past the footer, "
                f"which starts at {footer_start}"
            )
    return FilterLocation(chunk, offset, length)


def check_header(
    header: fmt.BloomFilterHeader,
    header_len: int,
    location: FilterLocation,
    *,
    footer_start: int,
    source: str | None = None,
    check_length: bool = True,
) -> None:
    """Check a decoded header against the spec and the footer's claims (its
    ``bloom_filter_length`` unless not ``check_length``: an encrypted filter's is checked
    against both its modules)."""
    chunk = location.chunk

    def fail(kind: type[BloomFilterError], reason: str) -> BloomFilterError:
        return kind(
            reason,
            source=source,
            row_group=chunk.row_group,
            column=chunk.path,
            offset=location.offset,
        )

    for what, got, want in (
        ("algorithm", header.algorithm, "BLOCK"),
        ("hash", header.hash, "XXHASH"),
        ("compression", header.compression, "UNCOMPRESSED"),
    ):
        if got != want:
            raise fail(UnsupportedFileError, f"Bloom filter {what} {got} is not supported")
    n = header.num_bytes
    if not (MIN_NUM_BYTES <= n <= MAX_NUM_BYTES and n & (n - 1) == 0):
        raise fail(
            CorruptFileError,
            f"Bloom filter numBytes {n} is not a power of two in "
            f"[{MIN_NUM_BYTES}, {MAX_NUM_BYTES}]",
        )
    end = location.offset + header_len + n
    if check_length and location.length is not None and header_len + n != location.length:
        raise fail(
            CorruptFileError,
            f"bloom_filter_length {location.length} does not match header ({header_len} bytes) "
            f"+ bitset ({n} bytes)",
        )
    if end > footer_start:
        raise fail(
            CorruptFileError,
            f"Bloom filter bitset ends at {end}, past the footer, which starts at {footer_start}",
        )

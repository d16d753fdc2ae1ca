"""An encrypted file's side of reading its Bloom filters (Parquet Modular Encryption,
docs/encryption.md): the footer opened with the keys (decrypted, or its signature stripped and
checked), the key material kept outside the file found beside it, the column chunks' keys found
and their encrypted metadata decrypted, and the filters read as two GCM modules each. The
cryptography itself is :mod:`parquet_bloom._crypto`'s; the reader
(:class:`parquet_bloom._reader.BloomFilterReader`) holds the state these fill in.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np

from parquet_bloom import _format as fmt
from parquet_bloom._crypto import cipher
from parquet_bloom._crypto.file import FileDecryptor
from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._filter_reads import FilterReads, overlapping, record_failure
from parquet_bloom._format.footer import ENCRYPTED_MAGIC
from parquet_bloom._io.ranges import ByteRange, ReadBuffer
from parquet_bloom._io.source import ByteSource
from parquet_bloom._locate import (
    MAX_ENCRYPTED_HEADER_MODULE_SIZE,
    MODULE_PREFIX,
    FilterLocation,
    check_header,
)
from parquet_bloom._sbbf import (
    MAX_NUM_BYTES,
    MIN_NUM_BYTES,
    SplitBlockBloomFilter,
    adopt_bitset,
)
from parquet_bloom.errors import (
    BloomFilterError,
    CorruptFileError,
    DecryptionError,
    MissingKeyError,
)


def open_footer(
    data: bytes, tail: bytes, keys: DecryptionKeys, storage: tuple[Any, Any, Any]
) -> tuple[bytes, FileDecryptor | None, bool]:
    """The plaintext FileMetaData of a file read with keys: an encrypted footer decrypted,
    a plaintext footer of an encrypted file stripped of its signature (checked when the
    footer key is known); any other footer as it is. With it the file's decryptor (None
    for a plaintext file) and whether the footer was encrypted. ``storage``: the reader's
    source, filesystem and storage options, to find external key material by."""
    from parquet_bloom._crypto.file import open_encrypted_footer, open_plaintext_footer

    sidecar = sidecar_reader(*storage)
    if tail[-len(ENCRYPTED_MAGIC) :] == ENCRYPTED_MAGIC:
        plain, decryptor = open_encrypted_footer(data, keys, sidecar=sidecar)
        return plain, decryptor, True
    if fmt.decode_footer_encryption(data).encryption_algorithm is None:
        if keys.allow_plaintext_files:
            return data, None, False  # not encrypted: the keys are not needed
        raise DecryptionError(
            "the file is not encrypted, but was to be read with keys (pass "
            "DecryptionKeys(allow_plaintext_files=True) to read plaintext files too)",
            module="footer",
        )
    footer, decryptor = open_plaintext_footer(data, keys, sidecar=sidecar)
    return footer, decryptor, False


def sidecar_reader(source: Any, filesystem: Any, storage_options: Any) -> Any:
    """A reader of this file's external key material (``_KEY_MATERIAL_FOR_<name>.json``
    next to it), for sources named by a path; None for file objects."""
    from parquet_bloom._crypto.keys import (
        MAX_KEY_MATERIAL_FILE_SIZE,
        external_key_material_name,
        parse_key_material_file,
    )

    if not isinstance(source, str | os.PathLike):
        return None
    text = os.fspath(source)
    if filesystem is None and "://" not in text:
        directory, name = os.path.split(text)
        sibling = os.path.join(directory, external_key_material_name(name))
    else:
        directory, _, name = text.rpartition("/")
        sibling = f"{directory}/{external_key_material_name(name)}"
    store: dict[str, bytes] | None = None

    def read(reference: str) -> bytes | None:
        nonlocal store
        if store is None:
            try:
                with ByteSource(
                    sibling, filesystem=filesystem, storage_options=storage_options
                ) as material:
                    if material.size > MAX_KEY_MATERIAL_FILE_SIZE:
                        raise DecryptionError(
                            f"key material file {sibling} of {material.size} bytes is too large"
                        )
                    data = material.read_exact(0, material.size)
            except FileNotFoundError:
                raise MissingKeyError(
                    f"the key material is stored outside the file, in {sibling}, which is missing"
                ) from None
            store = parse_key_material_file(data)
        return store.get(reference)

    return read


# Each encrypted row group's ordinal (as its AADs take it) and, by column, the cipher of each
# encrypted chunk whose key is known (None for the rest, and for chunks not yet asked for).
ChunkCiphers = dict[int, tuple[int, list[cipher.Gcm | None]]]


class EncryptedChunks:
    """An encrypted file's column chunks as its reader gives them: each chunk's key found and
    its encrypted ColumnMetaData decrypted when the chunk is first asked for (a probe of one
    column of a wide file decrypts that column's metadata alone). ``ciphers``: what
    :func:`load_encrypted` opens the filters with; ``unreadable``: the chunks that cannot be
    read with the keys given, and why (located)."""

    def __init__(
        self,
        decryptor: FileDecryptor,
        footer: fmt.FooterView,
        leaves: list[fmt.SchemaLeaf],
        name: str,
    ) -> None:
        self._decryptor = decryptor
        self._footer = footer
        self._leaves = leaves
        self._name = name
        self.ciphers: ChunkCiphers = {}
        self.unreadable: dict[tuple[int, str], BloomFilterError] = {}
        self._groups: dict[int, list[fmt.ColumnChunkInfo]] = {}
        # The chunks decrypted so far, by row group (a list a row group, not an entry a
        # chunk: 10,000 keys alive would cost the cyclic GC more collections).
        self._chunks: dict[int, list[fmt.ColumnChunkInfo | None]] = {}

    def row_group(self, i: int, chunks: list[fmt.ColumnChunkInfo]) -> list[fmt.ColumnChunkInfo]:
        """Row group ``i``'s column chunks (``chunks``: as the footer gives them), every one
        decrypted; ``chunks`` itself when none had its metadata encrypted."""
        found = self._groups.get(i)
        if found is None:
            done = self._chunks.get(i)
            if done is None:
                done = [None] * len(chunks)
            out = chunks  # copied before the first chunk whose metadata is decrypted is put in
            for j, info in enumerate(chunks):
                decrypted = done[j]
                if decrypted is None:
                    decrypted = self._decrypt(i, j, info)
                if decrypted is not info:
                    if out is chunks:
                        out = list(chunks)
                    out[j] = decrypted
            found = self._groups[i] = out
        return found

    def chunk(self, i: int, j: int) -> fmt.ColumnChunkInfo:
        """Column chunk ``j`` of row group ``i``, decrypted (the row group decoded and
        checked first, as :meth:`parquet_bloom._format.FooterView.chunks` does)."""
        found = self._groups.get(i)
        if found is not None:
            return found[j]
        done = self._chunks.get(i)
        one = None if done is None else done[j]
        if one is None:
            one = self._decrypt(i, j, self._footer.chunks(i)[j])
        return one

    def _decrypt(self, i: int, j: int, info: fmt.ColumnChunkInfo) -> fmt.ColumnChunkInfo:
        """``info`` with its key found and its encrypted ColumnMetaData decrypted; cached."""
        raw = self._footer.column_chunk_struct(i, j)
        crypto = raw.crypto_metadata
        if crypto is not None:
            group = self.ciphers.get(i)
            if group is None:  # setdefault: threads asking at once share one list
                ordinal = self._footer.row_group_ordinal(i)
                group = self.ciphers.setdefault(i, (ordinal, [None] * len(self._leaves)))
            ordinal, gcms = group
            decryptor = self._decryptor
            try:
                key = decryptor.chunk_key(info.path, crypto)
                own_key = crypto.ENCRYPTION_WITH_COLUMN_KEY is not None
                if own_key and raw.encrypted_column_metadata is not None:
                    meta = decryptor.column_metadata(raw, key, ordinal, info.column_index)
                    info = fmt.with_column_metadata(info, meta, self._leaves[info.column_index])
                gcms[j] = decryptor.gcm(key)
            except BloomFilterError as err:
                self.unreadable[(i, info.path)] = err.located(
                    source=self._name, row_group=i, column=info.path
                )
        done = self._chunks.get(i)
        if done is None:
            done = self._chunks.setdefault(i, [None] * len(self._leaves))
        done[j] = info
        return info


# A Bloom filter header as every writer writes it (BLOCK, XXHASH, UNCOMPRESSED, numBytes a
# power of two the spec allows), and its numBytes: a decrypted header that is one of these
# needs no decoding and no check but the bitset's length. They are 15 to 18 bytes long.
_CANONICAL_HEADERS = {
    fmt.encode_bloom_filter_header(1 << p): 1 << p
    for p in range(MIN_NUM_BYTES.bit_length() - 1, MAX_NUM_BYTES.bit_length())
}
_CANONICAL_SIZES = sorted({len(header) for header in _CANONICAL_HEADERS})
_LENGTH = struct.Struct("<I")


def _canonical_num_bytes(plain: bytes) -> int | None:
    """The numBytes of a decrypted header module that holds a header as every writer writes
    it, followed by nothing or by bytes that decoding the header ignores (parquet-java pads
    its encrypted headers with zeros to 100 bytes); None for any other."""
    found = _CANONICAL_HEADERS.get(plain)
    if found is None and len(plain) > _CANONICAL_SIZES[0]:
        # A compact varint ends at its first byte below 0x80: one size can match.
        for size in _CANONICAL_SIZES:
            found = _CANONICAL_HEADERS.get(plain[:size])
            if found is not None:
                break
    return found


def load_encrypted(
    reads: FilterReads,
    decryptor: FileDecryptor,
    ciphers: ChunkCiphers,
    todo: list[FilterLocation],
    out: dict[tuple[int, str], SplitBlockBloomFilter | None],
    failed: dict[tuple[int, str], BloomFilterError],
) -> None:
    """Load the filters of encrypted column chunks: two GCM modules each (header, bitset),
    every length prefix checked against the file before anything is read by it. ``reads``:
    the file's reads (whose cache the filters go to); ``ciphers``: each chunk's cipher and
    row group ordinal, from :func:`decrypt_chunks`.

    A filter whose first read lies in one piece (mostly: its whole length, read with its
    neighbours), laid out as writers lay it out, is opened where it lies
    (:func:`_open_in_place`); any other (a filter the read missed or cut, or that fails a
    check) by :func:`_load_checked`, which reads the rest or says what is wrong."""
    footer_start = reads.footer_start
    aads = cipher.FilterAads(decryptor.file_aad)
    cache = reads.cache
    buffer = reads.held_copy()
    firsts = [loc.first_read(footer_start) for loc in todo]
    unread = reads.read_into(buffer, [g for r in firsts for g in buffer.missing(r)])
    rest: list[tuple[FilterLocation, ByteRange]] = []
    for loc, first in zip(todo, firsts, strict=True):
        chunk = loc.chunk
        ordinal, gcms = ciphers[chunk.row_group]
        gcm = gcms[chunk.column_index]
        try:
            header_aad, bitset_aad = aads.of(ordinal, chunk.column_index)
        except BloomFilterError:
            gcm = None  # _load_checked says why
        if gcm is None or (unread and overlapping(first, unread) is not None):
            rest.append((loc, first))
            continue
        found = _open_in_place(
            buffer.available(loc.offset, first.length),
            loc.length,
            footer_start - loc.offset,
            gcm,
            header_aad,
            bitset_aad,
        )
        if found is None:
            rest.append((loc, first))
            continue
        k = (chunk.row_group, chunk.path)
        cache[k] = out[k] = found
    if rest:
        _load_checked(reads, decryptor, ciphers, rest, buffer, unread, out, failed)


def _open_in_place(
    held: memoryview,
    length: int | None,
    room: int,
    gcm: cipher.Gcm,
    header_aad: bytes,
    bitset_aad: bytes,
) -> SplitBlockBloomFilter | None:
    """The filter whose modules ``held`` holds from its start, decrypted where they lie
    (the bitset straight into the filter's buffer), when all is as writers lay it out: the
    header module's length within the bound of any header, its plaintext a header as every
    writer writes it (:func:`_canonical_num_bytes`), the bitset's module right after it, of
    the length that header gives, within ``held``, the footer's ``length`` and the ``room``
    before the footer; both tags verified. None for anything else, for
    :func:`_load_checked` to say what is wrong.

    Nothing is allocated by a length before it is authenticated: the bitset's buffer is
    made from the decrypted header's numBytes, and only once its module is known to lie in
    ``held`` (bytes read from the file)."""
    size = len(held)
    if size < 2 * MODULE_PREFIX:
        return None
    (header_len,) = _LENGTH.unpack_from(held)
    body_end = MODULE_PREFIX + header_len
    if header_len > MAX_ENCRYPTED_HEADER_MODULE_SIZE or body_end + MODULE_PREFIX > size:
        return None
    plain = gcm.try_decrypt(held[MODULE_PREFIX:body_end], header_aad)
    num_bytes = None if plain is None else _canonical_num_bytes(plain)
    if num_bytes is None:
        return None
    bitset_len = num_bytes + cipher.GCM_OVERHEAD
    total = body_end + MODULE_PREFIX + bitset_len
    if (
        total > size
        or total > room
        or (length is not None and total != length)
        or _LENGTH.unpack_from(held, body_end)[0] != bitset_len
    ):
        return None
    bitset = np.empty(num_bytes, np.uint8)
    if not gcm.try_decrypt_into(held[body_end + MODULE_PREFIX : total], bitset_aad, bitset):
        return None
    return adopt_bitset(bitset)


def _load_checked(
    reads: FilterReads,
    decryptor: FileDecryptor,
    ciphers: ChunkCiphers,
    todo: list[tuple[FilterLocation, ByteRange]],
    buffer: ReadBuffer,
    unread: dict[ByteRange, BloomFilterError],
    out: dict[tuple[int, str], SplitBlockBloomFilter | None],
    failed: dict[tuple[int, str], BloomFilterError],
) -> None:
    """:func:`load_encrypted` for the filters it could not open in place (``todo``: each
    with its first read, in ``buffer`` unless in ``unread``): each module checked step by
    step, the bitset read where the first read did not hold it; the error of each filter
    that cannot be used, located, into ``failed``."""
    name = reads.source.name
    footer_start = reads.footer_start
    aads = cipher.AadBuffer(decryptor.file_aad)
    header_type, bitset_type = cipher.BLOOM_FILTER_HEADER, cipher.BLOOM_FILTER_BITSET

    def fail(loc: FilterLocation, err: BloomFilterError) -> None:
        record_failure(failed, name, loc, err)

    def header_length(loc: FilterLocation, head: bytes | memoryview) -> int:
        """The header module's length, from its prefix ``head``, checked against the file
        (and the filter's length) before anything is read by it."""
        room = footer_start - loc.offset - MODULE_PREFIX
        if loc.length is not None:
            room = min(room, loc.length - MODULE_PREFIX)
        header_len = cipher.module_length(head, available=room, module_type=header_type)
        if header_len > MAX_ENCRYPTED_HEADER_MODULE_SIZE:
            raise CorruptFileError(
                f"encrypted Bloom filter header of {header_len} bytes exceeds "
                f"{MAX_ENCRYPTED_HEADER_MODULE_SIZE} bytes"
            )
        return header_len

    def open_bitset(
        loc: FilterLocation, num_bytes: int, module: memoryview, gcm: cipher.Gcm, ordinal: int
    ) -> None:
        """Decrypt the bitset ``module`` (its length prefix first) into the loaded filters."""
        expected = num_bytes + cipher.GCM_OVERHEAD
        claimed = int.from_bytes(module[:MODULE_PREFIX], "little")
        if claimed != expected or len(module) != MODULE_PREFIX + expected:
            claimed = cipher.module_length(
                module[:MODULE_PREFIX],
                available=len(module) - MODULE_PREFIX,
                module_type=bitset_type,
            )
            raise CorruptFileError(
                f"encrypted Bloom filter bitset of {claimed} bytes, its header says "
                f"{num_bytes} bytes (+ {cipher.GCM_OVERHEAD} of nonce and tag)"
            )
        chunk = loc.chunk
        aad = aads.of(bitset_type, ordinal, chunk.column_index)
        plain = gcm.decrypt(module[MODULE_PREFIX:], aad, module_type=bitset_type)
        k = (chunk.row_group, chunk.path)
        reads.cache[k] = out[k] = SplitBlockBloomFilter.from_bytes(plain)

    # The header modules: length prefix, decrypt, decode; then the bitset module, from the
    # first read where it holds it, else from a second read.
    parsed: list[tuple[FilterLocation, int, ByteRange, cipher.Gcm, int]] = []
    for loc, first in todo:
        chunk = loc.chunk
        ordinal, gcms = ciphers[chunk.row_group]
        gcm = gcms[chunk.column_index]
        assert gcm is not None  # the reader loads encrypted chunks whose cipher it has
        try:
            if unread and (unreadable := overlapping(first, unread)):
                raise unreadable
            held = buffer.available(loc.offset, first.length)
            if len(held) >= min(first.length, MODULE_PREFIX):
                header_len = header_length(loc, held[:MODULE_PREFIX])
            else:
                head = buffer.get(ByteRange(loc.offset, min(first.length, MODULE_PREFIX)))
                header_len = header_length(loc, memoryview(head))
            body_end = MODULE_PREFIX + header_len
            if len(held) >= body_end:
                body: bytes | memoryview = held[MODULE_PREFIX:body_end]
            else:
                body_range = ByteRange(loc.offset + MODULE_PREFIX, header_len)
                missing = buffer.missing(body_range)
                if missing and (unread_header := reads.read_into(buffer, missing)):
                    raise next(iter(unread_header.values()))
                body = buffer.get(body_range)
            aad = aads.of(header_type, ordinal, chunk.column_index)
            plain = gcm.decrypt(body, aad, module_type=header_type)
            header, plain_len = fmt.parse_bloom_filter_header(plain)
            check_header(
                header, plain_len, loc, footer_start=footer_start, source=name, check_length=False
            )
            bitset_len = header.num_bytes + cipher.GCM_OVERHEAD
            total = body_end + MODULE_PREFIX + bitset_len
            if loc.length is not None and total != loc.length:
                raise CorruptFileError(
                    f"bloom_filter_length {loc.length} does not match the encrypted header "
                    f"({body_end} bytes) and bitset ({MODULE_PREFIX + bitset_len} bytes)"
                )
            bitset_at = loc.offset + body_end
            if bitset_at + MODULE_PREFIX + bitset_len > footer_start:
                raise CorruptFileError(
                    f"encrypted Bloom filter bitset of {bitset_len} bytes at {bitset_at} "
                    f"runs past the footer, which starts at {footer_start}"
                )
            if len(held) >= total:
                open_bitset(loc, header.num_bytes, held[body_end:total], gcm, ordinal)
                continue
        except BloomFilterError as err:
            fail(loc, err)
            continue
        bitset = ByteRange(bitset_at, MODULE_PREFIX + bitset_len)
        parsed.append((loc, header.num_bytes, bitset, gcm, ordinal))
    if not parsed:
        return
    unread = reads.read_into(buffer, [g for _, _, b, _, _ in parsed for g in buffer.missing(b)])
    for loc, num_bytes, bitset, gcm, ordinal in parsed:
        try:
            if unreadable := overlapping(bitset, unread):
                raise unreadable
            open_bitset(loc, num_bytes, memoryview(buffer.get(bitset)), gcm, ordinal)
        except BloomFilterError as err:
            fail(loc, err)

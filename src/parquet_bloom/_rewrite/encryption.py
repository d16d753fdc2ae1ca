"""The rewrite of an encrypted file: the same encryption, on the new filters and footer.

A file under Parquet Modular Encryption (parquet-format ``Encryption.md``) is rewritten as any
other (pages copied byte for byte, filters cut and written together, offsets moved), with its
keys (:class:`~parquet_bloom.DecryptionKeys`: AES-GCM is symmetric, the keys that decrypt a
module are the keys that encrypt it). What changes:

- The footer is opened (an encrypted ``PARE`` footer decrypted, a plaintext one's signature
  checked) and each column chunk whose ColumnMetaData is held encrypted in
  ``encrypted_column_metadata`` (a column with its own key; under a plaintext footer,
  parquet-java's columns with the footer key too, encrypted with it) has it decrypted to plan
  with: the rewrite plans on the plaintext, as for any file (:class:`EncryptedRewrite`).
- A filter built for an encrypted chunk is hashed from its pages decrypted
  (:func:`parquet_bloom._crypto.pages.decrypted_pages`), and written as its two modules, header
  and bitset, GCM-encrypted with the chunk's key and AADs of its row group and column
  ordinals (4.4.2), which the rewrite keeps: a kept filter is copied as it is.
- A ColumnMetaData whose offsets moved is encrypted again (a fresh nonce; one that did not
  change keeps its bytes), the plaintext copy a plaintext footer holds moved alike.
- The footer is encrypted again with the footer key (the FileCryptoMetaData before it kept
  byte for byte), or signed again (a plaintext footer).

Everything else keeps its bytes, so the file AAD (AAD prefix and the file's unique id) stays
the file's: the copied pages, page headers and indexes still authenticate, their AADs holding
only ordinals. Every encrypted column's key is needed: without it, its metadata (and whether it
has a filter, and where) cannot be known, nor re-encrypted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from parquet_bloom import _format as fmt
from parquet_bloom import _pages as pages
from parquet_bloom._crypto import cipher
from parquet_bloom._crypto.file import FileDecryptor, open_encrypted_footer, open_plaintext_footer
from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._crypto.pages import chunk_layout, decrypted_pages
from parquet_bloom._format.footer import ENCRYPTED_MAGIC
from parquet_bloom._io.source import ByteSource, Footer
from parquet_bloom._locate import FilterLocation, locate_encrypted_filter
from parquet_bloom._rewrite.plan import Relocation, Splice, check_lossless, filter_locations
from parquet_bloom.errors import (
    BloomFilterError,
    DecryptionError,
    MissingKeyError,
    UnsupportedFileError,
)

__all__ = ["EncryptedRewrite", "locations", "open_footer"]

_OFFSET_FIELDS = ("data_page_offset", "dictionary_page_offset", "index_page_offset")


@dataclass
class _Metadata:
    """The ColumnMetaData of an encrypted chunk that the file holds encrypted (a column with
    its own key; under a plaintext footer, parquet-java's footer-key columns too), as read:
    decrypted, and the plaintext copy of the footer."""

    plain: bytes  # encrypted_column_metadata as read, decrypted
    stripped: Any  # the footer's plaintext ColumnMetaData (None in an encrypted footer)
    offsets: tuple[int | None, ...]  # the decrypted metadata's _OFFSET_FIELDS as read


def open_footer(
    footer: Footer, keys: DecryptionKeys, *, force: bool, source: str
) -> tuple[Any, EncryptedRewrite | None]:
    """The full FileMetaData to plan the rewrite on, and the file's encryption (None for a
    plaintext file, which ``keys`` allow only with ``allow_plaintext_files``). The footer must
    re-encode to its own plaintext bytes unless ``force``."""
    encrypted_footer = footer.tail[-len(ENCRYPTED_MAGIC) :] == ENCRYPTED_MAGIC
    crypto_bytes = b""
    if encrypted_footer:
        plain, decryptor = open_encrypted_footer(footer.data, keys, sidecar=_no_sidecar)
        crypto_bytes = footer.data[: fmt.decode_file_crypto_metadata(footer.data)[1]]
    else:
        if fmt.decode_footer_encryption(footer.data).encryption_algorithm is None:
            if not keys.allow_plaintext_files:
                raise DecryptionError(
                    "the file is not encrypted, but was to be rewritten with keys (pass "
                    "DecryptionKeys(allow_plaintext_files=True) to rewrite plaintext files too)",
                    module="footer",
                )
            md = fmt.decode_file_metadata(footer.data, full=True)
            if not force:
                check_lossless(footer.data, md, fmt.encode_file_metadata, "the footer")
            return md, None
        plain, decryptor = open_plaintext_footer(footer.data, keys, sidecar=_no_sidecar)
    footer_key = decryptor.footer_key()
    if footer_key is None:
        raise MissingKeyError(
            "the footer key was not given: the rewrite signs the new plaintext footer with it",
            module="footer",
        )
    md = fmt.decode_file_metadata(plain, full=True)
    if not force:
        plain = _lossless(plain, md, fmt.encode_file_metadata, "the footer")
    rewrite = EncryptedRewrite(md, decryptor, footer_key, crypto_bytes, force=force)
    return md, rewrite


def _no_sidecar(reference: str) -> bytes | None:
    """The rewrite's answer to a file whose key material lies outside it."""
    raise UnsupportedFileError(
        "the file's key material is stored outside it (a _KEY_MATERIAL_FOR_<name>.json "
        "next to it, internal_key_material=False): rewriting such files is not supported, "
        "as the rewritten file would need a key material file of its own"
    )


def _lossless(plain: bytes, decoded: Any, encode: Callable[[Any], bytes], what: str) -> bytes:
    """A decrypted struct checked to re-encode to its own bytes (:func:`check_lossless`),
    without the zero bytes after it that parquet-mr 1.14 leaves (parquet-testing's
    encrypt_columns_and_footer_bloom_filter: 721 of them after a footer of 879 bytes, 94 after
    a column's metadata): nothing a reader reads, nothing the rewrite loses. Encoded once."""
    again = encode(decoded)
    tail = plain[len(again) :]
    if len(plain) > len(again) and plain.startswith(again) and not tail.strip(b"\0"):
        return again
    check_lossless(plain, decoded, lambda _: again, what)
    return plain


class EncryptedRewrite:
    """One encrypted file's rewrite: its chunks' keys, the filters and metadata encrypted
    again, its footer sealed. Made by :func:`open_footer`, which hands over the FileMetaData
    with the own-key chunks' decrypted ColumnMetaData in place (``meta_data``), to plan on;
    :meth:`seal_metadata` puts them back, encrypted, once the plan has moved their offsets."""

    def __init__(
        self,
        md: Any,
        decryptor: FileDecryptor,
        footer_key: bytes,
        crypto_bytes: bytes,
        *,
        force: bool,
    ) -> None:
        self._decryptor = decryptor
        self._footer_key = footer_key
        self._crypto_bytes = crypto_bytes  # the FileCryptoMetaData of an encrypted footer
        self.algorithm = decryptor.algorithm
        self._nonces = cipher.Nonces()  # this rewrite's, for every module it encrypts
        self._filter_aads = cipher.FilterAads(decryptor.file_aad)
        self._nonce_lock = threading.Lock()
        # Each encrypted chunk's key and its row group's AAD ordinal (its column's is its
        # index), by (row group, column index): a tuple of bytes and an int, which the cyclic
        # GC stops tracking (10,000 objects it would otherwise walk in every full collection).
        self.chunks: dict[tuple[int, int], tuple[bytes, int]] = {}
        self._metadata: dict[tuple[int, int], _Metadata] = {}
        leaves = fmt.schema_leaves(md)
        # The crypto metadata of a footer-key chunk holds nothing but that (the union's
        # EncryptionWithFooterKey member, an empty struct): every such chunk is given the
        # first one's, which encodes to the same bytes, and the 20,000 decoded objects (two a
        # chunk) go, rather than be walked by each full collection of the cyclic GC.
        footer_keyed = None
        for i, rg in enumerate(md.row_groups):
            ordinal = i if rg.ordinal is None else int(rg.ordinal)
            for j, chunk in enumerate(rg.columns):
                crypto = chunk.crypto_metadata
                if crypto is None:
                    continue
                if (
                    crypto.ENCRYPTION_WITH_COLUMN_KEY is None
                    and crypto.ENCRYPTION_WITH_FOOTER_KEY is not None
                    and chunk.encrypted_column_metadata is None
                    and chunk.meta_data is not None
                ):  # the footer key's, with its metadata in the footer: all it needs
                    if footer_keyed is None:
                        footer_keyed = crypto
                    else:
                        chunk.crypto_metadata = footer_keyed
                    self.chunks[(i, j)] = (footer_key, ordinal)
                    continue
                path = leaves[j].path if j < len(leaves) else str(j)
                try:
                    self.chunks[(i, j)] = self._open_chunk(chunk, path, (i, j), ordinal, force)
                except MissingKeyError as err:
                    raise MissingKeyError(
                        f"{err.reason}: rewriting an encrypted file needs the key of every "
                        "encrypted column (its metadata, with its filter's place, is encrypted "
                        "again; nothing is written in plaintext in its stead)",
                        row_group=i,
                        column=path,
                        module=err.module,
                    ) from None
                except BloomFilterError as err:
                    raise err.located(row_group=i, column=path) from err.__cause__

    def _open_chunk(
        self, chunk: Any, path: str, at: tuple[int, int], ordinal: int, force: bool
    ) -> tuple[bytes, int]:
        key = self._decryptor.chunk_key(path, chunk.crypto_metadata)
        # Under a plaintext footer parquet-java also encrypts the metadata of a column with the
        # footer key (with that key), and reads it rather than the plaintext copy beside it.
        if chunk.encrypted_column_metadata is not None:
            plain = self._decryptor.column_metadata_bytes(chunk, key, ordinal, at[1])
            full = fmt.decode_column_metadata(plain)
            encode = fmt.encode_column_metadata
            if not force:
                plain = _lossless(plain, full, encode, "the encrypted column metadata")
            offsets = tuple(getattr(full, name) for name in _OFFSET_FIELDS)
            self._metadata[at] = _Metadata(plain, chunk.meta_data, offsets)
            chunk.meta_data = full
        elif chunk.meta_data is None:
            raise UnsupportedFileError("an encrypted column chunk without column metadata")
        return key, ordinal

    # -- planning ---------------------------------------------------------------------------

    def check_cuts(self, md: Any, cuts: list[Splice], source: str) -> None:
        """Refuse cuts that would move the pages of an encrypted chunk with an offset index:
        its page offsets are in an encrypted module this rewrite does not re-encrypt. (Writers
        put Bloom filters after every page: parquet-java and Arrow C++ after the last row
        group.)"""
        if not cuts:
            return
        first_cut = min([s.start for s in cuts])
        for i, j in self.chunks:
            chunk = md.row_groups[i].columns[j]
            meta = chunk.meta_data
            if chunk.offset_index_offset is None:
                continue
            if fmt.chunk_start(meta) + int(meta.total_compressed_size) > first_cut:
                raise UnsupportedFileError(
                    "a Bloom filter to be cut out lies before the pages of this encrypted "
                    "column chunk, whose encrypted offset index would then have to be "
                    "re-encrypted: not supported",
                    source=source,
                    row_group=i,
                    column=".".join(meta.path_in_schema),
                )

    # -- building ---------------------------------------------------------------------------

    def arrow_decryption(self) -> Any | None:
        """pyarrow's decryption properties for a file with an encrypted footer (its footer key,
        enough for its plaintext columns), where pyarrow has them (26 and later)."""
        if not self._crypto_bytes:
            return None
        import pyarrow.parquet.encryption as pe

        create = getattr(pe, "create_decryption_properties", None)
        return (
            None
            if create is None
            else create(self._footer_key, aad_prefix=self._decryptor.keys.aad_prefix)
        )

    def chunk_hashes(
        self, source: ByteSource, meta: Any, leaf: fmt.SchemaLeaf, key: tuple[int, int],
        out: np.ndarray | None,
    ) -> np.ndarray:  # fmt: skip
        """The hashes of an encrypted chunk's values, from its pages decrypted."""
        chunk_key, ordinal = self.chunks[key]
        start, size, dictionary_first = chunk_layout(meta)
        decrypted = decrypted_pages(
            source.read_exact(start, size),
            gcm=self._decryptor.gcm(chunk_key),
            file_aad=self._decryptor.file_aad,
            algorithm=self.algorithm,
            row_group=ordinal,
            column=key[1],
            dictionary_first=dictionary_first,
            base=start,
        )
        try:
            return pages.page_hashes(decrypted, meta, leaf, out)
        except pages.NeedsArrow as err:
            raise UnsupportedFileError(
                f"the encrypted column's pages hold what this library reads only through "
                f"pyarrow ({err}), which cannot read encrypted pages with the keys given here"
            ) from None

    # -- writing ----------------------------------------------------------------------------

    def seal_filter(self, key: tuple[int, int], header: bytes, bitset: Any) -> memoryview | None:
        """A new filter of an encrypted chunk as its two modules, written into one buffer;
        None for a plaintext chunk."""
        found = self.chunks.get(key)
        if found is None:
            return None
        chunk_key, ordinal = found
        header_aad, bitset_aad = self._filter_aads.of(ordinal, key[1])  # 4.4.2
        with self._nonce_lock:
            nonces = self._nonces.take(2)
        gcm = self._decryptor.gcm(chunk_key)  # set up once a key, by the file's decryptor
        return gcm.seal_pair(header, header_aad, bitset, bitset_aad, nonces)

    def _nonce(self) -> bytes:
        with self._nonce_lock:
            return self._nonces()

    def seal_metadata(self, md: Any, moves: Relocation, footer_start: int) -> None:
        """Put each chunk's encrypted ColumnMetaData (moved by the plan) back encrypted: its old
        bytes if nothing changed, else encrypted anew; and its plaintext copy moved alike."""
        for (i, j), found in self._metadata.items():
            chunk_key, ordinal = self.chunks[(i, j)]
            chunk = md.row_groups[i].columns[j]
            full = chunk.meta_data
            plain = fmt.encode_column_metadata(full)
            if plain != found.plain:
                aad = cipher.module_aad(
                    self._decryptor.file_aad, cipher.COLUMN_META_DATA, ordinal, j
                )
                gcm = self._decryptor.gcm(chunk_key)
                chunk.encrypted_column_metadata = gcm.seal(plain, aad, self._nonce())
            stripped = found.stripped
            if stripped is not None:
                for name, old in zip(_OFFSET_FIELDS, found.offsets, strict=True):
                    value = getattr(stripped, name)
                    if value is not None and value == old:
                        setattr(stripped, name, getattr(full, name))
                    elif value is not None and 0 < value <= footer_start:
                        setattr(stripped, name, moves(value))
                if stripped.bloom_filter_offset is not None:  # the writer showed it: show it
                    stripped.bloom_filter_offset = full.bloom_filter_offset
                    stripped.bloom_filter_length = full.bloom_filter_length
            chunk.meta_data = stripped

    def footer(self, md: Any) -> bytes:
        """The new footer and its trailer: encrypted with the footer key (after the file's
        FileCryptoMetaData, ending in ``PARE``), or plaintext and signed (``PAR1``)."""
        plain = fmt.encode_file_metadata(md)
        aad = cipher.module_aad(self._decryptor.file_aad, cipher.FOOTER)
        if self._crypto_bytes:
            body = self._crypto_bytes + cipher.encrypt_gcm(plain, self._footer_key, aad)
            magic = ENCRYPTED_MAGIC
        else:
            body = plain + cipher.sign_footer(plain, self._footer_key, aad)
            magic = fmt.MAGIC
        return body + len(body).to_bytes(4, "little") + magic


def locations(
    chunks: list[fmt.ColumnChunkInfo],
    crypt: EncryptedRewrite,
    footer_start: int,
    source: str,
) -> list[FilterLocation]:
    """Where the old filters of an encrypted file lie: the encrypted chunks' by the encrypted
    rules, the others' as in any file."""
    encrypted = crypt.chunks
    plain = [c for c in chunks if (c.row_group, c.column_index) not in encrypted]
    found = filter_locations(plain, footer_start, source)
    for chunk in chunks:
        if (chunk.row_group, chunk.column_index) not in encrypted:
            continue
        location = locate_encrypted_filter(chunk, footer_start=footer_start, source=source)
        if location is None:
            continue
        if location.length is None:
            raise UnsupportedFileError(
                "the encrypted Bloom filter has no bloom_filter_length: its length is in its "
                "encrypted header, which the rewrite does not read",
                source=source,
                row_group=chunk.row_group,
                column=chunk.path,
            )
        found.append(location)
    return found

"""One encrypted file's decryption context: its footer opened, and its column chunks' keys.

Pure: footer bytes and keys in, plaintext FileMetaData and module plaintexts out. The reader
(:mod:`parquet_bloom._reader`) reads the bytes and hands them in.

- Encrypted footer (the file ends in ``PARE``, Encryption.md 5.4): the footer bytes are a
  FileCryptoMetaData (algorithm, footer key metadata) and the FileMetaData as a GCM module
  (length | nonce | ciphertext | tag), AAD: the footer's (module type 0).
- Plaintext footer (``PAR1`` with ``encryption_algorithm`` set, 5.5): the FileMetaData then a
  28-byte signature (nonce | tag), checked with the footer key when it is known.
- A column chunk with ``crypto_metadata`` is encrypted: with the footer key
  (ENCRYPTION_WITH_FOOTER_KEY), or with its own (ENCRYPTION_WITH_COLUMN_KEY, with key metadata;
  its ColumnMetaData then also lies GCM-encrypted in ``encrypted_column_metadata``, module 1).
"""

from __future__ import annotations

import threading
from typing import Any

from parquet_bloom import _format as fmt
from parquet_bloom._crypto import cipher
from parquet_bloom._crypto.keys import DecryptionKeys, SidecarReader
from parquet_bloom.errors import (
    BloomFilterError,
    CorruptFileError,
    DecryptionError,
    MissingKeyError,
    UnsupportedFileError,
)

ALGORITHMS = ("AES_GCM_V1", "AES_GCM_CTR_V1")  # EncryptionAlgorithm union members (5.2)
_FOOTER = cipher.MODULE_NAMES[cipher.FOOTER]


class FileDecryptor:
    """The decryption context of one file: algorithm, file AAD, keys."""

    def __init__(
        self,
        algorithm: Any,
        keys: DecryptionKeys,
        *,
        footer_key_metadata: bytes | None,
        sidecar: SidecarReader | None = None,
    ) -> None:
        self.keys = keys
        self.sidecar = sidecar
        name, params = _algorithm(algorithm)
        self.algorithm = name
        stored = params.aad_prefix
        supplied = keys.aad_prefix
        if stored is not None and supplied is not None and bytes(stored) != supplied:
            raise DecryptionError(
                f"the AAD prefix given ({supplied!r}) differs from the one the file stores "
                f"({bytes(stored)!r})",
                module=_FOOTER,
            )
        prefix = stored if stored is not None else supplied
        if prefix is None and params.supply_aad_prefix:
            raise MissingKeyError(
                "the file was written with an AAD prefix it does not store: give it as "
                "DecryptionKeys(aad_prefix=...)",
                module=_FOOTER,
            )
        self.file_aad = bytes(prefix or b"") + bytes(params.aad_file_unique or b"")
        self._footer_key_metadata = footer_key_metadata
        self._footer_key: bytes | None = None
        self._footer_key_known = False
        self._column_keys: dict[tuple[str, bytes], bytes | None] = {}
        self._gcms: dict[bytes, cipher.Gcm] = {}
        self._lock = threading.Lock()

    # -- keys -------------------------------------------------------------------------------

    def footer_key(self) -> bytes | None:
        """The footer key, or None when it is unavailable."""
        if self._footer_key_known:  # set after the key: read without the lock
            return self._footer_key
        with self._lock:
            if not self._footer_key_known:
                self._footer_key = self.keys.footer_key_for(self._footer_key_metadata, self.sidecar)
                self._footer_key_known = True
            return self._footer_key

    def chunk_key(self, column: str, crypto_metadata: Any) -> bytes:
        """The key of an encrypted column chunk; MissingKeyError when it is unavailable."""
        with_column = crypto_metadata.ENCRYPTION_WITH_COLUMN_KEY
        if with_column is None:
            if crypto_metadata.ENCRYPTION_WITH_FOOTER_KEY is None:
                raise UnsupportedFileError(
                    "column crypto metadata of an unknown kind (neither footer nor column key)"
                )
            key = self.footer_key()
            if key is None:
                raise MissingKeyError(
                    "the column is encrypted with the footer key, which was not given"
                )
            return key
        metadata = bytes(with_column.key_metadata or b"")
        with self._lock:
            cached = (column, metadata) in self._column_keys
            key = self._column_keys.get((column, metadata))
        if not cached:
            key = self.keys.column_key_for(column, metadata, self.sidecar)
            with self._lock:
                self._column_keys[(column, metadata)] = key
        if key is None:
            raise MissingKeyError(f"no key was given for encrypted column {column!r}")
        return key

    # -- modules ----------------------------------------------------------------------------

    def decrypt_module(
        self,
        data: bytes | memoryview,
        key: bytes,
        module_type: int,
        row_group: int | None = None,
        column: int | None = None,
    ) -> bytes:
        """Decrypt a module given as its bytes after the length prefix (nonce | ct | tag)."""
        aad = cipher.module_aad(self.file_aad, module_type, row_group, column)
        return self.gcm(key).decrypt(data, aad, module_type=module_type)

    def gcm(self, key: bytes) -> cipher.Gcm:
        """The AES-GCM of ``key``, set up once for this file."""
        found = self._gcms.get(key)
        if found is None:
            found = self._gcms[key] = cipher.Gcm(key)
        return found

    def column_metadata(self, chunk: Any, key: bytes, row_group: int, column: int) -> Any:
        """A column chunk's ``encrypted_column_metadata`` (a module as 5.1 serializes it,
        length prefix included, held in a Thrift binary field) decrypted and decoded, the
        fields a reader needs (``decode_column_metadata(full=False)``; a rewrite decodes
        :meth:`column_metadata_bytes` whole)."""
        plain = self.column_metadata_bytes(chunk, key, row_group, column)
        return fmt.decode_column_metadata(plain, full=False)

    def column_metadata_bytes(self, chunk: Any, key: bytes, row_group: int, column: int) -> bytes:
        """A column chunk's ``encrypted_column_metadata`` decrypted: the ColumnMetaData's
        Thrift bytes."""
        data = memoryview(bytes(chunk.encrypted_column_metadata))
        length = cipher.module_length(
            data,
            available=len(data) - cipher.LENGTH_SIZE,
            module_type=cipher.COLUMN_META_DATA,
        )
        body = data[cipher.LENGTH_SIZE : cipher.LENGTH_SIZE + length]
        return self.decrypt_module(body, key, cipher.COLUMN_META_DATA, row_group, column)


def _algorithm(algorithm: Any) -> tuple[str, Any]:
    for name in ALGORITHMS:
        params = getattr(algorithm, name, None)
        if params is not None:
            return name, params
    raise UnsupportedFileError("the file's encryption algorithm is not one this library knows")


def open_encrypted_footer(
    data: bytes, keys: DecryptionKeys, *, sidecar: SidecarReader | None = None
) -> tuple[bytes, FileDecryptor]:
    """An encrypted footer's bytes (before the trailer: FileCryptoMetaData
    and the encrypted FileMetaData module) -> the plaintext FileMetaData bytes and the file's
    decryption context."""
    crypto, end = fmt.decode_file_crypto_metadata(data)
    key_metadata = None if crypto.key_metadata is None else bytes(crypto.key_metadata)
    decryptor = FileDecryptor(
        crypto.encryption_algorithm, keys, footer_key_metadata=key_metadata, sidecar=sidecar
    )
    module = memoryview(data)[end:]
    try:
        length = cipher.module_length(
            module, available=len(module) - cipher.LENGTH_SIZE, module_type=cipher.FOOTER
        )
    except BloomFilterError as err:
        raise CorruptFileError(err.reason) from None
    key = decryptor.footer_key()
    if key is None:
        raise MissingKeyError(
            "the footer is encrypted and its key was not given (footer_key, a key retriever "
            "or a KMS)",
            module=_FOOTER,
        )
    body = module[cipher.LENGTH_SIZE : cipher.LENGTH_SIZE + length]
    plain = decryptor.decrypt_module(body, key, cipher.FOOTER)
    return plain, decryptor


def open_plaintext_footer(
    data: bytes, keys: DecryptionKeys, *, sidecar: SidecarReader | None = None
) -> tuple[bytes, FileDecryptor]:
    """A plaintext footer of an encrypted file (FileMetaData | 28-byte signature) -> the
    FileMetaData bytes, its signature checked when the footer key is known, and the file's
    decryption context. Without the footer key the footer is used unchecked: the columns'
    own modules are still authenticated by their keys."""
    if len(data) <= cipher.SIGNATURE_SIZE:
        raise CorruptFileError(
            f"footer of {len(data)} bytes cannot hold a FileMetaData and its "
            f"{cipher.SIGNATURE_SIZE}-byte signature"
        )
    footer, signature = data[: -cipher.SIGNATURE_SIZE], data[-cipher.SIGNATURE_SIZE :]
    md = fmt.decode_footer_encryption(footer)
    if md.encryption_algorithm is None:
        raise ValueError("not a plaintext footer of an encrypted file")
    key_metadata = md.footer_signing_key_metadata
    decryptor = FileDecryptor(
        md.encryption_algorithm,
        keys,
        footer_key_metadata=None if key_metadata is None else bytes(key_metadata),
        sidecar=sidecar,
    )
    key = decryptor.footer_key()
    if key is not None:
        aad = cipher.module_aad(decryptor.file_aad, cipher.FOOTER)
        if not cipher.verify_footer_signature(footer, signature, key, aad):
            raise DecryptionError(
                "the plaintext footer's signature does not verify: a wrong footer key or AAD "
                "prefix, or a tampered footer",
                module=_FOOTER,
            )
    return footer, decryptor

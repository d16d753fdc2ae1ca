"""Encrypted files in a pruned scan (docs/encryption.md#pruning-tables-and-datasets).

Pruning reads the Bloom filters of encrypted files with :class:`DecryptionKeys`; the rows of the
row groups it keeps are read by pyarrow's scan, which needs decryption of its own. This module
makes that from the same keys, decides which failures stop a pruning, and tells pyarrow's
failures to decrypt a fragment as located errors that say what to do.

- Keys made through a KMS (:meth:`DecryptionKeys.from_kms`): pyarrow's
  ``ParquetDecryptionConfig`` with a ``CryptoFactory`` of the same client (wrapped as a
  ``pyarrow.parquet.encryption.KmsClient`` when it is not one), which reads the same key
  material: every column whose key the KMS gives is read.
- Keys given directly: pyarrow takes a footer key only
  (``pyarrow.parquet.encryption.create_decryption_properties``, pyarrow 26: "per-column keys
  are not yet available"), with which it reads the footer, the plaintext columns and the
  columns encrypted with the footer key; a column with its own key is not read by pyarrow,
  and a scan of it fails with a :class:`DecryptionError` saying so.
- A key retriever alone gives pyarrow nothing (it has no key before a file is opened).

Which failures stop a pruning (:func:`refuses`): a module that does not decrypt with the key
found for it (a wrong key or AAD prefix, or tampered bytes: AES-GCM cannot tell them apart),
and a plaintext file where keys were to be used. Keeping those row groups would be safe for the
rows, but it would hide a wrong key as a pruning that skips nothing, and the scan fails on them
anyway. A key that is not available (:class:`MissingKeyError`: not given, or refused by the KMS)
does not stop it: that column's row groups are kept and reported.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, TypeGuard

import pyarrow as pa
import pyarrow.dataset as ds

from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom.errors import DecryptionError, MissingKeyError

__all__ = ["refused", "refuses", "scan_failure", "scan_options", "stop_if_refused"]


def refuses(err: BaseException) -> TypeGuard[DecryptionError]:
    """Whether ``err``, met reading a file's footer or filters with keys, must stop the pruning
    rather than keep the row groups it concerns (see the module)."""
    return isinstance(err, DecryptionError) and not isinstance(err, MissingKeyError)


def stop_if_refused(err: BaseException, name: str) -> None:
    """Raise ``err``, located in the file ``name``, when it must stop the pruning
    (:func:`refuses`); return otherwise, for the caller to keep what it concerns."""
    if refuses(err):
        raise refused(err, name) from None


def refused(err: DecryptionError, name: str) -> DecryptionError:
    """``err`` located in the file ``name`` (when it was not yet), saying why pruning stops."""
    located = err.located(source=name)
    return DecryptionError(
        f"{located.reason}; pruning stops here rather than keep the file's row groups as if "
        "its filters could not help (a wrong key would go unnoticed)",
        source=located.source,
        row_group=located.row_group,
        column=located.column,
        offset=located.offset,
        module=getattr(located, "module", None),
    )


def scan_options(keys: DecryptionKeys | None, **options: Any) -> ds.ParquetFragmentScanOptions:
    """pyarrow's Parquet scan options (``options``: its other settings) decrypting what it can
    with ``keys`` (see the module); without keys, ``options`` alone."""
    if keys is None:
        return ds.ParquetFragmentScanOptions(**options)
    if not isinstance(keys, DecryptionKeys):  # the caller's decryption=, before any read
        raise TypeError(f"decryption must be a DecryptionKeys, not {type(keys).__name__}")
    import pyarrow.parquet.encryption as pe

    client = keys.kms_client
    if client is not None:
        connection = keys.kms_connection_config
        if not isinstance(connection, pe.KmsConnectionConfig):
            connection = pe.KmsConnectionConfig()
        arrow_client = (
            client if isinstance(client, pe.KmsClient) else _arrow_kms_client_class()(client)
        )
        factory = pe.CryptoFactory(lambda _config: arrow_client)
        config = ds.ParquetDecryptionConfig(factory, connection, pe.DecryptionConfiguration())
        return ds.ParquetFragmentScanOptions(decryption_config=config, **options)
    create = getattr(pe, "create_decryption_properties", None)  # pyarrow 26 and later
    if keys.footer_key is None or create is None:
        return ds.ParquetFragmentScanOptions(**options)
    properties = create(
        keys.footer_key,
        aad_prefix=keys.aad_prefix,
        allow_plaintext_files=keys.allow_plaintext_files,
    )
    return ds.ParquetFragmentScanOptions(decryption_properties=properties, **options)


@functools.cache
def _arrow_kms_client_class() -> type:
    """pyarrow's ``KmsClient`` around a client with ``unwrap_key``: made when first needed
    (pyarrow's encryption module is imported only to read encrypted files)."""
    import pyarrow.parquet.encryption as pe

    class ArrowKmsClient(pe.KmsClient):  # type: ignore[misc]
        """A client as pyarrow's CryptoFactory wants it (one for
        :meth:`DecryptionKeys.from_kms` need not subclass ``KmsClient``)."""

        def __init__(self, client: Any) -> None:
            super().__init__()
            self.client = client

        def unwrap_key(self, wrapped_key: str, master_key_identifier: str) -> bytes:
            key = self.client.unwrap_key(wrapped_key, master_key_identifier)
            return key.encode() if isinstance(key, str) else bytes(key)

        def wrap_key(self, key_bytes: bytes, master_key_identifier: str) -> bytes:
            # Made for pyarrow's decryption of a scan, which only unwraps: a wrap asked of
            # it is a writer's, which this client is not given to.
            raise DecryptionError(
                f"asked to wrap a key under {master_key_identifier!r}: this client serves "
                "reads (a scan's decryption) only; give a writer your own KMS client"
            )

    return ArrowKmsClient


# pyarrow's errors that are never about decrypting (a cast, a type, memory).
_NOT_DECRYPTION = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, MemoryError)


def scan_failure(
    fragment: ds.ParquetFileFragment,
    columns: Sequence[str] | None,
    err: Exception,
    keys: DecryptionKeys | None,
) -> DecryptionError | None:
    """The located error to raise for pyarrow's failure ``err`` to read ``columns`` (None: all)
    of a fragment scanned with decryption made from ``keys`` (:func:`scan_options`), saying
    what to do; None when there were no keys, or ``err`` is not about decrypting (pyarrow's
    error stands)."""
    if keys is None or isinstance(err, _NOT_DECRYPTION):
        return None
    what = "its columns" if columns is None else "column(s) " + ", ".join(map(repr, columns))
    theirs = " ".join(str(err).split()) or type(err).__name__
    if keys.kms_client is not None:
        advice = (
            "a column whose key the KMS client does not give (the client that read the "
            "filters gives pyarrow the keys) can be pruned, its row groups kept, but not "
            "read: leave it out of columns= and of the filter; or the key it gives does not "
            "decrypt the column (a wrong key, or tampered bytes), which a pruning that did "
            "not need the column's filters does not meet"
        )
    else:
        if keys.footer_key is not None:
            given = "a footer key"
        elif keys.key_retriever is not None:
            given = "no key (a key retriever has none to give before a file is opened)"
        else:
            given = "no key (no footer key was given)"
        advice = (
            f"pyarrow was given {given}: with keys given directly it decrypts the footer and "
            "the columns encrypted with the footer key only, never a column with its own "
            "key; make the keys with DecryptionKeys.from_kms(client) (pyarrow then asks the "
            "same KMS), or leave such columns out of columns= and of the filter"
        )
    return DecryptionError(
        f"pyarrow could not read {what} ({type(err).__name__}: {theirs}): {advice}",
        source=str(fragment.path),
        column=columns[0] if columns is not None and len(columns) == 1 else None,
    )

"""The encrypted data files of an Iceberg scan (docs/encryption.md#iceberg-tables).

:func:`parquet_bloom.iceberg.prune` reads their Bloom filters with the keys given
(``decryption=``). A key that is not there (not given, or one the KMS cannot unwrap) leaves
its column's filters unread and their row groups kept, as for any unreadable filter; a key
that is there but wrong fails a module's AES-GCM authentication and is raised here, located:
a prune given wrong keys is the caller's mistake, not a file to keep whole in silence.

Their rows cannot be read through pyiceberg: its ``ArrowScan`` makes each file's
``ParquetFileFormat`` itself with no decryption properties (pyiceberg 0.12 has no setting for
them), so pyarrow cannot open an encrypted footer, and under a plaintext footer it fails on
the encrypted column metadata, hangs (a scan filtered on an encrypted column) or aborts the
process (reading its statistics: a C++ exception nothing catches). So
:meth:`IcebergPruneResult.to_arrow` refuses a result holding an encrypted file before pyarrow
is given any, with what to do instead: read the files and row groups the result keeps with
pyarrow's own decryption properties.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyiceberg.table import FileScanTask

from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._io import location
from parquet_bloom._prune.decryption import stop_if_refused
from parquet_bloom._reader import BloomFilterReader
from parquet_bloom._tables.iceberg_io import local_or_url
from parquet_bloom.errors import (
    BloomFilterError,
    MissingKeyError,
    UnsupportedFileError,
)

__all__ = ["encrypted_files", "is_encrypted", "raise_wrong_key", "raise_wrong_keys", "refuse_rows"]


def raise_wrong_key(err: BloomFilterError, keys: DecryptionKeys | None, path: str) -> None:
    """Raise ``err`` (located in ``path``) when it must stop the prune, by the rule every
    prune follows (:func:`parquet_bloom._prune.decryption.refuses`): a key given that does not
    decrypt, or a plaintext file the keys do not allow. A key missing
    (:class:`MissingKeyError`: not given, or refused by the KMS) is left to the caller, which
    keeps the row groups it cannot decide."""
    if keys is not None:
        stop_if_refused(err, path)


def raise_wrong_keys(reader: BloomFilterReader, keys: DecryptionKeys | None, path: str) -> None:
    """Raise the first column chunk of ``reader``'s file whose key was given but is wrong (its
    metadata does not decrypt); chunks without their key stay unreadable, not raised. A row
    group that does not decode was reported by the prune, which kept it."""
    if keys is None or reader.encryption_algorithm is None:
        return
    for row_group in range(reader.num_row_groups):
        try:
            unreadable = reader.unreadable_columns(row_group)
        except BloomFilterError:
            continue
        for err in unreadable.values():
            raise_wrong_key(err, keys, path)


def is_encrypted(reader: BloomFilterReader) -> bool | None:
    """The file is encrypted: opened with keys as such, or (without keys) a plaintext footer
    listing encrypted column chunks; None when its row groups do not decode (the prune kept
    them, reported, and left the file to pyiceberg's scan)."""
    if reader.encryption_algorithm is not None:
        return True
    try:
        return any(chunk.encrypted for chunk in reader.column_chunks)
    except BloomFilterError:
        return None


def encrypted_files(
    tasks: Iterable[FileScanTask],
    known: Mapping[str, bool],
    keys: DecryptionKeys | None,
    storage_options: Mapping[str, Any],
) -> list[str]:
    """The data files of ``tasks`` that are encrypted: ``known`` says so of those whose footer
    the prune read; with ``keys`` (the table is said to hold encrypted files), the others'
    footers are read here (a wrong key is raised, located). Without keys, an unread file is
    left to pyiceberg as its own scan would read it."""
    found = []
    for task in tasks:
        path: str = task.file.file_path
        encrypted = known.get(path)
        if encrypted is None and keys is not None:
            source = local_or_url(path)
            try:
                with BloomFilterReader(
                    source,
                    storage_options=storage_options if location.is_url(source) else None,
                    size=task.file.file_size_in_bytes,
                    decryption=keys,
                ) as reader:
                    encrypted = reader.encryption_algorithm is not None
            except MissingKeyError:
                encrypted = True  # an encrypted footer whose key is not among the keys
        if encrypted:
            found.append(path)
    return found


def refuse_rows(paths: list[str]) -> None:
    """Refuse reading rows of encrypted files through pyiceberg, saying what to do."""
    if not paths:
        return
    more = f" (and {len(paths) - 1} more encrypted files)" if len(paths) > 1 else ""
    raise UnsupportedFileError(
        "an encrypted data file: pyiceberg reads data files with pyarrow without decryption "
        "properties (its ArrowScan takes none), so to_arrow() cannot read its rows" + more + ". "
        "The prune's result is still right: read the files and row groups it keeps "
        "(result.row_groups) with pyarrow's own decryption, "
        "pq.ParquetFile(path, decryption_properties=...).read_row_groups(row_groups), "
        "and filter them (docs/encryption.md#iceberg-tables)",
        source=paths[0],
    )

"""An Iceberg table of encrypted data files, for the tests.

pyarrow's CryptoFactory writes the files (with the test KMS of ``keys.py``), with the table's
field ids in their schema (``PARQUET:field_id``, as pyiceberg writes them). pyiceberg's
``add_files`` cannot register them: it reads each file's footer and statistics with pyarrow,
which has no decryption properties there and aborts the process on the encrypted column
metadata. So the DataFiles are made here from what was written (path, size, rows, and the
value and null counts of the plaintext data), and committed with pyiceberg's own fast append,
which reads no data file. pyarrow writes no Bloom filters into encrypted files: the files
get theirs from our encrypted rewrite (``bloom=``) before they are registered.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.typedef import Record
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

import parquet_bloom as pb
from parquet_bloom import DecryptionKeys
from tests.encryption.keys import InServerWrapKms
from tests.tables.iceberg_tables import catalog

MASTER_KEYS = {"kf": b"0123456789012345", "ka": b"1234567890123450", "kb": b"abcdefghijklmnop"}
SCHEMA = Schema(
    NestedField(1, "a", LongType(), required=False),
    NestedField(2, "b", StringType(), required=False),
    NestedField(3, "c", DoubleType(), required=False),
)
FILES = 2
ROWS = 3000  # a file
ROW_GROUP = 1000


def kms(master_keys: dict[str, bytes] | None = None) -> InServerWrapKms:
    return InServerWrapKms(MASTER_KEYS if master_keys is None else master_keys)


def keys(master_keys: dict[str, bytes] | None = None) -> DecryptionKeys:
    """The keys through the KMS (all of them, or those of ``master_keys``)."""
    return DecryptionKeys.from_kms(kms(master_keys))


def decryption_properties() -> pe.FileDecryptionProperties:
    """pyarrow's decryption properties for the table's files, through the same KMS."""
    factory = pe.CryptoFactory(lambda config: kms())
    return factory.file_decryption_properties(
        pe.KmsConnectionConfig(), pe.DecryptionConfiguration()
    )


def data(k: int) -> pa.Table:
    """File ``k``'s rows: ``a`` from ``k * ROWS``, ``b`` ``v<a>``, ``c`` ``a / 2``."""
    ids = range(k * ROWS, (k + 1) * ROWS)
    return pa.table(
        {
            "a": pa.array(ids, pa.int64()),
            "b": pa.array([f"v{i}" for i in ids]),
            "c": pa.array([i * 0.5 for i in ids]),
        }
    )


def everything() -> pa.Table:
    return pa.concat_tables([data(k) for k in range(FILES)])


def write(path: Path, rows: pa.Table, *, plaintext_footer: bool) -> None:
    """``rows`` encrypted as pyarrow's CryptoFactory writes them: the footer with ``kf``,
    ``a`` with ``ka``, ``b`` with ``kb``, ``c`` in plaintext; the table's field ids."""
    factory = pe.CryptoFactory(lambda config: kms())
    config = pe.EncryptionConfiguration(footer_key="kf", column_keys={"ka": ["a"], "kb": ["b"]})
    config.plaintext_footer = plaintext_footer
    props = factory.file_encryption_properties(pe.KmsConnectionConfig(), config)
    schema = schema_to_pyarrow(SCHEMA, include_field_ids=True)
    pq.write_table(rows.cast(schema), path, row_group_size=ROW_GROUP, encryption_properties=props)


def data_file(path: Path, rows: pa.Table) -> DataFile:
    """The DataFile of an encrypted file, from what was written (its footer unread)."""
    ids = {f.name: f.field_id for f in SCHEMA.fields}
    made = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path.as_uri(),
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=rows.num_rows,
        file_size_in_bytes=path.stat().st_size,
        value_counts={ids[n]: rows.num_rows for n in rows.column_names},
        null_value_counts={ids[n]: rows.column(n).null_count for n in rows.column_names},
    )
    made.spec_id = 0
    return made


def encrypted_table(
    root: Path, *, plaintext_footer: bool = False, bloom: Sequence[str] = ("a", "b", "c")
) -> Table:
    """An unpartitioned table of :data:`FILES` encrypted files (``data(k)`` each, row groups
    of :data:`ROW_GROUP` rows), with Bloom filters on ``bloom`` (none: as pyarrow writes
    them), in one fast-append snapshot."""
    table = catalog(root).create_table("db.enc", SCHEMA)
    folder = Path(table.location().removeprefix("file://")) / "data"
    folder.mkdir(parents=True)
    files = []
    for k in range(FILES):
        rows = data(k)
        path = folder / f"part-{k}.parquet"
        if bloom:
            plain = folder / f"unfiltered-{k}.parquet"
            write(plain, rows, plaintext_footer=plaintext_footer)
            pb.rewrite_bloom_filters(plain, path, columns=list(bloom), decryption=keys())
            plain.unlink()
        else:
            write(path, rows, plaintext_footer=plaintext_footer)
        files.append(data_file(path, rows))
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        for made in files:
            append.append_data_file(made)
    return table

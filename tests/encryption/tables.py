"""Delta tables of encrypted data files, for the table tests of encrypted files.

deltalake writes no encrypted files: the files are pyarrow's (its CryptoFactory through the
test KMS client of ``keys.py``, or a footer key given directly), registered in the log by
deltalake's ``create_table_with_add_actions``. pyarrow writes no Bloom filters into encrypted
files either: :func:`with_filters` adds them with this library's rewrite, which keeps the
files encrypted (tested against parquet-java and pyarrow in ``test_rewrite.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
from deltalake import DeltaTable, Schema
from deltalake.transaction import AddAction, create_table_with_add_actions

from parquet_bloom import DecryptionKeys, delta
from tests.encryption import test_pyarrow_files as pyarrow_files
from tests.encryption.keys import InServerWrapKms

ROWS = pyarrow_files.ROWS  # rows a file, in row groups of pyarrow_files.ROW_GROUP
UNIFORM_KEY = b"u123456789abcdef"  # the footer key of uniform_table's files, given directly


def register(root: Path, paths: Sequence[Path], schema: pa.Schema, rows: int = ROWS) -> Path:
    """A Delta table at ``root`` (holding ``paths``, of ``rows`` rows each) of those files, as
    they are."""
    adds = []
    for path in paths:
        stats = json.dumps({"numRecords": rows})
        now = int(time.time() * 1000)
        adds.append(AddAction(path.name, path.stat().st_size, {}, now, True, stats))
    create_table_with_add_actions(str(root), Schema.from_arrow(schema), adds)
    return root


def encrypted_table(
    root: Path, *, plaintext_footer: bool, files: int = 2, distinct: bool = False
) -> Path:
    """A table of ``files`` files pyarrow encrypts through the KMS (``kf`` the footer's key,
    ``a`` and ``b`` with keys of their own, ``c`` plaintext); each file's ``a`` from
    ``k * ROWS`` on when ``distinct``, else every file the same rows."""
    root.mkdir()
    paths = [
        pyarrow_files.write(
            root / f"part-{k}.parquet",
            plaintext_footer=plaintext_footer,
            start=k * ROWS if distinct else 0,
        )
        for k in range(files)
    ]
    return register(root, paths, pyarrow_files.table().schema)


def uniform_table(root: Path, *, plaintext_footer: bool = False, files: int = 2) -> Path:
    """A table of files pyarrow encrypts with one key given directly (UNIFORM_KEY: the footer
    and every column; ``create_encryption_properties``), each file's ``a`` distinct."""
    root.mkdir()
    paths = []
    for k in range(files):
        props = pe.create_encryption_properties(UNIFORM_KEY, plaintext_footer=plaintext_footer)
        path = root / f"part-{k}.parquet"
        pq.write_table(
            pyarrow_files.table(k * ROWS),
            path,
            row_group_size=pyarrow_files.ROW_GROUP,
            encryption_properties=props,
        )
        paths.append(path)
    return register(root, paths, pyarrow_files.table().schema)


def kms(master_keys: dict[str, bytes] | None = None) -> InServerWrapKms:
    """The test KMS, with the master keys of pyarrow_files (or ``master_keys``)."""
    return InServerWrapKms(pyarrow_files.MASTER_KEYS if master_keys is None else master_keys)


def keys() -> DecryptionKeys:
    return DecryptionKeys.from_kms(kms())


def with_filters(root: Path, columns: Sequence[str], decryption: DecryptionKeys) -> Path:
    """The table with filters of ``columns`` added to every file (one commit), encrypted."""
    report = delta.rewrite_bloom_filters(str(root), columns=list(columns), decryption=decryption)
    assert report.rewritten and not report.failed, report.failed
    return root


def pyarrow_scan(root: Path, scan: ds.ParquetFragmentScanOptions | None = None) -> ds.Dataset:
    """The table's live files as pyarrow itself scans them, decrypted through the KMS (or
    with ``scan``): the oracle of a pruned scan."""
    if scan is None:
        factory = pe.CryptoFactory(lambda config: kms())
        config = ds.ParquetDecryptionConfig(
            factory, pe.KmsConnectionConfig(), pe.DecryptionConfiguration()
        )
        scan = ds.ParquetFragmentScanOptions(decryption_config=config)
    files = [str(Path(uri)) for uri in DeltaTable(str(root)).file_uris()]
    parquet = ds.ParquetFileFormat(default_fragment_scan_options=scan)
    return ds.dataset(files, format=parquet, schema=pyarrow_files.table().schema)

"""A Delta table of encrypted data files (written by pyarrow's CryptoFactory, registered in
the log by deltalake's ``create_table_with_add_actions``: deltalake writes no encrypted files)
rewritten with its keys: one commit, every new file still encrypted, its filters read with the
keys and its rows by pyarrow through the same KMS."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
import pytest
from deltalake import DeltaTable

import parquet_bloom as pb
from parquet_bloom import delta
from tests.encryption import test_pyarrow_files as pyarrow_files
from tests.encryption.keys import InServerWrapKms
from tests.encryption.tables import encrypted_table, keys


@pytest.mark.parametrize("plaintext_footer", [False, True], ids=["encrypted", "plaintext"])
def test_a_delta_table_of_encrypted_files_rewritten_with_its_keys(
    tmp_path: Path, plaintext_footer: bool
) -> None:
    root = encrypted_table(tmp_path / "t", plaintext_footer=plaintext_footer)
    # Without keys, no file can be rewritten, and nothing is committed.
    report = delta.rewrite_bloom_filters(str(root), columns=["a", "b"])
    assert report.rewritten == [] and len(report.failed) == 2 and report.version is None
    assert all("decryption=" in error for _, error in report.failed)
    assert DeltaTable(str(root)).version() == 0
    report = delta.rewrite_bloom_filters(str(root), columns=["a", "b"], decryption=keys())
    assert len(report.rewritten) == 2 and not report.failed and report.version == 1
    table = DeltaTable(str(root))
    assert table.version() == 1
    factory = pe.CryptoFactory(lambda config: InServerWrapKms(pyarrow_files.MASTER_KEYS))
    props = factory.file_decryption_properties(
        pe.KmsConnectionConfig(), pe.DecryptionConfiguration()
    )
    for uri in table.file_uris():
        path = Path(uri)
        assert path.read_bytes()[-4:] == (b"PAR1" if plaintext_footer else b"PARE")
        data = pq.read_table(path, decryption_properties=props)
        assert data.equals(pyarrow_files.table())
        with pb.BloomFilterReader(path, decryption=keys()) as reader:
            filters, failed = reader.filters_with_errors()
            assert failed == {} and {c for _, c in filters} == {"a", "b"}
            assert reader.row_groups_might_contain("a", [2500]) == [2]
            assert reader.row_groups_might_contain("b", ["v10"]) == [0]


def test_the_table_commands_take_a_decryption_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from parquet_bloom.cli import main
    from tests.encryption.test_kms_config import KMS, config_file

    root = encrypted_table(tmp_path / "t", plaintext_footer=False)
    config = config_file(tmp_path, {"kms": KMS})
    keyed = ["--decryption-config", str(config)]
    assert main(["table", "add", str(root), "--column", "a", *keyed]) == 0
    assert "2 files rewritten" in capsys.readouterr().out
    table = DeltaTable(str(root))
    assert table.version() == 1
    for uri in table.file_uris():
        with pb.BloomFilterReader(uri, decryption=keys()) as reader:
            assert reader.row_groups_might_contain("a", [10]) == [0]
    assert main(["table", "add", str(root), "--column", "b"]) == 2
    out, err = capsys.readouterr()
    assert "nothing was committed" in err and "pass its keys" in out

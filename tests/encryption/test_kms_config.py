"""A KMS named in a decryption config (the CLI's ``--decryption-config``): the client class
imported by name and made from its connection config, as pyarrow's ``kms_client_factory`` and
parquet-java's ``parquet.encryption.kms.client.class`` are; used by the reading commands and
by the rewriting ones, whose output stays encrypted."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
import pytest

import parquet_bloom as pb
from parquet_bloom import DecryptionKeys
from parquet_bloom.cli import main
from tests.encryption import test_pyarrow_files as pyarrow_files
from tests.encryption.keys import ConfiguredKms, InServerWrapKms

CONNECTION = {"custom_kms_conf": {k: v.decode() for k, v in pyarrow_files.MASTER_KEYS.items()}}
KMS = {"client": "tests.encryption.keys:ConfiguredKms", "connection": CONNECTION}


def config_file(tmp_path: Path, config: object) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize("plaintext_footer", [False, True], ids=["encrypted", "plaintext"])
def test_the_cli_reads_and_rewrites_through_a_configured_kms(
    tmp_path: Path, plaintext_footer: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    src = pyarrow_files.write(tmp_path / "in.parquet", plaintext_footer=plaintext_footer)
    dst = tmp_path / "out.parquet"
    config = config_file(tmp_path, {"kms": KMS})
    keyed = ["--decryption-config", str(config)]
    assert main(["add", str(src), str(dst), "--column", "a", "--column", "b", *keyed]) == 0
    assert main(["probe", *keyed, str(dst), "--column", "a", "1500"]) == 0
    assert "1 of 3 row groups might contain a value" in capsys.readouterr().out
    # pyarrow reads the rewritten file back through the same KMS; our reader finds the filters.
    factory = pe.CryptoFactory(lambda c: InServerWrapKms(pyarrow_files.MASTER_KEYS))
    props = factory.file_decryption_properties(
        pe.KmsConnectionConfig(), pe.DecryptionConfiguration()
    )
    assert pq.read_table(dst, decryption_properties=props).equals(pyarrow_files.table())
    keys = DecryptionKeys.from_config({"kms": KMS})
    with pb.BloomFilterReader(dst, decryption=keys) as reader:
        filters, failed = reader.filters_with_errors()
        assert failed == {}
        assert sorted({c for _, c in filters}) == ["a", "b"]
        assert reader.row_groups_might_contain("a", [1500]) == [1]
    # Without the config, the rewrite refuses the file.
    assert main(["add", str(src), str(tmp_path / "x.parquet"), "--column", "a"]) == 2
    assert "--decryption-config FILE" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kms", "message"),
    [
        ("x", "kms must be a JSON object"),
        ({"client": "nomodule"}, "package.module:Name"),
        ({"client": "tests.encryption.keys:Nothing"}, "cannot be imported"),
        ({"client": "tests.encryption.keys:DATA"}, "not a class or a function"),
        ({**KMS, "extra": 1}, "unknown kms members: extra"),
        ({**KMS, "connection": {"kms_url": "x"}}, "kms.connection must be"),
        ({**KMS, "connection": {"custom_kms_conf": {"k": 1}}}, "strings"),
        ({**KMS, "client": "tests.encryption.keys:keys_of_nothing"}, "without unwrap_key"),
    ],
)
def test_bad_kms_configs(kms: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DecryptionKeys.from_config({"kms": kms})


def test_kms_is_not_combined_with_keys() -> None:
    with pytest.raises(ValueError, match="kms cannot be combined with footer_key"):
        DecryptionKeys.from_config({"kms": KMS, "footer_key": "hex:" + "00" * 16})
    config = {"kms": KMS, "aad_prefix": "p", "allow_plaintext_files": True}
    keys = DecryptionKeys.from_config(config)
    assert keys.aad_prefix == b"p" and keys.allow_plaintext_files


def test_a_configured_client_is_made_from_its_connection() -> None:
    client = ConfiguredKms(pe.KmsConnectionConfig(custom_kms_conf={"kf": "0123456789012345"}))
    assert client.master_keys == {"kf": b"0123456789012345"}

"""Files pyarrow encrypts (its CryptoFactory, with the test KMS client of ``keys.py``), read by
us with the same client: footers and column metadata decrypt in every mode pyarrow writes, and
pruning keeps what it cannot decide. (pyarrow 26 writes no Bloom filters into encrypted
files, so these files have none: the filters themselves are tested on parquet-testing's.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
import pytest

import parquet_bloom as pb
from parquet_bloom import BloomFilterWarning, DecryptionKeys
from parquet_bloom.cli import main
from parquet_bloom.errors import DecryptionError, MissingKeyError
from tests.encryption.keys import InServerWrapKms

ROWS = 3000
ROW_GROUP = 1000
MASTER_KEYS = {"kf": b"0123456789012345", "ka": b"1234567890123450", "kb": b"abcdefghijklmnop"}


def table(start: int = 0) -> pa.Table:
    """ROWS rows: ``a`` from ``start`` on, ``b`` "v" and ``a``, ``c`` half of ``a``."""
    values = range(start, start + ROWS)
    return pa.table(
        {
            "a": pa.array(values, pa.int64()),
            "b": pa.array([f"v{i}" for i in values]),
            "c": pa.array([i * 0.5 for i in values]),
        }
    )


def write(
    path: Path,
    *,
    uniform: bool = False,
    plaintext_footer: bool = False,
    double_wrapping: bool = True,
    algorithm: str = "AES_GCM_V1",
    start: int = 0,
) -> Path:
    """An encrypted file of :func:`table` (``start``), written through pyarrow's CryptoFactory:
    the footer's key ``kf``, and ``a``'s ``ka``, ``b``'s ``kb`` (``c`` in plaintext), or
    every column with ``kf`` (``uniform``)."""
    kms = InServerWrapKms(MASTER_KEYS)
    factory = pe.CryptoFactory(lambda config: kms)
    if uniform:
        config = pe.EncryptionConfiguration(footer_key="kf", uniform_encryption=True)
    else:
        config = pe.EncryptionConfiguration(footer_key="kf", column_keys={"ka": ["a"], "kb": ["b"]})
    config.plaintext_footer = plaintext_footer
    config.double_wrapping = double_wrapping
    config.encryption_algorithm = algorithm
    props = factory.file_encryption_properties(pe.KmsConnectionConfig(), config)
    pq.write_table(table(start), path, row_group_size=ROW_GROUP, encryption_properties=props)
    return path


def pyarrow_metadata(path: Path) -> pq.FileMetaData:
    kms = InServerWrapKms(MASTER_KEYS)
    factory = pe.CryptoFactory(lambda config: kms)
    props = factory.file_decryption_properties(pe.KmsConnectionConfig())
    return pq.ParquetFile(path, decryption_properties=props).metadata


MODES = {
    "columns-encrypted-footer": {},
    "columns-plaintext-footer": {"plaintext_footer": True},
    "columns-single-wrapping": {"double_wrapping": False},
    "columns-ctr": {"algorithm": "AES_GCM_CTR_V1"},
    "uniform": {"uniform": True},
    "uniform-plaintext-footer": {"uniform": True, "plaintext_footer": True},
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_metadata_decrypts_as_pyarrow_reads_it(tmp_path: Path, mode: str) -> None:
    path = write(tmp_path / "f.parquet", **MODES[mode])  # type: ignore[arg-type]
    theirs = pyarrow_metadata(path)
    kms = InServerWrapKms(MASTER_KEYS)
    with pb.BloomFilterReader(path, decryption=DecryptionKeys.from_kms(kms)) as reader:
        expected = MODES[mode].get("algorithm", "AES_GCM_V1")
        assert reader.encryption_algorithm == expected
        # (pyarrow 26 writes an encrypted footer for uniform encryption whatever
        # plaintext_footer says.)
        assert reader.encrypted_footer == (path.read_bytes()[-4:] == b"PARE")
        if mode == "columns-plaintext-footer":
            assert not reader.encrypted_footer
        assert reader.num_row_groups == theirs.num_row_groups == ROWS // ROW_GROUP
        for rg in range(reader.num_row_groups):
            assert reader.unreadable_columns(rg) == {}
            for i, chunk in enumerate(reader.row_group(rg)):
                col = theirs.row_group(rg).column(i)
                assert chunk.path == col.path_in_schema
                assert chunk.encrypted == (MODES[mode].get("uniform", False) or chunk.path != "c")
                assert chunk.num_values == col.num_values
                assert chunk.data_page_offset == col.data_page_offset
                assert chunk.total_compressed_size == col.total_compressed_size
        assert reader.filters_with_errors() == ({}, {})
    # The factory form of a pyarrow kms_client_factory works as well.
    keys = DecryptionKeys.from_kms(lambda config: InServerWrapKms(MASTER_KEYS), None)
    with pb.BloomFilterReader(path, decryption=keys) as reader:
        assert reader.columns == ["a", "b", "c"]


def test_missing_column_master_key(tmp_path: Path) -> None:
    path = write(tmp_path / "f.parquet")
    lacking = InServerWrapKms({k: v for k, v in MASTER_KEYS.items() if k != "kb"})
    with pb.BloomFilterReader(path, decryption=DecryptionKeys.from_kms(lacking)) as reader:
        unreadable = reader.unreadable_columns(0)
        assert set(unreadable) == {"b"}
        assert isinstance(unreadable["b"], DecryptionError)
        filters, failed = reader.filters_with_errors()
        assert filters == {} and set(failed) == {(rg, "b") for rg in range(3)}
        # "a" (its own key) and "c" (plaintext) are read as usual.
        assert reader.row_group(0)[0].data_page_offset > 0


def test_missing_column_key_given_explicitly(tmp_path: Path) -> None:
    path = write(tmp_path / "f.parquet", uniform=False)
    # The footer key comes from the KMS, but only through a retriever here: none for columns.
    kms_keys = DecryptionKeys.from_kms(InServerWrapKms(MASTER_KEYS))
    with pb.BloomFilterReader(path, decryption=kms_keys) as reader:
        footer_only = reader._decryptor.footer_key()  # type: ignore[union-attr]
    assert footer_only is not None
    with pb.BloomFilterReader(path, decryption=DecryptionKeys(footer_only)) as reader:
        for rg in range(3):
            errors = reader.unreadable_columns(rg)
            assert set(errors) == {"a", "b"}
            assert all(isinstance(e, MissingKeyError) for e in errors.values())


def encrypted_dataset(path: Path) -> ds.Dataset:
    kms = InServerWrapKms(MASTER_KEYS)
    config = ds.ParquetDecryptionConfig(
        pe.CryptoFactory(lambda c: kms), pe.KmsConnectionConfig(), pe.DecryptionConfiguration()
    )
    options = ds.ParquetFragmentScanOptions(decryption_config=config)
    return ds.dataset(path, format=ds.ParquetFileFormat(default_fragment_scan_options=options))


def test_prune_keeps_row_groups_it_cannot_decide(tmp_path: Path) -> None:
    path = write(tmp_path / "f.parquet")
    dataset = encrypted_dataset(path)
    flt = pc.field("b") == "v1500"
    expected = dataset.to_table(filter=flt)
    assert expected.num_rows == 1
    # With every key: no filters in pyarrow's encrypted files, so every row group kept.
    keys = DecryptionKeys.from_kms(InServerWrapKms(MASTER_KEYS))
    result = pb.prune(dataset, flt, decryption=keys)
    assert result.report.row_groups == 3 and result.report.row_groups_skipped == 0
    assert result.dataset.to_table(filter=flt).equals(expected)
    # Without the key of "b": its chunks are unreadable, kept, warned and counted.
    lacking = DecryptionKeys.from_kms(InServerWrapKms({"kf": MASTER_KEYS["kf"]}))
    with pytest.warns(BloomFilterWarning, match="could not be read"):
        result = pb.prune(encrypted_dataset(path), flt, decryption=lacking)
    assert result.report.row_groups_skipped == 0
    assert result.report.filters_unreadable == 3
    assert result.dataset.to_table(filter=flt).equals(expected)
    # Without keys at all the footer cannot be read: the whole file is kept.
    with pytest.warns(BloomFilterWarning, match="keeping all row groups"):
        result = pb.prune(encrypted_dataset(path), flt)
    assert result.report.row_groups_skipped == 0
    assert result.dataset.to_table(filter=flt).equals(expected)


def test_inspect_and_check(tmp_path: Path) -> None:
    path = write(tmp_path / "f.parquet")
    lacking = DecryptionKeys.from_kms(InServerWrapKms({"kf": MASTER_KEYS["kf"]}))
    report = pb.inspect_file(path, decryption=lacking)
    by_column = {(c.row_group, c.column): c for c in report.chunks}
    assert len(by_column) == 9
    assert by_column[(0, "c")].error is None and not by_column[(0, "c")].present
    assert "unwrap" in (by_column[(0, "a")].error or "")
    # No filter could be read: a check that checked nothing fails unless that is allowed.
    (empty,) = pb.check_file(path, decryption=lacking).violations
    assert empty.kind == "empty"
    checked = pb.check_file(path, decryption=lacking, allow_empty=True)
    assert checked.ok
    assert any("'a'" in note and "3 encrypted chunk(s)" in note for note in checked.notes)
    # Nor is a chunk whose metadata the keys do not open judged for a missing filter.
    assert pb.check_file(path, decryption=lacking, require=["a"], allow_empty=True).ok


def test_cli_decryption_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.encryption.keys import COLUMN_KEYS, DATA, FOOTER_KEY

    bloom = DATA / "encrypt_columns_and_footer_bloom_filter.parquet.encrypted"
    config = tmp_path / "keys.json"
    config.write_text(
        json.dumps(
            {
                "footer_key": "hex:" + FOOTER_KEY.hex(),
                "column_keys": {"double_field": "hex:" + COLUMN_KEYS["double_field"].hex()},
                "key_ids": {"kc2": "base64:MTIzNDU2Nzg5MDEyMzQ1MQ=="},
            }
        )
    )
    assert main(["inspect", "--json", "--decryption-config", str(config), str(bloom)]) == 0
    document = json.loads(capsys.readouterr().out)
    chunks = {c["column"]: c for c in document["files"][0]["chunks"]}
    assert chunks["double_field"]["num_bytes"] == chunks["float_field"]["num_bytes"] == 2048
    args = ["probe", "--decryption-config", str(config), "--column", "float_field", "1.5"]
    assert main([*args, "--", str(bloom)]) in (0, 1)
    # Without the float_field key the probe keeps the row group and says why.
    config.write_text(json.dumps({"footer_key": "base64:MDEyMzQ1Njc4OTAxMjM0NQ=="}))
    capsys.readouterr()
    assert main(["probe", "--json", *args[1:], "--", str(bloom)]) == 0
    outcome = json.loads(capsys.readouterr().out)["files"][0]["row_groups"][0]
    assert outcome["result"] == "might contain" and "no key" in outcome["reason"]
    # A bad config is a usage error (exit 2).
    config.write_text(json.dumps({"footer_key": "0123456789012345"}))
    assert main(["inspect", "--decryption-config", str(config), str(bloom)]) == 2
    assert "must start with 'hex:' or 'base64:'" in capsys.readouterr().err


def test_plaintext_files_only_when_allowed(tmp_path: Path) -> None:
    plain = tmp_path / "plain.parquet"
    pq.write_table(table(), plain, row_group_size=ROW_GROUP, bloom_filter_options={"a": True})
    keys = DecryptionKeys(MASTER_KEYS["kf"])
    with pytest.raises(DecryptionError, match="not encrypted") as info:
        pb.BloomFilterReader(plain, decryption=keys)
    assert info.value.source == str(plain)
    allowing = DecryptionKeys(MASTER_KEYS["kf"], allow_plaintext_files=True)
    with pb.BloomFilterReader(plain, decryption=allowing) as reader:
        assert reader.encryption_algorithm is None
        assert reader.row_groups_might_contain("a", [1500]) == [1]


def test_config_members_checked() -> None:
    good = DecryptionKeys.from_config(
        {"footer_key": "hex:" + "00" * 16, "aad_prefix": "hex:ff00", "allow_plaintext_files": True}
    )
    assert good.footer_key == bytes(16) and good.aad_prefix == b"\xff\x00"
    assert good.allow_plaintext_files
    for bad, message in (
        ({"footer_key": "hex:zz"}, "footer_key is not hex: the character at position 4 is not"),
        ({"footer_key": "hex:abc"}, "footer_key is not hex: an odd number of hex digits"),
        ({"footer_key": "base64:!!"}, "not valid base64"),
        ({"footer_key": "hex:00"}, "1 bytes"),
        ({"column_keys": ["a"]}, "column_keys must be"),
        ({"footer": "hex:00"}, "unknown decryption config members: footer"),
        ({"allow_plaintext_files": "yes"}, "true or false"),
    ):
        with pytest.raises(ValueError, match=message):
            DecryptionKeys.from_config(bad)


def test_cryptography_imported_only_to_decrypt(tmp_path: Path) -> None:
    """Design rule 10: `import parquet_bloom` and reading plain files load no crypto library."""
    import subprocess
    import sys

    plain = tmp_path / "plain.parquet"
    pq.write_table(table(), plain, bloom_filter_options={"a": True})
    code = (
        "import sys, parquet_bloom as pb\n"
        f"r = pb.BloomFilterReader({str(plain)!r}); r.filters(); pb.DecryptionKeys(b'k' * 16)\n"
        "assert 'cryptography' not in sys.modules, 'imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_check_fails_on_a_wrong_column_key(tmp_path: Path) -> None:
    """A column key given that does not decrypt its metadata is a "decryption" violation, as
    prune stops on it: a check passed with a note (as for a key not given) hid a wrong key,
    even of a column required to have filters."""
    path = write(tmp_path / "f.parquet")
    with pb.BloomFilterReader(path, decryption=DecryptionKeys.from_kms(InServerWrapKms())) as r:
        footer_key = r._decryptor.footer_key()  # type: ignore[union-attr]
    wrong_a = DecryptionKeys(footer_key, {"a": bytes(16)})
    report = pb.check_file(path, decryption=wrong_a, require=["a"], allow_empty=True)
    assert not report.ok
    wrong = [v for v in report.violations if v.kind == "decryption"]
    assert [(v.row_group, v.column) for v in wrong] == [(0, "a"), (1, "a"), (2, "a")]
    assert all("does not decrypt" in v.message for v in wrong)
    # b's key is not given: a note, not a violation.
    assert any("'b'" in n and "no key was given" in n for n in report.notes)
    assert not any("'a'" in n for n in report.notes)
    assert all(v.column == "a" for v in report.violations)
    # Columns not checked are not judged.
    assert pb.check_file(path, decryption=wrong_a, columns=["c"], allow_empty=True).ok


def test_check_notes_say_why_a_key_is_missing(tmp_path: Path) -> None:
    """A column whose key the KMS refused: the note gives the KMS client's refusal, not "no
    key given" (the key was asked for, and the client said why it did not give it)."""
    path = write(tmp_path / "f.parquet")
    refusing = DecryptionKeys.from_kms(InServerWrapKms({"kf": MASTER_KEYS["kf"]}))
    report = pb.check_file(path, decryption=refusing, allow_empty=True)
    (note,) = [n for n in report.notes if "'a'" in n]
    assert "could not unwrap" in note and "'ka'" in note, note

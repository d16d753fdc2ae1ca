"""The rewrite of encrypted files keeps them encrypted, and readable by the writers' readers.

Oracles: parquet-java 1.17 reads the rewritten files of parquet-java's writer (every row, and
every value in its row group's Bloom filter, decrypted by parquet-java:
``ParquetJavaEncryptedReader.java``); pyarrow (Arrow C++ 26) reads back the rewritten files
its CryptoFactory wrote, through the same KMS, and the uniform file of parquet-testing with
its footer key. parquet-testing's files, in every footer mode and
algorithm, hold the same 50 rows: the filters we build from their decrypted pages equal, bit
for bit, the filters of those values as pyarrow reads them from the uniform file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
import pytest

import parquet_bloom as pb
from parquet_bloom import DecryptionKeys
from parquet_bloom._rewrite import encryption
from parquet_bloom.errors import (
    CorruptFileError,
    DecryptionError,
    MissingKeyError,
    UnsupportedFileError,
)
from tests import skips
from tests.encryption import test_pyarrow_files as pyarrow_files
from tests.encryption.keys import AAD_PREFIX, COLUMN_KEYS, DATA, FOOTER_KEY, InServerWrapKms
from tests.encryption.test_parquet_java import CONFIGS, keys_for, pyspark_jars, written

__all__ = ["written"]  # the fixture, shared with test_parquet_java

TESTING = [
    "encrypt_columns_and_footer",
    "encrypt_columns_and_footer_aad",
    "encrypt_columns_and_footer_ctr",
    "encrypt_columns_and_footer_disable_aad_storage",
    "encrypt_columns_plaintext_footer",
    "uniform_encryption",
]
# The columns of parquet-testing's files whose values pyarrow gives as one value a row.
FLAT = {
    "int32_field": "INT32",
    "float_field": "FLOAT",
    "double_field": "DOUBLE",
    "ba_field": "BYTE_ARRAY",
}
STORAGE = {
    "INT32": pa.int32(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "BYTE_ARRAY": pa.binary(),
}
ALL = [*FLAT, "int64_field", "int96_field", "flba_field"]


def keys_of(name: str) -> DecryptionKeys:
    prefix = AAD_PREFIX if "disable_aad_storage" in name else None
    return DecryptionKeys(FOOTER_KEY, COLUMN_KEYS, aad_prefix=prefix)


def file_of(name: str) -> Path:
    return DATA / f"{name}.parquet.encrypted"


def filters(path: Path, keys: DecryptionKeys) -> dict[tuple[int, str], pb.SplitBlockBloomFilter]:
    with pb.BloomFilterReader(path, decryption=keys) as reader:
        found, failed = reader.filters_with_errors()
    assert failed == {}
    return found


@pytest.mark.parametrize("name", TESTING)
def test_parquet_testing_files_get_filters_of_their_values(name: str, tmp_path: Path) -> None:
    src, dst = file_of(name), tmp_path / "out.parquet"
    keys = keys_of(name)
    report = pb.rewrite_bloom_filters(src, dst, columns=ALL, num_bytes=256, decryption=keys)
    assert sorted(c for _, c, _ in report.filters_written) == sorted(ALL)
    old, new = src.read_bytes(), dst.read_bytes()
    # The footer mode is kept; everything before the old footer is copied as it was.
    assert new[-4:] == old[-4:] and new[:4] == old[:4]
    footer_start = len(old) - 8 - int.from_bytes(old[-8:-4], "little")
    assert new[:footer_start] == old[:footer_start]
    with pb.BloomFilterReader(dst, decryption=keys) as reader:
        assert reader.encrypted_footer == (old[-4:] == b"PARE")
        with pb.BloomFilterReader(src, decryption=keys) as before:
            assert reader.encryption_algorithm == before.encryption_algorithm
    # The values, as pyarrow reads them from the uniform file (the same rows in every file).
    table = pq.read_table(
        file_of("uniform_encryption"),
        decryption_properties=pe.create_decryption_properties(FOOTER_KEY),
    )
    found = filters(dst, keys)
    for column, physical in FLAT.items():
        values = table.column(column).combine_chunks().cast(STORAGE[physical])  # int32: a TIME
        hashes = pb.hash_values(values.to_numpy(zero_copy_only=False), physical)
        ours = pb.SplitBlockBloomFilter(256)
        ours.insert_hashes(hashes)
        assert found[(0, column)].to_bytes() == ours.to_bytes(), column
    # The encrypted columns' filters are two GCM modules (length, nonce, tag each), the
    # others a plaintext header and bitset.
    plaintext = len(pb.serialize_bloom_filter(pb.SplitBlockBloomFilter(256)))
    with pb.BloomFilterReader(dst, decryption=keys) as reader:
        for chunk in reader.row_group(0):
            if chunk.path not in ALL:  # BOOLEAN: never given a filter
                continue
            overhead = 2 * (4 + 12 + 16) if chunk.encrypted else 0
            assert chunk.bloom_filter_length == plaintext + overhead, chunk.path
            if not chunk.encrypted:
                at = chunk.bloom_filter_offset
                assert new[at : at + plaintext] == pb.serialize_bloom_filter(found[(0, chunk.path)])


def test_a_parquet_testing_filter_rebuilt_is_parquet_mr_s(tmp_path: Path) -> None:
    src = file_of("encrypt_columns_and_footer_bloom_filter")
    dst = tmp_path / "out.parquet"
    keys = keys_of(src.name)
    before = filters(src, keys)
    sizes = {f.num_bytes for f in before.values()}
    assert len(sizes) == 1
    report = pb.rewrite_bloom_filters(
        src, dst, columns="existing", num_bytes=sizes.pop(), decryption=keys
    )
    assert report.filters_removed == 0 and len(report.filters_written) == len(before)
    after = filters(dst, keys)
    assert {k: f.to_bytes() for k, f in after.items()} == {
        k: f.to_bytes() for k, f in before.items()
    }
    # Removing them leaves none, the rest of the file readable.
    pb.rewrite_bloom_filters(src, dst, remove="all", decryption=keys)
    assert filters(dst, keys) == {}
    table = pq.read_table(
        dst,
        columns=["int32_field"],
        decryption_properties=pe.create_decryption_properties(FOOTER_KEY),
    )
    assert table.column(0).to_pylist() == list(range(2000))


@pytest.fixture(scope="module")
def java_reader(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    if shutil.which("javac") is None:
        pytest.skip(skips.NO_JAVAC)
    workdir = tmp_path_factory.mktemp("java-reader")
    classpath = f"{pyspark_jars()}/*"
    source = Path(__file__).with_name("ParquetJavaEncryptedReader.java")
    done = subprocess.run(
        ["javac", "-d", str(workdir), "-cp", classpath, str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return ["java", "-cp", f"{workdir}:{classpath}", "ParquetJavaEncryptedReader"]


def java_read(java_reader: list[str], path: Path, name: str) -> dict[str, int]:
    _, _, mode, prefix, stored = CONFIGS[name]
    supplied = prefix if prefix != "-" and stored == "false" else "-"
    column_keys = (
        [f"{c}={k.decode()}" for c, k in COLUMN_KEYS_JAVA.items()] if mode == "columns" else []
    )
    run = subprocess.run(
        [*java_reader, str(path), FOOTER_KEY.decode(), supplied, *column_keys, "--",
         "id", "name", "x", "k"],
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    words = run.stdout.split()
    return {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}


COLUMN_KEYS_JAVA = {"id": b"1234567890123450", "name": b"1234567890123451"}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_parquet_java_reads_the_rewritten_files(
    written: dict[str, Path], java_reader: list[str], name: str, tmp_path: Path
) -> None:
    src = written[name]
    keys = keys_for(name)
    resized = tmp_path / "resized.parquet"
    report = pb.rewrite_bloom_filters(
        src, resized, columns=["id", "name", "x", "k"], fpp=0.001, decryption=keys
    )
    groups = len({rg for rg, _, _ in report.filters_written})
    counts = java_read(java_reader, resized, name)
    assert counts == {
        "rows": 30_000, "filters": 4 * groups, "lookups": 4 * 30_000, "missing": 0, "absent": 0,
    }  # fmt: skip
    # Our reader agrees: the filters are the new sizes, and hold every value.
    found = filters(resized, keys)
    for rg, column, num_bytes in report.filters_written:
        assert found[(rg, column)].num_bytes == num_bytes
    removed = tmp_path / "removed.parquet"
    report = pb.rewrite_bloom_filters(src, removed, remove=["id", "x"], decryption=keys)
    assert report.filters_removed == 2 * groups and report.filters_kept == 2 * groups
    counts = java_read(java_reader, removed, name)
    assert counts == {
        "rows": 30_000, "filters": 2 * groups, "lookups": 2 * 30_000, "missing": 0,
        "absent": 2 * groups,
    }  # fmt: skip


@pytest.mark.parametrize(
    "options",
    [{}, {"uniform": True}, {"plaintext_footer": True}, {"algorithm": "AES_GCM_CTR_V1"}],
    ids=["columns", "uniform", "plaintext-footer", "ctr"],
)
def test_pyarrow_reads_back_its_rewritten_files(options: dict[str, object], tmp_path: Path) -> None:
    src = pyarrow_files.write(tmp_path / "in.parquet", **options)  # type: ignore[arg-type]
    dst = tmp_path / "out.parquet"
    keys = DecryptionKeys.from_kms(InServerWrapKms(pyarrow_files.MASTER_KEYS))
    pb.rewrite_bloom_filters(src, dst, columns=["a", "b", "c"], decryption=keys)
    factory = pe.CryptoFactory(lambda config: InServerWrapKms(pyarrow_files.MASTER_KEYS))
    props = factory.file_decryption_properties(
        pe.KmsConnectionConfig(), pe.DecryptionConfiguration()
    )
    table = pq.read_table(dst, decryption_properties=props)
    assert table.equals(pyarrow_files.table())
    found = filters(dst, DecryptionKeys.from_kms(InServerWrapKms(pyarrow_files.MASTER_KEYS)))
    rows = pyarrow_files.ROW_GROUP
    for rg in range(pyarrow_files.ROWS // rows):
        part = table.slice(rg * rows, rows)
        for column, physical in (("a", "INT64"), ("b", "BYTE_ARRAY"), ("c", "DOUBLE")):
            values = part.column(column).to_numpy(zero_copy_only=False)
            assert found[(rg, column)].find_hashes(pb.hash_values(values, physical)).all()


def test_refused_without_keys_or_with_some_missing(tmp_path: Path) -> None:
    dst = tmp_path / "out.parquet"
    for name in ("encrypt_columns_and_footer", "encrypt_columns_plaintext_footer"):
        with pytest.raises(UnsupportedFileError, match="decryption="):
            pb.rewrite_bloom_filters(file_of(name), dst, columns=["int32_field"])
        only_one = DecryptionKeys(FOOTER_KEY, {"double_field": COLUMN_KEYS["double_field"]})
        with pytest.raises(MissingKeyError, match="key of every encrypted column") as err:
            pb.rewrite_bloom_filters(
                file_of(name), dst, columns=["int32_field"], decryption=only_one
            )
        assert err.value.column == "float_field"
        with pytest.raises(MissingKeyError, match="footer"):
            pb.rewrite_bloom_filters(
                file_of(name), dst, columns=["int32_field"],
                decryption=DecryptionKeys(column_keys=COLUMN_KEYS),
            )  # fmt: skip
    with pytest.raises(DecryptionError, match="not encrypted"):
        plain = tmp_path / "plain.parquet"
        pq.write_table(pa.table({"a": [1, 2]}), plain)
        pb.rewrite_bloom_filters(plain, dst, columns=["a"], decryption=keys_of(""))
    assert not dst.exists()
    report = pb.rewrite_bloom_filters(
        plain, dst, columns=["a"],
        decryption=DecryptionKeys(FOOTER_KEY, allow_plaintext_files=True),
    )  # fmt: skip
    assert dst.read_bytes()[-4:] == b"PAR1" and len(report.filters_written) == 1


def test_wrong_keys_fail_before_anything_is_written(tmp_path: Path) -> None:
    dst = tmp_path / "out.parquet"
    src = file_of("encrypt_columns_and_footer")
    wrong_column = DecryptionKeys(FOOTER_KEY, {**COLUMN_KEYS, "float_field": b"x" * 16})
    with pytest.raises(DecryptionError, match="column metadata") as err:
        pb.rewrite_bloom_filters(src, dst, columns=["int32_field"], decryption=wrong_column)
    assert err.value.column == "float_field" and err.value.source == str(src)
    with pytest.raises(DecryptionError, match="footer"):
        pb.rewrite_bloom_filters(
            src, dst, columns=["int32_field"], decryption=DecryptionKeys(b"y" * 16, COLUMN_KEYS)
        )
    with pytest.raises(DecryptionError, match="footer"):
        pb.rewrite_bloom_filters(
            file_of("encrypt_columns_and_footer_aad"), dst, columns=["int32_field"],
            decryption=DecryptionKeys(FOOTER_KEY, COLUMN_KEYS, aad_prefix=b"wrong"),
        )  # fmt: skip
    assert not dst.exists()


def test_tampered_pages_of_a_column_to_filter(tmp_path: Path) -> None:
    """A filter is built from pages whose GCM modules authenticate: a flipped byte in them is
    a located error, and nothing is written."""
    src = file_of("encrypt_columns_and_footer")
    keys = keys_of(src.name)
    with pb.BloomFilterReader(src, decryption=keys) as reader:
        chunk = next(c for c in reader.row_group(0) if c.path == "double_field")
    data = bytearray(src.read_bytes())
    # A byte of the first page header's ciphertext; the high byte of its length prefix.
    for at, error in (
        (chunk.data_page_offset + 20, DecryptionError),
        (chunk.data_page_offset + 3, CorruptFileError),
    ):
        bad = tmp_path / "bad.parquet"
        tampered = bytearray(data)
        tampered[at] ^= 0x40
        bad.write_bytes(bytes(tampered))
        dst = tmp_path / "out.parquet"
        with pytest.raises(error) as err:
            pb.rewrite_bloom_filters(bad, dst, columns=["double_field"], decryption=keys)
        assert err.value.column == "double_field" and err.value.offset is not None
        assert not dst.exists()


def test_tampered_output_is_detected(tmp_path: Path) -> None:
    src = file_of("encrypt_columns_and_footer")
    keys = keys_of(src.name)
    dst = tmp_path / "out.parquet"
    pb.rewrite_bloom_filters(src, dst, columns=["double_field", "int32_field"], decryption=keys)
    with pb.BloomFilterReader(dst, decryption=keys) as reader:
        chunk = next(c for c in reader.row_group(0) if c.path == "double_field")
    data = dst.read_bytes()
    for at in (
        chunk.bloom_filter_offset + 10,
        chunk.bloom_filter_offset + chunk.bloom_filter_length - 3,
    ):
        tampered = bytearray(data)
        tampered[at] ^= 1
        dst.write_bytes(bytes(tampered))
        with (
            pb.BloomFilterReader(dst, decryption=keys) as reader,
            pytest.raises(DecryptionError, match="Bloom filter") as err,
        ):
            reader.filter(0, "double_field")
        assert err.value.column == "double_field"
    tampered = bytearray(data)
    tampered[-20] ^= 1  # in the encrypted footer
    dst.write_bytes(bytes(tampered))
    with pytest.raises(DecryptionError, match="footer"):
        pb.BloomFilterReader(dst, decryption=keys)


def test_a_moved_filter_moves_its_encrypted_metadata(tmp_path: Path) -> None:
    """The old filters are cut and every filter kept written again after the pages: removing
    the first moves the second, whose column's encrypted metadata (with its filter's offset)
    is encrypted again."""
    src = file_of("encrypt_columns_and_footer_bloom_filter")
    keys = keys_of(src.name)
    dst = tmp_path / "out.parquet"
    report = pb.rewrite_bloom_filters(
        src, dst, columns=["int32_field"], remove=["double_field"], decryption=keys
    )
    assert report.filters_kept == 1 and report.filters_removed == 1
    before, after = filters(src, keys), filters(dst, keys)
    assert set(after) == {(0, "float_field"), (0, "int32_field")}
    assert after[(0, "float_field")].to_bytes() == before[(0, "float_field")].to_bytes()
    with (
        pb.BloomFilterReader(src, decryption=keys) as old,
        pb.BloomFilterReader(dst, decryption=keys) as new,
    ):
        offsets = {c.path: c.bloom_filter_offset for c in old.row_group(0)}
        moved = {c.path: c.bloom_filter_offset for c in new.row_group(0)}
    assert moved["double_field"] is None and moved["float_field"] < offsets["float_field"]


def test_external_key_material_is_refused(tmp_path: Path) -> None:
    dst = tmp_path / "out.parquet"
    with pytest.raises(UnsupportedFileError, match="key material is stored outside"):
        pb.rewrite_bloom_filters(
            file_of("external_key_material_java"),
            dst,
            columns=["int32_field"],
            decryption=DecryptionKeys.from_kms(InServerWrapKms()),
        )
    assert not dst.exists()


def test_a_ctr_page_module_that_claims_too_much(tmp_path: Path) -> None:
    """The length prefix of a CTR page module (not authenticated: CTR has no tag) is checked
    against the chunk before anything is read or allocated by it."""
    src = file_of("encrypt_columns_and_footer_ctr")
    keys = keys_of(src.name)
    with pb.BloomFilterReader(src, decryption=keys) as reader:
        chunk = next(c for c in reader.row_group(0) if c.path == "double_field")
    data = bytearray(src.read_bytes())
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    header_module = int.from_bytes(data[start : start + 4], "little")
    body = start + 4 + header_module  # the first page's body module, CTR-encrypted
    data[body + 3] = 0x7F  # a length of about 2 GB
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    dst = tmp_path / "out.parquet"
    with pytest.raises(CorruptFileError, match="claims") as err:
        pb.rewrite_bloom_filters(bad, dst, columns=["double_field"], decryption=keys)
    assert err.value.column == "double_field" and err.value.offset == start
    assert not dst.exists()


@pytest.mark.parametrize("batch", [1, 2, 256])
def test_filters_sealed_in_batches_land_where_the_footer_says(
    batch: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The encrypted rewrite seals and writes its new filters in batches (``SEAL_BATCH_*``):
    across batch ends, kept filters between new ones, and the plaintext column's filters
    among the encrypted ones', every filter lands where the new footer says, and is the
    filter the same rewrite builds for the same rows of a plaintext file."""
    from parquet_bloom._rewrite import output

    monkeypatch.setattr(output, "SEAL_BATCH_FILTERS", batch)
    keys = DecryptionKeys.from_kms(InServerWrapKms(pyarrow_files.MASTER_KEYS))
    plain = tmp_path / "plain.parquet"
    pq.write_table(pyarrow_files.table(), plain, row_group_size=pyarrow_files.ROW_GROUP)
    encrypted = pyarrow_files.write(tmp_path / "encrypted.parquet")
    for step, columns in enumerate((["a", "c"], ["b"], ["a", "b", "c"])):
        for src, dst, decryption in (
            (plain, tmp_path / f"plain{step}.parquet", None),
            (encrypted, tmp_path / f"encrypted{step}.parquet", keys),
        ):
            report = pb.rewrite_bloom_filters(src, dst, columns=columns, decryption=decryption)
            assert report.filters_kept == (6 if step == 1 else 0)
        plain, encrypted = tmp_path / f"plain{step}.parquet", tmp_path / f"encrypted{step}.parquet"
        expected = {key: f.to_bytes() for key, f in filters(plain, None).items()}
        assert {key: f.to_bytes() for key, f in filters(encrypted, keys).items()} == expected
        assert len(expected) == (9 if step else 6)
        with pb.BloomFilterReader(encrypted, decryption=keys) as reader:
            offsets = [
                c.bloom_filter_offset
                for rg in range(reader.num_row_groups)
                for c in reader.row_group(rg)
                if c.bloom_filter_offset is not None
            ]
        assert offsets == sorted(offsets)  # in (row group, column) order, as in any rewrite
    factory = pe.CryptoFactory(lambda config: InServerWrapKms(pyarrow_files.MASTER_KEYS))
    props = factory.file_decryption_properties(pe.KmsConnectionConfig())
    assert pq.read_table(encrypted, decryption_properties=props).equals(pyarrow_files.table())


@pytest.mark.parametrize("fail_at", [0, 2, 5])
def test_a_seal_failing_mid_batch_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    keys = DecryptionKeys.from_kms(InServerWrapKms(pyarrow_files.MASTER_KEYS))
    src = pyarrow_files.write(tmp_path / "src.parquet")
    calls: list[tuple[int, int]] = []
    original = encryption.EncryptedRewrite.seal_filter

    def seal(self: Any, key: tuple[int, int], header: bytes, bitset: Any) -> Any:
        calls.append(key)
        if len(calls) == fail_at + 1:
            raise OSError("boom")
        return original(self, key, header, bitset)

    monkeypatch.setattr(encryption.EncryptedRewrite, "seal_filter", seal)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(OSError, match="boom"):
        pb.rewrite_bloom_filters(src, out / "dst.parquet", columns=["a", "b", "c"], decryption=keys)
    assert os.listdir(out) == []
    assert calls == sorted(calls)

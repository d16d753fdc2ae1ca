"""parquet-java (1.17, the jars pyspark ships) writes encrypted files with Bloom filters in every
column, through ``ParquetJavaEncryptedWriter.java`` compiled for the run, with explicit keys:
both algorithms, both footer modes, per-column and uniform keys, AAD prefixes stored and not.

The oracle: the rows are known (id = i, name = "name_" + i, x = i * 0.25, k = i % 1000, written
in order), so each row group's values are; every one is found by our probe of the decrypted
filter (no false negative), and our filter of them at the file's size equals parquet-java's bit
for bit.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import parquet_bloom as pb
from parquet_bloom import BloomFilterWarning, DecryptionKeys
from parquet_bloom.errors import MissingKeyError
from tests import skips

ROWS = 30_000
FOOTER_KEY = b"0123456789012345"
COLUMN_KEYS = {"id": b"1234567890123450", "name": b"1234567890123451"}
# name -> (algorithm, footer, keys, AAD prefix, store the prefix)
CONFIGS = {
    "gcm-columns": ("AES_GCM_V1", "encrypted", "columns", "-", "false"),
    "ctr-plaintext-footer": ("AES_GCM_CTR_V1", "plaintext", "columns", "-", "false"),
    "gcm-uniform-prefix-stored": ("AES_GCM_V1", "encrypted", "uniform", "tester", "true"),
    "gcm-columns-prefix-supplied": ("AES_GCM_V1", "encrypted", "columns", "tester", "false"),
    # Under a plaintext footer, the columns' metadata encrypted with the footer key too.
    "gcm-uniform-plaintext-footer": ("AES_GCM_V1", "plaintext", "uniform", "-", "false"),
}


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("javac") is None:
        pytest.skip(skips.NO_JAVAC)
    workdir = tmp_path_factory.mktemp("parquet-java")
    classpath = f"{pyspark_jars()}/*"
    source = Path(__file__).with_name("ParquetJavaEncryptedWriter.java")
    done = subprocess.run(
        ["javac", "-d", str(workdir), "-cp", classpath, str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    out = {}
    for name, args in CONFIGS.items():
        path = workdir / f"{name}.parquet"
        run = subprocess.run(
            ["java", "-cp", f"{workdir}:{classpath}", "ParquetJavaEncryptedWriter", str(path),
             str(ROWS), *args],
            capture_output=True,
            text=True,
            timeout=600,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        out[name] = path
    return out


def keys_for(name: str, **kwargs: Any) -> DecryptionKeys:
    _, _, mode, prefix, stored = CONFIGS[name]
    if prefix != "-" and stored == "false":
        kwargs.setdefault("aad_prefix", prefix.encode())
    columns = COLUMN_KEYS if mode == "columns" else None
    return DecryptionKeys(FOOTER_KEY, columns, **kwargs)


def values(column: str, start: int, stop: int) -> np.ndarray:
    i = np.arange(start, stop)
    if column == "id":
        return i.astype(np.int64)
    if column == "x":
        return i * 0.25
    if column == "k":
        return (i % 1000).astype(np.int32)
    return np.array([f"name_{n}" for n in i], dtype=object)


PHYSICAL = {"id": "INT64", "name": "BYTE_ARRAY", "x": "DOUBLE", "k": "INT32"}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_value_in_its_row_groups_filter(written: dict[str, Path], name: str) -> None:
    algorithm, footer, mode, _, _ = CONFIGS[name]
    with pb.BloomFilterReader(written[name], decryption=keys_for(name)) as reader:
        assert reader.encryption_algorithm == algorithm
        assert reader.encrypted_footer == (footer == "encrypted")
        assert "parquet-mr version 1.17" in (reader.metadata.created_by or "")
        assert reader.num_row_groups >= 3
        filters, failed = reader.filters_with_errors()
        assert failed == {}
        assert len(filters) == 4 * reader.num_row_groups
        start = 0
        for rg in range(reader.num_row_groups):
            stop = start + reader.row_group(rg)[0].num_values
            for chunk in reader.row_group(rg):
                encrypted = mode == "uniform" or chunk.path in COLUMN_KEYS
                assert chunk.encrypted == encrypted
                hashes = pb.hash_values(values(chunk.path, start, stop), PHYSICAL[chunk.path])
                f = filters[(rg, chunk.path)]
                assert f.find_hashes(hashes).all(), (rg, chunk.path)
                ours = pb.SplitBlockBloomFilter(f.num_bytes)
                ours.insert_hashes(hashes)
                assert ours.to_bytes() == f.to_bytes(), (rg, chunk.path)
            # Pruning by an encrypted column finds the row group of each value.
            for i in (start, (start + stop) // 2, stop - 1):
                assert rg in reader.row_groups_might_contain("id", [i])
                assert rg in reader.row_groups_might_contain("name", [f"name_{i}"])
            start = stop
        assert start == ROWS
        # Filters this size (16 KiB for ~8,000 values) exclude most other row groups.
        kept = [len(reader.row_groups_might_contain("id", [i])) for i in range(0, ROWS, 97)]
        assert sum(kept) < 1.1 * len(kept)


def test_a_missing_column_key(written: dict[str, Path]) -> None:
    name = "gcm-columns"
    only_id = DecryptionKeys(FOOTER_KEY, {"id": COLUMN_KEYS["id"]})
    with pb.BloomFilterReader(written[name], decryption=only_id) as reader:
        groups = range(reader.num_row_groups)
        filters, failed = reader.filters_with_errors()
        assert set(failed) == {(rg, "name") for rg in groups}
        assert all(isinstance(e, MissingKeyError) for e in failed.values())
        assert {k for k in filters if k[1] != "name"} == {
            (rg, c) for rg in groups for c in ("id", "x", "k")
        }
        with pytest.warns(BloomFilterWarning, match="no key was given"):
            assert reader.row_groups_might_contain("name", ["name_5"]) == list(groups)


def test_the_wrong_aad_prefix(written: dict[str, Path]) -> None:
    from parquet_bloom.errors import DecryptionError

    path = written["gcm-columns-prefix-supplied"]
    with pytest.raises(MissingKeyError, match="AAD prefix"):
        pb.BloomFilterReader(path, decryption=DecryptionKeys(FOOTER_KEY, COLUMN_KEYS))
    with pytest.raises(DecryptionError, match="footer"):
        pb.BloomFilterReader(
            path, decryption=keys_for("gcm-columns-prefix-supplied", aad_prefix=b"tester2")
        )


@pytest.mark.parametrize("name", ["gcm-columns", "ctr-plaintext-footer"])
def test_check_file(written: dict[str, Path], name: str) -> None:
    """Plaintext columns are checked against their values (pyarrow reads them: with the footer
    key when the footer is encrypted), encrypted ones by their decrypted filter alone."""
    report = pb.check_file(written[name], decryption=keys_for(name))
    assert report.ok, report.violations
    by_column: dict[str, list[Any]] = {}
    for check in report.chunks:
        by_column.setdefault(check.column, []).append(check)
    assert set(by_column) == {"id", "name", "x", "k"}
    for column in ("x", "k"):
        assert all(c.missing == 0 and c.exact for c in by_column[column]), column
        assert sum(c.num_values for c in by_column[column]) == ROWS
    for column in ("id", "name"):
        assert all(c.num_values is None and "encrypted" in c.notes[0] for c in by_column[column])
    inspected = pb.inspect_file(written[name], decryption=keys_for(name))
    assert len(inspected.filters) == len(report.chunks)
    assert all(c.error is None and c.num_bytes for c in inspected.filters)

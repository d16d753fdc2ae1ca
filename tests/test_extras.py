"""A user's environment, not a bug: a missing extra names the pip line that installs it
(MissingExtraError), and a store without credentials or without a server behind its endpoint
says what to do (FileReadError with the advice of parquet_bloom._io.advice)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom._io import advice
from parquet_bloom.errors import FileReadError, MissingExtraError

MISSING = [
    ("deltalake", "import parquet_bloom.delta", "delta"),
    ("pyiceberg", "import parquet_bloom.iceberg", "iceberg"),
    ("pyspark", "import parquet_bloom.spark", "spark"),
    ("s3fs", "pb.BloomFilterReader('s3://bucket/key.parquet')", "s3"),
    ("fsspec", "pb.BloomFilterReader('gs://bucket/key.parquet')", "gcs"),
    ("hudi", "from parquet_bloom._hudi.table import base_files; base_files('t')", "hudi"),
]


@pytest.mark.parametrize(("package", "call", "extra"), MISSING)
def test_a_missing_extra_names_the_pip_line(package: str, call: str, extra: str) -> None:
    # The package made unimportable in a fresh interpreter (None in sys.modules).
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        "import parquet_bloom as pb\n"
        "from parquet_bloom.errors import MissingExtraError\n"
        "try:\n"
        f"    {call}\n"
        "except MissingExtraError as e:\n"
        "    print(e.package, e.extra, '|', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert f"pip install 'parquet-bloom[{extra}]'" in out.stdout
    assert out.stdout.split("|")[0].split()[1] == extra


def test_the_encryption_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from parquet_bloom._crypto import cipher

    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'parquet-bloom\[encryption\]'"):
        cipher.decrypt_gcm(bytes(28), bytes(16), b"", module_type=0)


def test_the_clickhouse_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from parquet_bloom._clickhouse import blocks

    monkeypatch.setitem(sys.modules, "lz4.block", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'parquet-bloom\[clickhouse\]'"):
        blocks._decode(blocks.LZ4, b"", 0, "part", 0)


def test_a_table_directory_without_its_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from parquet_bloom._tables.directories import list_live_files

    (tmp_path / "_delta_log").mkdir()
    pq.write_table(pa.table({"id": [1]}), tmp_path / "part-0.parquet")
    monkeypatch.setitem(sys.modules, "deltalake", None)
    with pytest.raises(MissingExtraError) as caught:
        list_live_files(str(tmp_path))
    assert str(caught.value) == (
        f"reading the live files of the Delta table at {tmp_path} needs deltalake: "
        "pip install 'parquet-bloom[delta]'"
    )
    assert isinstance(caught.value, ImportError)


def test_missing_credentials_say_what_to_do(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = s3.bucket()
    options = {k: v for k, v in s3.storage_options.items() if k not in ("key", "secret")}
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(FileReadError) as caught:
        pb.BloomFilterReader(f"s3://{bucket}/x.parquet", storage_options=options)
    assert str(caught.value).endswith(f"; {advice.CREDENTIALS} (file s3://{bucket}/x.parquet)")


def test_an_unreachable_endpoint_says_what_to_do(s3: Any) -> None:
    options = {**s3.storage_options, "endpoint_url": "http://127.0.0.1:9"}  # nothing listens
    with pb.request_limits(retries=0, timeout=5), pytest.raises(FileReadError) as caught:
        pb.BloomFilterReader("s3://bucket/x.parquet", storage_options=options)
    assert advice.UNREACHABLE in str(caught.value)


def test_advice_is_only_for_what_a_user_fixes() -> None:
    assert advice.what_to_do(ConnectionResetError("reset by peer")) is None
    assert advice.what_to_do(OSError("Generic S3 error: 503 Slow Down")) is None
    wrapped = OSError("cannot read")
    wrapped.__cause__ = ConnectionRefusedError("[Errno 111] Connection refused")
    assert advice.what_to_do(wrapped) == advice.UNREACHABLE
    refused = Exception("An error occurred (InvalidAccessKeyId) when calling GetObject")
    assert advice.what_to_do(refused) == advice.REFUSED

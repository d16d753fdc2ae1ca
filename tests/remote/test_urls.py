"""URLs on a real S3 server (moto, on 127.0.0.1) and an HTTP server with Range support: the
reader by URL through the standard chain and through storage_options, prune over an s3:// prefix
(listed once, no HEAD per file), a table directory listed to its Parquet files only, and the
audit and testing helpers on URLs. Request counts are the server's own."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

import parquet_bloom as pb
from parquet_bloom import _audit as audit
from parquet_bloom.testing import assert_bloom_filters_valid
from tests import writers

FILES = 3


def _table(seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 10**9, writers.ROWS)
    return pa.table({"id": ids, "s": [f"k{v}" for v in ids]})


@pytest.fixture(scope="module")
def local_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("urls")
    files = [writers.write_pyarrow(root / f"part-{i}.parquet", _table(i)) for i in range(FILES)]
    return [*files, writers.write_duckdb(root / "duckdb.parquet")]


@pytest.fixture
def table_url(s3: Any, local_files: list[Path]) -> str:
    """A dataset as Spark leaves one on S3: part files and entries that are not data (a
    ``_delta_log/`` would make it a Delta table, read as one: tests/tables/test_directories)."""
    bucket = s3.bucket()
    for path in local_files[:FILES]:
        s3.upload(path, f"s3://{bucket}/table/day=1/{path.name}")
    not_data = local_files[FILES]  # any bytes: these must never be opened
    for key in ("_temporary/0/x.json", "_SUCCESS", "day=1/.part-0.parquet.crc", ".hoodie/x"):
        s3.upload(not_data, f"s3://{bucket}/table/{key}")
    return f"s3://{bucket}/table/"


def test_the_reader_by_url_through_the_environment_and_storage_options(
    s3: Any, s3_requests: Any, local_files: list[Path]
) -> None:
    url = s3.upload(local_files[0], f"s3://{s3.bucket()}/one.parquet")
    s3_requests.reset()
    # No options: credentials and endpoint from the environment (AWS_ENDPOINT_URL...).
    with pb.BloomFilterReader(url) as reader:
        bloom = reader.filter(0, "id")
        assert bloom is not None and reader.columns == ["id", "s"]
        plain = (reader.requests, reader.bytes_read)
    assert s3_requests.count() == plain[0]
    s3_requests.reset()
    with pb.BloomFilterReader(url, storage_options=s3.storage_options) as reader:
        assert reader.filter(0, "id") == bloom
        assert (reader.requests, reader.bytes_read) == plain
    assert s3_requests.count() == plain[0]
    # A size known beforehand: no HEAD.
    s3_requests.reset()
    size = local_files[0].stat().st_size
    with pb.BloomFilterReader(url, storage_options=s3.storage_options, size=size) as reader:
        assert reader.filter(0, "id") == bloom
    assert s3_requests.count("HEAD") == 0
    assert s3_requests.count() == reader.requests


def test_prune_over_a_prefix_lists_once_and_makes_no_head(
    s3: Any, s3_requests: Any, table_url: str, local_files: list[Path]
) -> None:
    needle = _table(1).column("id")[123].as_py()
    expr = pc.field("id") == needle
    s3_requests.reset()
    result = pb.prune(table_url, expr, storage_options=s3.storage_options)
    listings = [r for r in s3_requests.list() if r.method == "GET" and not r.key]
    assert len(listings) == 1
    assert s3_requests.count("HEAD") == 0
    assert result.report.files == FILES
    # Ours: one GET a file (footer and filters in one tail read). pyarrow's: the first file's
    # footer for the dataset's schema (the pruned fragments are made from our footer, so
    # pyarrow reads the others' only when the scan does).
    assert result.report.reads == FILES
    gets = [r for r in s3_requests.list() if r.method == "GET" and r.key]
    assert len(gets) == FILES + 1
    expected = ds.dataset([str(p) for p in local_files[:FILES]], format="parquet").to_table(
        filter=expr
    )
    assert result.dataset.to_table(filter=expr).equals(expected)
    assert expected.num_rows >= 1
    assert result.report.files_skipped == FILES - 1


def test_check_inspect_and_testing_on_urls(
    s3: Any, s3_requests: Any, local_files: list[Path]
) -> None:
    url = s3.upload(local_files[FILES], f"s3://{s3.bucket()}/d/duckdb.parquet")
    s3_requests.reset()
    report = audit.inspect_file(url, storage_options=s3.storage_options)
    assert report.path == url and report.filters
    assert report.requests == s3_requests.count()
    s3_requests.reset()
    checked = audit.check_file(url, storage_options=s3.storage_options)
    assert checked.ok and checked.requests == s3_requests.count()
    assert_bloom_filters_valid(url, storage_options=s3.storage_options)


def test_https_through_the_http_server(http_server: Any, local_files: list[Path]) -> None:
    shutil.copy(local_files[0], http_server.root / "h.parquet")
    url = http_server.url("h.parquet")
    http_server.requests.reset()
    with pb.BloomFilterReader(url) as reader:
        assert reader.filter(0, "id") is not None
        assert http_server.requests.count("GET") == reader.reads
    report = audit.inspect_file(url)
    assert report.path == url and len(report.filters) == 2 * report.num_row_groups


def test_check_by_url_makes_no_size_lookup(
    s3: Any, s3_requests: Any, local_files: list[Path]
) -> None:
    # The reader learns the size from its suffix read; the values' source is given it.
    url = s3.upload(local_files[FILES], f"s3://{s3.bucket()}/duck.parquet")
    s3_requests.reset()
    checked = pb.check_file(url)
    assert checked.ok
    assert s3_requests.count("HEAD") == 0
    assert checked.requests == s3_requests.count()

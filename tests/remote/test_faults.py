"""Faults on the way to the bytes: a server that is not there, one that sends short bodies, one
that stalls, one that fails a file's reads. Each is a located error (or, in prune, a file whose
row groups are kept with a warning), and nothing waits past a timeout."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

import parquet_bloom as pb
from parquet_bloom import cli
from parquet_bloom.testing import assert_bloom_filters_valid
from tests import writers


@pytest.fixture(scope="module")
def parquet_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ids = np.arange(writers.ROWS, dtype=np.int64) * 7919
    return writers.write_pyarrow(
        tmp_path_factory.mktemp("faults") / "f.parquet", pa.table({"id": ids})
    )


def test_a_short_body_is_a_located_read_error(http_short_server: Any, parquet_file: Path) -> None:
    (http_short_server.root / "short.parquet").write_bytes(parquet_file.read_bytes())
    url = http_short_server.url("short.parquet")
    with pytest.raises(pb.FileReadError, match="cannot read") as caught:
        pb.BloomFilterReader(url, storage_options={"skip_instance_cache": True})
    assert caught.value.source == url


def test_a_stalled_server_times_out_as_a_located_read_error(
    http_stall_server: Any, parquet_file: Path
) -> None:
    (http_stall_server.root / "stall.parquet").write_bytes(parquet_file.read_bytes())
    url = http_stall_server.url("stall.parquet")
    options = {
        "skip_instance_cache": True,
        "client_kwargs": {"timeout": aiohttp.ClientTimeout(total=0.5)},
    }
    with pytest.raises(pb.FileReadError, match="Timeout") as caught:
        pb.BloomFilterReader(url, storage_options=options)
    assert caught.value.source == url


def test_an_unreachable_endpoint_is_a_located_read_error(s3: Any) -> None:
    options = {**s3.storage_options, "endpoint_url": "http://127.0.0.1:9"}
    options["config_kwargs"] = {"retries": {"max_attempts": 1}, "connect_timeout": 1}
    with pytest.raises(pb.FileReadError, match="cannot read") as caught:
        pb.BloomFilterReader("s3://nowhere/f.parquet", storage_options=options)
    assert caught.value.source == "s3://nowhere/f.parquet"


def test_prune_keeps_the_row_groups_of_a_file_it_cannot_read_and_warns(
    s3: Any, s3_faults: Any, tmp_path: Path
) -> None:
    bucket = s3.bucket()
    rng = np.random.default_rng(3)
    for i in range(3):
        ids = rng.integers(0, 2**40, writers.ROWS)
        local = writers.write_pyarrow(tmp_path / f"part-{i}.parquet", pa.table({"id": ids}))
        s3.upload(local, f"s3://{bucket}/t/part-{i}.parquet")
    dataset = ds.dataset(f"{bucket}/t/", format="parquet", filesystem=s3.arrow_fs())
    expr = pc.field("id") == -1  # in no file: every readable file is skipped
    # Every read of part-1 fails, retries included: our reads of it give up.
    s3_faults.fail("GET", path_contains="part-1.parquet", times=None, status=503)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pb.prune(dataset, expr)
    s3_faults.clear()
    assert [str(w.message) for w in caught if "part-1.parquet" in str(w.message)], caught
    assert all(issubclass(w.category, pb.BloomFilterWarning) for w in caught)
    kept = [Path(f.path).name for f in result.dataset.get_fragments()]
    assert kept == ["part-1.parquet"]
    assert result.report.files_skipped == 2
    assert result.dataset.to_table(filter=expr).num_rows == 0


# -- issue #27: a storage failure is never blamed on the file, and always says where ----------


def _upload_parts(s3: Any, tmp_path: Path, count: int) -> str:
    """``count`` small files under a new prefix; returns the prefix's URL."""
    bucket = s3.bucket()
    for i in range(count):
        ids = np.arange(writers.ROWS, dtype=np.int64) * 7919 + i
        local = writers.write_pyarrow(tmp_path / f"part-{i}.parquet", pa.table({"id": ids}))
        s3.upload(local, f"s3://{bucket}/t/part-{i}.parquet")
    return f"s3://{bucket}/t/"


def test_a_404_after_the_footer_was_read_is_a_read_error_not_a_violation(
    s3: Any, s3_faults: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _upload_parts(s3, tmp_path, 1) + "part-0.parquet"
    options = {"skip_instance_cache": True}
    # The footer (with the filters: one tail read) is the first GET; the values come after.
    s3_faults.fail("GET", nth=2, status=404, path_contains="part-0", times=None)
    with pytest.raises(pb.FileReadError, match="not found after it was read") as caught:
        pb.check_file(url, storage_options=options)
    assert caught.value.source == url
    assert caught.value.offset is not None
    assert re.search(r"\d+ bytes at offset \d+", str(caught.value)), caught.value

    s3_faults.clear()
    s3_faults.fail("GET", nth=2, status=404, path_contains="part-0", times=None)
    status = cli.main(["check", "--storage-option", "skip_instance_cache=true", url])
    err = capsys.readouterr()
    assert status == cli.EXIT_BAD_INPUT, err
    assert "VIOLATION" not in err.out and url in err.err, err

    s3_faults.clear()
    s3_faults.fail("GET", nth=2, status=404, path_contains="part-0", times=None)
    with pytest.raises(pb.FileReadError):  # an error of the run, not a failed assertion
        assert_bloom_filters_valid(url, storage_options=options)


def test_a_404_of_a_filter_read_over_https_is_a_read_error(
    http_server: Any, http_faults: Any, tmp_path: Path
) -> None:
    ids = np.arange(writers.ROWS, dtype=np.int64)
    writers.write_pyarrow(http_server.root / "gone.parquet", pa.table({"id": ids}))
    url = http_server.url("gone.parquet")
    # tail_size=8: the trailer, the footer, then the filters (the third GET).
    http_faults.fail("GET", nth=3, status=404, path_contains="gone.parquet", times=None)
    with pytest.raises(pb.FileReadError, match="not found after it was read") as caught:
        pb.check_file(url, tail_size=8)
    assert caught.value.source == url and caught.value.offset is not None


def test_an_object_missing_when_first_read_is_file_not_found_naming_its_url(s3: Any) -> None:
    url = f"s3://{s3.bucket()}/nothing/here.parquet"
    with pytest.raises(FileNotFoundError) as caught:
        pb.BloomFilterReader(url, storage_options={"skip_instance_cache": True})
    assert caught.value.filename == url
    assert url in str(caught.value)
    with pytest.raises(FileNotFoundError) as caught:
        pb.rewrite_bloom_filters(url, "unused.parquet", columns=["id"])
    assert caught.value.filename == url


def test_prune_keeps_a_file_deleted_since_the_listing_and_names_it(
    s3: Any, s3_faults: Any, tmp_path: Path
) -> None:
    prefix = _upload_parts(s3, tmp_path, 6)
    expr = pc.field("id") == -1  # in no file: every readable file is skipped
    # part-3 answers 404 to every read: deleted after the listing.
    s3_faults.fail("GET", path_contains="part-3.parquet", times=None, status=404)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pb.prune(prefix, expr, storage_options={"skip_instance_cache": True})
    s3_faults.clear()
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "part-3.parquet" in messages[0], messages
    assert [Path(f.path).name for f in result.dataset.get_fragments()] == ["part-3.parquet"]
    assert result.report.files_skipped == 5
    assert result.report.unreadable_files == (prefix + "part-3.parquet",)
    assert "part-3.parquet" in str(result.report)


def test_a_listing_that_fails_is_a_located_read_error(
    s3: Any, s3_faults: Any, tmp_path: Path
) -> None:
    prefix = _upload_parts(s3, tmp_path, 1)
    s3_faults.fail("GET", query_contains="list-type", times=None, status=500)
    with pytest.raises(pb.FileReadError, match="cannot list") as caught:
        pb.prune(prefix, pc.field("id") == 1, storage_options={"skip_instance_cache": True})
    assert caught.value.source == prefix


def test_a_size_look_up_over_https_that_fails_is_a_located_read_error(
    http_server: Any, http_faults: Any
) -> None:
    ids = np.arange(writers.ROWS, dtype=np.int64)
    writers.write_pyarrow(http_server.root / "looked-up.parquet", pa.table({"id": ids}))
    url = http_server.url("looked-up.parquet")
    http_faults.fail(None, path_contains="looked-up.parquet", times=None, status=503)
    with pytest.raises(pb.FileReadError, match="503") as caught:
        pb.prune(url, pc.field("id") == 1)
    assert caught.value.source == url
    assert not isinstance(caught.value, aiohttp.ClientError)


def test_a_listing_that_times_out_says_so_and_where(
    http_stall_server: Any, parquet_file: Path
) -> None:
    (http_stall_server.root / "slow.parquet").write_bytes(parquet_file.read_bytes())
    url = http_stall_server.url("slow.parquet")
    options = {
        "skip_instance_cache": True,
        "client_kwargs": {"timeout": aiohttp.ClientTimeout(total=0.5)},
    }
    with pytest.raises(pb.FileReadError, match="timed out") as caught:
        pb.prune(url, pc.field("id") == 1, storage_options=options)
    assert caught.value.source == url


def test_the_rewrites_source_look_up_is_a_located_read_error(
    s3: Any, s3_faults: Any, tmp_path: Path
) -> None:
    url = _upload_parts(s3, tmp_path, 1) + "part-0.parquet"
    s3_faults.fail("HEAD", path_contains="part-0", times=None, status=500)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(pb.FileReadError, match="cannot look up") as caught:
        pb.rewrite_bloom_filters(
            url, out / "r.parquet", columns=["id"], storage_options={"skip_instance_cache": True}
        )
    assert caught.value.source == url
    assert list(out.iterdir()) == []


def test_prune_keeps_the_first_file_too_when_it_is_gone(
    s3: Any, s3_faults: Any, tmp_path: Path
) -> None:
    # The dataset's schema comes from the first file's footer: gone, it comes from the next.
    prefix = _upload_parts(s3, tmp_path, 3)
    s3_faults.fail("GET", path_contains="part-0.parquet", times=None, status=404)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pb.prune(prefix, pc.field("id") == -1)
    s3_faults.clear()
    assert [Path(f.path).name for f in result.dataset.get_fragments()] == ["part-0.parquet"]
    assert result.report.unreadable_files == (prefix + "part-0.parquet",)
    assert len(caught) == 1 and "part-0.parquet" in str(caught[0].message)
    assert result.dataset.schema.field("id").type == pa.int64()

"""Faults on the way to the bytes: a server that is not there, one that sends short bodies, one
that stalls, one that fails a file's reads. Each is a located error (or, in prune, a file whose
row groups are kept with a warning), and nothing waits past a timeout."""

from __future__ import annotations

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

"""prune over a list of URLs is one dataset on one filesystem: URLs that resolve to equal
filesystems (fsspec's ``skip_instance_cache`` gives each URL its own instance, equal by class and
options) are one filesystem, on the S3 server and the HTTP server; URLs on filesystems that
differ are refused, naming both."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import parquet_bloom as pb
from tests import writers


def _table(seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 10**9, writers.ROWS)
    return pa.table({"id": ids, "s": [f"k{v}" for v in ids]})


@pytest.fixture(scope="module")
def two_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("two")
    return [writers.write_pyarrow(root / f"part-{i}.parquet", _table(i)) for i in range(2)]


NEEDLE = pc.field("id") == _table(1).column("id")[123].as_py()


def _pruned(urls: list[str], options: dict[str, Any] | None) -> tuple[pa.Table, pb.PruneReport]:
    result = pb.prune(urls, NEEDLE, storage_options=options)
    return result.dataset.to_table(filter=NEEDLE), result.report


def _same(a: tuple[pa.Table, pb.PruneReport], b: tuple[pa.Table, pb.PruneReport]) -> None:
    assert a[0].equals(b[0]) and a[0].num_rows >= 1
    assert (a[1].files, a[1].row_groups, a[1].row_groups_skipped) == (
        b[1].files,
        b[1].row_groups,
        b[1].row_groups_skipped,
    )
    assert a[1].row_groups_skipped > 0


def test_two_s3_urls_without_the_instance_cache(s3: Any, two_files: list[Path]) -> None:
    bucket = s3.bucket()
    urls = [s3.upload(p, f"s3://{bucket}/t/{p.name}") for p in two_files]
    cached = _pruned(urls, s3.storage_options)
    _same(_pruned(urls, {**s3.storage_options, "skip_instance_cache": True}), cached)


def test_two_http_urls_without_the_instance_cache(http_server: Any, two_files: list[Path]) -> None:
    for p in two_files:
        shutil.copy(p, http_server.root / f"skip-{p.name}")
    urls = [http_server.url(f"skip-{p.name}") for p in two_files]
    _same(_pruned(urls, {"skip_instance_cache": True}), _pruned(urls, None))


def test_urls_on_different_filesystems_are_refused_naming_both(
    s3: Any, http_server: Any, two_files: list[Path]
) -> None:
    s3_url = s3.upload(two_files[0], f"s3://{s3.bucket()}/mixed/{two_files[0].name}")
    shutil.copy(two_files[1], http_server.root / "mixed.parquet")
    http_url = http_server.url("mixed.parquet")
    with pytest.raises(ValueError, match="one filesystem") as caught:
        pb.prune([s3_url, http_url], NEEDLE)
    message = str(caught.value)
    assert s3_url in message and http_url in message
    with pytest.raises(ValueError, match="one filesystem") as caught:
        pb.prune([str(two_files[0]), http_url], NEEDLE)
    assert str(two_files[0]) in str(caught.value) and http_url in str(caught.value)


def test_no_paths_at_all() -> None:
    with pytest.raises(ValueError, match="no paths given"):
        pb.prune([], NEEDLE)

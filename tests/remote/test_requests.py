"""Request economy on a real S3 server (moto on 127.0.0.1, its recorder counting): the reader
on one file costs one GET when its tail read holds footer and filters, two when it does not,
no HEAD when the size is known and a suffix-range GET when it is not; prune over 20 files
costs one GET a file of ours. The HTTP server with Range support answers the suffix read too.
Counts are the servers' own, and exact."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom._io.source import REMOTE_TAIL_SIZE
from tests import writers

FILES = 20
ROWS = 40_000
ROW_GROUPS = 4
FILTERED = ("id", "s")


def _table(seed: int) -> pa.Table:
    ids = np.arange(seed * ROWS, (seed + 1) * ROWS, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "s": [f"key-{i}" for i in ids],
            "v": np.random.default_rng(seed).random(ROWS),
            "w": np.random.default_rng(seed + 1).random(ROWS),
        }
    )


def _write(path: Path, seed: int) -> Path:
    options = {c: {"ndv": ROWS // ROW_GROUPS, "fpp": 0.01} for c in FILTERED}
    pq.write_table(
        _table(seed), path, row_group_size=ROWS // ROW_GROUPS, bloom_filter_options=options
    )
    return path


@pytest.fixture(scope="module")
def local_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("requests")
    return [_write(root / f"part-{i:02d}.parquet", i) for i in range(FILES)]


@pytest.fixture(scope="module")
def duckdb_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return writers.write_duckdb(tmp_path_factory.mktemp("requests-duckdb") / "d.parquet")


def footer_size(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[-8:-4], "little")


def _filter_span(path: Path) -> tuple[int, int]:
    """Where the file's filters lie: from the first one's offset to the last one's end."""
    md = pq.ParquetFile(path).metadata
    spans = [
        (c.bloom_filter_offset, c.bloom_filter_offset + c.bloom_filter_length)
        for g in range(md.num_row_groups)
        for c in (md.row_group(g).column(j) for j in range(md.num_columns))
        if c.bloom_filter_offset is not None
    ]
    return min(s for s, _ in spans), max(e for _, e in spans)


def uploaded(s3: Any, s3_requests: Any, path: Path) -> str:
    """``path`` uploaded to a new bucket, the recorder reset: its URL."""
    url: str = s3.upload(path, f"s3://{s3.bucket()}/{path.name}")
    s3_requests.reset()
    return url


def read_alike(path: Path, filters: dict[tuple[int, str], Any]) -> bool:
    with pb.BloomFilterReader(path) as local:
        return bool(local.filters() == filters)


@pytest.mark.parametrize("size_known", [True, False])
def test_one_file_is_one_get_and_no_head(
    s3: Any, s3_requests: Any, local_files: list[Path], size_known: bool
) -> None:
    # The size known (a listing gave it): the tail's range by offsets. Unknown: a suffix
    # range, whose answer tells the size (Content-Range), instead of a HEAD first.
    path = local_files[0]
    size = path.stat().st_size
    url = uploaded(s3, s3_requests, path)
    given = size if size_known else None
    with pb.BloomFilterReader(url, size=given, storage_options=s3.storage_options) as reader:
        filters = reader.filters()
        assert len(filters) == ROW_GROUPS * len(FILTERED)
        assert (reader.requests, reader.reads) == (1, 1)
        assert reader.bytes_read == REMOTE_TAIL_SIZE < size
    [get] = s3_requests.list()
    suffix = f"bytes=-{REMOTE_TAIL_SIZE}"
    by_offsets = f"bytes={size - REMOTE_TAIL_SIZE}-{size - 1}"
    assert (get.method, get.range) == ("GET", by_offsets if size_known else suffix)
    assert read_alike(path, filters)


def test_a_suffix_read_longer_than_the_object_reads_it_whole(
    s3: Any, s3_requests: Any, local_files: list[Path]
) -> None:
    path = local_files[2]
    size = path.stat().st_size
    url = uploaded(s3, s3_requests, path)
    with pb.BloomFilterReader(
        url, storage_options=s3.storage_options, tail_size=size + 12345
    ) as reader:
        assert len(reader.filters()) == ROW_GROUPS * len(FILTERED)
        assert (reader.requests, reader.bytes_read) == (1, size)
    assert [(r.method, r.range) for r in s3_requests.list()] == [("GET", f"bytes=-{size + 12345}")]


def test_a_tail_that_misses_the_filters_costs_one_more_get_for_all_of_them(
    s3: Any, s3_requests: Any, local_files: list[Path]
) -> None:
    path = local_files[3]
    size, footer = path.stat().st_size, footer_size(path) + 8
    url = uploaded(s3, s3_requests, path)
    with pb.BloomFilterReader(
        url, size=size, storage_options=s3.storage_options, tail_size=footer
    ) as reader:
        assert len(reader.filters()) == ROW_GROUPS * len(FILTERED)
        assert reader.requests == 2
    first, end = _filter_span(path)
    assert [(r.method, r.range) for r in s3_requests.list()] == [
        ("GET", f"bytes={size - footer}-{size - 1}"),
        ("GET", f"bytes={first}-{end - 1}"),  # every filter, in one coalesced read
    ]


def test_a_duckdb_file_is_one_get(s3: Any, s3_requests: Any, duckdb_file: Path) -> None:
    size = duckdb_file.stat().st_size
    url = uploaded(s3, s3_requests, duckdb_file)
    with pb.BloomFilterReader(url, size=size, storage_options=s3.storage_options) as reader:
        filters = reader.filters()
        assert filters  # DuckDB writes filters for its dictionary-encoded columns
        assert reader.requests == 1
    assert [r.method for r in s3_requests.list()] == ["GET"]
    assert read_alike(duckdb_file, filters)


def test_a_filesystem_object_with_the_size_from_its_listing(
    s3: Any, s3_requests: Any, local_files: list[Path]
) -> None:
    path = local_files[4]
    bucket = s3.bucket()
    s3.upload(path, f"s3://{bucket}/t/one.parquet")
    fs = s3.fs()
    [info] = fs.ls(f"{bucket}/t", detail=True)
    s3_requests.reset()
    with pb.BloomFilterReader(info["name"], filesystem=fs, size=info["size"]) as reader:
        assert reader.filter(2, "s") is not None
    assert [r.method for r in s3_requests.list()] == ["GET"]


def test_prune_over_20_files_is_one_get_a_file_of_ours(
    s3: Any, s3_requests: Any, local_files: list[Path]
) -> None:
    bucket = s3.bucket()
    for path in local_files:
        s3.upload(path, f"s3://{bucket}/t/{path.name}")
    needle = 7 * ROWS + 12_345  # in file 7, row group 1
    expr = pc.field("id") == needle
    s3_requests.reset()
    result = pb.prune(f"s3://{bucket}/t/", expr, storage_options=s3.storage_options)
    report = result.report
    requests = s3_requests.list()
    # One LIST; one tail GET a file of ours (footer and filters together); pyarrow's read of
    # the first file's footer for the dataset's schema. No HEAD.
    assert s3_requests.count("HEAD") == 0
    assert (report.requests, report.reads, report.filter_reads) == (FILES, FILES, 0)
    assert len(requests) == 1 + FILES + 1
    assert len(requests) / FILES <= 1.2
    assert all(r.method == "GET" for r in requests)
    assert (requests[0].key, requests[0].range) == ("", None)  # the listing
    sizes = {p.name: p.stat().st_size for p in local_files}
    first = sizes[local_files[0].name]  # pyarrow's schema inference: its 64 KiB footer read
    assert (requests[1].key, requests[1].range) == (
        f"t/{local_files[0].name}",
        f"bytes={first - 64 * 1024}-{first - 1}",
    )
    assert sorted((r.key, r.range) for r in requests[2:]) == sorted(
        (f"t/{name}", f"bytes={size - REMOTE_TAIL_SIZE}-{size - 1}") for name, size in sizes.items()
    )
    assert [c.path for c in report.per_file] == [f"{bucket}/t/{p.name}" for p in local_files]
    assert all(c.requests == 1 for c in report.per_file)
    assert sum(c.bytes_read for c in report.per_file) == report.bytes_read
    assert report.bytes_read == FILES * REMOTE_TAIL_SIZE  # each file longer than its tail
    # The point lookup: one row group of one file left, false positives aside.
    assert report.row_groups == FILES * ROW_GROUPS
    assert report.row_groups - report.row_groups_skipped <= 3
    expected = ds.dataset([str(p) for p in local_files], format="parquet").to_table(filter=expr)
    assert result.dataset.to_table(filter=expr).equals(expected)
    assert expected.num_rows == 1


def test_https_reads_the_tail_with_a_suffix_range(
    http_server: Any, local_files: list[Path]
) -> None:
    path = local_files[5]
    shutil.copy(path, http_server.root / "suffix.parquet")
    url = http_server.url("suffix.parquet")
    http_server.requests.reset()
    with pb.BloomFilterReader(url) as reader:
        assert len(reader.filters()) == ROW_GROUPS * len(FILTERED)
        assert reader.requests == 1
    assert [(r.method, r.range) for r in http_server.requests.list()] == [
        ("GET", f"bytes=-{REMOTE_TAIL_SIZE}")
    ]


def test_prune_with_filters_outside_the_tail_reads_headers_and_blocks_in_one_get(
    s3: Any, s3_requests: Any, local_files: list[Path]
) -> None:
    # A tail read that holds the footer only: each file's filters cost one more GET, which
    # for a point lookup covers the id filters' headers and the blocks the key falls in, in
    # one coalesced range, never the filters whole (nor the s filters after the last block).
    bucket = s3.bucket()
    files = local_files[:4]
    for path in files:
        s3.upload(path, f"s3://{bucket}/blocks/{path.name}")
    needle = 2 * ROWS + 777  # in file 2
    expr = pc.field("id") == needle
    tail = max(footer_size(p) for p in files) + 8
    s3_requests.reset()
    result = pb.prune(
        f"s3://{bucket}/blocks/", expr, storage_options=s3.storage_options, tail_size=tail
    )
    report = result.report
    assert (report.requests, report.reads, report.filter_reads) == (2 * 4, 2 * 4, 4)
    assert all(c.requests == 2 for c in report.per_file)
    gets = [r for r in s3_requests.list() if r.range is not None and r.key.startswith("blocks/")]
    for path in files:
        md = pq.ParquetFile(path).metadata
        ids = [md.row_group(g).column(0) for g in range(md.num_row_groups)]
        first, last_end = (
            ids[0].bloom_filter_offset,
            max(c.bloom_filter_offset + c.bloom_filter_length for c in ids),
        )
        ranges = [r.range for r in gets if r.key == f"blocks/{path.name}"]
        filter_gets = [r for r in ranges if not r.endswith(f"-{path.stat().st_size - 1}")]
        assert len(filter_gets) == 1, ranges
        start, end = (int(x) for x in filter_gets[0].removeprefix("bytes=").split("-"))
        assert start == first and end < last_end, (filter_gets, first, last_end)
    expected = ds.dataset([str(p) for p in files], format="parquet").to_table(filter=expr)
    assert result.dataset.to_table(filter=expr).equals(expected)
    assert expected.num_rows == 1

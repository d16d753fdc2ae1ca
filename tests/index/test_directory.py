"""Index directories: a segment a build or refresh, the pointer naming them, compaction; and an
index on the S3 server read in three rounds from cold."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import index
from parquet_bloom._index import store
from tests.index.lake import probed


def _write(path: Path, ids: np.ndarray, ndv: int = 1000) -> None:
    pq.write_table(
        pa.table({"id": ids}),
        path,
        row_group_size=1000,
        bloom_filter_options={"id": {"ndv": ndv, "fpp": 0.01}},
    )


def _segments(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("segment-*.puffin"))


def test_refresh_adds_a_segment_and_compaction_merges(tmp_path: Path) -> None:
    root, target = tmp_path / "data", tmp_path / "idx"
    root.mkdir()
    rng = np.random.default_rng(8)
    for i in range(8):
        _write(root / f"a{i}.parquet", rng.integers(0, 10**9, 2000), ndv=(500, 2000)[i % 2])
    built = index.build_index(str(root), ["id"], target)
    assert built.location == str(target)
    assert json.loads((target / "latest.json").read_text())["generation"] == 1
    assert len(_segments(target)) == 1

    nothing = index.refresh_index(str(root), target)
    assert nothing.files == 0 and len(_segments(target)) == 1  # nothing new: nothing written

    added = rng.integers(0, 10**9, 3000)
    _write(root / "b0.parquet", added, ndv=4000)
    rewritten = rng.integers(0, 10**9, 1000)
    _write(root / "a1.parquet", rewritten)
    (root / "a2.parquet").unlink()
    refreshed = index.refresh_index(str(root), target)
    assert refreshed.files == 2  # b0, and a1 at its new size
    with index.BloomIndex(target) as idx:
        assert len(idx.segments) == 2 and idx.generation == 2
    values = [int(added[3]), int(rewritten[4]), 77]
    for value in [*values, values]:
        got = index.lookup(str(root), "id", value, index=target)
        assert got.files == probed(root, value)
        assert got.probed == [] and [Path(p).name for p in got.gone] == ["a2.parquet"]

    before = _segments(target)
    compacted = index.compact_index(target, source=str(root))
    # a2 (2 row groups) and a1's old version (2) dropped.
    assert compacted.segments_before == 2 and compacted.row_groups_dropped == 4
    assert compacted.removed == []  # the old segments are kept for an hour
    with index.BloomIndex(target) as idx:
        assert len(idx.segments) == 1 and idx.generation == 3
        # a0, a3-a7: 2 row groups each; a1 now 1; b0 3.
        assert idx.row_groups("id") == compacted.row_groups == 6 * 2 + 1 + 3
        assert sorted(Path(p).name for p in idx.files()) == sorted(
            p.name for p in root.glob("*.parquet")
        )
    for value in [*values, values]:
        got = index.lookup(str(root), "id", value, index=target)
        assert got.files == probed(root, value) and got.gone == []
    old = [target / name for name in before]
    past = time.time() - 7200
    for path in old:
        os.utime(path, (past, past))
    again = index.compact_index(target, retain_seconds=3600)
    assert sorted(Path(p).name for p in again.removed) == before
    # Left: the new segment, and the first compaction's, too young to remove.
    assert len(_segments(target)) == 2


def test_compaction_keeps_each_files_newest_version_without_a_source(tmp_path: Path) -> None:
    root, target = tmp_path / "data", tmp_path / "idx"
    root.mkdir()
    _write(root / "a.parquet", np.arange(2000, dtype=np.int64))
    index.build_index(str(root), ["id"], target)
    _write(root / "a.parquet", np.arange(5000, 8000, dtype=np.int64))  # another size
    index.refresh_index(str(root), target)
    report = index.compact_index(target)
    assert report.row_groups_dropped == 2 and report.row_groups == 3
    assert index.lookup(str(root), "id", 6000, index=target).files == {str(root / "a.parquet"): [1]}
    assert index.lookup(str(root), "id", 10, index=target).files == {}


def test_mistakes_are_told(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    _write(root / "a.parquet", np.arange(10, dtype=np.int64))
    with pytest.raises(FileNotFoundError, match="no Bloom index at"):
        index.BloomIndex(tmp_path / "nothing-here")
    with pytest.raises(FileNotFoundError, match="build one first"):
        index.refresh_index(str(root), tmp_path / "nothing-here")
    index.build_index(str(root), ["id"], tmp_path / "one.puffin")
    with pytest.raises(ValueError, match="only an index directory"):
        index.compact_index(tmp_path / "one.puffin")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "latest.json").write_text('{"format": "something else"}')
    with pytest.raises(pb.CorruptFileError, match="not an index pointer"):
        index.BloomIndex(tmp_path / "bad")


def test_an_index_directory_on_s3_is_three_rounds_from_cold(
    s3: Any, s3_requests: Any, tmp_path: Path
) -> None:
    bucket = s3.bucket()
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 10**9, 4000)
    for i in range(6):
        path = tmp_path / f"f{i}.parquet"
        _write(path, ids if i == 3 else rng.integers(0, 10**9, 4000))
        s3.upload(path, f"s3://{bucket}/t/f{i}.parquet")
    options = s3.storage_options
    target = f"s3://{bucket}/t/_bloom_index"
    index.build_index(f"s3://{bucket}/t/", ["id"], target, storage_options=options)
    objects = sorted(s3.objects(bucket, "t/_bloom_index/"))
    assert objects[:2] == ["t/_bloom_index/latest.json", f"t/_bloom_index/{store.pointer_name(1)}"]
    s3_requests.reset()
    with index.BloomIndex(target, storage_options=options) as idx:
        answer = idx.lookup("id", int(ids[17]))
        assert idx.generation == 1
    assert f"s3://{bucket}/t/f3.parquet" in answer.files()
    requests = s3_requests.list()
    assert [r.method for r in requests] == ["GET"] * len(requests), requests
    # 1: the pointer's copy and the first pointer's name (a listing of one key), at once
    first = sorted((r.key, r.query.get("list-type", "")) for r in requests[:2])
    assert first == [("", "2"), ("t/_bloom_index/latest.json", "")], requests[:2]
    (listing,) = [r for r in requests[:2] if r.query.get("list-type") == "2"]
    assert listing.query["prefix"] == "t/_bloom_index/pointer-"
    assert listing.query["max-keys"] == "1"
    # 2: the slices (one coalesced read: the class is small); 3: the entries.
    assert len(requests) == 4
    assert idx.reads == 4


def test_a_cold_lookup_on_s3_is_three_rounds_after_many_pointers(
    s3: Any, s3_requests: Any, tmp_path: Path
) -> None:
    """1,501 generations, more than a listing's page (1,000 keys): a cold lookup still finds
    the newest pointer with one listing of one key beside the copy, and a compaction removes
    the old pointers in two requests."""
    bucket = s3.bucket()
    options = s3.storage_options
    rng = np.random.default_rng(9)
    ids = [rng.integers(0, 10**9, 3000) for _ in range(3)]
    for i, values in enumerate(ids):
        _write(tmp_path / f"f{i}.parquet", values)
        s3.upload(tmp_path / f"f{i}.parquet", f"s3://{bucket}/t/f{i}.parquet")
    urls = [f"s3://{bucket}/t/f{i}.parquet" for i in range(3)]
    target = f"s3://{bucket}/t/_bloom_index"
    prefix = "t/_bloom_index/"
    index.build_index(urls[:2], ["id"], target, storage_options=options)
    # Generations 2 to 1,500 as refreshes that found nothing new would have written them,
    # had they written anything (1,499 real refreshes would take minutes here): pointers of
    # the same segments, each of its generation.
    client = s3.client()
    doc = json.loads(client.get_object(Bucket=bucket, Key=prefix + "latest.json")["Body"].read())

    def put(generation: int) -> None:
        body = json.dumps({**doc, "generation": generation}).encode()
        client.put_object(Bucket=bucket, Key=prefix + store.pointer_name(generation), Body=body)

    with s3.server.paused_recording(), ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(2, 1501)))
    # A real refresh: it finds generation 1,500 (the copy says 1) and writes 1,501.
    dataset = f"s3://{bucket}/t/"
    assert index.refresh_index(dataset, target, storage_options=options).files == 1
    pointers = [k for k in s3.objects(bucket, prefix) if "/pointer-" in k]
    assert len(pointers) == 1501

    s3_requests.reset()
    with index.BloomIndex(target, storage_options=options) as idx:
        answer = idx.lookup("id", int(ids[2][11]))
        assert idx.generation == 1501 and len(idx.segments) == 2
    assert urls[2] in answer.files()
    requests = s3_requests.list()
    assert [r.method for r in requests] == ["GET"] * len(requests), requests
    # 1: the copy and one key of the listing, at once; 2: each segment's slices; 3: the
    # entries of the segments with candidates.
    first = sorted((r.key, r.query.get("list-type", "")) for r in requests[:2])
    assert first == [("", "2"), (prefix + "latest.json", "")], requests[:2]
    listings = [r for r in requests if r.query.get("list-type") == "2"]
    assert len(listings) == 1 and listings[0].query["max-keys"] == "1"
    segments = [r for r in requests[2:] if r.key.startswith(prefix + "segment-")]
    assert len(segments) == len(requests) - 2
    assert max(Counter(r.key for r in segments).values()) <= 2
    assert idx.reads == len(requests) <= 6

    # A copy behind (a writer stopped before replacing it): the newest pointer read after.
    client.put_object(Bucket=bucket, Key=prefix + "latest.json", Body=json.dumps(doc).encode())
    s3_requests.reset()
    with index.BloomIndex(target, storage_options=options) as idx:
        assert idx.generation == 1501 and len(idx.segments) == 2
    keys = [r.key for r in s3_requests.list()]
    assert sorted(keys) == ["", prefix + "latest.json", prefix + store.pointer_name(1501)]
    # A name of another kind that sorts first: the whole directory listed (two pages).
    client.put_object(Bucket=bucket, Key=prefix + "pointer-0.tmp", Body=b"")
    s3_requests.reset()
    with index.BloomIndex(target, storage_options=options) as idx:
        assert idx.generation == 1501
    assert sum(r.query.get("list-type") == "2" for r in s3_requests.list()) == 3
    client.delete_object(Bucket=bucket, Key=prefix + "pointer-0.tmp")

    s3_requests.reset()
    compacted = index.compact_index(
        target, storage_options=options, retain_seconds=0, no_concurrent_writers=True
    )
    # The 1,501 older pointers and the 2 merged segments: two DeleteObjects, no HEADs.
    assert len(compacted.removed) == 1503
    methods = Counter(r.method for r in s3_requests.list())
    assert methods["POST"] == 2 and methods["HEAD"] == 0 and methods["DELETE"] == 0
    left = sorted(s3.objects(bucket, prefix))
    assert left[:2] == [prefix + "latest.json", prefix + store.pointer_name(1502)]
    assert len(left) == 3  # and the merged segment
    for i, values in enumerate(ids):
        got = index.lookup(dataset, "id", int(values[5]), index=target, storage_options=options)
        assert urls[i] in got.files and got.probed == []

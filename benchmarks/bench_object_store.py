"""A point lookup on object storage: prune + pruned scan against pyarrow's scan alone.

The S3 server is moto on 127.0.0.1 (tests/remote/servers.py), every request delayed by 20 ms
(object-store latency; loopback bandwidth is far above a real store's, see
docs/performance.md). 200 files written by pyarrow, 10 row groups each, Bloom filters on two
columns; the lookup matches one row. Measured in one run, on one server:

- pyarrow's scan alone: ``ds.dataset(prefix, filesystem=pyarrow.fs.S3FileSystem)
  .to_table(filter=expr)``;
- ours: ``pb.prune("s3://bucket/t/", expr)`` then the pruned dataset's ``to_table``;
- requests per file while pruning (the server's recorder), target <= 1.2;
- wall time, pyarrow's scan / (prune + pruned scan), target >= 10;
- ``max_workers`` of prune: wall time for 8, 16, 32, 64 files in flight;
- the tail read's size: opening a file and reading its filters, for tail sizes 64 KiB to
  8 MiB, on files whose filters are small (2,000 rows a row group) and large (100,000).

Run: ``.venv/bin/python benchmarks/bench_object_store.py`` (about a minute).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from timing import report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' servers

import parquet_bloom as pb
from tests.remote.servers import S3Requests, S3Session, start_s3_server

DELAY = 0.020  # seconds added to every request
TARGET_REQUESTS_PER_FILE = 1.2
TARGET_SPEEDUP = 10.0
FILTERED = ("id", "s")


def write_file(path: Path, ids: np.ndarray, rows_per_group: int) -> None:
    rng = np.random.default_rng(int(ids[0]))
    n = len(ids)
    table = pa.table(
        {"id": ids, "s": [f"key-{i}" for i in ids], "v": rng.random(n), "w": rng.random(n)}
    )
    options = {c: {"ndv": rows_per_group, "fpp": 0.01} for c in FILTERED}
    pq.write_table(table, path, row_group_size=rows_per_group, bloom_filter_options=options)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--row-groups", type=int, default=10)
    parser.add_argument("--rows-per-group", type=int, default=2_000)
    args = parser.parse_args()

    server = start_s3_server()
    s3 = S3Session(server)
    requests = S3Requests(server)
    ok = True
    try:
        with tempfile.TemporaryDirectory() as tmp:
            bucket = s3.bucket()
            # Keys spread over every file, as user ids or hashes are: each row group's min/max
            # statistics span nearly all keys, so a scan cannot skip row groups by them (only
            # a Bloom filter tells that a row group lacks a key).
            per_file = args.row_groups * args.rows_per_group
            keys = np.random.default_rng(0).permutation(args.files * per_file).astype(np.int64)
            files = []
            for i in range(args.files):
                path = Path(tmp) / f"part-{i:03d}.parquet"
                write_file(path, keys[i * per_file : (i + 1) * per_file], args.rows_per_group)
                files.append(s3.upload(path, f"s3://{bucket}/t/{path.name}"))
            big = []
            for i in range(3):
                path = Path(tmp) / f"big-{i}.parquet"
                write_file(path, np.arange(i * 10**6, (i + 1) * 10**6), 100_000)
                big.append((s3.upload(path, f"s3://{bucket}/big/{path.name}"), path))
            small = [(url, Path(tmp) / url.rsplit("/", 1)[1]) for url in files[:3]]
            total = sum((Path(tmp) / u.rsplit("/", 1)[1]).stat().st_size for u in files)
            print(
                f"{args.files} files of {args.row_groups} row groups x {args.rows_per_group:,} "
                f"rows, {total / 2**20:.0f} MiB in all; every request delayed {DELAY * 1e3:.0f} ms"
            )
            server.faults.delay = DELAY
            needle = int(keys[(args.files // 2) * per_file + 4321])
            expr = pc.field("id") == needle
            ok &= lookup(s3, requests, bucket, expr, args.files)
            workers(s3, bucket, expr)
            tails(s3, requests, "small filters", small)
            tails(s3, requests, "large filters", big)
    finally:
        requests.stop()
        server.stop()
    return 0 if ok else 1


def lookup(s3: S3Session, requests: S3Requests, bucket: str, expr: pc.Expression, n: int) -> bool:
    prefix = f"s3://{bucket}/t/"
    arrow_fs = s3.arrow_fs()
    requests.reset()
    scan_time, table = timed(
        lambda: ds.dataset(f"{bucket}/t/", filesystem=arrow_fs, format="parquet").to_table(
            filter=expr
        )
    )
    scan_requests = requests.count()
    requests.reset()
    prune_time, result = timed(lambda: pb.prune(prefix, expr, storage_options=s3.storage_options))
    prune_requests = requests.count()
    requests.reset()
    pruned_scan_time, pruned = timed(lambda: result.dataset.to_table(filter=expr))
    pruned_scan_requests = requests.count()
    assert pruned.equals(table) and table.num_rows == 1, "the pruned scan differs"
    ours = prune_time + pruned_scan_time
    print(f"  pyarrow scan alone:   {scan_time * 1e3:8.0f} ms, {scan_requests:5} req.")
    print(f"  prune:                {prune_time * 1e3:8.0f} ms, {prune_requests:5} req.")
    print(
        f"  pruned scan:          {pruned_scan_time * 1e3:8.0f} ms, {pruned_scan_requests:5} req."
    )
    print(f"  {result.report}")
    ok = report(
        "requests per file while pruning (lower is better)",
        prune_requests / n,
        f"<= {TARGET_REQUESTS_PER_FILE}",
        prune_requests / n <= TARGET_REQUESTS_PER_FILE,
    )
    return (
        report(
            "wall time: pyarrow scan / (prune + pruned scan)",
            scan_time / ours,
            f">= {TARGET_SPEEDUP:g}",
            scan_time / ours >= TARGET_SPEEDUP,
        )
        and ok
    )


def workers(s3: S3Session, bucket: str, expr: pc.Expression) -> None:
    print("  prune's max_workers (files in flight):")
    for n in (4, 8, 16, 32, 64):
        seconds, _ = timed(
            lambda n=n: pb.prune(
                f"s3://{bucket}/t/", expr, storage_options=s3.storage_options, max_workers=n
            )
        )
        print(f"    {n:3}: {seconds * 1e3:6.0f} ms")


def tails(s3: S3Session, requests: S3Requests, what: str, files: list[tuple[str, Path]]) -> None:
    sizes = [p.stat().st_size for _, p in files]
    fs = s3.fs()  # one filesystem, as prune uses: its client is made once
    print(f"  tail size, {what} (files of {statistics.mean(sizes) / 2**20:.1f} MiB):")
    for tail in (64 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20):
        times, counts = [], []
        for _ in range(3):
            for (url, path), size in zip(files, sizes, strict=True):
                requests.reset()

                def read(url: str = url, size: int = size, tail: int = tail) -> None:
                    key = url.removeprefix("s3://")
                    with pb.BloomFilterReader(
                        key, filesystem=fs, size=size, tail_size=tail
                    ) as reader:
                        reader.filters()

                times.append(timed(read)[0])
                counts.append(requests.count())
                del path
        print(
            f"    {tail >> 10:5} KiB: {statistics.median(times) * 1e3:6.1f} ms, "
            f"{statistics.mean(counts):.1f} requests"
        )


if __name__ == "__main__":
    raise SystemExit(main())

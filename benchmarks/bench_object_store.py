"""A point lookup on object storage: prune + pruned scan against pyarrow's scan alone.

The S3 server is moto on 127.0.0.1 in a process of its own (``S3ServerProcess``,
tests/remote/servers.py), so that its request handling does not compete for this process's
GIL. It models a store: every request waits ``--delay-ms`` (20 ms) before it is answered, and
every response body is sent at ``--bandwidth-mbps`` (800 Mbit/s = 100 MB/s) per request, the
order of S3's single-request throughput (docs/performance.md). Both sides pay the same model.
200 files written by pyarrow, 10 row groups each, Bloom filters on two columns; the lookup
matches one row. Measured in one run, on one server, best of 3, the candidates in turns:

- pyarrow's scan alone: ``ds.dataset(prefix, filesystem=fs).to_table(filter=expr)``, with
  ``pyarrow.fs.S3FileSystem`` and with s3fs through fsspec; the faster is pyarrow's figure;
- ours: ``pb.prune("s3://bucket/t/", expr)`` then the pruned dataset's ``to_table``;
- requests and response bytes of each (the server's meter), requests per file while pruning,
  target <= 1.2;
- wall time, pyarrow's best scan / (prune + pruned scan), target >= 10.

``--sweeps`` adds prune's ``max_workers`` and the tail read's size, on the same server.

Run: ``.venv/bin/python benchmarks/bench_object_store.py`` (about two minutes).
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
from tests.remote.servers import S3ServerProcess, S3Session

TARGET_REQUESTS_PER_FILE = 1.2
TARGET_SPEEDUP = 10.0
FILTERED = ("id", "s")
TAIL_256K = " (tail_size=256 KiB)"


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
    parser.add_argument("--delay-ms", type=float, default=20.0, help="added to every request")
    parser.add_argument(
        "--bandwidth-mbps", type=float, default=800.0, help="Mbit/s a response body, each"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sweeps", action="store_true", help="max_workers and tail sizes too")
    args = parser.parse_args()

    bandwidth = args.bandwidth_mbps * 1e6 / 8  # bytes a second
    server = S3ServerProcess(delay=args.delay_ms / 1e3, bandwidth=bandwidth, max_seconds=1800)
    s3 = S3Session(server)
    ok = True
    try:
        with tempfile.TemporaryDirectory() as tmp:
            bucket = s3.bucket()
            # Keys spread over every file, as user ids or hashes are: each row group's min/max
            # statistics span nearly all keys, so a scan cannot skip row groups by them (only
            # a Bloom filter tells that a row group lacks a key).
            per_file = args.row_groups * args.rows_per_group
            keys = np.random.default_rng(0).permutation(args.files * per_file).astype(np.int64)
            total = 0
            small = []
            for i in range(args.files):
                path = Path(tmp) / f"part-{i:03d}.parquet"
                write_file(path, keys[i * per_file : (i + 1) * per_file], args.rows_per_group)
                total += path.stat().st_size
                url = s3.upload(path, f"s3://{bucket}/t/{path.name}")
                if i < 3:
                    small.append((url, path))
            print(
                f"{args.files} files of {args.row_groups} row groups x {args.rows_per_group:,} "
                f"rows, {total / 2**20:.0f} MiB in all; S3 server in its own process, every "
                f"request delayed {args.delay_ms:g} ms, every body sent at "
                f"{args.bandwidth_mbps:g} Mbit/s ({bandwidth / 1e6:g} MB/s) per request",
                flush=True,
            )
            needle = int(keys[(args.files // 2) * per_file + 4321])
            expr = pc.field("id") == needle
            ok &= lookup(s3, server, bucket, expr, args.files, args.repeat)
            if args.sweeps:
                big = []
                for i in range(3):
                    path = Path(tmp) / f"big-{i}.parquet"
                    write_file(path, np.arange(i * 10**6, (i + 1) * 10**6), 100_000)
                    big.append((s3.upload(path, f"s3://{bucket}/big/{path.name}"), path))
                workers(s3, bucket, expr)
                tails(s3, server, "small filters", small)
                tails(s3, server, "large filters", big)
    finally:
        server.stop()
    return 0 if ok else 1


def _mib(n: int) -> str:
    return f"{n / 2**20:8.2f} MiB"


def lookup(
    s3: S3Session,
    server: S3ServerProcess,
    bucket: str,
    expr: pc.Expression,
    n: int,
    repeat: int,
) -> bool:
    prefix = f"s3://{bucket}/t/"
    times: dict[str, list[float]] = {}
    counts: dict[str, dict[str, int]] = {}
    tables: dict[str, pa.Table] = {}
    reports: list[Any] = []

    cpu: dict[str, float] = {}

    def metered(name: str, fn: Callable[[], Any]) -> tuple[float, Any]:
        server.reset_counters()
        before = server.cpu_seconds()
        seconds, result = timed(fn)
        cpu[name] = server.cpu_seconds() - before
        counts[name] = server.counters()
        times.setdefault(name, []).append(seconds)
        return seconds, result

    def scan(name: str, make_fs: Callable[[], Any]) -> None:
        fs = make_fs()  # a fresh filesystem a run: nothing listed or cached before
        _, tables[name] = metered(
            name,
            lambda: ds.dataset(f"{bucket}/t/", filesystem=fs, format="parquet").to_table(
                filter=expr
            ),
        )

    def ours(suffix: str = "", **options: Any) -> None:
        prune_time, result = metered(
            "prune" + suffix,
            lambda: pb.prune(prefix, expr, storage_options=s3.storage_options, **options),
        )
        scan_time, table = metered(
            "pruned scan" + suffix, lambda: result.dataset.to_table(filter=expr)
        )
        times.setdefault("ours" + suffix, []).append(prune_time + scan_time)
        tables["ours" + suffix] = table
        reports.append(result.report)

    arrow_name = "pyarrow scan, pyarrow.fs.S3FileSystem"
    fsspec_name = "pyarrow scan, s3fs through fsspec"
    for _ in range(repeat):
        scan(arrow_name, s3.arrow_fs)
        scan(fsspec_name, s3.fs)
        ours()
        ours(TAIL_256K, tail_size=256 << 10)  # information: a tail smaller than these files
    expected = tables[arrow_name]
    assert expected.num_rows == 1, "the lookup should match one row"
    for name, table in tables.items():
        assert table.equals(expected), f"{name} differs"

    best = {name: min(ts) for name, ts in times.items()}
    print(f"  {'':<40} {'best':>11} {'requests':>11} {'bytes':>12} {'server CPU':>11}   runs")
    for name in (arrow_name, fsspec_name, "prune", "pruned scan"):
        c = counts[name]
        print(
            f"  {name:<40} {best[name] * 1e3:8.0f} ms {c['requests']:6} req. {_mib(c['bytes'])}"
            f" {cpu[name] * 1e3:8.0f} ms   {', '.join(f'{t * 1e3:.0f}' for t in times[name])} ms"
        )
    for suffix in ("", TAIL_256K):
        both = [counts["prune" + suffix], counts["pruned scan" + suffix]]
        print(
            f"  {'prune + pruned scan' + suffix:<40} {best['ours' + suffix] * 1e3:8.0f} ms "
            f"{sum(c['requests'] for c in both):6} req. {_mib(sum(c['bytes'] for c in both))}"
        )
    print(f"  default tail: {reports[-2]}")
    print(f"  {TAIL_256K.strip()}: {reports[-1]}")
    pyarrow_name = min((arrow_name, fsspec_name), key=lambda k: best[k])
    print(f"  pyarrow's best: {pyarrow_name}")
    per_file = counts["prune"]["requests"] / n
    ok = report(
        "requests per file while pruning (lower is better)",
        per_file,
        f"<= {TARGET_REQUESTS_PER_FILE}",
        per_file <= TARGET_REQUESTS_PER_FILE,
    )
    ratio = best[pyarrow_name] / best["ours"]
    report(
        f"(information) the same, prune{TAIL_256K}",
        best[pyarrow_name] / best["ours" + TAIL_256K],
    )
    return (
        report(
            "wall time: pyarrow's best scan / (prune + pruned scan)",
            ratio,
            f">= {TARGET_SPEEDUP:g}",
            ratio >= TARGET_SPEEDUP,
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


def tails(s3: S3Session, server: S3ServerProcess, what: str, files: list[tuple[str, Path]]) -> None:
    sizes = [p.stat().st_size for _, p in files]
    fs = s3.fs()  # one filesystem, as prune uses: its client is made once
    print(f"  tail size, {what} (files of {statistics.mean(sizes) / 2**20:.1f} MiB):")
    for tail in (64 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20):
        times, counts = [], []
        for _ in range(3):
            for (url, _path), size in zip(files, sizes, strict=True):
                server.reset_counters()

                def read(url: str = url, size: int = size, tail: int = tail) -> None:
                    key = url.removeprefix("s3://")
                    with pb.BloomFilterReader(
                        key, filesystem=fs, size=size, tail_size=tail
                    ) as reader:
                        reader.filters()

                times.append(timed(read)[0])
                counts.append(server.counters()["requests"])
        print(
            f"    {tail >> 10:5} KiB: {statistics.median(times) * 1e3:6.1f} ms, "
            f"{statistics.mean(counts):.1f} requests"
        )


if __name__ == "__main__":
    raise SystemExit(main())

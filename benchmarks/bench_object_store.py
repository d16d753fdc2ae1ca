"""A point lookup on object storage: prune + pruned scan against pyarrow's scan alone.

The S3 server is moto on 127.0.0.1 in a process of its own (``S3ServerProcess``,
tests/remote/servers.py), so that its request handling does not compete for this process's
GIL. It models a store: every request waits ``--delay-ms`` (20 ms) before it is answered, and
every response body is sent at ``--bandwidth-mbps`` (800 Mbit/s = 100 MB/s) per request, the
order of S3's single-request throughput (docs/performance.md). Both sides pay the same model.

The files, by default shaped as a lake's (docs/performance.md, "Object storage"): 200 files
written by pyarrow, 10 row groups of 100,000 rows, about 31 MiB each. Bloom filters on ``id``
(int64) and ``s`` (its text), each key in 4 rows of one row group, so 25,000 keys a row group:
the writer sizes the filters for that NDV (32 KiB each at 1 %), and footer and filters fit the
1 MiB tail read. The keys are spread over every file, as user ids or hashes are: each row
group's min/max statistics span nearly all keys, so a scan cannot skip row groups by them.
The other columns (``v``, ``ts``, and two text columns, ``url`` and ``agent``) hold most of
the bytes, as payload columns do. ``--toy`` is the earlier shape: 2,000 rows a row group, one
row a key, ``id``, ``s`` and two doubles, 0.73 MiB a file (smaller than the tail read).

The lookup matches the rows of one key. Measured in one run, on one server, best of
``--repeat``, the candidates in turns:

- pyarrow's scan alone: ``ds.dataset(prefix, filesystem=fs).to_table(filter=expr)`` with
  ``pyarrow.fs.S3FileSystem`` (``--s3fs-scan``: with s3fs through fsspec too, slower in every
  run so far); the fastest is pyarrow's figure;
- ours: ``pb.prune("s3://bucket/t/", expr)`` then the pruned dataset's ``to_table``; and,
  for information, ``prune(...).to_table()``, the rows read late (the filter's column of the
  row groups left first, the other columns of those holding a match);
- for information, the pruned scan of a dataset made on s3fs's own file objects
  (``PyFileSystem(FSSpecHandler(fs))``), which read ahead, as prune's datasets of URLs did;
- requests and response bytes of each (the server's meter), the CPU time of the benchmark's
  process (every thread) and of the server's in the last run, requests per file while
  pruning, target <= 1.2;
- wall time, pyarrow's best scan / (prune + pruned scan), target >= 10.

``--sweeps`` adds prune's ``max_workers`` and the tail read's size, on the same server.

Run: ``.venv/bin/python benchmarks/bench_object_store.py`` (10 minutes on the 2-core VM while
other suites ran, half of it writing and uploading 6 GiB, most of the rest pyarrow's scans;
``--toy`` under one). moto holds the files: 6 GiB in temporary files, 6 GiB in memory.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from timing import report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' servers

import parquet_bloom as pb
from tests.remote.servers import S3ServerProcess, S3Session

TARGET_REQUESTS_PER_FILE = 1.2
TARGET_SPEEDUP = 10.0
FILTERED = ("id", "s")
FPP = 0.01
LATE = "prune(...).to_table(), the read"
OURS_LATE = "prune + to_table()"
FSSPEC_FILES = "(the pruned scan on s3fs's files)"
# What a user agent column holds: a few hundred long strings, repeated.
AGENTS = [
    f"Mozilla/5.0 (platform {i % 7}; build {i * 7919 % 10007}) AppleWebKit/537.36 "
    f"(KHTML, like Gecko) Browser/{i % 40}.0.{i}"
    for i in range(500)
]


class Shape:
    """The files: ``files`` of ``row_groups`` x ``rows_per_group`` rows, each key in
    ``rows_per_key`` rows of one row group; ``toy``: the earlier columns (id, s, v, w)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.files: int = args.files
        self.row_groups: int = args.row_groups
        self.rows_per_group: int = args.rows_per_group
        self.rows_per_key: int = args.rows_per_key
        self.toy: bool = args.toy
        if self.rows_per_group % self.rows_per_key:
            raise SystemExit("--rows-per-key must divide --rows-per-group")
        self.keys_per_group = self.rows_per_group // self.rows_per_key
        rng = np.random.default_rng(0)
        # Every key once, spread at random over the files' row groups.
        self.keys = rng.permutation(self.files * self.row_groups * self.keys_per_group).astype(
            np.int64
        )
        self.payload = self._payload(rng)

    @property
    def rows_per_file(self) -> int:
        return self.row_groups * self.rows_per_group

    def group_keys(self, file: int, group: int) -> np.ndarray:
        start = (file * self.row_groups + group) * self.keys_per_group
        return self.keys[start : start + self.keys_per_group]

    def _payload(self, rng: np.random.Generator) -> dict[str, pa.Array]:
        """The columns no filter is on, one file's worth (every file holds the same ones: the
        scan reads and decodes them all the same)."""
        n = self.rows_per_file
        if self.toy:
            return {"v": pa.array(rng.random(n)), "w": pa.array(rng.random(n))}
        numbers = pc.cast(pa.array(rng.integers(0, 1 << 30, n)), pa.string())
        return {
            "v": pa.array(rng.random(n, dtype=np.float32)),
            "ts": pa.array(
                np.int64(1_700_000_000_000_000) + np.cumsum(rng.integers(0, 20_000, n)),
                pa.timestamp("us"),
            ),
            "url": pc.binary_join_element_wise("https://shop.example.com/item/", numbers, ""),
            "agent": pa.array(AGENTS).take(pa.array(rng.integers(0, len(AGENTS), n))),
        }

    def table(self, file: int) -> pa.Table:
        rng = np.random.default_rng(file)
        groups = [
            rng.permutation(np.repeat(self.group_keys(file, g), self.rows_per_key))
            for g in range(self.row_groups)
        ]
        ids = pa.array(np.concatenate(groups))
        text = pc.binary_join_element_wise("key-", pc.cast(ids, pa.string()), "")
        return pa.table({"id": ids, "s": text, **self.payload})

    def write(self, file: int) -> bytes:
        options = {c: {"ndv": self.keys_per_group, "fpp": FPP} for c in FILTERED}
        sink = pa.BufferOutputStream()
        pq.write_table(
            self.table(file),
            sink,
            row_group_size=self.rows_per_group,
            bloom_filter_options=options,
        )
        return bytes(sink.getvalue())


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _mib(n: float) -> str:
    return f"{n / 2**20:8.2f} MiB"


def upload(s3: S3Session, bucket: str, shape: Shape) -> list[tuple[str, int]]:
    """Write every file and put it on the server, two at a time; their URLs and sizes."""
    client = s3.client()

    def one(i: int) -> tuple[str, int]:
        data = shape.write(i)
        key = f"t/part-{i:03d}.parquet"
        client.put_object(Bucket=bucket, Key=key, Body=data)
        return f"s3://{bucket}/{key}", len(data)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(one, range(shape.files)))


def describe(shape: Shape, files: list[tuple[str, int]], s3: S3Session, args: Any) -> None:
    sizes = [size for _, size in files]
    url, size = files[0]
    with pb.BloomFilterReader(url, storage_options=s3.storage_options, size=size) as reader:
        starts = [c.bloom_filter_offset for c in reader.column_chunks if c.bloom_filter_offset]
        lengths = [c.bloom_filter_length or 0 for c in reader.column_chunks]
    total = sum(sizes)
    print(
        f"{shape.files} files of {shape.row_groups} row groups x {shape.rows_per_group:,} rows, "
        f"{shape.keys_per_group:,} keys a row group ({shape.rows_per_key} row(s) a key); "
        f"{statistics.mean(sizes) / 2**20:.2f} MiB a file ({min(sizes) / 2**20:.2f}-"
        f"{max(sizes) / 2**20:.2f}), "
        + (f"{total / 2**30:.2f} GiB" if total >= 2**30 else f"{total / 2**20:.0f} MiB")
        + f" in all; filters {sum(lengths) / 2**10:.0f} KiB a file, filters and footer its "
        f"last {(size - min(starts)) / 2**10:.0f} KiB",
        flush=True,
    )
    print(
        f"S3 server in its own process, every request delayed {args.delay_ms:g} ms, every "
        f"body sent at {args.bandwidth_mbps:g} Mbit/s ({args.bandwidth_mbps / 8:g} MB/s) per "
        "request",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--row-groups", type=int, default=10)
    parser.add_argument("--rows-per-group", type=int, default=None, help="default 100,000")
    parser.add_argument("--rows-per-key", type=int, default=None, help="default 4")
    parser.add_argument(
        "--toy",
        action="store_true",
        help="the earlier shape: 2,000 rows a row group, a row a key, columns id, s, v, w",
    )
    parser.add_argument("--delay-ms", type=float, default=20.0, help="added to every request")
    parser.add_argument(
        "--bandwidth-mbps", type=float, default=800.0, help="Mbit/s a response body, each"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--s3fs-scan", action="store_true", help="pyarrow's scan on s3fs too")
    parser.add_argument("--sweeps", action="store_true", help="max_workers and tail sizes too")
    args = parser.parse_args()
    if args.rows_per_group is None:
        args.rows_per_group = 2_000 if args.toy else 100_000
    if args.rows_per_key is None:
        args.rows_per_key = 1 if args.toy else 4

    shape = Shape(args)
    bandwidth = args.bandwidth_mbps * 1e6 / 8  # bytes a second
    server = S3ServerProcess(delay=args.delay_ms / 1e3, bandwidth=bandwidth, max_seconds=3600)
    s3 = S3Session(server)
    try:
        bucket = s3.bucket()
        before = server.cpu_seconds()
        seconds, files = timed(lambda: upload(s3, bucket, shape))
        print(
            f"(written and uploaded in {seconds:.0f} s, the server's CPU "
            f"{server.cpu_seconds() - before:.0f} s of it)"
        )
        describe(shape, files, s3, args)
        group = shape.group_keys(shape.files // 2, shape.row_groups // 2)
        expr = pc.field("id") == int(group[len(group) // 3])
        ok = lookup(s3, server, bucket, expr, shape, args)
        if args.sweeps:
            workers(s3, bucket, expr)
            tails(s3, server, files[:3])
    finally:
        server.stop()
    return 0 if ok else 1


def lookup(
    s3: S3Session,
    server: S3ServerProcess,
    bucket: str,
    expr: pc.Expression,
    shape: Shape,
    args: Any,
) -> bool:
    prefix = f"s3://{bucket}/t/"
    times: dict[str, list[float]] = {}
    counts: dict[str, dict[str, int]] = {}
    cpu: dict[str, tuple[float, float]] = {}  # the last run's: ours (every thread), server's
    tables: dict[str, pa.Table] = {}
    reports: list[Any] = []

    def metered(name: str, fn: Callable[[], Any]) -> tuple[float, Any]:
        server.reset_counters()
        before = time.process_time(), server.cpu_seconds()
        seconds, result = timed(fn)
        cpu[name] = (time.process_time() - before[0], server.cpu_seconds() - before[1])
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

    def ours() -> None:
        prune_time, result = metered(
            "prune", lambda: pb.prune(prefix, expr, storage_options=s3.storage_options)
        )
        scan_time, table = metered("pruned scan", lambda: result.dataset.to_table(filter=expr))
        times.setdefault("ours", []).append(prune_time + scan_time)
        tables["ours"] = table
        reports.append(result.report)
        # (information) The rows read late: the filter's column of the row groups left first,
        # then the other columns of those holding a match (prune(...).to_table()).
        late_time, tables[LATE] = metered(LATE, result.to_table)
        times.setdefault(OURS_LATE, []).append(prune_time + late_time)

    def pruned_on_fsspec_files() -> None:
        # (information) A dataset a user made on s3fs's own file objects, pruned: its scan
        # reads through them, as prune's datasets of URLs did before they read exactly.
        fs = pafs.PyFileSystem(pafs.FSSpecHandler(s3.fs()))
        dataset = ds.dataset(f"{bucket}/t/", filesystem=fs, format="parquet")
        result = pb.prune(dataset, expr)
        _, tables[FSSPEC_FILES] = metered(
            FSSPEC_FILES, lambda: result.dataset.to_table(filter=expr)
        )

    scans = {"pyarrow scan, pyarrow.fs.S3FileSystem": s3.arrow_fs}
    if args.s3fs_scan:
        scans["pyarrow scan, s3fs through fsspec"] = s3.fs
    for _ in range(args.repeat):
        for name, make_fs in scans.items():
            scan(name, make_fs)
        ours()
        pruned_on_fsspec_files()
    expected = tables[next(iter(scans))]
    assert expected.num_rows == shape.rows_per_key, "the lookup should match one key's rows"
    for name, table in tables.items():
        assert table.equals(expected), f"{name} differs"

    best = {name: min(ts) for name, ts in times.items()}
    print(
        f"  {'':<40} {'best':>11} {'requests':>11} {'bytes':>12} {'CPU: client':>12} "
        f"{'server':>9}   runs"
    )
    for name in (*scans, "prune", "pruned scan", LATE, FSSPEC_FILES):
        c = counts[name]
        print(
            f"  {name:<40} {best[name] * 1e3:8.0f} ms {c['requests']:6} req. {_mib(c['bytes'])}"
            f" {cpu[name][0] * 1e3:9.0f} ms {cpu[name][1] * 1e3:6.0f} ms   "
            f"{', '.join(f'{t * 1e3:.0f}' for t in times[name])} ms"
        )
    both = [counts["prune"], counts["pruned scan"]]
    print(
        f"  {'prune + pruned scan':<40} {best['ours'] * 1e3:8.0f} ms "
        f"{sum(c['requests'] for c in both):6} req. {_mib(sum(c['bytes'] for c in both))}   "
        f"runs {', '.join(f'{t * 1e3:.0f}' for t in times['ours'])} ms"
    )
    late = [counts["prune"], counts[LATE]]
    print(
        f"  {OURS_LATE:<40} {best[OURS_LATE] * 1e3:8.0f} ms "
        f"{sum(c['requests'] for c in late):6} req. {_mib(sum(c['bytes'] for c in late))}   "
        f"runs {', '.join(f'{t * 1e3:.0f}' for t in times[OURS_LATE])} ms"
    )
    print(f"  prune's report: {reports[-1]}")
    pyarrow_name = min(scans, key=lambda k: best[k])
    print(f"  pyarrow's best: {pyarrow_name}")
    per_file = counts["prune"]["requests"] / shape.files
    ok = report(
        "requests per file while pruning (lower is better)",
        per_file,
        f"<= {TARGET_REQUESTS_PER_FILE}",
        per_file <= TARGET_REQUESTS_PER_FILE,
    )
    ratio = best[pyarrow_name] / best["ours"]
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


def tails(s3: S3Session, server: S3ServerProcess, files: list[tuple[str, int]]) -> None:
    fs = s3.fs()  # one filesystem, as prune uses: its client is made once
    print("  tail size (3 files, 3 times: the median):")
    for tail in (64 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20):
        times, counts = [], []
        for _ in range(3):
            for url, size in files:
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

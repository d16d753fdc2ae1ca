"""Token and n-gram filters in the Bloom index (docs/index.md#token-and-n-gram-filters): a
substring search for a rare token over a log-shaped dataset, pruned with the index, against
DuckDB's scan of the same files in the same run.

The dataset: ``--files`` (1,000) Parquet files of ``--rows`` (2,000) log records each, one row
group a file, generated deterministically (numpy's PCG64, seed 29): ``ts`` (int64), ``status``
(int32), ``url`` (a method, a host, a path of 1-4 segments from a vocabulary, a query of 0-2
parameters whose values are numbers below 5,000), ``message`` (one of 12 templates with a user,
a latency, a status, an error word and a 6-hex-digit request id below 0x4000) and ``agent``
(one of 12 user agents with a version). One row of one file (file 617) gets a request id no
other row has: ``req=zq81vx``, the rare token. Cached under ``--cache``.

The index (built once, timed): ``TextFilter("message", "ngrambf", n=4)`` (sized by the library
for the largest row group's distinct 4-grams at 1/N) and ``TextFilter("url")`` (tokens).

Measured, in turns, ``--repeat`` times:

- *ours*: ``pb.prune(data, pc.match_substring(message, "zq81vx"), index=...)`` with an open
  ``BloomIndex`` and ``result.dataset.to_table(filter=expr)``;
- *DuckDB*: ``SELECT * FROM read_parquet('data/*.parquet') WHERE contains(message,
  'zq81vx')`` (one connection, opened before; ``.arrow()``);
- *unpruned*: ``ds.dataset(data).to_table(filter=expr)`` (pyarrow's scan of every file).

Checked: the three return the same rows. The bytes a pruned search reads: the index's reads
(a ``BloomIndex`` opened for the search: its footer, its file list, the slices and the
entries) plus the whole size of every file kept
(an upper bound of what the scan reads of them), as a fraction of all the files' bytes. Target
<= 2 %. The same for a token search of a common token, ``has_token("url", "4242")`` (a query
value in about a tenth of the files), shown without a target.

Run: ``.venv/bin/python benchmarks/bench_text.py`` (``--files``, ``--rows``, ``--repeat``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from timing import best_in_turns, report

import parquet_bloom as pb
from parquet_bloom import index

RARE = "zq81vx"
RARE_FILE = 617
HOSTS = ["api.example.com", "shop.example.org", "cdn.example.net", "auth.example.io"]
SEGMENTS = ["v1", "v2", "users", "orders", "items", "cart", "login", "search", "static", "img"]
SEGMENTS += ["profile", "settings", "checkout", "payments", "reviews", "assets", "css", "js"]
PARAMS = ["id", "page", "q", "ref", "sort", "limit", "session", "lang"]
ERRORS = ["timeout", "refused", "reset", "denied", "notfound", "overflow", "ok", "retry"]
TEMPLATES = [
    "user {u} logged in from {h} in {l} ms req={r}",
    "user {u} failed login: {e} req={r}",
    "GET {p} returned {s} after {l} ms req={r}",
    "POST {p} returned {s} req={r}",
    "cache {e} for key item:{u} req={r}",
    "payment of user {u} {e} after {l} ms req={r}",
    "worker {w} picked job {u} req={r}",
    "worker {w} finished job {u} in {l} ms: {e} req={r}",
    "upstream {h} {e} (attempt {w}) req={r}",
    "session of user {u} expired req={r}",
    "search q=item{u} gave {s} hits in {l} ms req={r}",
    "rate limit for user {u}: {e} req={r}",
]
AGENTS = [
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/{v}.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Gecko/20100101 Firefox/{v}.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Version/{v}.1 Safari/605.1.15",
    "curl/8.{v}.0",
    "python-requests/2.{v}.1",
    "Go-http-client/1.1",
    "okhttp/4.{v}.2",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_{v} like Mac OS X) Mobile/15E148",
    "Mozilla/5.0 (Linux; Android 14; Pixel {v}) Chrome/120.0 Mobile Safari/537.36",
    "Googlebot/2.1 (+http://www.google.com/bot.html) v{v}",
    "Wget/1.{v}",
    "PostmanRuntime/7.{v}.0",
]


def generate(root: Path, files: int, rows: int) -> None:
    rng = np.random.default_rng(29)
    root.mkdir(parents=True)
    for f in range(files):
        seg = rng.integers(0, len(SEGMENTS), (rows, 4))
        depth = rng.integers(1, 5, rows)
        params = rng.integers(0, len(PARAMS), (rows, 2))
        nparams = rng.integers(0, 3, rows)
        values = rng.integers(0, 5000, (rows, 2))
        hosts = rng.integers(0, len(HOSTS), rows)
        urls = []
        for i in range(rows):
            path = "/".join(SEGMENTS[s] for s in seg[i, : depth[i]])
            query = "&".join(f"{PARAMS[params[i, j]]}={values[i, j]}" for j in range(nparams[i]))
            urls.append(f"https://{HOSTS[hosts[i]]}/{path}" + (f"?{query}" if query else ""))
        t = rng.integers(0, len(TEMPLATES), rows)
        users, lat = rng.integers(0, 20000, rows), rng.integers(1, 3000, rows)
        status = rng.choice([200, 201, 204, 301, 304, 400, 401, 403, 404, 500, 502, 503], rows)
        errors, workers = rng.integers(0, len(ERRORS), rows), rng.integers(0, 64, rows)
        reqs = rng.integers(0, 0x4000, rows)
        messages = [
            TEMPLATES[t[i]].format(
                u=users[i],
                h=HOSTS[hosts[i]],
                l=lat[i],
                e=ERRORS[errors[i]],
                r=f"{reqs[i]:06x}",
                s=status[i],
                p="/" + SEGMENTS[seg[i, 0]],
                w=workers[i],
            )
            for i in range(rows)
        ]
        if f == RARE_FILE:
            messages[rows // 3] = messages[rows // 3].rsplit("req=", 1)[0] + f"req={RARE}"
        a, v = rng.integers(0, len(AGENTS), rows), rng.integers(1, 130, rows)
        agents = [AGENTS[a[i]].format(v=v[i]) for i in range(rows)]
        table = pa.table(
            {
                "ts": pa.array(1_700_000_000_000 + f * rows * 1000 + np.arange(rows) * 1000),
                "status": pa.array(status, pa.int32()),
                "url": urls,
                "message": messages,
                "agent": agents,
            }
        )
        pq.write_table(table, root / f"part-{f:05d}.parquet", compression="zstd")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "parquet-bloom-bench-text"
    )
    args = parser.parse_args()
    import duckdb

    root = args.cache / f"logs-{args.files}x{args.rows}"
    if not root.exists():
        start = time.perf_counter()
        generate(root.with_suffix(".tmp"), args.files, args.rows)
        root.with_suffix(".tmp").rename(root)
        print(f"generated {args.files} files in {time.perf_counter() - start:.1f} s")
    target = args.cache / f"logs-{args.files}x{args.rows}.puffin"
    filters = [index.TextFilter("message", "ngrambf", n=4), index.TextFilter("url")]
    start = time.perf_counter()
    built = index.build_index(root, [], target, text=filters)
    build_s = time.perf_counter() - start
    paths = sorted(root.glob("*.parquet"))
    total = sum(os.path.getsize(p) for p in paths)
    print(built)
    print(
        f"  build {build_s:.1f} s; index {built.index_bytes:,} B = "
        f"{100 * built.index_bytes / total:.1f} % of the files' {total:,} B"
    )

    ok = True
    con = duckdb.connect()
    glob = str(root / "*.parquet")
    with index.BloomIndex(target) as opened:
        for label, expr, sql in [
            (
                f"match_substring(message, {RARE!r})",
                pc.match_substring(pc.field("message"), RARE),
                f"contains(message, '{RARE}')",
            ),
            ('has_token(url, "4242") (not rare)', index.has_token("url", "4242"), None),
        ]:
            with index.BloomIndex(target) as fresh:  # every read of the index counted
                result = pb.prune(root, expr, index=fresh)
                index_bytes, index_reads = fresh.bytes_read, fresh.reads
            got = result.dataset.to_table(filter=expr).sort_by("ts")
            unpruned = ds.dataset(root).to_table(filter=expr).sort_by("ts")
            assert got.equals(unpruned), label
            kept = sum(os.path.getsize(p) for p in result.dataset.files)
            read = index_bytes + kept
            fraction = read / total
            print(
                f"{label}: {got.num_rows} rows (unpruned {unpruned.num_rows}); "
                f"{len(result.dataset.files)} of {len(paths)} files kept; "
                f"index read {index_bytes:,} B in {index_reads} reads (its footer, file list, "
                "slices and entries)"
            )
            if sql is None:
                report(f"bytes read / files' bytes (%): {label}", 100 * fraction)
                continue
            ok &= report(
                f"bytes read / files' bytes (%): {label}",
                100 * fraction,
                "<= 2 %",
                fraction <= 0.02,
            )
            query = f"SELECT * FROM read_parquet('{glob}') WHERE {sql}"
            theirs = con.sql(query).arrow()
            if isinstance(theirs, pa.RecordBatchReader):
                theirs = theirs.read_all()
            assert theirs.num_rows == got.num_rows
            assert theirs.sort_by("ts").column("message").equals(got.column("message"))

            def ours(expr: pc.Expression = expr) -> None:
                pb.prune(root, expr, index=opened).dataset.to_table(filter=expr)

            times = best_in_turns(
                {
                    "ours": ours,
                    "duckdb": lambda query=query: con.sql(query).arrow(),
                    "unpruned": lambda expr=expr: ds.dataset(root).to_table(filter=expr),
                },
                args.repeat,
            )
            print(
                f"  best of {args.repeat}: ours {times['ours'] * 1e3:.1f} ms, DuckDB "
                f"{times['duckdb'] * 1e3:.1f} ms, pyarrow unpruned {times['unpruned'] * 1e3:.1f} ms"
            )
            report("DuckDB's time / ours", times["duckdb"] / times["ours"])
            report("pyarrow unpruned scan's time / ours", times["unpruned"] / times["ours"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

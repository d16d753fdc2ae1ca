"""Rewriting a large object on S3: bytes transferred against what the rewrite must move.

The S3 server is moto on 127.0.0.1 (tests/remote/servers.py). One file written by pyarrow:
10 filtered columns (int64 keys and short strings) and incompressible payload columns that make
up most of its size, without filters. ``rewrite_bloom_filters(src_url, dst_url, columns=the
10)`` then copies the body on the server (UploadPartCopy), downloads only the chunks it hashes
and uploads only the filters and the footer (and any part slack).

Reported, from the rewrite's report and checked against the server's recorder (the ranges of
every GET, the bodies of every PUT): bytes downloaded, uploaded and copied on the server, the
requests by kind, and the target: downloaded + uploaded <= the filtered columns' compressed size
+ filters + footer + 2 x 5 MiB. The result is compared with the local rewrite of the same file,
byte for byte.

Run: ``.venv/bin/python benchmarks/bench_object_rewrite.py [--size-mb 1024]``.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' servers

import parquet_bloom as pb
from tests.remote.servers import S3Requests, S3Session, start_s3_server

MiB = 1024 * 1024
FILTERED = [f"k{i}" for i in range(10)]
PART_MINIMUM = 5 * MiB


def write_file(path: Path, size_mb: int, row_groups: int) -> None:
    """About ``size_mb`` MiB: per row, 10 filtered columns (~60 bytes) and 940 bytes of
    payload."""
    rows = size_mb * MiB // 1000
    per_group = -(-rows // row_groups)
    rng = np.random.default_rng(0)
    with pq.ParquetWriter(path, schema(), compression="none") as writer:
        for start in range(0, rows, per_group):
            n = min(per_group, rows - start)
            ids = np.arange(start, start + n, dtype=np.int64)
            columns: dict[str, pa.Array] = {}
            for i, name in enumerate(FILTERED):
                if i % 2:
                    columns[name] = pa.array(ids * 7919 + i)
                else:
                    columns[name] = pa.array(np.char.add("v", (ids * 31 + i).astype(str)))
            for j in range(4):
                columns[f"p{j}"] = pa.FixedSizeBinaryArray.from_buffers(
                    pa.binary(235), n, [None, pa.py_buffer(rng.bytes(235 * n))]
                )
            writer.write_table(pa.table(columns, schema=schema()), row_group_size=n)


def schema() -> pa.Schema:
    fields = [pa.field(n, pa.int64() if i % 2 else pa.string()) for i, n in enumerate(FILTERED)]
    fields += [pa.field(f"p{j}", pa.binary(235)) for j in range(4)]
    return pa.schema(fields)


def filtered_compressed(path: Path) -> int:
    md = pq.read_metadata(path)
    return sum(
        md.row_group(i).column(j).total_compressed_size
        for i in range(md.num_row_groups)
        for j in range(md.num_columns)
        if md.row_group(i).column(j).path_in_schema in FILTERED
    )


def sha256_of(stream: object) -> str:
    digest = hashlib.sha256()
    while block := stream.read(16 * MiB):  # type: ignore[attr-defined]
        digest.update(block)
    return digest.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--row-groups", type=int, default=8)
    args = parser.parse_args()

    server = start_s3_server()
    s3 = S3Session(server)
    requests = S3Requests(server)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / "big.parquet"
            write_file(local, args.size_mb, args.row_groups)
            size = local.stat().st_size
            bucket = s3.bucket()
            began = time.perf_counter()
            src = s3.upload(local, f"{bucket}/big.parquet")
            print(f"uploaded the source in {time.perf_counter() - began:.1f} s", flush=True)
            dst = f"s3://{bucket}/big-filtered.parquet"
            requests.reset()
            start = time.perf_counter()
            report = pb.rewrite_bloom_filters(
                src, dst, columns=FILTERED, storage_options=s3.storage_options
            )
            seconds = time.perf_counter() - start
            recorded = requests.list()
            requests.stop()

            local_dst = Path(tmp) / "local.parquet"
            pb.rewrite_bloom_filters(local, local_dst, columns=FILTERED)
            with local_dst.open("rb") as f:
                expected = sha256_of(f)
            with s3.fs().open(dst, "rb", block_size=64 * MiB) as f:
                same = sha256_of(f) == expected

            md = pq.read_metadata(local)
            footer_start = size - 8 - md.serialized_size
            new_bytes = report.bytes_after - footer_start  # filters + footer
            chunks = filtered_compressed(local)
    finally:
        server.stop()

    kinds: collections.Counter[str] = collections.Counter()
    got = 0
    for r in recorded:
        if r.method == "GET":
            first, last = r.range.removeprefix("bytes=").split("-")  # type: ignore[union-attr]
            got += int(last) - int(first) + 1
        query = set(r.query)
        kind = {
            frozenset(): r.method,
            frozenset({"uploads"}): "CreateMultipartUpload",
            frozenset({"uploadId"}): "CompleteMultipartUpload",
        }.get(frozenset(query))
        if kind is None:
            copy = any(k.lower() == "x-amz-copy-source" for k in r.headers)
            kind = "UploadPartCopy" if copy else "UploadPart"
        kinds[kind] += 1

    transferred = report.bytes_downloaded + report.bytes_uploaded
    bound = chunks + new_bytes + 2 * PART_MINIMUM
    print(f"object: {size / MiB:,.1f} MiB, {md.num_row_groups} row groups, 10 filtered columns")
    print(f"filtered columns' compressed size: {chunks / MiB:,.2f} MiB")
    print(f"filters + footer written:          {new_bytes / MiB:,.2f} MiB")
    print(
        f"downloaded: {report.bytes_downloaded / MiB:,.2f} MiB (server's GET ranges: "
        f"{got / MiB:,.2f} MiB)"
    )
    print(f"uploaded:   {report.bytes_uploaded / MiB:,.2f} MiB")
    print(f"copied on the server: {report.bytes_copied / MiB:,.2f} MiB")
    print(f"requests: {dict(sorted(kinds.items()))}")
    print(f"rewrite wall time: {seconds:.1f} s")
    print(f"result equals the local rewrite byte for byte: {same}")
    ok = transferred <= bound and same and got == report.bytes_downloaded
    print(
        f"target: transferred {transferred / MiB:,.2f} MiB <= {bound / MiB:,.2f} MiB "
        f"(chunks + filters + footer + 2 x 5 MiB): {'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""The benchmarks' S3 server in its own process serves each object's bytes from memory once
read (tests/remote/servers.py, ``_ranges_from_memory``): ranges of the object as written, and
of the new bytes once it is written again."""

from __future__ import annotations

import os

from tests.remote.servers import S3ServerProcess, S3Session


def test_ranges_are_the_bytes_last_written() -> None:
    with S3ServerProcess(max_seconds=120) as server:
        s3 = S3Session(server)
        bucket = s3.bucket()
        client = s3.client()
        fs = s3.fs()
        path = f"{bucket}/blob"
        first = os.urandom(6 << 20)  # past moto's 5 MiB in-memory buffer: a temporary file
        client.put_object(Bucket=bucket, Key="blob", Body=first)
        assert fs.cat_file(path, start=10, end=1000) == first[10:1000]
        assert fs.cat_file(path, start=len(first) - 99) == first[-99:]
        second = os.urandom(3 << 20)
        client.put_object(Bucket=bucket, Key="blob", Body=second)
        assert fs.cat_file(path, start=10, end=1000) == second[10:1000]
        assert fs.cat_file(path) == second
        assert server.counters()["requests"] >= 4

"""The rewrite on object stores, against moto's S3 server and fsspec's memory filesystem.

On S3 the new object appears only when complete (one PutObject, or a multipart upload completed
after every part and aborted on any failure), the unchanged bytes are copied by the store
(UploadPartCopy) so that only the chunks hashed are downloaded and only filters, footer and part
slack uploaded; the result is the local rewrite's, byte for byte. Other stores stream through the
process and commit only when complete.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import _format as fmt
from parquet_bloom._io import object_sink
from parquet_bloom._io.object_sink import MIN_PART_SIZE
from parquet_bloom._rewrite import api
from parquet_bloom.errors import BloomFilterError
from parquet_bloom.testing import assert_bloom_filters_valid
from tests.remote.servers import RecordedRequest, S3Faults, S3Requests, S3Session

# Columns that get filters: their chunks are all the rewrite downloads of the body.
FILTERED = ["id", "name"]


def write_table(path: Path, rows: int, row_group_size: int) -> Path:
    """Random, incompressible columns (the body is mostly ``payload``, never read), two of
    them to be filtered."""
    rng = np.random.default_rng(rows)
    ids = rng.permutation(rows).astype(np.int64)
    payload = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(48), rows, [None, pa.py_buffer(rng.bytes(48 * rows))]
    )
    table = pa.table({"id": ids, "name": pa.array([f"n{v:08x}" for v in ids]), "payload": payload})
    pq.write_table(table, path, row_group_size=row_group_size, compression="none")
    return path


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 13 MiB in 4 row groups: a multipart upload of more than one part."""
    return write_table(tmp_path_factory.mktemp("large") / "large.parquet", 200_000, 50_000)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Under 5 MiB: one PutObject."""
    return write_table(tmp_path_factory.mktemp("small") / "small.parquet", 20_000, 5_000)


def local_rewrite(src: Path, tmp_path: Path, **options: Any) -> bytes:
    dst = tmp_path / "local.parquet"
    pb.rewrite_bloom_filters(src, dst, **options)
    return dst.read_bytes()


def filtered_chunk_bytes(path: Path, columns: list[str]) -> int:
    md = pq.read_metadata(path)
    return sum(
        md.row_group(i).column(j).total_compressed_size
        for i in range(md.num_row_groups)
        for j in range(md.num_columns)
        if md.row_group(i).column(j).path_in_schema in columns
    )


def footer_start(data: bytes) -> int:
    length = int.from_bytes(data[-8:-4], "little")
    return len(data) - fmt.FOOTER_TRAILER_SIZE - length


def get_ranges(requests: list[RecordedRequest]) -> list[tuple[int, int]]:
    """The [start, end) of every GET (every GET the rewrite makes is ranged)."""
    spans = []
    for r in requests:
        if r.method == "GET":
            assert r.range is not None and r.range.startswith("bytes=")
            start, end = r.range.removeprefix("bytes=").split("-")
            spans.append((int(start), int(end) + 1))
    return spans


def ranged_bytes(requests: S3Requests) -> int:
    return sum(end - start for start, end in get_ranges(requests.list()))


def covered(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of spans, merged."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def chunk_spans(path: Path, columns: list[str]) -> list[tuple[int, int]]:
    md = pq.read_metadata(path)
    spans = []
    for i in range(md.num_row_groups):
        for j in range(md.num_columns):
            chunk = md.row_group(i).column(j)
            if chunk.path_in_schema in columns:
                start = chunk.dictionary_page_offset or chunk.data_page_offset
                spans.append((start, start + chunk.total_compressed_size))
    return spans


# -- S3, server-side copy -------------------------------------------------------------------------


def test_a_rewrite_on_s3_copies_the_body_on_the_server_and_sends_only_filters_and_footer(
    s3: S3Session, s3_requests: S3Requests, large: Path, tmp_path: Path
) -> None:
    bucket = s3.bucket()
    src = s3.upload(large, f"{bucket}/t/src.parquet")
    dst = f"s3://{bucket}/t/dst.parquet"
    s3_requests.reset()
    report = pb.rewrite_bloom_filters(
        src, dst, columns=FILTERED, storage_options=s3.storage_options
    )
    requests = s3_requests.list()

    expected = local_rewrite(large, tmp_path, columns=FILTERED)
    assert s3.fs().cat(dst) == expected  # the local rewrite's bytes, exactly
    assert_bloom_filters_valid(dst, storage_options=s3.storage_options)

    body = footer_start(large.read_bytes())  # a pyarrow file without filters: one copied run
    new = len(expected) - body  # the filters and the footer
    assert body > MIN_PART_SIZE
    assert report.bytes_copied == body
    assert report.bytes_uploaded == new
    # Downloaded: the chunks hashed, the tail read for the footer and the leading magic, and
    # not one byte of the unfiltered column, as the server's record of the ranges says. (The
    # page reader reads a page's header ahead, then the page with it: some bytes twice.)
    got = get_ranges(requests)
    (tail,) = [span for span in got if span[1] == large.stat().st_size]  # read_footer's one read
    allowed = [(0, len(fmt.MAGIC)), tail, *chunk_spans(large, FILTERED)]
    outside = [(a, b) for a, b in got if not any(s <= a and b <= e for s, e in covered(allowed))]
    assert outside == []
    assert covered(got) == covered(allowed)  # every filtered chunk, whole
    assert report.bytes_downloaded == sum(b - a for a, b in got)
    chunks = filtered_chunk_bytes(large, FILTERED)
    # The bound: chunks hashed + filters + footer + 2 x 5 MiB.
    assert report.bytes_downloaded + report.bytes_uploaded <= chunks + new + 2 * MIN_PART_SIZE

    methods = [(r.method, tuple(sorted(r.query))) for r in requests if r.method != "GET"]
    copies = -(-body // object_sink.COPY_PART_SIZE)
    assert methods == [
        ("HEAD", ()),
        ("POST", ("uploads",)),
        *[("PUT", ("partNumber", "uploadId"))] * (copies + 1),
        ("POST", ("uploadId",)),
    ]
    copy_requests = [r for r in requests if "x-amz-copy-source" in _lower(r.headers)]
    assert len(copy_requests) == copies
    assert _lower(copy_requests[0].headers)["x-amz-copy-source-range"] == f"bytes=0-{body - 1}"
    assert s3.pending_uploads(bucket) == []


def _lower(headers: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def test_a_small_object_is_sent_in_one_put(
    s3: S3Session, s3_requests: S3Requests, small: Path, tmp_path: Path
) -> None:
    bucket = s3.bucket()
    src = s3.upload(small, f"{bucket}/src.parquet")
    dst = f"s3://{bucket}/dst.parquet"
    s3_requests.reset()
    report = pb.rewrite_bloom_filters(src, dst, columns=["id"], storage_options=s3.storage_options)
    puts = [r for r in s3_requests.list() if r.method in ("PUT", "POST")]
    assert [(r.method, r.query) for r in puts] == [("PUT", {})]
    assert report.bytes_uploaded == report.bytes_after and report.bytes_copied == 0
    # Without server-side copy the body is downloaded for the upload, besides the footer's
    # tail, the magic and the chunk hashed: every byte counted is a byte asked for.
    assert report.bytes_downloaded == ranged_bytes(s3_requests)
    assert report.bytes_downloaded >= report.bytes_before
    assert s3.fs().cat(dst) == local_rewrite(small, tmp_path, columns=["id"])


@pytest.mark.parametrize("direction", ["local to s3", "s3 to local"])
def test_a_rewrite_between_a_local_file_and_s3(
    s3: S3Session, large: Path, tmp_path: Path, direction: str
) -> None:
    bucket = s3.bucket()
    expected = local_rewrite(large, tmp_path, columns=FILTERED)
    if direction == "local to s3":
        dst = f"s3://{bucket}/up.parquet"
        report = pb.rewrite_bloom_filters(
            large, dst, columns=FILTERED, storage_options=s3.storage_options
        )
        assert s3.fs().cat(dst) == expected
        assert report.bytes_uploaded == len(expected) and report.bytes_copied == 0
    else:
        src = s3.upload(large, f"{bucket}/down.parquet")
        out = tmp_path / "down.parquet"
        report = pb.rewrite_bloom_filters(
            src, out, columns=FILTERED, storage_options=s3.storage_options
        )
        assert out.read_bytes() == expected
        assert report.bytes_uploaded == 0
    assert s3.pending_uploads(bucket) == []


# -- S3, in place ---------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["small", "large"])
def test_in_place_on_s3_replaces_the_object(
    s3: S3Session, s3_requests: S3Requests, small: Path, large: Path, tmp_path: Path, which: str
) -> None:
    local = small if which == "small" else large
    bucket = s3.bucket()
    url = s3.upload(local, f"{bucket}/f.parquet")
    etag = s3.fs().info(url)["ETag"]
    s3_requests.reset()
    pb.rewrite_bloom_filters(url, columns=["id"], in_place=True, storage_options=s3.storage_options)
    assert s3.fs().cat(url) == local_rewrite(local, tmp_path, columns=["id"])
    # The write that makes the object appear is conditional on the ETag read.
    final = [r for r in s3_requests.list() if r.method in ("PUT", "POST")][-1]
    assert _lower(final.headers)["if-match"] == etag
    assert s3.objects(bucket) == {"f.parquet": len(local_rewrite(local, tmp_path, columns=["id"]))}


def test_in_place_on_s3_refuses_an_object_that_changed_since_it_was_read(
    s3: S3Session, small: Path, large: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto honours If-Match on PutObject (a small object); it ignores it on
    CompleteMultipartUpload, where the header's presence is what the test above checks."""
    bucket = s3.bucket()
    url = s3.upload(small, f"{bucket}/f.parquet")
    write_footer = api.write_footer

    def changed_meanwhile(sink: Any, md: Any, seal: Any = None) -> int:
        s3.upload(large, url)  # another writer replaces the object during the rewrite
        return write_footer(sink, md, seal)

    monkeypatch.setattr(api, "write_footer", changed_meanwhile)
    with pytest.raises(BloomFilterError, match="changed since it was read") as caught:
        pb.rewrite_bloom_filters(
            url, columns=["id"], in_place=True, storage_options=s3.storage_options
        )
    assert caught.value.source == url
    assert s3.fs().cat(url) == large.read_bytes()  # the other writer's object, untouched


# -- S3, faults -----------------------------------------------------------------------------------


def _parts(s3: S3Session, s3_requests: S3Requests, large: Path, bucket: str) -> int:
    """How many parts the rewrite of ``large`` sends (a dry run to another key)."""
    src = f"s3://{bucket}/src.parquet"
    s3_requests.reset()
    pb.rewrite_bloom_filters(
        src, f"s3://{bucket}/count.parquet", columns=FILTERED, storage_options=s3.storage_options
    )
    s3.fs().rm(f"{bucket}/count.parquet")
    return sum(1 for r in s3_requests.list() if "partNumber" in r.query)


def test_an_upload_that_fails_at_any_part_or_at_completion_leaves_nothing(
    s3: S3Session, s3_requests: S3Requests, s3_faults: S3Faults, large: Path
) -> None:
    bucket = s3.bucket()
    s3.upload(large, f"{bucket}/src.parquet")
    parts = _parts(s3, s3_requests, large, bucket)
    assert parts >= 2  # a copied part and an uploaded one
    failures = [("PUT", "partNumber=", n) for n in range(1, parts + 1)]
    failures.append(("POST", "uploadId=", 1))
    for method, query, nth in failures:
        s3_faults.clear()
        # Every matching request from the nth on fails, so that the client's retries do too.
        s3_faults.fail(method, query, nth=nth, status=403, times=None)
        with pytest.raises(OSError):
            pb.rewrite_bloom_filters(
                f"s3://{bucket}/src.parquet",
                f"s3://{bucket}/dst.parquet",
                columns=FILTERED,
                storage_options=s3.storage_options,
            )
        assert s3_faults.injected, (method, nth)
        assert s3.objects(bucket) == {"src.parquet": large.stat().st_size}, (method, nth)
        assert s3.pending_uploads(bucket) == [], (method, nth)


def test_an_interrupted_upload_is_aborted(
    s3: S3Session, large: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = s3.bucket()
    src = s3.upload(large, f"{bucket}/src.parquet")
    send_part = object_sink.S3Sink._send_part

    def interrupted(self: object_sink.S3Sink, upload_id: str, number: int, part: Any) -> str:
        if number == 2:
            raise KeyboardInterrupt
        return send_part(self, upload_id, number, part)

    monkeypatch.setattr(object_sink.S3Sink, "_send_part", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pb.rewrite_bloom_filters(
            src, f"s3://{bucket}/dst.parquet", columns=FILTERED, storage_options=s3.storage_options
        )
    assert s3.objects(bucket) == {"src.parquet": large.stat().st_size}
    assert s3.pending_uploads(bucket) == []


def test_a_rewrite_that_fails_before_sending_sends_nothing(
    s3: S3Session, s3_requests: S3Requests, large: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = s3.bucket()
    src = s3.upload(large, f"{bucket}/src.parquet")

    def failing(sink: Any, md: Any, seal: Any = None) -> int:
        raise OSError("the footer could not be written")

    monkeypatch.setattr(api, "write_footer", failing)
    s3_requests.reset()
    with pytest.raises(OSError, match="footer"):
        pb.rewrite_bloom_filters(
            src, f"s3://{bucket}/dst.parquet", columns=FILTERED, storage_options=s3.storage_options
        )
    assert {r.method for r in s3_requests.list()} == {"HEAD", "GET"}
    assert s3.objects(bucket) == {"src.parquet": large.stat().st_size}


# -- other stores: streamed -----------------------------------------------------------------------


@pytest.fixture
def memory() -> Any:
    fs = fsspec.filesystem("memory")
    root = f"/pb-{id(fs)}-{np.random.default_rng().integers(1 << 30)}"
    yield fs, root
    fs.rm(root, recursive=True)


def test_memory_urls_are_rewritten_through_the_process(
    memory: Any, small: Path, tmp_path: Path
) -> None:
    fs, root = memory
    fs.pipe(f"{root}/src.parquet", small.read_bytes())
    expected = local_rewrite(small, tmp_path, columns=["id"])
    report = pb.rewrite_bloom_filters(
        f"memory://{root}/src.parquet", f"memory://{root}/dst.parquet", columns=["id"]
    )
    assert fs.cat(f"{root}/dst.parquet") == expected
    assert report.bytes_uploaded == len(expected) and report.bytes_copied == 0
    pb.rewrite_bloom_filters(f"memory://{root}/src.parquet", columns=["id"], in_place=True)
    assert fs.cat(f"{root}/src.parquet") == expected


def test_a_streamed_rewrite_that_fails_commits_nothing(
    memory: Any, small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs, root = memory
    fs.pipe(f"{root}/src.parquet", small.read_bytes())

    def failing(sink: Any, md: Any, seal: Any = None) -> int:
        sink.write(b"half a footer")
        raise OSError("the footer could not be written")

    monkeypatch.setattr(api, "write_footer", failing)
    with pytest.raises(OSError, match="footer"):
        pb.rewrite_bloom_filters(
            f"memory://{root}/src.parquet", f"memory://{root}/dst.parquet", columns=["id"]
        )
    assert not fs.exists(f"{root}/dst.parquet")
    with pytest.raises(OSError, match="footer"):
        pb.rewrite_bloom_filters(f"memory://{root}/src.parquet", columns=["id"], in_place=True)
    assert fs.cat(f"{root}/src.parquet") == small.read_bytes()

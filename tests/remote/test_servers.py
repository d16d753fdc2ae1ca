"""The servers the object-store tests run against, tested themselves: the recorder counts
exactly what a client sends, a fault fails exactly the request it names, the HTTP server
serves exact ranges, and its misbehaving twins misbehave as they say."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.remote.servers import (
    Faults,
    HttpServer,
    RecordedRequest,
    S3Faults,
    S3Requests,
    S3Session,
    json_objects,
    parse_range,
    start_s3_server,
)

DATA = bytes(range(256)) * 400  # 102,400 bytes
MiB = 1 << 20


def _stored(s3: S3Session, tmp_path: Path, data: bytes = DATA, name: str = "f.bin") -> str:
    local = tmp_path / name
    local.write_bytes(data)
    return s3.upload(local, f"{s3.bucket()}/data/{name}")


def _no_retries_client(s3: S3Session, read_timeout: float = 60) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=s3.endpoint_url,
        config=Config(
            retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=read_timeout
        ),
    )


# --- the recorder ----------------------------------------------------------------------------


def test_set_up_is_not_recorded(s3: S3Session, s3_requests: S3Requests, tmp_path: Path) -> None:
    url = _stored(s3, tmp_path)
    assert s3.objects(url.split("/")[2]) == {"data/f.bin": len(DATA)}
    assert s3_requests.list() == []
    assert s3_requests.count() == 0


def test_one_ranged_read_is_one_get(s3: S3Session, s3_requests: S3Requests, tmp_path: Path) -> None:
    url = _stored(s3, tmp_path)
    fs = s3.fs()
    assert fs.cat_file(url, start=1000, end=1100) == DATA[1000:1100]
    [get] = s3_requests.list()
    bucket, key = url.removeprefix("s3://").split("/", 1)
    assert (get.method, get.bucket, get.key, get.path) == ("GET", bucket, key, f"{bucket}/{key}")
    assert get.range == "bytes=1000-1099"
    assert (s3_requests.count(), s3_requests.count("GET"), s3_requests.count("HEAD")) == (1, 1, 0)

    assert fs.info(url)["size"] == len(DATA)
    assert [r.method for r in s3_requests.list()] == ["GET", "HEAD"]
    s3_requests.reset()
    assert s3_requests.count() == 0
    fs.cat_file(url, start=0, end=10)
    fs.cat_file(url, start=10, end=20)
    assert [r.range for r in s3_requests.list()] == ["bytes=0-9", "bytes=10-19"]


def test_a_multipart_upload_is_recorded_part_by_part(
    s3: S3Session, s3_requests: S3Requests
) -> None:
    bucket = s3.bucket()
    with s3.fs().open(f"{bucket}/big.bin", "wb", block_size=5 * MiB) as f:
        f.write(b"x" * (5 * MiB))
        f.flush()  # the first part, full-sized
        f.write(b"x" * 1000)  # the last, shorter
    recorded = s3_requests.list()
    assert [(r.method, _s3_call(r)) for r in recorded] == [
        ("POST", "CreateMultipartUpload"),
        ("PUT", "UploadPart 1"),
        ("PUT", "UploadPart 2"),
        ("POST", "CompleteMultipartUpload"),
    ]
    assert s3.objects(bucket) == {"big.bin": 5 * MiB + 1000}
    assert s3.pending_uploads(bucket) == []


def test_the_recording_is_read_when_entries_share_a_line() -> None:
    # the shape a CI run recorded: one entry, then a second on the same line, then newlines
    big = json.dumps({"url": "/b/a", "body": "x" * 10_000})
    small = json.dumps({"url": "/b/b", "body": ""})
    text = f"{big}{small}\n\n{small}\n"
    assert [row["url"] for row in json_objects(text)] == ["/b/a", "/b/b", "/b/b"]
    assert json_objects("") == [] and json_objects("\n") == []
    with pytest.raises(json.JSONDecodeError):
        json_objects(big[:-1] + "\n")


def _s3_call(r: RecordedRequest) -> str:
    if "uploads" in r.query:
        return "CreateMultipartUpload"
    if "partNumber" in r.query:
        return f"UploadPart {r.query['partNumber']}"
    if "uploadId" in r.query and r.method == "POST":
        return "CompleteMultipartUpload"
    return r.method


def test_the_environment_is_the_credential_chain(
    s3: S3Session, s3_requests: S3Requests, tmp_path: Path
) -> None:
    """``s3://`` URLs work with no storage options: endpoint, keys and region come from the
    environment the fixture set."""
    import fsspec

    url = _stored(s3, tmp_path)
    with fsspec.open(url, "rb", skip_instance_cache=True) as f:
        f.seek(100)
        assert f.read(50) == DATA[100:150]
    assert s3_requests.count("GET") == 1


def test_pyarrow_reads_through_the_same_server(
    s3: S3Session, s3_requests: S3Requests, tmp_path: Path
) -> None:
    url = _stored(s3, tmp_path)
    with s3.arrow_fs().open_input_file(url.removeprefix("s3://")) as f:
        assert f.read_at(10, 5000) == DATA[5000:5010]
    assert [r.method for r in s3_requests.list()] == ["HEAD", "GET"]
    assert s3_requests.list()[1].range == "bytes=5000-5009"


# --- faults ----------------------------------------------------------------------------------


def _parts_upload(client: Any, bucket: str, parts: int) -> tuple[str, list[Exception | None]]:
    upload = client.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    outcomes: list[Exception | None] = []
    for number in range(1, parts + 1):
        try:
            client.upload_part(
                Bucket=bucket, Key="k", UploadId=upload, PartNumber=number, Body=b"p" * 100
            )
            outcomes.append(None)
        except Exception as e:
            outcomes.append(e)
    return upload, outcomes


def test_a_fault_fails_the_nth_matching_request_and_nothing_else(
    s3: S3Session, s3_requests: S3Requests, s3_faults: S3Faults
) -> None:
    from botocore.exceptions import ClientError

    bucket = s3.bucket()
    client = _no_retries_client(s3)
    s3_faults.fail("PUT", "partNumber=", nth=2)
    upload, outcomes = _parts_upload(client, bucket, 4)
    assert [o is None for o in outcomes] == [True, False, True, True]
    error = outcomes[1]
    assert isinstance(error, ClientError)
    assert error.response["Error"]["Code"] == "InternalError"
    assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    [fault] = s3_faults.injected
    assert (fault.method, fault.path, fault.status) == ("PUT", f"/{bucket}/k", 500)
    assert "partNumber=2" in fault.query
    # moto never saw the failed request: the recorder has the other five.
    assert [_s3_call(r) for r in s3_requests.list()] == [
        "CreateMultipartUpload",
        "UploadPart 1",
        "UploadPart 3",
        "UploadPart 4",
    ]
    assert s3.pending_uploads(bucket) == ["k"]
    client.abort_multipart_upload(Bucket=bucket, Key="k", UploadId=upload)
    assert s3.pending_uploads(bucket) == []


def test_a_fault_can_repeat_and_choose_its_status(
    s3: S3Session, s3_requests: S3Requests, s3_faults: S3Faults
) -> None:
    from botocore.exceptions import ClientError

    bucket = s3.bucket()
    client = _no_retries_client(s3)
    s3_faults.fail("PUT", "partNumber=", nth=3, times=None, status=503)
    upload, outcomes = _parts_upload(client, bucket, 5)
    assert [o is None for o in outcomes] == [True, True, False, False, False]
    assert all(
        isinstance(o, ClientError) and o.response["Error"]["Code"] == "SlowDown"
        for o in outcomes[2:]
    )
    assert [f.status for f in s3_faults.injected] == [503, 503, 503]
    s3_faults.clear()
    assert client.list_parts(Bucket=bucket, Key="k", UploadId=upload)["Parts"][-1]["PartNumber"]
    client.abort_multipart_upload(Bucket=bucket, Key="k", UploadId=upload)


def test_a_dropped_connection(
    s3: S3Session, s3_requests: S3Requests, s3_faults: S3Faults, tmp_path: Path
) -> None:
    from botocore.exceptions import ConnectionClosedError, EndpointConnectionError

    url = _stored(s3, tmp_path)
    bucket, key = url.removeprefix("s3://").split("/", 1)
    s3_faults.fail("GET", drop=True)
    with pytest.raises((ConnectionClosedError, EndpointConnectionError)):
        _no_retries_client(s3).get_object(Bucket=bucket, Key=key, Range="bytes=0-9")
    assert [f.status for f in s3_faults.injected] == [None]
    assert s3_requests.count() == 0


def test_s3fs_retries_a_5xx_under_its_own_policy(
    s3: S3Session, s3_requests: S3Requests, s3_faults: S3Faults, tmp_path: Path
) -> None:
    url = _stored(s3, tmp_path)
    s3_faults.fail("GET", nth=1, status=503)
    assert s3.fs().cat_file(url, start=0, end=100) == DATA[:100]
    assert len(s3_faults.injected) == 1
    assert s3_requests.count("GET") == 1  # the retry, the one moto answered


def test_a_lost_reply_is_handled_by_moto_and_never_answered(
    s3: S3Session, s3_requests: S3Requests, s3_faults: S3Faults
) -> None:
    from botocore.exceptions import ConnectionClosedError, EndpointConnectionError

    bucket = s3.bucket()
    s3_faults.fail("PUT", mode="lose_reply")
    with pytest.raises((ConnectionClosedError, EndpointConnectionError)):
        _no_retries_client(s3).put_object(Bucket=bucket, Key="k", Body=b"x" * 100)
    [fault] = s3_faults.injected
    assert (fault.mode, fault.status) == ("lose_reply", None)
    assert s3.objects(bucket) == {"k": 100}  # written, though its answer was lost
    assert s3_requests.count("PUT") == 1


@pytest.mark.parametrize("mode", ["short", "reset"])
def test_a_body_cut_short(s3: S3Session, s3_faults: S3Faults, tmp_path: Path, mode: str) -> None:
    from botocore.exceptions import ConnectionClosedError, ResponseStreamingError

    url = _stored(s3, tmp_path)
    bucket, key = url.removeprefix("s3://").split("/", 1)
    s3_faults.fail("GET", mode=mode)
    answer = _no_retries_client(s3).get_object(Bucket=bucket, Key=key, Range="bytes=0-999")
    assert answer["ContentLength"] == 1000
    with pytest.raises((ResponseStreamingError, ConnectionClosedError)):
        answer["Body"].read()
    assert [f.mode for f in s3_faults.injected] == [mode]


def test_a_stall_holds_the_request_until_cleared(
    s3: S3Session, s3_requests: S3Requests, s3_faults: S3Faults, tmp_path: Path
) -> None:
    from botocore.exceptions import ReadTimeoutError

    url = _stored(s3, tmp_path)
    bucket, key = url.removeprefix("s3://").split("/", 1)
    s3_faults.fail("GET", mode="stall")
    client = _no_retries_client(s3, read_timeout=0.5)
    with pytest.raises(ReadTimeoutError):
        client.get_object(Bucket=bucket, Key=key, Range="bytes=0-9")
    s3_faults.clear()  # ends the stalled request
    assert s3_requests.count("GET") == 0
    assert client.get_object(Bucket=bucket, Key=key, Range="bytes=0-9")["Body"].read() == DATA[:10]


def test_fail_checks_its_arguments(s3_faults: S3Faults) -> None:
    with pytest.raises(ValueError, match="count from 1"):
        s3_faults.fail("GET", nth=0)
    with pytest.raises(ValueError, match="count from 1"):
        s3_faults.fail("GET", times=0)
    with pytest.raises(ValueError, match="mode is one of"):
        s3_faults.fail("GET", mode="explode")


# --- the HTTP server -------------------------------------------------------------------------


def _get(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> Any:
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    return urllib.request.urlopen(request, timeout=10)


@pytest.fixture
def served(http_server: HttpServer) -> str:
    (http_server.root / "d").mkdir(exist_ok=True)
    (http_server.root / "d" / "f.bin").write_bytes(DATA)
    http_server.requests.reset()
    return http_server.url("d/f.bin")


@pytest.mark.parametrize(
    ("header", "status", "span"),
    [
        ("bytes=10-19", 206, (10, 19)),
        ("bytes=100000-", 206, (100000, len(DATA) - 1)),
        ("bytes=-100", 206, (len(DATA) - 100, len(DATA) - 1)),
        ("bytes=-200000", 206, (0, len(DATA) - 1)),  # a suffix longer than the file: all of it
        ("bytes=102300-999999", 206, (102300, len(DATA) - 1)),  # an end past the file: clipped
        (None, 200, (0, len(DATA) - 1)),
        ("bytes=0-9,20-29", 200, (0, len(DATA) - 1)),  # several ranges: the whole file
    ],
)
def test_ranges(
    http_server: HttpServer, served: str, header: str | None, status: int, span: tuple[int, int]
) -> None:
    with _get(served, {"Range": header} if header else {}) as r:
        body = r.read()
        assert r.status == status
        assert r.headers["Accept-Ranges"] == "bytes"
        assert int(r.headers["Content-Length"]) == len(body)
        if status == 206:
            assert r.headers["Content-Range"] == f"bytes {span[0]}-{span[1]}/{len(DATA)}"
    assert body == DATA[span[0] : span[1] + 1]
    [logged] = http_server.requests.list()
    assert (logged.method, logged.path, logged.range) == ("GET", "/d/f.bin", header)


@pytest.mark.parametrize(
    "header", [f"bytes={len(DATA)}-", f"bytes={len(DATA) + 5}-9999999", "bytes=-0"]
)
def test_unsatisfiable_ranges(served: str, header: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as error:
        _get(served, {"Range": header})
    assert error.value.code == 416
    assert error.value.headers["Content-Range"] == f"bytes */{len(DATA)}"
    error.value.close()


def test_head_and_missing_files(http_server: HttpServer, served: str) -> None:
    with _get(served, method="HEAD") as r:
        assert (r.status, r.read()) == (200, b"")
        assert int(r.headers["Content-Length"]) == len(DATA)
        assert r.headers["Accept-Ranges"] == "bytes"
    for missing in ("d/nothing.bin", "../etc/passwd", "d"):
        with pytest.raises(urllib.error.HTTPError) as error:
            _get(http_server.url(missing))
        assert error.value.code == 404
        error.value.close()
    assert [r.method for r in http_server.requests] == ["HEAD", "GET", "GET", "GET"]
    assert (http_server.requests.count("HEAD"), http_server.requests.count("GET")) == (1, 3)


def test_parse_range_rejects_what_it_does_not_serve() -> None:
    assert parse_range("bytes=5-3", 10) is None  # invalid: ignored, the whole file
    assert parse_range("items=0-3", 10) is None
    assert parse_range("bytes=-", 10) is None
    assert parse_range("bytes=-5", 0) == "unsatisfiable"
    assert parse_range("bytes=0-0", 1) == (0, 0)


def test_fsspec_http_reads_a_range_in_one_get(http_server: HttpServer, served: str) -> None:
    """fsspec's HTTP filesystem (aiohttp) reads ``cat_file(url, start, end)`` in one GET with
    a Range header, a negative ``start`` as a suffix range, and HEADs only for ``info``."""
    import fsspec

    fs = fsspec.filesystem("http", skip_instance_cache=True)
    assert fs.cat_file(served, start=5, end=25) == DATA[5:25]
    assert fs.cat_file(served, start=-64) == DATA[-64:]
    assert fs.info(served)["size"] == len(DATA)
    assert [(r.method, r.range) for r in http_server.requests] == [
        ("GET", "bytes=5-24"),
        ("GET", "bytes=-64"),
        ("HEAD", None),
    ]


# --- the misbehaving servers -----------------------------------------------------------------


def test_the_short_server_sends_half_the_body(http_short_server: HttpServer) -> None:
    (http_short_server.root / "f.bin").write_bytes(DATA)
    http_short_server.requests.reset()
    url = http_short_server.url("f.bin")
    with _get(url, method="HEAD") as r:
        assert int(r.headers["Content-Length"]) == len(DATA)
    with _get(url, {"Range": "bytes=0-999"}) as r:
        assert r.status == 206
        assert r.headers["Content-Length"] == "1000"
        with pytest.raises(http.client.IncompleteRead) as error:
            r.read()
    assert error.value.partial == DATA[:500]
    assert http_short_server.requests.count("GET") == 1


@pytest.mark.parametrize("status", [404, 500, 503])
def test_the_http_server_fails_the_nth_request_with_a_status(
    http_server: HttpServer, http_faults: Faults, status: int
) -> None:
    (http_server.root / "f.bin").write_bytes(DATA)
    url = http_server.url("f.bin")
    http_faults.fail("GET", path_contains="/f.bin", nth=2, status=status)
    with _get(url, {"Range": "bytes=0-9"}) as r:
        assert r.read() == DATA[:10]
    with pytest.raises(urllib.error.HTTPError) as error:
        _get(url, {"Range": "bytes=0-9"})
    error.value.close()
    assert error.value.code == status
    with _get(url, {"Range": "bytes=0-9"}) as r:
        assert r.read() == DATA[:10]
    assert [(f.method, f.path, f.status) for f in http_faults.injected] == [
        ("GET", "/f.bin", status)
    ]


@pytest.mark.parametrize("mode", ["short", "reset"])
def test_the_http_server_cuts_a_body_short(
    http_server: HttpServer, http_faults: Faults, mode: str
) -> None:
    (http_server.root / "f.bin").write_bytes(DATA)
    http_faults.fail("GET", mode=mode)
    with _get(http_server.url("f.bin"), {"Range": "bytes=0-999"}) as r:
        assert r.headers["Content-Length"] == "1000"
        with pytest.raises((http.client.IncompleteRead, ConnectionResetError)):
            r.read()


@pytest.mark.parametrize("mode", ["drop", "lose_reply", "stall"])
def test_the_http_server_leaves_a_request_unanswered(
    http_server: HttpServer, http_faults: Faults, mode: str
) -> None:
    (http_server.root / "f.bin").write_bytes(DATA)
    http_faults.fail("GET", mode=mode)
    request = urllib.request.Request(http_server.url("f.bin"), headers={"Range": "bytes=0-9"})
    with pytest.raises((OSError, http.client.HTTPException)):
        urllib.request.urlopen(request, timeout=0.5)
    http_faults.clear()
    with _get(http_server.url("f.bin"), {"Range": "bytes=0-9"}) as r:
        assert r.read() == DATA[:10]


def test_the_stall_server_stalls_past_a_client_timeout(http_stall_server: HttpServer) -> None:
    http_stall_server.requests.reset()
    url = http_stall_server.url("f.bin")
    request = urllib.request.Request(url, headers={"Range": "bytes=0-9"})
    with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)) as error:
        urllib.request.urlopen(request, timeout=0.5)
    if isinstance(error.value, urllib.error.URLError):
        assert isinstance(error.value.reason, TimeoutError)
    [logged] = http_stall_server.requests.list()
    assert (logged.method, logged.path, logged.range) == ("GET", "/f.bin", "bytes=0-9")


def test_fsspec_http_sees_the_short_body(http_short_server: HttpServer) -> None:
    """aiohttp refuses a body shorter than its Content-Length (the error a client must turn
    into a located one)."""
    import aiohttp
    import fsspec

    (http_short_server.root / "g.bin").write_bytes(DATA)
    fs = fsspec.filesystem("http", skip_instance_cache=True)
    with pytest.raises(aiohttp.ClientPayloadError, match="received 500 of 1000 bytes"):
        fs.cat_file(http_short_server.url("g.bin"), start=0, end=1000)


def test_fsspec_http_times_out_on_the_stall(http_stall_server: HttpServer) -> None:
    import aiohttp
    import fsspec
    from fsspec.exceptions import FSTimeoutError

    http_stall_server.requests.reset()
    fs = fsspec.filesystem(
        "http",
        skip_instance_cache=True,
        client_kwargs={"timeout": aiohttp.ClientTimeout(total=0.5)},
    )
    with pytest.raises(FSTimeoutError):
        fs.cat_file(http_stall_server.url("g.bin"), start=-100)
    assert [(r.method, r.range) for r in http_stall_server.requests] == [("GET", "bytes=-100")]


def test_a_server_of_its_own_for_benchmarks(tmp_path: Path) -> None:
    """``start_s3_server(delay=...)``: a second server, every request delayed, stopped by
    ``with``; the same recorder (one a process) counts its requests."""
    with start_s3_server(delay=0.001) as server:
        assert server.faults.delay == 0.001
        session = S3Session(server)
        url = _stored(session, tmp_path)
        requests = S3Requests(server)
        try:
            assert session.fs().cat_file(url, start=-10) == DATA[-10:]
            [get] = requests.list()
            assert (get.method, get.range) == ("GET", "bytes=-10")
        finally:
            requests.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(server.endpoint_url, timeout=5)

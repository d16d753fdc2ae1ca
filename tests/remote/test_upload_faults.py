"""Faults on the upload side of an S3 rewrite, against moto's S3 server: a reply lost after the
store did the request, an error status, a reply cut short, on each request that writes.

After each, either the rewrite succeeded and the object is the fault-free rewrite's, byte for
byte, or it raised an error naming the object's URL and there is no object at the target (in
place: the original, untouched); and no multipart upload is left pending.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import parquet_bloom as pb
from parquet_bloom._io import object_sink
from parquet_bloom._io.object_sink import WRITE_TOKEN_KEY
from parquet_bloom.errors import BloomFilterError
from tests.remote.servers import S3Faults, S3Requests, S3Session
from tests.remote.test_rewrite_remote import write_table

FILTERED = ["id", "name"]
# With every reply lost the client retries up to its limit: botocore's attempts (5 by
# default), each time s3fs calls again (5 times). Two attempts a call keep these tests short;
# the retries are the same kind.
FEW_RETRIES = {"config_kwargs": {"retries": {"total_max_attempts": 2}}}


@dataclass(frozen=True)
class Request:
    """An upload-side request: the file whose rewrite sends it, and how the fault rule
    matches it (method, a substring of the query)."""

    file: str
    method: str
    query: str | None


# The small file's object is one PutObject; the large one's a multipart upload whose first part
# is the body copied by the store and whose second holds the filters and the footer.
REQUESTS = {
    "PutObject": Request("small", "PUT", None),
    "CreateMultipartUpload": Request("large", "POST", "uploads"),
    "UploadPartCopy": Request("large", "PUT", "partNumber=1"),
    "UploadPart": Request("large", "PUT", "partNumber=2"),
    "CompleteMultipartUpload": Request("large", "POST", "uploadId="),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("upload-faults")
    return {
        "small": write_table(root / "small.parquet", 20_000, 5_000),  # under 5 MiB
        "large": write_table(root / "large.parquet", 100_000, 25_000),  # 7.4 MB: two parts
    }


@pytest.fixture(scope="module")
def expected(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Each file's rewrite without faults (the local rewrite: the S3 one equals it, as
    test_rewrite_remote checks)."""
    out = {}
    for name, path in files.items():
        dst = tmp_path_factory.mktemp("expected") / path.name
        pb.rewrite_bloom_filters(path, dst, columns=FILTERED)
        out[name] = dst.read_bytes()
    return out


@dataclass
class Run:
    bucket: str
    src: str
    target: str
    original: bytes
    error: BaseException | None = None


def rewrite(
    s3: S3Session,
    files: dict[str, Path],
    which: str,
    arm: Callable[[], None],
    *,
    in_place: bool = False,
    options: dict[str, Any] | None = None,
) -> Run:
    """Rewrite ``which`` from one object to another (or in place), ``arm()`` called between
    the source's upload and the rewrite (to set the faults)."""
    bucket = s3.bucket()
    src = s3.upload(files[which], f"{bucket}/src.parquet")
    target = src if in_place else f"s3://{bucket}/dst.parquet"
    run = Run(bucket, src, target, files[which].read_bytes())
    arm()
    try:
        pb.rewrite_bloom_filters(
            src,
            None if in_place else target,
            columns=FILTERED,
            in_place=in_place,
            storage_options={**s3.storage_options, **(options or {})},
        )
    except (OSError, BloomFilterError) as err:
        run.error = err
    return run


def check(s3: S3Session, run: Run, expected: bytes, *, succeeds: bool) -> None:
    """The invariant, and whether the rewrite was to succeed."""
    objects = s3.objects(run.bucket)
    if run.error is None:
        assert s3.fs().cat(run.target) == expected
    else:
        assert run.target in str(run.error), run.error  # located at the object
        if run.target == run.src:
            assert s3.fs().cat(run.target) == run.original
        else:
            assert "dst.parquet" not in objects
    assert s3.pending_uploads(run.bucket) == []
    assert (run.error is None) == succeeds, run.error


# -- a lost reply ---------------------------------------------------------------------------------


@pytest.mark.parametrize("request_name", list(REQUESTS))
def test_a_lost_reply_is_retried_and_leaves_the_object_and_nothing_else(
    s3: S3Session,
    s3_faults: S3Faults,
    files: dict[str, Path],
    expected: dict[str, bytes],
    request_name: str,
) -> None:
    """The store did the request, its reply was lost, the client retried: a second upload
    started (CreateMultipartUpload: the first one is found and aborted), a part or the object
    sent again (the same bytes), the upload completed again (moto answers that as done)."""
    r = REQUESTS[request_name]
    run = rewrite(s3, files, r.file, lambda: s3_faults.fail(r.method, r.query, mode="lose_reply"))
    assert [f.mode for f in s3_faults.injected] == ["lose_reply"]
    check(s3, run, expected[r.file], succeeds=True)


@pytest.mark.parametrize("request_name", ["PutObject", "CompleteMultipartUpload"])
def test_a_lost_reply_to_a_conditional_write_in_place_is_success(
    s3: S3Session,
    s3_faults: S3Faults,
    files: dict[str, Path],
    expected: dict[str, bytes],
    request_name: str,
) -> None:
    """In place, the write is conditional on the ETag read (If-Match): the retry of a write
    the store did is refused (412: the ETag is now the new object's), yet the object is ours."""
    r = REQUESTS[request_name]
    run = rewrite(
        s3,
        files,
        r.file,
        lambda: s3_faults.fail(r.method, r.query, mode="lose_reply"),
        in_place=True,
    )
    assert [f.mode for f in s3_faults.injected] == ["lose_reply"]
    check(s3, run, expected[r.file], succeeds=True)


# The outcome when every reply to the request is lost: the object requests succeed (the object
# is there, ours), the others fail.
EVERY_REPLY_LOST = {
    "PutObject": True,
    "CreateMultipartUpload": False,
    "UploadPartCopy": False,
    "UploadPart": False,
    "CompleteMultipartUpload": True,
}


@pytest.mark.parametrize("request_name", list(REQUESTS))
def test_every_reply_lost(
    s3: S3Session,
    s3_faults: S3Faults,
    files: dict[str, Path],
    expected: dict[str, bytes],
    request_name: str,
) -> None:
    """Every attempt reaches the store and none is answered: each CreateMultipartUpload
    started an upload (all are aborted); the object a lost PutObject or CompleteMultipartUpload
    wrote is found; a part never answered fails the rewrite."""
    r = REQUESTS[request_name]
    run = rewrite(
        s3,
        files,
        r.file,
        lambda: s3_faults.fail(r.method, r.query, mode="lose_reply", times=None),
        options=FEW_RETRIES,
    )
    assert len(s3_faults.injected) > 1  # retried
    check(s3, run, expected[r.file], succeeds=EVERY_REPLY_LOST[request_name])


@pytest.mark.parametrize("times", [1, None])
def test_a_lost_reply_to_the_abort_of_a_failed_rewrite(
    s3: S3Session,
    s3_faults: S3Faults,
    files: dict[str, Path],
    expected: dict[str, bytes],
    times: int | None,
) -> None:
    """A part fails for good; the abort is done by the store but its reply lost: the retry
    finds no upload (NoSuchUpload), or, with every reply lost, the listing shows it gone."""

    def arm() -> None:
        s3_faults.fail("PUT", "partNumber=2", status=403, times=None)
        s3_faults.fail("DELETE", "uploadId=", mode="lose_reply", times=times)

    run = rewrite(s3, files, "large", arm, options=FEW_RETRIES)
    assert "DELETE" in {f.method for f in s3_faults.injected}
    check(s3, run, expected["large"], succeeds=False)
    assert isinstance(run.error, PermissionError)  # the part's error, not the abort's
    assert not getattr(run.error, "__notes__", [])  # nothing left to report


# -- an error status ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 503])
@pytest.mark.parametrize("request_name", list(REQUESTS))
def test_an_error_status_once_is_retried(
    s3: S3Session,
    s3_faults: S3Faults,
    files: dict[str, Path],
    expected: dict[str, bytes],
    request_name: str,
    status: int,
) -> None:
    r = REQUESTS[request_name]
    run = rewrite(s3, files, r.file, lambda: s3_faults.fail(r.method, r.query, status=status))
    assert [f.status for f in s3_faults.injected] == [status]
    check(s3, run, expected[r.file], succeeds=True)


@pytest.mark.parametrize("request_name", list(REQUESTS))
def test_an_error_status_every_time_fails_located_and_leaves_nothing(
    s3: S3Session,
    s3_faults: S3Faults,
    files: dict[str, Path],
    expected: dict[str, bytes],
    request_name: str,
) -> None:
    r = REQUESTS[request_name]
    run = rewrite(
        s3,
        files,
        r.file,
        lambda: s3_faults.fail(r.method, r.query, status=500, times=None),
        options=FEW_RETRIES,
    )
    check(s3, run, expected[r.file], succeeds=False)


@pytest.mark.parametrize("status", [500, 503])
def test_an_abort_refused_once_is_retried(
    s3: S3Session,
    s3_faults: S3Faults,
    files: dict[str, Path],
    expected: dict[str, bytes],
    status: int,
) -> None:
    def arm() -> None:
        s3_faults.fail("PUT", "partNumber=2", status=403, times=None)
        s3_faults.fail("DELETE", "uploadId=", status=status)

    run = rewrite(s3, files, "large", arm, options=FEW_RETRIES)
    check(s3, run, expected["large"], succeeds=False)


def test_an_abort_that_fails_is_reported_with_the_error(
    s3: S3Session, s3_faults: S3Faults, files: dict[str, Path]
) -> None:
    """The upload cannot be aborted: it stays pending, and the error says so, naming it."""

    def arm() -> None:
        s3_faults.fail("PUT", "partNumber=2", status=403, times=None)
        s3_faults.fail("DELETE", "uploadId=", status=500, times=None)

    run = rewrite(s3, files, "large", arm, options=FEW_RETRIES)
    assert isinstance(run.error, PermissionError)
    assert run.target in str(run.error)
    (pending,) = s3.pending_uploads(run.bucket)
    assert pending == "dst.parquet"
    upload_id = s3.client().list_multipart_uploads(Bucket=run.bucket)["Uploads"][0]["UploadId"]
    notes = getattr(run.error, "__notes__", [])
    assert any(upload_id in note and "could not be aborted" in note for note in notes), notes
    s3_faults.clear()
    s3.client().abort_multipart_upload(Bucket=run.bucket, Key="dst.parquet", UploadId=upload_id)


# -- a reply cut short ----------------------------------------------------------------------------


def test_a_copy_whose_reply_is_reset_midway_is_retried(
    s3: S3Session, s3_faults: S3Faults, files: dict[str, Path], expected: dict[str, bytes]
) -> None:
    """UploadPartCopy's answer (its part's ETag, in XML) reset halfway: the copy is sent again,
    as it may be (it writes the same part)."""
    r = REQUESTS["UploadPartCopy"]
    run = rewrite(s3, files, "large", lambda: s3_faults.fail(r.method, r.query, mode="reset"))
    assert [f.mode for f in s3_faults.injected] == ["reset"]
    check(s3, run, expected["large"], succeeds=True)


# -- what the object carries ----------------------------------------------------------------------


@pytest.mark.parametrize("which", ["small", "large"])
def test_the_object_carries_the_rewrites_token(
    s3: S3Session, s3_requests: S3Requests, files: dict[str, Path], which: str
) -> None:
    """The token the sink looks for after a lost reply: set on the PutObject or
    CreateMultipartUpload (no other request), returned by HeadObject; a new one each rewrite."""
    bucket = s3.bucket()
    src = s3.upload(files[which], f"{bucket}/src.parquet")
    tokens = []
    for _ in range(2):
        s3_requests.reset()
        pb.rewrite_bloom_filters(
            src, f"s3://{bucket}/dst.parquet", columns=FILTERED, storage_options=s3.storage_options
        )
        head = s3.client().head_object(Bucket=bucket, Key="dst.parquet")
        tokens.append(head["Metadata"][WRITE_TOKEN_KEY])
        header = f"x-amz-meta-{WRITE_TOKEN_KEY}"
        tagged = [
            (r.method, sorted(r.query))
            for r in s3_requests.list()
            if header in {k.lower() for k in r.headers}
        ]
        assert tagged == ([("PUT", [])] if which == "small" else [("POST", ["uploads"])])
    assert len(set(tokens)) == 2 and all(len(t) == 32 for t in tokens)


# -- which uploads are this rewrite's -------------------------------------------------------------


def test_a_lost_create_reply_costs_one_listing_and_one_abort(
    s3: S3Session, s3_requests: S3Requests, s3_faults: S3Faults, files: dict[str, Path]
) -> None:
    """The requests added when CreateMultipartUpload was retried: one ListMultipartUploads
    (by the key as prefix) and one AbortMultipartUpload of the upload whose reply was lost.
    Without a fault none is sent (test_rewrite_remote counts those requests)."""
    bucket = s3.bucket()
    src = s3.upload(files["large"], f"{bucket}/src.parquet")
    s3_requests.reset()
    s3_faults.fail("POST", "uploads", mode="lose_reply")
    pb.rewrite_bloom_filters(
        src, f"s3://{bucket}/dst.parquet", columns=FILTERED, storage_options=s3.storage_options
    )
    sent = [(r.method, tuple(sorted(r.query))) for r in s3_requests.list()]
    writes = [x for x in sent if x[0] != "GET" or "uploads" in x[1]]
    assert writes == [
        ("HEAD", ()),
        ("POST", ("uploads",)),  # its reply lost
        ("POST", ("uploads",)),
        *[("PUT", ("partNumber", "uploadId"))] * 2,
        ("POST", ("uploadId",)),
        ("GET", ("prefix", "uploads")),
        ("DELETE", ("uploadId",)),
    ]
    assert s3.pending_uploads(bucket) == []


def _started_an_hour_earlier(bucket: str, upload_id: str) -> None:
    """Date an upload back an hour in the test server (moto's state), for an upload left by
    some earlier writer without waiting for one."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    upload = s3_backends[DEFAULT_ACCOUNT_ID]["global"].buckets[bucket].multiparts[upload_id]
    upload.initiated -= timedelta(hours=1)


def test_an_older_upload_of_the_same_key_is_not_aborted(
    s3: S3Session, s3_faults: S3Faults, files: dict[str, Path], expected: dict[str, bytes]
) -> None:
    bucket = s3.bucket()
    src = s3.upload(files["large"], f"{bucket}/src.parquet")
    client = s3.client()
    theirs = client.create_multipart_upload(Bucket=bucket, Key="dst.parquet")["UploadId"]
    other_key = client.create_multipart_upload(Bucket=bucket, Key="dst.parquet.tmp")["UploadId"]
    _started_an_hour_earlier(bucket, theirs)
    s3_faults.fail("POST", "uploads", mode="lose_reply")
    pb.rewrite_bloom_filters(
        src, f"s3://{bucket}/dst.parquet", columns=FILTERED, storage_options=s3.storage_options
    )
    assert s3.fs().cat(f"{bucket}/dst.parquet") == expected["large"]
    pending = client.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert sorted(u["UploadId"] for u in pending) == sorted([theirs, other_key])
    for upload in pending:
        client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])


def test_an_upload_another_writer_starts_meanwhile_is_not_aborted_and_ours_is_reported(
    s3: S3Session,
    s3_faults: S3Faults,
    files: dict[str, Path],
    expected: dict[str, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another writer starts an upload of the same key just as this rewrite does, and this
    rewrite's first reply is lost: two uploads started during its two requests, one of them
    not its own and nothing to tell which: neither is aborted, and the warning says so."""
    bucket = s3.bucket()
    src = s3.upload(files["large"], f"{bucket}/src.parquet")
    client = s3.client()
    theirs: list[str] = []
    create = object_sink.S3Sink._create

    def with_another_writer(sink: object_sink.S3Sink, metadata: dict[str, Any]) -> str:
        theirs.append(client.create_multipart_upload(Bucket=bucket, Key="dst.parquet")["UploadId"])
        return create(sink, metadata)

    monkeypatch.setattr(object_sink.S3Sink, "_create", with_another_writer)
    s3_faults.fail("POST", "uploads", nth=2, mode="lose_reply")  # the other writer's goes first
    with pytest.warns(object_sink.PendingUploadWarning, match="another writer") as warned:
        pb.rewrite_bloom_filters(
            src, f"s3://{bucket}/dst.parquet", columns=FILTERED, storage_options=s3.storage_options
        )
    assert s3.fs().cat(f"{bucket}/dst.parquet") == expected["large"]
    pending = [u["UploadId"] for u in client.list_multipart_uploads(Bucket=bucket)["Uploads"]]
    assert len(pending) == 2 and theirs[0] in pending
    assert all(u in str(warned[0].message) for u in pending)
    for upload_id in pending:
        client.abort_multipart_upload(Bucket=bucket, Key="dst.parquet", UploadId=upload_id)


def test_an_orphan_that_cannot_be_aborted_after_success_is_a_warning(
    s3: S3Session, s3_faults: S3Faults, files: dict[str, Path], expected: dict[str, bytes]
) -> None:
    bucket = s3.bucket()
    src = s3.upload(files["large"], f"{bucket}/src.parquet")
    s3_faults.fail("POST", "uploads", mode="lose_reply")
    s3_faults.fail("DELETE", "uploadId=", status=500, times=None)
    with pytest.warns(object_sink.PendingUploadWarning, match="could not be aborted") as warned:
        pb.rewrite_bloom_filters(
            src,
            f"s3://{bucket}/dst.parquet",
            columns=FILTERED,
            storage_options={**s3.storage_options, **FEW_RETRIES},
        )
    assert s3.fs().cat(f"{bucket}/dst.parquet") == expected["large"]
    client = s3.client()
    (orphan,) = client.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert orphan["UploadId"] in str(warned[0].message)
    s3_faults.clear()
    client.abort_multipart_upload(Bucket=bucket, Key="dst.parquet", UploadId=orphan["UploadId"])


def test_a_refused_put_is_not_looked_for(
    s3: S3Session, s3_requests: S3Requests, s3_faults: S3Faults, files: dict[str, Path]
) -> None:
    """A write refused outright (403) wrote nothing: no HeadObject after it."""
    bucket = s3.bucket()
    src = s3.upload(files["small"], f"{bucket}/src.parquet")
    s3_requests.reset()
    s3_faults.fail("PUT", status=403, times=None)
    with pytest.raises(PermissionError, match=f"s3://{bucket}/dst.parquet"):
        pb.rewrite_bloom_filters(
            src, f"s3://{bucket}/dst.parquet", columns=FILTERED, storage_options=s3.storage_options
        )
    assert [r.method for r in s3_requests.list() if r.method not in ("GET",)] == ["HEAD"]


def test_without_its_count_the_sink_lists_after_every_multipart_upload(
    s3: S3Session,
    s3_requests: S3Requests,
    s3_faults: S3Faults,
    files: dict[str, Path],
    expected: dict[str, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the client's requests cannot be counted (a client the sink cannot reach), the
    sink does not know whether a reply was lost: it lists the key's uploads every time (one
    request more) and aborts those started during its call."""
    monkeypatch.setattr(object_sink.S3Sink, "_count_creates", lambda sink: False)
    bucket = s3.bucket()
    src = s3.upload(files["large"], f"{bucket}/src.parquet")
    for lost in (False, True):
        s3_requests.reset()
        if lost:
            s3_faults.fail("POST", "uploads", mode="lose_reply")
        pb.rewrite_bloom_filters(
            src, f"s3://{bucket}/dst.parquet", columns=FILTERED, storage_options=s3.storage_options
        )
        assert s3.fs().cat(f"{bucket}/dst.parquet") == expected["large"]
        sent = [(r.method, tuple(sorted(r.query))) for r in s3_requests.list()]
        assert sent.count(("GET", ("prefix", "uploads"))) == 1
        assert sent.count(("DELETE", ("uploadId",))) == int(lost)
        assert s3.pending_uploads(bucket) == []

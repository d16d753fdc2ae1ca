"""Fixtures for the tests that need object storage (tests/remote, tests/tables): servers on
127.0.0.1, started on first use, stopped at the end; a plugin of the root conftest.py.

- ``s3`` (session): moto's S3 server. An ``S3Session``: ``endpoint_url``, ``storage_options``
  (fsspec/s3fs: endpoint, test credentials, region, a filesystem instance per call), ``fs()``
  (a fresh s3fs filesystem, listing cache off), ``arrow_fs()`` (pyarrow's), ``client()``
  (boto3), ``bucket()`` (a new bucket's name), ``upload(local_path, url)``,
  ``objects(bucket, prefix)`` (key -> size), ``pending_uploads(bucket)`` (keys). For the
  session the environment holds the standard chain's variables too (``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``), so that ``s3://``
  URLs work without any storage options, and no config file, profile or instance metadata is
  consulted.
- ``s3_requests``: the requests the server receives during the test (moto's recorder):
  ``list()`` of ``RecordedRequest`` (method, bucket, key, path, query, range, headers),
  ``count(method=None)``, ``reset()``. The fixtures' own set-up requests are not in it.
- ``s3_faults``: ``fail(method, query_contains=None, nth=1, status=500, *, path_contains=None,
  times=1, drop=False, mode=None)`` (``mode``: one of ``servers.FAULT_MODES``: an error status,
  a dropped connection, a reply lost after moto handled the request, a body cut short or
  reset, a stall), ``delay`` (seconds before every request), ``injected`` (the requests a
  fault fired on), ``clear()`` (done at the end of the test; it ends stalled requests).
- ``http_server`` (session): a directory served with Range support: ``root``, ``url(name)``,
  ``requests`` (``list()`` of ``HttpRequest`` (method, path, range), ``count(method=None)``,
  ``reset()``: shared by the session, so a test that counts resets it first).
- ``http_faults``: ``http_server``'s ``Faults`` (the same ``fail(...)`` as ``s3_faults``),
  cleared before and after the test.
- ``http_short_server``, ``http_stall_server`` (session): the same, misbehaving: every GET's
  body half of its Content-Length; every request unanswered for ``STALL_SECONDS``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tests.remote.servers import (
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    Faults,
    HttpServer,
    S3Faults,
    S3Requests,
    S3Session,
    start_http_server,
    start_s3_server,
)

# How long the stalling server keeps a request unanswered: far longer than any client timeout a
# test sets, bounded so that nothing waits on it forever.
STALL_SECONDS = 20.0


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Session]:
    server = start_s3_server()
    nowhere = tmp_path_factory.mktemp("aws-config")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        env.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        env.setenv("AWS_DEFAULT_REGION", REGION)
        env.setenv("AWS_ENDPOINT_URL", server.endpoint_url)
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")
        env.setenv("AWS_CONFIG_FILE", str(nowhere / "config"))
        env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(nowhere / "credentials"))
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_REGION"):
            env.delenv(name, raising=False)
        try:
            yield S3Session(server)
        finally:
            server.stop()


def clear_filesystem_caches() -> None:
    """fsspec caches a filesystem instance by its arguments, not by the environment it read
    its endpoint and credentials from: one made while a test pointed AWS_ENDPOINT_URL
    elsewhere would serve the next test, and its listing cache would change request counts.
    Tests that count requests call this first (an autouse fixture of their conftest)."""
    for module, name in (
        ("s3fs", "S3FileSystem"),
        ("fsspec.implementations.http", "HTTPFileSystem"),
    ):
        if module in sys.modules:
            getattr(sys.modules[module], name).clear_instance_cache()


@pytest.fixture
def s3_requests(s3: S3Session) -> Iterator[S3Requests]:
    requests = S3Requests(s3.server)
    try:
        yield requests
    finally:
        requests.stop()


@pytest.fixture
def s3_faults(s3: S3Session) -> Iterator[S3Faults]:
    s3.faults.clear()
    try:
        yield s3.faults
    finally:
        s3.faults.clear()


def _serve(
    tmp_path_factory: pytest.TempPathFactory, mode: str, stall: float = STALL_SECONDS
) -> Iterator[HttpServer]:
    server = start_http_server(tmp_path_factory.mktemp(f"http-{mode}"), mode, stall)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    yield from _serve(tmp_path_factory, "ok")


@pytest.fixture
def http_faults(http_server: HttpServer) -> Iterator[Faults]:
    http_server.faults.clear()
    try:
        yield http_server.faults
    finally:
        http_server.faults.clear()


@pytest.fixture(scope="session")
def http_short_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    yield from _serve(tmp_path_factory, "short")


@pytest.fixture(scope="session")
def http_stall_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    yield from _serve(tmp_path_factory, "stall")

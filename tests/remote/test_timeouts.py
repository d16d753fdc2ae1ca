"""Stalled stores: every entry point gives up within the request budget
(``parquet_bloom.request_limits``, the command's ``--timeout``/``--retries``) with a located
timeout error, and one stalled request in the middle is retried into the same answer.

The servers hold a stalled request for ``STALL_SECONDS`` (20 s); each test sets a budget of
about a second a request and checks that the call returned well before the stall would have
ended (``BOUND``, generous: not a timing test, a hang fails it). The options each backend is
given are checked without a network at the end."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import parquet_bloom as pb
from parquet_bloom.cli import main
from tests import writers
from tests.remote.fixtures import STALL_SECONDS, clear_filesystem_caches

# A call that stops waiting within its budget returns long before this; a hang does not.
BOUND = 15.0
assert BOUND < STALL_SECONDS

Capture = pytest.CaptureFixture[str]


@pytest.fixture
def budget() -> Iterator[pb.RequestLimits]:
    """A budget of 1 s a request and one retry, for the test's calls; restored after."""
    with pb.request_limits(timeout=1, retries=1) as chosen:
        yield chosen


@pytest.fixture(scope="module")
def local_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ids = np.arange(writers.ROWS, dtype=np.int64) * 7919
    table = pa.table({"id": ids, "s": [f"k{v}" for v in ids]})
    return writers.write_pyarrow(tmp_path_factory.mktemp("timeouts") / "f.parquet", table)


@pytest.fixture
def s3_url(s3: Any, local_file: Path) -> str:
    return s3.upload(local_file, f"s3://{s3.bucket()}/t/part-0.parquet")


@pytest.fixture
def http_url(http_server: Any, local_file: Path) -> str:
    (http_server.root / "stalled.parquet").write_bytes(local_file.read_bytes())
    return str(http_server.url("stalled.parquet"))


def _options(s3: Any) -> dict[str, Any]:
    return {**s3.storage_options}


def _assert_timed_out(err: BaseException | str, url: str) -> None:
    text = str(err)
    assert "timed out after" in text, text
    assert url.split("://")[-1] in text, text  # pyarrow's reads name the path
    assert "request_limits" in text and "--timeout" in text, text
    if isinstance(err, pb.FileReadError):
        assert err.source is not None and url.endswith(err.source.split("://")[-1])


class _Clock:
    def __enter__(self) -> _Clock:
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self.start
        assert self.seconds < BOUND, f"took {self.seconds:.1f} s: the stall was waited out"


# -- S3: every request for the object stalls --------------------------------------------------


def _stall_object(faults: Any, name: str) -> None:
    faults.fail(None, path_contains=name, times=None, mode="stall")


def test_the_reader_times_out_on_a_stalled_object(
    s3: Any, s3_faults: Any, s3_url: str, budget: pb.RequestLimits
) -> None:
    _stall_object(s3_faults, "part-0.parquet")
    with _Clock(), pytest.raises(pb.FileReadError) as caught:
        pb.BloomFilterReader(s3_url, storage_options=_options(s3))
    _assert_timed_out(caught.value, s3_url)
    assert "1 s a request, 2 attempts" in str(caught.value)


def test_botocore_settings_given_are_not_multiplied(s3: Any, s3_faults: Any, s3_url: str) -> None:
    """The issue's case, under the default budget: the caller's own botocore timeouts and
    attempts, which s3fs's retry loop used to repeat 5 times over."""
    config = {"read_timeout": 1, "connect_timeout": 1, "retries": {"max_attempts": 1}}
    _stall_object(s3_faults, "part-0.parquet")
    with _Clock(), pytest.raises(pb.FileReadError) as caught:
        pb.BloomFilterReader(s3_url, storage_options={**_options(s3), "config_kwargs": config})
    _assert_timed_out(caught.value, s3_url)


def test_the_reader_times_out_on_a_stalled_filter_read(
    s3: Any, s3_faults: Any, s3_url: str, budget: pb.RequestLimits
) -> None:
    """The footer comes; the read of the filters after it stalls: the error names its range."""
    with pb.BloomFilterReader(s3_url, storage_options=_options(s3), tail_size=64) as reader:
        _stall_object(s3_faults, "part-0.parquet")
        with _Clock(), pytest.raises(pb.FileReadError) as caught:
            reader.filters()
    _assert_timed_out(caught.value, s3_url)
    assert "reading bytes " in str(caught.value)
    assert caught.value.offset is not None


def test_prune_times_out_on_a_stalled_object(
    s3: Any, s3_faults: Any, s3_url: str, budget: pb.RequestLimits
) -> None:
    prefix = s3_url.rsplit("/", 1)[0] + "/"
    _stall_object(s3_faults, "part-0.parquet")
    with _Clock(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = pb.prune(prefix, pc.field("id") == -1, storage_options=_options(s3))
        except pb.FileReadError as err:  # pyarrow's own footer read for the schema
            _assert_timed_out(err, s3_url)
            return
    [warning] = [w for w in caught if s3_url in str(w.message)]
    _assert_timed_out(str(warning.message), s3_url)
    assert result.report.files_skipped == 0  # a file it cannot read is kept


def test_check_file_and_inspect_file_time_out(
    s3: Any, s3_faults: Any, s3_url: str, budget: pb.RequestLimits
) -> None:
    _stall_object(s3_faults, "part-0.parquet")
    for call in (pb.check_file, pb.inspect_file):
        with _Clock(), pytest.raises(pb.FileReadError) as caught:
            call(s3_url, storage_options=_options(s3))
        _assert_timed_out(caught.value, s3_url)


def test_a_rewrite_from_a_stalled_object_times_out(
    s3: Any, s3_faults: Any, s3_url: str, tmp_path: Path, budget: pb.RequestLimits
) -> None:
    _stall_object(s3_faults, "part-0.parquet")
    with _Clock(), pytest.raises(pb.FileReadError) as caught:
        pb.rewrite_bloom_filters(
            s3_url, tmp_path / "out.parquet", columns=["id"], storage_options=_options(s3)
        )
    _assert_timed_out(caught.value, s3_url)
    assert not (tmp_path / "out.parquet").exists()


def test_a_rewrite_to_a_stalled_store_gives_up_within_the_budget(
    s3: Any, s3_faults: Any, local_file: Path, budget: pb.RequestLimits
) -> None:
    """Every write request to the target stalls: botocore's read timeout ends each attempt,
    and the rewrite fails instead of hanging; no object appears."""
    bucket = s3.bucket()
    target = f"s3://{bucket}/out/rewritten.parquet"
    _stall_object(s3_faults, "rewritten.parquet")
    # A PutObject whose "Expect: 100-continue" is never answered waits past botocore's read
    # timeout: the deadline (3 s here) ends it.
    with pb.request_limits(deadline=3), _Clock(), pytest.raises(Exception) as caught:
        pb.rewrite_bloom_filters(local_file, target, columns=["id"], storage_options=_options(s3))
    assert "timeout" in repr(caught.value).lower() or "timed out" in str(caught.value)
    s3_faults.clear()
    assert s3.objects(bucket, "out/") == {}


def test_the_cli_check_and_inspect_time_out(
    capsys: Capture, s3: Any, s3_faults: Any, s3_url: str
) -> None:
    _stall_object(s3_faults, "part-0.parquet")
    for command in ("check", "inspect"):
        with _Clock():
            status = main(
                [command, "--timeout", "1", "--retries", "1", "--json", *_cli_options(s3), s3_url]
            )
        out, err = capsys.readouterr()
        assert status == 2, (out, err)
        _assert_timed_out(out + err, s3_url)
        assert "1 s a request, 2 attempts" in out + err
    assert pb.get_request_limits() == pb.RequestLimits()  # the command's budget ended with it


def _cli_options(s3: Any) -> list[str]:
    options = []
    for key, value in (("endpoint_url", s3.endpoint_url), ("key", "testing")):
        options += ["--storage-option", f"{key}={value}"]
    return [*options, "--storage-option", "secret=testing"]


def test_the_cli_takes_json_storage_options(
    capsys: Capture, s3: Any, s3_faults: Any, s3_url: str
) -> None:
    """botocore's own settings through --storage-option as JSON, under the default budget:
    they are what bounds the stalled reads here."""
    _stall_object(s3_faults, "part-0.parquet")
    config = json.dumps({"read_timeout": 1, "retries": {"total_max_attempts": 1}})
    with _Clock():
        status = main(
            [
                "inspect",
                *_cli_options(s3),
                "--storage-option",
                f"config_kwargs={config}",
                "--storage-option",
                "skip_instance_cache=true",
                s3_url,
            ]
        )
    out, err = capsys.readouterr()
    assert status == 2, (out, err)
    assert s3_url in err and ("ReadTimeout" in err or "timed out" in err), err


def test_json_storage_options_are_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """What --storage-option hands the filesystem: JSON decoded, true/false and integers
    converted as before, other text kept."""
    seen: list[dict[str, Any]] = []

    def list_files(arg: str, storage_options: Any = None, **_: Any) -> list[Any]:
        seen.append(dict(storage_options or {}))
        raise FileNotFoundError(arg)

    monkeypatch.setattr("parquet_bloom._io.location.list_files", list_files)
    main(
        [
            "inspect",
            "--storage-option",
            'config_kwargs={"read_timeout": 5, "retries": {"max_attempts": 2}}',
            "--storage-option",
            "anon=true",
            "--storage-option",
            "max_concurrency=4",
            "--storage-option",
            'token="01234"',
            "--storage-option",
            "endpoint_url=http://127.0.0.1:9",
            "s3://bucket/f.parquet",
        ]
    )
    assert seen == [
        {
            "config_kwargs": {"read_timeout": 5, "retries": {"max_attempts": 2}},
            "anon": True,
            "max_concurrency": 4,
            "token": "01234",
            "endpoint_url": "http://127.0.0.1:9",
        }
    ]


def test_bad_json_and_bad_limits_are_usage_errors(capsys: Capture) -> None:
    for argv, message in (
        (["inspect", "--storage-option", "config_kwargs={oops", "s3://b/f"], "not valid JSON"),
        (["inspect", "--timeout", "0", "s3://b/f"], "must be a positive number of seconds"),
        (["table", "prune", "--timeout", "soon", "t"], "not a number of seconds"),
        (["check", "--retries", "-1", "s3://b/f"], "must be >= 0"),
    ):
        assert main(argv) == 2
        _, err = capsys.readouterr()
        assert "error:" in err and message in err, err


# -- a table on S3 ---------------------------------------------------------------------------


def test_delta_prune_times_out_on_a_stalled_data_file(
    s3: Any, s3_faults: Any, tmp_path: Path, budget: pb.RequestLimits
) -> None:
    pytest.importorskip("deltalake")
    import parquet_bloom.delta as pbd
    from tests.remote.servers import ACCESS_KEY, REGION, SECRET_KEY

    clear_filesystem_caches()
    uri = f"s3://{s3.bucket()}/lake/t"
    options = {
        "AWS_ENDPOINT_URL": s3.endpoint_url,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
    }
    from deltalake import write_deltalake

    write_deltalake(uri, pa.table({"id": np.arange(100, dtype=np.int64)}), storage_options=options)
    _stall_object(s3_faults, ".parquet")  # the data file; the log is read
    with _Clock(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pbd.prune(uri, pc.field("id") == 7, storage_options=options)
    messages = [str(w.message) for w in caught if "timed out after" in str(w.message)]
    assert messages, [str(w.message) for w in caught]
    assert "request_limits" in messages[0]
    assert len(result.files) == 1  # kept: its filters could not be read


def test_the_table_cli_takes_the_budget(
    capsys: Capture, s3: Any, s3_faults: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("deltalake")
    from deltalake import write_deltalake

    from tests.remote.servers import ACCESS_KEY, REGION, SECRET_KEY

    clear_filesystem_caches()
    uri = f"s3://{s3.bucket()}/lake/cli"
    options = {
        "AWS_ENDPOINT_URL": s3.endpoint_url,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
    }
    write_deltalake(uri, pa.table({"id": np.arange(100, dtype=np.int64)}), storage_options=options)
    _stall_object(s3_faults, ".parquet")
    argv = ["table", "inspect", "--json", "--timeout", "1", "--retries", "1", uri]
    for key, value in options.items():
        argv += ["--storage-option", f"{key}={value}"]
    with _Clock():
        status = main(argv)
    out, err = capsys.readouterr()
    assert status == 2, (out, err)
    _assert_timed_out(err, "part-")


# -- HTTP: every request for the file stalls ---------------------------------------------------


def test_http_reader_check_and_inspect_time_out(
    http_faults: Any, http_url: str, budget: pb.RequestLimits
) -> None:
    _stall_object(http_faults, "stalled.parquet")
    options = {"skip_instance_cache": True}
    for call in (pb.BloomFilterReader, pb.check_file, pb.inspect_file):
        with _Clock(), pytest.raises(pb.FileReadError) as caught:
            call(http_url, storage_options=options)
        _assert_timed_out(caught.value, http_url)


def test_http_prune_times_out(http_faults: Any, http_url: str, budget: pb.RequestLimits) -> None:
    """fsspec's HTTP listing of a URL GETs it whole (twice) looking for links, and takes any
    failure for "not found": the stall begins with the reads after the listing."""
    http_faults.fail("GET", path_contains="stalled.parquet", nth=3, times=None, mode="stall")
    with _Clock(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            pb.prune([http_url], pc.field("id") == -1)
        except pb.FileReadError as err:  # pyarrow's own footer read, for the schema
            _assert_timed_out(err, http_url)
            return
    [message] = [str(w.message) for w in caught if "timed out after" in str(w.message)]
    _assert_timed_out(message, http_url)


def test_the_cli_times_out_over_http(capsys: Capture, http_faults: Any, http_url: str) -> None:
    _stall_object(http_faults, "stalled.parquet")
    for command in ("inspect", "check"):
        with _Clock():
            status = main([command, "--timeout", "1", "--retries", "0", http_url])
        out, err = capsys.readouterr()
        assert status == 2, (out, err)
        _assert_timed_out(err, http_url)
        assert "1 s a request, 1 attempt," in err


# -- one stalled request in the middle: retried ------------------------------------------------


def _answer(url: str, options: dict[str, Any] | None) -> list[tuple[int, str, bytes]]:
    with pb.BloomFilterReader(url, storage_options=options, tail_size=64) as reader:
        return [(rg, c, f.to_bytes()) for (rg, c), f in sorted(reader.filters().items())]


def test_one_stalled_s3_request_is_retried(
    s3: Any, s3_faults: Any, s3_requests: Any, s3_url: str, budget: pb.RequestLimits
) -> None:
    expected = _answer(s3_url, _options(s3))
    # The second GET (the filters' read, after the tail's) stalls once; the retry answers.
    s3_faults.fail("GET", path_contains="part-0.parquet", nth=2, mode="stall")
    with _Clock():
        assert _answer(s3_url, _options(s3)) == expected
    assert [f.mode for f in s3_faults.injected] == ["stall"]


def test_one_stalled_http_request_is_retried(
    http_faults: Any, http_url: str, budget: pb.RequestLimits
) -> None:
    options = {"skip_instance_cache": True}
    expected = _answer(http_url, options)
    http_faults.fail("GET", path_contains="stalled.parquet", nth=2, mode="stall")
    with _Clock():
        assert _answer(http_url, options) == expected
    assert [f.mode for f in http_faults.injected] == ["stall"]


# -- the options each backend gets (no network) ------------------------------------------------


def test_the_default_budget() -> None:
    from parquet_bloom._io import limits

    chosen = pb.get_request_limits()
    assert (chosen.timeout, chosen.retries, chosen.deadline) == (30.0, 2, None)
    assert chosen.attempts == 3
    assert chosen.total == 3 * 30.0 + 2 * limits.BACKOFF_ALLOWANCE


def test_request_limits_is_reversible() -> None:
    before = pb.get_request_limits()
    with pb.request_limits(timeout=2) as inside:
        assert pb.get_request_limits() is inside
        assert (inside.timeout, inside.retries) == (2, before.retries)
        with pb.request_limits(retries=0, deadline=3):
            assert pb.get_request_limits().total == 3
        assert pb.get_request_limits() is inside
    assert pb.get_request_limits() is before
    setting = pb.request_limits(pb.RequestLimits(timeout=5, retries=4, deadline=60))
    try:
        assert pb.get_request_limits().total == 60
    finally:
        setting.restore()
    assert pb.get_request_limits() is before


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"timeout": 0}, ValueError),
        ({"timeout": float("inf")}, ValueError),
        ({"timeout": "30"}, TypeError),
        ({"retries": -1}, ValueError),
        ({"retries": 1.5}, TypeError),
        ({"deadline": -2}, ValueError),
    ],
)
def test_a_bad_budget_is_refused(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        pb.RequestLimits(**kwargs)


def test_s3fs_options() -> None:
    from parquet_bloom._io import limits

    with pb.request_limits(timeout=7, retries=3):
        merged = limits.storage_options_with_limits("s3://b/k", None)
        assert merged == {
            "config_kwargs": {
                "connect_timeout": 7.0,
                "read_timeout": 7.0,
                "retries": {"total_max_attempts": 4, "mode": "standard"},
            }
        }
        given = {
            "endpoint_url": "http://e",
            "config_kwargs": {"read_timeout": 2, "max_pool_connections": 50},
        }
        merged = limits.storage_options_with_limits("s3a://b/k", given)
        assert merged["endpoint_url"] == "http://e"
        assert merged["config_kwargs"] == {
            "connect_timeout": 7.0,
            "read_timeout": 2,  # the caller's
            "retries": {"total_max_attempts": 4, "mode": "standard"},
            "max_pool_connections": 50,
        }
        assert given["config_kwargs"] == {"read_timeout": 2, "max_pool_connections": 50}
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **merged)
    assert fs._prepare_config_kwargs()["read_timeout"] == 2


def test_gcsfs_adlfs_and_http_options() -> None:
    from parquet_bloom._io import limits

    with pb.request_limits(timeout=7, retries=3):
        gcs = limits.storage_options_with_limits("gs://b/k", {"project": "p"})
        assert gcs == {
            "project": "p",
            "requests_timeout": aiohttp.ClientTimeout(sock_connect=7.0, sock_read=7.0),
        }
        mine = aiohttp.ClientTimeout(total=1)
        assert limits.storage_options_with_limits("gcs://b/k", {"requests_timeout": mine}) == {
            "requests_timeout": mine
        }
        azure = limits.storage_options_with_limits("abfs://c/k", {"account_name": "a"})
        assert azure == {"account_name": "a", "connection_timeout": 7.0, "read_timeout": 7.0}
        assert limits.storage_options_with_limits("az://c/k", {"read_timeout": 60}) == {
            "connection_timeout": 7.0,
            "read_timeout": 60,
        }
        http = limits.storage_options_with_limits("https://h/f", {"headers": {"A": "b"}})
        assert http["headers"] == {"A": "b"}
        assert http["client_kwargs"] == {
            "timeout": aiohttp.ClientTimeout(sock_connect=7.0, sock_read=7.0),
            "middlewares": (limits.RetryStalled(3),),
        }
        http = limits.storage_options_with_limits(
            "http://h/f", {"client_kwargs": {"timeout": mine, "trust_env": True}}
        )
        assert http["client_kwargs"] == {
            "timeout": mine,
            "middlewares": (limits.RetryStalled(3),),
            "trust_env": True,
        }
    # Backends without such options, and chained URLs, get what was given.
    assert limits.storage_options_with_limits("memory://x", None) == {}
    assert limits.storage_options_with_limits("file:///x", {}) == {}
    chained = {"s3": {"anon": True}}
    assert limits.storage_options_with_limits("simplecache::s3://b/k", chained) == chained


def test_pyarrow_s3_options() -> None:
    import pyarrow.fs as pafs

    from parquet_bloom._io import limits

    with pb.request_limits(timeout=7, retries=3):
        options = limits.arrow_s3_options({"region": "r", "request_timeout": 60})
    assert options["region"] == "r"
    assert options["connect_timeout"] == 7.0
    assert options["request_timeout"] == 60  # the caller's
    assert isinstance(options["retry_strategy"], pafs.AwsStandardS3RetryStrategy)
    pafs.S3FileSystem(**options)  # pyarrow takes them


def test_deltalake_options() -> None:
    from parquet_bloom._io import limits

    with pb.request_limits(timeout=7, retries=3):
        options = limits.delta_storage_options("s3://b/t", {"AWS_REGION": "r", "TIMEOUT": "2s"})
        assert options == {
            "AWS_REGION": "r",
            "TIMEOUT": "2s",  # the caller's, whatever its case
            "connect_timeout": "7000ms",
            "max_retries": "3",
            "retry_timeout": f"{int((4 * 7 + 3 * limits.BACKOFF_ALLOWANCE) * 1000)}ms",
        }
    assert limits.delta_storage_options("/local/t", None) is None
    assert limits.delta_storage_options("file:///local/t", {"a": "b"}) == {"a": "b"}


def test_a_filesystem_made_for_a_url_gets_the_budget(s3: Any) -> None:
    from parquet_bloom._io import location

    with pb.request_limits(timeout=3, retries=0):
        fs, _ = location.resolve("s3://b/k", storage_options=_options(s3))
    config = fs._prepare_config_kwargs()
    assert (config["read_timeout"], config["connect_timeout"]) == (3.0, 3.0)
    assert config["retries"] == {"total_max_attempts": 1, "mode": "standard"}
    assert fs.retries == 1  # s3fs's own loop: one round

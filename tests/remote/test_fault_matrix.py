"""Every fault a store can throw, at every read position, through every entry point, on both
servers: the outcome is the answer the fault-free run gave, or a located library error (a
:class:`~parquet_bloom.errors.FileReadError` naming the URL, with the offset where a range was
being read; a FileNotFoundError naming the URL only for an object missing when first asked
for), or, for ``prune``, the file's row groups kept and the file named. Never a violation, never
a bare FileNotFoundError/OSError/aiohttp error, never a hang (no stalls here: tests/remote/
test_faults.py times stalls out).

Positions are found, not hard-coded: each case runs its entry point once without a fault,
reads the server's record of the requests made for the file, and picks the request of the
position by its range (the footer: the file's first GET; a filter: the first GET starting among
the filters; the column data: the first GET starting before them; the size look-up: the
first HEAD; a listing: a GET without a range). The fault then fires on that request (``nth``).

The matrix: 8 faults x 33 (entry point, server, position) rows, less the 2 faults a HEAD
cannot suffer (a body cut short or reset), = 262 cases (``test_the_matrix_is_the_size_it_says``
checks the count; with ``-s`` it prints how the cases ended).
"""

from __future__ import annotations

import re
import shutil
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import parquet_bloom as pb
from parquet_bloom import cli
from parquet_bloom.testing import assert_bloom_filters_valid
from tests import writers
from tests.remote.fixtures import clear_filesystem_caches

# The faults: a persistent status (every request from the chosen one on fails, retries
# included: for 404, the object deleted), a single 404 (a flaky store, or an object replaced
# and back), a single 503 that the backend's retry answers, and a single broken answer.
FAULTS: dict[str, dict[str, Any]] = {
    "404": {"mode": "status", "status": 404, "times": None},
    "404-once": {"mode": "status", "status": 404, "times": 1},
    "500": {"mode": "status", "status": 500, "times": None},
    "503": {"mode": "status", "status": 503, "times": None},
    "503-once": {"mode": "status", "status": 503, "times": 1},
    "short": {"mode": "short", "times": 1},
    "reset": {"mode": "reset", "times": 1},
    "drop": {"mode": "drop", "times": 1},
}

# (entry point, server, position). The filter position needs a tail read that misses the
# filters (tail_size=8), which assert_bloom_filters_valid and the rewrite do not take: their
# first read holds the filters, so the footer row covers those. check reads column data.
ROWS = [
    *[("reader", server, p) for server in ("s3", "http") for p in ("footer", "filter")],
    *[("prune", server, p) for server in ("s3", "http") for p in ("listing", "footer", "filter")],
    *[
        (e, s, p)
        for e in ("check", "cli")
        for s in ("s3", "http")
        for p in ("footer", "filter", "data")
    ],
    *[("inspect", server, p) for server in ("s3", "http") for p in ("footer", "filter")],
    *[("assert", server, p) for server in ("s3", "http") for p in ("footer", "data")],
    ("rewrite", "s3", "lookup"),
    ("rewrite", "s3", "footer"),
    ("rewrite", "s3", "data"),
]
# A HEAD has no body to cut short or reset (the test server would send a wrong Content-Length
# instead, a size no store gives): those two faults are not made at the size look-up.
CASES = [
    (fault, *row)
    for row in ROWS
    for fault in FAULTS
    if not (row[2] == "lookup" and fault in ("short", "reset"))
]

# How the cases ended, by kind: printed by the last test (pytest -s) for the report.
OUTCOMES: dict[str, int] = {}
# (entry point, server) -> the fault-free run's answer and part-1's requests (method, range).
BASELINES: dict[tuple[str, str], tuple[Any, list[tuple[str, str | None]]]] = {}

# A value in the second row group of part-1 only.
VALUE = 7919 * 2500 + 1


@pytest.fixture(scope="module")
def local_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    directory = tmp_path_factory.mktemp("matrix")
    out = []
    for i in range(2):
        ids = np.arange(writers.ROWS, dtype=np.int64) * 7919 + i
        out.append(writers.write_pyarrow(directory / f"part-{i}.parquet", pa.table({"id": ids})))
    return out


@pytest.fixture(autouse=True)
def _one_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry budgets set low, the same outcomes sooner: botocore makes one attempt a request
    (its backoff waits up to a second a retry), s3fs two (its own retry, 0.1 s later, of a
    throttling 503 "SlowDown" and of a dropped or cut answer). A single 503 is answered by
    that retry; a persistent one fails both, as it would fail five."""
    import s3fs

    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 2)


@pytest.fixture(scope="module", autouse=True)
def _filesystems_of_the_matrix() -> None:
    """Filesystems made for this module's cases only."""
    clear_filesystem_caches()


@pytest.fixture(autouse=True)
def _fresh_filesystems() -> None:
    """Not the conftest's (a new filesystem for each test): the cases share one filesystem
    a server, as the calls of a program share fsspec's cached instance. (A new s3fs client
    costs a quarter of a second, most of a case's time.)"""


@dataclass
class Store:
    """The files of one case on one server, and that server's recorder and faults. URLs are
    opened as a user opens them: the environment points s3:// at the test server
    (tests/remote/fixtures.py), and fsspec's instance cache gives every open the same
    filesystem (s3fs's listing cache off, so that every run lists and looks up again)."""

    urls: list[str]  # part-0, part-1 (the file the faults hit)
    prefix: str
    options: dict[str, Any]
    requests: Callable[[], list[tuple[str, str | None]]]  # (method, range) for part-1
    fail: Callable[..., None]  # on part-1's requests
    fail_listing: Callable[..., None] | None  # on the listing's (S3: LIST of the prefix)
    reset: Callable[[], None]
    cli_options: list[str]
    injected: Callable[[], list[Any]]  # the requests a fault fired on

    @property
    def url(self) -> str:
        return self.urls[1]


@pytest.fixture(scope="module")
def s3_files(s3: Any, local_files: list[Path]) -> list[str]:
    """The files on the S3 server, for every case of the module (faults change no object)."""
    bucket = s3.bucket()
    return [s3.upload(p, f"s3://{bucket}/matrix/{p.name}") for p in local_files]


@pytest.fixture(scope="module")
def http_files(http_server: Any, local_files: list[Path]) -> list[str]:
    name = f"m{uuid.uuid4().hex[:8]}"
    (http_server.root / name).mkdir()
    for p in local_files:
        shutil.copy(p, http_server.root / name / p.name)
    return [http_server.url(f"{name}/{p.name}") for p in local_files]


@pytest.fixture
def store(request: pytest.FixtureRequest) -> Store:
    server = request.param
    if server == "s3":
        recorder = request.getfixturevalue("s3_requests")
        faults = request.getfixturevalue("s3_faults")
        urls = request.getfixturevalue("s3_files")

        def s3_requests() -> list[tuple[str, str | None]]:
            return [
                (r.method, r.range) for r in recorder.list() if r.key.endswith("part-1.parquet")
            ]

        return Store(
            urls,
            urls[0].rsplit("/", 1)[0] + "/",
            {"use_listings_cache": False},
            s3_requests,
            lambda **kw: faults.fail(kw.pop("method"), path_contains="part-1.parquet", **kw),
            lambda **kw: faults.fail("GET", query_contains="list-type", **kw),
            recorder.reset,
            ["--storage-option", "use_listings_cache=false"],
            lambda: list(faults.injected),
        )
    http = request.getfixturevalue("http_server")
    faults = request.getfixturevalue("http_faults")
    urls = request.getfixturevalue("http_files")

    def http_requests() -> list[tuple[str, str | None]]:
        return [
            (r.method, r.range) for r in http.requests.list() if r.path.endswith("part-1.parquet")
        ]

    return Store(
        urls,
        "",
        {},
        http_requests,
        lambda **kw: faults.fail(kw.pop("method"), path_contains="part-1.parquet", **kw),
        None,  # fsspec's HTTP "listing" of a URL is a GET of it: among part-1's requests
        http.requests.reset,
        [],
        lambda: list(faults.injected),
    )


# -- the entry points: each returns an answer to compare (or raises) --------------------------


def run_reader(store: Store, tmp_path: Path) -> Any:
    with pb.BloomFilterReader(store.url, storage_options=store.options, tail_size=8) as reader:
        filters = reader.filters()
        return {k: f.might_contain(VALUE, "INT64") for k, f in filters.items()}


@dataclass(frozen=True)
class Pruned:
    kept: dict[str, list[int] | None]
    unreadable: tuple[str, ...]
    warnings: tuple[str, ...]


def run_prune(store: Store, tmp_path: Path) -> Pruned:
    source: Any = store.prefix or store.urls
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pb.prune(
            source, pc.field("id") == VALUE, storage_options=store.options, tail_size=8
        )
    for w in caught:
        assert issubclass(w.category, pb.BloomFilterWarning), w
    # The row groups each fragment was made with (None: all), asked without reading the file.
    kept = {Path(f.path).name: f.__reduce__()[1][3] for f in result.dataset.get_fragments()}
    unreadable = getattr(result.report, "unreadable_files", ())
    return Pruned(kept, unreadable, tuple(str(w.message) for w in caught))


def run_check(store: Store, tmp_path: Path) -> Any:
    report = pb.check_file(store.url, storage_options=store.options, tail_size=8)
    return report.to_dict()


def run_cli(store: Store, tmp_path: Path) -> int:
    return cli.main(["check", "--tail-size", "8", *store.cli_options, store.url])


def run_inspect(store: Store, tmp_path: Path) -> Any:
    return pb.inspect_file(store.url, storage_options=store.options, tail_size=8).to_dict()


def run_assert(store: Store, tmp_path: Path) -> None:
    assert_bloom_filters_valid(store.url, storage_options=store.options)


def run_rewrite(store: Store, tmp_path: Path) -> bytes:
    out = tmp_path / "out" / "rewritten.parquet"
    out.parent.mkdir(exist_ok=True)
    try:
        pb.rewrite_bloom_filters(
            store.url, out, columns=["id"], fpp=0.001, storage_options=store.options
        )
    finally:
        leftovers = [p.name for p in out.parent.iterdir() if p.name != out.name]
        assert leftovers == [], leftovers
    data = out.read_bytes()
    out.unlink()
    return data


ENTRY_POINTS: dict[str, Callable[[Store, Path], Any]] = {
    "reader": run_reader,
    "prune": run_prune,
    "check": run_check,
    "cli": run_cli,
    "inspect": run_inspect,
    "assert": run_assert,
    "rewrite": run_rewrite,
}


# -- positions ----------------------------------------------------------------------------------


_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def layout(path: Path) -> tuple[int, int]:
    """(the first filter's offset, the footer's start) of a local copy of the file."""
    with pb.BloomFilterReader(path) as reader:
        offsets = [c.bloom_filter_offset for c in reader.column_chunks]
        return min(o for o in offsets if o is not None), reader.footer_start


def position_of(
    requests: list[tuple[str, str | None]], position: str, first_filter: int, footer_start: int
) -> tuple[str, int]:
    """(method, nth) of the request of ``position`` among ``requests`` (one file's, in order)."""

    def start(r: str | None) -> int | None:
        match = _RANGE.fullmatch(r or "")
        return None if match is None or not match[1] else int(match[1])

    def wanted(method: str, r: str | None) -> bool:
        if position == "lookup":
            return method == "HEAD"
        if method != "GET":
            return False
        if position == "listing":
            return r is None
        if position == "footer":
            return r is not None
        s = start(r)
        if s is None:
            return False
        if position == "filter":
            return first_filter <= s < footer_start
        return 0 < s < first_filter  # column data (not the leading magic)

    for i, (method, r) in enumerate(requests):
        if wanted(method, r):
            return method, 1 + sum(m == method for m, _ in requests[:i])
    raise AssertionError(f"no {position} request in {requests}")


def first_request(requests: list[tuple[str, str | None]], method: str, nth: int) -> bool:
    """Whether the request is the first one made for the file."""
    return nth == 1 and bool(requests) and requests[0][0] == method


# -- the outcome --------------------------------------------------------------------------------


def check_outcome(
    entry: str,
    fault: str,
    store: Store,
    baseline: Any,
    got: Any,
    error: BaseException | None,
    *,
    first: bool,
    listing: bool = False,
    output: tuple[str, str] = ("", ""),
) -> str:
    """Assert the outcome is one of the allowed ones; returns which ("same", "located",
    "not-found", "kept")."""
    # What the error names: the file, or for a failed listing what was listed.
    url = store.prefix if listing and store.prefix else store.url
    if entry == "cli":
        stdout, stderr = output
        assert error is None, error
        assert got in (baseline, cli.EXIT_BAD_INPUT), (got, output)
        assert "VIOLATION" not in stdout
        if got == baseline:
            return "same"
        assert url in stderr, stderr
        assert "Traceback" not in stderr and "internal error" not in stderr, stderr
        return "not-found" if fault.startswith("404") and first else "located"
    if error is None:
        if entry == "prune" and got != baseline:
            assert got.kept["part-1.parquet"] in (None, [0, 1, 2]), got
            assert "part-0.parquet" not in got.kept, got
            assert [name for name in got.unreadable if name.endswith("part-1.parquet")], got
            assert got.warnings and all("part-1.parquet" in w for w in got.warnings), got
            return "kept"
        assert got == baseline
        return "same"
    if isinstance(error, pb.FileReadError):
        assert error.source == url, (error.source, url, error)
        assert url in str(error)
        return "located"
    if isinstance(error, FileNotFoundError) and fault.startswith("404") and first:
        assert error.filename == url, (error.filename, url, error)
        assert url in str(error), error
        return "not-found"
    raise AssertionError(f"{type(error).__name__}: {error}") from error


@pytest.mark.parametrize(
    ("fault", "entry", "store", "position"),
    CASES,
    indirect=["store"],
    ids=[f"{f}-{e}-{s}-{p}" for f, e, s, p in CASES],
)
def test_fault(
    fault: str,
    entry: str,
    store: Store,
    position: str,
    local_files: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = ENTRY_POINTS[entry]
    server = "s3" if store.url.startswith("s3://") else "http"
    if (entry, server) not in BASELINES:  # the fault-free run, once for every fault
        store.reset()
        BASELINES[entry, server] = (run(store, tmp_path), store.requests())
    baseline, requests = BASELINES[entry, server]
    capsys.readouterr()
    if position == "listing" and store.fail_listing is not None:
        first = True
        store.fail_listing(**FAULTS[fault])
    else:
        method, nth = position_of(requests, position, *layout(local_files[1]))
        first = first_request(requests, method, nth)
        store.fail(method=method, nth=nth, **FAULTS[fault])
    got, error = None, None
    try:
        got = run(store, tmp_path)
    except AssertionError as err:
        if entry == "assert":
            raise AssertionError(f"a storage fault failed the assertion: {err}") from err
        raise
    except Exception as err:
        error = err
    assert store.injected(), "the fault never fired"
    captured = capsys.readouterr()
    outcome = check_outcome(
        entry,
        fault,
        store,
        baseline,
        got,
        error,
        first=first,
        listing=position == "listing",
        output=(captured.out, captured.err),
    )
    OUTCOMES[outcome] = OUTCOMES.get(outcome, 0) + 1


def test_the_matrix_is_the_size_it_says() -> None:
    assert (len(FAULTS), len(ROWS), len(CASES)) == (8, 33, 262)
    print(f"\nfault matrix outcomes: {dict(sorted(OUTCOMES.items()))}")

"""The command on s3:// URLs: every command, with --storage-option standing in for the
environment's endpoint, a prefix standing for the files under it, and --stats agreeing with the
requests the server saw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom.cli import main
from tests import writers

Capture = pytest.CaptureFixture[str]

# The options that reach the test server, as the command line takes them.
CLOSED_PORT = "http://127.0.0.1:9"  # nothing listens: only --storage-option can reach the server


def _options(s3: Any) -> list[str]:
    return [
        "--storage-option",
        f"endpoint_url={s3.endpoint_url}",
        "--storage-option",
        "key=testing",
        "--storage-option",
        "secret=testing",
        "--storage-option",
        "skip_instance_cache=true",
    ]


def run(capsys: Capture, *argv: object) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def local_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("cli-remote")
    rng = np.random.default_rng(7)
    files = []
    for i in range(2):
        ids = rng.integers(0, 10**9, writers.ROWS)
        table = pa.table({"id": ids, "s": [f"k{v}" for v in ids]})
        files.append(writers.write_pyarrow(root / f"part-{i}.parquet", table))
    return [*files, writers.write_duckdb(root / "part-2.parquet")]


@pytest.fixture
def table_url(s3: Any, local_files: list[Path], monkeypatch: pytest.MonkeyPatch) -> str:
    bucket = s3.bucket()
    for path in local_files:
        s3.upload(path, f"s3://{bucket}/table/{path.name}")
    s3.upload(local_files[0], f"s3://{bucket}/table/_SUCCESS")
    # From here on the environment points nowhere: the options on the command line must do.
    monkeypatch.setenv("AWS_ENDPOINT_URL", CLOSED_PORT)
    return f"s3://{bucket}/table/"


def test_inspect_a_prefix_with_stats(
    capsys: Capture, s3: Any, s3_requests: Any, table_url: str
) -> None:
    s3_requests.reset()
    status, out, err = run(capsys, "inspect", "--json", "--stats", *_options(s3), table_url)
    assert status == 0, err
    report = json.loads(out)
    files = report["files"] if isinstance(report, dict) else report
    names = sorted(Path(f["path"]).name for f in files)
    assert names == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]  # no _SUCCESS
    # One LIST of the prefix, then each file's own GETs, counted by --stats as the server did.
    assert s3_requests.count("HEAD") == 0
    gets = s3_requests.count("GET") - 1  # the listing is a GET too
    assert sum(f["requests"] for f in files) == gets
    assert report["stats"]["requests"] == gets


def test_probe_and_check_by_url(
    capsys: Capture, s3: Any, table_url: str, local_files: list[Path]
) -> None:
    one = f"{table_url}part-0.parquet"
    value = pq.read_table(local_files[0]).column("id")[0].as_py()
    status, out, err = run(capsys, "probe", *_options(s3), one, "--column", "id", value)
    assert status == 0, err
    assert "1 of 3 row groups might contain a value" in out
    status, out, err = run(capsys, "probe", *_options(s3), one, "--column", "id", -1)
    assert status == 1, (out, err)
    assert "0 of 3 row groups might contain a value" in out
    status, out, err = run(capsys, "check", *_options(s3), table_url)
    assert status == 0, err
    assert "no violations" in out


def test_without_the_options_the_error_is_one_located_line(capsys: Capture, table_url: str) -> None:
    # The environment's endpoint is a closed port: botocore's connection error, retried under
    # its own policy, ends as one line naming the file.
    status, _, err = run(capsys, "inspect", f"{table_url}part-0.parquet")
    assert status == 2
    assert err.startswith("parquet-bloom: error: ") and "part-0.parquet" in err, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "internal error" not in err and "cannot read" in err, err


def test_add_resize_and_remove_by_url(capsys: Capture, s3: Any, table_url: str) -> None:
    src, dst = f"{table_url}part-0.parquet", f"{table_url}bloom/part-0.parquet"
    options = _options(s3)
    status, out, err = run(capsys, "add", *options, src, dst, "--column", "s", "--stats")
    assert status == 0, err
    assert "wrote 3 filters" in out
    status, out, err = run(capsys, "resize", *options, "--in-place", dst, "--fpp", "0.001")
    assert status == 0, err
    status, out, err = run(capsys, "remove", *options, "--in-place", dst, "--column", "id")
    assert status == 0, err
    status, out, err = run(capsys, "inspect", "--json", *options, dst)
    assert status == 0, err
    (entry,) = json.loads(out)["files"]
    filtered = {c["column"] for c in entry["chunks"] if c["present"]}
    assert filtered == {"s"}


def test_tail_size_sets_the_first_read(
    capsys: Capture, s3: Any, s3_requests: Any, table_url: str
) -> None:
    # pyarrow's filters lie just before the footer: in one 1 MiB tail read, not in a 1 KiB one.
    one = f"{table_url}part-0.parquet"
    counts = []
    for tail in ([], ["--tail-size", "1024"]):
        s3_requests.reset()
        status, out, err = run(capsys, "inspect", "--json", "--stats", *tail, *_options(s3), one)
        assert status == 0, err
        (entry,) = json.loads(out)["files"]
        counts.append(entry["requests"])
    assert counts[0] < counts[1]
    status, _, err = run(capsys, "inspect", "--tail-size", "0", one)
    assert status == 2 and "must be > 0" in err

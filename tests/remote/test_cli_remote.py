"""The command on s3:// URLs: every command, with --storage-option standing in for the
environment's endpoint, a prefix standing for the files under it, and --stats agreeing with the
requests the server saw."""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom import hudi
from parquet_bloom.cli import main
from tests import skips, writers

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


# A real Hudi table's base files (../shared/fixtures/hudi), for the Hudi parts of the commands.
HUDI_TABLE = "sample_table__cow__v6_nonpartitioned"
HUDI_KEYS = [f"rec-{i:05d}" for i in range(3_000)]


def _hudi_base_files(kind: str, root: Path) -> list[Path]:
    """Hudi base files: one ``written`` here (Hudi's default DYNAMIC_V0 filter of its keys and
    their range in pyarrow's key-value metadata, a _hoodie_record_key column in 3 row groups)
    and a plain Parquet file beside it; or a ``real`` Hudi table's."""
    if kind == "written":
        table = pa.table({"_hoodie_record_key": HUDI_KEYS, "v": range(len(HUDI_KEYS))})
        base, plain = root / "base.parquet", root / "plain.parquet"
        metadata = hudi.build_bloom_filter(HUDI_KEYS).footer_metadata()
        pq.write_table(table.replace_schema_metadata(metadata), base, row_group_size=1_000)
        pq.write_table(table, plain)
        return [base, plain]
    if not skips.HUDI_FIXTURES.is_dir():
        pytest.skip(skips.SHARED_ABSENT)
    with zipfile.ZipFile(skips.HUDI_FIXTURES / f"{HUDI_TABLE}.zip") as archive:
        archive.extractall(root)
    return sorted(
        p
        for p in root.rglob("*.parquet")
        if not {".hoodie", "__MACOSX"} & set(p.parts) and not p.name.startswith(".")
    )


@pytest.mark.parametrize("kind", ["written", "real"])
def test_hudi_parts_cost_what_stats_reports(
    capsys: Capture, s3: Any, s3_requests: Any, tmp_path: Path, kind: str
) -> None:
    # inspect and check show each base file's Hudi filter, probe --hudi-key probes it: one
    # listing, then each file's own reads (its footer read once, for the Parquet and the Hudi
    # parts; check also reads the record keys), every one counted by --stats.
    files = _hudi_base_files(kind, tmp_path)
    bucket = s3.bucket()
    prefix = f"s3://{bucket}/hudi/"
    for i, path in enumerate(files):
        s3.upload(path, f"{prefix}{i}-{path.name}")
    key = pq.read_table(files[0], columns=["_hoodie_record_key"]).column(0)[0].as_py()
    for command in (["inspect"], ["check"], ["probe", "--hudi-key", key]):
        s3_requests.reset()
        status, out, err = run(capsys, *command, "--json", "--stats", *_options(s3), prefix)
        assert status == 0, (command, err)
        document = json.loads(out)
        recorded = s3_requests.list()
        assert [r.method for r in recorded if not r.key] == ["GET"]  # the one listing
        assert {r.method for r in recorded} == {"GET"}  # no size lookups
        gets = Counter(f"s3://{r.bucket}/{r.key}" for r in recorded if r.key)
        assert {f["path"]: f["requests"] for f in document["files"]} == gets, command
        assert document["stats"] == {
            "files": len(files),
            "requests": gets.total(),
            "bytes_read": sum(f["bytes_read"] for f in document["files"]),
        }
        if command[0] != "check":  # the tail read holds the footer (issue #17)
            assert set(gets.values()) == {1}, command
        if command[0] == "probe":
            assert document["files"][0]["keys"][0]["reason"] == "in the filter"  # its own key
            with_filter = [
                f for f in document["files"] if f["keys"][0]["reason"] != "no Hudi filter"
            ]
        else:
            with_filter = [f for f in document["files"] if "hudi" in f]
        assert len(with_filter) == (1 if kind == "written" else len(files)), command
        if command[0] == "inspect":
            assert {f["hudi"]["type"] for f in with_filter} == {"DYNAMIC_V0"}
        elif command[0] == "check":
            assert document["ok"] is True and all(f["hudi"]["ok"] for f in with_filter)
            assert all(f["hudi"]["num_keys"] == f["hudi"]["num_rows"] > 0 for f in with_filter)
    status, out, err = run(capsys, "probe", "--stats", *_options(s3), prefix, "--hudi-key", key)
    assert status == 0, err
    n = len(files)
    assert out.splitlines()[-1].split()[:4] == ["total", f"({n}", "files)", str(n)], out

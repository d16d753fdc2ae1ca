"""The command in daily use (issue 30, items 3, 4 and 7): a table directory read as its live
files; a user's mistake or environment told in one line with what to do, never as an internal
error; values and files in either order; messages in the command's flags; a DIR/ made; hex
values told plainly; a resize that adds nothing unasked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from parquet_bloom._io import advice
from parquet_bloom.cli import main
from parquet_bloom.cli._flags import in_flags
from tests.remote.fixtures import clear_filesystem_caches
from tests.tables import delta_tables as tables
from tests.tables import iceberg_tables as it

Capture = pytest.CaptureFixture[str]
CLOSED_PORT = "http://127.0.0.1:9"  # nothing listens there


def run(capsys: Capture, *argv: object) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def assert_user_error(err: str, *parts: str) -> None:
    """One line, the user's: no traceback, no "internal error"; each of ``parts`` in it."""
    assert err.startswith("parquet-bloom: error: ") and err.count("\n") == 1, err
    assert "internal error" not in err and "Traceback" not in err, err
    for part in parts:
        assert part in err, err


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DeltaTable]:
    """The unpartitioned history table compacted: its replaced files still on disk."""
    root = tmp_path_factory.mktemp("lake") / "orders"
    tables.build_history(str(root), partitioned=False)
    DeltaTable(str(root)).optimize.compact(writer_properties=tables.writer_properties())
    return root, DeltaTable(str(root))


def _live(table: DeltaTable) -> list[str]:
    return sorted(os.path.realpath(u.removeprefix("file://")) for u in table.file_uris())


# -- item 3: table directories -------------------------------------------------------------------


def test_probe_of_a_delta_directory_reports_the_live_row_groups(
    capsys: Capture, compacted: tuple[Path, DeltaTable]
) -> None:
    root, table = compacted
    live = _live(table)
    on_disk = [p for p in root.glob("*.parquet")]
    assert len(on_disk) > len(live)
    groups = sum(pq.ParquetFile(p).metadata.num_row_groups for p in live)
    status, out, err = run(capsys, "probe", root, "--column", "id", 1500)
    assert status == 0
    assert out.rstrip().endswith(f"of {groups} row groups might contain a value")
    assert err == (
        f"parquet-bloom: reading the {len(live)} live file{'s' if len(live) > 1 else ''} of "
        f"the Delta table at {root} (version {table.version()}); {len(on_disk) - len(live)} "
        "replaced files ignored\n"
    )
    status, out, _ = run(capsys, "inspect", "--json", root.parent)  # a directory holding it
    document = json.loads(out)
    assert sorted(os.path.realpath(f["path"]) for f in document["files"]) == live
    assert document["tables"][0].startswith("reading the ")
    status, out, _ = run(capsys, "check", root)
    assert status == 0 and out.count(":\n") == len(live)


def test_inspect_of_an_iceberg_directory_reads_its_live_data_files(
    capsys: Capture, tmp_path: Path
) -> None:
    catalog = it.catalog(tmp_path)
    schema = pa.schema([pa.field("id", pa.int64())])
    table = catalog.create_table("db.ev", schema=schema)
    table.append(pa.table({"id": list(range(100))}, schema=schema))
    table.overwrite(pa.table({"id": list(range(5))}, schema=schema))
    root = table.location().removeprefix("file://")
    status, out, err = run(capsys, "inspect", "--json", root)
    assert status == 0
    paths = [os.path.realpath(f["path"]) for f in json.loads(out)["files"]]
    assert paths == sorted(
        os.path.realpath(p.removeprefix("file://")) for p in it.live_data_files(table)
    )
    assert f"snapshot {table.current_snapshot().snapshot_id}); 1 replaced file ignored" in err


def test_a_directory_whose_table_cannot_be_read_is_refused(capsys: Capture, tmp_path: Path) -> None:
    # A _delta_log/ with no log in it: not read as plain files (the replaced ones would be).
    (tmp_path / "_delta_log").mkdir()
    (tmp_path / "_delta_log" / "0.json").write_text("not a log")
    pq.write_table(pa.table({"id": [1]}), tmp_path / "part-0.parquet")
    status, out, err = run(capsys, "inspect", tmp_path)
    assert status == 2 and out == ""
    assert_user_error(err, "looks like a table (_delta_log/) that deltalake cannot read", "glob")
    assert run(capsys, "inspect", tmp_path / "*.parquet")[0] == 0  # a glob: taken as named


def test_probe_of_a_delta_table_on_s3_reads_its_live_files(capsys: Capture, s3: Any) -> None:
    uri = f"s3://{s3.bucket()}/lake/orders"
    options = tables.s3_options(s3.endpoint_url)
    tables.build_history(uri, partitioned=False, storage_options=options)
    table = DeltaTable(uri, storage_options=options)
    status, out, err = run(capsys, "probe", "--json", f"{uri}/", "--column", "id", 1500)
    assert status == 0, err
    assert sorted(f["path"] for f in json.loads(out)["files"]) == sorted(table.file_uris())
    assert f"Delta table at {uri} (version {table.version()})" in err


# -- item 4: user errors -----------------------------------------------------------------------


def _without(package: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command run with ``package`` made unimportable (None in sys.modules)."""
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        "from parquet_bloom.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, check=False
    )


@pytest.mark.parametrize(
    ("package", "argv", "extra"),
    [
        ("deltalake", ["probe", "orders", "--column", "id", "1"], "delta"),
        ("deltalake", ["table", "inspect", "orders"], "delta"),
        ("pyiceberg", ["table", "inspect", "orders/x.metadata.json"], "iceberg"),
        ("s3fs", ["inspect", "s3://bucket/x.parquet"], "s3"),
        ("gcsfs", ["inspect", "gs://bucket/x.parquet"], "gcs"),
    ],
)
def test_a_missing_extra_is_one_line_that_says_what_to_install(
    compacted: tuple[Path, DeltaTable], package: str, argv: list[str], extra: str
) -> None:
    done = _without(package, argv, compacted[0].parent)
    assert done.returncode == 2
    assert_user_error(done.stderr, f"pip install 'parquet-bloom[{extra}]'")


def test_an_unknown_delta_version_is_the_users_mistake(
    capsys: Capture, compacted: tuple[Path, DeltaTable]
) -> None:
    root, table = compacted
    status, _, err = run(capsys, "table", "inspect", "--version", 99, root)
    assert status == 2
    assert_user_error(err, f"has no version 99: its latest is {table.version()}")


def test_an_unknown_iceberg_snapshot_is_the_users_mistake(capsys: Capture, tmp_path: Path) -> None:
    catalog = it.catalog(tmp_path)
    schema = pa.schema([pa.field("id", pa.int64())])
    table = catalog.create_table("db.ev", schema=schema)
    table.append(pa.table({"id": [1]}, schema=schema))
    status, _, err = run(capsys, "table", "inspect", "--snapshot-id", 99, table.location())
    assert status == 2
    assert_user_error(err, "has no snapshot 99")


def test_advice_reads_in_flags() -> None:
    assert in_flags(advice.UNREACHABLE).endswith(
        "AWS_ENDPOINT_URL, or the one given in --storage-option endpoint_url=..."
    )
    assert "pass key and secret as --storage-option key=..." in in_flags(advice.CREDENTIALS)


def test_missing_credentials_say_what_to_do(
    capsys: Capture, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    clear_filesystem_caches()  # an s3fs instance made earlier holds the credentials it found
    status, _, err = run(capsys, "inspect", f"s3://{s3.bucket()}/t/")
    assert status == 2
    assert_user_error(err, in_flags(advice.CREDENTIALS))
    status, _, err = run(capsys, "table", "inspect", f"s3://{s3.bucket()}/t")
    assert status == 2
    assert_user_error(err, in_flags(advice.CREDENTIALS))


def test_an_unreachable_endpoint_says_what_to_do(
    capsys: Capture, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", CLOSED_PORT)
    clear_filesystem_caches()  # an s3fs instance made earlier holds the endpoint it found
    status, _, err = run(capsys, "inspect", "--retries", 0, "s3://bucket/t/x.parquet")
    assert status == 2
    assert_user_error(err, in_flags(advice.UNREACHABLE))
    status, _, err = run(capsys, "table", "inspect", "--retries", 0, "s3://bucket/t")
    assert status == 2
    assert_user_error(err, in_flags(advice.UNREACHABLE))


# -- item 7: the small things --------------------------------------------------------------------


@pytest.fixture
def users(tmp_path: Path) -> Path:
    path = tmp_path / "users.parquet"
    data = pa.table({"email": [f"u{i}@x" for i in range(100)], "raw": [b"\x00\x01"] * 100})
    pq.write_table(data, path, bloom_filter_options={"email": {"ndv": 100}})
    return path


def test_probe_takes_values_before_files(
    capsys: Capture, users: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = run(capsys, "probe", users, "--column", "email", "u5@x", "nobody")
    assert first[0] == 0
    assert run(capsys, "probe", "--column", "email", "u5@x", "nobody", users) == first
    assert run(capsys, "probe", "--column", "email", "u5@x", "nobody", "--", users) == first
    monkeypatch.chdir(users.parent)
    assert run(capsys, "probe", "--column", "email", "u5@x", "nobody", "*.parquet")[0] == 0
    # Nothing there names a file: said, with where files go.
    status, _, err = run(capsys, "probe", "--column", "email", "u5@x", "nowhere.parquet")
    assert status == 2
    assert_user_error(err, "no FILE given", "-- FILE")


def test_messages_name_the_commands_flags(capsys: Capture, users: Path, tmp_path: Path) -> None:
    status, _, err = run(capsys, "add", "--column", "email", "--bytes", 1000, users, tmp_path / "o")
    assert status == 2
    assert_user_error(err, "--bytes must be a power of two")
    assert "num_bytes" not in err
    status, _, err = run(capsys, "add", "--column", "email", users, users)
    assert status == 2
    assert_user_error(err, "pass --in-place")
    assert "in_place" not in err


def test_a_dir_named_with_a_slash_is_made(capsys: Capture, users: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.parquet"
    other.write_bytes(users.read_bytes())
    target = tmp_path / "out3"
    status, _, err = run(capsys, "add", "--column", "email", users, other, f"{target}/")
    assert status == 0, err
    assert sorted(p.name for p in target.iterdir()) == ["other.parquet", "users.parquet"]
    status, _, err = run(capsys, "add", "--column", "email", users, other, tmp_path / "out4")
    assert status == 2
    assert_user_error(err, "out4 does not exist", f"name it {tmp_path / 'out4'}/ to have it made")
    assert not (tmp_path / "out4").exists()


def test_a_bad_hex_value_says_which_and_what_is_expected(capsys: Capture, users: Path) -> None:
    status, _, err = run(capsys, "probe", users, "--column", "raw", "0x0g")
    assert status == 2
    assert_user_error(err, "'0x0g' is not hex", "position 3", "e.g. 0x00ff")
    assert "fromhex" not in err


def test_resize_of_a_column_without_filters_adds_none(
    capsys: Capture, users: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.parquet"
    status, _, err = run(capsys, "resize", "--column", "raw", users, out)
    assert status == 2
    assert_user_error(err, "'raw' has no Bloom filter", "parquet-bloom add --column raw")
    assert not out.exists()
    status, text, err = run(capsys, "resize", "--column", "email", "--fpp", 0.2, users, out)
    assert status == 0, err
    assert "wrote 1 filters" in text


def test_an_encrypted_file_without_keys_names_the_flag(capsys: Capture) -> None:
    from tests.encryption.keys import DATA

    encrypted = DATA / "encrypt_columns_and_footer_bloom_filter.parquet.encrypted"
    for command in ("inspect", "probe"):
        extra = ["--column", "double_field", "1.5"] if command == "probe" else []
        status, _, err = run(capsys, command, encrypted, *extra)
        assert status == 2
        assert_user_error(err, "pass --decryption-config FILE (docs/encryption.md)")
        assert "decryption=" not in err
    assert in_flags("read the file with decryption= and the column's key") == (
        "read the file with --decryption-config FILE and the column's key"
    )

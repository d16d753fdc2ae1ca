"""``parquet-bloom table``: inspect, prune, add, resize and remove on real tables: Delta tables
written by deltalake (on local disk and on the loopback S3 server), Iceberg tables in a
pyiceberg SqlCatalog (sqlite) named by ``--catalog`` through PYICEBERG_CATALOG__* variables,
or opened read-only from their metadata."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyiceberg.expressions import And, EqualTo
from pyiceberg.table import Table

import parquet_bloom as pb
import parquet_bloom.delta as pbd
import parquet_bloom.iceberg as pbi
from parquet_bloom.cli import main
from parquet_bloom.testing import assert_bloom_filters_valid
from tests.remote.fixtures import clear_filesystem_caches
from tests.remote.servers import ACCESS_KEY, REGION, SECRET_KEY
from tests.tables import delta_tables as dt
from tests.tables import iceberg_tables as it

Capture = pytest.CaptureFixture[str]

CLOSED_PORT = "http://127.0.0.1:9"  # nothing listens: only --storage-option reaches the server
CATALOG = "test"  # the name tests.tables.iceberg_tables.catalog gives its SqlCatalog
ROW_GROUP_ROWS = 10


def run(capsys: Capture, *argv: object) -> tuple[int, str, str]:
    status = main(["table", *(str(a) for a in argv)])
    out, err = capsys.readouterr()
    return status, out, err


def run_json(capsys: Capture, *argv: object) -> tuple[int, dict[str, Any], str]:
    status, out, err = run(capsys, *argv, "--json")
    return status, json.loads(out), err


def assert_one_line_error(err: str, *fragments: str) -> None:
    assert err.startswith("parquet-bloom: error: "), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err


def commits(root: Path) -> list[Path]:
    return sorted((root / "_delta_log").glob("*.json"))


# -- tables ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def delta_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """deltalake's history table (versions 0..4, partitioned by part, filters on id and key):
    six live files."""
    root = tmp_path_factory.mktemp("delta") / "events"
    dt.build_history(str(root))
    return root


@pytest.fixture
def delta_table(delta_template: Path, tmp_path: Path) -> Path:
    """A copy of the history table, for a test that commits to it."""
    return Path(shutil.copytree(delta_template, tmp_path / "events"))


def _iceberg(root: Path, monkeypatch: pytest.MonkeyPatch) -> Table:
    """A SqlCatalog table named ``db.events`` (partitioned by region): four files appended by
    pyiceberg (no filters), then one written with filters on every column but region, in row
    groups of ten rows (ids 200..239); the catalog configured in the environment as
    ``--catalog test`` reads it."""
    catalog = it.catalog(root)
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__URI", f"sqlite:///{root}/catalog.db")
    monkeypatch.setenv(
        f"PYICEBERG_CATALOG__{CATALOG.upper()}__WAREHOUSE", (root / "warehouse").as_uri()
    )
    table = catalog.create_table("db.events", it.SCHEMA, partition_spec=it.BY_REGION)
    for first in (0, 100):
        table.append(it.values(range(first, first + 50), "eu"))
        table.append(it.values(range(first + 50, first + 100), "us"))
    it.add_data_file(
        table, it.values(range(200, 240), "eu"), "filtered.parquet", row_group_size=ROW_GROUP_ROWS
    )
    return table


@pytest.fixture
def iceberg_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Table:
    return _iceberg(tmp_path / "iceberg", monkeypatch)


# -- inspect ---------------------------------------------------------------------------------


def test_inspect_a_delta_table(delta_template: Path, capsys: Capture) -> None:
    status, document, err = run_json(capsys, "inspect", delta_template)
    assert status == 0 and err == ""
    table = DeltaTable(str(delta_template))
    assert (document["format"], document["version"]) == ("delta", table.version()) == ("delta", 4)
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    assert sorted(f["path"] for f in document["files"]) == sorted(a["path"] for a in actions)
    for entry in document["files"]:
        metadata = pq.ParquetFile(delta_template / entry["path"]).metadata
        assert entry["num_rows"] == metadata.num_rows
        assert entry["num_row_groups"] == metadata.num_row_groups
        assert entry["num_bytes"] == (delta_template / entry["path"]).stat().st_size
        assert set(entry["filters"]) == {"id", "key"}
        for f in entry["filters"].values():
            assert f["row_groups"] == metadata.num_row_groups and f["num_bytes"] > 0
    assert sum(f["num_rows"] for f in document["files"]) == table.to_pyarrow_table().num_rows
    assert set(document["columns"]) == {"id", "key"}
    assert document["columns"]["id"]["files"] == 6
    assert document["columns"]["id"]["num_bytes"] == sum(
        f["filters"]["id"]["num_bytes"] for f in document["files"]
    )

    status, out, err = run(capsys, "inspect", delta_template)
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith(f"{delta_template} (Delta, version 4): 6 data files, 2,400 rows")
    assert " ".join(lines[1].split()) == "file rows bytes row groups filters filter bytes"
    assert sum(1 for line in lines if line.startswith("part=")) == 6
    assert lines[-1].startswith("6 of 6 files with Bloom filters")
    # An older version: its own files.
    status, document, _ = run_json(capsys, "inspect", delta_template, "--version", 0)
    assert status == 0 and document["version"] == 0
    old = pa.table(DeltaTable(str(delta_template), version=0).get_add_actions(flatten=True))
    assert sorted(f["path"] for f in document["files"]) == sorted(old["path"].to_pylist())


def test_inspect_an_iceberg_table_by_catalog_and_by_location(
    iceberg_table: Table, capsys: Capture
) -> None:
    by_catalog = run_json(capsys, "inspect", "db.events", "--catalog", CATALOG, "--stats")
    status, document, err = by_catalog
    assert status == 0 and err == ""
    snapshot = iceberg_table.current_snapshot()
    assert snapshot is not None
    assert (document["format"], document["version"]) == ("iceberg", snapshot.snapshot_id)
    files = {f["path"]: f for f in document["files"]}
    assert set(files) == set(it.data_files(iceberg_table))
    filtered = next(f for path, f in files.items() if path.endswith("/filtered.parquet"))
    assert (filtered["num_rows"], filtered["num_row_groups"]) == (40, 4)
    assert set(filtered["filters"]) == set(it.BLOOM_COLUMNS)
    assert all(not f["filters"] for f in files.values() if f is not filtered)
    assert document["stats"]["files"] == 5 and document["stats"]["requests"] >= 5
    # The same files read-only from the table's location, and from a metadata file.
    location = iceberg_table.location().removeprefix("file://")
    for table in (location, iceberg_table.metadata_location.removeprefix("file://")):
        status, static, _ = run_json(capsys, "inspect", table, "--stats")
        assert status == 0 and static["files"] == document["files"]
        assert static["version"] == snapshot.snapshot_id
    status, out, _ = run(capsys, "inspect", location)
    assert status == 0
    assert out.splitlines()[0].startswith(f"{location} (Iceberg, snapshot {snapshot.snapshot_id})")
    assert "data/filtered.parquet" in out and "1 of 5 files with Bloom filters" in out
    # An earlier snapshot: the files of the first two appends.
    first = iceberg_table.snapshots()[1].snapshot_id
    args = ("inspect", "db.events", "--catalog", CATALOG, "--snapshot-id", first)
    status, document, _ = run_json(capsys, *args)
    assert status == 0 and document["version"] == first and len(document["files"]) == 2


# -- prune -----------------------------------------------------------------------------------


def test_prune_a_delta_table(delta_template: Path, capsys: Capture) -> None:
    status, document, err = run_json(capsys, "prune", delta_template, "--column", "id", 1500)
    assert status == 0 and err == ""
    expected = pbd.prune(str(delta_template), pc.field("id") == 1500)
    assert [f["path"] for f in document["files"]] == list(expected.files)
    ((entry),) = document["files"]
    (row_group,) = entry["row_groups"]
    ids = pq.ParquetFile(delta_template / entry["path"]).read_row_group(row_group)["id"]
    assert 1500 in ids.to_pylist()
    report = document["report"]
    assert (report["table_files"], report["files_after_table"], report["files_read"]) == (6, 2, 1)
    assert report["bloom"]["files_skipped"] == 1 and report["bloom"]["requests"] == 2
    assert document["might_contain"] is True
    # Two columns, several values: AND of the columns, OR of the values.
    args = ("prune", delta_template, "--column", "key", "k1500", "k1501", "--column", "part", "odd")
    status, out, err = run(capsys, *args)
    assert status == 0 and err == ""
    lines = out.splitlines()
    described = "key in (k1500, k1501) and part in (odd)"
    assert lines[0] == f"{delta_template} (Delta, version 4): {described}"
    (kept,) = [line for line in lines if line.startswith("part=")]
    assert kept.startswith("part=odd/")
    assert lines[-1].startswith("1 of 6 files might hold a match; table: ")
    # Nothing might match: exit 1, as probe.
    status, out, _ = run(capsys, "prune", delta_template, "--column", "id", 99999)
    assert status == 1 and "0 of 6 files might hold a match" in out
    status, document, _ = run_json(capsys, "prune", delta_template, "--column", "value", "9.5")
    assert status == 1 and document["files"] == [] and document["might_contain"] is False


def test_prune_a_delta_table_with_a_deletion_vector(tmp_path: Path, capsys: Capture) -> None:
    root, key, deleted = _with_deletion_vector(tmp_path)
    status, document, _ = run_json(capsys, "prune", root, "--column", "id", deleted[1], 998)
    assert status == 0
    assert [f["path"] for f in document["files"]] == [key]
    assert document["report"]["files_with_deletes"] == 1


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("id", "205"),
        ("name", "name-205"),
        ("day", "2024-07-24"),
        ("ts", "2024-01-01T00:03:25"),
        ("tstz", "2024-01-01T03:25:00Z"),
        ("tstz", "2024-01-01T04:25:00+01:00"),
        ("tstz", "2024-01-01T03:25:00"),  # no offset: UTC
        ("price", "2.05"),
        ("price", "2.050"),
        ("big", "100000000000000000.205"),
        ("score", "51.25"),
        ("ratio", "25.625"),
        ("code", "0x000000cd"),
        ("payload", "0x700000cd"),
        ("uid", "00000000-0000-0000-0000-0000000000cd"),
        ("small", "205"),
        ("clock", "00:03:25"),
    ],
)
def test_prune_an_iceberg_table_reads_values_as_the_column_type(
    iceberg_table: Table, column: str, value: str, capsys: Capture
) -> None:
    """id 205 is in row group 0 of the filtered file; every other file is left out by its
    metrics or partition, so the filters decide (one row group of four left)."""
    args = ("prune", "db.events", "--catalog", CATALOG, "--column", column, value)
    status, document, err = run_json(capsys, *args)
    assert status == 0 and err == ""
    kept = {f["path"].rsplit("/", 1)[-1]: f["row_groups"] for f in document["files"]}
    assert kept["filtered.parquet"] == [0]
    assert document["report"]["bloom"]["row_groups_skipped"] >= 3


def test_prune_an_iceberg_table(iceberg_table: Table, capsys: Capture) -> None:
    args = ("prune", "db.events", "--catalog", CATALOG, "--column", "id", 205, 231)
    status, document, _ = run_json(capsys, *args, "--column", "name", "name-205", "name-231")
    assert status == 0
    result = pbi.prune(iceberg_table, "id in (205, 231) and name in ('name-205', 'name-231')")
    assert {f["path"]: f["row_groups"] for f in document["files"]} == result.row_groups
    (groups,) = [f["row_groups"] for f in document["files"]]
    assert groups == [0, 3]
    # Read-only from the location too, with the report in the text.
    location = iceberg_table.location().removeprefix("file://")
    status, out, _ = run(capsys, "prune", location, "--column", "id", 205, "--stats")
    assert status == 0
    assert "data/filtered.parquet  0" in out
    assert "1 of 5 files might hold a match; table: 1 of 5 files" in out
    assert "total (1 files)" in out
    # An id and a name of different row groups: the filters leave nothing, exit 1.
    argv = ("--column", "id", 205, "--column", "name", "name-231")
    status, document, _ = run_json(capsys, "prune", location, *argv)
    assert status == 1 and document["files"] == [] and document["might_contain"] is False
    assert document["report"]["files_after_table"] == 1
    assert document["report"]["bloom"]["files_skipped"] == 1
    row_filter = And(EqualTo("id", 205), EqualTo("name", "name-231"))
    assert iceberg_table.scan(row_filter=row_filter).to_arrow().num_rows == 0


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (("--column", "nope", "1"), ("no column 'nope'", "its columns are id, name")),
        (("--column", "id", "x"), ("cannot read 'x' as int64 for column 'id'",)),
        (("--column", "small", "99999999999"), ("as int32 for column 'small'",)),
        (("--column", "price", "2.051"), ("for column 'price'",)),
        (("--column", "code", "0x01"), ("1 bytes, not 4",)),
        (("--column", "id"), ("--column id needs values after it",)),
        (("--column", "id", "1", "--version", "3"), ("--version is for Delta tables",)),
    ],
)
def test_prune_refuses_bad_columns_and_values_in_one_line(
    iceberg_table: Table, argv: tuple[str, ...], fragments: tuple[str, ...], capsys: Capture
) -> None:
    status, out, err = run(capsys, "prune", "db.events", "--catalog", CATALOG, *argv)
    assert status == 2 and out == ""
    assert_one_line_error(err, *fragments)


# -- add, resize, remove ---------------------------------------------------------------------


def _assert_rewritten(
    root: Path, before: pa.Table, commits_before: int, *, filters: bool = True
) -> list[dict[str, Any]]:
    """One new commit, all of it dataChange=false; the rows unchanged; every new file valid
    (``filters``: False after every filter was removed). Returns the commit's add actions."""
    log = commits(root)
    assert len(log) == commits_before + 1
    actions = dt.actions(log[-1])
    changes = [a[k] for a in actions for k in ("add", "remove") if k in a]
    assert changes and all(change["dataChange"] is False for change in changes)
    after = DeltaTable(str(root)).to_pyarrow_table().sort_by("id")
    assert after.equals(before)
    adds = [a["add"] for a in actions if "add" in a]
    for add in adds:
        assert_bloom_filters_valid(root / add["path"], allow_empty=not filters)
    return adds


def test_add_resize_and_remove_on_a_delta_table(delta_table: Path, capsys: Capture) -> None:
    before = DeltaTable(str(delta_table)).to_pyarrow_table().sort_by("id")
    old = {p: p.read_bytes() for p in delta_table.rglob("*.parquet")}

    status, document, err = run_json(capsys, "add", delta_table, "--column", "value")
    assert status == 0 and err == ""
    adds = _assert_rewritten(delta_table, before, 5)
    assert document["version"] == DeltaTable(str(delta_table)).version() == 5
    assert document["ok"] is True and len(document["rewritten"]) == 6
    assert {e["new_path"] for e in document["rewritten"]} == {a["path"] for a in adds}
    for entry in document["rewritten"]:
        groups = pq.ParquetFile(delta_table / entry["path"]).metadata.num_row_groups
        assert {f["column"] for f in entry["filters_written"]} == {"value"}
        assert len(entry["filters_written"]) == groups and entry["filters_kept"] == 2 * groups
        assert entry["bytes_after"] == (delta_table / entry["new_path"]).stat().st_size
    assert all(path.read_bytes() == data for path, data in old.items())  # old files untouched

    status, out, err = run(capsys, "resize", delta_table, "--fpp", "0.001", "--progress")
    assert status == 0
    _assert_rewritten(delta_table, before, 6)
    lines = out.splitlines()
    assert lines[0].startswith(f"{delta_table}: committed version 6; 6 files rewritten (")
    assert " ".join(lines[1].split()) == "file filters bytes removed size before after"
    assert len(lines) == 2 + 1 + 6
    assert "[########################] 6/6 " in err and err.endswith("\r")

    status, out, err = run(capsys, "remove", delta_table, "--all")
    assert status == 0 and err == ""
    _assert_rewritten(delta_table, before, 7, filters=False)
    status, document, _ = run_json(capsys, "inspect", delta_table)
    assert status == 0 and document["columns"] == {}
    assert all(f["filters"] == {} for f in document["files"])


def test_add_on_some_files_of_a_delta_table(delta_table: Path, capsys: Capture) -> None:
    before = DeltaTable(str(delta_table)).to_pyarrow_table().sort_by("id")
    _, document, _ = run_json(capsys, "inspect", delta_table)
    chosen = sorted(f["path"] for f in document["files"])[:2]
    argv = ("add", delta_table, "--column", "value", "--bytes", 64, "--files", *chosen)
    status, document, err = run_json(capsys, *argv, "--stats")
    assert status == 0 and err == ""
    assert sorted(e["path"] for e in document["rewritten"]) == chosen
    assert {f["num_bytes"] for e in document["rewritten"] for f in e["filters_written"]} == {64}
    assert document["stats"]["files"] == 2 and document["stats"]["bytes_downloaded"] > 0
    _assert_rewritten(delta_table, before, 5)


def test_a_refused_file_is_reported_and_exits_2(tmp_path: Path, capsys: Capture) -> None:
    """A file with a deletion vector is refused; the others are committed; exit 2."""
    root, key, _ = _with_deletion_vector(tmp_path)
    version = DeltaTable(str(root)).version()
    status, out, err = run(capsys, "add", root, "--column", "value")
    assert status == 2
    assert DeltaTable(str(root)).version() == version + 1
    lines = out.splitlines()
    assert lines[0].startswith(f"{root}: committed version {version + 1}; 3 files rewritten")
    assert f"refused: {key}: " in out and "deletion vector" in out
    assert_one_line_error(
        err, "1 of 4 files not rewritten (1 refused)", f"committed in version {version + 1}"
    )
    status, document, _ = run_json(capsys, "add", root, "--column", "value")
    assert status == 2 and document["ok"] is False
    assert [r["path"] for r in document["refused"]] == [key]


def test_a_missing_column_is_one_error_before_any_file(delta_table: Path, capsys: Capture) -> None:
    """Issue #30: it was one error a file (6), after reading each; now one, before any."""
    status, out, err = run(capsys, "add", delta_table, "--column", "nope", "--json")
    assert status == 2 and out == ""
    assert_one_line_error(err, "no column 'nope' in the Delta table at", "its columns are 'id'")
    assert len(commits(delta_table)) == 5
    assert [p.name for p in delta_table.rglob("*.bloom-*")] == []  # no new file


def test_add_resize_and_remove_on_an_iceberg_table(iceberg_table: Table, capsys: Capture) -> None:
    before = it.sorted_rows(iceberg_table.scan().to_arrow())
    snapshots = len(iceberg_table.snapshots())
    args = ("db.events", "--catalog", CATALOG)

    status, document, err = run_json(capsys, "add", *args, "--column", "name", "--column", "id")
    assert status == 0 and err == ""
    table = it.catalog_table(iceberg_table)
    assert len(table.snapshots()) == snapshots + 1
    assert document["version"] == table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    assert it.sorted_rows(table.scan().to_arrow()) == before
    # filtered.parquet already has these filters, byte for byte: left as it is.
    assert [p.rsplit("/", 1)[-1] for p in document["unchanged"]] == ["filtered.parquet"]
    new = {e["new_path"] for e in document["rewritten"]}
    assert new | set(document["unchanged"]) == set(it.data_files(table))
    for path in it.data_files(table):
        assert_bloom_filters_valid(path.removeprefix("file://"))
        with pb.BloomFilterReader(path.removeprefix("file://")) as reader:
            assert {"id", "name"} <= {c.path for c in reader.column_chunks if c.bloom_filter_offset}

    status, out, err = run(capsys, "resize", *args, "--column", "name", "--bytes", 1024)
    assert status == 0 and err == ""
    assert out.startswith("db.events: committed snapshot ")
    assert "data/filtered" in out

    status, document, _ = run_json(capsys, "remove", *args, "--column", "id")
    assert status == 0
    table = it.catalog_table(iceberg_table)
    assert len(table.snapshots()) == snapshots + 3
    status, document, _ = run_json(capsys, "inspect", *args)
    assert "id" not in document["columns"]
    assert document["columns"]["name"]["files"] == 5
    assert it.sorted_rows(table.scan().to_arrow()) == before


def test_resize_of_a_column_adds_no_filter(iceberg_table: Table, capsys: Capture) -> None:
    """``resize --column X`` rebuilds X's filters where files have them and adds none, as the
    file-level ``resize`` does: pyiceberg's four files (no filters) are left as they are; a
    column no file has a filter of is one error pointing to ``table add``."""
    args = ("db.events", "--catalog", CATALOG)
    snapshot = iceberg_table.current_snapshot()
    status, out, err = run(capsys, "resize", *args, "--column", "region")
    assert status == 2 and out == ""
    assert_one_line_error(
        err, "no data file of the table has a Bloom filter of 'region'", "table add --column region"
    )
    assert it.catalog_table(iceberg_table).current_snapshot() == snapshot

    status, document, err = run_json(capsys, "resize", *args, "--column", "name", "--bytes", 1024)
    assert status == 0 and err == ""
    assert [e["path"].rsplit("/", 1)[-1] for e in document["rewritten"]] == ["filtered.parquet"]
    assert len(document["unchanged"]) == 4
    table = it.catalog_table(iceberg_table)
    for path in it.data_files(table):
        with pb.BloomFilterReader(path.removeprefix("file://")) as reader:
            sizes = {f.num_bytes for (_, c), f in reader.filters().items() if c == "name"}
        assert sizes == ({1024} if ".bloom-" in path else set())


def test_an_iceberg_table_read_from_its_metadata_is_not_committed_to(
    iceberg_table: Table, capsys: Capture
) -> None:
    snapshot = iceberg_table.current_snapshot()
    location = iceberg_table.location().removeprefix("file://")
    for command in (("add", "--column", "id"), ("resize",), ("remove", "--all")):
        status, out, err = run(capsys, command[0], location, *command[1:])
        assert status == 2 and out == ""
        assert_one_line_error(err, "read-only", "needs its catalog (--catalog NAME")
    assert it.catalog_table(iceberg_table).current_snapshot() == snapshot
    # And a column the table does not have: one line, before anything is written.
    status, out, err = run(capsys, "add", "db.events", "--catalog", CATALOG, "--column", "nope")
    assert status == 2 and out == ""
    assert_one_line_error(err, "nope")
    # Keys for encrypted files (tests/encryption/test_iceberg_tables.py), given for a table of
    # plaintext files: each file fails, saying so, and nothing is committed.
    keys = iceberg_table.location().removeprefix("file://") + "/../keys.json"
    Path(keys).write_text('{"footer_key": "hex:30313233343536373839303132333435"}')
    argv = ("add", "db.events", "--catalog", CATALOG, "--column", "id", "--decryption-config", keys)
    status, out, err = run(capsys, *argv)
    assert status == 2
    assert (
        "not encrypted" in out and '"allow_plaintext_files": true in the --decryption-config' in out
    )
    assert "nothing was committed" in err
    assert it.catalog_table(iceberg_table).current_snapshot() == snapshot


# -- bad tables and usage --------------------------------------------------------------------


def test_bad_tables_are_one_line_errors(
    tmp_path: Path, delta_template: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.parquet").write_bytes(b"PAR1")
    cases = [
        (("inspect", tmp_path / "nowhere"), ("no table at", "no such directory")),
        (("inspect", tmp_path / "plain"), ("neither a Delta table", "--catalog NAME")),
        (("prune", tmp_path / "plain", "--column", "id", 1), ("neither a Delta table",)),
        (("inspect", "db.events", "--catalog", "absent"), ("no Iceberg catalog 'absent'",)),
        (("inspect", tmp_path / "plain", "--format", "delta"), ("no Delta table at",)),
        (("inspect", tmp_path / "plain", "--format", "iceberg"), ("no Iceberg table at",)),
        (("inspect", delta_template, "--snapshot-id", 1), ("--snapshot-id is for Iceberg",)),
        (("add", delta_template, "--column", "id", "--bytes", 64, "--fpp", 0.1), ("--bytes",)),
        (("add", delta_template), ("--column",)),
        (("remove", delta_template, "--all", "--column", "id"), ("not allowed with",)),
    ]
    for argv, fragments in cases:
        status, out, err = run(capsys, *argv)
        assert status == 2 and out == "", argv
        assert_one_line_error(err, *fragments)
    # A catalog that is configured, a table that is not there.
    _iceberg(tmp_path / "iceberg", monkeypatch)
    status, out, err = run(capsys, "inspect", "db.absent", "--catalog", CATALOG)
    assert status == 2 and out == ""
    assert_one_line_error(err, "cannot load db.absent from the Iceberg catalog 'test'")


def test_a_data_file_that_cannot_be_read_is_reported_and_the_others_go_on(
    delta_table: Path, capsys: Capture
) -> None:
    _, document, _ = run_json(capsys, "inspect", delta_table)
    broken = sorted(f["path"] for f in document["files"])[0]
    (delta_table / broken).write_bytes(b"not parquet at all")
    status, document, err = run_json(capsys, "inspect", delta_table)
    assert status == 2
    assert_one_line_error(err, broken)
    errors = [f for f in document["files"] if "error" in f]
    assert [f["path"] for f in errors] == [broken]
    assert len(document["files"]) == 6 and document["columns"]["id"]["files"] == 5


def test_the_command_in_a_process_reads_the_catalog_from_the_environment(
    iceberg_table: Table,
) -> None:
    """pyiceberg reads its environment when imported: a new process with the variables set,
    as a user runs the command."""
    argv = ["table", "prune", "db.events", "--catalog", CATALOG, "--column", "id", "205"]
    done = subprocess.run(
        [sys.executable, "-m", "parquet_bloom", *argv],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "data/filtered.parquet  0" in done.stdout


# -- on the S3 server --------------------------------------------------------------------------


def _delta_options(s3: Any) -> list[str]:
    """deltalake's options for the test server, as --storage-option arguments."""
    options = {
        "AWS_ENDPOINT_URL": s3.endpoint_url,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
        "aws_conditional_put": "etag",
    }
    return [a for k, v in options.items() for a in ("--storage-option", f"{k}={v}")]


@pytest.fixture
def s3_delta_table(s3: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[str]]]:
    """The history table on the S3 server; the environment's endpoint then a closed port, so
    that only --storage-option reaches the server."""
    clear_filesystem_caches()
    uri = f"s3://{s3.bucket()}/lake/events"
    options = _delta_options(s3)
    dt.build_history(uri, storage_options=dict(o.split("=", 1) for o in options[1::2]))
    monkeypatch.setenv("AWS_ENDPOINT_URL", CLOSED_PORT)
    yield uri, options
    clear_filesystem_caches()


def test_a_delta_table_on_s3_with_storage_options(
    s3_delta_table: tuple[str, list[str]], capsys: Capture
) -> None:
    uri, options = s3_delta_table
    status, document, err = run_json(capsys, "inspect", uri, *options)
    assert status == 0 and err == ""
    assert len(document["files"]) == 6 and set(document["columns"]) == {"id", "key"}

    status, document, err = run_json(capsys, "prune", uri, "--column", "id", 1500, *options)
    assert status == 0 and err == ""
    assert len(document["files"]) == 1 and document["report"]["bloom"]["requests"] == 2

    status, document, err = run_json(capsys, "add", uri, "--column", "value", *options)
    assert status == 0 and err == ""
    assert document["version"] == 5 and len(document["rewritten"]) == 6
    storage = dict(o.split("=", 1) for o in options[1::2])
    table = DeltaTable(uri, storage_options=storage)
    assert table.version() == 5
    assert table.to_pyarrow_table().num_rows == 2400
    status, document, _ = run_json(capsys, "inspect", uri, *options)
    assert set(document["columns"]) == {"id", "key", "value"}

    # Without the options, the closed port: one line naming the store's error, exit 2.
    clear_filesystem_caches()
    status, out, err = run(capsys, "inspect", uri)
    assert status == 2 and out == ""
    assert_one_line_error(err, uri, "Could not connect to the endpoint URL", "127.0.0.1:9")


def test_an_iceberg_table_on_s3_with_storage_options(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    """FileIO properties as --storage-option: read-only from the table's s3:// location, and
    added to the catalog's own for a commit; the environment's endpoint a closed port."""
    clear_filesystem_caches()
    properties = it.s3_properties(s3.endpoint_url)
    catalog = it.catalog(tmp_path, f"s3://{s3.bucket()}/warehouse", **properties)
    table = catalog.create_table("db.events", it.SCHEMA)
    it.add_data_file(table, it.values(range(200, 240)), "filtered.parquet", row_group_size=10)
    table.append(it.values(range(50)))
    monkeypatch.setenv("AWS_ENDPOINT_URL", CLOSED_PORT)
    monkeypatch.setenv("PYICEBERG_CATALOG__TEST__URI", f"sqlite:///{tmp_path}/catalog.db")
    options = [a for k, v in properties.items() for a in ("--storage-option", f"{k}={v}")]
    location = table.location()
    assert location.startswith("s3://")

    status, document, err = run_json(capsys, "inspect", location, *options)
    assert status == 0 and err == ""
    assert sorted(f["path"] for f in document["files"]) == sorted(it.data_files(table))
    status, document, err = run_json(capsys, "prune", location, "--column", "id", 205, *options)
    assert status == 0 and err == ""
    assert [(f["path"].rsplit("/", 1)[-1], f["row_groups"]) for f in document["files"]] == [
        ("filtered.parquet", [0])
    ]
    argv = ("add", "db.events", "--catalog", CATALOG, "--column", "name", *options)
    status, document, err = run_json(capsys, *argv)
    # filtered.parquet already has the filter, byte for byte: left as it is.
    assert status == 0 and err == "" and len(document["rewritten"]) == 1
    assert [p.rsplit("/", 1)[-1] for p in document["unchanged"]] == ["filtered.parquet"]
    table = it.catalog_table(table)
    assert document["version"] == table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    status, document, _ = run_json(capsys, "inspect", location, *options)
    assert document["columns"]["name"]["files"] == 2
    clear_filesystem_caches()


def _with_deletion_vector(tmp_path: Path) -> tuple[Path, str, list[int]]:
    """A partitioned table with the deletionVectors feature, two appends, and a deletion
    vector on the file of even ids 0..998: the root, that file's key and the ids deleted."""
    from deltalake import TableFeatures

    root = tmp_path / "dv"
    for append in range(2):
        dt.write(str(root), dt.rows(append * 1000, 1000))
    DeltaTable(str(root)).alter.add_feature(
        TableFeatures.DeletionVectors, allow_protocol_versions_increase=True
    )
    actions = pa.table(DeltaTable(str(root)).get_add_actions(flatten=True)).to_pylist()
    (key,) = [a["path"] for a in actions if a["min.id"] == 0]
    rows_deleted = [0, 3, 150, 499]
    dt.add_deletion_vector(root, key, rows_deleted)
    return root, key, [2 * row for row in rows_deleted]

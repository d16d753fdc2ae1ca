"""``parquet-bloom index`` on an Iceberg table: named in a pyiceberg SqlCatalog (sqlite) with
``--catalog``, as the ``table`` command names it, for every subcommand; or by its location,
read-only, for ``inspect`` and ``lookup``. Each lookup equals the library's and what the data
files' own filters say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table import Table

import parquet_bloom.iceberg as pbi
from tests.index.test_cli_index import Capture, run
from tests.tables import iceberg_tables as it

CATALOG = "test"  # the name tests.tables.iceberg_tables.catalog gives its SqlCatalog
ROWS_PER_GROUP = 5


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Table:
    """``db.t``: three files with filters (ids 0-29, 30-59, 60-89), row groups of 5 rows; the
    catalog configured in the environment as ``--catalog test``."""
    root = tmp_path / "iceberg"
    catalog = it.catalog(root)
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__URI", f"sqlite:///{root}/catalog.db")
    monkeypatch.setenv(
        f"PYICEBERG_CATALOG__{CATALOG.upper()}__WAREHOUSE", (root / "warehouse").as_uri()
    )
    made = catalog.create_table("db.t", it.SCHEMA)
    for k in range(3):
        ids = range(30 * k, 30 * (k + 1))
        it.add_data_file(made, it.values(ids), f"f{k}.parquet", row_group_size=ROWS_PER_GROUP)
    return made


def _probed(table: Table, value: int) -> dict[str, list[int]]:
    """Each live data file -> the row groups its own filter on ``id`` says may hold ``value``."""
    import parquet_bloom as pb

    out = {}
    for path in sorted(it.data_files(table)):
        with pb.BloomFilterReader(path.removeprefix("file://")) as reader:
            found = reader.row_groups_might_contain("id", value)
        if found:
            out[path] = found
    return out


def _lookup(capsys: Capture, *argv: Any) -> tuple[int, dict[str, Any], str]:
    status, out, err = run(capsys, "index", "lookup", *argv, "--json")
    return status, json.loads(out) if out else {}, err


def test_build_inspect_lookup_refresh_compact_through_the_catalog(
    table: Table, capsys: Capture
) -> None:
    at = ("db.t", "--catalog", CATALOG)
    status, out, err = run(capsys, "index", "build", *at, "--column", "id", "--column", "name")
    assert (status, err) == (0, "")
    assert "3 files, 18 row groups" in out
    table.refresh()
    (statistics,) = table.metadata.statistics
    assert statistics.snapshot_id == table.current_snapshot().snapshot_id
    assert Path(statistics.statistics_path.removeprefix("file://")).name.startswith("bloom-index-")

    status, out, err = run(capsys, "index", "inspect", *at, "--json")
    document = json.loads(out)
    assert (status, err) == (0, "")
    assert document["index"].endswith(".puffin") and "bloom-index-" in document["index"]
    assert document["columns"]["id"]["row_groups"] == 18
    status, out, _ = run(capsys, "index", "inspect", *at)
    assert status == 0 and "id: 18 row groups" in out

    status, found, err = _lookup(capsys, *at, "--column", "id", "37")
    assert (status, err) == (0, "")
    assert found["files"] == pbi.lookup(table, "id", 37).files == _probed(table, 37)
    assert found["from_index"] == 3 and found["probed"] == []
    f1 = next(p for p in found["files"] if p.endswith("f1.parquet"))
    assert 37 // ROWS_PER_GROUP - 6 in found["files"][f1]  # the row group of 35-39
    status, found, _ = _lookup(capsys, *at, "--column", "name", "name-61")
    assert status == 0 and any(p.endswith("f2.parquet") for p in found["files"])
    status, found, _ = _lookup(capsys, *at, "--column", "id", "1000000")
    assert status == (1 if not found["files"] else 0)
    assert found["files"] == _probed(table, 1000000)

    it.add_data_file(table, it.values(range(90, 120)), "f3.parquet", row_group_size=5)
    status, found, _ = _lookup(capsys, *at, "--column", "id", "101")
    # The new file is not in the index: probed through its own filter, never missed.
    assert status == 0 and found["from_index"] == 3 and len(found["probed"]) == 1
    assert found["files"] == _probed(table, 101)
    status, out, err = run(capsys, "index", "refresh", *at, "--json")
    assert (status, err) == (0, "") and json.loads(out)["files"] == 1
    status, found, _ = _lookup(capsys, *at, "--column", "id", "101")
    assert found["from_index"] == 4 and found["probed"] == []
    assert found["files"] == _probed(table, 101)

    # The first snapshot's own index (the build's) knows the three files it had.
    first = table.snapshots()[2].snapshot_id  # the snapshot of f2's add
    status, found, _ = _lookup(capsys, *at, "--snapshot-id", first, "--column", "id", "101")
    assert status == 1 and found["files"] == {} and found["from_index"] == 3
    status, out, err = run(capsys, "index", "compact", *at)
    assert (status, err) == (0, "")
    status, out, err = run(capsys, "index", "compact", *at, "--retain-seconds", "10")
    assert status == 2 and "--retain-seconds is for index directories" in err


def test_an_iceberg_table_by_its_location_is_read_only(table: Table, capsys: Capture) -> None:
    pbi.build_index(table, ["id"])
    location = table.location().removeprefix("file://")
    status, out, err = run(capsys, "index", "inspect", location)
    assert (status, err) == (0, "") and "id: 18 row groups" in out
    status, found, err = _lookup(capsys, location, "--column", "id", "44")
    assert (status, err) == (0, "")
    assert found["files"] == _probed(table, 44) and found["from_index"] == 3
    status, out, err = run(capsys, "index", "build", location, "--column", "id")
    assert status == 2 and "read-only" in err and "--catalog NAME" in err


def test_mistakes_with_an_iceberg_table(table: Table, tmp_path: Path, capsys: Capture) -> None:
    at = ("db.t", "--catalog", CATALOG)
    status, _, err = run(capsys, "index", "inspect", *at)
    assert status != 0 and "no Bloom index" in err
    pbi.build_index(table, ["id"])
    status, _, err = run(capsys, "index", "lookup", *at, "--column", "nope", "1")
    assert status == 2 and "no column 'nope'" in err
    status, _, err = run(capsys, "index", "lookup", *at, "--column", "name", "x")
    assert status == 2 and "the index has no column 'name'" in err
    status, _, err = run(capsys, "index", "inspect", *at, "--index", tmp_path / "i")
    assert status == 2 and "leave out --index" in err
    status, _, err = run(capsys, "index", "inspect", *at, "--snapshot-id", 12345)
    assert status == 2 and "no snapshot 12345" in err
    status, _, err = run(
        capsys, "index", "inspect", tmp_path, "--index", tmp_path / "i", "--snapshot-id", 1
    )
    assert status == 2 and "--snapshot-id is for Iceberg tables" in err
    status, _, err = run(capsys, "index", "inspect", "db.nothing", "--catalog", CATALOG)
    assert status == 2 and "cannot load db.nothing" in err

"""The command's checks that fail, table check, advise and rewrites that change nothing (issue
#30, Why 1, 2 and 5), on files pyarrow writes and tables deltalake and pyiceberg write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import parquet_bloom as pb
import parquet_bloom.delta as pbd
import parquet_bloom.iceberg as pbi
from parquet_bloom.cli import main
from tests.tables import delta_tables as tables
from tests.tables import iceberg_tables as it

Capture = pytest.CaptureFixture[str]


def run(capsys: Capture, *argv: object) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """events.parquet (no filter) and orders.parquet (filters on order_id at 1 %)."""
    root = tmp_path_factory.mktemp("cli-checks")
    ids = np.arange(40_000)
    events, orders = root / "events.parquet", root / "orders.parquet"
    pq.write_table(pa.table({"user_id": ids}), events, row_group_size=10_000)
    pq.write_table(
        pa.table({"order_id": ids, "customer": ids % 100}),
        orders,
        row_group_size=10_000,
        bloom_filter_options={"order_id": {"ndv": 10_000, "fpp": 0.01}},
    )
    return events, orders


def test_check_fails_on_a_file_without_filters(files: tuple[Path, Path], capsys: Capture) -> None:
    events, orders = files
    status, out, _ = run(capsys, "check", events, "--column", "user_id")
    assert status == 1
    assert out.splitlines()[-2:] == [
        "no filter checked",
        "FAILED: no Bloom filter checked: the 1 file checked has none in the columns checked (a "
        "check that checks nothing cannot pass; pass --allow-empty if no filter is expected)",
    ]
    status, out, _ = run(capsys, "check", events, "--allow-empty")
    assert status == 0 and "FAILED" not in out
    status, out, _ = run(capsys, "check", events, "--json")
    document = json.loads(out)
    assert status == 1 and document["ok"] is False and document["filters_checked"] == 0
    assert [v["kind"] for v in document["violations"]] == ["empty"]
    # The run, not each file: one file with filters makes the run pass.
    status, out, _ = run(capsys, "check", events, orders)
    assert status == 0 and out.rstrip().endswith("OK: 4 filters checked, no violations")


def test_check_require(files: tuple[Path, Path], capsys: Capture) -> None:
    _, orders = files
    assert run(capsys, "check", orders, "--require", "order_id")[0] == 0
    status, out, _ = run(capsys, "check", orders, "--require", "order_id", "--require", "customer")
    assert status == 1
    missing = [line for line in out.splitlines() if "VIOLATION [missing-filter]" in line]
    assert len(missing) == 4 and all("column 'customer'" in line for line in missing)
    assert out.rstrip().endswith("FAILED: 4 violations (4 filters checked)")
    status, _, err = run(capsys, "check", orders, "--require", "nope")
    assert status == 2 and "no column 'nope' to require" in err


@pytest.fixture
def delta(tmp_path: Path) -> Path:
    root = tmp_path / "orders"
    tables.build_history(str(root), filters=False)
    return root


def test_table_check_add_remove(delta: Path, capsys: Capture) -> None:
    live = len(DeltaTable(str(delta)).file_uris())
    status, out, _ = run(capsys, "table", "check", delta)
    assert status == 1
    assert (
        out.splitlines()[0] == f"{delta} (Delta, version 4): {live} live files, 0 filters checked"
    )
    assert out.rstrip().endswith("FAILED: 1 violation (the table's)")
    assert f"VIOLATION [empty] {delta}: no Bloom filter checked: the table's {live} live" in out
    assert run(capsys, "table", "check", delta, "--allow-empty")[0] == 0

    # An unknown column: one error, nothing written.
    before = sorted(delta.rglob("*"))
    status, out, err = run(capsys, "table", "add", delta, "--column", "nope")
    assert status == 2 and out == ""
    assert err == (
        f"parquet-bloom: error: no column 'nope' in the Delta table at {delta}; its columns "
        "are 'id', 'key', 'value', 'part'\n"
    )
    status, _, err = run(capsys, "table", "add", delta, "--column", "id", "--ndv", "0")
    assert status == 2 and "--ndv: 0 sizes every filter for no value at all" in err
    # Nothing to remove: nothing written, nothing committed, and said so.
    status, out, _ = run(capsys, "table", "remove", delta, "--column", "key")
    assert status == 0
    assert out == (
        f"{delta}: nothing to change: the filters of {live} files are already as asked; "
        "nothing committed, no file written\n"
    )
    assert sorted(delta.rglob("*")) == before

    assert run(capsys, "table", "add", delta, "--column", "id")[0] == 0
    status, out, _ = run(capsys, "table", "add", delta, "--column", "id", "--json")
    document = json.loads(out)
    assert status == 0 and document["version"] is None and len(document["unchanged"]) == live

    status, out, _ = run(capsys, "table", "check", delta, "--require", "id")
    checked = pbd.check(delta).filters_checked
    assert status == 0 and checked > 0
    assert out.rstrip().endswith(f"OK: {live} live files, {checked} filters checked, no violations")
    status, out, _ = run(capsys, "table", "check", delta, "--require", "key", "--json")
    document = json.loads(out)
    assert status == 1 and document["ok"] is False and document["version"] == 5
    kinds = {v["kind"] for f in document["files"] for v in f["violations"]}
    assert kinds == {"missing-filter"}


def test_table_check_an_iceberg_table(tmp_path: Path, capsys: Capture) -> None:
    table = it.appended_and_renamed(tmp_path)
    location = table.location().removeprefix("file://")
    status, out, _ = run(capsys, "table", "check", location, "--column", "id")
    assert status == 1 and "VIOLATION [empty]" in out
    pbi.rewrite_bloom_filters(table, columns=["id", "label"])
    status, out, _ = run(capsys, "table", "check", location, "--require", "label")
    assert status == 0, out
    assert out.startswith(f"{location} (Iceberg, snapshot {table.current_snapshot().snapshot_id})")


def test_advise(files: tuple[Path, Path], delta: Path, capsys: Capture) -> None:
    events, orders = files
    status, out, _ = run(capsys, "advise", orders, "--column", "order_id")
    assert status == 0
    assert out == str(pb.advise([orders], ["order_id"])) + "\n"
    assert out.startswith(f"{orders}: 1 file, target fpp 1.00%\ncolumn order_id (INT64), 4 row")
    status, out, _ = run(capsys, "advise", orders, "--fpp", "0.02", "--json")
    document: dict[str, Any] = json.loads(out)
    assert status == 0 and document == pb.advise([orders], fpp=0.02).to_dict()
    status, _, err = run(capsys, "advise", events)
    assert status == 2 and "none has a Bloom filter; name the columns" in err
    status, out, _ = run(capsys, "advise", delta, "--column", "id")
    assert status == 0
    assert out.startswith(f"{delta} (Delta, version 4): {len(DeltaTable(str(delta)).file_uris())}")


def test_resize_with_no_sizing_writes_the_advice(
    files: tuple[Path, Path], tmp_path: Path, capsys: Capture
) -> None:
    """orders.parquet's filters are Arrow's, folded; resize gives each the advised size."""
    _, orders = files
    out_path = tmp_path / "resized.parquet"
    assert run(capsys, "resize", orders, out_path)[0] == 0
    advice = pb.advise([out_path], ["order_id"])
    assert all(c.filter_bytes == c.advised_bytes for c in advice.columns[0].chunks)
    status, out, _ = run(capsys, "check", out_path)
    assert status == 0 and "oversized" not in out and "undersized" not in out
    # A filter of 1 MiB for 10,000 values: the check says so, as a warning.
    big = tmp_path / "big.parquet"
    assert run(capsys, "add", orders, big, "--column", "order_id", "--bytes", 1 << 20)[0] == 0
    status, out, _ = run(capsys, "check", big)
    assert status == 0 and out.count("oversized: 1,048,576 bytes for 10,000 distinct values") == 4

"""delta.check and iceberg.check (issue #30, Why 1): the live files of a table's snapshot checked
as check_file checks a file; a table without filters, or a required column without them, fails;
the files a rewrite replaced (still on disk until vacuum) are never read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyiceberg.table import Table

import parquet_bloom.delta as pbd
import parquet_bloom.iceberg as pbi
from tests.tables import delta_tables as tables
from tests.tables import iceberg_tables as it


@pytest.fixture(scope="module")
def delta_filtered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The history table with deltalake's filters on id and key (read only)."""
    root = tmp_path_factory.mktemp("check") / "filtered"
    tables.build_history(str(root))
    return root


@pytest.fixture
def delta_plain(tmp_path: Path) -> Path:
    root = tmp_path / "plain"
    tables.build_history(str(root), filters=False)
    return root


def test_a_delta_table_with_filters_passes(delta_filtered: Path) -> None:
    report = pbd.check(delta_filtered)
    live = DeltaTable(str(delta_filtered)).file_uris()
    assert report.ok and report.format == "delta"
    assert report.version == DeltaTable(str(delta_filtered)).version()
    assert len(report.files) == len(live) and report.filters_checked > 0
    assert {c.column for f in report.files for c in f.chunks} == {"id", "key"}
    assert pbd.check(delta_filtered, require=["id", "key"]).ok
    assert str(report).endswith("OK: no violations")
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True


def test_a_required_column_without_filters_fails(delta_filtered: Path) -> None:
    report = pbd.check(delta_filtered, ["id"], require=["value"])
    assert not report.ok
    kinds = {(v.kind, v.column) for v in report.all_violations}
    assert kinds == {("missing-filter", "value")}
    groups = sum(len({c.row_group for c in f.chunks}) for f in report.files)
    assert len(report.all_violations) == groups  # one a row group of every file
    assert "FAILED:" in str(report)


def test_a_delta_table_without_filters_fails_unless_allowed(delta_plain: Path) -> None:
    report = pbd.check(delta_plain, ["id"])
    assert not report.ok and report.filters_checked == 0
    (v,) = report.violations
    assert v.kind == "empty" and "no Bloom filter checked: the table's" in v.message
    assert pbd.check(delta_plain, ["id"], allow_empty=True).ok


def test_unknown_columns_are_refused_before_any_file_is_read(delta_plain: Path) -> None:
    for path in delta_plain.rglob("*.parquet"):
        path.unlink()  # a check that read a file would fail otherwise
    with pytest.raises(ValueError, match=r"no column 'nope' in the Delta table .* 'id', 'key'"):
        pbd.check(delta_plain, ["nope"])
    with pytest.raises(ValueError, match="no column 'nope'"):
        pbd.check(delta_plain, require=["nope"])


def test_only_the_live_files_are_checked_after_a_rewrite(delta_plain: Path) -> None:
    on_disk = len(list(delta_plain.rglob("*.parquet")))
    live = len(DeltaTable(str(delta_plain)).file_uris())
    pbd.rewrite_bloom_filters(delta_plain, columns=["id"])
    assert len(list(delta_plain.rglob("*.parquet"))) == on_disk + live  # the old files stay
    report = pbd.check(delta_plain, require=["id"])
    assert report.ok and len(report.files) == live
    assert all(".bloom-" in f.path for f in report.files)


@pytest.fixture
def appended(tmp_path: Path) -> Table:
    return it.appended_and_renamed(tmp_path)


def test_an_iceberg_table(appended: Table) -> None:
    table = appended
    empty = pbi.check(table, ["id"])
    assert [v.kind for v in empty.violations] == ["empty"]
    assert pbi.check(table, ["id"], allow_empty=True).ok
    with pytest.raises(ValueError, match="no column 'nope'"):
        pbi.check(table, ["nope"])
    pbi.rewrite_bloom_filters(table, columns=["id", "label"])
    report = pbi.check(table, require=["id", "label"])
    assert report.ok and report.format == "iceberg"
    assert report.version == table.current_snapshot().snapshot_id
    # "label" is found by field id in files that call it "name".
    assert {c.column for f in report.files for c in f.chunks} == {"id", "name"}
    missing = pbi.check(table, ["id"], require=["region"])
    assert {(v.kind, v.column) for v in missing.all_violations} == {("missing-filter", "region")}

"""No needless work (issue #30, Why 5): a column the table does not have is one error before
any file is touched; a rewrite that changes nothing (no filter to remove, filters already as
asked) writes no file, commits nothing and says so. Tables by deltalake and pyiceberg."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyiceberg.table import Table

import parquet_bloom as pb
import parquet_bloom.delta as pbd
import parquet_bloom.iceberg as pbi
from tests.tables import delta_tables as tables
from tests.tables import iceberg_tables as it


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    root = tmp_path / "plain"
    tables.build_history(str(root), filters=False)
    return root


def _files(root: Path) -> set[Path]:
    return set(root.rglob("*.parquet"))


def test_an_unknown_column_is_one_error_before_any_file(plain: Path) -> None:
    files, version = _files(plain), DeltaTable(str(plain)).version()
    with pytest.raises(ValueError) as raised:
        pbd.rewrite_bloom_filters(plain, columns=["nope"])
    assert str(raised.value) == (
        f"no column 'nope' in the Delta table at {plain}; its columns are 'id', 'key', "
        "'value', 'part'"
    )
    with pytest.raises(ValueError, match="no column 'gone'"):
        pbd.rewrite_bloom_filters(plain, remove=["gone"])
    assert _files(plain) == files and DeltaTable(str(plain)).version() == version


def test_removing_filters_a_column_does_not_have_changes_nothing(plain: Path) -> None:
    files, version = _files(plain), DeltaTable(str(plain)).version()
    report = pbd.rewrite_bloom_filters(plain, remove=["key"])
    live = DeltaTable(str(plain)).file_uris()
    assert report.version is None and report.rewritten == []
    assert len(report.unchanged) == len(live)
    assert _files(plain) == files and DeltaTable(str(plain)).version() == version
    assert str(report) == (
        f"{plain}: nothing to change: the filters of {len(live)} files are already as asked; "
        "nothing committed, no file written"
    )


def test_adding_filters_already_there_changes_nothing(plain: Path) -> None:
    first = pbd.rewrite_bloom_filters(plain, columns=["id"])
    assert first.version is not None and len(first.rewritten) > 0 and not first.unchanged
    files, version = _files(plain), DeltaTable(str(plain)).version()
    again = pbd.rewrite_bloom_filters(plain, columns=["id"])
    assert again.version is None and len(again.unchanged) == len(first.rewritten)
    assert _files(plain) == files and DeltaTable(str(plain)).version() == version
    # Asked for another size, the files change.
    resized = pbd.rewrite_bloom_filters(plain, columns="existing", num_bytes=4096)
    assert resized.version == version + 1 and not resized.unchanged


def test_an_iceberg_rewrite_that_changes_nothing(tmp_path: Path) -> None:
    table: Table = it.appended_and_renamed(tmp_path)
    snapshots = len(table.metadata.snapshots)
    removed = pbi.rewrite_bloom_filters(table, remove=["label"])
    assert removed.version is None and len(removed.unchanged) == 4
    assert len(table.metadata.snapshots) == snapshots
    added = pbi.rewrite_bloom_filters(table, columns=["id"])
    assert added.version is not None and len(added.rewritten) == 4
    again = pbi.rewrite_bloom_filters(table, columns=["id"])
    assert again.version is None and len(again.unchanged) == 4
    assert "nothing to change" in str(again)
    assert len(table.metadata.snapshots) == snapshots + 1


def test_a_file_rewrite_told_to_skip_unchanged_writes_nothing(tmp_path: Path) -> None:
    src, dst = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(pa.table({"x": list(range(100)), "y": [1] * 100}), src)
    report = pb.rewrite_bloom_filters(src, dst, remove=["x"], skip_unchanged=True)
    assert report.unchanged and not dst.exists()
    pb.rewrite_bloom_filters(src, dst, columns=["x"])
    report = pb.rewrite_bloom_filters(
        dst, tmp_path / "c.parquet", columns=["x"], skip_unchanged=True
    )
    assert report.unchanged and not (tmp_path / "c.parquet").exists()
    # Another filter to build, or one to remove: written.
    assert not pb.rewrite_bloom_filters(
        dst, tmp_path / "d.parquet", columns=["x", "y"], skip_unchanged=True
    ).unchanged
    assert (tmp_path / "d.parquet").exists()
    assert not pb.rewrite_bloom_filters(
        dst, tmp_path / "e.parquet", remove=["x"], skip_unchanged=True
    ).unchanged

"""A table resize of named columns (``existing_only=True``, as ``parquet-bloom table resize
--column X`` runs it) rebuilds only the chunks that have a filter, as the file-level resize
does: a file with no filter of the column is left as it is; a column no file has a filter of is
one error, pointing to ``table add``, and nothing is committed or left behind."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable

import parquet_bloom.delta as pbd
import parquet_bloom.iceberg as pbi
from tests.tables import delta_tables as dt
from tests.tables import iceberg_tables as it
from tests.tables.test_delta import _add_actions, _filters


@pytest.fixture(scope="module")
def plain_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plain") / "table"
    dt.build_history(str(root), filters=False)
    return root


@pytest.fixture
def two_filtered(plain_template: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """The history table without filters, then ``id`` filters (64 bytes) added to two of its
    six files: the root and those two files' keys."""
    root = Path(shutil.copytree(plain_template, tmp_path / "t"))
    chosen = sorted(_add_actions(root))[:2]
    report = pbd.rewrite_bloom_filters(str(root), columns=["id"], num_bytes=64, files=chosen)
    assert len(report.rewritten) == 2
    return root, sorted(o.job.new_key for o in report.rewritten)


def test_delta_resize_rebuilds_only_the_files_with_a_filter(
    two_filtered: tuple[Path, list[str]],
) -> None:
    root, with_filters = two_filtered
    version = DeltaTable(str(root)).version()
    report = pbd.rewrite_bloom_filters(
        str(root), columns=["id"], num_bytes=1024, existing_only=True
    )
    assert report.version == version + 1 and not report.failed
    assert sorted(o.job.key for o in report.rewritten) == with_filters
    assert len(report.unchanged) == 4
    for key in _add_actions(root):
        sizes = set(_filters(root / key).values())
        assert sizes == ({1024} if key in {o.job.new_key for o in report.rewritten} else set())


def test_delta_resize_of_a_column_no_file_has_a_filter_of_is_refused(
    two_filtered: tuple[Path, list[str]],
) -> None:
    root, _ = two_filtered
    version = DeltaTable(str(root)).version()
    files = sorted(p for p in root.rglob("*.parquet"))
    with pytest.raises(ValueError, match=r"no data file of the table has a Bloom filter of 'key'"):
        pbd.rewrite_bloom_filters(str(root), columns=["key"], existing_only=True)
    with pytest.raises(ValueError, match=r"parquet-bloom table add --column key"):
        # With a column some files have: still refused, their new files deleted.
        pbd.rewrite_bloom_filters(str(root), columns=["id", "key"], existing_only=True)
    assert DeltaTable(str(root)).version() == version
    assert sorted(p for p in root.rglob("*.parquet")) == files  # no new file left


def test_iceberg_resize_rebuilds_only_the_files_with_a_filter(tmp_path: Path) -> None:
    table = it.catalog(tmp_path).create_table("db.t", it.SCHEMA, partition_spec=it.BY_REGION)
    table.append(it.values(range(40)))  # pyiceberg's files: no filters
    filtered = it.add_data_file(
        table, it.values(range(40, 60), "eu"), "f.parquet", row_group_size=5, bloom=("id",)
    )
    rows = it.sorted_rows(table.scan().to_arrow())
    others = set(it.data_files(table)) - {filtered}

    report = pbi.rewrite_bloom_filters(table, columns=["id"], num_bytes=1024, existing_only=True)

    assert [o.job.key for o in report.rewritten] == [filtered]
    assert set(report.unchanged) == others and len(others) == 2
    (new,) = set(it.data_files(table)) - others
    assert set(_filters(new.removeprefix("file://")).values()) == {1024}
    for path in others:
        assert _filters(path.removeprefix("file://")) == {}
    assert it.sorted_rows(table.scan().to_arrow()) == rows

    snapshot = table.current_snapshot()
    with pytest.raises(ValueError, match=r"Bloom filter of 'name' to resize.*table add --column"):
        pbi.rewrite_bloom_filters(table, columns=["id", "name"], existing_only=True)
    assert table.refresh().current_snapshot() == snapshot
    assert set(it.data_files(table)) == others | {new}
    assert sorted(p.name for p in (tmp_path / "warehouse").rglob("*.bloom-*")) == [
        new.rsplit("/", 1)[-1]
    ]

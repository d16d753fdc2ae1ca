"""A directory that is a Delta or Iceberg table, or holds one, stands for the table's live files
(parquet_bloom._tables.directories): after a rewrite or a compaction the replaced files stay on
disk, and reading them would count rows twice."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import parquet_bloom as pb
from parquet_bloom._tables.directories import list_live_files
from parquet_bloom.errors import TableVersionError
from tests.remote.fixtures import clear_filesystem_caches
from tests.tables import delta_tables as tables
from tests.tables import iceberg_tables as it


def _compacted(root: Path) -> DeltaTable:
    """The unpartitioned history table, then compacted: every earlier file replaced."""
    tables.build_history(str(root), partitioned=False)
    table = DeltaTable(str(root))
    table.optimize.compact(writer_properties=tables.writer_properties())
    return DeltaTable(str(root))


def _on_disk(root: Path) -> set[str]:
    return {os.path.realpath(p) for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}


def _live(table: DeltaTable) -> set[str]:
    return {os.path.realpath(u.removeprefix("file://")) for u in table.file_uris()}


def _row_groups(paths: set[str]) -> int:
    return sum(pq.ParquetFile(p).metadata.num_row_groups for p in paths)


def test_a_delta_directory_stands_for_its_live_files(tmp_path: Path) -> None:
    root = tmp_path / "lake" / "orders"
    table = _compacted(root)
    live, on_disk = _live(table), _on_disk(root)
    assert len(on_disk) > len(live) >= 1  # the replaced files are still there
    for named in (root, f"{root}/", tmp_path / "lake"):  # the table, and a directory holding it
        listing = list_live_files(str(named))
        assert {os.path.realpath(e.path) for e in listing.files} == live
        [found] = listing.tables
        assert (found.format, found.version, found.live) == ("delta", table.version(), len(live))
        assert found.ignored == len(on_disk) - len(live)
        assert str(found) == (
            f"reading the {len(live)} live file{'s' if len(live) > 1 else ''} of the Delta table "
            f"at {root} (version {table.version()}); {len(on_disk) - len(live)} replaced files "
            "ignored"
        )
    # A file named is read as named, replaced or not.
    replaced = sorted(on_disk - live)[0]
    assert [e.path for e in list_live_files(replaced).files] == [replaced]
    assert list_live_files(replaced).tables == []


def test_a_relative_directory_is_named_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _compacted(tmp_path / "lake" / "orders")
    monkeypatch.chdir(tmp_path)
    [found] = list_live_files("lake").tables
    assert found.root == os.path.join("lake", "orders")


def test_prune_of_a_delta_directory_reads_the_live_row_groups_only(tmp_path: Path) -> None:
    root = tmp_path / "orders"
    table = _compacted(root)
    live = _live(table)
    expr = pc.field("id") == 1500
    result = pb.prune(str(root), expr)
    assert result.report.files == len(live)
    assert result.report.row_groups == _row_groups(live)
    assert result.report.row_groups < _row_groups(_on_disk(root))
    assert result.report.tables and str(result.report).startswith("reading the ")
    expected = table.to_pyarrow_dataset().to_table(filter=expr)
    assert result.dataset.to_table(filter=expr).sort_by("id").equals(expected.sort_by("id"))


def test_a_partition_directory_inside_a_delta_table(tmp_path: Path) -> None:
    root = tmp_path / "events"
    tables.build_history(str(root))  # partitioned by part; the delete and overwrite replace
    table = DeltaTable(str(root))
    partition = root / "part=even"
    live = {p for p in _live(table) if p.startswith(os.path.realpath(partition) + os.sep)}
    on_disk = {p for p in _on_disk(root) if p.startswith(os.path.realpath(partition) + os.sep)}
    assert len(on_disk) > len(live) >= 1
    listing = list_live_files(str(partition))
    assert {os.path.realpath(e.path) for e in listing.files} == live
    [found] = listing.tables
    assert (found.live, found.ignored) == (len(live), len(on_disk) - len(live))


def test_a_plain_directory_is_listed_as_before(tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": [1, 2]}), tmp_path / "a.parquet")
    (tmp_path / "_SUCCESS").write_bytes(b"")
    listing = list_live_files(str(tmp_path))
    assert [e.path for e in listing.files] == [str(tmp_path / "a.parquet")]
    assert listing.tables == []


def _iceberg(tmp_path: Path) -> Any:
    catalog = it.catalog(tmp_path / "cat")
    schema = pa.schema([pa.field("id", pa.int64())])
    table = catalog.create_table("db.ev", schema=schema)
    table.append(pa.table({"id": list(range(100))}, schema=schema))
    first = table.metadata_location
    table.append(pa.table({"id": list(range(100, 200))}, schema=schema))
    table.overwrite(pa.table({"id": list(range(300, 350))}, schema=schema))
    return table, first


def test_an_iceberg_directory_stands_for_its_live_data_files(tmp_path: Path) -> None:
    table, _ = _iceberg(tmp_path)
    root = table.location().removeprefix("file://")
    live = {os.path.realpath(p.removeprefix("file://")) for p in it.live_data_files(table)}
    on_disk = {os.path.realpath(p) for p in Path(root).rglob("*.parquet")}
    assert len(on_disk) > len(live) >= 1
    listing = list_live_files(root)
    assert {os.path.realpath(e.path) for e in listing.files} == live  # no metadata/ either
    [found] = listing.tables
    assert (found.format, found.version) == ("iceberg", table.current_snapshot().snapshot_id)
    assert (found.live, found.ignored) == (len(live), len(on_disk) - len(live))
    assert "snapshot" in str(found)


def test_version_hint_names_the_metadata_file_read(tmp_path: Path) -> None:
    # A file-system table's hint names vN.metadata.json: it wins over higher version numbers.
    table, first = _iceberg(tmp_path)
    metadata = Path(table.location().removeprefix("file://")) / "metadata"
    shutil.copy(first.removeprefix("file://"), metadata / "v1.metadata.json")
    shutil.copy(table.metadata_location.removeprefix("file://"), metadata / "v9.metadata.json")
    (metadata / "version-hint.text").write_text("1\n")
    [found] = list_live_files(str(metadata.parent)).tables
    assert found.live == 1  # the first append's one file
    (metadata / "version-hint.text").unlink()
    [found] = list_live_files(str(metadata.parent)).tables
    assert found.version == table.current_snapshot().snapshot_id


def test_unknown_versions_and_snapshots_are_the_callers_mistake(tmp_path: Path) -> None:
    import parquet_bloom.delta as pbd
    import parquet_bloom.iceberg as pbi

    root = tmp_path / "orders"
    table = _compacted(root)
    with pytest.raises(TableVersionError, match=f"no version 99: its latest is {table.version()}"):
        pbd.prune(str(root), pc.field("id") == 1, version=99)
    iceberg, _ = _iceberg(tmp_path)
    with pytest.raises(TableVersionError, match="no snapshot 12345"):
        pbi.prune(iceberg, "id = 1", snapshot_id=12345)


def test_a_delta_table_on_s3_stands_for_its_live_files(
    s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_filesystem_caches()
    uri = f"s3://{s3.bucket()}/lake/orders"
    options = tables.s3_options(s3.endpoint_url)
    tables.build_history(uri, partitioned=False, storage_options=options)
    table = DeltaTable(uri, storage_options=options)
    live = set(table.file_uris())
    on_disk = [k for k in s3.objects(uri.split("/")[2], "lake/orders/") if k.endswith(".parquet")]
    assert len(on_disk) > len(live)
    # Only the fsspec options given reach the server, mapped to deltalake's for the log.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    clear_filesystem_caches()
    for named in (f"{uri}/", f"s3://{uri.split('/')[2]}/lake/"):
        listing = list_live_files(named, storage_options=s3.storage_options)
        assert {e.name for e in listing.files} == live
        [found] = listing.tables
        assert (found.root, found.version) == (uri, table.version())
        assert found.ignored == len(on_disk) - len(live)
    result = pb.prune(f"{uri}/", pc.field("id") == 1500, storage_options=s3.storage_options)
    assert result.report.files == len(live) and result.report.tables

"""A Delta table's Bloom index under ``_bloom_index/``: built from the files deltalake wrote,
then the table changed by deltalake (append, delete, compaction, overwrite, vacuum); every
lookup's rows equal deltalake's own scan."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from parquet_bloom import delta
from parquet_bloom._tables import delta_prune
from tests.tables import delta_tables

deltalake = pytest.importorskip("deltalake")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("delta-index") / "t"
    for append in range(3):
        delta_tables.write(str(root), delta_tables.rows(append * 1000, 1000))
    return root


@pytest.fixture
def table(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "t"
    shutil.copytree(template, root)
    return root


def _found_rows(root: Path, files: dict[str, list[int]], value: int) -> list[int]:
    """The ids equal to ``value`` in the row groups a lookup names (``-1``: the whole file)."""
    ids: list[int] = []
    for path, groups in files.items():
        f = pq.ParquetFile(root / path)
        chosen = list(range(f.num_row_groups)) if groups == [-1] else groups
        read = f.read_row_groups(chosen, columns=["id"])
        ids += [x for x in read["id"].to_pylist() if x == value]
    return sorted(ids)


def _scan_rows(root: Path, value: int) -> list[int]:
    data = deltalake.DeltaTable(str(root)).to_pyarrow_dataset()
    return sorted(data.to_table(columns=["id"], filter=pc.field("id") == value)["id"].to_pylist())


def _check(root: Path, values: list[int]) -> Any:
    last = None
    for value in values:
        last = delta.lookup(str(root), "id", value)
        assert _found_rows(root, last.files, value) == _scan_rows(root, value), value
        live = {a for a in deltalake.DeltaTable(str(root)).file_uris()}
        assert all(str(root / p) in live or (root / p).as_uri() in live for p in last.files)
    return last


def test_the_index_answers_for_the_snapshot(table: Path) -> None:
    report = delta.build_index(str(table), ["id", "key"])
    assert report.location == str(table / "_bloom_index")
    assert delta.has_index(deltalake.DeltaTable(str(table)))
    assert report.files == 6 and report.unreadable == []
    found = _check(table, [5, 1500, 2999, 4000])
    assert found.from_index == 6 and found.probed == [] and found.gone == []
    assert delta.lookup(str(table), "key", "k1234").files  # strings too
    # The index's own answer: one file and row group for an id, with these filters.
    assert sum(len(g) for g in delta.lookup(str(table), "id", 1500).files.values()) == 1


def test_changes_after_the_build_are_never_missed(table: Path) -> None:
    delta.build_index(str(table), ["id"])
    dt = deltalake.DeltaTable(str(table))
    delta_tables.write(str(table), delta_tables.rows(3000, 1000))  # append
    dt = deltalake.DeltaTable(str(table))
    dt.delete("id < 100", writer_properties=delta_tables.writer_properties())  # rewrites files
    after = _check(table, [50, 150, 3500, 999])
    assert after.probed and after.gone  # the appended and rewritten files; the deleted ones
    deltalake.DeltaTable(str(table)).optimize.compact(
        writer_properties=delta_tables.writer_properties()
    )
    compacted = _check(table, [150, 2500, 3999])
    assert compacted.from_index == 0  # every file replaced by the compaction
    delta_tables.write(
        str(table),
        delta_tables.rows(2000, 300),
        mode="overwrite",
        predicate="id >= 2000",
    )
    _check(table, [2100, 2400, 3500])


def test_refresh_and_compaction_follow_the_table(table: Path) -> None:
    delta.build_index(str(table), ["id"])
    delta_tables.write(str(table), delta_tables.rows(3000, 1000))
    refreshed = delta.refresh_index(str(table))
    assert refreshed.files == 2  # the append's file of each partition
    found = _check(table, [3500, 10])
    assert found.probed == [] and found.from_index == 8
    deltalake.DeltaTable(str(table)).delete(
        "id < 100", writer_properties=delta_tables.writer_properties()
    )
    compacted = delta.compact_index(str(table))
    assert compacted.row_groups_dropped > 0
    found = _check(table, [150, 3500])
    assert found.gone == []
    assert delta.refresh_index(str(table)).files == 2  # the delete's rewritten files


def test_vacuum_leaves_the_index_alone(table: Path) -> None:
    delta.build_index(str(table), ["id"])
    before = sorted(p.name for p in (table / "_bloom_index").iterdir())
    dt = deltalake.DeltaTable(str(table))
    dt.delete("id < 500", writer_properties=delta_tables.writer_properties())
    dt = deltalake.DeltaTable(str(table))
    removed = dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert removed  # the delete's old files went
    full = dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True)
    assert not any("_bloom_index" in p for p in full)
    assert sorted(p.name for p in (table / "_bloom_index").iterdir()) == before
    _check(table, [600, 100])


def test_a_table_without_an_index(table: Path) -> None:
    assert not delta.has_index(deltalake.DeltaTable(str(table)))
    with pytest.raises(FileNotFoundError, match="no Bloom index"):
        delta.lookup(str(table), "id", 5)
    with pytest.raises(ValueError, match="has the column"):
        delta.build_index(str(table), ["nope"])
    assert not (table / "_bloom_index").exists()


def test_the_index_is_not_a_data_file_to_the_table_or_pyarrow(table: Path) -> None:
    delta.build_index(str(table), ["id"])
    rows = deltalake.DeltaTable(str(table)).to_pyarrow_table()
    assert rows.num_rows == 3000
    assert pa.table(deltalake.DeltaTable(str(table)).get_add_actions()).num_rows == 6


def _kept(result: Any) -> dict[str, list[int]]:
    return {
        Path(f.path).name: sorted(rg.id for rg in f.row_groups)
        for f in result.dataset.get_fragments()
    }


@pytest.mark.parametrize("value", [5, 1500, 2999, 4000])
def test_the_tables_prune_uses_its_index(table: Path, value: int) -> None:
    expr = pc.field("id") == value
    plain = delta.prune(str(table), expr)
    assert plain.report.bloom.index_files == 0  # no index yet: found out in one read
    delta.build_index(str(table), ["id"])
    indexed = delta.prune(str(table), expr)
    bloom = indexed.report.bloom
    # Files the table's statistics kept are decided by the index, none opened.
    assert bloom.index_files == indexed.report.files_after_table
    assert bloom.per_file == ()
    assert _kept(indexed) == _kept(plain)
    assert indexed.dataset.to_table(filter=expr).equals(plain.dataset.to_table(filter=expr))
    off = delta.prune(str(table), expr, index=False)
    assert off.report.bloom.index_files == 0 and _kept(off) == _kept(plain)


@pytest.mark.parametrize("partitioned", [True, False])
def test_the_files_the_index_rules_out_are_decided_first(
    table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partitioned: bool
) -> None:
    if not partitioned:  # three appends of one file: no fragment for the files ruled out
        table = tmp_path / "plain"
        for append in range(3):
            data = delta_tables.rows(append * 1000, 1000, partitioned=False)
            delta_tables.write(str(table), data, partitioned=False)
    files = len(deltalake.DeltaTable(str(table)).file_uris())
    delta.build_index(str(table), ["id"])
    given: list[int] = []
    real = delta_prune.prune_with

    def recorded(files: Any, *args: Any, **kwargs: Any) -> Any:
        given.append(len(list(files.get_fragments())))
        return real(files, *args, **kwargs)

    monkeypatch.setattr(delta_prune, "prune_with", recorded)
    for value in (5, 1500, 4000):
        expr = pc.field("id") == value
        plain = delta.prune(str(table), expr, index=False)
        given.clear()
        indexed = delta.prune(str(table), expr)
        report = indexed.report
        # The same files left by the table's pruning; those the index rules out skipped
        # before the pruning of files (it is given the index's candidates alone).
        assert (report.table_files, report.table_bytes) == (
            files,
            plain.report.table_bytes,
        )
        assert report.files_after_table == plain.report.files_after_table
        assert report.bytes_after_table == plain.report.bytes_after_table
        assert report.bloom.index_files == report.files_after_table
        assert report.bloom.per_file == ()
        assert _kept(indexed) == _kept(plain)
        assert given == [len(_kept(indexed))]
        assert indexed.dataset.to_table(filter=expr).equals(plain.dataset.to_table(filter=expr))


def test_the_tables_prune_after_changes_probes_what_the_index_lacks(table: Path) -> None:
    delta.build_index(str(table), ["id"])
    delta_tables.write(str(table), delta_tables.rows(3000, 1000))
    deltalake.DeltaTable(str(table)).delete(
        "id < 100", writer_properties=delta_tables.writer_properties()
    )
    for value in (50, 150, 3500):
        expr = pc.field("id") == value
        indexed = delta.prune(str(table), expr, index=True)
        plain = delta.prune(str(table), expr, index=False)
        assert _kept(indexed) == _kept(plain)
        assert sorted(indexed.dataset.to_table(filter=expr)["id"].to_pylist()) == _scan_rows(
            table, value
        )
        if value == 3500:  # in the append's two files, which the index does not know: opened
            assert len(indexed.report.bloom.per_file) == 2
            assert indexed.report.bloom.index_files == 0


def test_an_index_required_but_missing(table: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no Bloom index"):
        delta.prune(str(table), pc.field("id") == 1, index=True)


def test_a_deletion_vector_added_after_the_build(tmp_path: Path) -> None:
    from deltalake import TableFeatures

    root = tmp_path / "dv"
    for append in range(2):
        delta_tables.write(str(root), delta_tables.rows(append * 1000, 1000))
    deltalake.DeltaTable(str(root)).alter.add_feature(
        TableFeatures.DeletionVectors, allow_protocol_versions_increase=True
    )
    delta.build_index(str(root), ["id"])
    actions = pa.table(deltalake.DeltaTable(str(root)).get_add_actions(flatten=True)).to_pylist()
    (key,) = [a["path"] for a in actions if a["min.id"] == 0]
    delta_tables.add_deletion_vector(root, key, [0, 3, 150])  # ids 0, 6 and 300 deleted
    for value, expected in ((6, []), (8, [8]), (300, []), (1300, [1300])):
        expr = pc.field("id") == value
        result = delta.prune(str(root), expr, index=True)
        assert result.dataset.to_table(filter=expr)["id"].to_pylist() == expected
        engine = pa.table(deltalake.DeltaTable(str(root)).scan()).select(["id"])
        assert engine.filter(pc.field("id") == value)["id"].to_pylist() == expected
    # The deletion vector's commit adds the file again, at a new modification time: it is
    # probed through its own filters, the other three answered by the index.
    found = delta.lookup(str(root), "id", 8)
    assert found.from_index == 3 and found.probed == [key]


def test_a_table_written_without_filters_indexed_from_its_values(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    for append in range(2):
        delta_tables.write(str(root), delta_tables.rows(append * 1000, 1000), filters=False)
    report = delta.build_index(str(root), ["id"], from_data="missing", fpp=0.001)
    live = deltalake.DeltaTable(str(root)).file_uris()
    assert report.built_from_data == sum(pq.ParquetFile(f).num_row_groups for f in live)
    found = _check(root, [6, 1333, 5000])
    assert found.from_index == len(deltalake.DeltaTable(str(root)).file_uris())


def test_text_filters_prune_substring_searches(table: Path) -> None:
    """A token filter of ``key`` (k<id>) decides substring and token searches: the pruned
    scan's rows equal deltalake's, and a token held by one file reads only that file."""
    from parquet_bloom import index

    report = delta.build_index(str(table), [], text=[index.TextFilter("key")])
    assert report.text[0].filtered == report.row_groups
    scan = deltalake.DeltaTable(str(table)).to_pyarrow_dataset()
    for expr in [
        index.has_token("key", "k1234"),
        pc.match_substring(pc.field("key"), "k12"),
        pc.starts_with(pc.field("key"), "k2999"),
        pc.match_like(pc.field("key"), "k7_"),
        index.has_token("key", "nowhere"),
    ]:
        result = delta.prune(str(table), expr, index=True)
        got = result.dataset.to_table(filter=expr).sort_by("id")
        assert got.equals(scan.to_table(filter=expr).sort_by("id").select(got.column_names))
    one = delta.prune(str(table), index.has_token("key", "k1234"), index=True)
    assert len(one.dataset.files) == 1
    # An append, then a refresh: the new files get text filters of the index's shape.
    delta_tables.write(str(table), delta_tables.rows(3000, 1000))
    refreshed = delta.refresh_index(str(table))
    assert refreshed.text[0].spec == report.text[0].spec and refreshed.text[0].filtered > 0
    expr = index.has_token("key", "k3500")
    result = delta.prune(str(table), expr, index=True)
    assert result.dataset.to_table(filter=expr)["id"].to_pylist() == [3500]
    assert len(result.dataset.files) <= 2  # its file, and at most one false positive (1 %)
    assert (
        delta.compact_index(str(table)).text[0].filtered == refreshed.row_groups + report.row_groups
    )


def test_a_table_that_maps_column_names_is_refused(tmp_path: Path) -> None:
    """With ``delta.columnMapping.mode`` the files name the columns by physical names
    (``col-<uuid>``): the index is refused as such, not said to lack the column (nor built
    from another column that happens to have the physical name asked)."""
    from parquet_bloom import index

    root = tmp_path / "mapped"
    deltalake.write_deltalake(
        str(root),
        pa.table({"id": list(range(20)), "msg": [f"row {i}" for i in range(20)]}),
        configuration={
            "delta.columnMapping.mode": "name",
            "delta.minReaderVersion": "2",
            "delta.minWriterVersion": "5",
        },
    )
    (written,) = root.rglob("*.parquet")
    assert "id" not in pq.read_schema(written).names  # the physical names
    for build in (
        lambda: delta.build_index(str(root), ["id"], from_data="missing"),
        lambda: delta.build_index(str(root), [], text=[index.TextFilter("msg")]),
        lambda: delta.refresh_index(str(root)),
        lambda: delta.lookup_text(str(root), "msg", "row"),
    ):
        with pytest.raises(ValueError, match=r"maps column names \(delta.columnMapping.mode\)"):
            build()
    assert not (root / delta.INDEX_DIRECTORY).exists()

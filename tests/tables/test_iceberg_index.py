"""An Iceberg table's Bloom index, registered as a snapshot's statistics file: built from files
with filters, then the table changed by pyiceberg (appends, a delete, position deletes, an
overwrite, a rename, snapshot expiry); every lookup's rows equal pyiceberg's own scan, and
``iceberg.prune`` with the index keeps the row groups it keeps without."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.table import Table
from pyiceberg.table.puffin import PuffinFile
from pyiceberg.table.statistics import StatisticsFile
from pyiceberg.types import LongType

import parquet_bloom.iceberg as pbi
from parquet_bloom import BloomFilterWarning
from parquet_bloom._index import layout
from parquet_bloom._tables.iceberg_io import local_or_url
from tests.tables import iceberg_tables as it
from tests.tables import test_iceberg as ti

ROWS_PER_GROUP = 5
ID, NAME = 1, 2  # field ids


@pytest.fixture
def table(tmp_path: Path) -> Table:
    """Unpartitioned; three files with filters (ids 0-29, 30-59, 60-89), row groups of 5."""
    catalog = it.catalog(tmp_path)
    made = catalog.create_table("db.t", it.SCHEMA)
    for k in range(3):
        ids = range(30 * k, 30 * (k + 1))
        it.add_data_file(made, it.values(ids), f"f{k}.parquet", row_group_size=ROWS_PER_GROUP)
    return made


ABSENT = 44  # inside every interleaved file's id range, in none of them


@pytest.fixture
def interleaved(tmp_path: Path) -> Table:
    """Unpartitioned; three files with filters, file k holding the ids i = k (mod 3) of 0-89
    but :data:`ABSENT`, so that column metrics prune none of them; row groups of 5."""
    catalog = it.catalog(tmp_path)
    made = catalog.create_table("db.t", it.SCHEMA)
    for k in range(3):
        ids = [i for i in range(90) if i % 3 == k and i != ABSENT]
        it.add_data_file(made, it.values(ids), f"f{k}.parquet", row_group_size=ROWS_PER_GROUP)
    return made


def _field_names(f: pq.ParquetFile) -> dict[int, str]:
    out = {}
    for field in f.schema_arrow:
        if field.metadata and b"PARQUET:field_id" in field.metadata:
            out[int(field.metadata[b"PARQUET:field_id"])] = field.name
    return out


def _found_ids(files: dict[str, list[int]], field_id: int, value: Any) -> list[int]:
    """The ids of the rows of the row groups a lookup names (``-1``: the whole file) whose
    column ``field_id`` equals ``value``, read from the files as written (deleted rows too)."""
    ids: list[int] = []
    for path, groups in files.items():
        f = pq.ParquetFile(local_or_url(path))
        names = _field_names(f)
        if field_id not in names:
            continue
        chosen = list(range(f.num_row_groups)) if groups == [-1] else groups
        read = f.read_row_groups(chosen, columns=sorted({names[ID], names[field_id]}))
        ids += [
            i
            for i, v in zip(
                read[names[ID]].to_pylist(), read[names[field_id]].to_pylist(), strict=True
            )
            if v == value
        ]
    return sorted(ids)


def _scan_ids(table: Table, column: str, value: Any, snapshot_id: int | None = None) -> list[int]:
    rows = table.scan(row_filter=EqualTo(column, value), snapshot_id=snapshot_id).to_arrow()
    return sorted(rows["id"].to_pylist())


def _live(table: Table, snapshot_id: int | None = None) -> set[str]:
    return {t.file.file_path for t in table.scan(snapshot_id=snapshot_id).plan_files()}


def _check(
    table: Table,
    column: str,
    values: list[Any],
    *,
    deleted: frozenset[int] = frozenset(),
    snapshot_id: int | None = None,
) -> Any:
    """Each value's lookup: its rows (less ``deleted`` ids, rows a delete file removes) equal
    the scan's, and it names live files only."""
    field_id = table.schema().find_field(column).field_id
    last = None
    for value in values:
        last = pbi.lookup(table, column, value, snapshot_id=snapshot_id)
        found = [i for i in _found_ids(last.files, field_id, value) if i not in deleted]
        assert found == _scan_ids(table, column, value, snapshot_id), value
        assert set(last.files) <= _live(table, snapshot_id)
    return last


def _ours(table: Table) -> list[StatisticsFile]:
    return [s for s in table.metadata.statistics if "/bloom-index-" in s.statistics_path]


def test_the_index_is_the_snapshots_statistics_file(table: Table) -> None:
    snapshot = table.current_snapshot()
    assert snapshot is not None and not pbi.has_index(table)
    report = pbi.build_index(table, ["id", "name"])
    assert report.files == 3 and report.unreadable == []
    assert report.columns["id"].unfiltered == 0 and report.columns["name"].unfiltered == 0
    # The table's metadata lists it, for the snapshot built from; reloaded, as others see it.
    reloaded = it.catalog_table(table)
    [stats] = reloaded.metadata.statistics
    assert stats.snapshot_id == snapshot.snapshot_id
    assert stats.statistics_path == report.location
    assert stats.statistics_path.startswith(f"{table.location()}/metadata/bloom-index-")
    data = table.io.new_input(stats.statistics_path).open().read()
    assert stats.file_size_in_bytes == len(data) == report.index_bytes
    # pyiceberg's own Puffin reader reads it: each blob names its field and the snapshot.
    puffin = PuffinFile(data)
    footer_size = stats.file_footer_size_in_bytes
    assert data[-footer_size:].startswith(b"PFA1")  # the footer, from its magic on
    kinds = {}
    for blob in puffin.footer.blobs:
        assert blob.snapshot_id == snapshot.snapshot_id
        assert blob.sequence_number == snapshot.sequence_number
        kinds.setdefault(blob.type, set()).add(tuple(blob.fields))
        assert len(puffin.get_blob_payload(blob)) == blob.length
    assert kinds == {
        layout.SLICES_BLOB: {(ID,), (NAME,)},
        layout.ROW_GROUPS_BLOB: {(ID,), (NAME,)},
        layout.FILES_BLOB: {()},
    }
    assert pbi.has_index(reloaded)
    found = _check(table, "id", [5, 42, 89, 1000])
    assert found.from_index == 3 and found.probed == [] and found.gone == []
    _check(table, "name", ["name-17", "name-77", "nobody"])
    # With filters of 1 % on 5 rows, an id's lookup names its own row group alone.
    assert pbi.lookup(table, "id", 42).files == {f"{table.location()}/data/f1.parquet": [2]}


def test_changes_after_the_build_are_never_missed(table: Table) -> None:
    pbi.build_index(table, ["id", "name"])
    it.add_data_file(table, it.values(range(90, 120)), "f3.parquet", row_group_size=5)
    table.append(it.values(range(120, 130)))  # pyiceberg's own file: no filters
    after = _check(table, "id", [3, 95, 125, 500])
    assert after.from_index == 3 and len(after.probed) == 2
    # pyiceberg's delete rewrites f0 without the rows (copy-on-write): a new file, f0 gone.
    table.delete("id < 10")
    deleted = _check(table, "id", [3, 12, 95, 125])
    assert deleted.gone == [f"{table.location()}/data/f0.parquet"]
    # Position deletes on a file the index knows: its candidates still hold the rows kept.
    f1 = it.data_files(table)[f"{table.location()}/data/f1.parquet"]
    it.add_position_deletes(table, f1, [0, 1, 12])  # ids 30, 31, 42
    gone_rows = frozenset({30, 31, 42})
    positional = _check(table, "id", [30, 33, 42, 44], deleted=gone_rows)
    assert f"{table.location()}/data/f1.parquet" in positional.files  # 33 and 44 are there
    # An overwrite replaces every file.
    table.overwrite(it.values(range(200, 220)))
    over = _check(table, "id", [205, 42, 95], deleted=gone_rows)
    assert over.from_index == 0 and len(over.gone) == 3  # f0 went with the delete
    _check(table, "name", ["name-210", "name-50"])


def test_time_travel_reads_the_snapshot_asked(table: Table) -> None:
    first = table.current_snapshot()
    assert first is not None
    pbi.build_index(table, ["id"])
    table.delete("id >= 30")
    _check(table, "id", [40, 10])
    back = _check(table, "id", [40, 75, 10], snapshot_id=first.snapshot_id)
    assert back.from_index == 3


def test_a_renamed_column_is_found_by_its_field_id(table: Table) -> None:
    pbi.build_index(table, ["name"])
    with table.update_schema() as update:
        update.rename_column("name", "label")
    it.add_data_file(
        table, it.values(range(90, 100)), "f3.parquet", row_group_size=5, renames={"name": "label"}
    )
    found = _check(table, "label", ["name-15", "name-95", "name-999"])
    assert found.from_index == 3 and len(found.probed) == 1
    with pytest.raises(ValueError, match="no column 'name'"):
        pbi.lookup(table, "name", "name-15")
    # Built after the rename, under the new name: old files' column is found by its id.
    report = pbi.build_index(table, ["label"])
    assert (
        report.columns["label"].unfiltered == 0
        and sum(report.columns["label"].classes.values()) == 20
    )
    assert _check(table, "label", ["name-15", "name-95"]).probed == []
    refreshed = pbi.refresh_index(table)  # nothing new: nothing written
    assert refreshed.files == 0 and len(_ours(table)) == 2


def test_refresh_and_compaction_follow_the_table(table: Table) -> None:
    pbi.build_index(table, ["id"])
    built = table.current_snapshot()
    it.add_data_file(table, it.values(range(90, 120)), "f3.parquet", row_group_size=5)
    refreshed = pbi.refresh_index(table)
    current = table.current_snapshot()
    assert built is not None and current is not None and current != built
    assert refreshed.files == 1 and refreshed.row_groups == 24
    assert {s.snapshot_id for s in _ours(table)} == {built.snapshot_id, current.snapshot_id}
    found = _check(table, "id", [95, 10])
    assert found.probed == [] and found.from_index == 4
    table.delete("id < 10")
    compacted = pbi.compact_index(table)
    assert compacted.row_groups_dropped == 6 and compacted.row_groups == 18  # f0's, gone
    found = _check(table, "id", [12, 95])
    assert found.gone == [] and len(found.probed) == 1  # the delete's new file
    assert pbi.refresh_index(table).files == 1
    assert pbi.refresh_index(table).files == 0  # nothing left to add
    assert _check(table, "id", [12, 95]).probed == []


def test_the_index_goes_with_its_snapshot(table: Table) -> None:
    first = table.current_snapshot()
    assert first is not None
    pbi.build_index(table, ["id"])
    table.delete("id >= 80")
    second = table.current_snapshot()
    assert second is not None
    assert pbi.has_index(table)  # an ancestor's index serves the current snapshot
    found = _check(table, "id", [85, 12])
    assert found.gone == [f"{table.location()}/data/f2.parquet"]
    pbi.refresh_index(table)
    table.maintenance.expire_snapshots().by_id(first.snapshot_id).commit()
    reloaded = it.catalog_table(table)
    # The expired snapshot's statistics file left the metadata with it; the current one stayed.
    assert [s.snapshot_id for s in reloaded.metadata.statistics] == [second.snapshot_id]
    assert _check(reloaded, "id", [85, 12, 75]).probed == []
    # Expire the only snapshot with an index: the table has none left.
    table.append(it.values(range(300, 310)))
    table.maintenance.expire_snapshots().by_id(second.snapshot_id).commit()
    assert not pbi.has_index(table) and table.metadata.statistics == []
    with pytest.raises(FileNotFoundError, match="no Bloom index"):
        pbi.lookup(table, "id", 12)
    with pytest.raises(FileNotFoundError, match="no Bloom index"):
        pbi.prune(table, EqualTo("id", 12), index=True)
    assert pbi.prune(table, EqualTo("id", 12)).report.bloom.index_files == 0


def test_another_tools_statistics_file_is_left_alone(table: Table) -> None:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    theirs = StatisticsFile.model_validate(
        {
            "snapshot-id": snapshot.snapshot_id,
            "statistics-path": f"{table.location()}/metadata/ndv.stats",
            "file-size-in-bytes": 100,
            "file-footer-size-in-bytes": 50,
            "blob-metadata": [
                {
                    "type": "apache-datasketches-theta-v1",
                    "snapshot-id": snapshot.snapshot_id,
                    "sequence-number": snapshot.sequence_number,
                    "fields": [ID],
                }
            ],
        }
    )
    with table.update_statistics() as update:
        update.set_statistics(theirs)
    with pytest.raises(ValueError, match="already has a statistics file"):
        pbi.build_index(table, ["id"])
    assert it.catalog_table(table).metadata.statistics == [theirs]
    assert not list((Path(local_or_url(table.location())) / "metadata").glob("bloom-index-*"))


def test_a_table_without_an_index(table: Table) -> None:
    assert not pbi.has_index(table)
    with pytest.raises(FileNotFoundError, match="no Bloom index"):
        pbi.lookup(table, "id", 5)
    with pytest.raises(FileNotFoundError, match="no Bloom index"):
        pbi.refresh_index(table)
    with pytest.raises(ValueError, match="no column 'nope'"):
        pbi.build_index(table, ["nope"])
    assert table.metadata.statistics == []
    pbi.build_index(table, ["id"])
    assert table.scan().to_arrow().num_rows == 90  # the index is no data file


# -- prune --------------------------------------------------------------------------------------


def _rows(data: pa.Table) -> list[dict[str, Any]]:
    return it.sorted_rows(data)


@pytest.mark.parametrize(
    "row_filter",
    [
        "id = 42",
        f"id = {ABSENT}",
        "name = 'name-77'",
        "id in (3, 64, 500)",
        "id = 7 or name = 'name-50'",
    ],
)
def test_the_tables_prune_uses_its_index(interleaved: Table, row_filter: str) -> None:
    table = interleaved
    plain = pbi.prune(table, row_filter)
    assert plain.report.bloom.index_files == 0  # no index: nothing to read to find out
    assert plain.report.files_after_table == 3  # metrics left every file to the filters
    pbi.build_index(table, ["id", "name"])
    indexed = pbi.prune(table, row_filter)
    bloom = indexed.report.bloom
    assert bloom.index_files == 3 and bloom.per_file == ()  # no data file opened
    assert bloom.index_reads > 0 and bloom.index_bytes_read > 0
    assert indexed.row_groups == plain.row_groups
    expected = table.scan(row_filter=row_filter).to_arrow()
    got = indexed.to_arrow()
    assert got.schema == expected.schema and _rows(got) == _rows(expected)
    off = pbi.prune(table, row_filter, index=False)
    assert off.report.bloom.index_files == 0 and off.row_groups == plain.row_groups


def test_a_filter_the_index_cannot_decide_alone(interleaved: Table) -> None:
    table = interleaved
    pbi.build_index(table, ["id"])
    row_filter = "id = 42 and name = 'name-42'"  # name: not indexed, each file's own filter
    indexed = pbi.prune(table, row_filter)
    plain = pbi.prune(table, row_filter, index=False)
    assert indexed.row_groups == plain.row_groups
    assert indexed.report.bloom.index_files == 3
    assert len(indexed.report.bloom.per_file) == 1  # the one file the index left, opened
    assert _rows(indexed.to_arrow()) == _rows(table.scan(row_filter=row_filter).to_arrow())


def test_the_tables_prune_after_changes(interleaved: Table) -> None:
    table = interleaved
    pbi.build_index(table, ["id"])
    it.add_data_file(table, it.values(range(90, 120)), "f3.parquet", row_group_size=5)
    f1 = it.data_files(table)[f"{table.location()}/data/f1.parquet"]
    it.add_position_deletes(table, f1, [0, 1, 12, 13])  # ids 1, 4, 37, 40
    with table.update_schema() as update:
        update.rename_column("id", "ident")
    f3 = f"{table.location()}/data/f3.parquet"
    for row_filter in ("ident = 37", "ident = 43", "ident in (4, 40, 95)", "ident = 95"):
        indexed = pbi.prune(table, row_filter, index=True)
        plain = pbi.prune(table, row_filter, index=False)
        assert indexed.row_groups == plain.row_groups, row_filter
        expected = table.scan(row_filter=row_filter).to_arrow()
        got = indexed.to_arrow()
        assert got.schema == expected.schema
        assert sorted(got["ident"].to_pylist()) == sorted(expected["ident"].to_pylist())
        known = [t for t in indexed.scan.plan_files() if t.file.file_path != f3]
        assert indexed.report.bloom.index_files == len(known), row_filter  # f3 is new to it
    # The deleted row 37's row group, decided by the index, read with its deletes moved.
    assert pbi.prune(table, "ident = 43").row_groups == {f1.file_path: [2]}
    assert pbi.prune(table, "ident = 43").to_arrow()["ident"].to_pylist() == [43]


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Table:
    """test_iceberg's table of every type: partitioned by region, ``name`` renamed ``label``
    and ``small`` promoted from int to long after four files, a fifth file under the new
    names, a file pyiceberg appended without filters; indexed on every column with filters."""
    catalog = it.catalog(tmp_path_factory.mktemp("typed"))
    made = catalog.create_table("db.typed", it.SCHEMA, partition_spec=it.BY_REGION)
    for name, (region, ids) in list(ti.LAYOUT.items())[:4]:
        it.add_data_file(made, it.values(ids, region), name, row_group_size=ti.ROWS_PER_GROUP)
    with made.update_schema() as update:
        update.rename_column("name", "label")
        update.update_column("small", LongType())
    region, ids = ti.LAYOUT["eu-2.parquet"]
    it.add_data_file(
        made, it.values(ids, region), "eu-2.parquet", row_group_size=5, renames=ti.RENAMED
    )
    made.append(it.values(range(100, 110), "us").rename_columns(made.schema().column_names))
    columns = [ti.RENAMED.get(c, c) for c in it.BLOOM_COLUMNS]
    report = pbi.build_index(made, columns)
    assert report.files == 6 and report.unreadable == []
    return made


@pytest.mark.parametrize(("row_filter", "matches"), ti.DECIDED, ids=lambda v: str(v)[:40])
def test_every_type_through_the_index(typed: Table, row_filter: Any, matches: set[int]) -> None:
    indexed = pbi.prune(typed, row_filter, index=True)
    plain = pbi.prune(typed, row_filter, index=False)
    assert indexed.row_groups == plain.row_groups
    report = indexed.report
    if "small" in str(row_filter):
        # Promoted from int: the index holds the int files' filters, the scan compares longs,
        # so each file's own filters decide (as without the index).
        assert report.bloom.index_files == 0
    else:  # decided by the index alone, no data file opened
        assert report.bloom.index_files == report.files_after_table > 0
        assert report.bloom.per_file == ()
    got = indexed.to_arrow()
    want = typed.scan(row_filter=row_filter).to_arrow()
    assert got.schema == want.schema and it.sorted_rows(got) == it.sorted_rows(want)
    assert {r["id"] for r in got.to_pylist()} == matches


def test_filters_built_from_the_values_of_pyicebergs_files(tmp_path: Path) -> None:
    """pyiceberg writes no Bloom filters: the index builds them from the values, finding the
    columns of files written before a rename by field id."""
    table = it.catalog(tmp_path).create_table("db.plain", it.SCHEMA)
    for k in range(3):
        table.append(it.values(range(k, 90, 3)))
    with table.update_schema() as update:
        update.rename_column("name", "label")
    assert pbi.build_index(table, ["id"]).columns["id"].unfiltered == 3  # nothing to slice
    report = pbi.build_index(table, ["id", "label"], from_data="missing")
    assert report.built_from_data == 6 and report.unreadable == []
    assert report.columns["label"].unfiltered == 0
    found = _check(table, "label", ["name-40", "name-1000"])
    assert found.from_index == 3 and len(found.files) <= 1
    table.append(it.values(range(90, 99)).rename_columns(table.schema().column_names))
    refreshed = pbi.refresh_index(table, from_data="missing")
    assert refreshed.files == 1 and refreshed.built_from_data == 2
    for row_filter in ("id = 40", "label = 'name-95'", "id in (2, 97)"):
        indexed = pbi.prune(table, row_filter)
        plain = pbi.prune(table, row_filter, index=False)
        # The files hold no filters: the index's, built from their values, prune them.
        assert plain.report.bloom.files_skipped == 0
        assert set(indexed.row_groups) <= set(plain.row_groups)
        if row_filter == "id = 40":  # the three first files' id ranges hold 40: one kept
            assert len(plain.row_groups) == 3 and len(indexed.row_groups) == 1
        assert indexed.report.bloom.index_files == indexed.report.files_after_table
        assert indexed.report.bloom.per_file == ()
        expected = table.scan(row_filter=row_filter).to_arrow()
        assert _rows(indexed.to_arrow()) == _rows(expected)


# -- on S3 --------------------------------------------------------------------------------------


@pytest.fixture
def s3_table(s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Table:
    """test_iceberg's table on the S3 server, reached through its FileIO properties only."""
    bucket = s3.bucket()
    properties = it.s3_properties(s3.endpoint_url)
    catalog = it.catalog(tmp_path, f"s3://{bucket}/warehouse", **properties)
    table = catalog.create_table("db.t", it.SCHEMA, partition_spec=it.BY_REGION)
    for f in range(2):
        it.add_data_file(
            table, it.values(range(f, 40, 2), it.REGIONS[f]), f"f{f}.parquet", row_group_size=5
        )
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "wrong")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    return table


def test_the_index_on_s3(s3: Any, s3_table: Table, s3_requests: Any) -> None:
    report = pbi.build_index(s3_table, ["id"])
    bucket, key = report.location.removeprefix("s3://").split("/", 1)
    assert key.startswith("warehouse/db/t/metadata/bloom-index-") and key in s3.objects(bucket, "")
    data = s3_table.io.new_input(report.location).open().read()
    assert PuffinFile(data).footer.blobs and len(data) == report.index_bytes
    s3_requests.reset()
    result = pbi.prune(s3_table, "id in (3, 5)")  # odd ids: f1, row group 0
    requests = s3_requests.list()
    bloom = result.report.bloom
    assert list(result.row_groups.values()) == [[0]] and bloom.index_files == 2
    # No data file opened: the index's reads only (its footer, file list, slices, entries).
    assert not [r for r in requests if r.key.endswith(".parquet")]
    assert len([r for r in requests if r.key.endswith(".puffin")]) == bloom.index_reads
    got, want = result.to_arrow(), s3_table.scan(row_filter="id in (3, 5)").to_arrow()
    assert it.sorted_rows(got) == it.sorted_rows(want) and got.num_rows == 2
    found = pbi.lookup(s3_table, "id", 3)
    assert found.files == {f"{s3_table.location()}/data/f1.parquet": [0]}
    assert found.from_index == 2 and found.probed == []


def test_an_index_file_gone_from_under_its_entry(interleaved: Table) -> None:
    """A listed index whose file is gone (an orphan cleanup's race): prune warns and probes
    every file, unless the index is required; lookups say so."""
    table = interleaved
    report = pbi.build_index(table, ["id"])
    Path(local_or_url(report.location)).unlink()
    plain = pbi.prune(table, "id = 42", index=False)
    with pytest.warns(BloomFilterWarning, match="cannot be read"):
        fallback = pbi.prune(table, "id = 42")
    assert fallback.row_groups == plain.row_groups and fallback.report.bloom.index_files == 0
    with pytest.raises(FileNotFoundError):
        pbi.prune(table, "id = 42", index=True)
    with pytest.raises(FileNotFoundError):
        pbi.lookup(table, "id", 42)

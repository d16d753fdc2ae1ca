"""parquet_bloom.iceberg on real pyiceberg tables (SqlCatalog on sqlite), on local disk and on
the loopback S3 server: scans pruned by Bloom filters equal pyiceberg's own scans, and table
rewrites commit one snapshot that pyiceberg and chDB read back unchanged."""

from __future__ import annotations

import hashlib
import pickle
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import BooleanExpression, EqualTo
from pyiceberg.table import Table
from pyiceberg.types import LongType, StringType

import parquet_bloom as pb
import parquet_bloom.iceberg as pbi
from parquet_bloom._tables.iceberg_io import storage_options_from_properties
from parquet_bloom.errors import TableFileError
from parquet_bloom.testing import assert_bloom_filters_valid
from tests import skips
from tests.tables import iceberg_tables as it

# -- a table whose layout is known, to prune ----------------------------------------------------

ROWS_PER_GROUP = 5
ABSENT = 42  # inside every file's id range, in no file
RENAMED = {"name": "label"}


def _layout() -> dict[str, tuple[str, list[int]]]:
    """The files written with filters: name -> (region, ids in file order). Ids interleave
    across files, so that column metrics prune none of the first four."""
    files = {}
    for r, region in enumerate(it.REGIONS):
        for k in (0, 1):
            ids = [i for i in range(80) if i % 4 == 2 * r + k and i != ABSENT]
            files[f"{region}-{k}.parquet"] = (region, ids)
    files["eu-2.parquet"] = ("eu", list(range(80, 100)))  # written after the rename
    return files


LAYOUT = _layout()


@pytest.fixture(scope="module")
def lookup(tmp_path_factory: pytest.TempPathFactory) -> Table:
    """Partitioned by region; four files with filters; then ``name`` renamed ``label`` and
    ``small`` promoted from int to long; a fifth file with filters under the new names; a
    file appended by pyiceberg, without filters. Six snapshots."""
    catalog = it.catalog(tmp_path_factory.mktemp("lookup"))
    table = catalog.create_table("db.lookup", it.SCHEMA, partition_spec=it.BY_REGION)
    for name, (region, ids) in list(LAYOUT.items())[:4]:
        it.add_data_file(table, it.values(ids, region), name, row_group_size=ROWS_PER_GROUP)
    with table.update_schema() as update:
        update.rename_column("name", "label")
        update.update_column("small", LongType())
    region, ids = LAYOUT["eu-2.parquet"]
    it.add_data_file(
        table, it.values(ids, region), "eu-2.parquet", row_group_size=5, renames=RENAMED
    )
    table.append(it.values(range(100, 110), "us").rename_columns(table.schema().column_names))
    return table


def _file_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _expected_row_groups(table: Table, row_filter: Any, matches: set[int]) -> dict[str, list[int]]:
    """For each file with filters that pyiceberg plans, the row groups holding a matching id
    (files with none left out): what a prune with no false positives keeps."""
    planned = {_file_name(t.file.file_path) for t in table.scan(row_filter=row_filter).plan_files()}
    expected = {}
    for name in planned & LAYOUT.keys():
        groups = sorted(
            {n // ROWS_PER_GROUP for n, i in enumerate(LAYOUT[name][1]) if i in matches}
        )
        if groups:
            expected[name] = groups
    return expected


def _assert_same_as_scan(table: Table, row_filter: Any, **scan: Any) -> pbi.IcebergPruneResult:
    result = pbi.prune(table, row_filter, **scan)
    got = result.to_arrow()
    want = table.scan(row_filter=row_filter, **scan).to_arrow()
    assert got.schema == want.schema
    assert it.sorted_rows(got) == it.sorted_rows(want)
    return result


# Filters Bloom filters decide, and the ids each one matches.
DECIDED: list[tuple[str | BooleanExpression, set[int]]] = [
    ("id = 31", {31}),
    ("id in (1, 31, 44)", {1, 31, 44}),
    ("label = 'name-31'", {31}),  # renamed: old files have "name", found by field id
    ("id = 31 and label = 'name-31'", {31}),
    ("id = 31 and label = 'name-32'", set()),
    ("id = 1 or label = 'name-44'", {1, 44}),
    ("region = 'us' and id = 31", {31}),
    ("region = 'eu' and id = 35", set()),  # 35 lies in "us" (35 % 4 == 3)
    (f"id = {ABSENT}", set()),
    ("small = 13", {13}),  # int in old files, long in the new
    ("small in (13, 85)", {13, 85}),
    ("day = '2024-01-14'", {13}),
    ("ts = '2024-01-01T00:00:13'", {13}),
    ("clock = '00:00:13'", {13}),
    ("tstz = '2024-01-01T00:13:00+00:00'", {13}),
    ("price = 0.13", {13}),
    ("big = 100000000000000000.013", {13}),
    ("score = 3.25", {13}),
    ("ratio = 1.625", {13}),
    (EqualTo("code", (13).to_bytes(4, "big")), {13}),
    (EqualTo("payload", b"p" + (13).to_bytes(3, "big")), {13}),
]


@pytest.mark.parametrize(("row_filter", "matches"), DECIDED, ids=lambda v: str(v)[:40])
def test_prune_keeps_exactly_the_row_groups_holding_a_match(
    lookup: Table, row_filter: Any, matches: set[int]
) -> None:
    result = _assert_same_as_scan(lookup, row_filter)
    with_filters = {
        _file_name(p): groups for p, groups in result.row_groups.items() if _file_name(p) in LAYOUT
    }
    assert with_filters == _expected_row_groups(lookup, row_filter, matches)
    # The file pyiceberg appended has no filters: when planned, all its row groups stay.
    for path, groups in result.row_groups.items():
        if _file_name(path) not in LAYOUT:
            assert groups == [0]
    assert [_file_name(t.file.file_path) for t in result.tasks] == [
        _file_name(p) for p in result.row_groups
    ]


@pytest.mark.parametrize(
    "row_filter", ["id > 30", "id != 31", "not (id = 31)", "label is not null"]
)
def test_what_filters_cannot_decide_is_kept_without_a_read(lookup: Table, row_filter: str) -> None:
    result = _assert_same_as_scan(lookup, row_filter)
    planned = list(lookup.scan(row_filter=row_filter).plan_files())
    assert len(result.tasks) == len(planned)
    assert set(result.row_groups.values()) == {None}
    assert result.report.bloom.requests == 0
    assert result.report.bloom.files == len(planned)


def test_a_partition_filter_reads_no_footer(lookup: Table) -> None:
    # Every planned file's partition satisfies the filter: the residual is AlwaysTrue.
    result = _assert_same_as_scan(lookup, "region = 'eu' and label = 'name-1' or region = 'eu'")
    assert {_file_name(p) for p in result.row_groups} == {
        "eu-0.parquet",
        "eu-1.parquet",
        "eu-2.parquet",
    }
    assert set(result.row_groups.values()) == {None}
    assert result.report.bloom.requests == 0


def test_prune_an_earlier_snapshot_and_select_columns(lookup: Table) -> None:
    second = lookup.history()[1].snapshot_id  # two files added
    # That snapshot's schema still names the column "name".
    result = _assert_same_as_scan(
        lookup, "id in (1, 31)", snapshot_id=second, selected_fields=("id", "name")
    )
    assert result.to_arrow().column_names == ["id", "name"]
    assert {_file_name(p) for p in result.row_groups} == {"eu-1.parquet"}


def test_the_report_counts_files_row_groups_bytes_and_requests(tmp_path: Path) -> None:
    table = it.catalog(tmp_path).create_table("db.t", it.SCHEMA)
    paths = [
        it.add_data_file(table, it.values(range(f, 60, 3)), f"f{f}.parquet", row_group_size=5)
        for f in range(3)
    ]
    locals_ = [p.removeprefix("file://") for p in paths]
    result = pbi.prune(table, "id = 31")  # 31 = 3 * 10 + 1: file 1, row group 2
    assert result.row_groups == {paths[1]: [2]}
    assert [t.file.file_path for t in result.tasks] == [paths[1]]
    sizes = [Path(p).stat().st_size for p in locals_]
    chunks = [[_compressed(pq.read_metadata(p).row_group(rg)) for rg in range(4)] for p in locals_]
    report = result.report
    assert (report.table_files, report.table_bytes) == (3, sum(sizes))
    assert (report.files_after_table, report.bytes_after_table) == (3, sum(sizes))
    bloom = report.bloom
    assert (bloom.files, bloom.files_skipped) == (3, 2)
    assert (bloom.row_groups, bloom.row_groups_skipped) == (12, 11)
    assert bloom.compressed_bytes == sum(map(sum, chunks))
    assert bloom.compressed_bytes_skipped == sum(map(sum, chunks)) - chunks[1][2]
    # Small files: footer and filters in the one tail read each, the size from the manifest.
    assert (bloom.requests, bloom.reads, bloom.filter_reads) == (3, 3, 0)
    assert bloom.bytes_read == sum(sizes)
    assert report.files_left_to_table == 0
    assert report.files_read == 1
    assert "left by partitions and statistics" in str(report)


def _compressed(row_group: Any) -> int:
    return sum(row_group.column(j).total_compressed_size for j in range(row_group.num_columns))


def test_a_uuid_filter_prunes(lookup: Table) -> None:
    # pyiceberg 0.12 cannot scan it (Arrow has no == kernel for its uuid extension type), so
    # the row groups are checked against the layout alone.
    row_filter = EqualTo("uid", uuid.UUID(int=13))
    result = pbi.prune(lookup, row_filter)
    with_filters = {_file_name(p): groups for p, groups in result.row_groups.items()}
    assert with_filters == _expected_row_groups(lookup, row_filter, {13})
    assert with_filters == {"eu-1.parquet": [0]}


def test_position_deletes_stay_applied_when_row_groups_are_skipped(tmp_path: Path) -> None:
    table = it.catalog(tmp_path).create_table("db.t", it.SCHEMA)
    path = it.add_data_file(table, it.values(range(20)), "a.parquet", row_group_size=5)
    it.add_position_deletes(table, it.data_files(table)[path], [2, 8, 12, 16])
    # Row groups 1 and 2 kept, 0 and 3 skipped: positions 8 and 12 must move to 3 and 7 (left
    # where they are, they would delete the rows of ids 7 and 13 instead).
    result = _assert_same_as_scan(table, "id in (7, 8, 12, 13)")
    assert result.row_groups == {path: [1, 2]}
    assert sorted(result.to_arrow()["id"].to_pylist()) == [7, 13]
    assert len(result.tasks[0].delete_files) == 1
    assert result.report.files_left_to_table == 0
    # The summary counts the delete file's bytes: the data files are counted from manifests.
    size = Path(path.removeprefix("file://")).stat().st_size
    assert (result.report.table_files, result.report.table_bytes) == (1, size)
    # Only deleted rows match: pyiceberg's scan and ours are both empty.
    assert _assert_same_as_scan(table, "id in (8, 12)").to_arrow().num_rows == 0


# -- rewriting a table ------------------------------------------------------------------------


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path.removeprefix("file://")).read_bytes()).hexdigest()


def _chdb_rows(table: Table, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """(id, label) of every row as chDB's icebergLocal reads the table (it reads files under
    its working directory only)."""
    import chdb

    root = Path(table.location().removeprefix("file://"))
    monkeypatch.chdir(root.parent)
    data = chdb.query(f"SELECT id, label FROM icebergLocal('{root}')", "ArrowTable")
    return sorted(zip(data["id"].to_pylist(), data["label"].to_pylist(), strict=True))


def _pyiceberg_rows(table: Table) -> list[tuple[int, str]]:
    data = table.scan(selected_fields=("id", "label")).to_arrow()
    return sorted(zip(data["id"].to_pylist(), data["label"].to_pylist(), strict=True))


@pytest.fixture
def appended(tmp_path: Path) -> Table:
    return it.appended_and_renamed(tmp_path)


def test_rewrite_adds_filters_in_one_snapshot_readable_by_pyiceberg_and_chdb(
    appended: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    before_rows = _pyiceberg_rows(appended)
    old = it.data_files(appended)
    digests = {p: _digest(p) for p in old}
    snapshots = len(appended.metadata.snapshots)
    seen: list[pbi.JobOutcome] = []

    report = pbi.rewrite_bloom_filters(appended, columns=["id", "label"], progress=seen.append)

    assert report.version == appended.current_snapshot().snapshot_id
    assert len(appended.metadata.snapshots) == snapshots + 1
    summary = appended.current_snapshot().summary
    assert summary.operation.value == "overwrite"
    assert summary.additional_properties[pbi.SNAPSHOT_PROPERTY] == "build 1,2"  # field ids
    assert (report.refused, report.failed, report.to_retry, report.leftovers) == ([], [], [], [])
    assert report.attempts == 1 and len(seen) == 4
    assert sorted(o.job.key for o in report.rewritten) == sorted(old)

    new = it.data_files(appended)
    assert len(new) == 4 and not set(new) & set(old)
    for outcome in report.rewritten:
        replacement = new[outcome.job.new_key]
        previous = old[outcome.job.key]
        assert outcome.job.new_key.startswith(outcome.job.key.removesuffix(".parquet") + ".bloom-")
        local = outcome.job.new_key.removeprefix("file://")
        # Old files hold "name": the filter is on the column with field id 2 in each file.
        assert_bloom_filters_valid(local, columns=["id", "name"])
        with pb.BloomFilterReader(local) as reader:
            assert {c for _, c in reader.filters()} == {"id", "name"}
            offsets = [
                reader.row_group(rg)[0].data_page_offset for rg in range(reader.num_row_groups)
            ]
        metadata = pq.read_metadata(local)
        assert replacement.file_size_in_bytes == Path(local).stat().st_size == outcome.size
        assert replacement.split_offsets == sorted(
            min(o, metadata.row_group(rg).column(0).dictionary_page_offset or o)
            for rg, o in enumerate(offsets)
        )
        for name in (
            "partition",
            "record_count",
            "value_counts",
            "null_value_counts",
            "lower_bounds",
            "upper_bounds",
            "column_sizes",
            "sort_order_id",
            "key_metadata",
            "spec_id",
        ):
            assert getattr(replacement, name) == getattr(previous, name), name
    assert {p: _digest(p) for p in old} == digests  # old files untouched, until expiry
    assert _pyiceberg_rows(appended) == before_rows
    assert _chdb_rows(appended, monkeypatch) == before_rows
    # And the filters prune: one file, one row group of it.
    result = _assert_same_as_scan(appended, "label = 'name-13'")
    assert list(result.row_groups.values()) == [[0]]


def _summary(table: Table) -> dict[str, str]:
    properties: dict[str, str] = table.current_snapshot().summary.additional_properties
    return properties


def test_resize_then_remove_filters(appended: Table) -> None:
    pbi.rewrite_bloom_filters(appended, columns=["id", "label"])
    resized = pbi.rewrite_bloom_filters(appended, columns="existing", num_bytes=1024)
    assert len(resized.rewritten) == 4
    assert _summary(appended)[pbi.SNAPSHOT_PROPERTY] == "build existing"
    for path in it.data_files(appended):
        local = path.removeprefix("file://")
        with pb.BloomFilterReader(local) as reader:
            assert {f.num_bytes for f in reader.filters().values()} == {1024}
        assert_bloom_filters_valid(local, columns=["id", "name"])
    removed = pbi.rewrite_bloom_filters(appended, remove=["label"])
    assert removed.filters_written == 0 and len(removed.rewritten) == 4
    assert _summary(appended)[pbi.SNAPSHOT_PROPERTY] == "remove 2"
    for path in it.data_files(appended):
        with pb.BloomFilterReader(path.removeprefix("file://")) as reader:
            assert {c for _, c in reader.filters()} == {"id"}
    pbi.rewrite_bloom_filters(appended, remove="all")
    assert _summary(appended)[pbi.SNAPSHOT_PROPERTY] == "remove all"
    for path in it.data_files(appended):
        with pb.BloomFilterReader(path.removeprefix("file://")) as reader:
            assert reader.filters() == {}
    assert len(appended.scan().to_arrow()) == 60


def test_files_with_deletes_and_files_of_an_older_spec_are_refused(tmp_path: Path) -> None:
    table = it.catalog(tmp_path).create_table("db.t", it.SCHEMA)
    table.append(it.values(range(20)))
    (old_spec,) = it.data_files(table)
    with table.update_spec() as update:
        update.add_identity("region")
    table.append(it.values(range(20, 40)))
    table.append(it.values(range(40, 60)))
    with_deletes = next(p for p in it.data_files(table) if 40 in _ids(p))
    it.add_position_deletes(table, it.data_files(table)[with_deletes], [0])
    rows = it.sorted_rows(table.scan().to_arrow())
    assert len(rows) == 59
    clean = set(it.data_files(table)) - {old_spec, with_deletes}

    report = pbi.rewrite_bloom_filters(table, columns=["id"])

    refused = dict(report.refused)
    assert refused.keys() == {old_spec, with_deletes}
    assert "partition spec 0, not the current spec 1" in refused[old_spec]
    assert "delete files apply to it" in refused[with_deletes]
    assert {o.job.key for o in report.rewritten} == clean and len(clean) == 3
    assert {old_spec, with_deletes} <= set(it.data_files(table))  # still the same files
    assert it.sorted_rows(table.scan().to_arrow()) == rows  # the deleted row stays deleted
    assert "2 refused" in str(report)


def test_files_that_equality_deletes_apply_to_are_refused(tmp_path: Path) -> None:
    table = it.catalog(tmp_path).create_table("db.t", it.SCHEMA)
    table.append(it.values(range(10)))
    (before,) = it.live_data_files(table)
    it.add_equality_deletes(table, "id", [3])  # applies to files of an earlier sequence number
    table.append(it.values(range(10, 20)))
    (after,) = set(it.live_data_files(table)) - {before}

    plan = pbi.plan_rewrite(table, columns=["id"])

    (reason,) = dict(plan.refused).values()
    assert list(dict(plan.refused)) == [before]
    assert "delete files apply to it (" in reason and "eq-deletes-" in reason
    assert [job.key for job in plan.jobs] == [after]


def _ids(path: str) -> set[int]:
    return set(pq.read_table(path.removeprefix("file://"), columns=["id"])["id"].to_pylist())


def test_a_plan_pickles_and_names_only_the_files_asked_for(appended: Table) -> None:
    files = sorted(it.data_files(appended))
    plan = pbi.plan_rewrite(
        appended, columns=["label"], files=[files[0], "file:///nowhere.parquet"]
    )
    assert [job.key for job in plan.jobs] == [files[0]]
    assert dict(plan.refused) == {
        "file:///nowhere.parquet": f"not a live data file of snapshot {plan.snapshot_id}"
    }
    copy = pickle.loads(pickle.dumps(plan))
    assert copy.jobs == plan.jobs and copy.options == plan.options
    assert copy.options.column_ids == (2,)
    outcomes = [pbi.run_job(job, copy.options) for job in copy.jobs]
    report = pbi.commit_rewrite(appended, copy, outcomes)
    assert len(report.rewritten) == 1 and report.version is not None
    with pytest.raises(ValueError, match="no column 'nope'"):
        pbi.plan_rewrite(appended, columns=["nope"])


def _append_first(table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next transaction made on a table handle commit an append of ids 60..69 through
    another handle first: another writer wins the race between the rewrite's check of the
    table and its commit."""
    real = Table.transaction

    def beaten(self: Table) -> Any:
        monkeypatch.setattr(Table, "transaction", real)
        other = it.catalog_table(table)
        other.append(it.values(range(60, 70)).rename_columns(other.schema().column_names))
        return real(self)

    monkeypatch.setattr(Table, "transaction", beaten)


def test_a_concurrent_append_is_kept_and_the_commit_retried(
    appended: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = pbi.plan_rewrite(appended, columns=["id"])
    outcomes = [pbi.run_job(job, plan.options) for job in plan.jobs]
    _append_first(appended, monkeypatch)

    # The first commit is made on a snapshot the append has replaced: pyiceberg refuses it
    # (serializable isolation: an append conflicts with an overwrite), the second lands.
    report = pbi.commit_rewrite(appended, plan, outcomes)

    assert report.attempts == 2 and len(report.rewritten) == 4 and report.to_retry == []
    fresh = it.catalog_table(appended)
    rows = _pyiceberg_rows(fresh)  # every row once, the other commit's included
    assert [i for i, _ in rows] == list(range(70))
    assert {o.job.new_key for o in report.rewritten} <= set(it.data_files(fresh))


def test_a_file_deleted_concurrently_is_reported_to_retry(appended: Table) -> None:
    plan = pbi.plan_rewrite(appended, columns=["id"])
    outcomes = [pbi.run_job(job, plan.options) for job in plan.jobs]
    other = it.catalog_table(appended)
    gone = {p for p in it.data_files(other) if 3 in _ids(p)}
    other.delete("id = 3")  # copy on write: the file holding 3 is replaced
    expected = _pyiceberg_rows(other)

    report = pbi.commit_rewrite(appended, plan, outcomes)

    assert report.to_retry == sorted(gone) and len(report.rewritten) == 3
    (dropped,) = [o.job for o in outcomes if o.job.key in gone]
    assert not Path(dropped.target).exists()  # its new file deleted
    assert _pyiceberg_rows(it.catalog_table(appended)) == expected
    assert 3 not in {i for i, _ in expected}


def test_attempts_exhausted_commit_nothing_and_leave_no_new_file(
    appended: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = pbi.plan_rewrite(appended, columns=["id"])
    outcomes = [pbi.run_job(job, plan.options) for job in plan.jobs]
    _append_first(appended, monkeypatch)
    report = pbi.commit_rewrite(appended, plan, outcomes, max_attempts=1)
    assert report.version is None and report.rewritten == []
    assert sorted(report.to_retry) == sorted(job.key for job in plan.jobs)
    assert not any(Path(job.target).exists() for job in plan.jobs)
    assert "nothing committed" in str(report)
    assert len(it.catalog_table(appended).scan().to_arrow()) == 70


def test_failed_files_are_reported_and_leave_no_new_file(appended: Table) -> None:
    with appended.update_schema() as update:
        update.add_column("note", StringType())
    names = appended.schema().column_names
    appended.append(
        it.values(range(60, 70)).append_column("note", pa.array(["x"] * 10)).rename_columns(names)
    )
    plan = pbi.plan_rewrite(appended, columns=["note"])
    outcomes = [pbi.run_job(job, plan.options) for job in plan.jobs]
    # The four files written before "note" existed fail; of the two after, one new file goes
    # missing before the commit (an executor's disk lost, say).
    lost = next(o for o in outcomes if o.ok)
    Path(lost.job.target).unlink()
    rows = _pyiceberg_rows(appended)

    report = pbi.commit_rewrite(appended, plan, outcomes)

    failed = dict(report.failed)
    assert len(failed) == 5 and len(report.rewritten) == 1
    assert failed[lost.job.key] == f"{lost.job.target} is missing"
    assert sum("has no column with field id 16" in error for error in failed.values()) == 4
    assert _pyiceberg_rows(appended) == rows
    data_dir = Path(appended.location().removeprefix("file://")) / "data"
    tagged = {str(p) for p in data_dir.rglob("*.bloom-*.parquet")}
    assert tagged == {o.job.target for o in report.rewritten}


# -- storage options and S3 --------------------------------------------------------------------


def test_storage_options_map_the_fileio_properties() -> None:
    properties = {
        **it.s3_properties("http://127.0.0.1:9"),
        "s3.session-token": "token",
        "s3.force-virtual-addressing": "true",
        "s3.connect-timeout": "5",
        "s3.server-side-encryption": "aws:kms",
    }
    assert storage_options_from_properties(properties, "s3://bucket/table") == {
        "endpoint_url": "http://127.0.0.1:9",
        "key": "testing",
        "secret": "testing",
        "token": "token",
        "client_kwargs": {"region_name": "us-east-1"},
        "config_kwargs": {"connect_timeout": 5.0, "s3": {"addressing_style": "virtual"}},
        "s3_additional_kwargs": {"ServerSideEncryption": "aws:kms"},
    }
    client = {"client.access-key-id": "a", "client.secret-access-key": "b", "client.region": "r"}
    assert storage_options_from_properties(client, "s3a://b/t") == {
        "key": "a",
        "secret": "b",
        "client_kwargs": {"region_name": "r"},
    }
    assert storage_options_from_properties(properties, "file:///tmp/t") == {}
    assert storage_options_from_properties({"gcs.project-id": "p"}, "gs://b/t") == {"project": "p"}
    with pytest.raises(ValueError, match="remote request signer"):
        storage_options_from_properties({"s3.signer": "S3V4RestSigner"}, "s3://b/t")


@pytest.fixture
def s3_table(s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Table]:
    """A table on the S3 server, reached through its FileIO properties only: the environment's
    endpoint is a closed port and its credentials wrong, so any read that does not use the
    storage options mapped from the properties fails."""
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
    yield table


def test_storage_options_for_an_s3_table_reach_its_files(s3: Any, s3_table: Table) -> None:
    import fsspec

    options = pbi.storage_options_for(s3_table)
    assert options == {
        "endpoint_url": s3.endpoint_url,
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    path = next(iter(it.data_files(s3_table)))
    fs = fsspec.filesystem("s3", skip_instance_cache=True, **options)
    assert fs.size(path) == it.data_files(s3_table)[path].file_size_in_bytes


def test_prune_on_s3_costs_one_get_a_file(s3_table: Table, s3_requests: Any) -> None:
    s3_requests.reset()
    result = pbi.prune(s3_table, "id in (3, 5)")  # odd ids: file 1, row group 0
    data = [r for r in s3_requests.list() if r.key.endswith(".parquet")]
    report = result.report
    assert list(result.row_groups.values()) == [[0]]
    assert (report.bloom.files, report.bloom.files_skipped) == (2, 1)
    # The size comes from the manifest: no HEAD, one GET a file (footer and filters).
    assert [r.method for r in data] == ["GET", "GET"]
    assert report.bloom.requests == 2
    got, want = result.to_arrow(), s3_table.scan(row_filter="id in (3, 5)").to_arrow()
    assert it.sorted_rows(got) == it.sorted_rows(want) and got.num_rows == 2


def test_rewrite_on_s3(s3: Any, s3_table: Table) -> None:
    rows = it.sorted_rows(s3_table.scan().to_arrow())
    old = it.data_files(s3_table)
    # (At fpp 0.001 the 5 names of a row group still fit the 32 bytes the files have: a
    # rewrite that would change nothing, which writes no file. A size of 1 KiB changes them.)
    same = pbi.rewrite_bloom_filters(s3_table, columns=["name"], fpp=0.001)
    assert same.version is None and len(same.unchanged) == 2
    report = pbi.rewrite_bloom_filters(s3_table, columns=["name"], num_bytes=1024)
    assert len(report.rewritten) == 2 and report.version is not None
    assert it.sorted_rows(s3_table.scan().to_arrow()) == rows
    options = pbi.storage_options_for(s3_table)
    for path in it.data_files(s3_table):
        assert path not in old
        assert_bloom_filters_valid(path, columns=["name"], storage_options=options)
    objects = s3.objects(s3_table.location().split("/")[2], "")
    assert all(p.split("/", 3)[3] in objects for p in old)  # old objects stay


# -- rewriting a table's file in place is refused ----------------------------------------------


def _assert_refused(path: str, table_format: str, root: str, **options: Any) -> None:
    for force in (False, True):
        with pytest.raises(TableFileError) as info:
            pb.rewrite_bloom_filters(path, in_place=True, columns=["id"], force=force, **options)
        assert (info.value.table_format, info.value.table_root) == (table_format, root)
        assert root in str(info.value)


def test_an_iceberg_data_file_is_not_rewritten_in_place(appended: Table) -> None:
    path = next(iter(it.data_files(appended))).removeprefix("file://")
    root = appended.location().removeprefix("file://")
    _assert_refused(path, "iceberg", root)
    with pytest.raises(TableFileError, match=r"parquet_bloom\.iceberg\.rewrite_bloom_filters"):
        pb.rewrite_bloom_filters(path, in_place=True, columns=["id"])
    before = Path(path).stat().st_size
    pb.rewrite_bloom_filters(path, in_place=True, columns=["id"], ignore_table=True)
    assert Path(path).stat().st_size != before  # what the table's manifest no longer says


def test_an_iceberg_data_file_on_s3_is_not_rewritten_in_place(s3_table: Table) -> None:
    path, data_file = next(iter(it.data_files(s3_table).items()))
    options = pbi.storage_options_for(s3_table)
    _assert_refused(path, "iceberg", s3_table.location(), storage_options=options)
    with pytest.raises(TableFileError, match=r"parquet_bloom\.iceberg\.rewrite_bloom_filters"):
        pb.rewrite_bloom_filters(path, in_place=True, columns=["id"], storage_options=options)
    report = pb.rewrite_bloom_filters(
        path, in_place=True, remove="all", storage_options=options, ignore_table=True
    )
    assert report.bytes_after != data_file.file_size_in_bytes == report.bytes_before


def test_a_hudi_base_file_is_not_rewritten_in_place(tmp_path: Path) -> None:
    fixtures = skips.HUDI_FIXTURES
    if not fixtures.is_dir():
        pytest.skip(skips.SHARED_ABSENT)
    with zipfile.ZipFile(fixtures / "sample_table__cow__v6_nonpartitioned.zip") as archive:
        archive.extractall(tmp_path)
    marker = min(tmp_path.rglob(".hoodie"), key=lambda p: len(p.parts))
    base = next(p for p in marker.parent.rglob("*.parquet") if ".hoodie" not in p.parts)
    with pytest.raises(TableFileError, match="Hudi"):
        pb.rewrite_bloom_filters(base, in_place=True, columns=["id"])
    _assert_refused(str(base), "hudi", str(marker.parent))


def test_a_paimon_data_file_is_not_rewritten_in_place(tmp_path: Path) -> None:
    # pypaimon 2.1 requires pyarrow < 20, so this is a Paimon table's layout, not one it wrote.
    root = tmp_path / "paimon"
    for directory, name in (("snapshot", "snapshot-1"), ("schema", "schema-0")):
        (root / directory).mkdir(parents=True)
        (root / directory / name).write_text("{}")
    (root / "bucket-0").mkdir()
    path = root / "bucket-0" / "data-0.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3]}), path)
    with pytest.raises(TableFileError, match="Paimon"):
        pb.rewrite_bloom_filters(path, in_place=True, columns=["id"])
    _assert_refused(str(path), "paimon", str(root))


def _bytes_got(requests: list[Any], key: str) -> int:
    total = 0
    for request in requests:
        if request.method == "GET" and request.key == key:
            first, last = request.range.removeprefix("bytes=").split("-")
            total += int(last) - int(first) + 1
    return total


def test_to_arrow_reads_only_the_row_groups_kept(s3: Any, tmp_path: Path, s3_requests: Any) -> None:
    warehouse = f"s3://{s3.bucket()}/warehouse"
    catalog = it.catalog(tmp_path, warehouse, **it.s3_properties(s3.endpoint_url))
    table = catalog.create_table("db.t", it.SCHEMA)
    # Row group g holds the ids 4 i + g: every row group spans all ids, so column statistics
    # prune none of them, and pyiceberg's scan reads them all.
    ids = [4 * i + g for g in range(4) for i in range(10_000)]
    path = it.add_data_file(table, it.values(ids), "big.parquet", row_group_size=10_000)
    result = pbi.prune(table, "id = 5")
    assert result.row_groups == {path: [1]}
    with s3.fs().open(path) as f:
        metadata = pq.ParquetFile(f).metadata
    groups = [_compressed(metadata.row_group(rg)) for rg in range(4)]
    kept = groups[1]
    key = path.split("/", 3)[3]

    s3_requests.reset()
    got = result.to_arrow()
    ours = _bytes_got(s3_requests.list(), key)
    s3_requests.reset()
    want = table.scan(row_filter="id = 5").to_arrow()
    theirs = _bytes_got(s3_requests.list(), key)

    assert it.sorted_rows(got) == it.sorted_rows(want) and got.num_rows == 1
    # Row group 1, and pyarrow's 64 KiB read of the end of the file for its footer.
    assert ours <= kept + 64 * 1024
    assert theirs >= sum(groups) > 3 * kept


def test_partition_values_escaped_in_file_paths(tmp_path: Path) -> None:
    """pyiceberg (as Iceberg Java) names a partition's directory by its escaped value
    (``region=x%2Fy``, ``region=%C3%A9``) and puts that very path in the manifests: a ``%`` in
    a file path is a character of the file's name, never an escape to decode. Each function
    reads the file pyiceberg's own scan reads."""
    import pyarrow.compute as pc
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import NestedField

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "region", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    table = it.catalog(tmp_path).create_table("db.escaped", schema, partition_spec=spec)
    regions = ["x/y", "50%", "é", "a=b", "plain"]
    ids = pa.array(range(50), pa.int64())
    table.append(pa.table({"id": ids, "region": [regions[i % 5] for i in range(50)]}))
    assert any("%" in path for path in it.data_files(table))
    want = it.sorted_rows(table.scan(row_filter="id = 13").to_arrow())
    assert len(want) == 1

    report = pbi.build_index(table, ["id"], from_data="missing")
    assert report.files == 5 and not report.unreadable
    table.refresh()
    result = pbi.prune(table, "id = 13", index=True)
    assert it.sorted_rows(result.to_arrow()) == want
    assert result.report.bloom.files_skipped >= 3
    assert pbi.lookup(table, "id", 13).files.keys() <= set(it.data_files(table))

    # The table's directory read as its live files.
    location = table.location().removeprefix("file://")
    pruned = pb.prune(location, pc.field("id") == 13)
    assert pruned.dataset.to_table(filter=pc.field("id") == 13)["id"].to_pylist() == [13]

    rewritten = pbi.rewrite_bloom_filters(table, columns=["id"])
    assert len(rewritten.rewritten) == 5 and not rewritten.failed
    table.refresh()
    assert it.sorted_rows(table.scan(row_filter="id = 13").to_arrow()) == want
    assert it.sorted_rows(pbi.prune(table, "id = 13", index=False).to_arrow()) == want

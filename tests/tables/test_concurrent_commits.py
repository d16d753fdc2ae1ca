"""A table rewrite racing another writer, at each point between its plan and its commit: the
other writer's operation committed (a) after the plan, before the jobs run; (b) after the
jobs, before the commit; (c) inside the commit, after the rewrite checked the snapshot it
commits on and before its transaction is made (the transaction's creation wrapped so that the
other operation commits first). Whatever the operation, the table must end with exactly the
rows the operation alone leaves (read by the table library's own reader), every file the
rewrite committed must carry its filters, and every new file not committed must be gone.

Delta (deltalake): a compaction, a z-order, a second rewrite, a delete, an update, an
overwrite, a vacuum. Iceberg (pyiceberg, a sqlite SqlCatalog): an append, a delete, an
overwrite, a second rewrite, a compaction of two files into one (an overwrite that deletes
them and adds the merged file), an expiry of old snapshots.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
import parquet_bloom.delta as pbd
import parquet_bloom.iceberg as pbi
from parquet_bloom.testing import assert_bloom_filters_valid
from tests.tables import delta_tables
from tests.tables import iceberg_tables as it

POINTS = ["after-plan", "after-jobs", "inside-commit"]
FILES = 4  # data files a table starts with
ROWS = 50  # rows a file


def _rows(data: pa.Table) -> list[tuple[Any, ...]]:
    """The table's rows as a sorted list (a multiset): scans' row order is not the data's."""
    names = sorted(data.column_names)
    columns = [data.column(name).to_pylist() for name in names]
    return sorted(zip(*columns, strict=True), key=repr)


@contextmanager
def _first_call_runs(owner: Any, name: str, operation: Callable[[], None]) -> Iterator[None]:
    """``owner.name`` (a method of a table library) wrapped so that its first call runs
    ``operation`` first, then itself; later calls (the operation's own, the rewrite's next
    attempt) run as they are."""
    real = getattr(owner, name)
    ran = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not ran:
            ran.append(True)
            operation()
        return real(*args, **kwargs)

    setattr(owner, name, wrapped)
    try:
        yield
    finally:
        setattr(owner, name, real)
    assert ran, f"{name} was never called: the operation did not run inside the commit"


def _race(
    point: str,
    plan: Any,
    run_jobs: Callable[[], list[pb.delta.JobOutcome]],
    commit: Callable[[list[pb.delta.JobOutcome]], pb.delta.TableRewriteReport],
    operation: Callable[[], None],
    read: Callable[[], pa.Table],
    transaction: tuple[Any, str],
) -> tuple[pb.delta.TableRewriteReport, list[tuple[Any, ...]]]:
    """Run the rewrite's jobs and commit with ``operation`` committed at ``point``; the report
    and the rows the table had right after the operation."""
    expected: list[list[tuple[Any, ...]]] = []

    def other_writer() -> None:
        operation()
        expected.append(_rows(read()))

    if point == "after-plan":
        other_writer()
    outcomes = run_jobs()
    assert outcomes and all(o.ok for o in outcomes)
    if point == "after-jobs":
        other_writer()
    if point == "inside-commit":
        with _first_call_runs(*transaction, other_writer):
            report = commit(outcomes)
    else:
        report = commit(outcomes)
    assert not report.failed and not report.leftovers
    assert {o.job.key for o in report.rewritten} | set(report.to_retry) == {
        j.key for j in plan.jobs
    }
    for key in report.to_retry:  # not committed: its new file deleted
        (job,) = [j for j in plan.jobs if j.key == key]
        assert not Path(job.target).exists()
    return report, expected[0]


def _assert_filters(path: str, columns: tuple[str, ...]) -> None:
    assert_bloom_filters_valid(path)
    with pb.BloomFilterReader(path) as reader:
        found = {column for _, column in reader.filters()}
        assert set(columns) <= found, (path, found)


# -- Delta ------------------------------------------------------------------------------------


def _delta_table(root: Path) -> str:
    """FILES appends of ROWS ids each, unpartitioned, without filters, then a delete of the
    last id (its file rewritten: the table has a removed file for a vacuum to delete)."""
    uri = str(root)
    for append in range(FILES):
        data = delta_tables.rows(append * ROWS, ROWS, partitioned=False)
        delta_tables.write(uri, data, partitioned=False, filters=False)
    from deltalake import DeltaTable

    DeltaTable(uri).delete(f"id = {FILES * ROWS - 1}")
    return uri


def _delta_operations(uri: str) -> dict[str, tuple[Callable[[], None], Callable[[Any], set[str]]]]:
    """Each operation another writer commits, and the planned files it leaves live (those the
    rewrite may still commit)."""
    from deltalake import DeltaTable, write_deltalake

    def holding(id_: int) -> Callable[[Any], set[str]]:
        def keys(plan: Any) -> set[str]:
            return {
                key
                for key, f in plan.files.items()
                if not (f.stats and _id_range(f.stats)[0] <= id_ <= _id_range(f.stats)[1])
            }

        return keys

    def every(plan: Any) -> set[str]:
        return {j.key for j in plan.jobs}

    def none(plan: Any) -> set[str]:
        return set()

    def overwrite() -> None:
        write_deltalake(uri, delta_tables.rows(5000, 20, partitioned=False), mode="overwrite")

    def second_rewrite() -> None:
        report = pbd.rewrite_bloom_filters(uri, columns=["key"])
        assert report.version is not None and len(report.rewritten) == FILES

    return {
        "compact": (lambda: _quiet(DeltaTable(uri).optimize.compact()), none),
        "z-order": (lambda: _quiet(DeltaTable(uri).optimize.z_order(["id"])), none),
        "rewrite": (second_rewrite, none),
        "delete": (lambda: _quiet(DeltaTable(uri).delete("id = 3")), holding(3)),
        "update": (
            lambda: _quiet(DeltaTable(uri).update({"key": "'changed'"}, predicate="id = 60")),
            holding(60),
        ),
        "overwrite": (overwrite, none),
        "vacuum": (
            lambda: _quiet(
                DeltaTable(uri).vacuum(0, dry_run=False, enforce_retention_duration=False)
            ),
            every,
        ),
    }


def _quiet(_: Any) -> None:
    """An operation's result, not needed."""


def _id_range(stats: str) -> tuple[int, int]:
    import json

    found = json.loads(stats)
    return int(found["minValues"]["id"]), int(found["maxValues"]["id"])


DELTA_OPERATIONS = ["compact", "z-order", "rewrite", "delete", "update", "overwrite", "vacuum"]


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("operation", DELTA_OPERATIONS)
def test_delta_rewrite_racing_another_writer(tmp_path: Path, operation: str, point: str) -> None:
    from deltalake import DeltaTable

    uri = _delta_table(tmp_path / "t")
    plan = pbd.plan_rewrite(uri, columns=["id"])
    assert len(plan.jobs) == FILES
    run, still_live = _delta_operations(uri)[operation]
    allowed = still_live(plan)

    def read() -> pa.Table:
        return DeltaTable(uri).to_pyarrow_table()

    report, expected = _race(
        point,
        plan,
        lambda: [pbd.run_job(job, plan.options) for job in plan.jobs],
        lambda outcomes: pbd.commit_rewrite(plan, outcomes),
        run,
        read,
        (DeltaTable, "create_write_transaction"),
    )

    assert _rows(read()) == expected  # no row lost, none twice
    assert {o.job.key for o in report.rewritten} == allowed
    live = {a["path"] for a in pa.table(DeltaTable(uri).get_add_actions()).to_pylist()}
    for outcome in report.rewritten:
        assert outcome.job.new_key in live and outcome.job.key not in live
        _assert_filters(outcome.job.target, ("id",))
    if allowed:
        latest = DeltaTable(uri).version()
        assert report.version == latest
        assert report.attempts == (2 if point == "inside-commit" else 1)
    else:
        assert report.version is None


def test_delta_compaction_of_one_partition_retries_its_files_only(tmp_path: Path) -> None:
    # A compaction of the "even" partition after the jobs: its files go to to_retry, the odd
    # partition's are committed, with their partition values.
    from deltalake import DeltaTable

    uri = str(tmp_path / "t")
    for append in range(2):
        delta_tables.write(uri, delta_tables.rows(append * ROWS, ROWS), filters=False)
    plan = pbd.plan_rewrite(uri, columns=["id"])
    outcomes = [pbd.run_job(job, plan.options) for job in plan.jobs]
    DeltaTable(uri).optimize.compact(partition_filters=[("part", "=", "even")])
    expected = _rows(DeltaTable(uri).to_pyarrow_table())

    report = pbd.commit_rewrite(plan, outcomes)

    even = {k for k, f in plan.files.items() if (f.partition_values or {}).get("part") == "even"}
    assert len(even) == 2 and set(report.to_retry) == even
    assert {o.job.key for o in report.rewritten} == {j.key for j in plan.jobs} - even
    assert _rows(DeltaTable(uri).to_pyarrow_table()) == expected
    actions = pa.table(DeltaTable(uri).get_add_actions()).to_pylist()
    parts = {a["path"]: a["partition"]["part"] for a in actions}
    for outcome in report.rewritten:
        assert parts[outcome.job.new_key] == "odd"
        _assert_filters(outcome.job.target, ("id",))


# -- Iceberg ----------------------------------------------------------------------------------


def _iceberg_table(root: Path) -> Any:
    """Partitioned by region; two appends of ids 0..19 and 20..39: four files, of ten rows."""
    table = it.catalog(root).create_table("db.t", it.SCHEMA, partition_spec=it.BY_REGION)
    table.append(it.values(range(20)))
    table.append(it.values(range(20, 40)))
    return table


def _ids(path: str) -> set[int]:
    return set(pq.read_table(path.removeprefix("file://"), columns=["id"])["id"].to_pylist())


def _compact(table: Any) -> set[str]:
    """Merge the two "eu" files into one, by an overwrite that deletes them and adds the merged
    file (pyiceberg has no compaction): the two files' URIs."""
    from pyiceberg.io.pyarrow import parquet_file_to_data_file

    other = it.catalog_table(table)
    files = it.data_files(other)
    eu = sorted(p for p, f in files.items() if f.partition[0] == "eu")
    assert len(eu) == 2
    merged = pa.concat_tables(pq.read_table(p.removeprefix("file://")) for p in eu)
    path = f"{other.location().rstrip('/')}/data/region=eu/merged.parquet"
    pq.write_table(merged, path.removeprefix("file://"))
    new = parquet_file_to_data_file(other.io, other.metadata, path)
    with other.transaction() as transaction, transaction.update_snapshot().overwrite() as swap:
        for uri in eu:
            swap.delete_data_file(files[uri])
        swap.append_data_file(new)
    return set(eu)


def _iceberg_operations(
    table: Any,
) -> dict[str, tuple[Callable[[], None], Callable[[Any], set[str]]]]:
    """Each operation another writer (its own handle) commits, and the planned files it leaves
    live and clean."""
    removed: set[str] = set()

    def every(plan: Any) -> set[str]:
        return {j.key for j in plan.jobs} - removed

    def none(plan: Any) -> set[str]:
        return set()

    def append() -> None:
        it.catalog_table(table).append(it.values(range(100, 105)))

    def delete() -> None:
        other = it.catalog_table(table)
        removed.update(p for p in it.data_files(other) if 3 in _ids(p))
        other.delete("id = 3")

    def overwrite() -> None:
        it.catalog_table(table).overwrite(it.values(range(200, 210)))

    def second_rewrite() -> None:
        report = pbi.rewrite_bloom_filters(it.catalog_table(table), columns=["name"])
        assert report.version is not None and len(report.rewritten) == FILES

    def compact() -> None:
        removed.update(_compact(table))

    def expire() -> None:
        other = it.catalog_table(table)
        other.maintenance.expire_snapshots().older_than(
            dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
        ).commit()

    return {
        "append": (append, every),
        "delete": (delete, every),
        "overwrite": (overwrite, none),
        "rewrite": (second_rewrite, none),
        "compact": (compact, every),
        "expire": (expire, every),
    }


ICEBERG_OPERATIONS = ["append", "delete", "overwrite", "rewrite", "compact", "expire"]


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("operation", ICEBERG_OPERATIONS)
def test_iceberg_rewrite_racing_another_writer(tmp_path: Path, operation: str, point: str) -> None:
    from pyiceberg.table import Table

    table = _iceberg_table(tmp_path)
    plan = pbi.plan_rewrite(table, columns=["id"])
    assert len(plan.jobs) == FILES
    run, still_live = _iceberg_operations(table)[operation]

    def read() -> pa.Table:
        return it.catalog_table(table).scan().to_arrow()

    report, expected = _race(
        point,
        plan,
        lambda: [pbi.run_job(job, plan.options) for job in plan.jobs],
        lambda outcomes: pbi.commit_rewrite(table, plan, outcomes),
        run,
        read,
        (Table, "transaction"),
    )

    fresh = it.catalog_table(table)
    assert _rows(read()) == expected  # no row lost, none twice
    assert {o.job.key for o in report.rewritten} == still_live(plan)
    live = set(it.data_files(fresh))
    for outcome in report.rewritten:
        assert outcome.job.new_key in live and outcome.job.key not in live
        _assert_filters(outcome.job.target, ("id",))
    if report.rewritten:
        assert report.version == fresh.current_snapshot().snapshot_id
    else:
        assert report.version is None


@pytest.mark.parametrize("handle", ["same", "other"])
def test_iceberg_files_of_a_spec_no_longer_current_go_to_retry(tmp_path: Path, handle: str) -> None:
    # A partition spec evolved between the plan and the commit (no new snapshot): an added
    # file is recorded under the current spec, so the files of the old one are not swapped.
    from pyiceberg.transforms import IdentityTransform

    table = _iceberg_table(tmp_path)
    plan = pbi.plan_rewrite(table, columns=["id"])
    outcomes = [pbi.run_job(job, plan.options) for job in plan.jobs]
    expected = _rows(table.scan().to_arrow())
    writer = table if handle == "same" else it.catalog_table(table)
    with writer.update_spec() as update:
        update.add_field("id", IdentityTransform(), "id_part")

    report = pbi.commit_rewrite(table, plan, outcomes)

    assert sorted(report.to_retry) == sorted(j.key for j in plan.jobs)
    assert report.version is None and not report.rewritten
    assert not any(Path(j.target).exists() for j in plan.jobs)
    assert _rows(it.catalog_table(table).scan().to_arrow()) == expected

"""parquet_bloom.spark.rewrite_table and rewrite_files on a local Spark: the per-file rewrites
run on the executors, the driver commits once, and the result is the local rewrite's, byte for
byte."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import spark as pbs
from parquet_bloom.testing import assert_bloom_filters_valid

pytestmark = pytest.mark.spark

APPENDS = 13  # x 4 partitions: 52 data files


@pytest.fixture(scope="module")
def delta_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Delta table of 52 small files, 4 partitions x 13 appends, without filters."""
    from deltalake import write_deltalake

    root = tmp_path_factory.mktemp("spark-delta") / "t"
    for append in range(APPENDS):
        ids = list(range(append * 400, (append + 1) * 400))
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "key": [f"k{i}" for i in ids],
                "part": [f"p{i % 4}" for i in ids],
            }
        )
        write_deltalake(str(root), data, mode="append", partition_by=["part"])
    return root


def test_a_delta_table_rewritten_on_spark_equals_the_local_rewrite(
    spark: Any, delta_table: Path, tmp_path: Path
) -> None:
    from deltalake import DeltaTable

    on_spark, locally = tmp_path / "spark", tmp_path / "local"
    shutil.copytree(delta_table, on_spark)
    shutil.copytree(delta_table, locally)
    before = DeltaTable(str(on_spark)).version()
    expected_rows = DeltaTable(str(on_spark)).to_pyarrow_table().sort_by("id")

    report = pbs.rewrite_table(spark, str(on_spark), columns=["id", "key"], fpp=0.01)
    local = pb.delta.rewrite_bloom_filters(str(locally), columns=["id", "key"], fpp=0.01)

    assert len(report.rewritten) == len(local.rewritten) == APPENDS * 4
    assert not report.failed and not report.refused
    assert DeltaTable(str(on_spark)).version() == before + 1  # one commit
    assert report.version == before + 1
    spark_files = {o.job.key: Path(o.job.target).read_bytes() for o in report.rewritten}
    local_files = {o.job.key: Path(o.job.target).read_bytes() for o in local.rewritten}
    assert spark_files.keys() == local_files.keys()
    for key, data in spark_files.items():
        assert data == local_files[key], key  # the same pages, filters and footer
    for outcome in report.rewritten:
        assert_bloom_filters_valid(outcome.job.target, columns=["id", "key"])
    assert DeltaTable(str(on_spark)).to_pyarrow_table().sort_by("id").equals(expected_rows)


def test_rewrite_files_writes_each_file_under_its_relative_path(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    for day in ("d=1", "d=2"):
        (src / day).mkdir(parents=True)
        pq.write_table(pa.table({"id": list(range(500))}), src / day / "part-0.parquet")
    (src / "d=2" / "broken.parquet").write_bytes(b"PAR1 nothing here PAR1")
    outcomes = pbs.rewrite_files(spark, str(src), str(tmp_path / "dst"), columns=["id"])
    by_key = {Path(o.job.key).relative_to(src).as_posix(): o for o in outcomes}
    assert sorted(by_key) == ["d=1/part-0.parquet", "d=2/broken.parquet", "d=2/part-0.parquet"]
    assert by_key["d=2/broken.parquet"].error is not None
    assert not (tmp_path / "dst" / "d=2" / "broken.parquet").exists()
    for name in ("d=1/part-0.parquet", "d=2/part-0.parquet"):
        out = tmp_path / "dst" / name
        assert by_key[name].size == out.stat().st_size
        assert_bloom_filters_valid(out, columns=["id"])


def test_rewrite_files_in_place_refuses_a_tables_files(spark: Any, delta_table: Path) -> None:
    (first, *_) = sorted(delta_table.glob("part=p0/*.parquet"))
    before = first.read_bytes()
    (outcome,) = pbs.rewrite_files(spark, str(first), in_place=True, columns=["id"])
    assert outcome.error is not None and "TableFileError" in outcome.error
    assert "parquet_bloom.delta.rewrite_bloom_filters" in outcome.error
    assert first.read_bytes() == before


def test_an_iceberg_table_rewritten_on_spark_in_one_snapshot(spark: Any, tmp_path: Path) -> None:
    from tests.tables import iceberg_tables as it

    table = it.catalog(tmp_path).create_table(
        "db.t",
        it.SCHEMA,
        partition_spec=it.BY_REGION,
        properties={"write.parquet.row-group-limit": "10"},
    )
    for first in range(0, 60, 20):
        table.append(it.values(range(first, first + 20)))
    rows = it.sorted_rows(table.scan().to_arrow())
    snapshots = len(table.metadata.snapshots)

    report = pbs.rewrite_table(spark, table, columns=["id", "name"])

    assert report.format == "iceberg" and not (report.failed or report.refused)
    assert len(report.rewritten) == 6  # 3 appends x 2 regions
    assert len(table.metadata.snapshots) == snapshots + 1
    assert report.version == table.current_snapshot().snapshot_id
    assert it.sorted_rows(table.scan().to_arrow()) == rows
    for outcome in report.rewritten:
        assert_bloom_filters_valid(outcome.job.target, columns=["id", "name"])


def test_a_compaction_between_the_executors_jobs_and_the_commit_duplicates_no_row(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # deltalake's OPTIMIZE commits after the executors rewrote every file and before the
    # driver's commit: its files replaced every planned one, so nothing is committed.
    from deltalake import DeltaTable, write_deltalake

    import parquet_bloom.delta as pbd

    root = str(tmp_path / "t")
    for append in range(4):
        ids = list(range(append * 100, (append + 1) * 100))
        write_deltalake(root, pa.table({"id": pa.array(ids, pa.int64())}), mode="append")
    expected = DeltaTable(root).to_pyarrow_table().sort_by("id")
    real = pbd.commit_rewrite

    def compacted_first(*args: Any, **kwargs: Any) -> Any:
        DeltaTable(root).optimize.compact()
        return real(*args, **kwargs)

    monkeypatch.setattr(pbd, "commit_rewrite", compacted_first)
    report = pbs.rewrite_table(spark, root, columns=["id"])

    assert report.version is None and not report.rewritten and len(report.to_retry) == 4
    assert DeltaTable(root).to_pyarrow_table().sort_by("id").equals(expected)  # 400 rows
    assert not list(Path(root).glob("*.bloom-*.parquet"))  # the new files deleted


def test_a_resize_on_spark_adds_no_filter(spark: Any, tmp_path: Path) -> None:
    """``existing_only=True``: only the file with a filter of ``id`` is rewritten; a column no
    file has a filter of is refused, nothing committed."""
    from tests.tables import iceberg_tables as it

    table = it.catalog(tmp_path).create_table("db.t", it.SCHEMA, partition_spec=it.BY_REGION)
    table.append(it.values(range(20)))  # no filters
    filtered = it.add_data_file(
        table, it.values(range(20, 30), "eu"), "f.parquet", row_group_size=5, bloom=("id",)
    )

    report = pbs.rewrite_table(spark, table, columns=["id"], num_bytes=1024, existing_only=True)

    assert [o.job.key for o in report.rewritten] == [filtered] and len(report.unchanged) == 2
    with pb.BloomFilterReader(report.rewritten[0].job.target.removeprefix("file://")) as reader:
        assert {f.num_bytes for f in reader.filters().values()} == {1024}
    snapshot = table.current_snapshot()
    with pytest.raises(ValueError, match="table add --column name"):
        pbs.rewrite_table(spark, table, columns=["name"], existing_only=True)
    assert table.refresh().current_snapshot() == snapshot

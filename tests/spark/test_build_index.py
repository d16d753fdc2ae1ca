"""parquet_bloom.spark.build_index on a local Spark: the files read and the filters transposed on
the executors, the driver writing one range of slices at a time, and the index the local build
writes, blob for blob, for a dataset written by pyarrow and a Delta table written by deltalake;
lookups agree; ranges of one block each (more reduce tasks than blocks) and of a whole class
(fewer)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom import delta, index
from parquet_bloom import spark as pbs
from parquet_bloom._index import puffin, store
from parquet_bloom.spark import _index as spark_index

pytestmark = pytest.mark.spark

FILES = 38
COLUMNS = ["id", "s"]


class _Any:
    def __eq__(self, other: object) -> bool:
        return True


ANY: Any = _Any()  # a reason, whose words are the reader's


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """38 pyarrow files of 1 to 3 row groups with small filters of several sizes (64 to 256
    bytes, so that a class has few blocks), 3 of them without filters, one file without ``id``,
    and one that is not Parquet."""
    root = tmp_path_factory.mktemp("spark-index-dataset")
    rng = np.random.default_rng(11)
    for i in range(FILES):
        ids = rng.integers(0, 10**6, 300)
        table = pa.table({"id": ids, "s": [f"key-{x}" for x in ids]})
        ndv = (40, 150)[i % 2]
        options = None if i % 13 == 5 else {c: {"ndv": ndv, "fpp": 0.05} for c in COLUMNS}
        pq.write_table(
            table,
            root / f"f{i:02d}.parquet",
            row_group_size=(300, 150, 100)[i % 3],
            bloom_filter_options=options,
        )
    pq.write_table(pa.table({"other": np.arange(10)}), root / "no-id.parquet")
    (root / "broken.parquet").write_bytes(b"PAR1 this is not a Parquet file PAR1")
    return root


@pytest.fixture(scope="module")
def delta_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Delta table written by deltalake: 3 appends of 2 partitions, row groups of 100 rows,
    filters on ``id`` and ``key``."""
    from tests.tables import delta_tables

    root = tmp_path_factory.mktemp("spark-index-delta") / "t"
    for append in range(3):
        delta_tables.write(str(root), delta_tables.rows(append * 1000, 1000))
    return root


def _blobs(path: Path) -> tuple[puffin.PuffinFooter, list[bytes]]:
    data = path.read_bytes()
    (length,) = np.frombuffer(data[-12:-8], dtype="<i4").tolist()
    offset = len(data) - puffin.TRAILER_SIZE - length - len(puffin.MAGIC)
    footer = puffin.decode_footer(data[offset : -puffin.TRAILER_SIZE], footer_offset=offset)
    return footer, [data[b.offset : b.offset + b.length] for b in footer.blobs]


def _assert_same_index(built: Path, expected: Path) -> None:
    """The same blobs (metadata and bytes) and footer properties; then the same file."""
    footer, blobs = _blobs(built)
    expected_footer, expected_blobs = _blobs(expected)
    assert footer == expected_footer
    for meta, blob, want in zip(footer.blobs, blobs, expected_blobs, strict=True):
        assert blob == want, meta
    assert built.read_bytes() == expected.read_bytes()


def _assert_same_directory(built: Path, expected: Path) -> None:
    """Index directories: the same pointer but for the segment's name (random), and the same
    segment."""
    pointer, want = store.read_pointer(str(built), None), store.read_pointer(str(expected), None)
    assert pointer is not None and want is not None
    (segment,), (want_segment,) = pointer.segments, want.segments
    assert (pointer.generation, pointer.columns) == (want.generation, want.columns)
    assert (segment.size, segment.footer_offset, segment.footer) == (
        want_segment.size,
        want_segment.footer_offset,
        want_segment.footer,
    )
    doc, want_doc = (json.loads((d / store.POINTER).read_bytes()) for d in (built, expected))
    for d in (doc, want_doc):
        del d["segments"][0]["name"]
    assert doc == want_doc
    _assert_same_index(built / segment.name, expected / want_segment.name)


def _lookups(location: Path, column: str, values: list[Any]) -> list[dict[str, list[int]]]:
    with index.BloomIndex(location) as idx:
        return [idx.lookup(column, v).files() for v in values]


def test_a_dataset_index_is_the_local_builds(spark: Any, dataset: Path, tmp_path: Path) -> None:
    local = index.build_index(str(dataset), COLUMNS, tmp_path / "local.puffin")
    report = pbs.build_index(spark, str(dataset), COLUMNS, index_location=tmp_path / "spark.puffin")

    assert len(local.columns["id"].classes) >= 2  # filters of several sizes, and some without
    assert local.columns["id"].unfiltered > 0
    assert report.unreadable == local.unreadable == [(str(dataset / "broken.parquet"), ANY)]
    assert (report.files, report.row_groups, report.columns) == (
        local.files,
        local.row_groups,
        local.columns,
    )
    assert (report.reads, report.bytes_read) == (local.reads, local.bytes_read)
    assert report.index_bytes == local.index_bytes
    _assert_same_index(tmp_path / "spark.puffin", tmp_path / "local.puffin")
    ids = [int(x) for x in pq.read_table(dataset / "f07.parquet")["id"][:5]] + [-1, 10**7]
    keys = [f"key-{x}" for x in ids]
    for column, values in (("id", ids), ("s", keys)):
        found = _lookups(tmp_path / "spark.puffin", column, values)
        assert found == _lookups(tmp_path / "local.puffin", column, values)
        assert all(str(dataset / "f07.parquet") in f for f in found[:5])


@pytest.mark.parametrize("reduce_tasks", [1, 10_000], ids=["fewer-than-blocks", "more"])
def test_ranges_of_a_class_or_of_one_block(
    spark: Any, dataset: Path, tmp_path: Path, reduce_tasks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One range a class (1 reduce task asked: fewer than the blocks), or one a block (10,000
    asked: more than the blocks), in an index directory: the local build's index either way.
    The second with batches of 4 bitsets (of 256 bytes at most) for the slices job's map tasks:
    a class's members come in many rows."""
    if reduce_tasks > 1:
        monkeypatch.setattr(spark_index, "PIECES_BATCH_BYTES", 1024)
    index.build_index(str(dataset), COLUMNS, tmp_path / "local")
    pbs.build_index(
        spark, str(dataset), COLUMNS, index_location=tmp_path / "spark", reduce_tasks=reduce_tasks
    )
    _assert_same_directory(tmp_path / "spark", tmp_path / "local")

    with index.BloomIndex(tmp_path / "spark") as idx:
        classes = [
            (size, n) for col in COLUMNS for size, n in idx.classes(col).items() if size is not None
        ]
    ranges = spark_index.range_plan(classes, reduce_tasks)
    blocks = sum(num_bytes // 32 for num_bytes, _ in classes)
    counted = sum(r.num_ranges for r in ranges)
    assert counted == (len(classes) if reduce_tasks == 1 else blocks)
    assert len(classes) < blocks < reduce_tasks or reduce_tasks == 1


def test_the_bound_on_a_range(monkeypatch: pytest.MonkeyPatch) -> None:
    """No range over MAX_RANGE_BYTES where a block is smaller, whatever was asked."""
    monkeypatch.setattr(spark_index, "MAX_RANGE_BYTES", 4096)
    (plan,) = spark_index.range_plan([(1 << 20, 80)], 1)
    assert plan.num_ranges * plan.blocks_per_range >= (1 << 20) // 32
    assert plan.blocks_per_range * 256 * 10 <= 4096  # 10 bytes a slice: 1 block a range
    (one,) = spark_index.range_plan([(1 << 20, 8000)], 1)  # a block's slices are 256,000 B
    assert one.blocks_per_range == 1


def test_a_delta_table_index_is_the_local_builds(
    spark: Any, delta_table: Path, tmp_path: Path
) -> None:
    on_spark, locally = tmp_path / "spark", tmp_path / "local"
    shutil.copytree(delta_table, on_spark)
    shutil.copytree(delta_table, locally)
    local = delta.build_index(str(locally), ["id", "key"])
    report = pbs.build_index(spark, str(on_spark), ["id", "key"])
    assert report.location == str(on_spark / "_bloom_index")
    assert (report.files, report.row_groups, report.columns) == (
        local.files,
        local.row_groups,
        local.columns,
    )
    assert report.files == 6 and report.unreadable == []
    _assert_same_directory(on_spark / "_bloom_index", locally / "_bloom_index")
    for value in (5, 1500, 2999, 4000):
        spark_found = delta.lookup(str(on_spark), "id", value)
        local_found = delta.lookup(str(locally), "id", value)
        assert spark_found.files == local_found.files and spark_found.from_index == 6
    assert delta.lookup(str(on_spark), "key", "k1234").files


def test_a_file_that_cannot_be_fetched_fails_the_build(
    spark: Any, delta_table: Path, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    shutil.copytree(delta_table, root)
    gone = sorted(root.glob("part=*/*.parquet"))[0]
    gone.unlink()
    with pytest.raises(Exception, match=r"FileNotFoundError|No such file"):
        pbs.build_index(spark, str(root), ["id"])
    assert not (root / "_bloom_index").exists()
    with pytest.raises(ValueError, match="has the column"):
        pbs.build_index(spark, str(delta_table), ["nope"])
    assert not (delta_table / "_bloom_index").exists()


def test_a_dataset_on_object_storage(spark: Any, s3: Any, dataset: Path, tmp_path: Path) -> None:
    """Files on S3, read by the executors through the filesystem (its storage options) shipped
    with their descriptions, the index written to S3: the local build's."""
    bucket = s3.bucket()
    for path in sorted(dataset.glob("f1*.parquet")):
        s3.upload(path, f"s3://{bucket}/t/{path.name}")
    options = s3.storage_options
    target = f"s3://{bucket}/t/_bloom_index/index.puffin"
    report = pbs.build_index(
        spark, f"s3://{bucket}/t/", COLUMNS, index_location=target, storage_options=options
    )
    local = index.build_index(
        f"s3://{bucket}/t/",
        COLUMNS,
        tmp_path / "local.puffin",
        storage_options=options,
        index_storage_options={},
    )
    assert report.files == local.files == 10 and report.unreadable == []
    (tmp_path / "spark.puffin").write_bytes(s3.fs().cat_file(target.removeprefix("s3://")))
    _assert_same_index(tmp_path / "spark.puffin", tmp_path / "local.puffin")


@pytest.mark.parametrize("from_data", ["missing", "all"])
def test_filters_built_from_the_values_on_the_executors(
    spark: Any, dataset: Path, tmp_path: Path, from_data: Any
) -> None:
    """from_data: the files without filters (``missing``: 3 of them; ``all``: every file) read
    again by a second job that builds their filters from the values at fpp 1/N, for N the row
    groups the tails counted: the local build's index, blob for blob."""
    local = index.build_index(str(dataset), COLUMNS, tmp_path / "local.puffin", from_data=from_data)
    report = pbs.build_index(
        spark,
        str(dataset),
        COLUMNS,
        index_location=tmp_path / "spark.puffin",
        from_data=from_data,
    )
    files_without = 3 if from_data == "missing" else FILES
    assert local.built_from_data > 0
    assert report.built_from_data == local.built_from_data
    rebuilt = [
        p for p in dataset.glob("f*.parquet") if from_data == "all" or int(p.stem[1:]) % 13 == 5
    ]
    assert len(rebuilt) == files_without
    groups = sum(pq.ParquetFile(p).num_row_groups for p in rebuilt)
    assert local.built_from_data == groups * len(COLUMNS)
    assert (report.files, report.row_groups, report.columns) == (
        local.files,
        local.row_groups,
        local.columns,
    )
    # The rebuilt files' tails are read twice (once to count the row groups, once to build).
    assert report.reads > local.reads and report.bytes_read > local.bytes_read
    assert local.columns["id"].unfiltered == 1  # broken.parquet; every other row group has one
    _assert_same_index(tmp_path / "spark.puffin", tmp_path / "local.puffin")
    # A value of a file written without filters: found through its filter built on Spark.
    ids = [int(x) for x in pq.read_table(dataset / "f05.parquet")["id"][:5]]
    found = _lookups(tmp_path / "spark.puffin", "id", ids)
    assert all(str(dataset / "f05.parquet") in f for f in found)


def test_an_iceberg_table_index_is_the_local_builds(spark: Any, tmp_path: Path) -> None:
    """A pyiceberg table (SqlCatalog): three files with filters and one pyiceberg appended
    without (from_data builds its filters): the Puffin file registered for the current
    snapshot is the local build's, byte for byte; lookups through it equal the probes."""
    import parquet_bloom.iceberg as pbi
    from tests.tables import iceberg_tables as it

    table = it.catalog(tmp_path).create_table("db.t", it.SCHEMA)
    for k in range(3):
        ids = range(30 * k, 30 * (k + 1))
        it.add_data_file(table, it.values(ids), f"f{k}.parquet", row_group_size=5)
    table.append(it.values(range(90, 100)))  # pyiceberg's own file: no filters
    local = pbi.build_index(table, ["id", "name"], from_data="missing")
    report = pbs.build_index(spark, table, ["id", "name"], from_data="missing")
    assert report.built_from_data == local.built_from_data == 2  # the appended file's row group
    assert (report.files, report.row_groups, report.columns) == (
        local.files,
        local.row_groups,
        local.columns,
    )
    (statistics,) = table.metadata.statistics  # the Spark build's replaced the local one
    assert statistics.statistics_path == report.location != local.location
    _assert_same_index(
        Path(report.location.removeprefix("file://")), Path(local.location.removeprefix("file://"))
    )
    for value in (3, 47, 95, 1000):
        found = pbi.lookup(table, "id", value)
        assert found.from_index == 4 and found.probed == []
        assert (value < 100) == bool(found.files)
    with pytest.raises(ValueError, match="leave index_location"):
        pbs.build_index(spark, table, ["id"], index_location=tmp_path / "x.puffin")

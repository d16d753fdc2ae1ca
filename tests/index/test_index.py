"""Bloom indexes built from files that real writers wrote (pyarrow, DuckDB, deltalake), read
back from local disk and the S3 server: every lookup gives exactly the row groups that probing
each file's own filters gives."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import index
from parquet_bloom._index import layout
from tests import writers


def _write(
    path: Path, ids: np.ndarray, *, ndv: int, row_group_size: int, bloom: bool = True
) -> None:
    table = pa.table({"id": ids, "s": [f"key-{x}" for x in ids]})
    options = {"id": {"ndv": ndv, "fpp": 0.01}, "s": {"ndv": ndv, "fpp": 0.01}} if bloom else None
    pq.write_table(table, path, row_group_size=row_group_size, bloom_filter_options=options)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 pyarrow files of 1 to 4 row groups and filters of three sizes, one file without
    filters, one DuckDB file (its own filters, for the DuckDB columns: not indexed here), one
    file whose ``id`` is a string, one without ``id``, and one that is not Parquet."""
    root = tmp_path_factory.mktemp("index-dataset")
    rng = np.random.default_rng(3)
    for i in range(24):
        ids = rng.integers(0, 10**9, 3000)
        _write(
            root / f"f{i:02d}.parquet",
            ids,
            ndv=(500, 3000, 12000)[i % 3],
            row_group_size=(3000, 1500, 1000, 750)[i % 4],
        )
    _write(
        root / "plain.parquet",
        rng.integers(0, 10**9, 2000),
        ndv=0,
        row_group_size=1000,
        bloom=False,
    )
    pq.write_table(
        pa.table({"id": [str(x) for x in range(500)], "s": ["a"] * 500}),
        root / "strings.parquet",
        bloom_filter_options={"id": {"ndv": 500}},
    )
    pq.write_table(pa.table({"other": np.arange(10)}), root / "no-id.parquet")
    (root / "broken.parquet").write_bytes(b"PAR1 this is not a Parquet file PAR1")
    return root


def _probed(root: Path, column: str, values: Any) -> dict[str, list[int]]:
    """What each file's own filters say, file by file (the whole file for one that cannot be
    read, every row group of a file whose column is another type)."""
    out: dict[str, list[int]] = {}
    for path in sorted(root.glob("*.parquet")):
        try:
            reader = pb.BloomFilterReader(str(path))
        except pb.CorruptFileError:
            out[str(path)] = [-1]
            continue
        with reader:
            if column not in reader.columns:
                continue
            leaf = {leaf.path: leaf for leaf in reader.schema_leaves}[column]
            if leaf.physical_type == "BYTE_ARRAY" and column == "id":
                found = list(range(reader.num_row_groups))
            else:
                found = reader.row_groups_might_contain(column, values)
        if found:
            out[str(path)] = found
    return out


@pytest.fixture(scope="module")
def built(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    target = tmp_path_factory.mktemp("index-out") / "sub" / "orders.puffin"
    report = index.build_index(str(dataset), ["id", "s"], target)
    return target, report


def test_the_report_says_what_was_built(built: tuple[Path, Any], dataset: Path) -> None:
    target, report = built
    assert report.files == 28
    assert report.index_bytes == target.stat().st_size
    assert report.unreadable == [(str(dataset / "broken.parquet"), report.unreadable[0][1])]
    ids = report.columns["id"]
    # 24 files of 1-4 row groups in three filter sizes; the file without filters (2 row groups),
    # the string-typed one (1) and the broken one (a whole file) without.
    assert sum(ids.classes.values()) == sum((1, 2, 3, 4)[i % 4] for i in range(24))
    assert len(ids.classes) == 3
    assert ids.unfiltered == 2 + 1 + 1
    assert ids.filter_bytes == sum(size * n for size, n in ids.classes.items())
    assert "unreadable, always a candidate" in str(report)


def test_lookups_equal_each_files_own_filters(built: tuple[Path, Any], dataset: Path) -> None:
    target, _ = built
    table = pq.read_table(dataset / "f05.parquet")
    present = [int(x) for x in table["id"].to_numpy()[:40]]
    absent = [int(x) for x in np.random.default_rng(11).integers(10**9, 2 * 10**9, 40)]
    with index.BloomIndex(target) as idx:
        assert idx.columns == ["id", "s"]
        for value in present + absent:
            answer = idx.lookup("id", value)
            assert answer.files() == _probed(dataset, "id", value), value
            assert answer.unfiltered == 4
        for value in present[:10]:
            assert idx.lookup("s", f"key-{value}").files() == _probed(dataset, "s", f"key-{value}")
        in_list = present[:3] + absent[:3]
        assert idx.lookup("id", in_list).files() == _probed(dataset, "id", in_list)


def test_a_value_is_always_found_where_it_is(built: tuple[Path, Any], dataset: Path) -> None:
    target, _ = built
    with index.BloomIndex(target) as idx:
        for path in sorted(dataset.glob("f*.parquet")):
            f = pq.ParquetFile(path)
            for rg in range(f.num_row_groups):
                value = int(f.read_row_group(rg, ["id"])["id"][7].as_py())
                assert rg in idx.lookup("id", value).files()[str(path)]


def test_literals_the_filters_cannot_answer(built: tuple[Path, Any]) -> None:
    target, _ = built
    with index.BloomIndex(target) as idx:
        everything = idx.lookup("id", None)  # a NULL literal: every row group
        assert len(everything.row_groups) == idx.row_groups("id")
        nothing = idx.lookup("id", 2**70)  # beyond INT64: only the row groups without filters
        assert len(nothing.row_groups) == nothing.unfiltered == 4
        with pytest.raises(TypeError, match="cannot compare"):
            idx.lookup("id", "not a number")
        with pytest.raises(ValueError, match="no column 'nope'"):
            idx.lookup("nope", 1)


def test_a_lookup_is_two_rounds_of_reads(built: tuple[Path, Any], dataset: Path) -> None:
    target, _ = built
    with index.BloomIndex(target) as idx:
        opened = idx.reads
        assert opened == 1  # the footer lies in the tail read
        answer = idx.lookup("id", 123)
        # Slices: 3 classes of 8 slices each, coalesced; entries: the candidates and the row
        # groups without filters. Locally each coalesced range is one read.
        slice_bytes = sum(8 * ((n + 7) // 8) for n in idx.classes("id").values() if n)
        assert answer.bytes_read >= slice_bytes
        assert answer.bytes_read < 64 * 1024 * 4


def test_the_index_is_a_puffin_file_pyiceberg_reads(built: tuple[Path, Any]) -> None:
    from pyiceberg.table.puffin import PuffinFile

    target, _ = built
    parsed = PuffinFile(target.read_bytes())
    kinds = {b.type for b in parsed.footer.blobs}
    assert kinds == {layout.SLICES_BLOB, layout.ROW_GROUPS_BLOB, layout.FILES_BLOB}
    assert all(b.compression_codec is None for b in parsed.footer.blobs)


def test_duckdb_and_deltalake_files(tmp_path: Path) -> None:
    root = tmp_path / "mixed"
    root.mkdir()
    writers.write_duckdb(root / "duck.parquet")
    ids = np.random.default_rng(5).integers(0, 10**6, 9000)
    writers.write_deltalake(tmp_path / "delta", pa.table({"id": ids, "s": [f"k{x}" for x in ids]}))
    for i, path in enumerate(sorted((tmp_path / "delta").glob("*.parquet"))):
        shutil.copy(path, root / f"delta-{i}.parquet")
    index.build_index(str(root / "duck.parquet"), ["int64", "string"], tmp_path / "duck.idx")
    with index.BloomIndex(tmp_path / "duck.idx") as idx:
        for value in (0, 17, 2999, 10**7):
            assert idx.lookup("int64", value).files() == _probed(root, "int64", value)
        for value in ("v1", "v299", "nope"):
            assert idx.lookup("string", value).files() == _probed(root, "string", value)
    delta = [str(p) for p in sorted(root.glob("delta-*.parquet"))]
    index.build_index(delta, ["id", "s"], tmp_path / "delta.idx")
    with index.BloomIndex(tmp_path / "delta.idx") as idx:
        for value in [int(x) for x in ids[:20]] + [-1, 10**7]:
            expected = {p: r for p, r in _probed(root, "id", value).items() if "delta-" in p}
            assert idx.lookup("id", value).files() == expected
            assert expected or value < 0 or value >= 10**6


def test_a_build_that_fails_leaves_no_index(tmp_path: Path, dataset: Path) -> None:
    target = tmp_path / "never.idx"
    with pytest.raises(ValueError, match="has the column"):
        index.build_index(str(dataset), ["missing"], target)
    with pytest.raises(ValueError, match="non-empty list"):
        index.build_index(str(dataset), "id", target)
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_an_index_on_object_storage(s3: Any, s3_requests: Any, dataset: Path) -> None:
    bucket = s3.bucket()
    for path in sorted(dataset.glob("f0*.parquet")):
        s3.upload(path, f"s3://{bucket}/t/{path.name}")
    options = s3.storage_options
    target = f"s3://{bucket}/t/_bloom_index/index.puffin"
    s3_requests.reset()
    report = index.build_index(f"s3://{bucket}/t/", ["id"], target, storage_options=options)
    gets = [r for r in s3_requests.list() if r.method == "GET" and r.key.endswith(".parquet")]
    assert len(gets) == report.files == 10  # one tail read a file: the filters lie in it
    value = int(pq.read_table(dataset / "f03.parquet")["id"][5].as_py())
    s3_requests.reset()
    with index.BloomIndex(target, storage_options=options) as idx:
        assert s3_requests.count("GET") == 1  # the footer: one suffix read
        s3_requests.reset()
        answer = idx.lookup("id", value)
        assert f"s3://{bucket}/t/f03.parquet" in answer.files()
        assert s3_requests.count() == answer.reads
    expected = {
        f"s3://{bucket}/t/{Path(p).name}": rgs
        for p, rgs in _probed(dataset, "id", value).items()
        if Path(p).name.startswith("f0")
    }
    assert answer.files() == expected

"""Indexes whose filters are built from the values (``from_data``): for files written without
filters, or to reach the index's own target (about one false candidate a lookup); the filters
are those the library's rewrite writes at that rate, bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import index
from parquet_bloom._index.build import target_fpp


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 files of 3 row groups, no filters; strings and integers; one file with filters."""
    root = tmp_path_factory.mktemp("from-data") / "data"
    root.mkdir()
    rng = np.random.default_rng(9)
    for i in range(12):
        ids = rng.integers(0, 10**12, 3000)
        table = pa.table({"id": ids, "s": [f"user-{x % 100_000}" for x in ids]})
        options = {"id": {"ndv": 1000, "fpp": 0.05}} if i == 0 else None
        pq.write_table(
            table, root / f"f{i:02d}.parquet", row_group_size=1000, bloom_filter_options=options
        )
    return root


def test_filters_built_for_row_groups_without_one(plain: Path, tmp_path: Path) -> None:
    report = index.build_index(str(plain), ["id", "s"], tmp_path / "idx", from_data="missing")
    assert report.built_from_data == 11 * 3 * 2 + 3  # every chunk but f00's id filters
    assert "filters built from the values" in str(report)
    with index.BloomIndex(tmp_path / "idx") as idx:
        assert idx.classes("id").get(None) is None  # every row group has a filter now
        for path in sorted(plain.glob("*.parquet")):
            f = pq.ParquetFile(path)
            for rg in range(3):
                rows = f.read_row_group(rg)
                for value in rows["id"].to_pylist()[::97]:
                    assert rg in idx.lookup("id", value).files()[str(path)]
                for value in rows["s"].to_pylist()[::97]:
                    assert rg in idx.lookup("s", value).files()[str(path)]


def test_they_are_the_rewrites_filters_at_the_target_rate(plain: Path, tmp_path: Path) -> None:
    report = index.build_index(str(plain), ["id"], tmp_path / "idx", from_data="all")
    rate = target_fpp(36)
    assert report.built_from_data == 36
    rewritten = tmp_path / "rewritten"
    rewritten.mkdir()
    for path in sorted(plain.glob("*.parquet")):
        pb.rewrite_bloom_filters(str(path), str(rewritten / path.name), columns=["id"], fpp=rate)
    with index.BloomIndex(tmp_path / "idx") as idx:
        probes = np.random.default_rng(1).integers(0, 10**12, 300).tolist()
        probes += pq.read_table(plain / "f05.parquet")["id"].to_pylist()[:50]
        for value in probes:
            expected = {}
            for path in sorted(rewritten.glob("*.parquet")):
                with pb.BloomFilterReader(str(path)) as reader:
                    found = reader.row_groups_might_contain("id", value)
                if found:
                    expected[str(plain / path.name)] = found
            assert idx.lookup("id", value).files() == expected


def test_the_target_keeps_false_candidates_near_one(plain: Path, tmp_path: Path) -> None:
    from parquet_bloom._index.stats import column_stats

    index.build_index(str(plain), ["id"], tmp_path / "idx", from_data="all")
    with index.BloomIndex(tmp_path / "idx") as idx:
        expected = sum(s.expected_false for s in column_stats(idx, "id"))
        assert expected <= 1.0
        misses = sum(
            len(idx.lookup("id", int(v)).row_groups)
            for v in np.random.default_rng(2).integers(10**12, 2 * 10**12, 2000)
        )
    assert misses / 2000 <= 1.0  # 36 row groups at 1/36: about one a lookup, by design


def test_options_a_build_cannot_take(plain: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="from_data must be"):
        index.build_index(str(plain), ["id"], tmp_path / "i", from_data="some")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pass from_data too"):
        index.build_index(str(plain), ["id"], tmp_path / "i", fpp=0.001)
    with pytest.raises(ValueError):
        index.build_index(str(plain), ["id"], tmp_path / "i", from_data="all", fpp=2.0)
    assert not (tmp_path / "i").exists()

"""``prune(..., index=)``: the files an index knows are decided by its lookups without being
opened, every other file by its own filters; the pruned scan's rows always equal the full
scan's, and the row groups kept are those the files' own filters keep."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import index


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[int]]:
    root = tmp_path_factory.mktemp("prune-index") / "data"
    root.mkdir()
    rng = np.random.default_rng(4)
    picks = []
    for i in range(16):
        ids = rng.integers(0, 10**9, 3000)
        picks.append(int(ids[i * 7]))
        table = pa.table(
            {"id": ids, "s": [f"s{x % 5000}" for x in ids], "n": np.arange(3000) + i * 3000}
        )
        pq.write_table(
            table,
            root / f"f{i:02d}.parquet",
            row_group_size=1000,
            bloom_filter_options={"id": {"ndv": 1000, "fpp": 0.001}, "s": {"ndv": 1000}},
        )
    target = root.parent / "index"
    index.build_index(str(root), ["id"], target)
    return root, target, picks


def _kept(result: pb.PruneResult) -> dict[str, list[int]]:
    out = {}
    for fragment in result.dataset.get_fragments():
        out[Path(fragment.path).name] = sorted(rg.id for rg in fragment.row_groups)
    return out


EXPRESSIONS = [
    lambda p: pc.field("id") == p[3],
    lambda p: pc.field("id").isin([*p[:4], -5]),
    lambda p: (pc.field("id") == p[1]) | (pc.field("id") == p[9]),
    lambda p: (pc.field("id") == p[2]) & (pc.field("n") > 5),  # n: the scan's business
    lambda p: (pc.field("id") == p[5]) & (pc.field("s") == "s1"),  # s: each file's filters
    lambda p: (pc.field("id") == p[5]) | (pc.field("s") == "s77"),  # s not in the index
    lambda p: pc.field("id") == 123456789012,  # in no file
    lambda p: pc.field("n") > 40000,  # nothing a filter decides
]


@pytest.mark.parametrize("make", EXPRESSIONS)
def test_the_index_keeps_what_the_files_filters_keep(
    lake: tuple[Path, Path, list[int]], make: Any
) -> None:
    root, target, picks = lake
    expr = make(picks)
    plain = pb.prune(str(root), expr)
    indexed = pb.prune(str(root), expr, index=target)  # no warning: the suite makes one an error
    assert _kept(indexed) == _kept(plain)
    full = ds.dataset(str(root)).to_table(filter=expr).sort_by("n")
    assert indexed.dataset.to_table(filter=expr).sort_by("n").equals(full)


def test_a_point_lookup_opens_no_file(lake: tuple[Path, Path, list[int]]) -> None:
    root, target, picks = lake
    result = pb.prune(str(root), pc.field("id") == picks[6], index=target)
    report = result.report
    assert report.index_files == report.files == 16
    assert report.reads == report.index_reads == report.requests
    assert report.per_file == ()  # no file was opened
    assert report.files_skipped >= 15
    assert "16 files decided by the index" in str(report)


def test_an_and_with_a_column_the_index_lacks_opens_only_the_candidates(
    lake: tuple[Path, Path, list[int]],
) -> None:
    root, target, picks = lake
    expr = (pc.field("id") == picks[6]) & (pc.field("s") == "s3")
    report = pb.prune(str(root), expr, index=target).report
    assert report.index_files == 16
    # Only the index's candidates are opened for their own filters on s.
    assert 1 <= len(report.per_file) <= 2


def test_files_the_index_does_not_know_are_probed(
    lake: tuple[Path, Path, list[int]], tmp_path: Path
) -> None:
    root, _, picks = lake
    copy = tmp_path / "data"
    shutil.copytree(root, copy)
    index.build_index(str(copy), ["id"], tmp_path / "idx")
    ids = np.arange(5, 3005, dtype=np.int64)
    pq.write_table(
        pa.table({"id": ids, "s": ["x"] * 3000, "n": np.arange(3000) + 99_000}),
        copy / "new.parquet",
        row_group_size=1000,
        bloom_filter_options={"id": {"ndv": 1000, "fpp": 0.001}},
    )
    expr = pc.field("id").isin([10, picks[0]])
    result = pb.prune(str(copy), expr, index=tmp_path / "idx")
    assert result.report.index_files == 16 and result.report.files == 17
    assert [c.path.endswith("new.parquet") for c in result.report.per_file] == [True]
    assert _kept(result) == _kept(pb.prune(str(copy), expr))
    full = ds.dataset(str(copy)).to_table(filter=expr).sort_by("n")
    assert result.dataset.to_table(filter=expr).sort_by("n").equals(full)


def test_a_literal_of_another_type_is_left_to_the_scan(lake: tuple[Path, Path, list[int]]) -> None:
    root, target, picks = lake
    expr = pc.field("id") == pa.scalar(float(picks[2]))
    indexed = pb.prune(str(root), expr, index=target)
    plain = pb.prune(str(root), expr)
    assert _kept(indexed) == _kept(plain)

"""Lookups of a dataset's live files through an index built before the dataset changed: files
added, removed, rewritten at another size; the answer is always what probing every live file's
own filters gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from parquet_bloom import index
from tests.index.lake import probed, write_ids


def test_a_changed_dataset_is_answered_right(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    rng = np.random.default_rng(21)
    for i in range(12):
        write_ids(root / f"f{i:02d}.parquet", rng.integers(0, 10**9, 2000))
    target = tmp_path / "idx.puffin"
    index.build_index(str(root), ["id"], target)
    # After the build: one file added, one removed, one rewritten with other rows.
    added = rng.integers(0, 10**9, 3000)
    write_ids(root / "new.parquet", added)
    (root / "f03.parquet").unlink()
    rewritten = rng.integers(0, 10**9, 2500)
    write_ids(root / "f07.parquet", rewritten)
    old = pq.read_table(root / "f01.parquet")["id"].to_numpy()
    values = [int(added[5]), int(rewritten[9]), int(old[3]), 123]
    for value in [*values, values]:
        got = index.lookup(str(root), "id", value, index=target)
        assert got.files == probed(root, value), value
        assert sorted(Path(p).name for p in got.probed) == ["f07.parquet", "new.parquet"]
        assert [Path(p).name for p in got.gone] == ["f03.parquet"]
        assert got.from_index == 10
    assert (
        str(root / "new.parquet")
        in index.lookup(str(root), "id", int(added[5]), index=target).files
    )
    text = str(index.lookup(str(root), "id", 123, index=target))
    assert "2 probed through their own filters" in text and "1 indexed files gone" in text


def test_a_relative_and_an_absolute_name_are_one_file(tmp_path: Path, monkeypatch: Any) -> None:
    root = tmp_path / "data"
    root.mkdir()
    ids = np.arange(5000, dtype=np.int64)
    write_ids(root / "a.parquet", ids)
    monkeypatch.chdir(tmp_path)
    index.build_index("data", ["id"], "idx.puffin")
    got = index.lookup(str(root), "id", 77, index=tmp_path / "idx.puffin")
    assert got.from_index == 1 and got.probed == []
    assert got.files == {str(root / "a.parquet"): [0]}


def test_an_open_index_serves_many_lookups(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    write_ids(root / "a.parquet", np.arange(3000, dtype=np.int64))
    index.build_index(str(root), ["id"], tmp_path / "i.puffin")
    with index.BloomIndex(tmp_path / "i.puffin") as idx:
        first = index.lookup(str(root), "id", 5, index=idx)
        second = index.lookup(str(root), "id", 2999, index=idx)
    assert first.files == {str(root / "a.parquet"): [0]}
    assert second.files == {str(root / "a.parquet"): [2]}
    assert second.index_reads >= 2  # slices, entries (the footer was read when opened)

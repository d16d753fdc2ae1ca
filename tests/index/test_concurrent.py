"""Writers of one index directory at once: each change is a pointer of the next generation,
written only if no other writer made it first; the loser applies its change again to the
winner's pointer, so that no segment is lost and lookups stay right.

The interleavings are made, not waited for: a writer's own step (writing its segment, merging
the old ones) runs the other writer to its end before it returns, so the first writer commits
after the second, having read the pointer before it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import parquet_bloom as pb
from parquet_bloom import index
from parquet_bloom._index import build, maintain, store
from tests.index.lake import probed, write_ids


def _lake(tmp_path: Path, files: int = 3) -> tuple[Path, Path, np.random.Generator]:
    root, target = tmp_path / "data", tmp_path / "idx"
    root.mkdir()
    rng = np.random.default_rng(11)
    for i in range(files):
        write_ids(root / f"a{i}.parquet", rng.integers(0, 10**9, 2000))
    index.build_index(str(root), ["id"], target)
    return root, target, rng


def _during(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, other: Callable[[], Any]
) -> list[Any]:
    """Make ``module.name`` run ``other`` to its end right after its own first call returns;
    what ``other`` returned is appended to the list returned."""
    original = getattr(module, name)
    done: list[Any] = []

    def step(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if not done:
            done.append(None)
            monkeypatch.setattr(module, name, original)
            done.append(other())
        return result

    monkeypatch.setattr(module, name, step)
    return done


def _check(root: Path, target: Path, values: list[int]) -> None:
    """Every live file known to the index; each lookup equal to probing every file."""
    with index.BloomIndex(target) as idx:
        assert sorted(idx.files()) == sorted(str(p) for p in root.glob("*.parquet"))
    for value in values:
        got = index.lookup(str(root), "id", value, index=target)
        assert got.probed == []
        assert got.files == probed(root, value)


def _pointer(target: Path) -> store.Pointer:
    pointer = store.read_pointer(str(target), None)
    assert pointer is not None
    return pointer


def _segments(target: Path) -> set[str]:
    return {p.name for p in target.glob("segment-*.puffin")}


def test_two_refreshes_of_different_files_keep_both_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, target, rng = _lake(tmp_path)
    b0, b1 = rng.integers(0, 10**9, 1500), rng.integers(0, 10**9, 1500)
    write_ids(root / "b0.parquet", b0)
    write_ids(root / "b1.parquet", b1)
    # The second writer refreshes with b0 only (it listed before b1 was there).
    listed = [str(p) for p in sorted(root.glob("*.parquet")) if p.name != "b1.parquet"]
    other = _during(
        monkeypatch, maintain, "write_segment", lambda: index.refresh_index(listed, target)
    )
    first = index.refresh_index(str(root), target)
    assert other[1].files == 1  # b0, pointer 2
    # The first writer's segment held b0 and b1; the index had b0 by then: it wrote b1 alone
    # and named that, after the other's (pointer 3). Its first segment is gone.
    assert first.files == 1
    pointer = _pointer(target)
    assert pointer.generation == 3 and len(pointer.segments) == 3
    assert _segments(target) == {s.name for s in pointer.segments}
    assert sorted(p.name for p in target.glob("pointer-*.json")) == [
        store.pointer_name(3),
        store.pointer_name(2),
        store.pointer_name(1),
    ]
    _check(root, target, [int(b0[5]), int(b1[7]), [int(b0[1]), int(b1[2])], 3])


def test_two_refreshes_of_the_same_files_add_one_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, target, rng = _lake(tmp_path)
    b0 = rng.integers(0, 10**9, 1500)
    write_ids(root / "b0.parquet", b0)
    other = _during(
        monkeypatch, maintain, "write_segment", lambda: index.refresh_index(str(root), target)
    )
    first = index.refresh_index(str(root), target)
    assert other[1].files == 1
    assert first.files == 0  # the other indexed b0 first: nothing left to add
    pointer = _pointer(target)
    assert pointer.generation == 2 and len(pointer.segments) == 2
    assert _segments(target) == {s.name for s in pointer.segments}  # its own one removed
    _check(root, target, [int(b0[9]), 12])


def test_a_refresh_during_a_compaction_stays_after_the_merged_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, target, rng = _lake(tmp_path)
    b0, c0 = rng.integers(0, 10**9, 1500), rng.integers(0, 10**9, 1500)
    write_ids(root / "b0.parquet", b0)
    index.refresh_index(str(root), target)  # two segments
    write_ids(root / "c0.parquet", c0)
    other = _during(
        monkeypatch, maintain, "merge_segments", lambda: index.refresh_index(str(root), target)
    )
    compacted = index.compact_index(target)
    assert other[1].files == 1  # c0, in pointer 3
    assert compacted.segments_before == 2
    pointer = _pointer(target)
    assert pointer.generation == 4
    # The merged segment (of the two it read), then the refresh's.
    assert len(pointer.segments) == 2
    with index.BloomIndex(target) as idx:
        assert idx.segments[0].files() == {
            str(root / n): os.path.getsize(root / n)
            for n in ("a0.parquet", "a1.parquet", "a2.parquet", "b0.parquet")
        }
    _check(root, target, [int(b0[3]), int(c0[4]), 5])


def test_a_compaction_during_a_refresh_is_kept_and_the_refresh_added_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, target, rng = _lake(tmp_path)
    b0, c0 = rng.integers(0, 10**9, 1500), rng.integers(0, 10**9, 1500)
    write_ids(root / "b0.parquet", b0)
    index.refresh_index(str(root), target)
    write_ids(root / "c0.parquet", c0)
    other = _during(monkeypatch, maintain, "write_segment", lambda: index.compact_index(target))
    refreshed = index.refresh_index(str(root), target)
    assert other[1].segments_before == 2 and refreshed.files == 1
    pointer = _pointer(target)
    assert pointer.generation == 4 and len(pointer.segments) == 2
    _check(root, target, [int(b0[3]), int(c0[4]), 5])


def test_a_compaction_that_loses_to_another_merges_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, target, rng = _lake(tmp_path)
    b0 = rng.integers(0, 10**9, 1500)
    write_ids(root / "b0.parquet", b0)
    index.refresh_index(str(root), target)
    other = _during(monkeypatch, maintain, "merge_segments", lambda: index.compact_index(target))
    compacted = index.compact_index(target)
    # The other merged the same two segments first: this one merged its result (one segment)
    # again, and its first merge, named by no pointer, was removed.
    assert other[1].segments_before == 2 and compacted.segments_before == 1
    pointer = _pointer(target)
    assert pointer.generation == 4 and len(pointer.segments) == 1
    assert pointer.segments[0].name in _segments(target)
    _check(root, target, [int(b0[3]), 5])


def test_a_refresh_during_a_build_keeps_its_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, target, rng = _lake(tmp_path)
    b0 = rng.integers(0, 10**9, 1500)
    listed = [str(p) for p in sorted(root.glob("*.parquet"))]  # the build's listing: no b0

    def refresh() -> Any:
        write_ids(root / "b0.parquet", b0)
        return index.refresh_index(str(root), target)

    other = _during(monkeypatch, build, "write_segment", refresh)
    index.build_index(listed, ["id"], target)
    assert other[1].files == 1
    pointer = _pointer(target)
    # The build replaced the segment it read; the refresh's, added since, stays.
    assert pointer.generation == 3 and len(pointer.segments) == 2
    _check(root, target, [int(b0[3]), 5])


def test_an_index_of_the_old_layout_is_read_and_refreshed(tmp_path: Path) -> None:
    root, target, rng = _lake(tmp_path)
    (target / store.pointer_name(1)).unlink()  # what the library wrote before versioned pointers
    with index.BloomIndex(target) as idx:
        assert idx.generation == 1
    b0 = rng.integers(0, 10**9, 1500)
    write_ids(root / "b0.parquet", b0)
    assert index.refresh_index(str(root), target).files == 1
    assert (target / store.pointer_name(2)).exists()
    _check(root, target, [int(b0[3])])


def test_a_copy_behind_the_newest_pointer_is_not_used(tmp_path: Path) -> None:
    root, target, rng = _lake(tmp_path)
    first = (target / "latest.json").read_bytes()
    b0 = rng.integers(0, 10**9, 1500)
    write_ids(root / "b0.parquet", b0)
    index.refresh_index(str(root), target)
    (target / "latest.json").write_bytes(first)  # a writer stopped before replacing the copy
    with index.BloomIndex(target) as idx:
        assert idx.generation == 2 and len(idx.segments) == 2
        assert idx.reads == 3  # the copy, the listing, the newest pointer
    _check(root, target, [int(b0[3])])
    (target / store.pointer_name(2)).write_text(json.dumps({"format": "parquet-bloom-index"}))
    with pytest.raises(pb.CorruptFileError, match=store.pointer_name(2).replace(".", r"\.")):
        index.BloomIndex(target)


def test_compaction_removes_old_pointers_but_the_newest(tmp_path: Path) -> None:
    root, target, rng = _lake(tmp_path)
    write_ids(root / "b0.parquet", rng.integers(0, 10**9, 1500))
    index.refresh_index(str(root), target)
    past = time.time() - 7200
    for path in target.iterdir():
        os.utime(path, (past, past))
    report = index.compact_index(target, retain_seconds=3600)
    removed = sorted(Path(p).name for p in report.removed)
    assert [n for n in removed if n.startswith("pointer-")] == [
        store.pointer_name(2),
        store.pointer_name(1),
    ]
    assert sorted(p.name for p in target.glob("*.json")) == ["latest.json", store.pointer_name(3)]
    _check(root, target, [5])


def test_two_refreshes_on_s3_race_through_conditional_puts(
    s3: Any, s3_requests: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = s3.bucket()
    rng = np.random.default_rng(4)
    options = s3.storage_options
    b0 = rng.integers(0, 10**9, 1500)
    for i, ids in enumerate([rng.integers(0, 10**9, 2000), rng.integers(0, 10**9, 2000), b0]):
        path = tmp_path / f"f{i}.parquet"
        write_ids(path, ids)
        s3.upload(path, f"s3://{bucket}/t/f{i}.parquet")
    target = f"s3://{bucket}/t/_bloom_index"
    first_two = [f"s3://{bucket}/t/f0.parquet", f"s3://{bucket}/t/f1.parquet"]
    index.build_index(first_two, ["id"], target, storage_options=options)
    other = _during(
        monkeypatch,
        maintain,
        "write_segment",
        lambda: index.refresh_index(f"s3://{bucket}/t/", target, storage_options=options),
    )
    s3_requests.reset()
    assert index.refresh_index(f"s3://{bucket}/t/", target, storage_options=options).files == 0
    assert other[1].files == 1
    puts = [r for r in s3_requests.list() if r.method == "PUT" and store.pointer_name(2) in r.key]
    # Both writers asked for generation 2 on condition that it did not exist: one made it.
    assert len(puts) == 2
    assert all(r.headers.get("If-None-Match") == "*" for r in puts)
    objects = s3.objects(bucket, "t/_bloom_index/")
    assert sorted(o for o in objects if o.endswith(".json")) == [
        "t/_bloom_index/latest.json",
        f"t/_bloom_index/{store.pointer_name(2)}",
        f"t/_bloom_index/{store.pointer_name(1)}",
    ]
    assert len([o for o in objects if "segment-" in o]) == 2  # the loser's was removed
    got = index.lookup(f"s3://{bucket}/t/", "id", int(b0[8]), index=target, storage_options=options)
    assert got.probed == [] and f"s3://{bucket}/t/f2.parquet" in got.files

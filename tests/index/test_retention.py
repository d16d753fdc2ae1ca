"""Compaction's retention of segments no pointer names: negative values refused, values below
the safe floor (60 s) only with ``no_concurrent_writers=True`` (``--no-concurrent-writers``),
since a refresh or build running meanwhile has written its segment before its pointer names
it; and a lookup of an index whose pointer names a missing segment is a located error, never a
silent miss."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom.delta as pbd
from parquet_bloom import index
from parquet_bloom.cli import main
from tests.tables import delta_tables

Capture = pytest.CaptureFixture[str]


def _write(path: Path, first: int) -> None:
    pq.write_table(
        pa.table({"id": np.arange(first, first + 100, dtype=np.int64)}),
        path,
        bloom_filter_options={"id": {"ndv": 100, "fpp": 0.01}},
    )


@pytest.fixture
def two_segments(tmp_path: Path) -> tuple[Path, Path]:
    """A dataset of two files and its index directory of two segments (a build, a refresh)."""
    root, target = tmp_path / "data", tmp_path / "idx"
    root.mkdir()
    _write(root / "a.parquet", 0)
    index.build_index(str(root), ["id"], target)
    _write(root / "b.parquet", 100)
    index.refresh_index(str(root), target)
    return root, target


def _named(target: Path) -> list[str]:
    return [s["name"] for s in json.loads((target / "latest.json").read_text())["segments"]]


def _segments(target: Path) -> list[str]:
    return sorted(p.name for p in target.glob("segment-*.puffin"))


@pytest.mark.parametrize("retain", [-1, -0.5, float("nan"), "60", True])
def test_a_retention_that_is_not_a_number_of_seconds_is_refused(
    two_segments: tuple[Path, Path], retain: object
) -> None:
    root, target = two_segments
    before = _segments(target)
    with pytest.raises(ValueError, match="retain_seconds must be"):
        index.compact_index(target, source=str(root), retain_seconds=retain)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retain_seconds must be"):
        # Even acknowledged: a negative retention is a mistake, not a choice.
        index.compact_index(target, retain_seconds=retain, no_concurrent_writers=True)  # type: ignore[arg-type]
    assert _segments(target) == before and len(_named(target)) == 2


def test_a_short_retention_needs_no_concurrent_writers(two_segments: tuple[Path, Path]) -> None:
    root, target = two_segments
    # A concurrent refresh's segment, written, its pointer not yet committed: a fresh file no
    # pointer names.
    pending = target / "segment-0123456789abcdef0123456789abcdef.puffin"
    shutil.copyfile(target / _named(target)[1], pending)
    for retain in (0, 59.9):
        with pytest.raises(ValueError, match=r"below 60.*no_concurrent_writers=True"):
            index.compact_index(target, source=str(root), retain_seconds=retain)
    assert len(_named(target)) == 2 and pending.exists()

    old = set(_named(target))
    safe = index.compact_index(target, source=str(root), retain_seconds=60)
    assert safe.removed == [] and pending.exists()  # the pending segment survives

    merged = index.compact_index(target, retain_seconds=0, no_concurrent_writers=True)
    # Acknowledged: every segment no pointer names is removed at once (the pending one too,
    # which is why it needs the acknowledgement).
    assert not pending.exists()
    assert _segments(target) == _named(target) and len(_named(target)) == 1
    removed = {Path(p).name for p in merged.removed}
    assert {pending.name, *old} <= removed and set(_named(target)).isdisjoint(removed)
    found = index.lookup(str(root), "id", [5, 150], index=target)
    assert sorted(p.rsplit("/", 1)[-1] for p in found.files) == ["a.parquet", "b.parquet"]


def test_a_delta_tables_compaction_checks_it_too(tmp_path: Path) -> None:
    table = tmp_path / "t"
    delta_tables.write(str(table), delta_tables.rows(0, 100))
    pbd.build_index(str(table), ["id"])
    with pytest.raises(ValueError, match="0 or more"):
        pbd.compact_index(str(table), retain_seconds=-10)
    with pytest.raises(ValueError, match="below 60"):
        pbd.compact_index(str(table), retain_seconds=1)
    assert pbd.compact_index(str(table), retain_seconds=1, no_concurrent_writers=True)


def test_a_lookup_of_an_index_that_names_a_missing_segment_is_a_located_error(
    two_segments: tuple[Path, Path], capsys: Capture
) -> None:
    root, target = two_segments
    gone = target / _named(target)[1]
    gone.unlink()  # as a compaction with too short a retention would have, or by hand
    with pytest.raises(FileNotFoundError, match=r"segment .* is missing") as caught:
        index.lookup(str(root), "id", [150], index=target)
    assert caught.value.filename == str(gone) and str(gone) in str(caught.value)
    with (
        pytest.raises(FileNotFoundError, match="build the index again"),
        index.BloomIndex(target) as idx,
    ):
        idx.lookup("id", [150])

    status = main(["index", "lookup", str(root), "--index", str(target), "--column", "id", "150"])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err.startswith("parquet-bloom: error: ") and err.count("\n") == 1, err
    assert "is missing" in err and gone.name in err


def test_the_command_refuses_a_negative_or_unacknowledged_short_retention(
    two_segments: tuple[Path, Path], capsys: Capture
) -> None:
    root, target = two_segments
    argv = ["index", "compact", str(root), "--index", str(target), "--retain-seconds"]
    for retain, fragment in (("-5", "must be 0 or more"), ("0", "--no-concurrent-writers")):
        status = main([*argv, retain])
        out, err = capsys.readouterr()
        assert status == 2 and out == "", err
        assert err.startswith("parquet-bloom: error: --retain-seconds ") or (
            "--retain-seconds must be" in err
        ), err
        assert fragment in err and err.count("\n") == 1, err
    named = set(_named(target))
    assert len(named) == 2
    status = main([*argv, "0", "--no-concurrent-writers", "--json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    removed = {Path(p).name for p in json.loads(out)["removed"]}
    assert named <= removed and _segments(target) == _named(target)

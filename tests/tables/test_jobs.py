"""The table rewrite's shared stages (parquet_bloom._tables): new names, options checked once,
jobs run and failures returned, new files deleted; and the marker rule on plain directories
(real tables' markers are tested in test_delta.py and test_iceberg.py)."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from parquet_bloom import BloomFilterReader
from parquet_bloom._tables.jobs import (
    FilterOptions,
    JobOutcome,
    RewriteJob,
    delete_files,
    new_file_path,
    run_job,
    run_jobs,
)
from parquet_bloom._tables.markers import find_table

TAG = r"\.bloom-[0-9a-f]{12}\.parquet"


def test_a_new_name_sits_beside_the_old_and_replaces_an_earlier_tag() -> None:
    first = new_file_path("s3://b/t/year=2024/part-00000-abc.c000.snappy.parquet")
    assert re.fullmatch(r"s3://b/t/year=2024/part-00000-abc\.c000\.snappy" + TAG, first)
    second = new_file_path(first)
    assert re.fullmatch(r"s3://b/t/year=2024/part-00000-abc\.c000\.snappy" + TAG, second)
    assert second != first
    assert re.fullmatch(r"data" + TAG, new_file_path("data"))  # no directory, no suffix


def test_options_are_checked_once_and_pickle_as_values() -> None:
    options = FilterOptions(columns=["a", "b"], fpp=0.05)
    assert options.columns == ("a", "b")
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(ValueError, match="nothing to do"):
        FilterOptions()
    with pytest.raises(ValueError):
        FilterOptions(columns=["a"], fpp=1.5)
    with pytest.raises(TypeError, match="remove"):
        FilterOptions(remove="a")


def _file(path: Path, n: int = 1000) -> Path:
    pq.write_table(pa.table({"id": np.arange(n), "s": [f"k{i}" for i in range(n)]}), path)
    return path


def test_jobs_run_in_order_and_a_failure_is_returned_without_a_file(tmp_path: Path) -> None:
    good = _file(tmp_path / "a.parquet")
    bad = tmp_path / "b.parquet"
    bad.write_bytes(b"PAR1 not parquet at all PAR1")
    jobs = [
        RewriteJob(p.name, new_file_path(p.name), str(p), new_file_path(str(p)))
        for p in (good, bad, good)
    ]
    seen: list[JobOutcome] = []
    outcomes = run_jobs(jobs, FilterOptions(columns=["id"]), max_workers=2, progress=seen.append)
    assert [o.job for o in outcomes] == jobs
    assert [o.ok for o in outcomes] == [True, False, True]
    assert len(seen) == 3
    assert outcomes[1].error is not None and "CorruptFileError" in outcomes[1].error
    assert not Path(jobs[1].target).exists()
    for outcome in (outcomes[0], outcomes[2]):
        target = Path(outcome.job.target)
        assert outcome.size == target.stat().st_size
        with BloomFilterReader(target) as reader:
            assert reader.row_groups_might_contain("id", [123]) == [0]
            assert reader.filter(0, "s") is None
    assert pickle.loads(pickle.dumps(outcomes[0])).size == outcomes[0].size
    assert run_job(jobs[0], FilterOptions(columns=["nope"])).error is not None


def test_each_directory_is_fsynced_once_after_the_jobs_and_a_failure_fails_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The renames of a table's new files are made durable by one fsync of each directory they
    # went to, once every job is done, instead of one per file; a file whose directory cannot
    # be fsynced is not durable: deleted, and returned failed. run_job alone syncs its own.
    from parquet_bloom._io import sink

    parts = [tmp_path / "p=1", tmp_path / "p=2"]
    sources = []
    for part in parts:
        part.mkdir()
        sources += [_file(part / f"{i}.parquet", 100) for i in range(3)]
    jobs = [RewriteJob(p.name, "new", str(p), new_file_path(str(p))) for p in sources]
    synced: list[str] = []
    real_fsync_directory = sink._fsync_directory

    def recording(directory: str) -> None:
        synced.append(directory)
        if directory == str(parts[1]):
            raise OSError(5, "Input/output error (simulated)")
        real_fsync_directory(directory)

    monkeypatch.setattr(sink, "_fsync_directory", recording)
    outcomes = run_jobs(jobs, FilterOptions(columns=["id"]), max_workers=3)
    assert sorted(synced) == sorted(map(str, parts))
    assert [o.ok for o in outcomes] == [True] * 3 + [False] * 3
    assert all("simulated" in (o.error or "") for o in outcomes[3:])
    assert [Path(j.target).exists() for j in jobs] == [True] * 3 + [False] * 3
    synced.clear()
    assert run_job(jobs[0], FilterOptions(columns=["s"])).ok
    assert synced == [str(parts[0])]


def test_an_interrupted_run_leaves_none_of_the_new_files(tmp_path: Path) -> None:
    # Ctrl-C while the files are rewritten (here: the progress callback raising it after the
    # first file): no further file is started, and every new file already written is deleted.
    sources = [_file(tmp_path / f"{i}.parquet", 100) for i in range(8)]
    jobs = [RewriteJob(p.name, "new", str(p), new_file_path(str(p))) for p in sources]

    def interrupt(outcome: JobOutcome) -> None:
        assert Path(outcome.job.target).exists()
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_jobs(jobs, FilterOptions(columns=["id"]), max_workers=2, progress=interrupt)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in sources)


def test_a_job_in_place_replaces_its_source_and_refuses_a_tables_file(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    src = _file(tmp_path / "plain" / "a.parquet")
    job = RewriteJob(src.name, src.name, str(src), str(src))
    outcome = run_job(job, FilterOptions(columns=["id"]), in_place=True)
    assert outcome.ok and outcome.size == src.stat().st_size
    with BloomFilterReader(src) as reader:
        assert reader.row_groups_might_contain("id", [123]) == [0]
    assert sorted(p.name for p in src.parent.iterdir()) == ["a.parquet"]
    table = tmp_path / "table"
    (table / "_delta_log").mkdir(parents=True)
    data = _file(table / "part-0.parquet")
    before = data.read_bytes()
    refused = run_job(
        RewriteJob(data.name, data.name, str(data), str(data)),
        FilterOptions(columns=["id"]),
        in_place=True,
    )
    assert refused.error is not None and "TableFileError" in refused.error
    assert data.read_bytes() == before


def test_deleting_new_files_reports_only_what_could_not_go(tmp_path: Path) -> None:
    present = _file(tmp_path / "x.parquet", 10)
    locked = tmp_path / "locked"
    locked.mkdir()
    stuck = _file(locked / "y.parquet", 10)
    locked.chmod(0o500)
    try:
        left = delete_files([str(present), str(tmp_path / "gone.parquet"), str(stuck)])
        expected = [] if stuck.exists() is False else [str(stuck)]
        assert left == expected
    finally:
        locked.chmod(0o700)
    assert not present.exists()


@pytest.mark.parametrize(
    ("layout", "format_"),
    [
        (["_delta_log/"], "delta"),
        ([".hoodie/"], "hudi"),
        (["snapshot/", "schema/"], "paimon"),
        (["metadata/v1.metadata.json"], "iceberg"),
    ],
)
def test_each_marker_names_its_table_from_any_depth(
    tmp_path: Path, layout: list[str], format_: str
) -> None:
    root = tmp_path / "table"
    for entry in layout:
        target = root / entry
        if entry.endswith("/"):
            target.mkdir(parents=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("{}")
    data = _file(_mkdir(root / "a=1" / "b=2") / "part.parquet", 10)
    for filesystem, path in ((None, str(data)), (pafs.LocalFileSystem(), str(data))):
        found = find_table(path, filesystem)
        assert found is not None
        assert (found.format, found.root) == (format_, str(root))
        assert found.format in found.refusal(path).lower().replace(" lake", "")


def test_lookalikes_are_not_tables(tmp_path: Path) -> None:
    root = tmp_path / "t"
    (root / "snapshot").mkdir(parents=True)  # Paimon needs schema/ beside it
    (root / "metadata").mkdir()
    (root / "metadata" / "notes.json").write_text("{}")  # Iceberg needs *.metadata.json
    (root / "_delta_log").write_text("a file, not a directory")
    data = _file(root / "part.parquet", 10)
    assert find_table(str(data)) is None


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path

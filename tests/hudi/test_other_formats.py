"""Base files that are not Parquet (Lance since Hudi 1.1, HFile, ORC) are not corrupt files: the
key lookup keeps them as candidates for every key (nothing here reads their filters), never opens
them, and counts them in its result; ``probe --hudi-key`` on a table's directory does the same.

No Hudi writer runs here (and none writes Lance but Hudi 1.1's Spark engine), so the table is
the real v6 copy-on-write table of ../shared/fixtures/hudi (written by Hudi 0.14), copied, with
one more completed commit added to its timeline as Hudi records one: ``<instant>.commit.requested``
(empty), ``<instant>.inflight`` and ``<instant>.commit``, the commit's JSON
``partitionToWriteStats`` (the previous commit's, as a template) naming the two base files it
wrote, each the first of a new file group, named as ``FSUtils.makeBaseFileName`` names base files
(``<fileId>_<writeToken>_<instant><extension>``): one ``.lance``, one ``.hfile``. Their bytes are
not Lance or HFile (neither can be written here): they are a Parquet file whose Hudi filter holds
none of the keys looked up, so a lookup that opened them would prune them, and the lookup must
not. hudi-rs, the table's reader, lists a base file of a completed instant whatever its format
(without the commit it lists neither).
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from parquet_bloom import hudi
from parquet_bloom.cli import main

V6 = "sample_table__cow__v6_nonpartitioned"
INSTANT = "20240418173552000"  # after the table's last commit, 20240418173551906
OTHER = {
    ".lance": "f1a2b3c4-0000-4000-8000-000000000001-0",
    ".hfile": "f1a2b3c4-0000-4000-8000-000000000002-0",
}


def _decoy(path: Path) -> int:
    """A Parquet file whose Hudi filter and key range hold only ``zzz-decoy``."""
    table = pa.table({"_hoodie_record_key": ["zzz-decoy"], "v": [0]})
    decoy = hudi.build_bloom_filter(["zzz-decoy"])
    pq.write_table(table.replace_schema_metadata(decoy.footer_metadata()), path)
    return path.stat().st_size


def _add_commit(root: Path) -> dict[str, str]:
    """Add a completed commit writing a ``.lance`` and an ``.hfile`` base file; their paths."""
    timeline = root / ".hoodie"
    last = json.loads((timeline / "20240418173551906.commit").read_text())
    template = last["partitionToWriteStats"][""][0]
    stats, written = [], {}
    for extension, file_id in OTHER.items():
        name = f"{file_id}_0-1-1_{INSTANT}{extension}"
        size = _decoy(root / name)
        stat = copy.deepcopy(template)
        stat.update(
            fileId=file_id,
            path=name,
            prevCommit="null",
            numWrites=1,
            numUpdateWrites=0,
            numInserts=1,
            totalWriteBytes=size,
            fileSizeInBytes=size,
        )
        stats.append(stat)
        written[extension] = str(root / name)
    commit = {**last, "partitionToWriteStats": {"": stats}, "operationType": "INSERT"}
    (timeline / f"{INSTANT}.commit.requested").write_bytes(b"")
    (timeline / f"{INSTANT}.inflight").write_text(json.dumps(commit, indent=2))
    (timeline / f"{INSTANT}.commit").write_text(json.dumps(commit, indent=2))
    return written


@pytest.fixture
def mixed_table(hudi_tables: dict[str, Path], tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "v6_mixed"
    shutil.copytree(hudi_tables[V6], root)
    return root, _add_commit(root)


def test_the_format_is_the_extension_hudi_gives() -> None:
    from parquet_bloom._hudi.table import base_file_format

    assert base_file_format("t/p/a_1-0-1_2024.parquet") == "PARQUET"
    assert base_file_format("s3://b/t/a_1-0-1_2024.lance") == "LANCE"
    assert base_file_format("a_1-0-1_2024.hfile") == "HFILE"
    assert base_file_format("a_1-0-1_2024.orc") == "ORC"
    assert base_file_format("a.LANCE") is None  # Hudi compares extensions exactly
    assert base_file_format("dir.lance/a_1-0-1_2024") is None
    assert base_file_format(".a_2024.log.1_0-1-1") is None  # a log file is not a base file


def test_files_for_keys_keeps_files_that_are_not_parquet(
    hudi_tables: dict[str, Path], mixed_table: tuple[Path, dict[str, str]]
) -> None:
    root, other = mixed_table
    original = hudi.lookup_keys(str(hudi_tables[V6]), ["1", "2", "no-such-key"])
    found = hudi.lookup_keys(str(root), ["1", "2", "no-such-key"])
    others = sorted(other.values())
    assert len(found.base_files) == len(original.base_files) + 2
    assert found.files_not_parquet == {other[".lance"]: "LANCE", other[".hfile"]: "HFILE"}
    for key, paths in original.files.items():
        parquet = [str(root / Path(p).name) for p in paths]
        assert sorted(found.files[key]) == sorted(parquet + others), key
    assert sorted(found.files["no-such-key"]) == others
    # Never opened: the reads are the Parquet files', as in the table without them.
    assert (found.requests, found.bytes_read) == (original.requests, original.bytes_read)
    assert found.files_without_filter == []
    assert found.pairs == original.pairs + 2 * 3
    text = str(found)
    assert "2 base files not Parquet (1 HFILE, 1 LANCE)" in text
    assert "candidates for every key" in text and "no filter here to consult" in text
    assert sorted(hudi.files_for_keys(str(root), ["no-such-key"])["no-such-key"]) == others
    confirmed = hudi.lookup_keys(str(root), ["1", "no-such-key"], confirm=True)
    assert sorted(confirmed.files["no-such-key"]) == others  # not opened to confirm either
    assert confirmed.files_not_parquet == found.files_not_parquet


def test_probe_keeps_files_that_are_not_parquet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = [f"rec-{i:03d}" for i in range(20)]
    table = pa.table({"_hoodie_record_key": keys, "v": list(range(len(keys)))})
    built = hudi.build_bloom_filter(keys)
    pq.write_table(table.replace_schema_metadata(built.footer_metadata()), tmp_path / "a.parquet")
    orc.write_table(table, tmp_path / "b_0-1-1_2024.orc")  # a real ORC file
    (tmp_path / "c_0-1-1_2024.lance").write_bytes(b"not parquet")
    status = main(["probe", str(tmp_path), "--hudi-key", "rec-001", "nope"])
    out = capsys.readouterr().out
    assert status == 0, out
    rows = [line.split() for line in out.splitlines()]
    for name in ("b_0-1-1_2024.orc", "c_0-1-1_2024.lance"):
        mine = [r for r in rows if r and r[0].endswith(name)]
        assert len(mine) == 2 and all("might contain" in " ".join(r) for r in mine), out
        assert all("not Parquet" in " ".join(r) for r in mine), out
    excluded = [r for r in rows if r and r[0].endswith("a.parquet") and "nope" in r]
    assert excluded and "excluded" in " ".join(excluded[0])
    assert "2 files are not Parquet" in out
    status = main(["probe", "--json", str(tmp_path), "--hudi-key", "nope"])
    document = json.loads(capsys.readouterr().out)
    entries = {Path(e["path"]).name: e for e in document["files"]}
    assert entries["c_0-1-1_2024.lance"]["not_parquet"] == "LANCE"
    assert entries["b_0-1-1_2024.orc"]["not_parquet"] == "ORC"
    assert entries["c_0-1-1_2024.lance"]["keys"][0]["result"] == "might contain"
    assert "not_parquet" not in entries["a.parquet"]
    assert status == 0 and document["might_contain"] is True
    assert document["files_not_parquet"] == 2

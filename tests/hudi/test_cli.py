"""The command line on Hudi base files: inspect and check show the record-key filter, probe
--hudi-key probes it; the Parquet commands are unchanged around them."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom import hudi
from parquet_bloom.cli import main
from tests.hudi.conftest import base_files_on_disk

KEYS = [f"rec-{i:03d}" for i in range(50)]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A good Hudi-like base file, one whose filter lacks keys, and a plain Parquet file with
    a split-block filter on its key column."""
    table = pa.table({"_hoodie_record_key": KEYS, "v": list(range(len(KEYS)))})
    good = hudi.build_bloom_filter(KEYS)
    short = hudi.build_bloom_filter(KEYS[:10])
    paths = {"good": tmp_path / "good.parquet", "short": tmp_path / "short.parquet"}
    pq.write_table(table.replace_schema_metadata(good.footer_metadata()), paths["good"])
    pq.write_table(table.replace_schema_metadata(short.footer_metadata()), paths["short"])
    paths["plain"] = tmp_path / "plain.parquet"
    pq.write_table(table, paths["plain"], bloom_filter_options={"_hoodie_record_key": True})
    return paths


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_inspect_shows_the_filter(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _run(capsys, "inspect", str(files["good"]), str(files["plain"]))
    assert status == 0
    head, _, hudi_part = out.partition("Hudi record-key filters")
    assert "1 of 2 column chunks with a Bloom filter" in head  # the plain file's, as before
    lines = [line for line in hudi_part.splitlines() if "good.parquet" in line]
    assert len(lines) == 1 and "DYNAMIC_V0" in lines[0] and "rec-000 .. rec-049" in lines[0]
    assert "plain.parquet" not in hudi_part
    status, out, _ = _run(capsys, "inspect", "--json", str(files["good"]), str(files["plain"]))
    document = json.loads(out)
    described = document["files"][0]["hudi"]
    expected = hudi.read_bloom_filter(files["good"])
    assert expected is not None and described == expected.describe()
    assert described["keys_added"] == len(KEYS) and round(described["estimated_keys"]) == 50
    assert "hudi" not in document["files"][1]


def test_check_checks_the_filter_against_the_keys(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _run(capsys, "check", str(files["good"]))
    assert status == 0 and "50 record keys, 0 missing, rebuilt byte for byte: yes" in out
    status, out, _ = _run(capsys, "check", str(files["short"]))
    assert status == 1
    assert "VIOLATION [false-negative]" in out and "VIOLATION [range]" in out
    status, out, _ = _run(capsys, "check", "--json", str(files["short"]), str(files["good"]))
    document = json.loads(out)
    assert status == 1 and document["ok"] is False
    assert document["files"][0]["hudi"]["missing"] >= 35
    assert document["files"][1]["hudi"]["ok"] is True


def test_probe_hudi_keys(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    good, plain = str(files["good"]), str(files["plain"])
    status, out, _ = _run(capsys, "probe", good, "--hudi-key", "rec-007", "zzz")
    assert status == 0
    assert "in the filter" in out and "outside the key range [rec-000, rec-049]" in out
    status, out, _ = _run(capsys, "probe", good, "--hudi-key", "rec-0071")
    assert status == 1 and "not in the filter" in out  # inside the range, not in the filter
    status, out, _ = _run(capsys, "probe", "--json", good, plain, "--hudi-key", "rec-0071")
    document = json.loads(out)
    assert status == 0 and document["might_contain"] is True  # the plain file has no filter
    assert document["files"][1]["keys"][0]["reason"] == "no Hudi filter"


def test_probe_arguments(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    good = str(files["good"])
    status, _, err = _run(capsys, "probe", good)
    assert status == 2 and "--column C VALUE... or --hudi-key KEY..." in err
    status, _, err = _run(capsys, "probe", good, "--column", "v", "1", "--hudi-key", "rec-001")
    assert status == 2 and "not both" in err
    status, out, _ = _run(
        capsys, "probe", str(files["plain"]), "--column", "_hoodie_record_key", "rec-001"
    )
    assert status == 0 and "in the filter" in out  # the Parquet probe, as before
    status, _, err = _run(
        capsys, "probe", str(files["good"].parent / "none.parquet"), "--hudi-key", "a"
    )
    assert status == 2 and "none.parquet" in err


def _variants(tmp_path: Path) -> list[Path]:
    """Base files the check sees differently: no key column, a null key, a SIMPLE filter with
    no key range, a filter that does not decode."""
    paths = []
    keyless = pa.table({"v": list(range(len(KEYS)))})
    meta = hudi.build_bloom_filter(KEYS).footer_metadata()
    paths.append(tmp_path / "keyless.parquet")
    pq.write_table(keyless.replace_schema_metadata(meta), paths[-1])
    nulls = pa.table({"_hoodie_record_key": [*KEYS[:-1], None], "v": list(range(len(KEYS)))})
    paths.append(tmp_path / "nulls.parquet")
    pq.write_table(nulls.replace_schema_metadata(meta), paths[-1])
    simple = hudi.build_bloom_filter(KEYS, type="SIMPLE", num_entries=100, fpp=0.01)
    simple.min_record_key = simple.max_record_key = None
    table = pa.table({"_hoodie_record_key": KEYS, "v": list(range(len(KEYS)))})
    paths.append(tmp_path / "simple.parquet")
    pq.write_table(table.replace_schema_metadata(simple.footer_metadata()), paths[-1])
    broken = meta | {hudi.FOOTER_KEY: meta[hudi.FOOTER_KEY][:100]}
    paths.append(tmp_path / "broken.parquet")
    pq.write_table(table.replace_schema_metadata(broken), paths[-1])
    return paths


def test_check_finds_what_hudi_check_file_finds(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The command checks from the footer the Parquet check read; the result is the library's.
    paths = [files["good"], files["short"], files["plain"], *_variants(tmp_path)]
    status, out, _ = _run(capsys, "check", "--json", *map(str, paths))
    assert status == 1
    entries = {entry["path"]: entry for entry in json.loads(out)["files"]}
    for path in paths:
        expected = hudi.check_file(path)
        if expected.filter is None and expected.ok:
            assert "hudi" not in entries[str(path)], path  # the plain file, as before
        else:
            assert entries[str(path)]["hudi"] == expected.to_dict(), path
    broken = entries[str(tmp_path / "broken.parquet")]["hudi"]
    assert broken["violations"][0].startswith("filter: the record-key filter cannot be read")
    status, out, _ = _run(capsys, "check", str(tmp_path / "broken.parquet"))
    assert status == 1 and "VIOLATION [filter]" in out
    status, out, _ = _run(capsys, "inspect", str(tmp_path / "broken.parquet"))
    assert status == 0 and "broken.parquet  unreadable: " in out


def test_check_reports_record_keys_it_cannot_read(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A key column whose pages do not decode: a violation of the file's Hudi check, the
    # Parquet check's report kept (the file has no split-block filter).
    data = bytearray(files["good"].read_bytes())
    first_page = pq.ParquetFile(files["good"]).metadata.row_group(0).column(0).data_page_offset
    data[first_page : first_page + 16] = b"\xff" * 16
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(data)
    status, out, _ = _run(capsys, "check", "--json", str(corrupt))
    assert status == 1
    (entry,) = json.loads(out)["files"]
    assert entry["ok"] is True and entry["hudi"]["ok"] is False
    assert entry["hudi"]["violations"][0].startswith("keys: the record keys cannot be read")
    assert entry["hudi"]["filter"]["type"] == "DYNAMIC_V0"


def test_probe_hudi_keys_with_stats(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    good, plain = str(files["good"]), str(files["plain"])
    status, out, _ = _run(capsys, "probe", "--json", "--stats", good, plain, "--hudi-key", "a")
    document = json.loads(out)
    assert status == 0 and document["stats"]["files"] == 2
    assert document["stats"]["requests"] == sum(f["requests"] for f in document["files"])
    status, out, _ = _run(capsys, "probe", "--stats", good, plain, "--hudi-key", "a")
    assert status == 0
    lines = out.splitlines()
    assert lines[-5].split() == ["file", "requests", "bytes", "read"]
    assert lines[-1].startswith("total (2 files)")


def test_real_base_files(hudi_tables: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # Every base file of the fixture tables: inspect describes the filter read_bloom_filter
    # reads, check finds what check_file finds.
    paths = [p for root in hudi_tables.values() for p in base_files_on_disk(root)]
    status, out, err = _run(capsys, "inspect", "--json", *map(str, paths))
    assert status == 0, err
    described = {f["path"]: f["hudi"] for f in json.loads(out)["files"]}
    for path in paths:
        found = hudi.read_bloom_filter(path)
        assert found is not None and described[str(path)] == found.describe()
    status, out, err = _run(capsys, "check", "--json", *map(str, paths))
    assert status == 0, err
    checked = {f["path"]: f["hudi"] for f in json.loads(out)["files"]}
    assert checked == {str(p): hudi.check_file(p).to_dict() for p in paths}

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

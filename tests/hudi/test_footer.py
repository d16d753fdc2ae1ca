"""Where Hudi keeps its filter: the footer's key-value metadata, read once through the IO layer
(the current key, the pre-Apache one, the type code or its absence); and the check of a file's
filter against its own keys, on files written here with pyarrow to be wrong in known ways."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom import hudi
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError


def _write(path: Path, keys: list[str], metadata: dict[str, str]) -> Path:
    table = pa.table({"_hoodie_record_key": keys, "value": list(range(len(keys)))})
    table = table.replace_schema_metadata(metadata)
    pq.write_table(table, path)
    return path


KEYS = [f"id-{i:04d}" for i in range(300)]


def test_the_legacy_key_and_an_absent_type_code_mean_simple(tmp_path: Path) -> None:
    built = hudi.build_bloom_filter(KEYS, "SIMPLE", 300, 1e-4)
    meta = {
        hudi.LEGACY_FOOTER_KEY: built.to_footer_value(),
        hudi.MIN_RECORD_KEY_KEY: KEYS[0],
        hudi.MAX_RECORD_KEY_KEY: KEYS[-1],
    }
    path = _write(tmp_path / "old.parquet", KEYS, meta)
    f = hudi.read_bloom_filter(path)
    assert f is not None and f.type == "SIMPLE" and f == built
    assert (f.min_record_key, f.max_record_key) == (KEYS[0], KEYS[-1])
    report = hudi.check_file(path)
    assert report.ok and report.exact and report.num_keys == len(KEYS) and report.missing == 0
    assert report.filter is not None and report.filter["type"] == "SIMPLE"


def test_the_current_key_wins_over_the_legacy_one(tmp_path: Path) -> None:
    new = hudi.build_bloom_filter(KEYS)
    old = hudi.build_bloom_filter(KEYS[:1], "SIMPLE")
    meta = {**new.footer_metadata(), hudi.LEGACY_FOOTER_KEY: old.to_footer_value()}
    f = hudi.read_bloom_filter(_write(tmp_path / "both.parquet", KEYS, meta))
    assert f == new and f is not None and f.type == "DYNAMIC_V0"
    assert hudi.read_footer_metadata(tmp_path / "both.parquet") == meta


def test_a_file_without_a_filter(tmp_path: Path) -> None:
    path = _write(tmp_path / "plain.parquet", KEYS, {"other": "x"})
    assert hudi.read_bloom_filter(path) is None
    assert hudi.read_footer_metadata(path) == {}
    report = hudi.check_file(path)
    assert report.ok and report.filter is None and report.notes


def test_an_unreadable_filter_is_located(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.parquet", KEYS, {hudi.FOOTER_KEY: "AAAA!"})
    with pytest.raises(CorruptFileError) as caught:
        hudi.read_bloom_filter(path)
    assert caught.value.source == str(path)
    report = hudi.check_file(path)
    assert not report.ok and report.violations[0].startswith("filter:")
    jenkins = _write(tmp_path / "jenkins.parquet", KEYS, {hudi.FOOTER_KEY: "/////wAAAAMAAAAACAA="})
    with pytest.raises(UnsupportedFileError, match="Jenkins"):
        hudi.read_bloom_filter(jenkins)


def test_the_check_finds_false_negatives_and_keys_outside_the_range(tmp_path: Path) -> None:
    partial = hudi.build_bloom_filter(KEYS[:200], num_entries=300, fpp=1e-6)
    meta = {**partial.footer_metadata()}  # the range of the first 200 keys only
    path = _write(tmp_path / "short.parquet", KEYS, meta)
    report = hudi.check_file(path)
    assert not report.ok
    assert report.missing >= 90 and report.first_missing in KEYS[200:]
    assert report.outside_range == 100
    assert report.exact is False
    kinds = sorted(v.split(":")[0] for v in report.violations)
    assert kinds == ["false-negative", "range"]
    assert any("counts 200 keys" in n for n in report.notes)
    assert report.to_dict()["ok"] is False


def test_without_the_key_column_the_keys_are_not_checked(tmp_path: Path) -> None:
    f = hudi.build_bloom_filter(KEYS)
    path = tmp_path / "virtual.parquet"
    pq.write_table(pa.table({"id": KEYS}).replace_schema_metadata(f.footer_metadata()), path)
    report = hudi.check_file(path)
    assert report.ok and report.num_keys is None and report.exact is None
    assert any("_hoodie_record_key" in n for n in report.notes)

"""Hostile DYNAMIC_V0 counts: a filter whose ``nr`` (keys per row) or ``currentNbRecord`` no Hudi
writer can give is a CorruptFileError naming the file and the field's offset, through
``from_footer_value``, the reader and ``check_file`` (which reports it as a violation); and a
seeded sweep of mutants of a real base file's filter (written by Hudi, ../shared/fixtures/hudi)
either reads, and then answers and checks, or fails with one of the library's file errors."""

from __future__ import annotations

import base64
import random
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom import hudi
from parquet_bloom._hudi import codec
from parquet_bloom._hudi.check import check_keys
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError
from tests.hudi.conftest import base_files_on_disk

KEYS = [f"key-{i:03d}" for i in range(40)]
# Where DYNAMIC_V0's counts are: after the 13-byte filter header, int32 nr, currentNbRecord, rows.
NR_AT, CURRENT_AT, ROWS_AT = codec.HEADER_SIZE, codec.HEADER_SIZE + 4, codec.HEADER_SIZE + 8


def _dynamic() -> bytes:
    return hudi.build_bloom_filter(KEYS, num_entries=15, fpp=0.05, max_entries=40).to_bytes()


def _with(raw: bytes, at: int, value: int) -> bytes:
    return raw[:at] + struct.pack(">i", value) + raw[at + 4 :]


HOSTILE = [
    pytest.param(NR_AT, 0, "0 keys per row", id="nr=0"),
    pytest.param(NR_AT, -1, "-1 keys per row", id="nr=-1"),
    pytest.param(NR_AT, -(2**31), "-2147483648 keys per row", id="nr=min"),
    pytest.param(CURRENT_AT, -1, "-1 keys in its last row", id="current=-1"),
    pytest.param(CURRENT_AT, -(2**31), "-2147483648 keys in its last row", id="current=min"),
    pytest.param(ROWS_AT, 0, "0 rows", id="rows=0"),
    pytest.param(ROWS_AT, -5, "-5 rows", id="rows=-5"),
    pytest.param(ROWS_AT, 2**31 - 1, "rows", id="rows=max"),
    pytest.param(9, 0, "vector of 0 bits", id="bits=0"),
    pytest.param(9, -(2**31), "vector of -2147483648 bits", id="bits=min"),
    pytest.param(4, 0, "0 hash functions", id="hashes=0"),
    pytest.param(4, 2**31 - 1, "hash functions", id="hashes=max"),
]


@pytest.mark.parametrize(("at", "value", "match"), HOSTILE[:5])  # (the others: test_codec)
def test_a_count_out_of_range_is_a_located_error(at: int, value: int, match: str) -> None:
    value64 = base64.b64encode(_with(_dynamic(), at, value)).decode()
    with pytest.raises(CorruptFileError, match=match) as caught:
        hudi.HudiBloomFilter.from_footer_value(value64, "DYNAMIC_V0", source="x.parquet")
    assert caught.value.source == "x.parquet"
    assert caught.value.offset is not None and at <= caught.value.offset <= at + 4


def _write(path: Path, raw: bytes) -> Path:
    table = pa.table({"_hoodie_record_key": KEYS, "value": list(range(len(KEYS)))})
    metadata = {
        hudi.FOOTER_KEY: base64.b64encode(raw).decode(),
        hudi.TYPE_CODE_KEY: "DYNAMIC_V0",
        hudi.MIN_RECORD_KEY_KEY: KEYS[0],
        hudi.MAX_RECORD_KEY_KEY: KEYS[-1],
    }
    pq.write_table(table.replace_schema_metadata(metadata), path)
    return path


@pytest.mark.parametrize(("at", "value", "match"), HOSTILE)
def test_through_the_reader_and_the_check(tmp_path: Path, at: int, value: int, match: str) -> None:
    path = _write(tmp_path / "hostile.parquet", _with(_dynamic(), at, value))
    with pytest.raises(CorruptFileError, match=match) as caught:
        hudi.read_bloom_filter(path)
    assert caught.value.source == str(path)
    assert str(path) in str(caught.value)
    report = hudi.check_file(path)  # a violation, not an exception
    assert not report.ok and report.path == str(path)
    (violation,) = report.violations
    assert violation.startswith("filter: the record-key filter cannot be read")
    assert match in violation and f"offset {caught.value.offset}" in violation


def _mutants(raw: bytes, count: int, seed: int) -> list[bytes]:
    """``count`` mutants of ``raw``: a count or header field set to an edge or random int32,
    a byte of the headers changed, a byte anywhere flipped, a truncation, bytes appended."""
    rng = random.Random(seed)
    fields = [0, 4, 9, NR_AT, CURRENT_AT, ROWS_AT, ROWS_AT + 4, ROWS_AT + 8, ROWS_AT + 13]
    edges = [0, 1, -1, 2, 2**31 - 1, -(2**31), 60_000, 100_000]
    head = ROWS_AT + 4 + codec.HEADER_SIZE
    found = []
    for _ in range(count):
        kind = rng.randrange(5)
        if kind == 0:
            value = rng.choice(edges) if rng.random() < 0.6 else rng.randint(-(2**31), 2**31 - 1)
            found.append(_with(raw, rng.choice(fields), value))
        elif kind == 1:
            at = rng.randrange(head)
            found.append(raw[:at] + bytes([rng.randrange(256)]) + raw[at + 1 :])
        elif kind == 2:
            at = rng.randrange(len(raw))
            found.append(raw[:at] + bytes([raw[at] ^ (1 << rng.randrange(8))]) + raw[at + 1 :])
        elif kind == 3:
            found.append(raw[: rng.randrange(len(raw))])
        else:
            found.append(raw + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))))
    return found


def test_a_seeded_sweep_of_a_real_filter(hudi_tables: dict[str, Path], tmp_path: Path) -> None:
    # First, the counts Hudi can write still read and check: nr of 1, a last row of 0 keys (an
    # empty filter), a count past nr (past the bound).
    for at, value in ((NR_AT, 1), (CURRENT_AT, 0), (CURRENT_AT, 2**31 - 1)):
        ok = _write(tmp_path / f"ok-{at}-{value}.parquet", _with(_dynamic(), at, value))
        f = hudi.read_bloom_filter(ok)
        assert f is not None and f.might_contain_many(KEYS).all()
        checked = hudi.check_file(ok)
        assert checked.filter is not None and not checked.violations, checked
    path = base_files_on_disk(hudi_tables["sample_table__cow__v9_txns_simple_meta"])[0]
    meta = hudi.read_footer_metadata(path)
    raw = codec.decode_base64(meta[hudi.FOOTER_KEY])
    keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0).to_pylist()
    read = refused = 0
    for i, mutant in enumerate(_mutants(raw, 300, seed=27)):
        name = f"mutant-{i}.parquet"
        try:
            f = hudi.HudiBloomFilter.from_bytes(mutant, meta[hudi.TYPE_CODE_KEY], source=name)
        except (CorruptFileError, UnsupportedFileError) as e:
            assert e.source == name and e.offset is not None, (i, e)
            refused += 1
            continue
        # What check_file does with a filter that reads: probe, describe, rebuild from the keys.
        f.might_contain_many(keys)
        f.describe()
        report = hudi.HudiCheckReport(name)
        check_keys(f, keys, report)
        read += 1
    assert read + refused == 300 and read > 50 and refused > 50


def test_the_command_line_check_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from parquet_bloom.cli import main

    path = _write(tmp_path / "nr0.parquet", _with(_dynamic(), NR_AT, 0))
    status = main(["check", str(path)])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "VIOLATION [filter] filter: the record-key filter cannot be read: " in out
    assert "0 keys per row (nr)" in out and f"(offset {NR_AT})" in out

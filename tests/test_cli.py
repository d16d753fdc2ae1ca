"""The parquet-bloom command, run through main() and once as a real process, on files written by
pyarrow, deltalake (arrow-rs) and DuckDB, and on broken and truncated files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import _audit as audit
from parquet_bloom import _format as fmt
from parquet_bloom import _logical as logical
from parquet_bloom import kernels
from parquet_bloom.cli import main
from tests import writers
from tests.writers import (
    NUM_ROW_GROUPS,
    chunk_hashes,
    nested_table,
    splice_filter,
    write_nested_pyarrow,
    zero_bitset,
)

Capture = pytest.CaptureFixture[str]


@pytest.fixture(scope="module")
def pyarrow_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nested_pyarrow(tmp_path_factory.mktemp("pyarrow") / "t.parquet")


@pytest.fixture(scope="module")
def duckdb_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return writers.write_duckdb(tmp_path_factory.mktemp("duckdb") / "t.parquet")


@pytest.fixture(scope="module")
def deltalake_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    table = nested_table().select(["int64", "small", "s", "date", "dec"])
    (path,) = writers.write_deltalake(tmp_path_factory.mktemp("delta"), table)
    return path


@pytest.fixture(scope="module")
def broken_file(pyarrow_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return zero_bitset(pyarrow_file, tmp_path_factory.mktemp("broken") / "zero.parquet", 1, "s")


@pytest.fixture(scope="module")
def truncated_file(pyarrow_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cut") / "cut.parquet"
    path.write_bytes(pyarrow_file.read_bytes()[:-1000])
    return path


def run(capsys: Capture, *argv: object) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_line_error(err: str) -> None:
    assert err.startswith("parquet-bloom: error: "), err
    assert err.count("\n") == 1 and "Traceback" not in err, err


# -- inspect -------------------------------------------------------------------------------------


def test_version_says_which_implementation_hashes(
    capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, _ = run(capsys, "--version")
    built = "compiled kernels" if kernels.compiled is not None else "numpy alone"
    assert (status, out) == (0, f"parquet-bloom {pb.__version__} ({built})\n")
    monkeypatch.setattr(kernels, "compiled", None)
    assert run(capsys, "--version")[1].endswith("(numpy alone)\n")


def test_inspect_table(capsys: Capture, pyarrow_file: Path) -> None:
    status, out, err = run(capsys, "inspect", pyarrow_file)
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == (
        f"{pyarrow_file}: 3 row groups, 6,000 rows, 36 of 39 column chunks with a Bloom filter"
    )
    assert lines[1].startswith("  written by parquet-cpp-arrow")
    assert lines[2].split() == [
        "rg", "column", "filter", "offset", "length", "location", "bytes", "set", "est.", "NDV",
        "fpp", "warnings",
    ]  # fmt: skip
    rows = lines[4:]
    assert len(rows) == 39
    report = audit.inspect_file(pyarrow_file)
    for row, chunk in zip(rows, report.chunks, strict=True):
        cells = row.split()
        assert cells[:3] == [str(chunk.row_group), chunk.column, "yes" if chunk.present else "no"]
        if chunk.present:
            assert cells[3:5] == [str(chunk.offset), str(chunk.length)]
            assert "before the footer, with the other filters" in row


def test_inspect_json_has_the_same_facts(
    capsys: Capture, pyarrow_file: Path, duckdb_file: Path
) -> None:
    status, out, _ = run(capsys, "inspect", "--json", pyarrow_file, duckdb_file)
    assert status == 0
    files = json.loads(out)["files"]
    assert files == [audit.inspect_file(p).to_dict() for p in (pyarrow_file, duckdb_file)]
    duckdb_chunks = [c for c in files[1]["chunks"] if c["present"]]
    assert duckdb_chunks and all(c["num_bytes"] >= 32 for c in duckdb_chunks)


def test_inspect_through_a_real_process(capsys: Capture, pyarrow_file: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "parquet_bloom", "inspect", str(pyarrow_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == ""
    _, out, _ = run(capsys, "inspect", pyarrow_file)
    assert done.stdout == out


def test_inspect_warns_in_the_table(capsys: Capture, tmp_path: Path, pyarrow_file: Path) -> None:
    tiny = pb.SplitBlockBloomFilter(32)
    tiny.insert_hashes(chunk_hashes(pyarrow_file, 0, "int64"))
    path = splice_filter(pyarrow_file, tmp_path / "tiny.parquet", 0, "int64", tiny)
    status, out, _ = run(capsys, "inspect", path)
    assert status == 0
    (row,) = [line for line in out.splitlines() if line.split()[:2] == ["0", "int64"]]
    assert "too small to be useful: 100% of bits set" in row


# -- probe ---------------------------------------------------------------------------------------


def expected_results(path: Path, column: str, values: list[object]) -> list[str]:
    """What each row group's filter says, straight from the reader and the encoding rules."""
    with pb.BloomFilterReader(path) as reader:
        leaf = {x.path: x for x in fmt.schema_leaves(reader.metadata)}[column]
        probe = logical.literal_probe(values, leaf)
        out = []
        for rg in range(reader.num_row_groups):
            f = reader.filter(rg, column)
            out.append("might contain" if f is None or probe.keeps(f) else "excluded")
    return out


def test_probe_a_present_value(capsys: Capture, pyarrow_file: Path) -> None:
    value = pq.ParquetFile(pyarrow_file).read_row_group(1, columns=["s"]).column(0)[0].as_py()
    status, out, err = run(capsys, "probe", pyarrow_file, "--column", "s", value)
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"s in ({value})"
    results = ["might contain" if "might contain" in line else "excluded" for line in lines[3:-1]]
    assert results == expected_results(pyarrow_file, "s", [value])
    assert results[1] == "might contain"
    assert lines[-1].endswith(f"of {NUM_ROW_GROUPS} row groups might contain a value")


def test_probe_absent_values_exit_1(capsys: Capture, pyarrow_file: Path, duckdb_file: Path) -> None:
    values = ["absent-1", "absent-2"]
    assert expected_results(pyarrow_file, "s", values) == ["excluded"] * NUM_ROW_GROUPS
    status, out, _ = run(capsys, "probe", pyarrow_file, "--column", "s", *values)
    assert status == 1
    assert out.count("excluded") == NUM_ROW_GROUPS
    assert out.splitlines()[-1] == f"0 of {NUM_ROW_GROUPS} row groups might contain a value"
    # DuckDB's int16 column holds 0..99: 1000 is in no row group.
    status, out, _ = run(capsys, "probe", "--json", duckdb_file, "--column", "int16", "1000")
    assert status == 1
    result = json.loads(out)
    assert result["might_contain"] is False
    assert [rg["result"] for rg in result["files"][0]["row_groups"]] == ["excluded"] * 3


@pytest.mark.parametrize(
    ("column", "text", "value"),
    [
        ("int16", "42", 42),  # INT16 stored as INT32: widened before hashing
        ("date", "2024-01-05", "2024-01-05"),
        ("ts", "2024-01-01T00:00:07", "2024-01-01 00:00:07"),
        ("decimal_9", "1.00", "1.00"),
        ("decimal_18", "2.000", "2.000"),
        ("float32", "2.5", 2.5),
        ("string", "v7", "v7"),
    ],
)
def test_probe_types_values_through_the_logical_type(
    capsys: Capture, duckdb_file: Path, column: str, text: str, value: object
) -> None:
    status, out, _ = run(capsys, "probe", "--json", duckdb_file, "--column", column, text)
    result = json.loads(out)
    (file,) = result["files"]
    got = [rg["result"] for rg in file["row_groups"]]
    with duckdb.connect() as con:
        query = f"select count(*) from '{duckdb_file}' where {column} = ?"
        present = con.execute(query, [value]).fetchall()[0]
    assert present is not None
    if present[0]:
        assert status == 0 and "might contain" in got  # never a false negative
    assert result["might_contain"] == (status == 0)
    assert file["values"] == [text]


def test_probe_keeps_nanoseconds(capsys: Capture, tmp_path: Path) -> None:
    # Python's fromisoformat drops digits beyond microseconds; the probe must not, or a stored
    # 00:00:00.000000001 would be looked for as 00:00:00 and its row group excluded.
    path = tmp_path / "ns.parquet"
    table = pa.table(
        {
            "ts": pa.array([1, 1_700_000_000_123_456_789], pa.timestamp("ns")),
            "ts_utc": pa.array([1_700_000_000_123_456_789] * 2, pa.timestamp("ns", tz="UTC")),
            "t": pa.array([86_399_999_999_999] * 2, pa.time64("ns")),
        }
    )
    options = {c: {"ndv": 10, "fpp": 0.01} for c in table.column_names}
    for int96 in (False, True):
        pq.write_table(
            table, path, bloom_filter_options=options, use_deprecated_int96_timestamps=int96
        )
        present = [
            ("ts", "1970-01-01T00:00:00.000000001"),
            ("ts", "2023-11-14T22:13:20.123456789"),
            ("ts_utc", "2023-11-14T23:13:20.1234567890+01:00"),
            ("t", "23:59:59.999999999"),
        ]
        for column, text in present:
            status, out, _ = run(capsys, "probe", path, "--column", column, text)
            assert status == 0, (int96, column, text, out)
        # One nanosecond off is another value (what truncation to microseconds looked for).
        absent = [("ts", "1970-01-01T00:00:00"), ("t", "23:59:59.999999")]
        for column, text in absent:
            status, out, _ = run(capsys, "probe", path, "--column", column, text)
            assert status == 1, (int96, column, text, out)
        status, _, err = run(
            capsys, "probe", path, "--column", "ts", "1970-01-01T00:00:00.0000000011"
        )
        assert status == 2 and "finer than nanoseconds" in err


def test_probe_reads_floats_as_the_column_stores_them(capsys: Capture, tmp_path: Path) -> None:
    # "0.1" on a FLOAT column means the FLOAT nearest 0.1, which a writer given 0.1 stores (and
    # DuckDB finds with f32 = 0.1); the double 0.1 is in no FLOAT column.
    path = tmp_path / "floats.parquet"
    table = pa.table(
        {
            "f32": pa.array([0.1, 1e30], pa.float32()),
            "f16": pa.array(np.array([0.1, 65504], np.float16), pa.float16()),
        }
    )
    pq.write_table(table, path, bloom_filter_options={"f32": True, "f16": True})
    with duckdb.connect() as con:
        assert con.execute(f"select count(*) from '{path}' where f32 = 0.1").fetchall() == [(1,)]
    for column, text in [("f32", "0.1"), ("f32", "1e30"), ("f16", "0.1"), ("f16", "65504")]:
        status, out, _ = run(capsys, "probe", path, "--column", column, text)
        assert status == 0, (column, text, out)
    # Beyond the type's range: no stored value, not the infinity it would round to.
    for column, text in [("f32", "1e39"), ("f16", "70000"), ("f32", "0.2")]:
        status, out, _ = run(capsys, "probe", path, "--column", column, text)
        assert status == 1, (column, text, out)


def test_probe_deltalake(capsys: Capture, deltalake_file: Path) -> None:
    day = pq.read_table(deltalake_file, columns=["date"]).column(0)[10].as_py()
    status, out, _ = run(capsys, "probe", deltalake_file, "--column", "date", day.isoformat())
    assert status == 0 and "in the filter" in out


def test_probe_bad_input(capsys: Capture, pyarrow_file: Path) -> None:
    status, out, err = run(capsys, "probe", pyarrow_file, "--column", "int64", "abc")
    assert status == 2 and out == ""
    assert_one_line_error(err)
    assert "cannot read 'abc' as INT64 for column 'int64'" in err
    status, _, err = run(capsys, "probe", pyarrow_file, "--column", "nope", "1")
    assert status == 2 and "no column 'nope'" in err
    assert_one_line_error(err)
    status, _, err = run(capsys, "probe", pyarrow_file, "--column", "int64")
    assert status == 2 and "needs values" in err
    assert_one_line_error(err)


# -- check ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["pyarrow_file", "deltalake_file", "duckdb_file"])
def test_check_ok(capsys: Capture, fixture: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(fixture)
    status, out, err = run(capsys, "check", path)
    assert status == 0 and err == ""
    report = audit.check_file(path)
    assert out.splitlines()[-1] == f"OK: {len(report.chunks)} filters checked, no violations"
    assert "VIOLATION" not in out


def test_check_a_broken_file(capsys: Capture, broken_file: Path) -> None:
    status, out, _ = run(capsys, "check", broken_file)
    assert status == 1
    (line,) = [x for x in out.splitlines() if "VIOLATION" in x]
    value = pq.ParquetFile(broken_file).read_row_group(1, columns=["s"]).column(0)[0].as_py()
    assert line.startswith(f"  VIOLATION [false-negative] {broken_file}, row group 1, column 's': ")
    assert repr(value) in line
    assert out.splitlines()[-1].startswith("FAILED: 1 violation (")
    status, out, _ = run(capsys, "check", "--json", broken_file)
    assert status == 1
    result = json.loads(out)
    assert result["ok"] is False
    (v,) = result["files"][0]["violations"]
    assert v == {
        "kind": "false-negative",
        "file": str(broken_file),
        "row_group": 1,
        "column": "s",
        "value": value,
        "message": audit.check_file(broken_file).violations[0].message,
    }
    # Only other columns: no violation.
    status, _, _ = run(capsys, "check", broken_file, "--column", "int64", "--column", "st")
    assert status == 0


def test_check_max_fpp(capsys: Capture, pyarrow_file: Path) -> None:
    status, out, _ = run(capsys, "check", pyarrow_file, "--column", "small", "--max-fpp", "1e-9")
    assert status == 1 and out.count("VIOLATION [fpp]") == NUM_ROW_GROUPS
    status, _, err = run(capsys, "check", pyarrow_file, "--max-fpp", "2")
    assert status == 2
    assert_one_line_error(err)


def test_check_json_has_the_same_facts(capsys: Capture, duckdb_file: Path) -> None:
    status, out, _ = run(capsys, "check", "--json", duckdb_file)
    assert status == 0
    result = json.loads(out)
    assert result["ok"] is True
    assert result["files"] == [audit.check_file(duckdb_file).to_dict()]
    assert all("duckdb" in c["matching_flavors"] for c in result["files"][0]["chunks"])


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect"],
        ["probe", "--column", "int64", "1"],
        ["check"],
        ["check", "--json"],
        ["inspect", "--json"],
    ],
)
def test_truncated_file_is_one_line_exit_2(
    capsys: Capture, truncated_file: Path, argv: list[str]
) -> None:
    command, *options = argv
    status, out, err = run(capsys, command, truncated_file, *options)
    assert status == 2
    assert_one_line_error(err)
    assert str(truncated_file) in err and "not a Parquet file" in err
    if "--json" in argv:
        (entry,) = json.loads(out)["files"]
        assert entry["path"] == str(truncated_file)
        # The line names the file once: the message does.
        assert err == f"parquet-bloom: error: {entry['error']}\n"


def test_truncated_file_through_a_real_process(truncated_file: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "parquet_bloom", "check", str(truncated_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert_one_line_error(done.stderr)


def test_other_bad_files(capsys: Capture, tmp_path: Path, pyarrow_file: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not parquet at all, but long enough to have a trailer\n")
    for path in (text, tmp_path / "missing.parquet", tmp_path):
        status, _, err = run(capsys, "inspect", path)
        assert status == 2, path
        assert_one_line_error(err)
    # A bad file among good ones: the good ones are still reported.
    status, out, err = run(capsys, "inspect", pyarrow_file, text)
    assert status == 2 and out.startswith(f"{pyarrow_file}: 3 row groups")
    assert_one_line_error(err)


def test_usage_errors(capsys: Capture, pyarrow_file: Path, tmp_path: Path) -> None:
    for argv in ([], ["frobnicate"], ["inspect"], ["check", pyarrow_file, "--max-fpp", "x"]):
        status, out, err = run(capsys, *argv)
        assert status == 2 and out == "", argv
        assert_one_line_error(err)
        assert "--help" in err
    status, out, _ = run(capsys, "--help")
    assert status == 0 and "inspect" in out and "probe" in out and "check" in out
    for command in ("add", "resize", "remove"):
        assert run(capsys, command, "--help")[0] == 0
    # Rewriting needs SRC and DST, files and a directory, or --in-place (checked before any
    # work).
    status, _, err = run(capsys, "remove", pyarrow_file, "--column", "s")
    assert status == 2 and "pass SRC and DST" in err and "--in-place" in err
    missing = tmp_path / "o.parquet"
    status, _, err = run(capsys, "remove", pyarrow_file, pyarrow_file, missing, "--column", "s")
    assert status == 2 and f"{missing} does not exist" in err and f"name it {missing}/" in err
    missing.write_bytes(b"")  # a file there: not a directory
    status, _, err = run(capsys, "remove", pyarrow_file, pyarrow_file, missing, "--column", "s")
    assert status == 2 and f"{missing} is not a directory" in err
    missing.unlink()
    assert list(tmp_path.iterdir()) == []
    status, _, err = run(
        capsys,
        "add",
        pyarrow_file,
        tmp_path / "o.parquet",
        "--column",
        "s",
        "--bytes",
        "64",
        "--fpp",
        "0.1",
    )
    assert status == 2 and "--bytes" in err


# -- progress ------------------------------------------------------------------------------------


def test_progress_only_when_asked_or_on_a_terminal(
    capsys: Capture, pyarrow_file: Path, duckdb_file: Path
) -> None:
    status, _, err = run(capsys, "check", "--json", pyarrow_file, duckdb_file)
    assert status == 0 and err == ""  # stderr is not a terminal under capsys
    status, out, err = run(capsys, "check", "--json", "--progress", pyarrow_file, duckdb_file)
    assert status == 0 and json.loads(out)["ok"] is True
    total = len(audit.check_file(duckdb_file).chunks)
    assert "\r[" in err and f"] 1/2 t.parquet (filter {total}/{total})" in err
    assert err.endswith("\r")  # the bar is cleared, leaving the terminal clean


# -- directories, URLs, storage options, --stats, a closed pipe --------------------------------


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, pyarrow_file: Path) -> Path:
    """A dataset as Spark leaves one: part files, and entries that are not data. (A
    ``_delta_log/`` would make it a Delta table, read as its live files: tests/test_cli_daily.)"""
    root = tmp_path_factory.mktemp("lake")
    data = pyarrow_file.read_bytes()
    for name in ("day=1/part-0.parquet", "day=2/part-0.parquet", "day=2/part-1.parquet"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    for name in ("_temporary/0.json", "_SUCCESS", "day=1/.part-0.parquet.crc", ".hoodie/x"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"not parquet")
    return root


def test_a_directory_or_glob_stands_for_its_parquet_files(lake: Path, capsys: Capture) -> None:
    for command in (["inspect"], ["check"], ["probe"]):
        probe = ["--column", "s", "x"] if command == ["probe"] else []
        assert main([*command, "--json", str(lake), *probe]) in (0, 1), command
        paths = [f["path"] for f in json.loads(capsys.readouterr().out)["files"]]
        assert paths == [
            str(lake / "day=1/part-0.parquet"),
            str(lake / "day=2/part-0.parquet"),
            str(lake / "day=2/part-1.parquet"),
        ], command
    assert main(["inspect", "--json", f"{lake}/day=2/"]) == 0
    assert len(json.loads(capsys.readouterr().out)["files"]) == 2
    assert main(["inspect", "--json", f"{lake}/*/part-0.parquet"]) == 0
    assert len(json.loads(capsys.readouterr().out)["files"]) == 2
    assert main(["inspect", f"{lake}/day=9*"]) == 2
    assert "no Parquet files under" in capsys.readouterr().err


def test_urls_with_storage_options_and_stats(pyarrow_file: Path, capsys: Capture) -> None:
    import fsspec

    memory = fsspec.filesystem("memory")
    memory.pipe("/cli-test/t/part-0.parquet", pyarrow_file.read_bytes())
    memory.pipe("/cli-test/t/_SUCCESS", b"")
    try:
        url = "memory://cli-test/t"  # no "/" at the end: opened as one object, then listed
        option = ["--storage-option", "skip_instance_cache=false"]
        assert main(["inspect", "--json", "--stats", *option, url]) == 0
        document = json.loads(capsys.readouterr().out)
        (entry,) = document["files"]
        assert entry["path"] == "memory:///cli-test/t/part-0.parquet"
        assert entry["requests"] >= 1 and entry["bytes_read"] > 0
        assert document["stats"] == {
            "files": 1,
            "requests": entry["requests"],
            "bytes_read": entry["bytes_read"],
        }
        assert main(["probe", "--stats", *option, url + "/", "--column", "s", "x"]) in (0, 1)
        text = capsys.readouterr().out
        assert "requests" in text and "total (1 files)" in text
        # Without --stats the output is as it was: no costs.
        assert main(["check", "--json", url + "/"]) in (0, 1)
        assert "requests" not in json.loads(capsys.readouterr().out)["files"][0]
    finally:
        memory.rm("/cli-test", recursive=True)
    assert main(["inspect", "--storage-option", "novalue", url]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err


def test_json_into_a_closed_pipe_ends_quietly(pyarrow_file: Path) -> None:
    # More output than a pipe holds, read 10 bytes of, then the pipe closed: as `| head -c 10`.
    command = [sys.executable, "-m", "parquet_bloom", "inspect", "--json"]
    process = subprocess.Popen(
        command + [str(pyarrow_file)] * 200, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.read(10) == b'{\n  "files'
    process.stdout.close()
    assert process.wait() == 141
    with process.stderr:
        assert process.stderr.read() == b""

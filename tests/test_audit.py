"""inspect_file and check_file on files written by pyarrow, deltalake (arrow-rs) and DuckDB, and on
the same files made wrong in the ways writers get them wrong."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import _audit as audit
from parquet_bloom import _format as fmt
from parquet_bloom import _sizing as sizing
from tests import writers
from tests.writers import (
    NESTED_FILTERED,
    NUM_ROW_GROUPS,
    ROWS,
    chunk_hashes,
    chunk_meta,
    leaf_values,
    splice_filter,
    write_nested_pyarrow,
    zero_bitset,
)


@pytest.fixture(scope="module")
def pyarrow_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nested_pyarrow(tmp_path_factory.mktemp("pyarrow") / "t.parquet")


@pytest.fixture(scope="module")
def deltalake_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    table = writers.nested_table().select(["int64", "small", "s", "ts", "date", "dec", "d", "st"])
    (path,) = writers.write_deltalake(tmp_path_factory.mktemp("delta"), table, fpp=0.05)
    return path


@pytest.fixture(scope="module")
def duckdb_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return writers.write_duckdb(tmp_path_factory.mktemp("duckdb") / "t.parquet")


# -- making files wrong ---------------------------------------------------------------------------


def mutate_chunk(src: Path, dst: Path, change: Callable[[Any, Any], None]) -> Path:
    """``src`` with its footer rewritten: ``change(row_groups, leaf_index_by_path)``."""

    def mutate(md: Any) -> None:
        leaves = {leaf.path: leaf.column_index for leaf in fmt.schema_leaves(md)}
        change(md.row_groups, leaves)

    return writers.rewrite_footer(src, dst, mutate)


# -- inspect ------------------------------------------------------------------------------------


def test_inspect_pyarrow(pyarrow_file: Path) -> None:
    report = audit.inspect_file(pyarrow_file)
    assert report.num_row_groups == NUM_ROW_GROUPS and report.num_rows == ROWS
    assert report.created_by and report.created_by.startswith("parquet-cpp-arrow")
    leaves = len(NESTED_FILTERED) + 1
    assert len(report.chunks) == NUM_ROW_GROUPS * leaves
    assert {c.column for c in report.filters} == set(NESTED_FILTERED)
    assert not [c for c in report.chunks if c.column == "nofilter" and c.present]
    with pb.BloomFilterReader(pyarrow_file) as reader:
        for c in report.filters:
            f = reader.filter(c.row_group, c.column)
            assert f is not None
            assert c.num_bytes == f.num_bytes
            assert c.fraction_set == f.fraction_set()
            assert c.fpp == f.fpp()
            assert c.estimated_ndv == f.estimate_ndv()
            meta = chunk_meta(pyarrow_file, c.row_group, c.column)
            assert (c.offset, c.length) == (meta.bloom_filter_offset, meta.bloom_filter_length)
            # Arrow C++ writes every filter after the last row group, together.
            assert c.location == "before the footer, with the other filters"
            assert c.warnings == () and c.error is None
    # The estimate is close to the truth: "s" has at most 1000 distinct values per row group.
    s0 = next(c for c in report.filters if c.column == "s" and c.row_group == 0)
    assert s0.estimated_ndv is not None and 800 < s0.estimated_ndv < 1100


def test_inspect_arrow_rs_writes_after_each_row_group(deltalake_file: Path) -> None:
    report = audit.inspect_file(deltalake_file)
    assert report.num_row_groups == NUM_ROW_GROUPS
    for c in report.filters:
        assert c.location == f"after row group {c.row_group}", c


def test_inspect_duckdb(duckdb_file: Path) -> None:
    report = audit.inspect_file(duckdb_file)
    assert report.created_by and "DuckDB" in report.created_by
    # DuckDB writes filters for dictionary-encoded chunks only, all just before the footer.
    assert {"int16", "date"} <= {c.column for c in report.filters}
    assert {c.location for c in report.filters} == {"before the footer, with the other filters"}
    assert any(not c.present for c in report.chunks)


def test_inspect_warns_of_oversized_and_useless_filters(pyarrow_file: Path, tmp_path: Path) -> None:
    # parquet-java without an NDV: 1 MiB for the ~300 values of "small".
    big = pb.SplitBlockBloomFilter(sizing.PARQUET_JAVA_DEFAULT_MAX_BYTES)
    big.insert_hashes(chunk_hashes(pyarrow_file, 0, "small"))
    path = splice_filter(pyarrow_file, tmp_path / "big.parquet", 0, "small", big)
    # A writer sized for 10 values: 32 bytes for ~2000 values, every bit set.
    tiny = pb.SplitBlockBloomFilter(32)
    tiny.insert_hashes(chunk_hashes(pyarrow_file, 1, "int64"))
    path = splice_filter(path, tmp_path / "both.parquet", 1, "int64", tiny)
    report = audit.inspect_file(path)
    chunks = {(c.row_group, c.column): c for c in report.chunks}
    (warning,) = chunks[(0, "small")].warnings
    assert warning.startswith("oversized: 1 MiB (parquet-java's size when no NDV is configured)")
    assert "about 300 distinct values" in warning
    (warning,) = chunks[(1, "int64")].warnings
    assert warning.startswith("too small to be useful: 100% of bits set")
    assert chunks[(1, "int64")].fpp == 1.0
    # The spliced filters lie after all row groups, but apart from Arrow's.
    assert chunks[(0, "s")].warnings == ()


def test_inspect_reports_an_unreadable_filter_without_failing(
    pyarrow_file: Path, tmp_path: Path
) -> None:
    def break_header(row_groups: Any, leaves: dict[str, int]) -> None:
        meta = row_groups[1].columns[leaves["s"]].meta_data
        meta.bloom_filter_offset = row_groups[1].columns[leaves["s"]].meta_data.data_page_offset

    path = mutate_chunk(pyarrow_file, tmp_path / "bad.parquet", break_header)
    report = audit.inspect_file(path)
    bad = [c for c in report.chunks if c.error]
    assert [(c.row_group, c.column) for c in bad] == [(1, "s")]
    assert bad[0].location == "inside row group 1's column data"
    assert "inside the row group's column data" in bad[0].warnings[0]
    assert sum(c.num_bytes is not None for c in report.filters) == len(report.filters) - 1


def test_inspect_json_is_plain(pyarrow_file: Path) -> None:
    d = audit.inspect_file(pyarrow_file).to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["chunks"][0]["column"] == "int64"


def test_inspect_a_truncated_file_raises(pyarrow_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "cut.parquet"
    path.write_bytes(pyarrow_file.read_bytes()[:-100])
    with pytest.raises(pb.CorruptFileError):
        audit.inspect_file(path)


# -- check ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "flavor"),
    [("pyarrow_file", "arrow-cpp"), ("deltalake_file", "arrow-rs"), ("duckdb_file", "duckdb")],
)
def test_check_real_writers(fixture: str, flavor: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(fixture)
    progress: list[tuple[int, int]] = []
    report = audit.check_file(path, progress=lambda done, total: progress.append((done, total)))
    assert report.ok, report.violations
    assert report.chunks
    assert progress[-1] == (len(report.chunks), len(report.chunks))
    with pb.BloomFilterReader(path) as reader:
        for c in report.chunks:
            assert c.exact, c  # each filter is exactly the filter of its chunk's values
            assert c.missing == 0 and c.ndv and c.num_values and c.ndv <= c.num_values
            assert c.ndv == len(chunk_hashes(path, c.row_group, c.column))
            f = reader.filter(c.row_group, c.column)
            assert f is not None and c.fpp == f.fpp() and c.num_bytes == f.num_bytes
            assert c.fpp_at_ndv == pytest.approx(f.fpp(c.ndv))
            # Each writer's own rule, at its default rate, reproduces its sizes.
            assert flavor in c.matching_flavors, c
            assert any(m.flavor == flavor and m.ndv == c.ndv for m in c.size_matches)
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True


def test_check_names_the_writer_rule_and_not_the_others(tmp_path: Path) -> None:
    # 1693 values at 1 %: parquet-java 2048, Arrow C++ 4096, arrow-rs 2048, DuckDB 2048 bytes.
    table = pa.table({"x": pa.array(np.arange(1693) * 7919)})
    path = tmp_path / "x.parquet"
    pq.write_table(table, path)
    f = pb.SplitBlockBloomFilter(4096)
    f.insert(table["x"], "INT64")
    path = splice_filter(path, tmp_path / "x4096.parquet", 0, "x", f)
    (chunk,) = audit.check_file(path, max_fpp=0.01).chunks
    assert chunk.ndv == 1693
    assert "arrow-cpp" in chunk.matching_flavors
    assert "parquet-java" not in chunk.matching_flavors and "duckdb" not in chunk.matching_flavors


def test_check_finds_missing_values(pyarrow_file: Path, tmp_path: Path) -> None:
    path = zero_bitset(pyarrow_file, tmp_path / "zero.parquet", 1, "s")
    report = audit.check_file(path)
    assert not report.ok
    (v,) = report.violations
    assert (v.kind, v.file, v.row_group, v.column) == ("false-negative", str(path), 1, "s")
    row_group_1 = pq.ParquetFile(path).read_row_group(1, columns=["s"]).column(0)
    assert v.value == row_group_1.drop_null()[0].as_py()
    assert isinstance(v.value, str) and v.value.startswith("user-")
    assert repr(v.value) in v.message and "not in the filter" in v.message
    assert str(v).startswith(f"{path}, row group 1, column 's': ")
    chunk = next(c for c in report.chunks if (c.row_group, c.column) == (1, "s"))
    assert chunk.missing == chunk.ndv and chunk.exact is False


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        ("dec", decimal.Decimal),
        ("ts", dt.datetime),
        ("date", dt.date),
        ("st.b", str),
        ("tags.list.element", str),
        ("m.key_value.value", int),
    ],
)
def test_the_missing_value_is_a_python_value(
    pyarrow_file: Path, tmp_path: Path, column: str, expected: type
) -> None:
    path = zero_bitset(pyarrow_file, tmp_path / "zero.parquet", 2, column)
    (v,) = audit.check_file(path, columns=[column]).violations
    assert v.kind == "false-negative" and v.row_group == 2 and v.column == column
    assert isinstance(v.value, expected)
    assert v.value in leaf_values(path, 2, column).to_pylist()
    json.dumps(audit.CheckReport(str(path), (), (v,)).to_dict())  # dates, decimals become text


def test_a_missing_string_that_is_not_utf8_is_given_as_its_bytes(tmp_path: Path) -> None:
    """A corrupt page may hold a STRING that is not UTF-8; the report shows its bytes."""
    offsets = pa.py_buffer(np.array([0, 2, 4], np.int32).tobytes())
    values = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"\xb8\xffok")])
    path = tmp_path / "latin.parquet"
    pq.write_table(pa.table({"s": values}), path, bloom_filter_options={"s": {"ndv": 2}})
    (v,) = audit.check_file(zero_bitset(path, tmp_path / "zero.parquet", 0, "s")).violations
    assert v.kind == "false-negative" and v.value == b"\xb8\xff"
    json.dumps(audit.CheckReport(str(path), (), (v,)).to_dict())


def test_check_columns(pyarrow_file: Path, tmp_path: Path) -> None:
    path = zero_bitset(pyarrow_file, tmp_path / "zero.parquet", 0, "st.b")
    assert audit.check_file(path, columns=["int64", "st.a"]).ok
    # A group stands for its leaves.
    report = audit.check_file(path, columns=["st"])
    assert {c.column for c in report.chunks} == {"st.a", "st.b"}
    assert [v.column for v in report.violations] == ["st.b"]
    with pytest.raises(ValueError, match="no column 'nope'"):
        audit.check_file(path, columns=["nope"])
    empty = audit.check_file(path, columns=["nofilter"], allow_empty=True)
    assert empty.ok and empty.notes == ("no Bloom filters in the columns checked",)


def test_check_max_fpp(pyarrow_file: Path) -> None:
    report = audit.check_file(pyarrow_file, columns=["int64"], max_fpp=1e-6)
    assert [v.kind for v in report.violations] == ["fpp"] * NUM_ROW_GROUPS
    assert all("exceeds max_fpp 1e-06" in v.message for v in report.violations)
    assert audit.check_file(pyarrow_file, columns=["int64"], max_fpp=0.5).ok
    with pytest.raises(ValueError, match="max_fpp"):
        audit.check_file(pyarrow_file, max_fpp=1.5)
    with pytest.raises(TypeError, match="max_fpp"):
        audit.check_file(pyarrow_file, max_fpp="0.1")  # type: ignore[arg-type]


def test_check_layout_violations(pyarrow_file: Path, tmp_path: Path) -> None:
    md = pq.ParquetFile(pyarrow_file).metadata
    size = pyarrow_file.stat().st_size

    def change(row_groups: Any, leaves: dict[str, int]) -> None:
        def meta(rg: int, column: str) -> Any:
            return row_groups[rg].columns[leaves[column]].meta_data

        meta(0, "int64").bloom_filter_offset = size + 10  # past the end
        meta(0, "s").bloom_filter_length = 7  # cannot hold a header and a bitset
        meta(1, "s").bloom_filter_length += 1  # header + bitset is one byte less
        meta(0, "d").bloom_filter_offset = meta(0, "d").data_page_offset  # into the pages
        # Two chunks sharing one filter: it decodes, but the bytes overlap.
        meta(2, "small").bloom_filter_offset = meta(2, "int64").bloom_filter_offset
        meta(2, "small").bloom_filter_length = meta(2, "int64").bloom_filter_length

    path = mutate_chunk(pyarrow_file, tmp_path / "layout.parquet", change)
    report = audit.check_file(path)
    found = {(v.kind, v.row_group, v.column) for v in report.violations}
    assert ("offset", 0, "int64") in found
    assert ("length", 0, "s") in found
    assert ("length", 1, "s") in found
    assert ("header", 0, "d") in found and ("overlap", 0, "d") in found
    assert ("overlap", 2, "small") in found or ("overlap", 2, "int64") in found
    assert ("false-negative", 2, "small") in found  # int64's filter does not hold small's values
    assert md.num_row_groups == NUM_ROW_GROUPS


def test_check_notes_old_files_without_lengths(pyarrow_file: Path, tmp_path: Path) -> None:
    path = writers.rewrite_footer(
        pyarrow_file, tmp_path / "old.parquet", writers.drop_bloom_filter_lengths
    )
    report = audit.check_file(path, columns=["int64"])
    assert report.ok
    assert any("no bloom_filter_length" in n for n in report.notes)


def test_check_boolean_filters_are_noted_not_violations(tmp_path: Path) -> None:
    import deltalake

    table = pa.table({"flag": pa.array([True, False, None] * 100), "x": pa.array(range(300))})
    props = deltalake.WriterProperties(
        default_column_properties=deltalake.ColumnProperties(
            bloom_filter_properties=deltalake.BloomFilterProperties(True, 0.05, 300)
        )
    )
    deltalake.write_deltalake(str(tmp_path), table, writer_properties=props)
    (path,) = tmp_path.glob("*.parquet")
    report = audit.check_file(path)
    assert report.ok
    flag = next(c for c in report.chunks if c.column == "flag")
    assert flag.ndv is None and "BOOLEAN" in flag.notes[0]
    inspected = next(c for c in audit.inspect_file(path).chunks if c.column == "flag")
    assert inspected.present and "BOOLEAN" in inspected.warnings[0]


def test_check_a_corrupt_footer_raises(pyarrow_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "cut.parquet"
    path.write_bytes(pyarrow_file.read_bytes()[: pyarrow_file.stat().st_size // 2])
    with pytest.raises(pb.BloomFilterError):
        audit.check_file(path)
    missing = tmp_path / "missing.parquet"
    with pytest.raises(FileNotFoundError):
        audit.check_file(missing)
    shutil.copy(pyarrow_file, missing)
    assert audit.check_file(missing, columns=["small"]).ok

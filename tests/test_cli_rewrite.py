"""``parquet-bloom add``, ``resize`` and ``remove``: the command line over
:func:`parquet_bloom._rewrite.rewrite_bloom_filters`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom._rewrite import rewrite_bloom_filters
from parquet_bloom._sbbf import optimal_num_bytes
from parquet_bloom.cli import main

ROWS = 3_000
ROW_GROUP_SIZE = 1_000


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three row groups; ``code`` has a 1 MiB filter on 1000 values of 50 distinct."""
    path = tmp_path_factory.mktemp("cli") / "src.parquet"
    ids = np.arange(ROWS, dtype=np.int64) * 31
    table = pa.table(
        {
            "id": ids,
            "name": [f"name-{i}" for i in ids],
            "code": pa.array(ids % 50, pa.int32()),
        }
    )
    pq.write_table(table, path, row_group_size=ROW_GROUP_SIZE, write_page_index=True)
    rewrite_bloom_filters(path, in_place=True, columns=["code"], num_bytes=1 << 20)
    return path


def filter_sizes(path: Path) -> dict[tuple[int, str], int]:
    with pb.BloomFilterReader(path) as reader:
        return {key: f.num_bytes for key, f in reader.filters().items()}


def copies_of(src: Path, *paths: Path) -> list[Path]:
    """``src`` copied to each of ``paths`` (parent directories made)."""
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(src.read_bytes())
    return list(paths)


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_add(src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dst = tmp_path / "dst.parquet"
    status, out, err = run(capsys, "add", src, dst, "--column", "id", "--column", "name")
    assert (status, err) == (0, "")
    assert f"{src} -> {dst}: wrote 6 filters" in out
    sizes = filter_sizes(dst)
    assert sizes == {
        **{(rg, "code"): 1 << 20 for rg in range(3)},  # kept as it was
        **{
            (rg, c): optimal_num_bytes(ROW_GROUP_SIZE, 0.01)
            for rg in range(3)
            for c in ("id", "name")
        },
    }
    assert pq.read_table(dst).equals(pq.read_table(src))


@pytest.mark.parametrize(
    ("options", "size"),
    [
        (["--fpp", "0.1"], optimal_num_bytes(ROW_GROUP_SIZE, 0.1)),
        (["--ndv", "100000"], optimal_num_bytes(100_000, 0.01)),
        (["--bytes", "512"], 512),
        (["--flavor", "parquet-java"], 2048),
    ],
)
def test_add_sizing_options(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], size: int
) -> None:
    dst = tmp_path / "dst.parquet"
    status, _, err = run(capsys, "add", src, dst, "--column", "id", *options)
    assert (status, err) == (0, "")
    assert {n for (_, c), n in filter_sizes(dst).items() if c == "id"} == {size}


def test_resize_shrinks_filters_to_their_chunk(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "dst.parquet"
    status, out, err = run(capsys, "resize", src, dst, "--json")
    assert (status, err) == (0, "")
    (report,) = json.loads(out)["files"]
    assert report["filters_written"] == [
        {"row_group": rg, "column": "code", "num_bytes": optimal_num_bytes(50, 0.01)}
        for rg in range(3)
    ]
    assert report["bytes_after"] < report["bytes_before"] - 3_000_000
    assert filter_sizes(dst) == {(rg, "code"): 64 for rg in range(3)}


def test_remove_in_place(src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "data.parquet"
    path.write_bytes(src.read_bytes())
    status, out, err = run(capsys, "remove", path, "--in-place", "--column", "code")
    assert (status, err) == (0, "")
    assert "removed 3" in out
    assert filter_sizes(path) == {}
    assert pq.read_table(path).equals(pq.read_table(src))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["add", "{src}", "{dst}", "--column", "nope"], "no leaf column 'nope'"),
        (["add", "{src}", "{dst}", "--column", "id", "--bytes", "1000"], "power of two"),
        (["add", "{src}", "{dst}", "--column", "id", "--fpp", "2"], "between 0 and 1"),
        (["remove", "{src}", "{src}", "{dst}", "--column", "id"], "does not exist"),
        (["add", "{missing}", "{dst}", "--column", "id"], "No such file"),
        (["add", "{encrypted}", "{dst}", "--column", "id"], "encrypted"),
    ],
)
def test_errors_are_one_line_and_leave_no_file(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    dst = tmp_path / "dst.parquet"
    encrypted = tmp_path / "encrypted.parquet"
    encrypted.write_bytes(src.read_bytes()[:-4] + b"PARE")
    paths = {"src": src, "dst": dst, "missing": tmp_path / "missing.parquet"}
    args = [a.format(**paths, encrypted=encrypted) for a in argv]
    status, out, err = run(capsys, *args)
    assert status == 2
    assert out == ""
    assert err.startswith("parquet-bloom: error: ")
    assert err.count("\n") == 1
    assert message in err
    assert not dst.exists()


def test_many_files_into_a_directory_with_progress(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = copies_of(src, *(tmp_path / name / f"{name}.parquet" for name in "abc"))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    status, out, err = run(
        capsys, "add", *sources, out_dir, "--column", "id", "--progress", "--json"
    )
    assert status == 0
    report = json.loads(out)
    assert report["ok"] and [f["dst"] for f in report["files"]] == [
        str(out_dir / s.name) for s in sources
    ]
    assert "[########################] 3/3 c.parquet" in err  # drawn over itself with \r
    for s in sources:
        assert {c for _, c in filter_sizes(out_dir / s.name)} == {"id", "code"}
        assert filter_sizes(s) == filter_sizes(src)  # the sources are untouched


def test_many_files_in_place_go_on_past_a_bad_one(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = copies_of(src, tmp_path / "0.parquet", tmp_path / "1.parquet")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    status, out, err = run(
        capsys, "remove", good[0], bad, good[1], "--in-place", "--column", "code"
    )
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("parquet-bloom: error: ") and str(bad) in err
    assert out.count("removed 3") == 2
    assert all(filter_sizes(path) == {} for path in good)
    assert bad.read_bytes() == b"not parquet at all"


def test_two_files_of_one_name_are_not_written_to_one_directory(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twins = copies_of(src, tmp_path / "a" / "part-0.parquet", tmp_path / "b" / "part-0.parquet")
    status, out, err = run(capsys, "add", *twins, tmp_path, "--column", "id")
    assert (status, out) == (2, "")
    assert "several files named 'part-0.parquet'" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_bad_options_are_one_error_before_any_file(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copies = copies_of(src, *(tmp_path / f"{i}.parquet" for i in range(3)))
    status, out, err = run(capsys, "add", *copies, "--in-place", "--column", "id", "--bytes", "33")
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and "power of two" in err
    assert all(path.read_bytes() == src.read_bytes() for path in copies)

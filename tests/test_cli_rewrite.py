"""``parquet-bloom add``, ``resize`` and ``remove``: the command line over
:func:`parquet_bloom.writer.rewrite_bloom_filters`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom.cli import main
from parquet_bloom.sbbf import optimal_num_bytes
from parquet_bloom.writer import rewrite_bloom_filters

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
    report = json.loads(out)
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
        (["remove", "{src}", "{dst}", "--column", "id", "--in-place"], "not both"),
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

"""``parquet-bloom index``: build, refresh, compact, inspect and lookup, on a dataset and on a
Delta table, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom.cli import main
from tests.tables import delta_tables

Capture = pytest.CaptureFixture[str]


def run(capsys: Capture, *argv: object) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    for i in range(4):
        ids = np.arange(i * 1000, (i + 1) * 1000, dtype=np.int64)
        pq.write_table(
            pa.table(
                {"id": ids, "day": pa.array([f"2026-01-{i + 1:02d}"] * 1000).cast(pa.date32())}
            ),
            root / f"f{i}.parquet",
            row_group_size=500,
            bloom_filter_options={"id": {"ndv": 500, "fpp": 0.001}, "day": {"ndv": 2}},
        )
    return root


def test_a_dataset_built_inspected_and_looked_up(
    dataset: Path, tmp_path: Path, capsys: Capture
) -> None:
    idx = tmp_path / "idx"
    status, out, err = run(
        capsys, "index", "build", dataset, "--index", idx, "--column", "id", "--column", "day"
    )
    assert (status, err) == (0, "")
    assert out.startswith(f"index {idx}: 4 files, 8 row groups")
    status, out, _ = run(capsys, "index", "inspect", dataset, "--index", idx)
    assert status == 0 and "id: 8 row groups" in out and "false candidates" in out
    status, out, _ = run(capsys, "index", "inspect", dataset, "--index", idx, "--json")
    document = json.loads(out)
    assert document["columns"]["id"]["row_groups"] == 8
    assert 0 <= document["columns"]["id"]["expected_false_candidates"] < 1
    status, out, _ = run(
        capsys, "index", "lookup", dataset, "--index", idx, "--column", "id", "2600"
    )
    assert status == 0
    assert out.splitlines()[0] == f"{dataset / 'f2.parquet'}: row groups 1"
    status, out, _ = run(
        capsys,
        "index",
        "lookup",
        dataset,
        "--index",
        idx,
        "--json",
        "--column",
        "day",
        "2026-01-03",
        "2026-01-04",
    )
    document = json.loads(out)
    assert sorted(document["files"]) == [str(dataset / "f2.parquet"), str(dataset / "f3.parquet")]
    status, _, _ = run(capsys, "index", "lookup", dataset, "--index", idx, "--column", "id", "-7")
    assert status == 1  # nothing may hold it


def test_refresh_and_compact_from_the_command(
    dataset: Path, tmp_path: Path, capsys: Capture
) -> None:
    idx = tmp_path / "idx"
    run(capsys, "index", "build", dataset, "--index", idx, "--column", "id")
    status, out, _ = run(capsys, "index", "refresh", dataset, "--index", idx)
    assert (status, out) == (0, f"index {idx}: no file to add\n")
    pq.write_table(
        pa.table({"id": np.arange(9000, 9010, dtype=np.int64)}),
        dataset / "f9.parquet",
        bloom_filter_options={"id": {"ndv": 10}},
    )
    status, out, _ = run(capsys, "index", "refresh", dataset, "--index", idx)
    assert status == 0 and ": 1 files, 1 row groups" in out
    status, out, _ = run(capsys, "index", "compact", dataset, "--index", idx, "--json")
    assert json.loads(out)["segments_before"] == 2
    status, out, _ = run(
        capsys, "index", "lookup", dataset, "--index", idx, "--column", "id", "9005"
    )
    assert out.splitlines()[0] == f"{dataset / 'f9.parquet'}: row groups 0"


def test_a_delta_table_keeps_its_index_under_the_table(tmp_path: Path, capsys: Capture) -> None:
    table = tmp_path / "t"
    delta_tables.write(str(table), delta_tables.rows(0, 1000))
    status, out, err = run(capsys, "index", "build", table, "--column", "id")
    assert (status, err) == (0, "")
    assert (table / "_bloom_index" / "latest.json").exists()
    status, out, _ = run(capsys, "index", "lookup", table, "--column", "id", "421", "--json")
    document = json.loads(out)
    assert document["from_index"] == 2 and len(document["files"]) == 1
    [path] = document["files"]
    assert path.startswith("part=odd/")
    status, _, err = run(
        capsys, "index", "build", table, "--index", tmp_path / "x", "--column", "id"
    )
    assert status == 2 and "is a Delta table: its index is" in err


def test_mistakes_are_one_line(dataset: Path, tmp_path: Path, capsys: Capture) -> None:
    status, _, err = run(capsys, "index", "build", dataset, "--column", "id")
    assert status == 2 and "name the dataset's index with --index" in err
    status, _, err = run(
        capsys, "index", "lookup", dataset, "--index", tmp_path / "none", "--column", "id", "1"
    )
    assert status == 2 and "no Bloom index at" in err and "internal error" not in err
    run(capsys, "index", "build", dataset, "--index", tmp_path / "i", "--column", "id")
    status, _, err = run(
        capsys, "index", "lookup", dataset, "--index", tmp_path / "i", "--column", "nope", "1"
    )
    assert status == 2 and "no column 'nope'" in err
    status, _, err = run(
        capsys, "index", "lookup", dataset, "--index", tmp_path / "i", "--column", "id", "x1"
    )
    assert status == 2 and "cannot read 'x1'" in err
    status, _, err = run(
        capsys, "index", "build", dataset, "--index", tmp_path / "j", "--column", "missing"
    )
    assert status == 2 and "has the column" in err


def test_text_filters_built_and_inspected(tmp_path: Path, capsys: Capture) -> None:
    """``--text C:KIND[:K=V,...]`` builds token and n-gram filters from the values; inspect
    lists them; a mistake in one is told as one."""
    root = tmp_path / "logs"
    root.mkdir()
    pq.write_table(pa.table({"msg": ["GET /api/v1 ok", "POST /login timeout"]}), root / "a.parquet")
    idx = tmp_path / "idx"
    status, out, err = run(
        capsys,
        "index",
        "build",
        root,
        "--index",
        idx,
        "--text",
        "msg:tokenbf:size=64,hashes=3,seed=1",
        "--text",
        "msg:ngrambf:n=4",
    )
    assert (status, err) == (0, "")
    assert "msg: tokenbf_v1(64,3,1) over 1 row groups" in out
    status, out, err = run(capsys, "index", "inspect", root, "--index", idx, "--json")
    assert status == 0
    assert json.loads(out)["text"]["msg"][0] == "tokenbf_v1(64,3,1)"
    assert json.loads(out)["text"]["msg"][1].startswith("ngrambf_v1(4,")
    for bad, message in [
        ("msg:bloom", "expected COLUMN:tokenbf or COLUMN:ngrambf"),
        ("msg:tokenbf:k=3", "is not one of n=, size="),
        ("msg:tokenbf:n=3", "n is the n-gram length"),
        ("msg:ngrambf:n=x", "is not a number"),
    ]:
        status, _, err = run(capsys, "index", "build", root, "--index", idx, "--text", bad)
        assert status == 2 and message in err
    status, _, err = run(capsys, "index", "build", root, "--index", idx, "--text", "nope:tokenbf")
    assert status == 2 and "has the column(s) 'nope'" in err
    status, _, err = run(capsys, "index", "build", root, "--index", idx)
    assert status == 2 and "needs --column or --text" in err


def test_a_build_shows_its_progress(dataset: Path, tmp_path: Path, capsys: Capture) -> None:
    idx = tmp_path / "idx"
    argv = ("index", "build", dataset, "--index", idx, "--column", "id")
    status, out, err = run(capsys, *argv, "--progress", "--from-data", "all")
    assert status == 0 and out.startswith(f"index {idx}: 4 files")
    # Drawn over itself: each file's tail read, then each file's filters built.
    drawn = [part.strip() for part in err.split("\r") if part.strip()]
    assert [d.split("] ")[1] for d in drawn] == [
        *(f"{n}/4 reading" for n in range(1, 5)),
        *(f"{n}/4 building from the values" for n in range(1, 5)),
    ]
    assert err.endswith("\r")  # cleared
    status, out, err = run(capsys, *argv)
    assert (status, err) == (0, "")  # not a terminal: no bar

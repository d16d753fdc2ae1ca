"""The Delta table's own pruning, vectorised over its add actions: never a file that holds a
match dropped, and as many files dropped as deltalake's own pyarrow dataset drops for the
columns whose statistics bound every value."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from parquet_bloom._prune.expression import translate
from parquet_bloom._tables.delta_stats import matching_files

deltalake = pytest.importorskip("deltalake")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("delta-stats") / "t"
    for i in range(6):
        ids = list(range(i * 100, i * 100 + 100))
        floats = [x / 4 for x in ids]
        if i == 2:
            floats[7] = math.nan  # a NaN among a file's floats
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "small": pa.array([x % 50 for x in ids], pa.int32()),
                "s": [f"k{x:04d}" for x in ids],
                "f": pa.array(floats, pa.float64()),
                "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=x) for x in ids]),
                "part": ["a" if i % 2 else "b"] * 100,
            }
        )
        deltalake.write_deltalake(str(root), data, mode="append", partition_by=["part"])
    return root


def _kept(root: Path, expr: pc.Expression) -> set[str]:
    table = deltalake.DeltaTable(str(root))
    actions = pa.table(table.get_add_actions(flatten=True))
    keep = matching_files(actions, translate(expr), table.metadata().partition_columns)
    return {unquote(p) for p, k in zip(actions.column("path").to_pylist(), keep, strict=True) if k}


def _holding(root: Path, expr: pc.Expression) -> set[str]:
    data = deltalake.DeltaTable(str(root)).to_pyarrow_dataset()
    out = set()
    for fragment in data.get_fragments():
        if fragment.to_table(schema=data.schema, filter=expr).num_rows:
            out.add(fragment.path)
    return out


def _deltalakes(root: Path, expr: pc.Expression) -> set[str]:
    data = deltalake.DeltaTable(str(root)).to_pyarrow_dataset()
    return {f.path for f in data.get_fragments(filter=expr)}


EXACT = [
    pc.field("id") == 250,
    pc.field("id").isin([5, 555, 10_000]),
    pc.field("small") == 7,
    pc.field("s") == "k0420",
    pc.field("s").isin(["k0001", "zzz"]),
    pc.field("day") == pa.scalar(dt.date(2024, 1, 1) + dt.timedelta(days=333)),
    pc.field("part") == "a",
    (pc.field("id") == 150) | (pc.field("id") == 480),
    (pc.field("id") > 10) & (pc.field("id") == 150),
    pc.field("f") == 12.5,
]


@pytest.mark.parametrize("expr", EXACT, ids=str)
def test_the_files_kept_hold_every_match_and_no_more_than_deltalakes(
    table: Path, expr: pc.Expression
) -> None:
    kept = _kept(table, expr)
    assert _holding(table, expr) <= kept
    if "f" not in str(expr):  # deltalake prunes these columns by the same statistics
        assert kept <= _deltalakes(table, expr)


@pytest.mark.parametrize(
    "expr",
    [
        pc.field("f") == 57.25,  # in the file with a NaN among its floats: kept
        pc.field("f").isin([math.nan]),
        pc.field("id") == pa.scalar(250.5),  # no integer equals it: the scan decides
        pc.field("id") == pa.scalar(None, pa.int64()),
        pc.field("s") > "k0300",  # a comparison: nothing decided
        pc.field("id").cast(pa.string()) == "250",
    ],
    ids=str,
)
def test_what_the_statistics_cannot_decide_keeps_the_files(
    table: Path, expr: pc.Expression
) -> None:
    kept = _kept(table, expr)
    assert _holding(table, expr) <= kept
    if "is_nan" not in str(expr):
        pass
    files = {f.path for f in deltalake.DeltaTable(str(table)).to_pyarrow_dataset().get_fragments()}
    if "57.25" in str(expr):
        nan_file = [
            p for p in files if pq.read_table(table / p)["f"].is_nan().to_pylist().count(True)
        ]
        assert set(nan_file) <= kept
    else:
        assert kept == files

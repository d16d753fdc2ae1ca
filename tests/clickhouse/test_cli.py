"""``parquet-bloom inspect``, ``check`` and ``probe`` on ClickHouse part directories."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from parquet_bloom import clickhouse as pbch
from parquet_bloom.cli import main
from tests.clickhouse.conftest import ClickHouse


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_inspect(clickhouse: ClickHouse, capsys: pytest.CaptureFixture[str]) -> None:
    t = clickhouse.tables["typed_wide"]
    part = t.data_dir / t.parts[0]
    status, out, _ = run(capsys, "inspect", part)
    assert status == 0
    assert "ClickHouse wide part all_1_1_0, 300 rows" in out
    assert "bf_i: bloom_filter(0.01) on i, GRANULARITY 2: 5 granules" in out
    status, out, _ = run(capsys, "inspect", "--json", part)
    (d,) = json.loads(out)["files"]
    indexes = {i["index"]: i for i in d["clickhouse_part"]["indexes"]}
    opened = pbch.open_part(part, t.sql)
    for name, idx in opened.indexes.items():
        assert indexes[name]["granules"] == len(idx.filters)
        assert indexes[name]["filter_bytes"] == sum(f.num_bytes for g in idx.filters for f in g)


def test_check_clean_and_flagged(
    clickhouse: ClickHouse, capsys: pytest.CaptureFixture[str]
) -> None:
    for table in clickhouse.tables.values():
        for name in table.parts:
            status, out, err = run(capsys, "check", table.data_dir / name)
            assert status == 0, out + err
            assert ", 0 problems" in out
    t = clickhouse.tables["plain"]
    status, out, _ = run(capsys, "check", "--max-fpp", "0.000001", t.data_dir / t.parts[0])
    assert status == 1
    assert "fpp at fill" in out


def test_check_with_a_wrong_statement_is_refused(
    clickhouse: ClickHouse, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A statement asking another rate than the part was written with sizes the granules
    otherwise: the reader finds the index file does not decode that way."""
    t = clickhouse.tables["plain"]
    sql = _sql(tmp_path, t.sql.replace("bloom_filter(0.01)", "bloom_filter(0.3)"))
    status, _, err = run(capsys, "check", "--table-sql", sql, t.data_dir / t.parts[0])
    assert status == 2
    assert err.startswith("parquet-bloom: corrupt part: ") and "bf_s" in err


def test_check_flags_an_overfull_granule(clickhouse: ClickHouse) -> None:
    from parquet_bloom.cli._clickhouse import check_part

    t = clickhouse.tables["plain"]
    part = pbch.open_part(t.data_dir / t.parts[0], t.sql)
    assert check_part(part) == []
    f = part.indexes["bf_s"].filters[3][0]
    full = pbch.ClickHouseBloomFilter(
        b"\xff" * f.num_bytes, kind=f.kind, column_type=f.column_type,
        num_hashes=f.num_hashes, num_rows=f.num_rows,
    )  # fmt: skip
    part.indexes["bf_s"].filters[3][0] = full
    problems = check_part(part)
    assert {p["granule"] for p in problems} == {3}
    assert any("fpp at fill 1" in p["problem"] for p in problems)
    assert any("by its fill" in p["problem"] for p in problems)


def test_probe(clickhouse: ClickHouse, capsys: pytest.CaptureFixture[str]) -> None:
    t = clickhouse.tables["typed_wide"]
    part = t.data_dir / t.parts[0]
    status, out, _ = run(capsys, "probe", part, "--index", "bf_u", "70", "71")
    assert status == 0
    assert "'70': 1 of 10 granules might match: [0]" in out
    status, out, _ = run(capsys, "probe", part, "--index", "bf_u", "71")
    assert status == 1
    status, out, _ = run(
        capsys, "probe", part, "--index", "tk_s", "v12", "zz", "--function", "hasToken", "--json"
    )
    values = json.loads(out)["files"][0]["clickhouse_part"]["values"]
    opened = pbch.open_part(part, t.sql)
    assert values[0]["granules"] == [
        g for g, k in enumerate(opened.might_match("tk_s", "hasToken", "v12")) if k
    ]
    assert values[1]["granules"] == []
    status, out, _ = run(
        capsys, "probe", part, "--index", "bf_u", "70", "77", "--function", "in", "--json"
    )
    (decision,) = json.loads(out)["files"][0]["clickhouse_part"]["values"]
    assert decision["value"] == ["70", "77"]
    assert decision["granules"] == [
        g for g, k in enumerate(opened.might_match("bf_u", "in", [70, 77])) if k
    ]
    with pytest.raises(TypeError, match="sequence"):
        opened.might_match("bf_u", "in", "70")


def test_damaged_part_is_one_line(
    clickhouse: ClickHouse, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    t = clickhouse.tables["chained"]
    part = tmp_path / t.parts[0]
    shutil.copytree(t.data_dir / t.parts[0], part)
    data = bytearray((part / "skp_idx_bf_s.idx").read_bytes())
    data[40] ^= 1
    (part / "skp_idx_bf_s.idx").write_bytes(bytes(data))
    status, _, err = run(capsys, "inspect", "--table-sql", _sql(tmp_path, t.sql), part)
    assert status == 2
    assert err.startswith("parquet-bloom: corrupt part: ") and err.count("\n") == 1
    assert "skp_idx_bf_s.idx" in err and "offset 0" in err


def _sql(tmp_path: Path, sql: str) -> Path:
    path = tmp_path / "table.sql"
    path.write_text(sql)
    return path

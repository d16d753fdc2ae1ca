"""Granule decisions against ClickHouse's own: for every function of the issue on every index
type, the data granules ClickHouse reads (``indexHint`` with only that index) are exactly the
ones ``Part.might_match`` keeps, in every part of every table."""

from __future__ import annotations

from typing import Any

import pytest

from parquet_bloom import clickhouse
from tests.clickhouse.conftest import TABLES, ClickHouse

FUNCTION_SQL = {
    "equals": "{c} = {v}",
    "notEquals": "{c} != {v}",
    "in": "{c} IN ({vs})",
    "notIn": "{c} NOT IN ({vs})",
    "has": "has({c}, {v})",
    "hasAny": "hasAny({c}, [{vs}])",
    "hasAll": "hasAll({c}, [{vs}])",
    "indexOf": "indexOf({c}, {v}) > 0",
    "hasToken": "hasToken({c}, {v})",
    "like": "{c} LIKE {v}",
    "notLike": "{c} NOT LIKE {v}",
    "startsWith": "startsWith({c}, {v})",
    "endsWith": "endsWith({c}, {v})",
    "multiSearchAny": "multiSearchAny({c}, [{vs}])",
}
MULTI = ("in", "notIn", "hasAny", "hasAll", "multiSearchAny")


def sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace("'", "\\'").replace("\0", "\\0")
        return "'" + escaped + "'"
    return repr(value)


def predicate(function: str, column: str, value: Any) -> str:
    if function in MULTI:
        return FUNCTION_SQL[function].format(c=column, vs=", ".join(sql_literal(v) for v in value))
    return FUNCTION_SQL[function].format(c=column, v=sql_literal(value))


# Per index column (in both typed tables and the small ones): the (function, constant) cases.
# Values present in the data and absent ones; numbers out of the column's range; NULL-free.
SCALAR_CASES: dict[str, list[tuple[str, Any]]] = {
    # Granules whose rows are all empty arrays hold the hash 0 (BloomFilterHash::hashWithColumn).
    "earr": [("has", "3"), ("has", "9"), ("hasAny", ["1", "x"]), ("hasAll", ["1", "2"])],
    "u8": [("equals", 5), ("equals", 250), ("equals", 300), ("equals", -1), ("in", [1, 2, 999])],
    "i64": [
        ("equals", -40000000 * 7),
        ("equals", -40000000 * 7 + 1),
        ("equals", 2**63),
        ("in", [0, -80000000]),
    ],
    "f32": [
        ("equals", 0.5),
        ("equals", 0.1),
        ("equals", 0.3),
        ("equals", 1e40),
        ("in", [0.2, 1.5]),
    ],
    "u": [
        ("equals", 70),
        ("equals", 71),
        ("equals", 2**70),
        ("notEquals", 70),
        ("in", [7, 3, 9999999]),
        ("in", [1, 2]),
        ("notIn", [7]),
        ("equals", 21.0),
        ("equals", 22.5),
        ("equals", "70"),
        ("in", ["7", "14"]),
    ],
    "i": [
        ("equals", -1000),
        ("equals", -987),
        ("equals", -986),
        ("equals", 3_000_000_000),
        ("in", [-1000 + 13 * 250, 5]),
        ("notEquals", -987),
    ],
    "f": [
        ("equals", 2.5),
        ("equals", 2.6),
        ("in", [0.25, 99.0]),
        ("equals", 3),
        ("equals", "2.5"),
        ("equals", 1e300),
    ],
    "s": [
        ("equals", "w7 v7"),
        ("equals", "w0 v0 été"),
        ("equals", "nope"),
        ("in", ["w8 v8", "x"]),
        ("in", ["x", "y"]),
        ("notIn", ["w8 v8"]),
        ("notEquals", "w7 v7"),
        ("hasToken", "v12"),
        ("hasToken", "zz"),
        ("hasToken", "été"),
        ("like", "%v12%"),
        ("like", "w3 %"),
        ("like", "%été"),
        ("like", "%zzq%"),
        ("notLike", "%v12%"),
        ("startsWith", "w1"),
        ("startsWith", "w1 v1"),
        ("endsWith", " v130"),
        ("endsWith", "v13"),
        ("multiSearchAny", ["v14", "qqq"]),
        ("multiSearchAny", ["qqq"]),
        ("equals", ""),
        ("like", "%"),
        ("like", "w\\_%"),
        ("equals", "t3-3"),
        ("hasToken", "t3"),
        ("like", "%-17%"),
        ("startsWith", "t2"),
        ("endsWith", "-5"),
        ("in", ["t4-4", "t5-5"]),
        ("multiSearchAny", ["-9", "zz"]),
    ],
    "uid": [
        ("equals", "00005ccd-1234-5678-9abc-000000000003"),
        ("equals", "00000000-1234-5678-9abc-000000000000"),
        ("equals", "12345678-1234-1234-1234-123456789012"),
        ("in", ["00005ccd-1234-5678-9abc-000000000004", "00009ab8-1234-5678-9abc-000000000005"]),
    ],
    "d": [
        ("equals", "2020-01-05"),
        ("equals", "2030-01-05"),
        ("in", ["2020-03-01", "2020-02-01"]),
        ("equals", "2020-2-3"),
        ("equals", "2020-02-30"),
    ],
    "dt": [
        ("equals", "2021-03-04 05:06:07"),
        ("equals", "2021-03-04 06:06:08"),
        ("equals", "2021-03-04 05:06:08"),
        ("equals", 1614834367),
        ("equals", 1614837968),
    ],
    "lc": [
        ("equals", "lc3"),
        ("equals", "lc99"),
        ("in", ["lc1", "zz"]),
        ("like", "%c1%"),
        ("startsWith", "lc1"),
        ("hasToken", "lc4"),
        ("endsWith", "c7"),
    ],
    "ns": [
        ("equals", "n5"),
        ("equals", "n6"),
        ("equals", "n9999"),
        ("in", ["n7", "n8"]),
        ("in", ["n7", None]),
        ("in", [None]),
        ("equals", ""),
    ],
    "fs": [
        ("equals", "f7"),
        ("equals", "f99"),
        ("in", ["f1", "f2"]),
        ("hasToken", "f3"),
        ("like", "%f4%"),
        ("equals", "f7\0\0\0\0\0\0"),
    ],
    "arr": [
        ("has", "a3"),
        ("has", "a99"),
        ("has", "5"),
        ("hasAny", ["a1", "zz"]),
        ("hasAny", ["zz"]),
        ("hasAll", ["a1", "a2"]),
        ("hasAll", ["a1", "zz"]),
        ("indexOf", "a7"),
        ("indexOf", "zz"),
        ("hasAny", ["10", "20"]),
        ("hasAny", []),
        ("hasAll", []),
        ("hasAll", ["0"]),
    ],
}


def index_cases(
    tables: dict[str, tuple[str, Any, Any, Any, Any]] | None = None,
) -> list[tuple[str, str, str, tuple[Any, ...]]]:
    """(table, index, function, (column, constant)) for every index column of ``tables``."""
    cases = []
    for table, (columns, *_rest) in (TABLES if tables is None else tables).items():
        for line in columns.splitlines():
            line = line.strip().rstrip(",")
            if not line.startswith("INDEX"):
                continue
            d = clickhouse.parse_table_sql(f"CREATE TABLE t ({line}) ENGINE = MergeTree").indexes
            (index,) = d.values()
            if index.columns is None or index.type == "minmax":
                continue  # not read here (test_parts checks they are skipped)
            for column in index.columns:
                for function, value in SCALAR_CASES[column]:
                    cases.append((table, index.name, function, (column, value)))
    return cases


CASES = index_cases()


def test_every_function_on_every_index_type() -> None:
    """The cases cover each function of the issue on each of the three index types."""
    seen = {
        (
            TABLES[t][0]
            .split(f"INDEX `{i}`" if " " in i else f"INDEX {i} ")[1]
            .split("TYPE ")[1]
            .split("(")[0]
            .split()[0],
            f,
        )
        for t, i, f, _ in CASES
    }
    for kind in ("bloom_filter", "tokenbf_v1", "ngrambf_v1"):
        functions = {f for k, f in seen if k == kind}
        assert functions == set(clickhouse.FUNCTIONS), (kind, set(clickhouse.FUNCTIONS) - functions)


def expected(
    ch: ClickHouse, table: str, index: str, function: str, column: str, value: Any
) -> set[tuple[str, int]]:
    names = list(clickhouse.parse_table_sql(ch.tables[table].sql).indexes)
    return ch.granules(table, predicate(function, column, value), index, names)


def ours(
    parts: list[clickhouse.Part], index: str, function: str, column: str, value: Any
) -> set[tuple[str, int]]:
    out = set()
    for part in parts:
        idx = part.index(index)
        g = idx.definition.granularity
        n = len(part.data_granule_rows)
        args = (column, value) if len(idx.definition.columns or ()) > 1 else (value,)
        keep = part.might_match(index, function, *args)
        for gi, k in enumerate(keep):
            if k:
                out.update((part.name, j) for j in range(gi * g, min((gi + 1) * g, n)))
    return out


@pytest.fixture(scope="module")
def parts(clickhouse_tables: ClickHouse) -> dict[str, list[clickhouse.Part]]:
    return {
        name: clickhouse.open_table(t.data_dir, t.sql)
        for name, t in clickhouse_tables.tables.items()
    }


@pytest.fixture(scope="module")
def clickhouse_tables(clickhouse: ClickHouse) -> ClickHouse:
    return clickhouse


@pytest.mark.parametrize(
    ("table", "index", "function", "args"),
    CASES,
    ids=[f"{t}-{i}-{f}-{a[1]!r}" for t, i, f, a in CASES],
)
def test_decision_matches_clickhouse(
    clickhouse_tables: ClickHouse,
    parts: dict[str, list[clickhouse.Part]],
    table: str,
    index: str,
    function: str,
    args: tuple[Any, ...],
) -> None:
    column, value = args
    want = expected(clickhouse_tables, table, index, function, column, value)
    got = ours(parts[table], index, function, column, value)
    assert got == want


def test_decisions_are_selective(
    clickhouse_tables: ClickHouse, parts: dict[str, list[clickhouse.Part]]
) -> None:
    """The cases are not vacuous: on every index type ClickHouse skips granules for many of
    them, and keeps all for others (negations, unusable functions, values out of range)."""
    pruned: dict[str, int] = {}
    total: dict[str, int] = {}
    for table, index, function, (column, value) in CASES:
        every = {(p.name, j) for p in parts[table] for j in range(len(p.data_granule_rows))}
        kind = parts[table][0].index(index).type
        got = ours(parts[table], index, function, column, value)
        total[kind] = total.get(kind, 0) + 1
        pruned[kind] = pruned.get(kind, 0) + (got != every)
    for kind in ("bloom_filter", "tokenbf_v1", "ngrambf_v1"):
        assert pruned[kind] >= total[kind] // 4, (kind, pruned[kind], total[kind])
        assert pruned[kind] < total[kind]

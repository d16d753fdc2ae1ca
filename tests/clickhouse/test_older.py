"""Parts written by older ClickHouse servers (chDB 2.1.1 = 24.8, chDB 0.15.0 = 23.6), each in
its own environment (``older_env.py``): read with every marks format they write (``.mrk``,
``.mrk2``, ``.cmrk2``, ``.mrk3``, ``.cmrk3``), decided as they decide, and rebuilt byte for byte
with the writer's rule for a ``bloom_filter`` granule's N (rows before 23.9)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from parquet_bloom import clickhouse as pbch
from tests.clickhouse.older_env import OLDER, OLDER_TABLES, Unavailable, environment, write_tables
from tests.clickhouse.test_decisions import index_cases, predicate

# Decisions on the tables of every index type and column type (.cmrk2, .mrk3) and on a merged
# compact table (.cmrk3); the other two tables are read and rebuilt, not decided on.
DECIDED = ("typed_wide", "typed_compact", "compact_merged")
CASES = index_cases({t: OLDER_TABLES[t] for t in DECIDED})


@dataclass
class Older:
    """What one older server wrote and answered."""

    chdb: str
    version: str
    result: dict[str, Any]
    parts: dict[str, list[pbch.Part]]
    made_in: float | None


def _request() -> list[dict[str, Any]]:
    return [
        {
            "table": table,
            "index": index,
            "all_indexes": list(
                pbch.parse_table_sql(
                    f"CREATE TABLE t ({OLDER_TABLES[table][0]}) ENGINE = MergeTree"
                ).indexes
            ),
            "predicate": predicate(function, column, value),
        }
        for table, index, function, (column, value) in CASES
    ]


def _one(version: str, root: Path) -> tuple[dict[str, Any], float | None] | str:
    try:
        python, made_in = environment(version)
    except Unavailable as err:
        return f"no environment with chDB {version} (ClickHouse {OLDER[version]}): {err}"
    return write_tables(python, root, _request()), made_in


@pytest.fixture(scope="session")
def older_servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[dict[str, Any], float | None] | str]:
    """Every older server's tables and answers (or why it could not run), both made at once:
    each is a process of its own."""
    roots = {v: tmp_path_factory.mktemp(f"chdb-{v}") for v in OLDER}
    with ThreadPoolExecutor(len(OLDER)) as pool:
        futures = {v: pool.submit(_one, v, roots[v]) for v in OLDER}
        return {v: f.result() for v, f in futures.items()}


@pytest.fixture(scope="session", params=sorted(OLDER), ids=lambda v: f"chdb-{v}")
def older(request: pytest.FixtureRequest, older_servers: dict[str, Any]) -> Older:
    version = request.param
    got = older_servers[version]
    if isinstance(got, str):
        pytest.skip(got)
    result, made_in = got
    parts = {
        name: pbch.open_table(Path(t["data_path"]), t["sql"])
        for name, t in result["tables"].items()
    }
    return Older(version, result["version"], result, parts, made_in)


def test_server_version(older: Older) -> None:
    assert older.version.startswith(OLDER[older.chdb] + ".")


def test_active_parts(older: Older) -> None:
    for name, t in older.result["tables"].items():
        assert [p.name for p in older.parts[name]] == t["parts"], name


def _ours(parts: list[pbch.Part], index: str, function: str, column: str, value: Any) -> dict:
    out: dict[str, list[list[int]]] = {}
    for part in parts:
        idx = part.index(index)
        args = (column, value) if len(idx.definition.columns or ()) > 1 else (value,)
        keep = part.might_match(index, function, *args)
        runs: list[list[int]] = []
        for k, (start, end) in zip(keep, idx.granule_rows, strict=True):
            if not k or start == end:
                continue
            if runs and runs[-1][1] == start:
                runs[-1][1] = end
            else:
                runs.append([start, end])
        if runs:
            out[part.name] = runs
    return out


def test_decisions_match(older: Older) -> None:
    mismatches = []
    for (table, index, function, (column, value)), want in zip(
        CASES, older.result["decisions"], strict=True
    ):
        if "error" in want:
            continue
        got = _ours(older.parts[table], index, function, column, value)
        if got != want:
            mismatches.append((table, index, function, value))
    assert not mismatches, (len(mismatches), len(CASES), mismatches[:50])

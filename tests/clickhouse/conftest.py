"""The oracle of the ClickHouse tests: ClickHouse itself, in chDB. One chDB session writes a few
small MergeTree tables once for the whole run (wide and compact parts, packed and stand-alone
indexes, compressed and plain marks, NONE, LZ4, ZSTD and a chained codec, several parts merged
and not), and answers which granules it reads for a predicate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

chdb = pytest.importorskip("chdb", reason="chDB (ClickHouse in a Python module) is not installed")
pytest.importorskip("lz4", reason="the clickhouse extra (lz4, zstandard) is not installed")

from chdb import session as chdb_session  # noqa: E402

# The settings that make indexHint() show exactly the granules a skip index keeps (FORMATS.md).
DECISION_SETTINGS = (
    "use_skip_indexes_on_data_read=0, use_query_condition_cache=0, "
    "use_statistics_for_part_pruning=0, optimize_empty_string_comparisons=0"
)

TYPED_COLUMNS = """
    u UInt64, i Int32, f Float64, s String, uid UUID, d Date, dt DateTime('UTC'),
    lc LowCardinality(String), ns Nullable(String), fs FixedString(8), arr Array(String),
    u8 UInt8, i64 Int64, f32 Float32, earr Array(String),
    INDEX bf_u u TYPE bloom_filter GRANULARITY 1,
    INDEX bf_i i TYPE bloom_filter(0.01) GRANULARITY 2,
    INDEX bf_f f TYPE bloom_filter(0.05) GRANULARITY 1,
    INDEX bf_s s TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX bf_uid uid TYPE bloom_filter GRANULARITY 1,
    INDEX bf_d d TYPE bloom_filter GRANULARITY 1,
    INDEX bf_dt dt TYPE bloom_filter GRANULARITY 1,
    INDEX bf_lc lc TYPE bloom_filter GRANULARITY 1,
    INDEX bf_ns ns TYPE bloom_filter GRANULARITY 1,
    INDEX bf_fs fs TYPE bloom_filter GRANULARITY 1,
    INDEX bf_arr arr TYPE bloom_filter(0.02) GRANULARITY 1,
    INDEX bf_multi (u, s) TYPE bloom_filter GRANULARITY 1,
    INDEX bf_u8 u8 TYPE bloom_filter GRANULARITY 1,
    INDEX bf_earr earr TYPE bloom_filter GRANULARITY 1,
    INDEX bf_i64 i64 TYPE bloom_filter GRANULARITY 1,
    INDEX bf_f32 f32 TYPE bloom_filter GRANULARITY 1,
    INDEX tk_s s TYPE tokenbf_v1(128, 3, 0) GRANULARITY 1,
    INDEX tk_arr arr TYPE tokenbf_v1(64, 2, 7) GRANULARITY 1,
    INDEX tk_fs fs TYPE tokenbf_v1(64, 2, 0) GRANULARITY 1,
    INDEX ng_s s TYPE ngrambf_v1(3, 256, 2, 0) GRANULARITY 2,
    INDEX ng_lc lc TYPE ngrambf_v1(2, 64, 3, 11) GRANULARITY 1,
    INDEX ng_arr arr TYPE ngrambf_v1(2, 64, 2, 0) GRANULARITY 1,
    INDEX tk_lower lower(s) TYPE tokenbf_v1(64, 2, 0) GRANULARITY 1,
    INDEX mm_u u TYPE minmax GRANULARITY 1
"""
# Rows: numbers, strings of words (some non-ASCII), dates and times; arrays of 0-3 words.
TYPED_SELECT = """
SELECT
    number * 7 AS u,
    toInt32(number * 13) - 1000 AS i,
    number / 4 AS f,
    concat('w', toString(number % 37), ' v', toString(number), if(number % 5 = 0, ' été', '')) AS s,
    toUUID(concat(lower(lpad(hex(number * 7919), 8, '0')), '-1234-5678-9abc-',
                  lower(lpad(hex(number), 12, '0')))) AS uid,
    toDate('2020-01-01') + number % 400 AS d,
    toDateTime('2021-03-04 05:06:07', 'UTC') + number * 3601 AS dt,
    concat('lc', toString(number % 11)) AS lc,
    if(number % 3 = 0, NULL, concat('n', toString(number))) AS ns,
    toFixedString(concat('f', toString(number % 50)), 8) AS fs,
    arrayMap(j -> concat('a', toString((number + j) % 41)), range(1 + number % 3)) AS arr,
    toUInt8(number % 200) AS u8,
    toInt64(number) * -40000000 AS i64,
    toFloat32(number / 10) AS f32,
    if(number % 96 < 40, [], [toString(number % 7)]) AS earr
FROM numbers({start}, {count})
"""

# Over 127 bytes with its file prefix: stand-alone files are named by its SipHash128.
LONG_NAME = "idx_" + "long" * 32
SMALL_COLUMNS = f"""
    u UInt64, s String, arr Array(String),
    INDEX bf_s s TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX bf_u u TYPE bloom_filter GRANULARITY 2,
    INDEX tk_s s TYPE tokenbf_v1(128, 3, 0) GRANULARITY 1,
    INDEX ng_s s TYPE ngrambf_v1(4, 128, 2, 5) GRANULARITY 1,
    INDEX `long index name with spaces!` arr TYPE bloom_filter GRANULARITY 1,
    INDEX {LONG_NAME} s TYPE tokenbf_v1(32, 2, 0) GRANULARITY 1
"""
SMALL_SELECT = """
SELECT number * 3 AS u,
       concat('t', toString(number % 29), '-', toString(number)) AS s,
       arrayMap(j -> toString(number * j), range(number % 3 + 1)) AS arr
FROM numbers({start}, {count})
"""


@dataclass
class Table:
    """A table chDB wrote: its name, statement, and data directory's parts."""

    name: str
    sql: str
    data_dir: Path
    settings: str
    parts: list[str] = field(default_factory=list)


@dataclass
class ClickHouse:
    session: Any
    root: Path
    tables: dict[str, Table] = field(default_factory=dict)

    def query(self, sql: str) -> list[dict[str, Any]]:
        text = str(self.session.query(sql, "JSONEachRow"))
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def granules(
        self, table: str, predicate: str, index: str, all_indexes: list[str]
    ) -> set[tuple[str, int]]:
        """The (part, data granule) pairs ClickHouse reads for ``predicate`` with only ``index``."""
        others = ",".join(f"`{n}`" for n in all_indexes if n != index)
        ignore = f"ignore_data_skipping_indices='{others}', " if others else ""
        rows = self.query(
            f"SELECT DISTINCT _part, _part_granule_offset FROM db.{table} "
            f"WHERE indexHint({predicate}) "
            f"SETTINGS {ignore}{DECISION_SETTINGS}"
        )
        return {(r["_part"], int(r["_part_granule_offset"])) for r in rows}


TABLES: dict[str, tuple[str, str, str, list[tuple[int, int]], bool]] = {
    # name: (columns, select, settings, inserts (start, count), merge)
    "typed_wide": (
        TYPED_COLUMNS,
        TYPED_SELECT,
        "index_granularity=32, min_bytes_for_wide_part=0",
        [(0, 300), (300, 200)],
        False,
    ),
    "typed_compact": (
        TYPED_COLUMNS,
        TYPED_SELECT,
        "index_granularity=32, min_bytes_for_wide_part=1000000000, "
        "packed_skip_index_max_bytes=0, compress_marks=0, default_compression_codec='ZSTD(1)'",
        [(0, 250)],
        False,
    ),
    "chained": (
        SMALL_COLUMNS,
        SMALL_SELECT,
        "index_granularity=16, min_bytes_for_wide_part=0, packed_skip_index_max_bytes=0, "
        "default_compression_codec='NONE, LZ4', old_parts_lifetime=3600",
        [(0, 150), (150, 90)],
        True,
    ),
    "plain": (
        SMALL_COLUMNS,
        SMALL_SELECT,
        "index_granularity=16, min_bytes_for_wide_part=0, default_compression_codec='NONE', "
        "marks_compression_codec='LZ4'",
        [(0, 120)],
        False,
    ),
    "fixed_granularity": (
        SMALL_COLUMNS,
        SMALL_SELECT,
        "index_granularity=16, index_granularity_bytes=0, min_bytes_for_wide_part=0, "
        "packed_skip_index_max_bytes=0, compress_marks=0",
        [(0, 100)],
        False,
    ),
    "wide_plain_marks": (
        SMALL_COLUMNS,
        SMALL_SELECT,
        "index_granularity=16, min_bytes_for_wide_part=0, packed_skip_index_max_bytes=0, "
        "compress_marks=0, default_compression_codec='ZSTD(3)'",
        [(0, 90)],
        False,
    ),
    "compact_packed": (
        SMALL_COLUMNS,
        SMALL_SELECT,
        "index_granularity=16, min_bytes_for_wide_part=1000000000, "
        "default_compression_codec='LZ4HC(5)', old_parts_lifetime=3600",
        [(0, 100), (100, 100)],
        True,
    ),
}


# Package scope: chDB runs one embedded server a process, so this one (on its own data
# directory) is closed before the rest of the suite's chDB tests open theirs in memory.
@pytest.fixture(scope="package")
def clickhouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClickHouse]:
    root = tmp_path_factory.mktemp("clickhouse")
    session = chdb_session.Session(str(root))
    ch = ClickHouse(session, root)
    ch.session.query("CREATE DATABASE IF NOT EXISTS db")
    for name, (columns, select, settings, inserts, merge) in TABLES.items():
        ch.session.query(
            f"CREATE TABLE db.{name} ({columns}) ENGINE = MergeTree ORDER BY tuple() "
            f"SETTINGS {settings}"
        )
        for start, count in inserts:
            ch.session.query(f"INSERT INTO db.{name} {select.format(start=start, count=count)}")
        if merge:
            ch.session.query(f"OPTIMIZE TABLE db.{name} FINAL")
            ch.session.query(f"INSERT INTO db.{name} {select.format(start=10_000, count=40)}")
        where = f"database = 'db' AND {{}} = '{name}'"
        (info,) = ch.query(
            f"SELECT data_paths, create_table_query FROM system.tables WHERE {where.format('name')}"
        )
        path, sql = info["data_paths"][0], info["create_table_query"]
        parts = [
            r["name"]
            for r in ch.query(
                f"SELECT name FROM system.parts WHERE {where.format('table')} AND active "
                "ORDER BY name"
            )
        ]
        ch.tables[name] = Table(name, sql, Path(path), settings, parts)
    yield ch
    session.close()

"""Parts written by older ClickHouse servers (chDB 2.1.1 = 24.8, chDB 0.15.0 = 23.6), each in
its own environment (``older_env.py``): read with every marks format they write (``.mrk``,
``.mrk2``, ``.cmrk2``, ``.mrk3``, ``.cmrk3``), decided as they decide, and rebuilt byte for byte
with the writer's rule for a ``bloom_filter`` granule's N (rows before 23.9)."""

from __future__ import annotations

import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from parquet_bloom import clickhouse as pbch
from parquet_bloom.errors import BloomFilterError, CorruptFileError
from tests.clickhouse.older_env import OLDER, OLDER_TABLES, Unavailable, environment, write_tables
from tests.clickhouse.test_damage import flip, located, reseal
from tests.clickhouse.test_decisions import index_cases, predicate
from tests.skips import PYPI_OUT_OF_REACH

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


def _request(version: str) -> list[dict[str, Any]]:
    """The predicates to answer and how: rows under indexHint() where the server consults the
    index there (23.6 does not for token and n-gram indexes), else EXPLAIN's granule count
    (compared only for GRANULARITY 1, see test_decisions_match)."""
    cases = []
    for table, index, function, (column, value) in CASES:
        indexes = pbch.parse_table_sql(
            f"CREATE TABLE t ({OLDER_TABLES[table][0]}) ENGINE = MergeTree"
        ).indexes
        d = indexes[index]
        hint = _hint_used(version, d.type)
        cases.append(
            {
                "table": table,
                "index": index,
                "all_indexes": list(indexes),
                "predicate": predicate(function, column, value),
                "hint": hint,
                "explain": not hint and d.granularity == 1,
            }
        )
    return cases


def _hint_used(version: str, kind: str) -> bool:
    return OLDER[version] != "23.6" or kind == pbch.BLOOM_FILTER


def _one(version: str, root: Path) -> tuple[dict[str, Any], float | None] | str:
    try:
        python, made_in = environment(version)
    except Unavailable as err:
        return f"no environment with chDB {version} (ClickHouse {OLDER[version]}): {err}"
    return write_tables(python, root, _request(version)), made_in


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
        # Why, in the output; the skip itself is allowed only where PyPI is out of reach.
        print(got, file=sys.stderr)
        pytest.skip(PYPI_OUT_OF_REACH)
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


def _ours(
    parts: list[pbch.Part], index: str, function: str, column: str, value: Any
) -> tuple[dict[str, list[list[int]]], list[int]]:
    """The rows our decisions keep ([start, end) runs per part) and the data granules kept
    and in all, as EXPLAIN counts them."""
    rows: dict[str, list[list[int]]] = {}
    kept = total = 0
    for part in parts:
        idx = part.index(index)
        g = idx.definition.granularity
        n = len(part.data_granule_rows)
        total += n
        args = (column, value) if len(idx.definition.columns or ()) > 1 else (value,)
        keep = part.might_match(index, function, *args)
        runs: list[list[int]] = []
        for i, (k, (start, end)) in enumerate(zip(keep, idx.granule_rows, strict=True)):
            if not k or start == end:
                continue
            kept += min((i + 1) * g, n) - i * g
            if runs and runs[-1][1] == start:
                runs[-1][1] = end
            else:
                runs.append([start, end])
        if runs:
            rows[part.name] = runs
    return rows, [kept, total]


# Where an older server decides otherwise than 26.9 (which might_match follows): (index type,
# function) pairs, or (index type, function, constant) cases; each seen with that server.
DIFFERENCES: dict[str, set[tuple[Any, ...]]] = {
    # 24.8 does not use a token or n-gram index for hasAll: it reads every granule.
    "24.8": {("tokenbf_v1", "hasAll"), ("ngrambf_v1", "hasAll")},
    "23.6": {
        # Every granule read: text indexes for hasAny/hasAll; bloom_filter for hasAny([]).
        ("tokenbf_v1", "hasAll"),
        ("ngrambf_v1", "hasAll"),
        ("tokenbf_v1", "hasAny"),
        ("ngrambf_v1", "hasAny"),
        ("bloom_filter", "hasAny", ()),
        # A token index used for prefixes, suffixes and multiSearchAny (later servers do not).
        ("tokenbf_v1", "startsWith"),
        ("tokenbf_v1", "endsWith"),
        ("tokenbf_v1", "multiSearchAny"),
        # `u8 = 300` on a UInt8 column: 23.6 skips granules, later servers read all.
        ("bloom_filter", "equals", 300),
    },
}


def _differs(version: str, kind: str, function: str, value: Any) -> bool:
    known = DIFFERENCES[version]
    const = tuple(value) if isinstance(value, list) else value
    return (kind, function) in known or (kind, function, const) in known


def test_decisions_match(older: Older) -> None:
    """The rows ClickHouse reads for indexHint(<predicate>) with one skip index equal ours, but
    for the listed differences of the version. 23.6 does not consult token and n-gram indexes
    inside indexHint: for those the granule count of EXPLAIN indexes = 1 is compared, for
    GRANULARITY 1 (23.6 counts otherwise for larger ones; their bloom_filter rows agree)."""
    short = OLDER[older.chdb]
    mismatches = []
    rows_compared = counts_compared = granules_compared = differing = 0
    for (table, index, function, (column, value)), want in zip(
        CASES, older.result["decisions"], strict=True
    ):
        parts = older.parts[table]
        definition = parts[0].index(index).definition
        if _differs(short, definition.type, function, value):
            differing += 1
            continue
        rows, granules = _ours(parts, index, function, column, value)
        if "rows" in want:
            rows_compared += 1
            granules_compared += granules[1]
            if rows != want["rows"]:
                mismatches.append(("rows", table, index, function, value))
        if "granules" in want:
            counts_compared += 1
            # An index EXPLAIN does not list was not used: every granule read.
            expect = want["granules"] or [granules[1], granules[1]]
            if granules != expect:
                mismatches.append(("count", table, index, function, value, granules, expect))
    assert not mismatches, (len(mismatches), mismatches[:20])
    print(
        f"ClickHouse {older.version}: {rows_compared} row sets ({granules_compared} granule "
        f"decisions) and {counts_compared} EXPLAIN counts equal; "
        f"{differing} cases differ by version"
    )
    assert rows_compared > len(CASES) // 4
    assert short != "23.6" or counts_compared > len(CASES) // 5


def test_granules_rebuilt_and_values_found(older: Older) -> None:
    """Every granule of every index rebuilt from its rows byte for byte with the writer's N
    (distinct hashes from 23.9, rows before), and every value found in its filter."""
    before_23_9 = tuple(int(x) for x in older.version.split(".")[:2]) < (23, 9)
    filters = values = granules = 0
    for table, t in older.result["tables"].items():
        for part in older.parts[table]:
            data = t["rows"][part.name]
            for idx in part.indexes.values():
                d = idx.definition
                assert d.columns is not None
                for g, (start, end) in enumerate(idx.granule_rows):
                    granule = idx.filters[g]
                    cols = [data[c][start:end] for c in d.columns]
                    if d.type == pbch.BLOOM_FILTER:
                        n = granule[0].num_rows
                        if before_23_9:
                            assert n == end - start, (table, part.name, d.name, g)
                        else:
                            assert n == max(
                                len(np.unique(pbch.element_hashes(v, ty)))
                                for v, ty in zip(cols, idx.column_types, strict=True)
                            ), (table, part.name, d.name, g)
                    for v, ty, f in zip(cols, idx.column_types, granule, strict=True):
                        if d.type == pbch.BLOOM_FILTER:
                            built = pbch.ClickHouseBloomFilter.build(
                                v, kind=d.type, column_type=ty, fpp=idx.fpp_asked or 0.025,
                                num_rows=n,
                            )  # fmt: skip
                        else:
                            built = pbch.build_filter(v, ty, d.type, *d.arguments)
                        assert built.to_bytes() == f.to_bytes(), (table, part.name, d.name, g)
                        filters += 1
                        flat = [x for a in v for x in a] if ty.is_array else v
                        flat = [x for x in flat if x is not None]
                        assert f.might_contain_many(flat).all(), (table, part.name, d.name, g)
                        values += len(flat)
                    granules += 1
    print(f"ClickHouse {older.version}: {granules} granules, {filters} filters, {values} values")
    assert granules > 0 and values > 0


def test_marks_formats(older: Older) -> None:
    """The older servers' marks: .mrk (fixed granularity), .mrk2/.cmrk2 (wide), .mrk3/.cmrk3
    (compact), each read above (.idx2 is a minmax index's)."""
    seen = {
        name.rsplit(".", 1)[1]
        for parts in older.parts.values()
        for part in parts
        for name in part.checksums
        if name.startswith("skp_idx_") and not name.endswith((".idx", ".idx2"))
    }
    assert seen == {"mrk", "mrk2", "cmrk2", "mrk3", "cmrk3"}


@pytest.mark.parametrize(
    ("table", "name"),
    [
        ("typed_compact", "skp_idx_bf_s.mrk3"),
        ("typed_compact", "data.mrk3"),
        ("compact_merged", "skp_idx_tk_s.cmrk3"),
        ("fixed_granularity", "skp_idx_ng_s.mrk"),
        ("typed_wide", "skp_idx_bf_arr.cmrk2"),
        ("typed_wide", "skp_idx_bf_arr.idx"),
    ],
)
def test_damaged_older_files_are_located(
    older: Older, tmp_path: Path, table: str, name: str
) -> None:
    """Flipped bytes and truncations of the older servers' marks and index files: a located
    CorruptFileError through checksums.txt; behind a checksums.txt made to agree, a located
    typed error from the marks, blocks and granule layout (or, for a flip in a mark's third
    field, no change to any decision)."""
    source = Path(older.result["tables"][table]["data_path"]) / older.parts[table][0].name
    sql = older.result["tables"][table]["sql"]
    part = tmp_path / source.name
    shutil.copytree(source, part)
    original = (part / name).read_bytes()
    size = len(original)
    part_columns = older.parts[table][0].column_types
    for offset in sorted({0, 1, 16, 17, 20, size // 2, size - 1}):
        for resealed in (False, True):
            shutil.copyfile(source / "checksums.txt", part / "checksums.txt")
            (part / name).write_bytes(original)
            flip(part / name, offset)
            if resealed:
                reseal(part, name)
            try:
                pbch.open_part(part, sql)
            except BloomFilterError as err:
                assert located(err, name)
                assert isinstance(err, CorruptFileError) or resealed
            else:
                # Unread fields: a skip index mark's third, a data mark's column offsets.
                assert resealed and name.endswith(".mrk3")
                width = 24 if name != "data.mrk3" else 8 * (2 * len(part_columns) + 1)
                assert (
                    (offset % width >= 16) if name != "data.mrk3" else (offset % width < width - 8)
                )
    for cut in sorted({0, 1, 24, size // 2, size - 1}):
        shutil.copyfile(source / "checksums.txt", part / "checksums.txt")
        (part / name).write_bytes(original[:cut])
        with pytest.raises(CorruptFileError) as info:
            pbch.open_part(part, sql)
        assert located(info.value, name)

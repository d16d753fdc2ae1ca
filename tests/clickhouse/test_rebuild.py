"""Every granule's filter rebuilt from its rows gives ClickHouse's bytes, and every value of
every granule is found in its filter (no false negative), in every part chDB wrote."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pytest

from parquet_bloom import clickhouse as pbch
from tests.clickhouse.conftest import TABLES, ClickHouse


@pytest.fixture(scope="module")
def rows(clickhouse: ClickHouse) -> dict[tuple[str, str], dict[str, list[Any]]]:
    """Each part's columns (rows in part order), as ClickHouse returns them."""
    out: dict[tuple[str, str], dict[str, list[Any]]] = {}
    for name in TABLES:
        got = clickhouse.query(
            f"SELECT _part, * FROM db.{name} ORDER BY _part, _part_offset "
            "SETTINGS output_format_json_quote_64bit_integers = 0"
        )
        by_part: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
        for r in got:
            part = r.pop("_part")
            for k, v in r.items():
                by_part[part][k].append(v)
        for part, cols in by_part.items():
            out[(name, part)] = cols
    return out


def index_granules() -> list[tuple[str, str]]:
    return [
        (table, index)
        for table, (columns, *_r) in TABLES.items()
        for index, d in pbch.parse_table_sql(
            f"CREATE TABLE t ({columns}) ENGINE = MergeTree"
        ).indexes.items()
        if d.columns is not None and d.type != "minmax"
    ]


@pytest.fixture(scope="module")
def parts(clickhouse: ClickHouse) -> dict[str, list[pbch.Part]]:
    return {n: pbch.open_table(t.data_dir, t.sql) for n, t in clickhouse.tables.items()}


@pytest.mark.parametrize(("table", "index"), index_granules())
def test_granules_rebuilt_byte_for_byte(
    parts: dict[str, list[pbch.Part]],
    rows: dict[tuple[str, str], dict[str, list[Any]]],
    table: str,
    index: str,
) -> None:
    checked = 0
    for part in parts[table]:
        idx = part.index(index)
        d = idx.definition
        assert d.columns is not None
        data = rows[(table, part.name)]
        for g, (start, end) in enumerate(idx.granule_rows):
            granule = idx.filters[g]
            if d.type == pbch.BLOOM_FILTER:
                # A multi-column granule sizes every column's filter by the largest count of
                # distinct hashes among them.
                n = granule[0].num_rows
                for c, t, f in zip(d.columns, idx.column_types, granule, strict=True):
                    built = pbch.ClickHouseBloomFilter.build(
                        data[c][start:end],
                        kind=d.type,
                        column_type=t,
                        fpp=idx.fpp_asked or 0.025,
                        num_rows=n,
                    )
                    assert built.to_bytes() == f.to_bytes(), (part.name, g, c)
                distinct = max(
                    len(np.unique(pbch.element_hashes(data[c][start:end], t)))
                    for c, t in zip(d.columns, idx.column_types, strict=True)
                )
                assert n == distinct
            else:
                for c, t, f in zip(d.columns, idx.column_types, granule, strict=True):
                    built = pbch.build_filter(data[c][start:end], t, d.type, *d.arguments)
                    assert built.to_bytes() == f.to_bytes(), (part.name, g, c)
            checked += 1
    assert checked > 0


@pytest.mark.parametrize(("table", "index"), index_granules())
def test_no_false_negative(
    parts: dict[str, list[pbch.Part]],
    rows: dict[tuple[str, str], dict[str, list[Any]]],
    table: str,
    index: str,
) -> None:
    found = 0
    for part in parts[table]:
        idx = part.index(index)
        d = idx.definition
        assert d.columns is not None
        data = rows[(table, part.name)]
        for g, (start, end) in enumerate(idx.granule_rows):
            for c, t, f in zip(d.columns, idx.column_types, idx.filters[g], strict=True):
                values = data[c][start:end]
                if t.is_array:
                    values = [v for arr in values for v in arr]
                values = [v for v in values if v is not None]
                assert f.might_contain_many(values).all(), (part.name, g, c)
                found += len(values)
    assert found > 0


def test_empty_array_granules_hold_hash_zero(parts: dict[str, list[pbch.Part]]) -> None:
    """A granule whose rows (of one write block) are all empty arrays records one hash, 0."""
    part = parts["typed_wide"][0]
    first = part.filters("bf_earr")[0]  # rows 0-31: all empty
    assert first.num_rows == 1
    assert first.contains_hashes(np.zeros(1, dtype=np.uint64)).all()
    assert not first.might_contain("3")

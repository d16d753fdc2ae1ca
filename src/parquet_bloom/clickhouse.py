"""ClickHouse's Bloom filter skip indexes: read them from MergeTree parts, decide per granule as
ClickHouse does, and build a granule's filter byte for byte from its rows.

ClickHouse keeps a data-skipping index of a MergeTree table in each part: ``bloom_filter([fpp])``
(for ``=``, ``IN``, ``has``, ``hasAny``, ``hasAll``, ``indexOf``), ``tokenbf_v1(size, hashes,
seed)`` and ``ngrambf_v1(n, size, hashes, seed)`` (for ``hasToken``, ``LIKE``, ``startsWith``,
``endsWith``, ``multiSearchAny`` and the equalities), one filter an index column for each index
granule (GRANULARITY data granules). The definitions live in the table's statement, not the
part: :func:`open_part` takes it (``table_sql``) or finds it in the ClickHouse data directory
the part lies in. docs/clickhouse.md describes the format with links to ClickHouse's sources.

::

    from parquet_bloom import clickhouse

    part = clickhouse.open_part("data/store/3f1/3f1.../all_1_1_0")
    part.might_match("idx_s", "hasToken", "error")      # numpy bool a granule
    part.granule_rows("idx_s")                           # [(0, 8192), (8192, 16384), ...]
    f = part.filters("idx_id")[0]                        # ClickHouseBloomFilter
    f.might_contain(42), f.fpp(), f.estimate_ndv()
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from parquet_bloom._clickhouse.cityhash import (
    city_hash64,
    city_hash64_with_seed,
    city_hash128,
    city_hash128_with_seed,
)
from parquet_bloom._clickhouse.conditions import FUNCTIONS
from parquet_bloom._clickhouse.filters import (
    BLOOM_FILTER,
    DEFAULT_FPP,
    NGRAMBF,
    TOKENBF,
    ClickHouseBloomFilter,
    best_practices,
    element_hashes,
)
from parquet_bloom._clickhouse.part import Index, Part, escape_for_file_name, open_part
from parquet_bloom._clickhouse.schema import IndexDefinition, TableSchema, parse_table_sql
from parquet_bloom._clickhouse.types import ColumnType, parse_type

__all__ = [
    "BLOOM_FILTER",
    "DEFAULT_FPP",
    "FUNCTIONS",
    "NGRAMBF",
    "TOKENBF",
    "ClickHouseBloomFilter",
    "ColumnType",
    "Index",
    "IndexDefinition",
    "Part",
    "PartName",
    "TableSchema",
    "active_parts",
    "best_practices",
    "build_filter",
    "city_hash64",
    "city_hash64_with_seed",
    "city_hash128",
    "city_hash128_with_seed",
    "element_hashes",
    "escape_for_file_name",
    "open_part",
    "open_table",
    "parse_table_sql",
    "parse_type",
]

for _cls in (ClickHouseBloomFilter, ColumnType, Index, IndexDefinition, Part, TableSchema):
    _cls.__module__ = __name__

_PART_NAME = re.compile(r"^(.+)_(\d+)_(\d+)_(\d+)(?:_(\d+))?$")


@dataclass(frozen=True)
class PartName:
    """A part directory's name: partition, block range, merge level, mutation."""

    partition: str
    min_block: int
    max_block: int
    level: int
    mutation: int

    @classmethod
    def parse(cls, name: str) -> PartName | None:
        m = _PART_NAME.match(name)
        if not m:
            return None
        return cls(
            m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5) or 0)
        )

    def covers(self, other: PartName) -> bool:
        """Whether this part replaces ``other`` (ClickHouse's ``MergeTreePartInfo::contains``)."""
        return (
            self.partition == other.partition
            and self.min_block <= other.min_block
            and other.max_block <= self.max_block
            and self.level >= other.level
            and self.mutation >= other.mutation
            and self != other
        )


def active_parts(names: Iterable[str]) -> list[str]:
    """The part names not covered by another's block range (old parts wait on disk for cleanup)."""
    parsed = {n: PartName.parse(n) for n in names}
    parts = {n: p for n, p in parsed.items() if p is not None}
    return sorted(
        n for n, p in parts.items() if not any(q.covers(p) for m, q in parts.items() if m != n)
    )


def open_table(table_data_dir: str | os.PathLike[str], table_sql: str | None = None) -> list[Part]:
    """The active parts of a table's data directory (local), opened (see :func:`open_part`)."""
    root = os.fspath(table_data_dir)
    names = [
        n
        for n in os.listdir(root)
        if os.path.isdir(os.path.join(root, n))
        and not n.startswith(("tmp", "detached", "delete_tmp"))
    ]
    return [open_part(os.path.join(root, n), table_sql) for n in active_parts(names)]


def build_filter(
    values: Iterable[Any],
    column_type: str | ColumnType,
    index_type: str = BLOOM_FILTER,
    *arguments: float,
) -> ClickHouseBloomFilter:
    """The filter ClickHouse writes for one index column of a granule holding ``values`` (its
    rows), for an index ``index_type(arguments)`` as in the table statement: ``bloom_filter``
    (fpp), ``tokenbf_v1`` (size, hashes, seed), ``ngrambf_v1`` (n, size, hashes, seed)."""
    if index_type == BLOOM_FILTER:
        fpp = float(arguments[0]) if arguments else DEFAULT_FPP
        return ClickHouseBloomFilter.build(
            values, kind=BLOOM_FILTER, column_type=column_type, fpp=fpp
        )
    if index_type == TOKENBF:
        size, k, seed = (int(a) for a in arguments)
        return ClickHouseBloomFilter.build(
            values, kind=TOKENBF, column_type=column_type, num_bytes=size, num_hashes=k, seed=seed
        )
    if index_type == NGRAMBF:
        n, size, k, seed = (int(a) for a in arguments)
        return ClickHouseBloomFilter.build(
            values,
            kind=NGRAMBF,
            column_type=column_type,
            num_bytes=size,
            num_hashes=k,
            seed=seed,
            ngram_size=n,
        )
    raise ValueError(f"unknown index type {index_type!r}")

"""A MergeTree table's columns and skip indexes from its ``CREATE``/``ATTACH TABLE`` statement
(the ``.sql`` file ClickHouse keeps in its metadata directory). Only what the skip indexes
need is read: column names and types, ``INDEX name expr TYPE type(args) GRANULARITY g``, and the
``index_granularity`` setting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from parquet_bloom._clickhouse.types import ColumnType, parse_type, split_args

__all__ = ["IndexDefinition", "TableSchema", "parse_table_sql"]

_COLUMN_END = re.compile(
    r"\s+(?:DEFAULT|MATERIALIZED|ALIAS|EPHEMERAL|CODEC|COMMENT|TTL|STATISTICS|SETTINGS|NULL|NOT|"
    r"PRIMARY)\b",
    re.I,
)
DEFAULT_INDEX_GRANULARITY = 8192


@dataclass(frozen=True)
class IndexDefinition:
    """One skip index: its name, the columns of its expression (None when the expression is
    not plain columns), its type and arguments, and GRANULARITY."""

    name: str
    expression: str
    columns: tuple[str, ...] | None
    type: str
    arguments: tuple[float | int, ...]
    granularity: int


@dataclass
class TableSchema:
    """The columns (name -> type) and skip indexes of a table."""

    columns: dict[str, ColumnType] = field(default_factory=dict)
    indexes: dict[str, IndexDefinition] = field(default_factory=dict)
    index_granularity: int = DEFAULT_INDEX_GRANULARITY
    uuid: str | None = None


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] and name[0] in '`"':
        return name[1:-1].replace("\\" + name[0], name[0])
    return name


def _columns_of(expression: str) -> tuple[str, ...] | None:
    e = expression.strip()
    ident = r"(?:`(?:[^`\\]|\\.)*`|\"[^\"]*\"|[A-Za-z_][\w.]*)"
    if re.fullmatch(ident, e):
        return (_unquote(e),)
    m = re.fullmatch(r"(?:tuple)?\((.*)\)", e, re.S)
    if m:
        parts = split_args(m.group(1))
        if parts and all(re.fullmatch(ident, p) for p in parts):
            return tuple(_unquote(p) for p in parts)
    return None


def _number(text: str) -> float | int:
    return int(text) if re.fullmatch(r"\d+", text) else float(text)


def _parse_index(item: str) -> IndexDefinition:
    m = re.fullmatch(
        r"INDEX\s+(`(?:[^`\\]|\\.)*`|\S+)\s+(.*?)\s+TYPE\s+(\w+)\s*(?:\((.*?)\))?"
        r"(?:\s+GRANULARITY\s+(\d+))?\s*",
        item,
        re.S | re.I,
    )
    if not m:
        raise ValueError(f"cannot read index definition {item!r}")
    name, expr, kind, args, granularity = m.groups()
    arguments = tuple(_number(a) for a in split_args(args or ""))
    return IndexDefinition(
        _unquote(name), expr.strip(), _columns_of(expr), kind, arguments, int(granularity or 1)
    )


def parse_table_sql(sql: str) -> TableSchema:
    """The columns and skip indexes of a ``CREATE TABLE``/``ATTACH TABLE`` statement."""
    start = sql.find("(")
    if start < 0:
        raise ValueError("not a CREATE/ATTACH TABLE statement: no column list")
    depth, end, quote = 0, -1, ""
    for i in range(start, len(sql)):
        ch = sql[i]
        if quote:
            if ch == quote and sql[i - 1] != "\\":
                quote = ""
        elif ch in "'`\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                end = i
                break
    if end < 0:
        raise ValueError("unbalanced parentheses in the table statement")
    schema = TableSchema()
    m = re.search(r"\bUUID\s+'([0-9a-fA-F-]{36})'", sql[:start])
    schema.uuid = m.group(1) if m else None
    for item in split_args(sql[start + 1 : end]):
        head = item.split(None, 1)[0].upper() if item.split() else ""
        if head == "INDEX":
            index = _parse_index(item)
            schema.indexes[index.name] = index
        elif head in ("PROJECTION", "CONSTRAINT", "PRIMARY"):
            continue
        else:
            nm = re.match(r"(`(?:[^`\\]|\\.)*`|\"[^\"]*\"|\S+)\s+(.*)", item, re.S)
            if not nm:
                continue
            rest = nm.group(2)
            cut = _COLUMN_END.search(" " + rest)
            type_text = rest if cut is None else (" " + rest)[: cut.start()]
            schema.columns[_unquote(nm.group(1))] = parse_type(type_text)
    s = re.search(r"\bSETTINGS\b(.*)$", sql[end:], re.S | re.I)
    if s:
        g = re.search(r"\bindex_granularity\s*=\s*(\d+)", s.group(1))
        if g:
            schema.index_granularity = int(g.group(1))
    return schema

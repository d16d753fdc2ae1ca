"""Which granules ClickHouse reads, decided as ``MergeTreeIndexConditionBloomFilter`` (for
``bloom_filter``) and ``MergeTreeConditionBloomFilterText`` (``tokenbf_v1``/``ngrambf_v1``)
decide for one atom ``function(column, constant)``.

A negated atom (notEquals, notIn, notLike) is evaluated and negated as a pair (can be true,
can be false) whose "can be true" stays true: such atoms never skip a granule. A function an
index cannot use, a constant that does not convert to the column's type (or converts to NULL),
or a column not in the index: every granule is kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._clickhouse.filters import BLOOM_FILTER, ClickHouseBloomFilter
from parquet_bloom._clickhouse.types import ColumnType, convert_literal, hash_values

if TYPE_CHECKING:
    from parquet_bloom._clickhouse.part import Index

__all__ = ["FUNCTIONS", "MULTI_VALUED", "might_match"]

FUNCTIONS = (
    "equals",
    "notEquals",
    "in",
    "notIn",
    "has",
    "hasAny",
    "hasAll",
    "indexOf",
    "hasToken",
    "like",
    "notLike",
    "startsWith",
    "endsWith",
    "multiSearchAny",
)
_NEGATED = ("notEquals", "notIn", "notLike")
# The functions whose constant is a sequence (a set or an array).
MULTI_VALUED = ("in", "notIn", "hasAny", "hasAll", "multiSearchAny")


def _column(index: Index, args: tuple[Any, ...]) -> tuple[int, tuple[Any, ...]]:
    """The index column the atom names (``column=`` first argument when the index has several:
    a str naming one of them) and the remaining constant arguments."""
    cols = index.definition.columns or ()
    if len(cols) > 1:
        if not args or args[0] not in cols:
            raise ValueError(f"index {index.name!r} has columns {cols}: name one first")
        return cols.index(args[0]), args[1:]
    return 0, args


def might_match(index: Index, function: str, *args: Any) -> NDArray[np.bool_]:
    """Per granule of ``index``: whether ClickHouse reads it for ``function(column, *args)``.

    ``in``/``notIn``/``hasAny``/``hasAll``/``multiSearchAny`` take one sequence of constants;
    the others one constant. For an index over several columns the column's name comes first.
    """
    if function not in FUNCTIONS:
        raise ValueError(f"unknown function {function!r}; one of {', '.join(FUNCTIONS)}")
    pos, rest = _column(index, args)
    if len(rest) != 1:
        raise ValueError(f"{function} takes one constant argument here, got {len(rest)}")
    value = rest[0]
    if function in MULTI_VALUED and (
        isinstance(value, str | bytes) or not hasattr(value, "__iter__")
    ):
        raise TypeError(f"{function} takes a sequence of constants, not {type(value).__name__}")
    keep = np.ones(len(index.filters), dtype=bool)
    if function in _NEGATED:
        return keep
    filters = [g[pos] for g in index.filters]
    t = index.column_types[pos]
    if index.type == BLOOM_FILTER:
        decide = _bloom_filter(function, value, t)
    else:
        decide = _text(function, value, t, filters[0] if filters else None)
    if decide is None:
        return keep
    return np.array([decide(f) for f in filters], dtype=bool)


def _hashes(values: list[Any], t: ColumnType) -> Any | None:
    prim = t.primitive
    converted = [convert_literal(v, prim) for v in values]
    if any(c is None for c in converted):
        return None
    return hash_values(converted, prim) if converted else np.zeros(0, dtype=np.uint64)


def _bloom_filter(function: str, value: Any, t: ColumnType) -> Any | None:
    if function in ("like", "startsWith", "endsWith", "multiSearchAny", "hasToken"):
        return None
    if function in ("equals",):
        if t.is_array:
            raise ValueError(
                "an array column's bloom_filter supports has(), indexOf(), hasAny(), hasAll()"
            )
        h = _hashes([value], t)
    elif function in ("has", "indexOf"):
        if not t.is_array:
            raise ValueError(f"{function} needs an array column")
        h = _hashes([value], t)
    elif function in ("hasAny", "hasAll"):
        if not t.is_array:
            raise ValueError(f"{function} needs an array column")
        h = _hashes(list(value), t)
        if h is None:
            return None
        if function == "hasAll":
            return lambda f: bool(f.contains_hashes(h).all())
        return lambda f: bool(f.contains_hashes(h).any())
    elif function == "in":
        values = list(value)
        prim = t.primitive
        converted = [convert_literal(v, prim) for v in values]
        kept = [c for c in converted if c is not None]
        if not kept:
            return lambda f: False
        h = hash_values(kept, prim)
        return lambda f: bool(f.contains_hashes(h).any())
    else:
        return None
    if h is None:
        return None
    return lambda f: bool(f.contains_hashes(h).all())


def _text_value(v: Any) -> bytes | None:
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, bytes | bytearray):
        return bytes(v)
    return None


def _text(
    function: str, value: Any, t: ColumnType, sample: ClickHouseBloomFilter | None
) -> Any | None:
    if sample is None:
        return None
    tok = sample.tokenizer
    assert tok is not None
    if function in ("in", "hasAny", "hasAll", "multiSearchAny"):
        if isinstance(value, str | bytes):
            return None
        items = [_text_value(v) for v in value]
        if any(i is None for i in items):
            return None
        strings = [i for i in items if i is not None]
        if function == "multiSearchAny":
            sets = [tok.substring_tokens(s, False, False) for s in strings]
        else:
            sets = [tok.tokens(s) for s in strings]
        if function == "hasAll":
            return lambda f: all(f.contains_tokens(s) for s in sets)
        return lambda f: any(f.contains_tokens(s) for s in sets)
    s = _text_value(value)
    if s is None:
        return None
    if function in ("equals", "has", "hasToken", "indexOf"):
        if function == "indexOf":
            return None
        tokens = tok.tokens(s)
    elif function == "like":
        tokens = tok.like_tokens(s)
    elif function == "startsWith":
        tokens = tok.substring_tokens(s, True, False)
    elif function == "endsWith":
        tokens = tok.substring_tokens(s, False, True)
    else:
        return None
    return lambda f: f.contains_tokens(tokens)

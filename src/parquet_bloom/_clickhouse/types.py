"""ClickHouse column types, literals converted to them, and the 64-bit hashes a ``bloom_filter``
index takes of their values (``src/Interpreters/BloomFilterHash.h``).

A number, date, time or UUID is hashed as ``intHash64`` of its bytes zero-extended to 64 bits
(``DefaultHash64``; a 128-bit UUID as ``intHash64(low ^ high)``; a Float32 first widened to
Float64); a String or FixedString as CityHash64 v1.0.2 of its bytes. ``Nullable``,
``LowCardinality`` and ``Array`` are looked through to the element type (a NULL row is hashed
as its nested default: the empty string, zero).
"""

from __future__ import annotations

import datetime as dt
import math
import re
import uuid as uuidlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._clickhouse.cityhash import MASK64, city_hash64, int_hash64_array

__all__ = ["ColumnType", "convert_literal", "hash_values", "parse_type", "split_args"]

# name -> (bytes, signed) of the fixed-width types a bloom_filter index hashes as integers.
_INTEGERS = {
    "UInt8": (1, False),
    "UInt16": (2, False),
    "UInt32": (4, False),
    "UInt64": (8, False),
    "Int8": (1, True),
    "Int16": (2, True),
    "Int32": (4, True),
    "Int64": (8, True),
    "Bool": (1, False),
}
_EPOCH = dt.date(1970, 1, 1)
_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class ColumnType:
    """A parsed ClickHouse type: ``name`` and its arguments (nested types or literals)."""

    name: str
    args: tuple[Any, ...] = ()

    def __str__(self) -> str:
        if not self.args:
            return self.name
        args = (str(a) if isinstance(a, ColumnType) else repr(a) for a in self.args)
        return f"{self.name}({', '.join(args)})"

    @property
    def primitive(self) -> ColumnType:
        """The type a bloom_filter hashes: Array, Nullable and LowCardinality looked through."""
        t = self
        while t.name in ("Array", "Nullable", "LowCardinality"):
            t = t.args[0]
        return t

    @property
    def is_array(self) -> bool:
        return self.name == "Array"

    @property
    def is_string(self) -> bool:
        return self.primitive.name in ("String", "FixedString")


def split_args(text: str) -> list[str]:
    out, depth, start, quote = [], 0, 0, ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'`\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def parse_type(text: str) -> ColumnType:
    """A ClickHouse type name as ``columns.txt`` and ``SHOW CREATE`` spell it."""
    text = text.strip()
    m = re.fullmatch(r"(\w+)\s*(?:\((.*)\))?", text, re.S)
    if not m:
        raise ValueError(f"not a ClickHouse type: {text!r}")
    name, inner = m.group(1), m.group(2)
    if inner is None:
        return ColumnType(name)
    args: list[Any] = []
    for a in split_args(inner):
        if a.startswith("'"):
            args.append(a[1:-1])
        elif re.fullmatch(r"-?\d+", a):
            args.append(int(a))
        elif name in ("Enum8", "Enum16"):
            args.append(a)
        else:
            args.append(parse_type(a))
    return ColumnType(name, tuple(args))


def _timezone(t: ColumnType) -> dt.tzinfo:
    if t.args and isinstance(t.args[-1], str):
        from zoneinfo import ZoneInfo

        return ZoneInfo(t.args[-1])
    return dt.timezone.utc


def convert_literal(value: Any, t: ColumnType, *, exact: bool = True) -> Any | None:
    """``value`` as a value of the primitive type ``t`` (``convertFieldToType``), or None where
    ClickHouse's conversion gives NULL (out of range, not exact, not parsable): the index is
    then not used. ``exact=False`` takes a Float32 value as the nearest Float32 (a row's value
    given as a Python float) instead of refusing it."""
    name = t.name
    if value is None:
        return None
    if name in _INTEGERS:
        width, signed = _INTEGERS[name]
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, float):
            if not math.isfinite(value) or value != int(value):
                return None
            value = int(value)
        if isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                return None
        if not isinstance(value, int):
            return None
        lo, hi = (
            (-(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1)
            if signed
            else (0, (1 << (8 * width)) - 1)
        )
        return value if lo <= value <= hi else None
    if name in ("Float32", "Float64"):
        if isinstance(value, bool | int | float):
            f = float(value)
            if name == "Float32":
                # convertFieldToType narrows a Float64 only when the value survives exactly.
                if math.isfinite(f) and abs(f) > _FLOAT32_MAX:
                    return None
                narrowed = float(np.float32(f))
                if exact and narrowed != f and not math.isnan(f):
                    return None
                f = narrowed
            return f
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                return None
        return None
    if name in ("Date", "Date32"):
        if isinstance(value, dt.datetime):
            value = value.date()
        if isinstance(value, str):
            value = _parse_date(value)
            if value is None:
                return None
        if isinstance(value, dt.date):
            days = (value - _EPOCH).days
        elif isinstance(value, int) and not isinstance(value, bool):
            days = value
        else:
            return None
        lo, hi = (0, 65535) if name == "Date" else (-25567, 120529)
        return days if lo <= days <= hi else None
    if name == "DateTime":
        if isinstance(value, str):
            try:
                value = dt.datetime.fromisoformat(value)
            except ValueError:
                return None
        if isinstance(value, dt.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=_timezone(t))
            secs = int(value.timestamp())
        elif isinstance(value, int) and not isinstance(value, bool):
            secs = value
        else:
            return None
        return secs if 0 <= secs <= 0xFFFFFFFF else None
    if name == "UUID":
        if isinstance(value, str):
            try:
                value = uuidlib.UUID(value)
            except ValueError:
                return None
        return value if isinstance(value, uuidlib.UUID) else None
    if name == "String":
        if isinstance(value, str):
            return value.encode()
        return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else None
    if name == "FixedString":
        n = int(t.args[0])
        if isinstance(value, str):
            value = value.encode()
        if not isinstance(value, bytes | bytearray | memoryview):
            return None
        value = bytes(value)
        return value.ljust(n, b"\0") if len(value) <= n else None
    return None


def _parse_date(text: str) -> dt.date | int | None:
    """A date literal as ClickHouse reads it: YYYY-MM-DD counted from the month's first day
    without checking the day against the month (2020-02-30 is 2020-03-01); the day number."""
    m = re.fullmatch(r"(\d{4})-(\d{1,2})-(\d{1,2})", text.strip())
    if not m:
        return None
    year, month, day = (int(g) for g in m.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return (dt.date(year, month, 1) - _EPOCH).days + day - 1


def _is_supported(t: ColumnType) -> bool:
    return t.name in _INTEGERS or t.name in (
        "Float32",
        "Float64",
        "Date",
        "Date32",
        "DateTime",
        "UUID",
        "String",
        "FixedString",
    )


def hash_values(values: list[Any], t: ColumnType) -> NDArray[np.uint64]:
    """The bloom_filter hashes of converted ``values`` (see :func:`convert_literal`) of the
    primitive type ``t``."""
    name = t.name
    if not _is_supported(t):
        from parquet_bloom.errors import UnsupportedFileError

        raise UnsupportedFileError(f"values of type {t} are not hashed here")
    if name in ("String", "FixedString"):
        return np.array([city_hash64(v) for v in values], dtype=np.uint64)
    if name == "UUID":
        words = [(v.int >> 64) ^ (v.int & MASK64) for v in values]
        return int_hash64_array(np.array(words, dtype=np.uint64))
    if name in ("Float32", "Float64"):
        bits = np.array(values, dtype=np.float64).view(np.uint64)
        return int_hash64_array(bits)
    width = (
        _INTEGERS[name][0] if name in _INTEGERS else (4 if name in ("Date32", "DateTime") else 2)
    )
    mask = (1 << (8 * width)) - 1
    words = [int(v) & mask for v in values]
    return int_hash64_array(np.array(words, dtype=np.uint64))

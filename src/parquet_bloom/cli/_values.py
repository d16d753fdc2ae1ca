"""Command-line values read as a column's type, for ``probe`` and ``index lookup``: the text a
user types becomes the Python value that :func:`parquet_bloom._logical.literal_probe` then
encodes as the file stores it (docs/encoding.md).
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from parquet_bloom import _format as fmt

__all__ = ["parse_literal"]


def _logical_name(leaf: fmt.SchemaLeaf) -> str | None:
    logical = leaf.logical_type
    if logical is not None:
        for name in logical.__slots__:
            if getattr(logical, name) is not None:
                return str(name)
    return leaf.converted_type


_STRING_ANNOTATIONS = {"STRING", "UTF8", "ENUM", "JSON", "BSON"}
# Fractional seconds finer than microseconds, which Python's fromisoformat silently truncates:
# "00:00:00.000000001" would probe 00:00:00 and exclude row groups holding the value.
_SUB_MICRO_FRACTION = re.compile(r"\.(\d{7,})")


class _NanoDatetime(dt.datetime):
    """A datetime with nanoseconds, read by literal_probe as it reads pandas' Timestamp."""

    nanosecond: int


class _NanoTime(dt.time):
    """A time with nanoseconds, read by literal_probe as it reads pandas' Timestamp."""

    nanosecond: int


def _from_iso(text: str, parse: Callable[[str], Any]) -> Any:
    """``parse(text)`` (date/time fromisoformat) keeping digits beyond microseconds."""
    match = _SUB_MICRO_FRACTION.search(text)
    if match is None:
        return parse(text)
    digits = match[1]
    if digits[9:].strip("0"):
        raise ValueError("finer than nanoseconds")
    nanos = int(digits[6:9].ljust(3, "0"))
    value = parse(text[: match.start()] + "." + digits[:6] + text[match.end() :])
    if not nanos:
        return value
    if isinstance(value, dt.datetime):
        value = _NanoDatetime.combine(value.date(), value.timetz())
    else:
        value = _NanoTime(
            value.hour, value.minute, value.second, value.microsecond, value.tzinfo, fold=value.fold
        )
    value.nanosecond = nanos
    return value


def parse_literal(text: str, leaf: fmt.SchemaLeaf) -> Any:
    """A command-line value as the Python value the column's type reads it as.

    Integers, floats, ISO dates, times and timestamps, decimals and UUIDs are parsed; strings
    stay strings; a binary column (no string annotation) also takes ``0x``-prefixed hex.
    :func:`parquet_bloom._logical.literal_probe` then encodes the value as the file stores it.
    """
    name = _logical_name(leaf)
    physical = leaf.physical_type
    try:
        if name in _STRING_ANNOTATIONS or physical == "BOOLEAN":
            return text
        if name == "DECIMAL":
            return decimal.Decimal(text)
        if name == "DATE":
            return dt.date.fromisoformat(text)
        if name in ("TIME", "TIME_MILLIS", "TIME_MICROS"):
            return _from_iso(text, dt.time.fromisoformat)
        if name in ("TIMESTAMP", "TIMESTAMP_MILLIS", "TIMESTAMP_MICROS") or physical == "INT96":
            return _from_iso(text, dt.datetime.fromisoformat)
        if name == "UUID":
            return uuid.UUID(text)
        if name == "FLOAT16" or physical in ("FLOAT", "DOUBLE"):
            return _nearest_float(text, "FLOAT16" if name == "FLOAT16" else physical)
        if physical in ("INT32", "INT64"):
            return int(text)
        if physical in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY") and text.startswith("0x"):
            return bytes.fromhex(text[2:])
    except (ValueError, decimal.InvalidOperation) as e:
        kind = name or physical
        raise ValueError(f"cannot read {text!r} as {kind} for column {leaf.path!r}: {e}") from None
    return text


def _nearest_float(text: str, kind: str) -> Any:
    """The FLOAT16/FLOAT/DOUBLE nearest to ``text``: what a writer given that number stores, so
    "0.1" finds a FLOAT column's 0.1f (as SQL engines cast the literal to the column's type)."""
    value = float(text)
    if kind == "DOUBLE":
        return value
    with np.errstate(over="ignore"):
        narrowed = (np.float16 if kind == "FLOAT16" else np.float32)(value)
    # Out of the type's range: keep the double, which literal_probe finds no stored form for.
    return value if np.isinf(narrowed) and not np.isinf(value) else narrowed

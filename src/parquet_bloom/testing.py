"""Tools for people who write Parquet writers: assert that their Bloom filters are right.

- :func:`assert_bloom_filters_valid` fails a test, naming file, row group, column and value, when
  :func:`parquet_bloom._audit.check_file` finds anything wrong with a file's filters.
- :func:`expected_num_bytes` and :func:`fold_to_fpp` (from :mod:`parquet_bloom._sizing`) give the
  sizes parquet-java, Arrow C++, arrow-rs and DuckDB would pick, to the byte.
- Hypothesis strategies (:func:`values_for`, :func:`values_for_leaf`, :func:`parquet_types`, also
  reachable as ``strategies.values_for`` ...) generate values of a Parquet physical/logical type,
  including the awkward ones (NaN, -0.0, extreme integers, empty strings, far dates).

Hypothesis is imported only when a strategy is asked for, so this module imports without it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from parquet_bloom._audit import check_file
from parquet_bloom._sizing import expected_num_bytes, fold_to_fpp
from parquet_bloom.errors import BloomFilterError, FileReadError

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from parquet_bloom._format import SchemaLeaf

__all__ = [
    "ParquetType",
    "assert_bloom_filters_valid",
    "expected_num_bytes",
    "fold_to_fpp",
    "parquet_types",
    "strategies",
    "values_for",
    "values_for_leaf",
]


def assert_bloom_filters_valid(
    path: str | os.PathLike[str],
    columns: Iterable[str] | None = None,
    max_fpp: float | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    require: Iterable[str] | None = None,
    allow_empty: bool = False,
) -> None:
    """Fail (AssertionError) if the Bloom filters of ``path`` have any problem ``check`` finds.

    It also fails when a chunk of a ``require`` column has no filter, and when the file has no
    filter at all in the columns checked, unless ``allow_empty=True``: a writer that stopped
    writing filters must fail the test, not pass it (docs/api.md, checks that fail).

    ``path`` may be a URL (``s3://``, ``gs://``, ``abfs://``, ``https://``, any fsspec
    protocol), its filesystem configured by ``storage_options``.

    The message lists every violation with its file, row group, column and, for a value missing
    from its chunk's filter, the first such value. A file whose footer cannot be decoded fails
    too. An unknown column or a bad ``max_fpp`` is a mistake in the test, raised as ValueError.
    A read that fails (the store's error, a reset, a timeout, the object gone mid-run) says
    nothing about the writer: it is raised as :class:`~parquet_bloom.errors.FileReadError`, an
    error of the test run rather than a failed assertion; a missing file as FileNotFoundError.
    """
    name = os.fspath(path)
    try:
        report = check_file(
            name,
            columns,
            max_fpp,
            storage_options=storage_options,
            require=require,
            allow_empty=allow_empty,
        )
    except FileReadError:
        raise
    except BloomFilterError as err:
        raise AssertionError(f"Bloom filters of {name} cannot be checked: {err}") from err
    if report.ok:
        return
    lines = [f"{len(report.violations)} Bloom filter violation(s) in {name}:"]
    for v in report.violations:
        where = []
        if v.row_group is not None:
            where.append(f"row group {v.row_group}")
        if v.column is not None:
            where.append(f"column {v.column!r}")
        lines.append(f"  [{v.kind}] {', '.join(where) or 'file'}: {v.message}")
    raise AssertionError("\n".join(lines))


# -- strategies ----------------------------------------------------------------------------------


class ParquetType(NamedTuple):
    """A column type as :func:`values_for` takes it."""

    physical_type: str
    logical_type: str | None = None
    type_length: int | None = None


# Physical types (parquet.thrift Type) and the widest integer each stores.
_INT_RANGES = {"INT32": (-(2**31), 2**31 - 1), "INT64": (-(2**63), 2**63 - 1)}
# LogicalTypes.md "Signed Integers"/"Unsigned Integers": name -> (physical type, low, high).
_INTEGER_ANNOTATIONS = {
    "INT8": ("INT32", -(2**7), 2**7 - 1),
    "INT16": ("INT32", -(2**15), 2**15 - 1),
    "INT32": ("INT32", -(2**31), 2**31 - 1),
    "INT64": ("INT64", -(2**63), 2**63 - 1),
    "UINT8": ("INT32", 0, 2**8 - 1),
    "UINT16": ("INT32", 0, 2**16 - 1),
    "UINT32": ("INT32", 0, 2**32 - 1),
    "UINT64": ("INT64", 0, 2**64 - 1),
}
_STRING_ANNOTATIONS = {"STRING", "UTF8", "ENUM", "JSON"}
_UNITS = ("MILLIS", "MICROS", "NANOS")
# LogicalTypes.md "TIMESTAMP": nanoseconds in an INT64 reach from 1677-09-21 to 2262-04-11; the
# bounds keep a day's margin so that no time zone pushes a value out.
_NANOS_MIN = dt.datetime(1677, 9, 23)
_NANOS_MAX = dt.datetime(2262, 4, 10)
# Decimal precision each physical type holds (LogicalTypes.md "DECIMAL").
_DECIMAL_MAX_PRECISION = {"INT32": 9, "INT64": 18}
_DECIMAL = re.compile(r"DECIMAL\(\s*(\d+)\s*,\s*(\d+)\s*\)")
_TEMPORAL = re.compile(r"(TIME|TIMESTAMP)(?:_|\(\s*)(MILLIS|MICROS|NANOS)\)?")


def _flba_decimal_precision(type_length: int) -> int:
    # The most digits a signed two's complement number of type_length bytes always holds.
    return math.floor(math.log10(2 ** (8 * type_length - 1) - 1))


def _logical_text(logical_type: Any) -> str | None:
    """A LogicalType given as text, or as the Thrift union a SchemaLeaf carries, as text."""
    if logical_type is None or isinstance(logical_type, str):
        return None if logical_type is None else logical_type.strip().upper()
    for name in getattr(logical_type, "__slots__", ()):
        member = getattr(logical_type, name)
        if member is None:
            continue
        if name == "INTEGER":
            return f"{'' if member.isSigned else 'U'}INT{member.bitWidth}"
        if name == "DECIMAL":
            return f"DECIMAL({member.precision}, {member.scale})"
        if name in ("TIME", "TIMESTAMP"):
            unit = next(u for u in member.unit.__slots__ if getattr(member.unit, u) is not None)
            return f"{name}({unit})"
        return str(name)
    raise TypeError(f"logical_type must be text or a parquet LogicalType, not {logical_type!r}")


def values_for(
    physical_type: str | ParquetType, logical_type: Any = None, *, type_length: int | None = None
) -> SearchStrategy[Any]:
    """A Hypothesis strategy of Python values a column of this type can hold.

    ``physical_type``: BOOLEAN, INT32, INT64, INT96, FLOAT, DOUBLE, BYTE_ARRAY or
    FIXED_LEN_BYTE_ARRAY (with ``type_length``), or a whole :class:`ParquetType` (as
    :func:`parquet_types` draws them). ``logical_type``: None, or text such as
    ``"STRING"``, ``"INT8"``, ``"UINT64"``, ``"DECIMAL(9, 2)"``, ``"DATE"``, ``"TIME(MILLIS)"``,
    ``"TIMESTAMP(NANOS)"`` (or ``"TIMESTAMP_MICROS"``), ``"UUID"``, ``"FLOAT16"``, ``"JSON"``,
    ``"ENUM"``, ``"BSON"``; or the LogicalType of a :class:`~parquet_bloom._format.SchemaLeaf`.

    Values are Python ints, floats (NaN, infinities and -0.0 included), ``bytes``, ``str``,
    ``Decimal`` (exactly the column's scale), ``date``, ``time``, naive ``datetime`` (whole
    units of the column: whole milliseconds for MILLIS), ``uuid.UUID`` and ``bool``.
    Raises ValueError for a combination the Parquet format does not allow.
    """
    from hypothesis import strategies as st

    if isinstance(physical_type, ParquetType):
        physical_type, logical_type, type_length = physical_type
    if not isinstance(physical_type, str):
        raise TypeError(f"physical_type must be a str, not {type(physical_type).__name__}")
    physical = physical_type.strip().upper()
    logical = _logical_text(logical_type)
    where = f"{physical}{'' if logical is None else ' ' + logical}"

    def bad(why: str) -> ValueError:
        return ValueError(f"no values for {where}: {why}")

    length = type_length if isinstance(type_length, int) and type_length > 0 else 0
    if physical == "FIXED_LEN_BYTE_ARRAY" and not length:
        raise bad("FIXED_LEN_BYTE_ARRAY needs a positive type_length")
    if logical is None:
        if physical == "BOOLEAN":
            return st.booleans()
        if physical in _INT_RANGES:
            low, high = _INT_RANGES[physical]
            return st.integers(low, high)
        if physical == "INT96":
            return _datetimes("NANOS")
        if physical == "FLOAT":
            return st.floats(width=32)
        if physical == "DOUBLE":
            return st.floats()
        if physical == "BYTE_ARRAY":
            return st.binary()
        if physical == "FIXED_LEN_BYTE_ARRAY":
            return st.binary(min_size=length, max_size=length)
        raise bad("unknown physical type")
    if logical in _INTEGER_ANNOTATIONS:
        stored, low, high = _INTEGER_ANNOTATIONS[logical]
        if physical != stored:
            raise bad(f"{logical} annotates {stored}")
        return st.integers(low, high)
    if logical in _STRING_ANNOTATIONS or logical == "BSON":
        if physical != "BYTE_ARRAY":
            raise bad(f"{logical} annotates BYTE_ARRAY")
        if logical == "JSON":
            return _json_texts()
        return st.binary() if logical == "BSON" else st.text()
    decimal_match = _DECIMAL.fullmatch(logical)
    if decimal_match:
        precision, scale = int(decimal_match[1]), int(decimal_match[2])
        limit = {
            **_DECIMAL_MAX_PRECISION,
            "BYTE_ARRAY": 38,
            "FIXED_LEN_BYTE_ARRAY": _flba_decimal_precision(type_length or 1),
        }.get(physical)
        if limit is None or not 1 <= precision <= limit or not 0 <= scale <= precision:
            raise bad(f"DECIMAL({precision}, {scale}) does not fit {physical}")
        # precision nines at the scale, either sign, built digit by digit: arithmetic in the
        # default decimal context (negation included) would round beyond 28 digits.
        nines = [decimal.Decimal((sign, (9,) * precision, -scale)) for sign in (1, 0)]
        return st.decimals(
            min_value=nines[0],
            max_value=nines[1],
            places=scale,
            allow_nan=False,
            allow_infinity=False,
        )
    if logical == "DATE":
        if physical != "INT32":
            raise bad("DATE annotates INT32")
        return st.dates()
    temporal = _TEMPORAL.fullmatch(logical)
    if temporal:
        kind, unit = temporal[1], temporal[2]
        stored = "INT32" if kind == "TIME" and unit == "MILLIS" else "INT64"
        if physical != stored:
            raise bad(f"{kind}({unit}) annotates {stored}")
        return _times(unit) if kind == "TIME" else _datetimes(unit)
    if logical == "UUID":
        if physical != "FIXED_LEN_BYTE_ARRAY" or type_length != 16:
            raise bad("UUID annotates FIXED_LEN_BYTE_ARRAY(16)")
        return st.uuids()
    if logical == "FLOAT16":
        if physical != "FIXED_LEN_BYTE_ARRAY" or type_length != 2:
            raise bad("FLOAT16 annotates FIXED_LEN_BYTE_ARRAY(2)")
        return st.floats(width=16)
    raise bad("unknown or unsupported logical type")


def values_for_leaf(leaf: SchemaLeaf) -> SearchStrategy[Any]:
    """:func:`values_for` the column a file's schema leaf describes (logical or converted type)."""
    logical: Any = leaf.logical_type
    if logical is None and leaf.converted_type is not None:
        converted = leaf.converted_type
        if converted == "DECIMAL":
            logical = f"DECIMAL({leaf.precision}, {leaf.scale or 0})"
        elif converted.startswith(("INT_", "UINT_")):
            logical = converted.replace("_", "")
        else:
            logical = converted
    return values_for(leaf.physical_type, logical, type_length=leaf.type_length)


def _unit_step(unit: str) -> int:
    """Microseconds per whole unit that a Python time or datetime must be a multiple of."""
    return 1000 if unit == "MILLIS" else 1


def _times(unit: str) -> SearchStrategy[dt.time]:
    from hypothesis import strategies as st

    step = _unit_step(unit)
    return st.times().map(lambda t: t.replace(microsecond=t.microsecond - t.microsecond % step))


def _datetimes(unit: str) -> SearchStrategy[dt.datetime]:
    from hypothesis import strategies as st

    step = _unit_step(unit)
    # MILLIS and MICROS in an INT64 reach far beyond Python's years 1 to 9999; NANOS do not.
    low, high = (_NANOS_MIN, _NANOS_MAX) if unit == "NANOS" else (dt.datetime.min, dt.datetime.max)
    return st.datetimes(low, high).map(
        lambda d: d.replace(microsecond=d.microsecond - d.microsecond % step)
    )


def _json_texts() -> SearchStrategy[str]:
    import json

    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
    documents = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=8,
    )
    return documents.map(json.dumps)


def parquet_types() -> SearchStrategy[ParquetType]:
    """Column types, physical and logical, that :func:`values_for` generates values for."""
    from hypothesis import strategies as st

    fixed = [
        ParquetType("BOOLEAN"),
        ParquetType("INT32"),
        ParquetType("INT64"),
        ParquetType("INT96"),
        ParquetType("FLOAT"),
        ParquetType("DOUBLE"),
        ParquetType("BYTE_ARRAY"),
        ParquetType("BYTE_ARRAY", "STRING"),
        ParquetType("BYTE_ARRAY", "ENUM"),
        ParquetType("BYTE_ARRAY", "JSON"),
        ParquetType("BYTE_ARRAY", "BSON"),
        ParquetType("INT32", "DATE"),
        ParquetType("INT32", "TIME(MILLIS)"),
        ParquetType("INT64", "TIME(MICROS)"),
        ParquetType("INT64", "TIME(NANOS)"),
        ParquetType("FIXED_LEN_BYTE_ARRAY", "UUID", 16),
        ParquetType("FIXED_LEN_BYTE_ARRAY", "FLOAT16", 2),
    ]
    fixed += [
        ParquetType(physical, name) for name, (physical, _, _) in _INTEGER_ANNOTATIONS.items()
    ]
    fixed += [ParquetType("INT64", f"TIMESTAMP({unit})") for unit in _UNITS]
    flba = st.integers(1, 32).map(lambda n: ParquetType("FIXED_LEN_BYTE_ARRAY", None, n))
    decimals = st.sampled_from(["INT32", "INT64", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"]).flatmap(
        _decimal_types
    )
    return st.sampled_from(fixed) | flba | decimals


def _decimal_types(physical: str) -> SearchStrategy[ParquetType]:
    from hypothesis import strategies as st

    lengths = st.integers(1, 16) if physical == "FIXED_LEN_BYTE_ARRAY" else st.just(0)

    def with_length(type_length: int) -> SearchStrategy[ParquetType]:
        limit = (
            _flba_decimal_precision(type_length)
            if physical == "FIXED_LEN_BYTE_ARRAY"
            else _DECIMAL_MAX_PRECISION.get(physical, 38)
        )
        return st.integers(1, limit).flatmap(
            lambda p: st.integers(0, p).map(
                lambda s: ParquetType(physical, f"DECIMAL({p}, {s})", type_length or None)
            )
        )

    return lengths.flatmap(with_length)


class _Strategies:
    """The strategies as a namespace: ``from parquet_bloom.testing import strategies``."""

    values_for = staticmethod(values_for)
    values_for_leaf = staticmethod(values_for_leaf)
    parquet_types = staticmethod(parquet_types)


strategies = _Strategies()

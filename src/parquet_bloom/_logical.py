"""Values -> the exact hashes a writer put in a column's Bloom filter, through the column's type.

A Bloom filter holds XXH64 hashes of PLAIN-encoded *stored* values (parquet-format
``BloomFilter.md``), and what is stored depends on the physical type *and* the logical type:
an INT8 column stores 4-byte INT32s, a DECIMAL(9, 2) ``1.5`` is the INT32 ``150``, a
TIMESTAMP(MICROS) is microseconds since the epoch, a UUID its 16 raw bytes. A probe that
hashes the literal in any other form (the 1-byte int, the float ``1.5``, milliseconds, the
UUID's text) looks for bits no writer set, and drops row groups that hold the value: the
worst failure a filter reader can have. So this module encodes through the schema leaf, not
the Python type of the literal:

* :func:`literal_probe` turns query literals (IN-list semantics) into hashes. A literal that
  the column cannot hold (out of range, an inexact decimal, finer than the time unit, the
  wrong length) contributes no hash: it matches no row. A literal that must never exclude
  anything (None, NaN, any literal against a BOOLEAN column or a type this module does not
  encode) sets ``always_keep``.
* :func:`column_hashes` turns an Arrow column chunk, as ``pyarrow.parquet`` reads it back,
  into the hashes of the stored values, vectorised, so a chunk's filter can be rebuilt and
  compared byte for byte with the writer's.

The type rules follow parquet-format ``LogicalTypes.md``; each constant below cites its
section. Choices the spec leaves open are documented where they are made (see
:func:`literal_probe`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
import sys
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from parquet_bloom import _plain as plain

if TYPE_CHECKING:
    from parquet_bloom._format import SchemaLeaf
    from parquet_bloom._sbbf import SplitBlockBloomFilter

__all__ = ["Probe", "column_hashes", "hex_bytes", "literal_probe"]

# LogicalTypes.md, "DATE": days since the Unix epoch, 1 January 1970.
_UNIX_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_NANOS_PER_SECOND = 10**9
_NANOS_PER_DAY = 86_400 * _NANOS_PER_SECOND
# LogicalTypes.md, "TIME" and "TIMESTAMP": the unit of the stored integer. Kept as nanoseconds
# per unit so every conversion is one exact integer division.
_NANOS_PER_UNIT = {"MILLIS": 10**6, "MICROS": 10**3, "NANOS": 1}
_ARROW_UNIT = {"MILLIS": "ms", "MICROS": "us", "NANOS": "ns"}
# LogicalTypes.md, "INT96 timestamps" (deprecated, still written by Spark and Impala): 8 bytes
# of nanoseconds within the day, then 4 bytes of Julian day number, both little-endian. The
# constants live with the array version of the layout, in _plain_arrow.
_JULIAN_DAY_OF_UNIX_EPOCH = plain.JULIAN_UNIX_EPOCH
# LogicalTypes.md, "Signed Integers" / "Unsigned Integers": the legacy ConvertedType names and
# their (bit width, signed). INT(8/16/32) annotate INT32, INT(64) annotates INT64.
_CONVERTED_INTEGERS = {
    "INT_8": (8, True),
    "INT_16": (16, True),
    "INT_32": (32, True),
    "INT_64": (64, True),
    "UINT_8": (8, False),
    "UINT_16": (16, False),
    "UINT_32": (32, False),
    "UINT_64": (64, False),
}
# LogicalTypes.md, "Deprecated time ConvertedType" / "Deprecated timestamp ConvertedType": the
# legacy annotations mean isAdjustedToUTC=true.
_CONVERTED_TEMPORAL = {
    "TIME_MILLIS": ("time", "MILLIS"),
    "TIME_MICROS": ("time", "MICROS"),
    "TIMESTAMP_MILLIS": ("timestamp", "MILLIS"),
    "TIMESTAMP_MICROS": ("timestamp", "MICROS"),
}
# LogicalTypes.md, "STRING", "ENUM", "JSON", "BSON": annotations of BYTE_ARRAY whose stored
# bytes are the value itself (UTF-8 text for the first three).
_BYTE_STRING_ANNOTATIONS = frozenset({"STRING", "UTF8", "ENUM", "JSON", "BSON"})
# Whatever the literal, a decimal this far beyond the decimal point or this many digits long
# cannot be any column's value; bounding it keeps ``10 ** exponent`` from running away on
# literals such as Decimal("1E+999999999").
_MAX_DECIMAL_DIGITS = 1000

# The PLAIN bytes of both zeros: writers hash the raw IEEE bits and -0.0 == +0.0, so a zero
# literal must probe both (no writer canonicalises; docs/format-notes.md, "Floating-point zeros
# and NaN").
_ZEROS = {
    "FLOAT": (struct.pack("<f", 0.0), struct.pack("<f", -0.0)),
    "DOUBLE": (struct.pack("<d", 0.0), struct.pack("<d", -0.0)),
    "FLOAT16": (b"\x00\x00", b"\x00\x80"),
}

_INTEGER_TYPES = (int, np.integer)
_FLOAT_TYPES = (float, np.floating)
_BYTES_TYPES = (bytes, bytearray, memoryview)


@dataclass(frozen=True, eq=False)
class Probe:
    """What to look for in a column chunk's filter (``eq=False``: it holds an array).

    ``hashes``: uint64 hashes of every encoding a literal can have in the column; a filter
    that finds any of them may hold a literal. ``always_keep``: some literal can never
    exclude a row group (None, NaN, a BOOLEAN column, a type this module cannot encode).
    """

    hashes: np.ndarray
    always_keep: bool

    def keeps(self, bloom_filter: SplitBlockBloomFilter) -> bool:
        """Whether a row group with this filter may hold one of the literals."""
        return self.always_keep or bool(bloom_filter.find_hashes(self.hashes).any())


@dataclass(frozen=True)
class _Column:
    """How a schema leaf stores values: the facts the encoders need, resolved once."""

    # One of: integer, decimal, date, time, timestamp, int96, float (FLOAT and DOUBLE),
    # float16, uuid, bytes (BYTE_ARRAY), fixed (plain FIXED_LEN_BYTE_ARRAY), boolean,
    # unsupported. Each but the last two has an encoder in _ENCODERS.
    kind: str
    leaf: SchemaLeaf
    bits: int = 0  # integer: the logical bit width
    signed: bool = True  # integer
    unit: str = ""  # time, timestamp: MILLIS, MICROS or NANOS
    utc: bool = True  # time, timestamp: isAdjustedToUTC
    scale: int = 0  # decimal
    precision: int | None = None  # decimal; None when the file omits it
    why: str = ""  # unsupported: the reason, for error messages

    @property
    def physical_type(self) -> str:
        return self.leaf.physical_type

    def describe(self) -> str:
        """e.g. "column 'a.b' (INT32, INTEGER(8, signed))"."""
        leaf = self.leaf
        phys = leaf.physical_type
        if phys == "FIXED_LEN_BYTE_ARRAY":
            phys = f"FIXED_LEN_BYTE_ARRAY({leaf.type_length})"
        detail = {
            "integer": f"INTEGER({self.bits}, {'signed' if self.signed else 'unsigned'})",
            "decimal": f"DECIMAL({self.precision}, {self.scale})",
            "time": f"TIME({self.unit}, {'UTC' if self.utc else 'local'})",
            "timestamp": f"TIMESTAMP({self.unit}, {'UTC' if self.utc else 'local'})",
            "unsupported": self.why,
        }.get(self.kind)
        if detail is None:
            detail = _logical_name(leaf.logical_type) or leaf.converted_type
        return f"column {leaf.path!r} ({phys}{', ' + detail if detail else ''})"


def _logical_name(logical_type: Any) -> str | None:
    """The member set in a LogicalType union, or None (none set: a member newer than our IDL,
    which the decoder dropped)."""
    if logical_type is None:
        return None
    for name in logical_type.__slots__:
        if getattr(logical_type, name) is not None:
            return str(name)
    return None


def _resolve(leaf: SchemaLeaf) -> _Column:
    """Classify a leaf by what its stored values mean. Anything unexpected (a newer logical
    type, an annotation on the wrong physical type) is "unsupported": probes then keep every
    row group, which is never wrong."""
    phys = leaf.physical_type
    if phys == "BOOLEAN":
        return _Column("boolean", leaf)
    if phys not in plain.PHYSICAL_TYPES:
        return _Column("unsupported", leaf, why=f"unknown physical type {phys}")
    if leaf.logical_type is not None:
        name = _logical_name(leaf.logical_type)
        if name is None:
            return _Column("unsupported", leaf, why="a logical type newer than this library")
        # The logical type wins: writers set both, and only it can say NANOS or local time.
        return _from_logical(leaf, name, getattr(leaf.logical_type, name))
    if leaf.converted_type is not None:
        return _from_converted(leaf, leaf.converted_type)
    return _from_physical(leaf)


def _from_physical(leaf: SchemaLeaf) -> _Column:
    phys = leaf.physical_type
    kind = {
        "INT32": "integer",
        "INT64": "integer",
        "INT96": "int96",
        "FLOAT": "float",
        "DOUBLE": "float",
        "BYTE_ARRAY": "bytes",
        "FIXED_LEN_BYTE_ARRAY": "fixed",
    }[phys]
    if kind == "fixed" and leaf.type_length is None:
        return _Column("unsupported", leaf, why="FIXED_LEN_BYTE_ARRAY without type_length")
    return _Column(kind, leaf, bits=64 if phys == "INT64" else 32)


def _from_logical(leaf: SchemaLeaf, name: str, member: Any) -> _Column:
    phys = leaf.physical_type
    unsupported = _Column("unsupported", leaf, why=f"logical type {name} on {phys}")
    if name in _BYTE_STRING_ANNOTATIONS:
        return _Column("bytes", leaf) if phys == "BYTE_ARRAY" else unsupported
    if name == "INTEGER":
        bits, signed = member.bitWidth, member.isSigned
        if (phys, bits) in {("INT32", 8), ("INT32", 16), ("INT32", 32), ("INT64", 64)}:
            return _Column("integer", leaf, bits=bits, signed=bool(signed))
        return unsupported
    if name == "DECIMAL":
        scale = member.scale if member.scale is not None else leaf.scale
        precision = member.precision if member.precision is not None else leaf.precision
        return _decimal(leaf, scale, precision)
    if name == "DATE":
        return _Column("date", leaf) if phys == "INT32" else unsupported
    if name in ("TIME", "TIMESTAMP"):
        unit = _logical_name(member.unit)  # TimeUnit is a union too
        physical = "INT32" if name == "TIME" and unit == "MILLIS" else "INT64"
        if unit not in _NANOS_PER_UNIT or phys != physical:
            return unsupported
        return _Column(name.lower(), leaf, unit=unit, utc=bool(member.isAdjustedToUTC))
    if name == "UUID":
        ok = phys == "FIXED_LEN_BYTE_ARRAY" and leaf.type_length == 16
        return _Column("uuid", leaf) if ok else unsupported
    if name == "FLOAT16":
        ok = phys == "FIXED_LEN_BYTE_ARRAY" and leaf.type_length == 2
        return _Column("float16", leaf) if ok else unsupported
    # UNKNOWN (always null), VARIANT, GEOMETRY, GEOGRAPHY, ...: no literal semantics here.
    return unsupported


def _from_converted(leaf: SchemaLeaf, name: str) -> _Column:
    phys = leaf.physical_type
    unsupported = _Column("unsupported", leaf, why=f"converted type {name} on {phys}")
    if name in _BYTE_STRING_ANNOTATIONS:
        return _Column("bytes", leaf) if phys == "BYTE_ARRAY" else unsupported
    if name in _CONVERTED_INTEGERS:
        bits, signed = _CONVERTED_INTEGERS[name]
        if phys == ("INT64" if bits == 64 else "INT32"):
            return _Column("integer", leaf, bits=bits, signed=signed)
        return unsupported
    if name == "DECIMAL":
        return _decimal(leaf, leaf.scale, leaf.precision)
    if name == "DATE":
        return _Column("date", leaf) if phys == "INT32" else unsupported
    if name in _CONVERTED_TEMPORAL:
        kind, unit = _CONVERTED_TEMPORAL[name]
        physical = "INT32" if name == "TIME_MILLIS" else "INT64"
        return _Column(kind, leaf, unit=unit, utc=True) if phys == physical else unsupported
    # INTERVAL (DuckDB hashes a normalised interval, not the stored bytes), MAP, LIST, ...
    return unsupported


def _decimal(leaf: SchemaLeaf, scale: int | None, precision: int | None) -> _Column:
    phys = leaf.physical_type
    scale = 0 if scale is None else scale  # LogicalTypes.md DECIMAL: "If not specified, 0"
    ok = phys in ("INT32", "INT64", "BYTE_ARRAY") or (
        phys == "FIXED_LEN_BYTE_ARRAY" and leaf.type_length is not None
    )
    if not ok or scale < 0 or (precision is not None and precision < 1):
        return _Column("unsupported", leaf, why=f"DECIMAL({precision}, {scale}) on {phys}")
    return _Column("decimal", leaf, scale=scale, precision=precision)


# =============================================================================================
# Literals
# =============================================================================================

# An encoder returns the PLAIN bytes of every form the literal can take in the column (none:
# it cannot be present; two: both zeros), or None: the literal must keep every row group.
_Encoded = tuple[bytes, ...] | None


class _Mismatch(Exception):
    """A literal of a type that makes no sense for the column; becomes a TypeError."""


def hex_bytes(text: str, prefix: str = "0x", *, name: str | None = None) -> bytes:
    """The bytes ``text`` spells in hex after ``prefix`` (``"0x00ff"`` -> ``b"\\x00\\xff"``), as
    a user types a binary literal or a key: ValueError saying what is wrong (which character,
    where; an odd count) and what is expected, not ``fromhex()``'s own message. ``name``: what
    the message calls the text (default: the text itself; a key's field, so as not to echo
    the key)."""
    digits = text[len(prefix) :] if text.startswith(prefix) else text
    called = repr(text) if name is None else name
    expected = f"expected {prefix} and two hex digits per byte, e.g. {prefix}00ff"
    for i, c in enumerate(digits):
        if c not in "0123456789abcdefABCDEF":
            where = len(text) - len(digits) + i
            shown = f"{c!r} " if name is None else ""
            raise ValueError(
                f"{called} is not hex: the character {shown}at position {where} is not a hex "
                f"digit (0-9, a-f); {expected}"
            )
    if len(digits) % 2:
        raise ValueError(f"{called} is not hex: an odd number of hex digits; {expected}")
    return bytes.fromhex(digits)


def literal_probe(values: Any, leaf: SchemaLeaf) -> Probe:
    """The hashes to look for when a query asks for ``column IN values`` (or ``= value``).

    ``values`` is one literal or an iterable of them (str and bytes count as one literal).
    Each literal is encoded as the column stores it:

    * integers (INT8..INT64, UINT8..UINT64): range-checked against the logical width and
      sign, then stored widened to INT32/INT64 (unsigned by bit pattern). Integral floats
      and Decimals count as integers; ``True``/``False`` are not integers (no hash).
    * DECIMAL: int, Decimal, a decimal str, or a float (as its shortest round-trip repr),
      rescaled to the column's scale; inexact or beyond the precision -> no hash.
    * DATE: ``date``, a ``datetime`` at midnight (its wall-clock date), ``np.datetime64``
      of a whole day, or an int number of days.
    * TIME: ``time``, ``timedelta`` or ``np.timedelta64`` since midnight, or an int count of
      the column's unit. An aware ``time`` is converted to UTC for isAdjustedToUTC columns.
    * TIMESTAMP and INT96: ``datetime``, ``date`` (midnight), ``np.datetime64`` or an int
      count of the column's unit (INT96: nanoseconds). For isAdjustedToUTC columns (and
      INT96, which Spark writes as UTC instants) aware datetimes are converted to UTC and
      naive ones are taken as UTC. For local (isAdjustedToUTC=false) columns the stored
      value is the wall clock, so a datetime's wall-clock fields are used and any tzinfo is
      ignored: ``2024-01-01 12:00+01:00`` matches a stored ``2024-01-01 12:00``.
    * A time or timestamp finer than the column's unit cannot be present (no hash).
    * FLOAT, DOUBLE, FLOAT16: numbers that convert exactly; NaN -> ``always_keep``; a zero
      probes both +0.0 and -0.0.
    * UUID: ``uuid.UUID``, its str form, or 16 bytes.
    * BYTE_ARRAY (STRING, ENUM, JSON, BSON or plain): str as UTF-8, bytes as they are;
      FIXED_LEN_BYTE_ARRAY: the same, and exactly ``type_length`` long.
    * BYTE_ARRAY decimals: the minimal big-endian two's complement (LogicalTypes.md: "The
      minimum number of bytes to store the unscaled value should be used").
    * None (and NaT) -> ``always_keep``; so is every literal against a BOOLEAN column (writers
      disagree on how booleans are hashed) or a type this module does not encode (INTERVAL,
      VARIANT, GEOMETRY, a logical type newer than this library).

    Raises TypeError, naming the column, the literal and the column's type, for a literal
    that makes no sense for the column (a str for an INT64 column, a float for a string).
    """
    column = _resolve(leaf)
    blobs: dict[bytes, None] = {}  # ordered set: the same encoding probes once
    always_keep = False
    for literal in _literals(values):
        if _is_null(literal):
            always_keep = True
            continue
        if column.kind in ("boolean", "unsupported"):
            always_keep = True
            continue
        try:
            encoded = _ENCODERS[column.kind](column, literal)
        except _Mismatch as err:
            raise TypeError(
                f"cannot compare {column.describe()} with {literal!r} "
                f"({type(literal).__name__}): {err}"
            ) from None
        if encoded is None:
            always_keep = True
        else:
            blobs.update(dict.fromkeys(encoded))
    hashes = plain.hash_values(list(blobs), "BYTE_ARRAY") if blobs else np.empty(0, np.uint64)
    return Probe(hashes=hashes, always_keep=always_keep)


def _literals(values: Any) -> list[Any]:
    """One literal or an iterable of literals, as a list of plain Python/numpy scalars."""
    if isinstance(values, str | bytes | bytearray | memoryview) or not isinstance(values, Iterable):
        items: list[Any] = [values]
    elif isinstance(values, np.ndarray):
        items = list(values.ravel())  # numpy scalars keep their dtype (datetime64 units)
    else:
        items = list(values)
    return [_from_arrow_scalar(v) for v in items]


def _from_arrow_scalar(value: Any) -> Any:
    """A pyarrow scalar (from iterating an Array) -> a Python or numpy value."""
    pa = sys.modules.get("pyarrow")  # a pyarrow scalar implies pyarrow is imported
    if pa is None or not isinstance(value, pa.Scalar):
        return value
    t = value.type
    naive_ns = (pa.types.is_timestamp(t) and t.tz is None) or pa.types.is_time64(t)
    if value.is_valid and naive_ns and t.unit == "ns":
        # as_py() cannot express nanoseconds without pandas; numpy can.
        kind = "datetime64" if pa.types.is_timestamp(t) else "timedelta64"
        return np.array(value.value, dtype=f"{kind}[ns]")[()]
    return value.as_py()


def _is_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, np.datetime64 | np.timedelta64):
        return bool(np.isnat(value))
    # pandas' NaT and NA, recognised without importing pandas.
    return type(value).__name__ in ("NaTType", "NAType")


def _is_integer(value: Any) -> bool:
    # numpy's timedelta64 subclasses np.signedinteger; it is a duration, not a number here.
    return isinstance(value, _INTEGER_TYPES) and not isinstance(value, bool | np.timedelta64)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool | np.bool_)


def _fits(value: int, bits: int, signed: bool) -> bool:
    if signed:
        return -(1 << (bits - 1)) <= value < (1 << (bits - 1))
    return 0 <= value < (1 << bits)


def _stored_int(
    value: int, column: _Column, bits: int | None = None, signed: bool = True
) -> _Encoded:
    """PLAIN INT32/INT64 of ``value`` if it fits ``bits`` (default: the physical width):
    little-endian, unsigned values by their bit pattern."""
    size = 4 if column.physical_type == "INT32" else 8
    if not _fits(value, 8 * size if bits is None else bits, signed):
        return ()
    return ((value & ((1 << (8 * size)) - 1)).to_bytes(size, "little"),)


# ---- numbers ------------------------------------------------------------------------------


def _exact_int(value: Any) -> int | None:
    """A numeric literal as the int it equals, or None if it equals no integer."""
    if _is_bool(value):
        return None  # booleans are not numbers here: True never matches 1
    if _is_integer(value):
        return int(value)
    if isinstance(value, _FLOAT_TYPES):
        f = float(value)
        return int(f) if math.isfinite(f) and f.is_integer() else None
    if isinstance(value, decimal.Decimal):
        if not value.is_finite() or value.adjusted() > _MAX_DECIMAL_DIGITS:
            return None
        integral = value.to_integral_value(rounding=decimal.ROUND_DOWN)
        return int(integral) if integral == value else None
    raise _Mismatch("expected a number")


def _encode_integer(column: _Column, value: Any) -> _Encoded:
    number = _exact_int(value)
    if number is None:
        return ()
    return _stored_int(number, column, column.bits, column.signed)


def _as_decimal(value: Any) -> decimal.Decimal | None:
    """A literal as the exact Decimal it stands for (None: not a finite number)."""
    if isinstance(value, decimal.Decimal):
        return value if value.is_finite() else None
    if isinstance(value, str):
        try:
            parsed = decimal.Decimal(value.strip())
        except decimal.InvalidOperation:
            raise _Mismatch("not a decimal number") from None
        return parsed if parsed.is_finite() else None
    if isinstance(value, _FLOAT_TYPES):
        if not math.isfinite(float(value)):
            return None
        # The shortest decimal that round-trips, as a user typed it: 0.1 means 0.1, not
        # 0.1000000000000000055... numpy's str gives that for float32/float16 too.
        text = repr(float(value)) if isinstance(value, float | np.float64) else str(value)
        return decimal.Decimal(text)
    raise _Mismatch("expected a number or a decimal string")


def _unscaled(value: Any, scale: int) -> int | None:
    """The stored integer of ``value`` at ``scale`` (value * 10**scale), None if inexact."""
    if _is_bool(value):
        return None
    if _is_integer(value):
        return int(value) * _pow10(scale)
    number = _as_decimal(value)
    if number is None:
        return None
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite
    coefficient = int("".join(map(str, digits)))
    if coefficient == 0:
        return 0
    shift = exponent + scale
    if shift >= 0:
        if len(digits) + shift > _MAX_DECIMAL_DIGITS:
            return None
        magnitude = coefficient * _pow10(shift)
    else:
        if -shift > len(digits):  # 0 < coefficient < 10**-shift: a nonzero remainder
            return None
        magnitude, remainder = divmod(coefficient, _pow10(-shift))
        if remainder:
            return None
    return -magnitude if sign else magnitude


def _pow10(exponent: int) -> int:
    """10**exponent for exponent >= 0, typed as int (``int ** int`` may be a float)."""
    return int(10**exponent)


def _minimal_twos_complement(value: int) -> bytes:
    """Shortest big-endian two's complement holding ``value`` (Java BigInteger.toByteArray)."""
    size = (value if value >= 0 else ~value).bit_length() // 8 + 1
    return value.to_bytes(size, "big", signed=True)


def _encode_decimal(column: _Column, value: Any) -> _Encoded:
    unscaled = _unscaled(value, column.scale)
    if unscaled is None:
        return ()
    if column.precision is not None and abs(unscaled) >= _pow10(column.precision):
        return ()
    phys = column.physical_type
    if phys in ("INT32", "INT64"):
        return _stored_int(unscaled, column)
    if phys == "BYTE_ARRAY":
        return (_minimal_twos_complement(unscaled),)
    width = column.leaf.type_length
    assert width is not None  # checked by _decimal
    try:
        return (unscaled.to_bytes(width, "big", signed=True),)
    except OverflowError:
        return ()


def _exact_float(value: Any) -> float | None:
    """A numeric literal as the float it equals exactly; raises _Nan for NaN."""
    if _is_bool(value):
        return None
    if isinstance(value, _FLOAT_TYPES):
        f = float(value)  # float32/float16 widen exactly
        if math.isnan(f):
            raise _Nan
        return f
    if _is_integer(value):
        number = int(value)
        try:
            f = float(number)
        except OverflowError:
            return None
        return f if f == number else None  # int/float comparison is exact in Python
    if isinstance(value, decimal.Decimal):
        if value.is_nan():
            raise _Nan
        f = float(value)
        return f if decimal.Decimal(f) == value else None  # Decimal(float) is exact
    raise _Mismatch("expected a number")


class _Nan(Exception):
    """A NaN literal: NaN bits differ by payload and NaN != NaN, so it never excludes."""


def _encode_float(column: _Column, value: Any) -> _Encoded:
    try:
        f = _exact_float(value)
    except _Nan:
        return None
    if f is None:
        return ()
    kind = "FLOAT16" if column.kind == "float16" else column.physical_type
    if f == 0.0:
        return _ZEROS[kind]
    dtype = {"FLOAT16": "<f2", "FLOAT": "<f4", "DOUBLE": "<f8"}[kind]
    with np.errstate(over="ignore"):
        narrowed = np.array(f, dtype=dtype)
    if float(narrowed) != f:
        return ()  # rounds to another value (or overflows): the column cannot hold it
    return (narrowed.tobytes(),)


# ---- dates and times ----------------------------------------------------------------------

# Nanoseconds per tick of numpy's datetime64/timedelta64 units (Y and M are not fixed
# lengths: datetime64 converts them to days exactly; for timedelta64 they are refused).
_NUMPY_NANOS: dict[str, int | Fraction] = {
    "W": 7 * _NANOS_PER_DAY,
    "D": _NANOS_PER_DAY,
    "h": 3600 * _NANOS_PER_SECOND,
    "m": 60 * _NANOS_PER_SECOND,
    "s": _NANOS_PER_SECOND,
    "ms": 10**6,
    "us": 10**3,
    "ns": 1,
    "ps": Fraction(1, 10**3),
    "fs": Fraction(1, 10**6),
    "as": Fraction(1, 10**9),
}


def _numpy_nanos(value: np.datetime64 | np.timedelta64) -> int | Fraction:
    """A numpy datetime64 (since the epoch) or timedelta64 in nanoseconds, exactly."""
    unit, count = np.datetime_data(value.dtype)
    if unit in ("Y", "M"):
        if isinstance(value, np.timedelta64):
            raise _Mismatch("a timedelta64 of years or months has no fixed length")
        value = value.astype("datetime64[D]")  # exact: the first day of the year or month
        unit, count = "D", 1
    if unit not in _NUMPY_NANOS:
        raise _Mismatch(f"numpy unit {unit!r} has no fixed length")
    return int(value.astype(np.int64)) * count * _NUMPY_NANOS[unit]


def _in_units(nanos: int | Fraction, nanos_per_unit: int) -> int | None:
    """``nanos`` as a whole number of units, None if it falls between two units."""
    ticks = Fraction(nanos) / nanos_per_unit
    return ticks.numerator if ticks.denominator == 1 else None


def _clock_nanos(value: dt.datetime | dt.time) -> int:
    """Nanoseconds since midnight of the wall-clock fields (pandas adds ``nanosecond``)."""
    seconds = (value.hour * 60 + value.minute) * 60 + value.second
    extra = getattr(value, "nanosecond", 0)
    return seconds * _NANOS_PER_SECOND + value.microsecond * 1000 + int(extra)


def _offset_nanos(offset: dt.timedelta) -> int:
    return (offset // dt.timedelta(microseconds=1)) * 1000


def _instant_nanos(value: Any, utc: bool) -> int | Fraction:
    """A datetime-like literal as nanoseconds since the epoch on the column's clock: UTC for
    UTC-adjusted columns (naive datetimes taken as UTC), the wall clock for local ones."""
    if isinstance(value, np.datetime64):
        return _numpy_nanos(value)
    if isinstance(value, dt.datetime):
        days = value.date().toordinal() - _UNIX_EPOCH_ORDINAL
        nanos = days * _NANOS_PER_DAY + _clock_nanos(value)
        offset = value.utcoffset()
        if utc and offset is not None:
            nanos -= _offset_nanos(offset)
        return nanos
    if isinstance(value, dt.date):
        return (value.toordinal() - _UNIX_EPOCH_ORDINAL) * _NANOS_PER_DAY
    raise _Mismatch("expected a datetime, date, numpy.datetime64 or int")


def _encode_date(column: _Column, value: Any) -> _Encoded:
    if _is_integer(value):
        return _stored_int(int(value), column)
    if isinstance(value, dt.datetime):
        if _clock_nanos(value):
            return ()  # a DATE holds no time of day
        days: int | None = value.date().toordinal() - _UNIX_EPOCH_ORDINAL
    elif isinstance(value, dt.date):
        days = value.toordinal() - _UNIX_EPOCH_ORDINAL
    elif isinstance(value, np.datetime64):
        days = _in_units(_numpy_nanos(value), _NANOS_PER_DAY)
    else:
        raise _Mismatch("expected a date, datetime, numpy.datetime64 or int (days)")
    return () if days is None else _stored_int(days, column)


def _encode_time(column: _Column, value: Any) -> _Encoded:
    if _is_integer(value):
        return _stored_int(int(value), column)
    if isinstance(value, dt.time):
        nanos: int | Fraction = _clock_nanos(value)
        offset = value.utcoffset()
        if column.utc and offset is not None:
            nanos = (nanos - _offset_nanos(offset)) % _NANOS_PER_DAY
    elif isinstance(value, dt.timedelta):
        nanos = _offset_nanos(value) + int(getattr(value, "nanoseconds", 0))
    elif isinstance(value, np.timedelta64):
        nanos = _numpy_nanos(value)
    else:
        raise _Mismatch("expected a time, timedelta, numpy.timedelta64 or int")
    ticks = _in_units(nanos, _NANOS_PER_UNIT[column.unit])
    return () if ticks is None else _stored_int(ticks, column)


def _encode_timestamp(column: _Column, value: Any) -> _Encoded:
    if _is_integer(value):
        return _stored_int(int(value), column)
    ticks = _in_units(_instant_nanos(value, column.utc), _NANOS_PER_UNIT[column.unit])
    return () if ticks is None else _stored_int(ticks, column)


def _encode_int96(column: _Column, value: Any) -> _Encoded:
    if isinstance(value, _BYTES_TYPES):
        raw = bytes(value)
        return (raw,) if len(raw) == 12 else ()
    if _is_integer(value):
        nanos: int | Fraction | None = int(value)
    else:
        nanos = _in_units(_instant_nanos(value, utc=True), 1)
    if nanos is None:
        return ()
    days, nanos_of_day = divmod(int(nanos), _NANOS_PER_DAY)
    julian = days + _JULIAN_DAY_OF_UNIX_EPOCH
    if not _fits(julian, 32, signed=True):
        return ()
    return (nanos_of_day.to_bytes(8, "little") + julian.to_bytes(4, "little", signed=True),)


# ---- bytes --------------------------------------------------------------------------------


def _byte_string(value: Any) -> bytes | None:
    """str as UTF-8 (None: a lone surrogate, which no UTF-8 column holds), bytes as is."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            return None
    if isinstance(value, _BYTES_TYPES):
        return bytes(value)
    raise _Mismatch("expected str or bytes")


def _encode_bytes(column: _Column, value: Any) -> _Encoded:
    blob = _byte_string(value)
    if blob is None:
        return ()
    width = column.leaf.type_length if column.kind == "fixed" else None
    return () if width is not None and len(blob) != width else (blob,)


def _encode_uuid(column: _Column, value: Any) -> _Encoded:
    if isinstance(value, uuid.UUID):
        return (value.bytes,)
    if isinstance(value, str):
        try:
            return (uuid.UUID(value).bytes,)
        except ValueError:
            return ()  # not a UUID: equals none
    if isinstance(value, _BYTES_TYPES):
        raw = bytes(value)
        return (raw,) if len(raw) == 16 else ()
    raise _Mismatch("expected a uuid.UUID, its str form or 16 bytes")


_ENCODERS: dict[str, Callable[[_Column, Any], _Encoded]] = {
    "integer": _encode_integer,
    "decimal": _encode_decimal,
    "date": _encode_date,
    "time": _encode_time,
    "timestamp": _encode_timestamp,
    "int96": _encode_int96,
    "float": _encode_float,
    "float16": _encode_float,
    "uuid": _encode_uuid,
    "bytes": _encode_bytes,
    "fixed": _encode_bytes,
}


# =============================================================================================
# Column chunks
# =============================================================================================


def column_hashes(values: Any, leaf: SchemaLeaf) -> np.ndarray:
    """Hashes (uint64) of the non-null values of a column chunk, as the file stores them.

    ``values`` is a ``pyarrow.Array`` or ``ChunkedArray`` of the leaf's values as
    ``pyarrow.parquet`` reads them back, or as they were handed to the writer: any Arrow
    type pyarrow produces or writes for the column (e.g. ``timestamp[s]`` for a
    TIMESTAMP(MILLIS) column, ``date64`` for DATE, ``time32[s]`` for TIME(MILLIS),
    dictionary, large and view strings, extension types such as ``arrow.uuid``). Values are
    converted to the column's stored form (time unit, decimal width, INT96 layout) with
    pyarrow.compute and numpy, and hashed without a Python loop per value.

    Columns whose type :func:`literal_probe` does not encode are hashed as their raw stored
    bytes; for some that is not what the writer hashed (DuckDB hashes a normalised INTERVAL,
    marking the file ``duckdb.interval_bloom_filter: normalized-v1``).

    Raises TypeError for an Arrow type the column cannot hold (e.g. strings for a DATE
    column, a nested array instead of its leaf), ValueError when a value would not be
    stored exactly (a finer time unit with a remainder, a decimal of another scale) and for
    BOOLEAN columns, whose filters writers do not agree on.
    """
    import pyarrow as pa

    column = _resolve(leaf)
    if column.kind == "boolean":
        raise ValueError(
            f"{column.describe()}: BOOLEAN columns have no usable Bloom filters (writers "
            "disagree on how a boolean is hashed)"
        )
    if isinstance(values, pa.ChunkedArray):
        parts = [column_hashes(chunk, leaf) for chunk in values.chunks]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    if not isinstance(values, pa.Array):
        raise TypeError(
            f"column_hashes expects a pyarrow Array or ChunkedArray, not {type(values).__name__}"
        )
    stored = _stored_form(pa, values, column)
    hashes: np.ndarray = plain.hash_values(
        stored, column.physical_type, type_length=leaf.type_length
    )
    return hashes


def _stored_form(pa: Any, arr: Any, column: _Column) -> Any:
    """An Arrow array that ``hashing`` encodes exactly as the column stores it."""
    while isinstance(arr.type, pa.BaseExtensionType):  # uuid, json: stored as their storage
        arr = arr.storage
    t = arr.type
    if pa.types.is_dictionary(t):
        # Convert the (usually short) dictionary; hashing picks its hashes by index.
        dictionary = _stored_form(pa, arr.dictionary, column)
        return pa.DictionaryArray.from_arrays(arr.indices, dictionary)
    if pa.types.is_null(t):
        return arr  # all null: nothing to hash
    if not _ARROW_TYPE_FITS[column.kind](pa.types, t):
        raise TypeError(
            f"{column.describe()} cannot hold Arrow {t} values"
            + (
                " (pass the leaf array, e.g. pyarrow.compute.list_flatten(arr))"
                if pa.types.is_nested(t)
                else ""
            )
        )
    try:
        if column.kind in ("time", "timestamp"):
            return _to_unit(pa, arr, column)
        if column.kind == "decimal":
            return _decimal_storage(arr, column)
    except pa.ArrowInvalid as err:
        raise ValueError(f"{column.describe()}: {err}") from err
    return arr


def _to_unit(pa: Any, arr: Any, column: _Column) -> Any:
    """Cast times and timestamps to the column's unit; the safe cast refuses lossy values."""
    unit = _ARROW_UNIT[column.unit]
    t = arr.type
    if column.kind == "time":
        target = pa.time32(unit) if unit == "ms" else pa.time64(unit)
    else:
        target = pa.timestamp(unit, tz=t.tz)
    return arr if t == target else arr.cast(target, safe=True)


def _decimal_storage(arr: Any, column: _Column) -> Any:
    """Check the scale; hashing narrows the decimal words to the column's INT32, INT64,
    FIXED_LEN_BYTE_ARRAY or minimal BYTE_ARRAY form and refuses values that do not fit."""
    if arr.type.scale != column.scale:
        raise ValueError(
            f"{column.describe()}: Arrow {arr.type} has scale {arr.type.scale}, the column "
            f"{column.scale}"
        )
    return arr


def _is_bytes_like(types: Any, t: Any) -> bool:
    checks = ("is_binary", "is_string", "is_large_binary", "is_large_string")
    views = ("is_binary_view", "is_string_view")  # pyarrow >= 16
    return any(getattr(types, name, lambda _t: False)(t) for name in checks + views)


# Which Arrow types may stand for each kind of column (after unwrapping extension types and
# dictionaries); anything else would be hashed in the wrong form, silently.
_ARROW_TYPE_FITS: dict[str, Callable[[Any, Any], bool]] = {
    "integer": lambda ty, t: ty.is_integer(t) or ty.is_duration(t),
    "decimal": lambda ty, t: ty.is_decimal(t),
    "date": lambda ty, t: ty.is_date(t),
    "time": lambda ty, t: ty.is_time(t),
    "timestamp": lambda ty, t: ty.is_timestamp(t),
    "int96": lambda ty, t: ty.is_timestamp(t) or ty.is_fixed_size_binary(t),
    "float": lambda ty, t: ty.is_floating(t),
    "float16": lambda ty, t: ty.is_float16(t) or ty.is_fixed_size_binary(t),
    "uuid": lambda ty, t: ty.is_fixed_size_binary(t) or _is_bytes_like(ty, t),
    "bytes": lambda ty, t: ty.is_fixed_size_binary(t) or _is_bytes_like(ty, t),
    "fixed": lambda ty, t: ty.is_fixed_size_binary(t) or _is_bytes_like(ty, t),
    # Unsupported logical types: hash the storage as it is (hashing checks the width).
    "unsupported": lambda ty, t: not ty.is_nested(t),
}

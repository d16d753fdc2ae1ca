"""Paimon's column types, and the 64-bit hash its bloom-filter index takes of a value of each.

Paimon's ``FastHash`` (paimon-common ``fileindex/bloomfilter/FastHash.java``) picks the hash
by the column's type (docs/paimon.md#hashing):

- strings (``CHAR``, ``VARCHAR``, ``STRING``): XXH64, seed 0, of the value's UTF-8 bytes (a
  ``BinaryString``'s bytes; Java's encoder joins surrogate pairs and writes a lone surrogate
  as ``?``); binaries (``BINARY``, ``VARBINARY``, ``BYTES``): XXH64 of the bytes;
- integers (``TINYINT`` to ``BIGINT``, sign-extended to 64 bits), ``FLOAT`` and ``DOUBLE`` by
  their bit patterns (``floatToIntBits``, sign-extended, and ``doubleToLongBits``: every NaN as
  the canonical one), ``DATE`` (days since 1970-01-01), ``TIME`` (milliseconds of the day) and
  timestamps (``TIMESTAMP``, ``TIMESTAMP_LTZ``: epoch milliseconds when the precision is at
  most 3, else epoch microseconds, both floored): Thomas Wang's 64-bit integer hash, in Java
  ``long`` arithmetic (``>>`` is arithmetic);
- ``BOOLEAN``, ``DECIMAL`` and nested types have none: Paimon refuses a bloom-filter index on
  them.

Values come as Python objects, numpy arrays or Arrow arrays; nulls are never added (Paimon's
writer skips them) and may be anywhere (Paimon's reader keeps a file for a null literal).
Hashes are returned as ``uint64`` (the Java ``long``'s bits).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._java import java_utf8
from parquet_bloom._xxh64 import xxh64_variable

__all__ = [
    "HASHED_KINDS",
    "PaimonType",
    "hash_values",
    "parse_type",
    "wang_hash",
]

# How values of each type are hashed (FastHash.FastHashVisitor); None: no bloom-filter index.
_KINDS = {
    "CHAR": "string",
    "VARCHAR": "string",
    "BINARY": "binary",
    "VARBINARY": "binary",
    "TINYINT": "integer",
    "SMALLINT": "integer",
    "INT": "integer",
    "BIGINT": "integer",
    "FLOAT": "float",
    "DOUBLE": "double",
    "DATE": "date",
    "TIME": "time",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP_LTZ": "timestamp",
    "BOOLEAN": None,
    "DECIMAL": None,
}
HASHED_KINDS = ("string", "binary", "integer", "float", "double", "date", "time", "timestamp")
# The range of each integer type (a Java byte, short, int, long); DATE and TIME are Java ints.
_INT_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "DATE": (-(2**31), 2**31 - 1),
    "TIME": (-(2**31), 2**31 - 1),
}
# Names Paimon's type parser takes for the same type (DataTypeJsonParser).
_ALIASES = {
    "INTEGER": "INT",
    "STRING": "VARCHAR",
    "BYTES": "VARBINARY",
    "NUMERIC": "DECIMAL",
    "DEC": "DECIMAL",
}
_DEFAULT_PRECISION = {"TIMESTAMP": 6, "TIMESTAMP_LTZ": 6, "TIME": 0}
_NESTED = ("ARRAY", "MAP", "MULTISET", "ROW", "VARIANT", "BLOB", "VECTOR")
_TYPE = re.compile(
    r"^(?P<name>[A-Z_]+)\s*(?:\((?P<args>[^)]*)\))?\s*(?P<tail>WITH(?:OUT)? (?:LOCAL )?TIME ZONE)?$"
)
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_UTC_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class PaimonType:
    """A Paimon column type: its ``root`` (``INT``, ``VARCHAR``, ``TIMESTAMP``, ...; aliases
    resolved: ``STRING`` is ``VARCHAR``, ``BYTES`` is ``VARBINARY``, ``TIMESTAMP ... WITH
    LOCAL TIME ZONE`` is ``TIMESTAMP_LTZ``), its ``precision`` (timestamps and times; None
    elsewhere) and ``text`` (as given)."""

    root: str
    precision: int | None
    text: str

    @property
    def kind(self) -> str | None:
        """How a value is hashed (one of :data:`HASHED_KINDS`), or None: no bloom-filter
        index on this type."""
        return _KINDS.get(self.root)

    def __str__(self) -> str:
        return self.text


def parse_type(data_type: str | PaimonType | dict[str, Any]) -> PaimonType:
    """A Paimon type from its SQL text (``"INT"``, ``"STRING NOT NULL"``, ``"TIMESTAMP(3)"``,
    ``"TIMESTAMP_LTZ(6)"``, ``"TIMESTAMP(6) WITH LOCAL TIME ZONE"``, ``"VARCHAR(10)"``), or a
    nested type as a schema file writes it (a JSON object: no bloom-filter index on it)."""
    if isinstance(data_type, PaimonType):
        return data_type
    if isinstance(data_type, dict):
        root = str(data_type.get("type", "ROW")).upper().split("<")[0].strip()
        return PaimonType(root, None, str(data_type.get("type", data_type)))
    if not isinstance(data_type, str):
        raise TypeError(f"a Paimon type is text such as 'INT', not {type(data_type).__name__}")
    text = " ".join(data_type.split())
    upper = text.upper()
    if upper.endswith(" NOT NULL"):
        upper = upper[: -len(" NOT NULL")]
    elif upper.endswith(" NULL"):
        upper = upper[: -len(" NULL")]
    for nested in _NESTED:
        if upper.startswith(nested) and (len(upper) == len(nested) or upper[len(nested)] in "<( "):
            return PaimonType(nested, None, text)
    match = _TYPE.match(upper)
    if match is None:
        raise ValueError(f"not a Paimon type: {data_type!r}")
    name = _ALIASES.get(match["name"], match["name"])
    tail = match["tail"] or ""
    if name == "TIMESTAMP" and "LOCAL" in tail:
        name = "TIMESTAMP_LTZ"
    elif tail and name not in ("TIMESTAMP", "TIME"):
        raise ValueError(f"not a Paimon type: {data_type!r}")
    if name not in _KINDS:
        raise ValueError(f"not a Paimon type: {data_type!r}")
    precision = None
    if name in _DEFAULT_PRECISION:
        args = (match["args"] or "").strip()
        precision = int(args) if args else _DEFAULT_PRECISION[name]
        if not 0 <= precision <= 9:
            raise ValueError(f"precision {precision} out of 0..9 in {data_type!r}")
    return PaimonType(name, precision, text)


# -- hashes ------------------------------------------------------------------------------------


def wang_hash(keys: NDArray[np.int64]) -> NDArray[np.uint64]:
    """Thomas Wang's 64-bit integer hash (FastHash ``getLongHash``) of every key, in Java
    ``long`` arithmetic: wrapping, and ``>>`` arithmetic."""
    key: NDArray[np.uint64] = np.asarray(keys, dtype=np.int64).view(np.uint64).copy()

    def asr(x: NDArray[np.uint64], s: int) -> NDArray[np.uint64]:
        return (x.view(np.int64) >> np.int64(s)).view(np.uint64)

    key = ~key + (key << np.uint64(21))
    key ^= asr(key, 24)
    key = key + (key << np.uint64(3)) + (key << np.uint64(8))
    key ^= asr(key, 14)
    key = key + (key << np.uint64(2)) + (key << np.uint64(4))
    key ^= asr(key, 28)
    key = key + (key << np.uint64(31))
    return key


def hash_values(values: Any, data_type: PaimonType) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """The hashes of ``values`` (one value, a sequence, a numpy array, or an Arrow array) as a
    ``data_type`` column's bloom-filter index takes them, and which values are not null (a
    null's hash is 0 and means nothing)."""
    kind = data_type.kind
    if kind is None:
        raise ValueError(f"Paimon has no bloom-filter index on {data_type.root} columns")
    if _is_arrow(values):
        return _hash_arrow(values, data_type)
    if isinstance(values, np.ndarray) and values.dtype.kind != "O":
        return _hash_numpy(values.ravel(), data_type)
    items = list(values) if _is_collection(values) else [values]
    valid = np.array([v is not None for v in items], dtype=bool)
    if kind in ("string", "binary"):
        data = [_as_bytes(v, kind) if v is not None else b"" for v in items]
        return _hash_bytes(data), valid
    if kind in ("float", "double"):
        floats = np.array([_as_float(v) if v is not None else 0.0 for v in items], dtype=np.float64)
        return _hash_floats(floats, kind), valid
    keys = np.array([_as_long(v, data_type) if v is not None else 0 for v in items], dtype=np.int64)
    return wang_hash(keys), valid


def _is_collection(values: Any) -> bool:
    return isinstance(values, Iterable) and not isinstance(
        values, str | bytes | bytearray | memoryview
    )


def _is_arrow(values: Any) -> bool:
    return type(values).__module__.startswith("pyarrow") and hasattr(values, "type")


def _as_bytes(value: Any, kind: str) -> bytes:
    if isinstance(value, str):
        if kind == "binary":
            raise TypeError("a BINARY/VARBINARY value is bytes, not str")
        return java_utf8(value)
    if isinstance(value, bytes | bytearray | memoryview | np.bytes_):
        return bytes(value)
    raise TypeError(f"a {kind} value is str or bytes, not {type(value).__name__}")


def _as_float(value: Any) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        raise TypeError(f"a FLOAT/DOUBLE value is a number, not {type(value).__name__}")
    return float(value)


def _hash_floats(floats: NDArray[np.float64], kind: str) -> NDArray[np.uint64]:
    """``getLongHash(Float.floatToIntBits((float) v))`` (the int sign-extended) or
    ``getLongHash(Double.doubleToLongBits(v))``: NaNs as Java's canonical NaN."""
    if kind == "float":
        with np.errstate(over="ignore"):  # a double beyond float range is +-inf, as in Java
            single = floats.astype(np.float32)
        bits = single.view(np.int32).astype(np.int64)
        bits[np.isnan(single)] = 0x7FC00000
        return wang_hash(bits)
    bits = floats.view(np.int64).copy()
    bits[np.isnan(floats)] = 0x7FF8000000000000
    return wang_hash(bits)


def _hash_bytes(data: list[bytes]) -> NDArray[np.uint64]:
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return xxh64_variable(b"".join(data), offsets)


def _check_range(keys: NDArray[np.int64], data_type: PaimonType) -> None:
    low, high = _INT_RANGES.get(data_type.root, _INT_RANGES["BIGINT"])
    if keys.size and (int(keys.min()) < low or int(keys.max()) > high):
        bad = int(keys.min()) if int(keys.min()) < low else int(keys.max())
        raise ValueError(f"{bad} is out of range for {data_type.root} ({low}..{high})")


def _as_long(value: Any, data_type: PaimonType) -> int:
    """The Java long a value of an integer, date, time or timestamp column is hashed by."""
    kind = data_type.kind
    if kind == "timestamp":
        return _timestamp_key(value, data_type)
    if kind == "date" and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return (value - _EPOCH_DATE).days
    if kind == "date" and isinstance(value, np.datetime64):
        return int(_datetime64_in(np.array([value]), "D")[0])
    if kind == "time" and isinstance(value, dt.time):
        micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000
        return (micros + value.microsecond) // 1000
    if kind == "time" and isinstance(value, np.timedelta64):
        return int(_timedelta64_in_millis(np.array([value]))[0])
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise TypeError(f"a {data_type.root} value is an int, not {type(value).__name__}")
    low, high = _INT_RANGES[data_type.root]
    if not low <= int(value) <= high:
        raise ValueError(f"{value} is out of range for {data_type.root} ({low}..{high})")
    return int(value)


def _timestamp_key(value: Any, data_type: PaimonType) -> int:
    """Epoch millis (precision <= 3) or micros of a timestamp, floored (Paimon's ``Timestamp``
    keeps floored millis and a non-negative nano-of-milli)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            micros = (value - _UTC_EPOCH) // dt.timedelta(microseconds=1)
        else:
            micros = (value - _EPOCH) // dt.timedelta(microseconds=1)
    elif isinstance(value, np.datetime64):
        micros = int(_datetime64_in(np.array([value]), "us")[0])
    else:
        raise TypeError(
            f"a {data_type.root} value is a datetime or numpy datetime64, "
            f"not {type(value).__name__}"
        )
    return micros // 1000 if (data_type.precision or 0) <= 3 else micros


# -- numpy and Arrow arrays --------------------------------------------------------------------

_UNIT_NANOS = {
    "D": 86_400 * 10**9,
    "h": 3600 * 10**9,
    "m": 60 * 10**9,
    "s": 10**9,
    "ms": 10**6,
    "us": 10**3,
    "ns": 1,
}


def _rescale(counts: NDArray[np.int64], unit_nanos: int, target_nanos: int) -> NDArray[np.int64]:
    """Counts of one unit as counts of another, floored (exact integer arithmetic)."""
    if unit_nanos >= target_nanos:
        factor = unit_nanos // target_nanos
        limit = np.iinfo(np.int64).max // factor
        if counts.size and int(np.abs(counts).max()) > limit:
            raise ValueError("a date or time beyond what Paimon's Java long can hold")
        return counts * np.int64(factor)
    return np.floor_divide(counts, np.int64(target_nanos // unit_nanos))


def _datetime64_in(values: NDArray[Any], target: str) -> NDArray[np.int64]:
    unit, step = np.datetime_data(values.dtype)
    if unit not in _UNIT_NANOS:
        raise TypeError(f"datetime64 values in {unit!r} units are not taken; use D..ns")
    counts = values.view(np.int64) * np.int64(step)
    return _rescale(counts, _UNIT_NANOS[unit], _UNIT_NANOS[target])


def _timedelta64_in_millis(values: NDArray[Any]) -> NDArray[np.int64]:
    unit, step = np.datetime_data(values.dtype)
    if unit not in _UNIT_NANOS:
        raise TypeError(f"timedelta64 values in {unit!r} units are not taken; use h..ns")
    return _rescale(values.view(np.int64) * np.int64(step), _UNIT_NANOS[unit], 10**6)


def _hash_numpy(
    values: NDArray[Any], data_type: PaimonType
) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    kind, dkind = data_type.kind, values.dtype.kind
    valid = np.ones(len(values), dtype=bool)
    if kind in ("string", "binary"):
        if dkind == "U" and kind == "string":
            return _hash_bytes([java_utf8(str(v)) for v in values]), valid
        if dkind == "S":
            return _hash_bytes([bytes(v) for v in values]), valid
        raise TypeError(f"a {data_type.root} column takes str or bytes, not {values.dtype}")
    if kind in ("float", "double"):
        if dkind not in "fiu":
            raise TypeError(f"a {data_type.root} column takes numbers, not {values.dtype}")
        return _hash_floats(values.astype(np.float64), kind), valid
    if dkind == "M" and kind in ("timestamp", "date"):
        valid = ~np.isnat(values)
        if kind == "date":
            keys = _datetime64_in(values, "D")
        else:
            target = "ms" if (data_type.precision or 0) <= 3 else "us"
            keys = _datetime64_in(values, target)
        keys[~valid] = 0
        if kind == "date":
            _check_range(keys, data_type)
        return wang_hash(keys), valid
    if dkind == "m" and kind == "time":
        valid = ~np.isnat(values)
        keys = _timedelta64_in_millis(values)
        keys[~valid] = 0
        _check_range(keys, data_type)
        return wang_hash(keys), valid
    if dkind in "iu" and kind in ("integer", "date", "time"):
        if dkind == "u" and values.size and int(values.max()) > np.iinfo(np.int64).max:
            raise ValueError(f"{int(values.max())} is out of range for {data_type.root}")
        keys = values.astype(np.int64)
        _check_range(keys, data_type)
        return wang_hash(keys), valid
    raise TypeError(f"a {data_type.root} column does not take numpy {values.dtype} values")


def _hash_arrow(values: Any, data_type: PaimonType) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    import pyarrow as pa

    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if isinstance(array, pa.Scalar):
        return hash_values([array.as_py()], data_type)
    kind, typ = data_type.kind, array.type
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if kind in ("string", "binary"):
        text = pa.types.is_string(typ) or pa.types.is_large_string(typ)
        text = text or pa.types.is_string_view(typ)
        binary = pa.types.is_binary(typ) or pa.types.is_large_binary(typ)
        binary = binary or pa.types.is_fixed_size_binary(typ) or pa.types.is_binary_view(typ)
        if not (binary or (text and kind == "string")):
            raise TypeError(f"a {data_type.root} column does not take Arrow {typ} values")
        # Arrow strings are UTF-8 already: the bytes Java encodes.
        flat = array.cast(pa.large_binary())
        offsets = np.frombuffer(flat.buffers()[1], dtype=np.int64)[
            flat.offset : flat.offset + len(flat) + 1
        ]
        data = flat.buffers()[2]
        buffer = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
        return xxh64_variable(buffer, offsets), valid
    if pa.types.is_timestamp(typ) and kind in ("timestamp", "date"):
        counts = np.asarray(array.cast(pa.int64()).fill_null(0).to_numpy(), dtype=np.int64)
        unit = _UNIT_NANOS[typ.unit]
        if kind == "date":
            keys = _rescale(counts, unit, _UNIT_NANOS["D"])
        else:
            keys = _rescale(
                counts, unit, _UNIT_NANOS["ms" if (data_type.precision or 0) <= 3 else "us"]
            )
        return wang_hash(keys), valid
    if (pa.types.is_date32(typ) or pa.types.is_date64(typ)) and kind == "date":
        raw = np.asarray(
            array.cast(pa.int64() if pa.types.is_date64(typ) else pa.int32())
            .fill_null(0)
            .to_numpy(),
            dtype=np.int64,
        )
        keys = (
            _rescale(raw, _UNIT_NANOS["ms"], _UNIT_NANOS["D"]) if pa.types.is_date64(typ) else raw
        )
        return wang_hash(keys), valid
    if (pa.types.is_time32(typ) or pa.types.is_time64(typ)) and kind == "time":
        raw = np.asarray(
            array.cast(pa.int64() if pa.types.is_time64(typ) else pa.int32())
            .fill_null(0)
            .to_numpy(),
            dtype=np.int64,
        )
        return wang_hash(_rescale(raw, _UNIT_NANOS[typ.unit], _UNIT_NANOS["ms"])), valid
    if pa.types.is_floating(typ) and kind in ("float", "double"):
        floats = np.asarray(array.cast(pa.float64()).fill_null(0).to_numpy(), dtype=np.float64)
        return _hash_floats(floats, kind), valid
    if pa.types.is_integer(typ) and kind in ("integer", "date", "time", "float", "double"):
        filled = array.fill_null(0)
        if kind in ("float", "double"):
            floats = np.asarray(filled.to_numpy(), dtype=np.float64)
            return _hash_floats(floats, kind), valid
        raw = filled.to_numpy()
        if raw.dtype == np.uint64 and raw.size and int(raw.max()) > np.iinfo(np.int64).max:
            raise ValueError(f"{int(raw.max())} is out of range for {data_type.root}")
        keys = np.asarray(raw, dtype=np.int64)
        _check_range(keys, data_type)
        return wang_hash(keys), valid
    raise TypeError(f"a {data_type.root} column does not take Arrow {typ} values")

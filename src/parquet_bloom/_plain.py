"""Values -> their Parquet PLAIN bytes -> XXH64 hashes, for every physical type.

A Parquet split-block Bloom filter stores no values, only bits chosen by a 64-bit hash of each
value: XXH64 with seed 0 of the value's PLAIN encoding (docs/format-notes.md#the-hash). So one
number has several hashes: ``7`` in an INT32 column is the four bytes ``07 00 00 00``, in an
INT64 column eight bytes, in a DOUBLE column the IEEE-754 bits of ``7.0``. This module knows the
exact bytes a writer hashed for each physical type, from numpy arrays, Python values and Arrow
arrays (for Arrow data, as ``pyarrow.parquet`` converts each Arrow type when it writes it:
``timestamp[s]`` is written as milliseconds, ``date64`` as INT32 days), and hands them to
:mod:`parquet_bloom._xxh64` to hash. What a *literal* means in a column (its logical type:
decimals, timestamps, INT8 widened to INT32) is :mod:`parquet_bloom._logical`'s business.

Only :func:`hash_value` (one probe value) goes through the ``xxhash`` package; it encodes with
:func:`plain_encode`, which is written independently of the vectorised encoders so the two
check each other in the tests.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np
import xxhash
from numpy.typing import NDArray

from parquet_bloom import _xxh64 as xxh64
from parquet_bloom._xxh64 import I64, U8, U64, xxh64_fixed, xxh64_spans, xxh64_variable

__all__ = [
    "JULIAN_UNIX_EPOCH",
    "PHYSICAL_TYPES",
    "decimal_width",
    "hash_value",
    "hash_values",
    "plain_encode",
    "xxh64_fixed",
    "xxh64_spans",
    "xxh64_variable",
]

# Shows the i-th value in an error message (built lazily: only errors need it).
_Show: TypeAlias = Callable[[int], object]

# The Parquet physical types, in the order of the Thrift ``Type`` enum (parquet.thrift), so
# ``PHYSICAL_TYPES[thrift_value]`` names a column's type.
PHYSICAL_TYPES: tuple[str, ...] = (
    "BOOLEAN",
    "INT32",
    "INT64",
    "INT96",
    "FLOAT",
    "DOUBLE",
    "BYTE_ARRAY",
    "FIXED_LEN_BYTE_ARRAY",
)

# Python ints wrap to their uint64 bit pattern through this mask.
_UINT64_MASK = (1 << 64) - 1

# Days between the Julian day epoch and 1970-01-01: INT96 timestamps store (nanoseconds of
# the day, Julian day) (parquet-format LogicalTypes.md, "INT96 timestamps", deprecated).
JULIAN_UNIX_EPOCH = 2440588
_NANOS_PER_DAY = 86_400_000_000_000
_MILLIS_PER_DAY = 86_400_000

_BOOLEAN_MESSAGE = (
    "BOOLEAN columns have no usable Bloom filters: writers do not agree on how a boolean is "
    "hashed (and a column of two values gains nothing from one)"
)


# --------------------------------------------------------------------------------------------
# PLAIN encoding (parquet-format Encodings.md, "Plain: (PLAIN = 0)") and dispatch.
# --------------------------------------------------------------------------------------------


def _check_physical_type(physical_type: str | None) -> str | None:
    if physical_type is None:
        return None
    if not isinstance(physical_type, str):
        raise TypeError(
            f"physical_type must be a str such as 'INT64', not {type(physical_type).__name__}"
        )
    name = physical_type.upper()
    if name not in PHYSICAL_TYPES:
        raise ValueError(
            f"unknown Parquet physical type {physical_type!r}; expected one of {PHYSICAL_TYPES}"
        )
    if name == "BOOLEAN":
        raise ValueError(_BOOLEAN_MESSAGE)
    return name


def _check_type_length(physical_type: str, type_length: int | None) -> int | None:
    """The width of a FIXED_LEN_BYTE_ARRAY value; ignored for other types, whose schema
    elements may carry a meaningless type_length."""
    if physical_type == "INT96":
        return 12
    if physical_type != "FIXED_LEN_BYTE_ARRAY":
        return None
    if type_length is None:
        raise ValueError("FIXED_LEN_BYTE_ARRAY needs type_length (the width of every value)")
    if isinstance(type_length, bool) or not isinstance(type_length, int | np.integer):
        raise TypeError(f"type_length must be an int, not {type(type_length).__name__}")
    if type_length < 0:
        raise ValueError(f"type_length must be >= 0, not {type_length}")
    return int(type_length)


def _describe(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def _cannot(value: object, physical_type: str, why: str) -> ValueError:
    return ValueError(f"cannot encode {_describe(value)} as {physical_type}: {why}")


def _is_known_scalar(value: object) -> bool:
    """Scalars this module knows how to encode as *some* physical type: a mismatch with the
    requested type is then a ValueError, anything else a TypeError."""
    return isinstance(value, int | float | str | bytes | bytearray | memoryview | np.generic)


def _wrong_value(value: object, physical_type: str, why: str) -> Exception:
    """ValueError for a value of a kind this module encodes, but not as ``physical_type``;
    TypeError for an object that is no value at all."""
    if _is_known_scalar(value):
        return _cannot(value, physical_type, why)
    return TypeError(
        f"cannot encode {_describe(value)} as {physical_type}: not a supported value "
        "(int, float, str, bytes-like or numpy scalar)"
    )


def _empty() -> U64:
    return np.empty(0, dtype=np.uint64)


_INT_RANGE = {
    # Parquet has no unsigned physical types: uint32/uint64 are stored (and hashed) by bit
    # pattern in INT32/INT64, so a value fits if it fits the signed or the unsigned range.
    "INT32": (-(1 << 31), (1 << 32) - 1),
    "INT64": (-(1 << 63), (1 << 64) - 1),
}


def _int_lanes(arr: NDArray[Any], physical_type: str) -> NDArray[Any]:
    """Integer array -> little-endian uint32 (INT32) or uint64 (INT64) bit patterns.

    Narrower types widen as Parquet stores them (sign-extend signed, zero-extend unsigned);
    same-width unsigned keeps its bit pattern; a wider array must hold values that fit.
    """
    if physical_type == "INT32" and arr.dtype.itemsize > 4:
        lo, hi = _INT_RANGE[physical_type]
        bad = (arr > hi) if arr.dtype.kind == "u" else (arr < lo) | (arr > hi)
        if bad.any():
            raise _cannot(arr[int(np.argmax(bad))], physical_type, f"outside [{lo}, {hi}]")
        return (arr & 0xFFFFFFFF).astype(np.uint32)
    if arr.dtype.kind == "i":
        if physical_type == "INT32":
            return arr.astype(np.int32, copy=False).view(np.uint32)
        return arr.astype(np.int64, copy=False).view(np.uint64)
    return arr.astype(np.uint32 if physical_type == "INT32" else np.uint64, copy=False)


def _float_lanes(arr: NDArray[Any], physical_type: str) -> NDArray[Any]:
    """Float (or integer) array -> raw IEEE-754 bits as uint32 (FLOAT) or uint64 (DOUBLE).

    No canonicalisation: -0.0 and +0.0, and NaN payloads, keep their own bits, because the
    writer hashes the bits it stores. A finite value too large for float32 is an error
    rather than silently becoming infinity.
    """
    target = np.dtype(np.float32 if physical_type == "FLOAT" else np.float64)
    if arr.dtype.kind in "iu":
        # An integer becomes a double first, as float(value) does in plain_encode.
        arr = arr.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        cast = arr.astype(target, copy=False)
    if arr.dtype.kind == "f" and arr.dtype.itemsize > target.itemsize:
        bad = np.isinf(cast) & np.isfinite(arr)
        if bad.any():
            raise _cannot(arr[int(np.argmax(bad))], physical_type, "too large for its range")
    return cast.view(np.uint32 if physical_type == "FLOAT" else np.uint64)


def _utf8_from_unicode(arr: NDArray[np.str_]) -> tuple[U8, I64, I64]:
    """UTF-8 of a 1-D numpy 'U' array as (data, starts, lengths), vectorised.

    numpy stores UTF-32; a value ends before its trailing NULs (``np.char.str_len``). ASCII
    (checked with one max over the codepoints) keeps the fixed-width layout, one byte per
    codepoint, so its values are spans with gaps; anything else is encoded codepoint-wise.
    """
    n, chars = arr.shape[0], arr.dtype.itemsize // 4
    native = arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))
    cps = np.ascontiguousarray(native).view(np.uint32).reshape(n, chars)
    nchars = np.char.str_len(native).astype(np.int64)
    if chars == 0 or int(cps.max()) < 0x80:
        starts = np.arange(n, dtype=np.int64) * chars
        return cps.astype(np.uint8).reshape(-1), starts, nchars
    return _utf8_from_codepoints(cps, nchars)


def _utf8_continuation(cps: NDArray[np.uint32], shift: int) -> U8:
    """The UTF-8 continuation byte 10xxxxxx holding bits shift..shift+5 of each codepoint."""
    return (((cps >> shift) & 0x3F) | 0x80).astype(np.uint8)


def _utf8_from_codepoints(cps: NDArray[np.uint32], nchars: I64) -> tuple[U8, I64, I64]:
    """Vectorised UTF-8 encoding of a (n, k) UTF-32 matrix whose rows hold nchars[i] chars.

    Every codepoint gets 4 byte slots (lead byte, then continuation bytes) and a size of
    1-4; keeping the first ``size`` slots of each packs the strings back to back.
    """
    n, k = cps.shape
    surrogate = (cps >= 0xD800) & (cps <= 0xDFFF)  # padding is 0, never a surrogate
    if surrogate.any():
        row = int(np.argmax(surrogate.any(axis=1)))
        text = "".join(map(chr, cps[row, : nchars[row]].tolist()))
        raise _cannot(text, "BYTE_ARRAY", "a lone surrogate has no UTF-8 encoding")
    size = np.where(cps < 0x80, 1, np.where(cps < 0x800, 2, np.where(cps < 0x10000, 3, 4)))
    size[np.arange(k) >= nchars[:, None]] = 0  # padding after the value's last char
    two, three = size == 2, size == 3
    lead = np.where(two, 0xC0 | (cps >> 6), np.where(three, 0xE0 | (cps >> 12), 0xF0 | (cps >> 18)))
    out = np.empty((n, k, 4), dtype=np.uint8)
    out[..., 0] = np.where(size == 1, cps, lead).astype(np.uint8)
    c0, c6, c12 = (_utf8_continuation(cps, s) for s in (0, 6, 12))
    out[..., 1] = np.where(two, c0, np.where(three, c6, c12))
    out[..., 2] = np.where(three, c0, c6)
    out[..., 3] = c0
    data: U8 = out[np.arange(4) < size[..., None]]
    lengths = size.sum(axis=1).astype(np.int64)
    return data, np.cumsum(lengths) - lengths, lengths


def _spans_to_rows(
    data: U8, starts: I64, lengths: I64, width: int, physical_type: str, show: _Show
) -> U8:
    """Fixed-width rows from byte spans that must all be ``width`` bytes long."""
    bad = lengths != width
    if bad.any():
        i = int(np.argmax(bad))
        raise _cannot(show(i), physical_type, f"{int(lengths[i])} bytes, not {width}")
    rows: U8 = data[starts[:, None] + np.arange(width)]
    return rows


def _hash_spans_as(
    data: U8,
    starts: I64,
    lengths: I64,
    physical_type: str,
    type_length: int | None,
    show: _Show,
) -> U64:
    """Hash byte-string values as BYTE_ARRAY (as they are) or fixed width (length-checked)."""
    if physical_type == "BYTE_ARRAY":
        return xxh64.hash_spans(data, starts, lengths)
    if physical_type in ("FIXED_LEN_BYTE_ARRAY", "INT96") and type_length is not None:
        rows = _spans_to_rows(data, starts, lengths, type_length, physical_type, show)
        return xxh64.hash_rows(rows)
    raise _cannot(show(0), physical_type, "a byte string is not a number")


def _hash_rows_as(rows: U8, physical_type: str, type_length: int | None, show: _Show) -> U64:
    """Hash fixed-size byte values as FIXED_LEN_BYTE_ARRAY/INT96 (width-checked) or as
    BYTE_ARRAY (all bytes, as they are)."""
    n, width = rows.shape
    if physical_type == "BYTE_ARRAY":
        return xxh64.hash_rows(rows)  # the same bytes: BYTE_ARRAY hashes no length prefix
    if physical_type in ("FIXED_LEN_BYTE_ARRAY", "INT96"):
        if n and width != type_length:
            raise _cannot(show(0), physical_type, f"{width} bytes, not {type_length}")
        return xxh64.hash_rows(rows)
    raise _cannot(show(0), physical_type, "a byte string is not a number")


# ---- numpy arrays ---------------------------------------------------------------------------


def _infer_dtype(dtype: np.dtype[Any], example: Callable[[], object]) -> tuple[str, int | None]:
    """The physical type a numpy dtype is written as: pyarrow.parquet's choice for the Arrow
    type of the same name (uint32 -> INT32 by bit pattern, float16 -> FLBA(2), ...)."""
    kind, size = dtype.kind, dtype.itemsize
    if kind == "b":
        raise ValueError(_BOOLEAN_MESSAGE)
    if kind in "iu":
        return ("INT32", None) if size <= 4 else ("INT64", None)
    if kind == "f" and size == 2:
        return ("FIXED_LEN_BYTE_ARRAY", 2)
    if kind == "f" and size == 4:
        return ("FLOAT", None)
    if kind == "f" and size == 8:
        return ("DOUBLE", None)
    if kind in "SU":
        return ("BYTE_ARRAY", None)
    hint = " (convert it with pyarrow.array() first)" if kind in "Mm" else ""
    raise TypeError(
        f"cannot hash {_describe(example())}: numpy dtype {dtype} has no Parquet physical "
        f"type{hint}"
    )


def _hash_ndarray(arr: NDArray[Any], physical_type: str | None, type_length: int | None) -> U64:
    """Hash a numpy array's values, flattened in C order (but a 2-D uint8 array holds one
    FIXED_LEN_BYTE_ARRAY/INT96 value per row)."""
    if arr.dtype.kind in "OT":  # Python objects, or numpy 2 variable-width strings
        return _hash_list(arr.ravel().tolist(), physical_type, type_length)
    as_rows = (
        physical_type in ("FIXED_LEN_BYTE_ARRAY", "INT96")
        and arr.ndim == 2
        and arr.dtype == np.uint8
    )
    if not as_rows:
        arr = arr.ravel()

    def show(i: int) -> object:
        return arr[i] if arr.ndim == 1 else arr[i].tobytes()

    if physical_type is None:
        physical_type, type_length = _infer_dtype(arr.dtype, lambda: arr[0] if arr.size else arr)
    if arr.shape[0] == 0:
        return _empty()
    kind = arr.dtype.kind
    if kind == "b":
        raise _cannot(show(0), physical_type, "a boolean is not a number or bytes")
    if physical_type in ("INT32", "INT64"):
        if kind not in "iu":
            raise _cannot(show(0), physical_type, "not an integer")
        lanes = _int_lanes(arr, physical_type)
        return xxh64.hash_u32(lanes) if physical_type == "INT32" else xxh64.hash_u64(lanes)
    if physical_type in ("FLOAT", "DOUBLE"):
        if kind not in "iuf":
            raise _cannot(show(0), physical_type, "not a number")
        lanes = _float_lanes(arr, physical_type)
        return xxh64.hash_u32(lanes) if physical_type == "FLOAT" else xxh64.hash_u64(lanes)
    n = arr.shape[0]
    if as_rows:
        return _hash_rows_as(np.ascontiguousarray(arr), physical_type, type_length, show)
    if kind in "SV":
        rows = np.ascontiguousarray(arr).view(np.uint8).reshape(n, arr.dtype.itemsize)
        if physical_type == "BYTE_ARRAY" and kind == "S":
            # A numpy 'S' value ends before its trailing NULs; a fixed-width column keeps
            # every byte instead (a UUID may end in zero bytes).
            starts = np.arange(n, dtype=np.int64) * arr.dtype.itemsize
            lengths = np.char.str_len(arr).astype(np.int64)
            return xxh64.hash_spans(rows.reshape(-1), starts, lengths)
        return _hash_rows_as(rows, physical_type, type_length, show)
    if kind == "U":
        data, starts, lengths = _utf8_from_unicode(arr)
        return _hash_spans_as(data, starts, lengths, physical_type, type_length, show)
    if kind == "f" and arr.dtype.itemsize == 2 and physical_type == "FIXED_LEN_BYTE_ARRAY":
        # Half floats: pyarrow writes FIXED_LEN_BYTE_ARRAY(2) of the little-endian bits.
        rows = np.ascontiguousarray(arr.astype("<f2")).view(np.uint8).reshape(n, 2)
        return _hash_rows_as(rows, physical_type, type_length, show)
    raise _cannot(show(0), physical_type, "not a byte string")


# ---- Python values --------------------------------------------------------------------------


def _infer_scalar(value: object) -> tuple[str, int | None]:
    """The physical type a Python or numpy scalar is hashed as when none is given."""
    if isinstance(value, bool | np.bool_):
        raise ValueError(_BOOLEAN_MESSAGE)
    if isinstance(value, str | bytes | bytearray | memoryview):
        return ("BYTE_ARRAY", None)
    if isinstance(value, int):
        return ("INT64", None)
    if isinstance(value, float):  # np.float64 included: DOUBLE either way
        return ("DOUBLE", None)
    if isinstance(value, np.generic):
        return _infer_dtype(value.dtype, lambda: value)
    raise TypeError(
        f"cannot hash {_describe(value)}: expected an int, float, str, bytes-like or numpy "
        "scalar, a sequence of them, a numpy array or a pyarrow Array/ChunkedArray"
    )


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _hash_blobs(values: list[Any], kind: type, physical_type: str, type_length: int | None) -> U64:
    """Hash same-typed str/bytes-like values as spans of one concatenated buffer."""
    if physical_type not in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY", "INT96"):
        raise _cannot(values[0], physical_type, "a string is not a number")
    if issubclass(kind, str) and physical_type == "INT96":
        raise _cannot(values[0], physical_type, "INT96 values are 12 raw bytes")
    packed = _pack_with_arrow(values, kind)
    if packed is None:
        packed = _pack_with_join(values, kind, physical_type)
    data, starts, lengths = packed
    return _hash_spans_as(data, starts, lengths, physical_type, type_length, values.__getitem__)


def _pack_with_arrow(values: list[Any], kind: type) -> tuple[U8, I64, I64] | None:
    """UTF-8 encode and concatenate with pyarrow: one C loop, about three times faster than
    str.encode + bytes.join. None if pyarrow refuses the values, or if the process has not
    imported pyarrow: loading it costs more than it saves on a probe's few literals, and the
    core of this package runs without it (a filter on a Spark executor, say)."""
    pa = sys.modules.get("pyarrow")
    if pa is None or not hasattr(pa, "large_binary"):  # absent, or still being imported
        return None
    try:
        arr = pa.array(
            values, type=pa.large_string() if issubclass(kind, str) else pa.large_binary()
        )
    except (pa.ArrowException, UnicodeError, TypeError, ValueError):
        return None
    offsets = _arrow_offsets(arr, "<i8")
    buf = arr.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.empty(0, np.uint8)
    return data, offsets[:-1], np.diff(offsets)


def _pack_with_join(values: list[Any], kind: type, physical_type: str) -> tuple[U8, I64, I64]:
    """The same with C-level str.encode/bytes.join; also finds the value that fails."""
    blobs: list[Any] = values
    if issubclass(kind, str):
        try:
            blobs = list(map(str.encode, values))
        except UnicodeEncodeError:
            bad = next(v for v in values if not _encodes(v))
            raise _cannot(bad, physical_type, "not valid UTF-8 (lone surrogate)") from None
    elif issubclass(kind, memoryview):
        blobs = list(map(memoryview.tobytes, values))
    lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs))
    data = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    return data, np.cumsum(lengths) - lengths, lengths


def _hash_ints(values: list[Any], kind: type, physical_type: str) -> U64:
    """Hash Python ints as INT32/INT64 (range-checked) or FLOAT/DOUBLE (converted)."""
    ints = values if kind is int else list(map(int, values))  # int subclasses, e.g. IntEnum
    if physical_type in ("FLOAT", "DOUBLE"):
        try:
            floats = np.array(ints, dtype=np.float64)
        except OverflowError:
            bad = next(v for v in values if abs(int(v)) >= 2**1024)
            raise _cannot(bad, physical_type, "too large for its range") from None
        return _hash_ndarray(floats, physical_type, None)
    if physical_type not in _INT_RANGE:
        raise _cannot(values[0], physical_type, "an integer is not a byte string")
    lo, hi = _INT_RANGE[physical_type]
    try:
        arr = np.array(ints, dtype=np.int64)
    except OverflowError:
        pass
    else:
        if physical_type == "INT32":  # checked here to name the Python value, not numpy's
            bad = (arr < lo) | (arr > hi)
            if bad.any():
                raise _cannot(values[int(np.argmax(bad))], physical_type, f"outside [{lo}, {hi}]")
        return _hash_ndarray(arr, physical_type, None)
    # Some value is outside int64: check the range exactly on Python ints (object arrays
    # compare in C), then keep the low 64 bits, which is the uint64 bit pattern.
    obj = np.array(ints, dtype=object)
    bad = (obj < lo) | (obj > hi)
    if bad.any():
        raise _cannot(values[int(np.argmax(bad))], physical_type, f"outside [{lo}, {hi}]")
    return _hash_ndarray((obj & _UINT64_MASK).astype(np.uint64), physical_type, None)


def _hash_same_type(
    values: list[Any], kind: type, physical_type: str | None, type_length: int | None
) -> U64:
    """Hash non-empty ``values`` that all have the Python type ``kind``."""
    target, tl = (physical_type, type_length)
    if target is None:
        target, tl = _infer_scalar(values[0])
    if issubclass(kind, str | bytes | bytearray | memoryview):  # np.str_/np.bytes_ too
        return _hash_blobs(values, kind, target, tl)
    if issubclass(kind, bool | np.bool_):
        raise _cannot(values[0], target, "a boolean is not a number or bytes")
    if issubclass(kind, np.generic) and not issubclass(kind, float):
        return _hash_ndarray(np.array(values), target, tl)
    if issubclass(kind, int):
        return _hash_ints(values, kind, target)
    if issubclass(kind, float):
        if target not in ("FLOAT", "DOUBLE"):
            why = "not an integer" if target in _INT_RANGE else "a float is not a byte string"
            raise _cannot(values[0], target, why)
        return _hash_ndarray(np.array(values, dtype=np.float64), target, tl)
    raise _wrong_value(values[0], target, "unsupported value")


_NONE_TYPE = type(None)


def _hash_list(values: list[Any], physical_type: str | None, type_length: int | None) -> U64:
    """Hash a list of scalars, skipping None.

    Values are grouped by Python type (usually one; found by a C-level ``set(map(type))``),
    each group is encoded at once, and the hashes are put back in input order.
    """
    types = set(map(type, values))
    if len(types) == 1 and _NONE_TYPE not in types:
        return _hash_same_type(values, types.pop(), physical_type, type_length)
    code = {kind: i for i, kind in enumerate(types)}
    codes = np.fromiter(map(code.__getitem__, map(type, values)), dtype=np.intp, count=len(values))
    objs = np.fromiter(values, dtype=object, count=len(values))
    present = codes != code.get(_NONE_TYPE, -1)
    codes, objs = codes[present], objs[present]
    out = np.empty(objs.shape[0], dtype=np.uint64)
    for kind, i in code.items():
        if kind is not _NONE_TYPE:
            idx = np.flatnonzero(codes == i)
            out[idx] = _hash_same_type(objs[idx].tolist(), kind, physical_type, type_length)
    return out


# ---- pyarrow arrays -------------------------------------------------------------------------


def _arrow_validity(arr: Any) -> NDArray[np.bool_] | None:
    """Validity of every slot of an Arrow array (respecting its offset), None if no nulls."""
    if arr.null_count == 0:
        return None
    length, offset = len(arr), arr.offset
    bitmap = arr.buffers()[0]
    if bitmap is None:  # e.g. a null-typed array: nothing is valid
        return np.zeros(length, dtype=np.bool_)
    first = offset // 8
    raw = np.frombuffer(bitmap, dtype=np.uint8)[first : (offset + length + 7) // 8]
    bits = np.unpackbits(raw, bitorder="little")
    return bits[offset - 8 * first : offset - 8 * first + length].astype(np.bool_)


def _arrow_fixed(arr: Any, dtype: str, valid: NDArray[np.bool_] | None) -> NDArray[Any]:
    """The values buffer of a fixed-width Arrow array as numpy, nulls dropped."""
    width = np.dtype(dtype).itemsize
    buf = arr.buffers()[1]
    if len(arr) == 0 or buf is None:
        return np.empty(0, dtype=dtype)
    vals = np.frombuffer(buf, dtype=dtype, count=min(arr.offset + len(arr), buf.size // width))
    vals = vals[arr.offset : arr.offset + len(arr)]
    return vals if valid is None else vals[valid]


def _arrow_rows(arr: Any, width: int, valid: NDArray[np.bool_] | None) -> U8:
    """The values buffer of a fixed-size binary/decimal Arrow array as (n, width) bytes."""
    buf = arr.buffers()[1]
    if len(arr) == 0 or buf is None or width == 0:
        n = len(arr) if valid is None else int(valid.sum())
        return np.empty((n, width), dtype=np.uint8)
    raw = np.frombuffer(buf, dtype=np.uint8)
    rows = raw[arr.offset * width : (arr.offset + len(arr)) * width].reshape(-1, width)
    return rows if valid is None else rows[valid]


def decimal_width(precision: int) -> int:
    """Bytes pyarrow.parquet uses for a decimal of this precision: the fewest whose signed
    range holds 10**precision - 1 (parquet-format LogicalTypes.md, "DECIMAL")."""
    n = 1
    while 10**precision > 1 << (8 * n - 1):
        n += 1
    return n


def _decimal_big_endian(le_rows: U8, width: int, arrow_type: object) -> U8:
    """Little-endian two's-complement decimal words -> big-endian, ``width`` bytes each
    (sign-extended, or narrowed if the dropped bytes are only sign)."""
    size = le_rows.shape[1]
    be = le_rows[:, ::-1]
    if width >= size:
        sign = np.where(be[:, :1] >= 0x80, 0xFF, 0).astype(np.uint8)
        return np.ascontiguousarray(np.hstack([np.repeat(sign, width - size, axis=1), be]))
    kept = be[:, size - width :]
    sign = np.where(kept[:, :1] >= 0x80, 0xFF, 0).astype(np.uint8)
    bad = (be[:, : size - width] != sign).any(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        unscaled = int.from_bytes(le_rows[i].tobytes(), "little", signed=True)
        raise ValueError(
            f"cannot encode unscaled decimal {unscaled} ({arrow_type}) in {width} bytes"
        )
    return np.ascontiguousarray(kept)


def _minimal_twos_complement(be: U8) -> tuple[U8, I64, I64]:
    """Big-endian two's-complement rows -> each value in its fewest bytes, back to back, as
    (data, starts, lengths): a BYTE_ARRAY decimal (LogicalTypes.md, "DECIMAL": "the minimum
    number of bytes"). A leading sign byte is redundant while the next byte has the same sign
    bit; zero and -1 keep one byte."""
    n, width = be.shape
    sign = np.where(be[:, 0] >= 0x80, 0xFF, 0).astype(np.uint8)
    leading = np.logical_and.accumulate(be == sign[:, None], axis=1).sum(axis=1)
    first = be[np.arange(n), np.minimum(leading, width - 1)]
    keeps_sign = (first & 0x80) == (sign & 0x80)
    start = np.where(leading == width, width - 1, np.where(keeps_sign, leading, leading - 1))
    lengths = (width - start).astype(np.int64)
    data = np.ascontiguousarray(be[np.arange(width)[None, :] >= start[:, None]])  # row-major
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return data, starts, lengths


def _scaled(values: NDArray[np.int64], factor: int, arrow_type: object, target: str) -> I64:
    """values * factor, refusing results that overflow int64 (pyarrow's casts refuse too)."""
    limit = (2**63 - 1) // factor
    bad = (values > limit) | (values < -limit)  # not np.abs: it wraps at the int64 minimum
    if bad.any():
        raise _cannot(values[int(np.argmax(bad))], target, f"{arrow_type} overflows when scaled")
    return values * factor


def _narrow_int32(values: I64, arrow_type: object) -> NDArray[np.int32]:
    bad = (values < -(2**31)) | (values >= 2**31)
    if bad.any():
        raise _cannot(values[int(np.argmax(bad))], "INT32", f"{arrow_type} out of range")
    return values.astype(np.int32)


def _int96_rows(values: I64, unit: str, arrow_type: object) -> U8:
    """Timestamps -> INT96 (8 bytes nanoseconds of day, 4 bytes Julian day, little-endian),
    the deprecated layout pyarrow writes with use_deprecated_int96_timestamps=True."""
    factor = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit]
    nanos = _scaled(values, factor, arrow_type, "INT96")
    days = nanos // _NANOS_PER_DAY
    rows = np.empty((values.shape[0], 12), dtype=np.uint8)
    rows[:, :8] = (nanos - days * _NANOS_PER_DAY).astype("<u8").view(np.uint8).reshape(-1, 8)
    julian = (days + JULIAN_UNIX_EPOCH).astype("<i4")
    rows[:, 8:] = julian.view(np.uint8).reshape(-1, 4)
    return rows


def _hash_arrow(values: Any, physical_type: str | None, type_length: int | None) -> U64:
    pa = sys.modules["pyarrow"]
    if isinstance(values, pa.ChunkedArray):
        _check_arrow_type(pa, values.type)
        parts = [_hash_arrow_array(pa, c, physical_type, type_length) for c in values.chunks]
        return np.concatenate(parts) if parts else _empty()
    return _hash_arrow_array(pa, values, physical_type, type_length)


def _check_arrow_type(pa: Any, t: Any) -> None:
    """Reject types without a hashable leaf early (also for empty chunked arrays)."""
    while isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        raise ValueError(_BOOLEAN_MESSAGE)
    if pa.types.is_run_end_encoded(t):
        raise TypeError(
            f"cannot hash Arrow type {t}: pyarrow.parquet does not write it; decode it first "
            "(arr.cast(arr.type.value_type))"
        )
    if pa.types.is_nested(t):
        raise TypeError(
            f"cannot hash a nested Arrow type ({t}): Bloom filters belong to leaf columns, "
            "so pass the leaf array (e.g. pyarrow.compute.list_flatten(arr) or "
            "arr.field('name'))"
        )


def _hash_arrow_array(pa: Any, arr: Any, target: str | None, tl: int | None) -> U64:
    """Hash one Arrow array's values as ``pyarrow.parquet.write_table`` stores them by default
    (format version 2.6; each conversion below was checked against a written file), or, with
    ``target`` given, as that physical type."""
    _check_arrow_type(pa, arr.type)
    while isinstance(arr.type, pa.BaseExtensionType):  # e.g. arrow.uuid: written as storage
        arr = arr.storage
    t = arr.type
    types = pa.types
    if types.is_dictionary(t):
        return _hash_arrow_dictionary(pa, arr, target, tl)
    if types.is_null(t):
        return _empty()  # written as an all-null INT32 column: nothing to hash
    valid = _arrow_validity(arr)

    def numbers(values: NDArray[Any]) -> U64:
        # Numeric values already as stored; with no target, numpy's dtype inference gives
        # pyarrow's physical type (8-32-bit ints -> INT32, float16 -> FLBA(2), ...).
        return _hash_ndarray(values, target, tl)

    if types.is_integer(t):
        sign = "i" if types.is_signed_integer(t) else "u"
        return numbers(_arrow_fixed(arr, f"<{sign}{t.bit_width // 8}", valid))
    if types.is_floating(t):
        return numbers(_arrow_fixed(arr, f"<f{t.bit_width // 8}", valid))
    if types.is_date32(t):
        return numbers(_arrow_fixed(arr, "<i4", valid))
    if types.is_date64(t):
        # Written as INT32 days; pyarrow's cast truncates toward zero (-1 ms is day 0).
        ms = _arrow_fixed(arr, "<i8", valid)
        return numbers(_narrow_int32((ms - np.fmod(ms, _MILLIS_PER_DAY)) // _MILLIS_PER_DAY, t))
    if types.is_time32(t):
        vals = _arrow_fixed(arr, "<i4", valid)
        if t.unit == "s":  # Parquet TIME has no seconds unit: written as milliseconds
            vals = _narrow_int32(_scaled(vals.astype(np.int64), 1000, t, "INT32"), t)
        return numbers(vals)
    if types.is_time64(t) or types.is_duration(t):  # durations: raw INT64 in their own unit
        return numbers(_arrow_fixed(arr, "<i8", valid))
    if types.is_timestamp(t):
        vals = _arrow_fixed(arr, "<i8", valid)
        if target == "INT96":
            return xxh64.hash_rows(_int96_rows(vals, t.unit, t))
        if t.unit == "s":  # Parquet TIMESTAMP has no seconds unit: written as milliseconds
            vals = _scaled(vals, 1000, t, "INT64")
        return numbers(vals)
    if types.is_decimal(t):
        le = _arrow_rows(arr, t.bit_width // 8, valid)
        if target in ("INT32", "INT64"):
            # The store_decimal_as_integer=True layout: the unscaled value as an integer.
            be8 = _decimal_big_endian(le, 8, t)
            return _hash_ndarray(be8.view(">i8").reshape(-1).astype(np.int64), target, None)
        if target == "BYTE_ARRAY":
            be = _decimal_big_endian(le, le.shape[1], t)
            return xxh64.hash_spans(*_minimal_twos_complement(be))
        if target not in (None, "FIXED_LEN_BYTE_ARRAY"):
            raise ValueError(f"cannot encode {t} values as {target}")
        # Default: big-endian two's complement, the fewest bytes that hold the precision.
        width = decimal_width(t.precision) if tl is None else tl
        return xxh64.hash_rows(_decimal_big_endian(le, width, t))
    if types.is_fixed_size_binary(t):
        rows = _arrow_rows(arr, t.byte_width, valid)
        if target is None:
            return xxh64.hash_rows(rows)
        return _hash_rows_as(rows, target, tl, lambda i: rows[i].tobytes())
    if any(f(t) for f in (types.is_string_view, types.is_binary_view)):
        # Views point into several buffers; one C-level cast gives the offsets layout.
        return _hash_arrow_array(pa, arr.cast(pa.large_binary()), target, tl)
    if any(f(t) for f in (types.is_string, types.is_binary)):
        offsets = _arrow_offsets(arr, "<i4")
    elif any(f(t) for f in (types.is_large_string, types.is_large_binary)):
        offsets = _arrow_offsets(arr, "<i8")
    else:
        raise TypeError(
            f"cannot hash Arrow type {t}: pyarrow.parquet does not write it as a column "
            "with a Bloom filter"
        )
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    if valid is not None:
        starts, lengths = starts[valid], lengths[valid]
    return _hash_spans_as(
        data,
        starts,
        lengths,
        target or "BYTE_ARRAY",
        tl,
        lambda i: data[starts[i] : starts[i] + lengths[i]].tobytes(),
    )


def _arrow_offsets(arr: Any, dtype: str) -> I64:
    buf = arr.buffers()[1]
    if len(arr) == 0 or buf is None:
        return np.zeros(1, dtype=np.int64)
    offs = np.frombuffer(buf, dtype=dtype)[arr.offset : arr.offset + len(arr) + 1]
    return offs.astype(np.int64)


def _hash_arrow_dictionary(
    pa: Any, arr: Any, physical_type: str | None, type_length: int | None
) -> U64:
    """Hash each dictionary entry once, then pick the hashes by index: the file stores (and
    the writer hashes) the decoded values, and a dictionary is usually far shorter."""
    dictionary = arr.dictionary
    dict_hashes = _hash_arrow_array(pa, dictionary, physical_type, type_length)
    dict_valid = _arrow_validity(dictionary)
    if dict_valid is not None:  # null entries: hashes only for the valid ones, scatter back
        full = np.zeros(len(dictionary), dtype=np.uint64)
        full[dict_valid] = dict_hashes
        dict_hashes = full
    indices = arr.indices
    t = indices.type
    dtype = f"<{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}"
    idx = _arrow_fixed(indices, dtype, _arrow_validity(indices)).astype(np.int64)
    if idx.shape[0] and (idx.min() < 0 or idx.max() >= len(dictionary)):
        raise ValueError(f"dictionary index out of range 0..{len(dictionary) - 1}")
    if dict_valid is not None:
        idx = idx[dict_valid[idx]]
    return dict_hashes[idx]


# ---- public API -----------------------------------------------------------------------------


def hash_values(
    values: object, physical_type: str | None = None, *, type_length: int | None = None
) -> np.ndarray:
    """XXH64 (seed 0) of the PLAIN encoding of every non-null value, as a uint64 array.

    ``values``: a Python scalar (int, float, str, bytes-like), a sequence of them, a numpy
    array, or a pyarrow Array/ChunkedArray (a pandas Series goes through pyarrow, as
    pyarrow.parquet writes it). None and Arrow nulls are skipped (Bloom filters hold no
    nulls), so the result can be shorter than the input.

    ``physical_type`` (one of :data:`PHYSICAL_TYPES`, any case) says how to encode; with None
    it is inferred: Python int -> INT64, float -> DOUBLE, str/bytes -> BYTE_ARRAY; numpy by
    dtype (8-32-bit ints -> INT32, 64-bit -> INT64, float32 -> FLOAT, float64 -> DOUBLE,
    float16 -> FIXED_LEN_BYTE_ARRAY(2), 'S'/'U' -> BYTE_ARRAY); pyarrow exactly as
    ``pyarrow.parquet.write_table`` stores the type by default. ``type_length`` is the
    width of FIXED_LEN_BYTE_ARRAY values (required for it, ignored for other types).

    Raises ValueError for BOOLEAN and for values that do not fit the physical type (naming
    the value and type), TypeError for objects that are not values at all.
    """
    target = _check_physical_type(physical_type)
    tl = _check_type_length(target, type_length) if target is not None else None
    pa = sys.modules.get("pyarrow")  # an Arrow object implies pyarrow is already imported
    if pa is not None and isinstance(values, pa.Array | pa.ChunkedArray):
        return _hash_arrow(values, target, tl)
    if isinstance(values, np.ndarray):
        return _hash_ndarray(values, target, tl)
    if isinstance(values, str | bytes | bytearray | memoryview | int | float | np.generic):
        return _hash_list([values], target, tl)
    if values is None:
        return _empty()
    if type(values).__module__.partition(".")[0] == "pandas":
        # As pyarrow.parquet writes pandas data: missing values (None, NaN, NA) are nulls.
        import pyarrow

        return _hash_arrow(pyarrow.Array.from_pandas(values), target, tl)
    if hasattr(values, "__array__") and not isinstance(values, Sequence):
        return _hash_ndarray(np.asarray(values), target, tl)
    if isinstance(values, Iterable) and not isinstance(values, Mapping):
        return _hash_list(list(values), target, tl)
    raise TypeError(
        f"cannot hash {_describe(values)}: expected a scalar, a sequence, a numpy array or "
        "a pyarrow Array/ChunkedArray"
    )


def plain_encode(
    value: object, physical_type: str | None, *, type_length: int | None = None
) -> bytes:
    """The PLAIN bytes of one value (BYTE_ARRAY without its 4-byte length prefix), exactly
    what a Bloom filter hashes. Written with struct/int.to_bytes, independent of the
    vectorised encoders, so each checks the other."""
    target = _check_physical_type(physical_type)
    if value is None:
        raise ValueError("None is a null: it has no PLAIN encoding and is never in a Bloom filter")
    if target is None:
        target, type_length = _infer_scalar(value)
    tl = _check_type_length(target, type_length)
    if isinstance(value, bool | np.bool_):
        raise _cannot(value, target, "booleans are not numbers or bytes")
    if target in _INT_RANGE:
        if not isinstance(value, int | np.integer):
            raise _wrong_value(value, target, "not an integer")
        lo, hi = _INT_RANGE[target]
        number = int(value)
        if not lo <= number <= hi:
            raise _cannot(value, target, f"outside [{lo}, {hi}]")
        size = 4 if target == "INT32" else 8
        return (number & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    if target in ("FLOAT", "DOUBLE"):
        fmt = "<f" if target == "FLOAT" else "<d"
        if isinstance(value, np.floating) and not isinstance(value, np.float64):
            # float32/float16 keep their exact bits (NaN payloads too) when widened or kept.
            with np.errstate(over="ignore", invalid="ignore"):
                cast = np.asarray(value).astype(fmt)
            if np.isinf(cast) and np.isfinite(value):
                raise _cannot(value, target, "too large for its range")
            return cast.tobytes()
        if not isinstance(value, int | float | np.integer):
            raise _wrong_value(value, target, "not a number")
        try:
            return struct.pack(fmt, float(value))
        except OverflowError:
            raise _cannot(value, target, "too large for its range") from None
    # Byte types.
    if isinstance(value, str):
        if target == "INT96":
            raise _cannot(value, target, "INT96 takes 12 raw bytes")
        try:
            blob = value.encode()
        except UnicodeEncodeError:
            raise _cannot(value, target, "not valid UTF-8 (lone surrogate)") from None
    elif isinstance(value, bytes | bytearray | memoryview):
        blob = bytes(value) if not isinstance(value, memoryview) else value.tobytes()
    elif isinstance(value, np.floating) and value.dtype.itemsize == 2 and tl == 2:
        blob = np.asarray(value).astype("<f2").tobytes()
    else:
        raise _wrong_value(value, target, "not a byte string")
    if tl is not None and len(blob) != tl:
        raise _cannot(value, target, f"{len(blob)} bytes, not {tl}")
    return blob


def hash_value(
    value: object, physical_type: str | None = None, *, type_length: int | None = None
) -> int:
    """XXH64 (seed 0) of one value's PLAIN encoding, via the ``xxhash`` package.

    For a single probe this beats setting up numpy arrays; it equals
    ``hash_values([value], physical_type, type_length=type_length)[0]``.
    """
    return int(xxhash.xxh64_intdigest(plain_encode(value, physical_type, type_length=type_length)))

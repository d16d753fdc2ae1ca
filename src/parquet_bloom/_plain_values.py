"""numpy arrays and Python values -> their Parquet PLAIN bytes (parquet-format Encodings.md,
"Plain: (PLAIN = 0)") -> XXH64 hashes, vectorised.

Integers become their little-endian lanes, floats their IEEE-754 bits, strings their UTF-8
(encoded in numpy for 'U' arrays, with pyarrow or ``bytes.join`` for Python strings), and byte
strings are hashed as BYTE_ARRAY spans or fixed-width rows. A list of Python values is grouped
by type and each group encoded at once. The physical types and their checks are
:mod:`parquet_bloom._physical`'s; Arrow arrays are :mod:`parquet_bloom._plain_arrow`'s.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

from parquet_bloom import _xxh64 as xxh64
from parquet_bloom._arrow_buffers import arrow_offsets
from parquet_bloom._physical import (
    INT_RANGE,
    cannot,
    empty,
    infer_dtype,
    infer_scalar,
    wrong_value,
)
from parquet_bloom._xxh64 import I64, U8, U64

# Shows the i-th value in an error message (built lazily: only errors need it).
_Show: TypeAlias = Callable[[int], object]

# Python ints wrap to their uint64 bit pattern through this mask.
_UINT64_MASK = (1 << 64) - 1


def _int_lanes(arr: NDArray[Any], physical_type: str) -> NDArray[Any]:
    """Integer array -> little-endian uint32 (INT32) or uint64 (INT64) bit patterns.

    Narrower types widen as Parquet stores them (sign-extend signed, zero-extend unsigned);
    same-width unsigned keeps its bit pattern; a wider array must hold values that fit.
    """
    if physical_type == "INT32" and arr.dtype.itemsize > 4:
        lo, hi = INT_RANGE[physical_type]
        bad = (arr > hi) if arr.dtype.kind == "u" else (arr < lo) | (arr > hi)
        if bad.any():
            raise cannot(arr[int(np.argmax(bad))], physical_type, f"outside [{lo}, {hi}]")
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
            raise cannot(arr[int(np.argmax(bad))], physical_type, "too large for its range")
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
        raise cannot(text, "BYTE_ARRAY", "a lone surrogate has no UTF-8 encoding")
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
        raise cannot(show(i), physical_type, f"{int(lengths[i])} bytes, not {width}")
    rows: U8 = data[starts[:, None] + np.arange(width)]
    return rows


def hash_spans_as(
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
    raise cannot(show(0), physical_type, "a byte string is not a number")


def hash_rows_as(rows: U8, physical_type: str, type_length: int | None, show: _Show) -> U64:
    """Hash fixed-size byte values as FIXED_LEN_BYTE_ARRAY/INT96 (width-checked) or as
    BYTE_ARRAY (all bytes, as they are)."""
    n, width = rows.shape
    if physical_type == "BYTE_ARRAY":
        return xxh64.hash_rows(rows)  # the same bytes: BYTE_ARRAY hashes no length prefix
    if physical_type in ("FIXED_LEN_BYTE_ARRAY", "INT96"):
        if n and width != type_length:
            raise cannot(show(0), physical_type, f"{width} bytes, not {type_length}")
        return xxh64.hash_rows(rows)
    raise cannot(show(0), physical_type, "a byte string is not a number")


def hash_ndarray(arr: NDArray[Any], physical_type: str | None, type_length: int | None) -> U64:
    """Hash a numpy array's values, flattened in C order (but a 2-D uint8 array holds one
    FIXED_LEN_BYTE_ARRAY/INT96 value per row)."""
    if arr.dtype.kind in "OT":  # Python objects, or numpy 2 variable-width strings
        return hash_list(arr.ravel().tolist(), physical_type, type_length)
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
        physical_type, type_length = infer_dtype(arr.dtype, lambda: arr[0] if arr.size else arr)
    if arr.shape[0] == 0:
        return empty()
    kind = arr.dtype.kind
    if kind == "b":
        raise cannot(show(0), physical_type, "a boolean is not a number or bytes")
    if physical_type in ("INT32", "INT64"):
        if kind not in "iu":
            raise cannot(show(0), physical_type, "not an integer")
        lanes = _int_lanes(arr, physical_type)
        return xxh64.hash_u32(lanes) if physical_type == "INT32" else xxh64.hash_u64(lanes)
    if physical_type in ("FLOAT", "DOUBLE"):
        if kind not in "iuf":
            raise cannot(show(0), physical_type, "not a number")
        lanes = _float_lanes(arr, physical_type)
        return xxh64.hash_u32(lanes) if physical_type == "FLOAT" else xxh64.hash_u64(lanes)
    n = arr.shape[0]
    if as_rows:
        return hash_rows_as(np.ascontiguousarray(arr), physical_type, type_length, show)
    if kind in "SV":
        rows = np.ascontiguousarray(arr).view(np.uint8).reshape(n, arr.dtype.itemsize)
        if physical_type == "BYTE_ARRAY" and kind == "S":
            # A numpy 'S' value ends before its trailing NULs; a fixed-width column keeps
            # every byte instead (a UUID may end in zero bytes).
            starts = np.arange(n, dtype=np.int64) * arr.dtype.itemsize
            lengths = np.char.str_len(arr).astype(np.int64)
            return xxh64.hash_spans(rows.reshape(-1), starts, lengths)
        return hash_rows_as(rows, physical_type, type_length, show)
    if kind == "U":
        data, starts, lengths = _utf8_from_unicode(arr)
        return hash_spans_as(data, starts, lengths, physical_type, type_length, show)
    if kind == "f" and arr.dtype.itemsize == 2 and physical_type == "FIXED_LEN_BYTE_ARRAY":
        # Half floats: pyarrow writes FIXED_LEN_BYTE_ARRAY(2) of the little-endian bits.
        rows = np.ascontiguousarray(arr.astype("<f2")).view(np.uint8).reshape(n, 2)
        return hash_rows_as(rows, physical_type, type_length, show)
    raise cannot(show(0), physical_type, "not a byte string")


# ---- Python values --------------------------------------------------------------------------


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _hash_blobs(values: list[Any], kind: type, physical_type: str, type_length: int | None) -> U64:
    """Hash same-typed str/bytes-like values as spans of one concatenated buffer."""
    if physical_type not in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY", "INT96"):
        raise cannot(values[0], physical_type, "a string is not a number")
    if issubclass(kind, str) and physical_type == "INT96":
        raise cannot(values[0], physical_type, "INT96 values are 12 raw bytes")
    packed = _pack_with_arrow(values, kind)
    if packed is None:
        packed = _pack_with_join(values, kind, physical_type)
    data, starts, lengths = packed
    return hash_spans_as(data, starts, lengths, physical_type, type_length, values.__getitem__)


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
    offsets = arrow_offsets(arr, "<i8")
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
            raise cannot(bad, physical_type, "not valid UTF-8 (lone surrogate)") from None
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
            raise cannot(bad, physical_type, "too large for its range") from None
        return hash_ndarray(floats, physical_type, None)
    if physical_type not in INT_RANGE:
        raise cannot(values[0], physical_type, "an integer is not a byte string")
    lo, hi = INT_RANGE[physical_type]
    try:
        arr = np.array(ints, dtype=np.int64)
    except OverflowError:
        pass
    else:
        if physical_type == "INT32":  # checked here to name the Python value, not numpy's
            bad = (arr < lo) | (arr > hi)
            if bad.any():
                raise cannot(values[int(np.argmax(bad))], physical_type, f"outside [{lo}, {hi}]")
        return hash_ndarray(arr, physical_type, None)
    # Some value is outside int64: check the range exactly on Python ints (object arrays
    # compare in C), then keep the low 64 bits, which is the uint64 bit pattern.
    obj = np.array(ints, dtype=object)
    bad = (obj < lo) | (obj > hi)
    if bad.any():
        raise cannot(values[int(np.argmax(bad))], physical_type, f"outside [{lo}, {hi}]")
    return hash_ndarray((obj & _UINT64_MASK).astype(np.uint64), physical_type, None)


def _hash_same_type(
    values: list[Any], kind: type, physical_type: str | None, type_length: int | None
) -> U64:
    """Hash non-empty ``values`` that all have the Python type ``kind``."""
    target, tl = (physical_type, type_length)
    if target is None:
        target, tl = infer_scalar(values[0])
    if issubclass(kind, str | bytes | bytearray | memoryview):  # np.str_/np.bytes_ too
        return _hash_blobs(values, kind, target, tl)
    if issubclass(kind, bool | np.bool_):
        raise cannot(values[0], target, "a boolean is not a number or bytes")
    if issubclass(kind, np.generic) and not issubclass(kind, float):
        return hash_ndarray(np.array(values), target, tl)
    if issubclass(kind, int):
        return _hash_ints(values, kind, target)
    if issubclass(kind, float):
        if target not in ("FLOAT", "DOUBLE"):
            why = "not an integer" if target in INT_RANGE else "a float is not a byte string"
            raise cannot(values[0], target, why)
        return hash_ndarray(np.array(values, dtype=np.float64), target, tl)
    raise wrong_value(values[0], target, "unsupported value")


_NONE_TYPE = type(None)


def hash_list(values: list[Any], physical_type: str | None, type_length: int | None) -> U64:
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

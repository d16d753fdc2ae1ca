"""Arrow arrays -> the XXH64 hashes of their values' PLAIN bytes, as ``pyarrow.parquet`` writes
each Arrow type (``timestamp[s]`` as milliseconds, ``date64`` as INT32 days, decimals as the
fewest big-endian bytes that hold their precision, dictionaries as their decoded values), or as
a physical type asked for. The numbers and byte strings themselves are hashed by
:mod:`parquet_bloom._plain_values`.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom import _xxh64 as xxh64
from parquet_bloom._arrow_buffers import arrow_fixed, arrow_offsets, arrow_rows, arrow_validity
from parquet_bloom._physical import BOOLEAN_MESSAGE, cannot, empty
from parquet_bloom._plain_values import hash_ndarray, hash_rows_as, hash_spans_as
from parquet_bloom._xxh64 import I64, U8, U64

# Days between the Julian day epoch and 1970-01-01: INT96 timestamps store (nanoseconds of
# the day, Julian day) (parquet-format LogicalTypes.md, "INT96 timestamps", deprecated).
JULIAN_UNIX_EPOCH = 2440588
_NANOS_PER_DAY = 86_400_000_000_000
_MILLIS_PER_DAY = 86_400_000


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
        raise cannot(values[int(np.argmax(bad))], target, f"{arrow_type} overflows when scaled")
    return values * factor


def _narrow_int32(values: I64, arrow_type: object) -> NDArray[np.int32]:
    bad = (values < -(2**31)) | (values >= 2**31)
    if bad.any():
        raise cannot(values[int(np.argmax(bad))], "INT32", f"{arrow_type} out of range")
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


def hash_arrow(values: Any, physical_type: str | None, type_length: int | None) -> U64:
    pa = sys.modules["pyarrow"]
    if isinstance(values, pa.ChunkedArray):
        _check_arrow_type(pa, values.type)
        parts = [_hash_arrow_array(pa, c, physical_type, type_length) for c in values.chunks]
        return np.concatenate(parts) if parts else empty()
    return _hash_arrow_array(pa, values, physical_type, type_length)


def _check_arrow_type(pa: Any, t: Any) -> None:
    """Reject types without a hashable leaf early (also for empty chunked arrays)."""
    while isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        raise ValueError(BOOLEAN_MESSAGE)
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
        return empty()  # written as an all-null INT32 column: nothing to hash
    valid = arrow_validity(arr)

    def numbers(values: NDArray[Any]) -> U64:
        # Numeric values already as stored; with no target, numpy's dtype inference gives
        # pyarrow's physical type (8-32-bit ints -> INT32, float16 -> FLBA(2), ...).
        return hash_ndarray(values, target, tl)

    if types.is_integer(t):
        sign = "i" if types.is_signed_integer(t) else "u"
        return numbers(arrow_fixed(arr, f"<{sign}{t.bit_width // 8}", valid))
    if types.is_floating(t):
        return numbers(arrow_fixed(arr, f"<f{t.bit_width // 8}", valid))
    if types.is_date32(t):
        return numbers(arrow_fixed(arr, "<i4", valid))
    if types.is_date64(t):
        # Written as INT32 days; pyarrow's cast truncates toward zero (-1 ms is day 0).
        ms = arrow_fixed(arr, "<i8", valid)
        return numbers(_narrow_int32((ms - np.fmod(ms, _MILLIS_PER_DAY)) // _MILLIS_PER_DAY, t))
    if types.is_time32(t):
        vals = arrow_fixed(arr, "<i4", valid)
        if t.unit == "s":  # Parquet TIME has no seconds unit: written as milliseconds
            vals = _narrow_int32(_scaled(vals.astype(np.int64), 1000, t, "INT32"), t)
        return numbers(vals)
    if types.is_time64(t) or types.is_duration(t):  # durations: raw INT64 in their own unit
        return numbers(arrow_fixed(arr, "<i8", valid))
    if types.is_timestamp(t):
        vals = arrow_fixed(arr, "<i8", valid)
        if target == "INT96":
            return xxh64.hash_rows(_int96_rows(vals, t.unit, t))
        if t.unit == "s":  # Parquet TIMESTAMP has no seconds unit: written as milliseconds
            vals = _scaled(vals, 1000, t, "INT64")
        return numbers(vals)
    if types.is_decimal(t):
        le = arrow_rows(arr, t.bit_width // 8, valid)
        if target in ("INT32", "INT64"):
            # The store_decimal_as_integer=True layout: the unscaled value as an integer.
            be8 = _decimal_big_endian(le, 8, t)
            return hash_ndarray(be8.view(">i8").reshape(-1).astype(np.int64), target, None)
        if target == "BYTE_ARRAY":
            be = _decimal_big_endian(le, le.shape[1], t)
            return xxh64.hash_spans(*_minimal_twos_complement(be))
        if target not in (None, "FIXED_LEN_BYTE_ARRAY"):
            raise ValueError(f"cannot encode {t} values as {target}")
        # Default: big-endian two's complement, the fewest bytes that hold the precision.
        width = decimal_width(t.precision) if tl is None else tl
        return xxh64.hash_rows(_decimal_big_endian(le, width, t))
    if types.is_fixed_size_binary(t):
        rows = arrow_rows(arr, t.byte_width, valid)
        if target is None:
            return xxh64.hash_rows(rows)
        return hash_rows_as(rows, target, tl, lambda i: rows[i].tobytes())
    if any(f(t) for f in (types.is_string_view, types.is_binary_view)):
        # Views point into several buffers; one C-level cast gives the offsets layout.
        return _hash_arrow_array(pa, arr.cast(pa.large_binary()), target, tl)
    if any(f(t) for f in (types.is_string, types.is_binary)):
        offsets = arrow_offsets(arr, "<i4")
    elif any(f(t) for f in (types.is_large_string, types.is_large_binary)):
        offsets = arrow_offsets(arr, "<i8")
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
    return hash_spans_as(
        data,
        starts,
        lengths,
        target or "BYTE_ARRAY",
        tl,
        lambda i: data[starts[i] : starts[i] + lengths[i]].tobytes(),
    )


def _hash_arrow_dictionary(
    pa: Any, arr: Any, physical_type: str | None, type_length: int | None
) -> U64:
    """Hash each dictionary entry once, then pick the hashes by index: the file stores (and
    the writer hashes) the decoded values, and a dictionary is usually far shorter."""
    dictionary = arr.dictionary
    dict_hashes = _hash_arrow_array(pa, dictionary, physical_type, type_length)
    dict_valid = arrow_validity(dictionary)
    if dict_valid is not None:  # null entries: hashes only for the valid ones, scatter back
        full = np.zeros(len(dictionary), dtype=np.uint64)
        full[dict_valid] = dict_hashes
        dict_hashes = full
    indices = arr.indices
    t = indices.type
    dtype = f"<{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}"
    idx = arrow_fixed(indices, dtype, arrow_validity(indices)).astype(np.int64)
    if idx.shape[0] and (idx.min() < 0 or idx.max() >= len(dictionary)):
        raise ValueError(f"dictionary index out of range 0..{len(dictionary) - 1}")
    if dict_valid is not None:
        idx = idx[dict_valid[idx]]
    return dict_hashes[idx]

"""Values -> their Parquet PLAIN bytes -> XXH64 hashes, for every physical type.

A Parquet split-block Bloom filter stores no values, only bits chosen by a 64-bit hash of each
value: XXH64 with seed 0 of the value's PLAIN encoding (docs/format-notes.md#the-hash). So one
number has several hashes: ``7`` in an INT32 column is the four bytes ``07 00 00 00``, in an
INT64 column eight bytes, in a DOUBLE column the IEEE-754 bits of ``7.0``. This module is the
door to the encoders that know the exact bytes a writer hashed for each physical type:
:func:`hash_values` hands numpy arrays and Python values to :mod:`parquet_bloom._plain_values`
and Arrow arrays to :mod:`parquet_bloom._plain_arrow` (as ``pyarrow.parquet`` converts each
Arrow type when it writes it: ``timestamp[s]`` is written as milliseconds, ``date64`` as INT32
days), which hand the bytes to :mod:`parquet_bloom._xxh64` to hash. The physical types and
their checks are :mod:`parquet_bloom._physical`'s. What a *literal* means in a column (its
logical type: decimals, timestamps, INT8 widened to INT32) is :mod:`parquet_bloom._logical`'s
business.

Only :func:`hash_value` (one probe value) goes through the ``xxhash`` package; it encodes with
:func:`plain_encode`, which is written independently of the vectorised encoders so the two
check each other in the tests.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import xxhash

from parquet_bloom._physical import (
    INT_RANGE,
    PHYSICAL_TYPES,
    cannot,
    check_physical_type,
    check_type_length,
    describe,
    empty,
    infer_scalar,
    wrong_value,
)
from parquet_bloom._plain_arrow import JULIAN_UNIX_EPOCH, decimal_width, hash_arrow
from parquet_bloom._plain_values import hash_list, hash_ndarray
from parquet_bloom._xxh64 import xxh64_fixed, xxh64_spans, xxh64_variable

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
    target = check_physical_type(physical_type)
    tl = check_type_length(target, type_length) if target is not None else None
    pa = sys.modules.get("pyarrow")  # an Arrow object implies pyarrow is already imported
    if pa is not None and isinstance(values, pa.Array | pa.ChunkedArray):
        return hash_arrow(values, target, tl)
    if isinstance(values, np.ndarray):
        return hash_ndarray(values, target, tl)
    if isinstance(values, str | bytes | bytearray | memoryview | int | float | np.generic):
        return hash_list([values], target, tl)
    if values is None:
        return empty()
    if type(values).__module__.partition(".")[0] == "pandas":
        # As pyarrow.parquet writes pandas data: missing values (None, NaN, NA) are nulls.
        import pyarrow

        return hash_arrow(pyarrow.Array.from_pandas(values), target, tl)
    if hasattr(values, "__array__") and not isinstance(values, Sequence):
        return hash_ndarray(np.asarray(values), target, tl)
    if isinstance(values, Iterable) and not isinstance(values, Mapping):
        return hash_list(list(values), target, tl)
    raise TypeError(
        f"cannot hash {describe(values)}: expected a scalar, a sequence, a numpy array or "
        "a pyarrow Array/ChunkedArray"
    )


def plain_encode(
    value: object, physical_type: str | None, *, type_length: int | None = None
) -> bytes:
    """The PLAIN bytes of one value (BYTE_ARRAY without its 4-byte length prefix), exactly
    what a Bloom filter hashes. Written with struct/int.to_bytes, independent of the
    vectorised encoders, so each checks the other."""
    target = check_physical_type(physical_type)
    if value is None:
        raise ValueError("None is a null: it has no PLAIN encoding and is never in a Bloom filter")
    if target is None:
        target, type_length = infer_scalar(value)
    tl = check_type_length(target, type_length)
    if isinstance(value, bool | np.bool_):
        raise cannot(value, target, "booleans are not numbers or bytes")
    if target in INT_RANGE:
        if not isinstance(value, int | np.integer):
            raise wrong_value(value, target, "not an integer")
        lo, hi = INT_RANGE[target]
        number = int(value)
        if not lo <= number <= hi:
            raise cannot(value, target, f"outside [{lo}, {hi}]")
        size = 4 if target == "INT32" else 8
        return (number & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    if target in ("FLOAT", "DOUBLE"):
        fmt = "<f" if target == "FLOAT" else "<d"
        if isinstance(value, np.floating) and not isinstance(value, np.float64):
            # float32/float16 keep their exact bits (NaN payloads too) when widened or kept.
            with np.errstate(over="ignore", invalid="ignore"):
                cast = np.asarray(value).astype(fmt)
            if np.isinf(cast) and np.isfinite(value):
                raise cannot(value, target, "too large for its range")
            return cast.tobytes()
        if not isinstance(value, int | float | np.integer):
            raise wrong_value(value, target, "not a number")
        try:
            return struct.pack(fmt, float(value))
        except OverflowError:
            raise cannot(value, target, "too large for its range") from None
    # Byte types.
    if isinstance(value, str):
        if target == "INT96":
            raise cannot(value, target, "INT96 takes 12 raw bytes")
        try:
            blob = value.encode()
        except UnicodeEncodeError:
            raise cannot(value, target, "not valid UTF-8 (lone surrogate)") from None
    elif isinstance(value, bytes | bytearray | memoryview):
        blob = bytes(value) if not isinstance(value, memoryview) else value.tobytes()
    elif isinstance(value, np.floating) and value.dtype.itemsize == 2 and tl == 2:
        blob = np.asarray(value).astype("<f2").tobytes()
    else:
        raise wrong_value(value, target, "not a byte string")
    if tl is not None and len(blob) != tl:
        raise cannot(value, target, f"{len(blob)} bytes, not {tl}")
    return blob


def hash_value(
    value: object, physical_type: str | None = None, *, type_length: int | None = None
) -> int:
    """XXH64 (seed 0) of one value's PLAIN encoding, via the ``xxhash`` package.

    For a single probe this beats setting up numpy arrays; it equals
    ``hash_values([value], physical_type, type_length=type_length)[0]``.
    """
    return int(xxhash.xxh64_intdigest(plain_encode(value, physical_type, type_length=type_length)))

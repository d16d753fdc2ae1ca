"""An Arrow array's buffers as numpy arrays, read in place: the validity bitmap, the values of
a fixed-width array, the rows of a fixed-size binary one, the offsets of a string or binary one.
Each respects the array's offset (a slice shares its parent's buffers). Plain attribute access on
the array: no import of pyarrow here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._xxh64 import I64, U8


def arrow_validity(arr: Any) -> NDArray[np.bool_] | None:
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


def arrow_fixed(arr: Any, dtype: str, valid: NDArray[np.bool_] | None) -> NDArray[Any]:
    """The values buffer of a fixed-width Arrow array as numpy, nulls dropped."""
    width = np.dtype(dtype).itemsize
    buf = arr.buffers()[1]
    if len(arr) == 0 or buf is None:
        return np.empty(0, dtype=dtype)
    vals = np.frombuffer(buf, dtype=dtype, count=min(arr.offset + len(arr), buf.size // width))
    vals = vals[arr.offset : arr.offset + len(arr)]
    return vals if valid is None else vals[valid]


def arrow_rows(arr: Any, width: int, valid: NDArray[np.bool_] | None) -> U8:
    """The values buffer of a fixed-size binary/decimal Arrow array as (n, width) bytes."""
    buf = arr.buffers()[1]
    if len(arr) == 0 or buf is None or width == 0:
        n = len(arr) if valid is None else int(valid.sum())
        return np.empty((n, width), dtype=np.uint8)
    raw = np.frombuffer(buf, dtype=np.uint8)
    rows = raw[arr.offset * width : (arr.offset + len(arr)) * width].reshape(-1, width)
    return rows if valid is None else rows[valid]


def arrow_offsets(arr: Any, dtype: str) -> I64:
    buf = arr.buffers()[1]
    if len(arr) == 0 or buf is None:
        return np.zeros(1, dtype=np.int64)
    offs = np.frombuffer(buf, dtype=dtype)[arr.offset : arr.offset + len(arr) + 1]
    return offs.astype(np.int64)

"""The Parquet physical types a value is hashed as: their names, the checks of a requested
type and width, the type a value is given when none is requested, and the errors of a value
that does not fit its type. Shared by the encoders of :mod:`parquet_bloom._plain_values`,
:mod:`parquet_bloom._plain_arrow` and :mod:`parquet_bloom._plain`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from parquet_bloom._xxh64 import U64

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

BOOLEAN_MESSAGE = (
    "BOOLEAN columns have no usable Bloom filters: writers do not agree on how a boolean is "
    "hashed (and a column of two values gains nothing from one)"
)


def check_physical_type(physical_type: str | None) -> str | None:
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
        raise ValueError(BOOLEAN_MESSAGE)
    return name


def check_type_length(physical_type: str, type_length: int | None) -> int | None:
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


def describe(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def cannot(value: object, physical_type: str, why: str) -> ValueError:
    return ValueError(f"cannot encode {describe(value)} as {physical_type}: {why}")


def _is_known_scalar(value: object) -> bool:
    """Scalars this module knows how to encode as *some* physical type: a mismatch with the
    requested type is then a ValueError, anything else a TypeError."""
    return isinstance(value, int | float | str | bytes | bytearray | memoryview | np.generic)


def wrong_value(value: object, physical_type: str, why: str) -> Exception:
    """ValueError for a value of a kind this module encodes, but not as ``physical_type``;
    TypeError for an object that is no value at all."""
    if _is_known_scalar(value):
        return cannot(value, physical_type, why)
    return TypeError(
        f"cannot encode {describe(value)} as {physical_type}: not a supported value "
        "(int, float, str, bytes-like or numpy scalar)"
    )


def empty() -> U64:
    return np.empty(0, dtype=np.uint64)


INT_RANGE = {
    # Parquet has no unsigned physical types: uint32/uint64 are stored (and hashed) by bit
    # pattern in INT32/INT64, so a value fits if it fits the signed or the unsigned range.
    "INT32": (-(1 << 31), (1 << 32) - 1),
    "INT64": (-(1 << 63), (1 << 64) - 1),
}


def infer_dtype(dtype: np.dtype[Any], example: Callable[[], object]) -> tuple[str, int | None]:
    """The physical type a numpy dtype is written as: pyarrow.parquet's choice for the Arrow
    type of the same name (uint32 -> INT32 by bit pattern, float16 -> FLBA(2), ...)."""
    kind, size = dtype.kind, dtype.itemsize
    if kind == "b":
        raise ValueError(BOOLEAN_MESSAGE)
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
        f"cannot hash {describe(example())}: numpy dtype {dtype} has no Parquet physical type{hint}"
    )


def infer_scalar(value: object) -> tuple[str, int | None]:
    """The physical type a Python or numpy scalar is hashed as when none is given."""
    if isinstance(value, bool | np.bool_):
        raise ValueError(BOOLEAN_MESSAGE)
    if isinstance(value, str | bytes | bytearray | memoryview):
        return ("BYTE_ARRAY", None)
    if isinstance(value, int):
        return ("INT64", None)
    if isinstance(value, float):  # np.float64 included: DOUBLE either way
        return ("DOUBLE", None)
    if isinstance(value, np.generic):
        return infer_dtype(value.dtype, lambda: value)
    raise TypeError(
        f"cannot hash {describe(value)}: expected an int, float, str, bytes-like or numpy "
        "scalar, a sequence of them, a numpy array or a pyarrow Array/ChunkedArray"
    )

"""Literals as a scan compares them: the types Arrow compares a column's values and an
expression's literals in, and whether a file's values reach the comparison unchanged. Pruning
by a file's filters and by an index both probe what these give (docs/encoding.md).
"""

from __future__ import annotations

import decimal
import math
from contextlib import suppress
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from parquet_bloom._prune.expression import Equal, IsIn

__all__ = ["compared_values", "field_type", "reads_unchanged", "value_type"]


def compared_values(member: Equal | IsIn, column_type: pa.DataType) -> pa.Array | None:
    """The literals as the scan compares them with values of ``column_type`` (the dataset's
    type of the column, dictionary unwrapped), or None when they may equal more stored values
    than a probe can name: keep every row group.

    ``is_in`` first casts its value set to the column's type with a safe cast (Arrow's set
    lookup does), which still rounds a double to the nearest float32 or to the column's
    decimal scale and truncates a timestamp to its date; only if that cast fails does it
    compare as ``==`` does. ``==`` compares both sides cast to a common type, which is exact
    for every pair but decimals against floating point: both are compared as doubles, and
    Arrow's decimal to double cast is not correctly rounded (it makes 0.3 into
    0.30000000000000004).
    """
    values = member.values
    if isinstance(member, IsIn) and values.type != column_type:
        with suppress(pa.ArrowException):  # Arrow compares in the value set's type then
            return values.cast(column_type)
    if pa.types.is_decimal(column_type) and pa.types.is_floating(values.type):
        return _decimals_cast_to(values.cast(pa.float64()), column_type)
    if pa.types.is_floating(column_type) and pa.types.is_decimal(values.type):
        return values.cast(pa.float64())
    return values


# Decimals of up to this many digits are further apart than a double's rounding error, so at
# most a few of them cast to any one double.
_DOUBLE_EXACT_DIGITS = 15
# How many units of the last decimal place either side of a double to try: Arrow's cast errs
# by under a unit at up to _DOUBLE_EXACT_DIGITS digits.
_DECIMAL_NEIGHBOURS = 2


def _decimals_cast_to(doubles: pa.Array, decimal_type: pa.DataType) -> pa.Array | None:
    """Every value of ``decimal_type`` that Arrow's cast to double turns into one of
    ``doubles`` (a null stays, to keep every row group), or None past 15 digits, where too
    many may."""
    if decimal_type.precision > _DOUBLE_EXACT_DIGITS:
        return None
    limit = 10**decimal_type.precision
    units: set[int] = set()
    for double in doubles.to_pylist():
        if double is None or not math.isfinite(double):
            continue  # a null keeps every row group below; NaN and infinities equal no decimal
        nearest = int(decimal.Decimal(double).scaleb(decimal_type.scale).to_integral_value())
        reach = range(nearest - _DECIMAL_NEIGHBOURS, nearest + _DECIMAL_NEIGHBOURS + 1)
        units.update(u for u in reach if -limit < u < limit)
    candidates = pa.array(
        [decimal.Decimal(u).scaleb(-decimal_type.scale) for u in sorted(units)], decimal_type
    )
    found = candidates.filter(pc.is_in(candidates.cast(pa.float64()), value_set=doubles))
    if doubles.null_count:
        found = pa.concat_arrays([found, pa.nulls(1, decimal_type)])
    return found


def reads_unchanged(schema: pa.Schema, physical_schema: pa.Schema, path: tuple[str, ...]) -> bool:
    """Whether the scan compares the file's own values: the dataset's type of the field is the
    file's, up to dictionary encoding and string/binary layout. Integer widening is exact too.
    Another cast (numbers read as strings, timestamps truncated to a coarser unit) could make
    values equal that the file does not store, so such a column keeps its row groups."""
    dataset_type, file_type = field_type(schema, path), field_type(physical_schema, path)
    if dataset_type is None or file_type is None:
        return False
    dataset_type, file_type = value_type(dataset_type), value_type(file_type)
    if pa.types.is_integer(dataset_type) and pa.types.is_integer(file_type):
        # Widening keeps every value (an int32 file in an int64 dataset).
        return bool(
            pa.types.is_signed_integer(dataset_type) == pa.types.is_signed_integer(file_type)
            and dataset_type.bit_width >= file_type.bit_width
        )
    return bool(dataset_type == file_type)


def field_type(schema: pa.Schema, path: tuple[str, ...]) -> pa.DataType | None:
    """The type at ``path`` (names down through structs), or None if there is none."""
    arrow_type: Any = pa.struct(list(schema))
    for name in path:
        if not pa.types.is_struct(arrow_type):
            return None
        index = arrow_type.get_field_index(name)
        if index < 0:
            return None
        arrow_type = arrow_type.field(index).type
    return arrow_type


_SAME_VALUES = {
    pa.large_string(): pa.string(),
    pa.string_view(): pa.string(),
    pa.large_binary(): pa.binary(),
    pa.binary_view(): pa.binary(),
}


def value_type(arrow_type: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    return _SAME_VALUES.get(arrow_type, arrow_type)

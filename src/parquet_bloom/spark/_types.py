"""How Spark stores a value in Parquet, and so how its Parquet Bloom filter hashes it.

A filter only answers for values hashed exactly as they are stored. Spark writes Parquet through
parquet-java (``ParquetSchemaConverter`` and ``ParquetWriteSupport``): this module holds that
mapping from Spark types (as the Arrow arrays pyspark hands to Python) to Parquet physical
layouts, including the two session settings that change it (:class:`SparkLayout`), and hashes a
column's Arrow array accordingly (:func:`arrow_hashes`), for the build and the probe alike. The
table of types and layouts is in docs/spark.md.

Hashing goes through :func:`parquet_bloom._plain.hash_values` with an explicit physical type
rather than through :func:`parquet_bloom._logical.column_hashes`: the latter encodes values as a
*file* stores them and rejects a TIMESTAMP(MILLIS) value with sub-millisecond digits, whereas
Spark rounds those down when it writes, so the rounding is done here.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T

from parquet_bloom import _plain as plain

if TYPE_CHECKING:
    import numpy.typing as npt

# SQLConf entries that decide how Spark stores a value.
TIMESTAMP_TYPE_CONF = "spark.sql.parquet.outputTimestampType"
LEGACY_FORMAT_CONF = "spark.sql.parquet.writeLegacyFormat"
_TIMESTAMP_TYPES = ("INT96", "TIMESTAMP_MICROS", "TIMESTAMP_MILLIS")

# Spark's DecimalType.MAX_INT_DIGITS and MAX_LONG_DIGITS: the largest precisions that
# ParquetWriteSupport stores as INT32 and INT64 when not writing the legacy format.
_MAX_INT_DIGITS = 9
_MAX_LONG_DIGITS = 18
_MICROS_PER_MILLI = 1000

# The message pyspark (4.x) warns with when a Map-in-Arrow UDF is created under pandas >= 3.
# mapInArrow never converts to pandas, so the warning says nothing about what runs here.
_PANDAS_WARNING = "PySpark does not yet fully support pandas"


@dataclass(frozen=True)
class SparkLayout:
    """The session settings that change how Spark writes a value to Parquet."""

    timestamp_type: str  # one of _TIMESTAMP_TYPES
    legacy_decimal: bool

    @classmethod
    def of(cls, spark: Any) -> SparkLayout:
        # No default of ours: an unset entry reads as this Spark version's own default.
        timestamp_type = str(spark.conf.get(TIMESTAMP_TYPE_CONF)).upper()
        if timestamp_type not in _TIMESTAMP_TYPES:
            raise ValueError(
                f"unknown {TIMESTAMP_TYPE_CONF}={timestamp_type!r}; expected one of "
                f"{', '.join(_TIMESTAMP_TYPES)}"
            )
        legacy = str(spark.conf.get(LEGACY_FORMAT_CONF)).lower() == "true"
        return cls(timestamp_type, legacy)


def _decimal_storage(precision: int, legacy: bool) -> tuple[str, int | None]:
    """Physical type and width of a Spark decimal (ParquetWriteSupport.makeDecimalWriter)."""
    if not legacy and precision <= _MAX_INT_DIGITS:
        return "INT32", None
    if not legacy and precision <= _MAX_LONG_DIGITS:
        return "INT64", None
    # Spark's Decimal.minBytesForPrecision: the fewest bytes that hold every value of those
    # digits, the width pyarrow picks as well.
    return "FIXED_LEN_BYTE_ARRAY", plain.decimal_width(precision)


# Arrow types Spark hands to Python for each supported Spark type (ArrowUtils.toArrowType),
# and the physical type Spark stores them as. Timestamps with a time zone (TimestampType) and
# decimals depend on the session and are handled before this table.
_ARROW_STORAGE: tuple[tuple[Callable[[Any], bool], str], ...] = (
    (pa.types.is_int8, "INT32"),
    (pa.types.is_int16, "INT32"),
    (pa.types.is_int32, "INT32"),
    (pa.types.is_date32, "INT32"),
    (pa.types.is_int64, "INT64"),
    (pa.types.is_duration, "INT64"),  # DayTimeIntervalType
    (pa.types.is_timestamp, "INT64"),  # TimestampNTZType
    (pa.types.is_float32, "FLOAT"),
    (pa.types.is_float64, "DOUBLE"),
    (pa.types.is_string, "BYTE_ARRAY"),
    (pa.types.is_large_string, "BYTE_ARRAY"),
    (pa.types.is_binary, "BYTE_ARRAY"),
    (pa.types.is_large_binary, "BYTE_ARRAY"),
    (pa.types.is_string_view, "BYTE_ARRAY"),
    (pa.types.is_binary_view, "BYTE_ARRAY"),
)

_SUPPORTED_TYPES = (
    "ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, StringType, BinaryType, "
    "DateType, TimestampType, TimestampNTZType, DayTimeIntervalType and DecimalType"
)


def check_spark_type(data_type: Any, column: object) -> None:
    """Refuse, on the driver, a column whose values have no usable Parquet Bloom filter."""
    if isinstance(data_type, T.BooleanType):
        raise ValueError(
            f"column {column!r} is BooleanType: BOOLEAN columns have no usable Bloom filters "
            "(writers do not agree on how a boolean is hashed)"
        )
    supported = (
        T.ByteType,
        T.ShortType,
        T.IntegerType,
        T.LongType,
        T.FloatType,
        T.DoubleType,
        T.StringType,
        T.BinaryType,
        T.DateType,
        T.TimestampType,
        T.TimestampNTZType,
        T.DayTimeIntervalType,
        T.DecimalType,
    )
    if not isinstance(data_type, supported):
        raise TypeError(
            f"column {column!r} has type {data_type.simpleString()}, which has no Parquet "
            f"Bloom filter here; supported: {_SUPPORTED_TYPES}"
        )


def arrow_hashes(values: Any, layout: SparkLayout) -> npt.NDArray[np.uint64]:
    """XXH64 of each non-null value of a Spark column's Arrow array, encoded as Spark stores it."""
    t = values.type
    if pa.types.is_timestamp(t) and t.tz is not None:  # TimestampType: UTC microseconds
        _check_micros(t)
        if layout.timestamp_type == "INT96":
            return plain.hash_values(values, "INT96")
        if layout.timestamp_type == "TIMESTAMP_MILLIS":
            micros = values.drop_null().cast(pa.int64()).to_numpy()
            # DateTimeUtils.microsToMillis is Math.floorDiv: rounds toward negative infinity.
            return plain.hash_values(np.floor_divide(micros, _MICROS_PER_MILLI), "INT64")
        return plain.hash_values(values, "INT64")
    if pa.types.is_decimal(t):
        physical_type, type_length = _decimal_storage(t.precision, layout.legacy_decimal)
        return plain.hash_values(values, physical_type, type_length=type_length)
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        _check_micros(t)
    for matches, physical_type in _ARROW_STORAGE:
        if matches(t):
            return plain.hash_values(values, physical_type)
    raise TypeError(
        f"cannot hash Arrow type {t} from Spark: supported Spark types are {_SUPPORTED_TYPES}"
    )


def _check_micros(arrow_type: Any) -> None:
    if arrow_type.unit != "us":  # Spark's time types are microseconds; anything else is not Spark
        raise TypeError(f"expected microseconds from Spark, got Arrow type {arrow_type}")


@contextlib.contextmanager
def without_pandas_warning() -> Iterator[None]:
    """Silence pyspark's pandas-version warning while an Arrow UDF or job is made."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PANDAS_WARNING, category=FutureWarning)
        yield

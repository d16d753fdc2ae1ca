"""How Spark stores a value in Parquet, and so how its Parquet Bloom filter hashes it.

A filter only answers for values hashed exactly as they are stored. Spark writes Parquet through
parquet-java (``ParquetSchemaConverter`` and ``ParquetWriteSupport``): this module holds that
mapping from Spark types (as the Arrow arrays pyspark hands to Python) to Parquet physical
layouts, including the two session settings that change it (:class:`SparkLayout`), and hashes a
column's Arrow array accordingly (:func:`arrow_hashes`), for the build and the probe alike. The
table of types and layouts is in docs/spark.md.

The same hashes are written here in Spark's own expressions too (:func:`sql_hash`), for
``might_contain`` to probe in the JVM: Spark's ``xxhash64`` hashes most types by the bytes
Parquet stores, and the others (INT96 and TIMESTAMP_MILLIS timestamps, decimals not stored as
INT64) get those bytes assembled first, by the SQL function of :data:`HASH_FUNCTION_SQL`.

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
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from parquet_bloom import _plain as plain
from parquet_bloom import _xxh64 as xxh64
from parquet_bloom.spark._jvm import java_hash

if TYPE_CHECKING:
    import numpy.typing as npt

# SQLConf entries that decide how Spark stores a value.
TIMESTAMP_TYPE_CONF = "spark.sql.parquet.outputTimestampType"
LEGACY_FORMAT_CONF = "spark.sql.parquet.writeLegacyFormat"
# How Spark writes dates and timestamps older than the Gregorian calendar's adoption: as they
# are (CORRECTED, Spark 4's default), refusing them (EXCEPTION), or rebased to the Julian
# calendar (LEGACY), which changes the stored value and so its hash (RebaseDateTime).
INT96_REBASE_CONF = "spark.sql.parquet.int96RebaseModeInWrite"
DATETIME_REBASE_CONF = "spark.sql.parquet.datetimeRebaseModeInWrite"
_TIMESTAMP_TYPES = ("INT96", "TIMESTAMP_MICROS", "TIMESTAMP_MILLIS")
_REBASE_MODES = ("EXCEPTION", "CORRECTED", "LEGACY")
# RebaseDateTime.lastSwitchGregorianDay and lastSwitchGregorianTs: LEGACY rebases only values
# before these (1582-10-15 for dates; 1900-01-01T00:00Z for timestamps, the last switch of any
# time zone in Spark's rebase tables); later ones are written as they are.
LAST_REBASED_DAY = -141427
LAST_REBASED_MICROS = -2208988800000000

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
    # Whether old timestamps (INT96: int96_rebase_legacy; INT64: datetime_rebase_legacy) and
    # dates (datetime_rebase_legacy) are written rebased to the Julian calendar.
    int96_rebase_legacy: bool = False
    datetime_rebase_legacy: bool = False

    @classmethod
    def of(cls, spark: Any) -> SparkLayout:
        # No default of ours: an unset entry reads as this Spark version's own default.
        timestamp_type = _choice(spark, TIMESTAMP_TYPE_CONF, _TIMESTAMP_TYPES)
        legacy = str(spark.conf.get(LEGACY_FORMAT_CONF)).lower() == "true"
        int96_rebase = _choice(spark, INT96_REBASE_CONF, _REBASE_MODES)
        datetime_rebase = _choice(spark, DATETIME_REBASE_CONF, _REBASE_MODES)
        return cls(timestamp_type, legacy, int96_rebase == "LEGACY", datetime_rebase == "LEGACY")

    @property
    def timestamps_rebased(self) -> bool:
        """Whether TimestampType values before :data:`LAST_REBASED_MICROS` are rebased."""
        if self.timestamp_type == "INT96":
            return self.int96_rebase_legacy
        return self.datetime_rebase_legacy


def _choice(spark: Any, key: str, choices: tuple[str, ...]) -> str:
    value = str(spark.conf.get(key)).upper()
    if value not in choices:
        raise ValueError(f"unknown {key}={value!r}; expected one of {', '.join(choices)}")
    return value


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
            micros = values.drop_null().cast(pa.int64()).to_numpy()
            return plain.hash_values(int96_rows(micros), "INT96")
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


# DateTimeUtils.JULIAN_DAY_OF_EPOCH: the Julian day of 1970-01-01.
_JULIAN_DAY_OF_EPOCH = 2440588
_MICROS_PER_DAY = 86_400_000_000
_NANOS_PER_MICRO = 1000


def int96_rows(micros: npt.NDArray[np.int64]) -> npt.NDArray[np.uint8]:
    """The 12 bytes Spark writes for each INT96 timestamp (microseconds since the epoch):
    nanoseconds of the day, then the Julian day, both little-endian.

    Spark's ``DateTimeUtils.toJulianDay`` in Java's long arithmetic, which is not the
    calendar arithmetic of other writers at the far ends of the range: the day is the
    quotient rounded toward zero, so before the Julian epoch (4713 BC) the nanoseconds are
    negative, and the sums wrap around past about the year 285,000, as Java's do.
    """
    micros = np.asarray(micros, dtype=np.int64)
    with np.errstate(over="ignore"):  # Java's long addition wraps
        julian = micros + np.int64(_JULIAN_DAY_OF_EPOCH * _MICROS_PER_DAY)
    days = julian // _MICROS_PER_DAY
    rest = julian - days * _MICROS_PER_DAY  # floor division's remainder, in [0, a day)
    toward_zero = (rest != 0) & (julian < 0)  # Java's / and % round toward zero instead
    days += toward_zero
    rest -= toward_zero * _MICROS_PER_DAY
    rows = np.empty((micros.shape[0], 12), dtype=np.uint8)
    rows[:, :8] = (rest * _NANOS_PER_MICRO).astype("<i8").view(np.uint8).reshape(-1, 8)
    rows[:, 8:] = days.astype("<i4").view(np.uint8).reshape(-1, 4)  # Long.toInt: low 32 bits
    return rows


def _check_micros(arrow_type: Any) -> None:
    if arrow_type.unit != "us":  # Spark's time types are microseconds; anything else is not Spark
        raise TypeError(f"expected microseconds from Spark, got Arrow type {arrow_type}")


# -- the same hashes in Spark's own expressions (might_contain's JVM probe) --------------------


# Spark's xxhash64(a, b, ...) hashes each argument's bytes with XXH64, seeded with the hash of
# the arguments before it, and starts from seed 42. For 8 bytes XXH64 is a bijection, so exactly
# one long hashes to 0 under seed 42; with it first, xxhash64(SEED_ZERO_PREFIX, v) is XXH64 with
# seed 0 of v's bytes: the Parquet filter's hash, for every type whose bytes Spark hashes the
# way Parquet stores them. The long is found by running XXH64's last steps backwards from 0.
def _xxh64_preimage_of_zero(seed: int) -> int:
    m = (1 << 64) - 1
    p1, p2, p3, p4, p5 = (int(p) for p in (xxh64.PRIME64_1, xxh64.PRIME64_2, xxh64.PRIME64_3,
                                           xxh64.PRIME64_4, xxh64.PRIME64_5))  # fmt: skip

    def rotr(x: int, r: int) -> int:
        return ((x >> r) | (x << (64 - r))) & m

    h = 0  # the target, through the avalanche backwards: xor-shifts and odd multipliers
    h ^= h >> 32
    h = h * pow(p3, -1, 1 << 64) & m
    h ^= (h >> 29) ^ (h >> 58)
    h = h * pow(p2, -1, 1 << 64) & m
    h ^= h >> 33
    h = rotr((h - p4) * pow(p1, -1, 1 << 64) & m, 27)  # h = rotl(h, 27) * P1 + P4
    lane = h ^ ((seed + p5 + 8) & m)  # h ^= round(0, lane), from h = seed + P5 + 8
    value = rotr(lane * pow(p1, -1, 1 << 64) & m, 31) * pow(p2, -1, 1 << 64) & m
    return signed64(value)


def signed64(value: Any) -> int:
    """A uint64 as the Java long with the same bits."""
    bits = int(value)
    return bits - (1 << 64) if bits >> 63 else bits


SPARK_HASH_SEED = 42  # XxHash64(children, seed = 42L), Spark's xxhash64()
SEED_ZERO_PREFIX = _xxh64_preimage_of_zero(SPARK_HASH_SEED)

# typeof() names of the types Spark's xxhash64 hashes as Parquet stores them: hashInt of the
# 4-byte value for INT32 types, hashLong for INT64 ones, the bytes of strings whose equality is
# their bytes' (UTF8_BINARY) and of binaries, and the IEEE bits of floats (for which the probe
# sees to NaN and the zeros).
_NATIVE_TYPE_NAMES = (
    "tinyint", "smallint", "int", "bigint", "date", "timestamp_ntz", "float", "double",
    "string", "string collate UTF8_BINARY", "binary",
)  # fmt: skip
_DAY_TIME_FIELDS = ("day", "hour", "minute", "second")
_DAY_TIME_INTERVALS = tuple(
    f"interval {start}" if start == end else f"interval {start} to {end}"
    for i, start in enumerate(_DAY_TIME_FIELDS)
    for end in _DAY_TIME_FIELDS[i:]
)
NATIVE_TYPES_SQL = ", ".join(f"'{name}'" for name in _NATIVE_TYPE_NAMES + _DAY_TIME_INTERVALS)
"""The names above as a SQL list, for ``typeof(x) IN (...)``."""

# The SQL function that hashes a value of any supported type as Spark stores it, given what
# Spark expressions can say about the value whatever its type (see sql_hash). It is created
# with ANSI mode off (a SQL function keeps the SQL settings it was created with), where
# integers cast to their big-endian bytes and long arithmetic wraps as Java's does. The
# version suffix keeps another release's body apart.
HASH_FUNCTION = "parquet_bloom_value_hash_v3"
_JULIAN_EPOCH_MICROS = _JULIAN_DAY_OF_EPOCH * _MICROS_PER_DAY
_TWO_64 = "18446744073709551616BD"
# Decimal.minBytesForPrecision for precisions 1 to 38: the FIXED_LEN_BYTE_ARRAY's width.
_DECIMAL_WIDTHS = f"array({', '.join(str(plain.decimal_width(p)) for p in range(1, 39))})"


def _hash_function_sql() -> str:
    """The body of :data:`HASH_FUNCTION`, a ``CASE`` on the value's ``typeof()``; null for a
    null value (``xxhash64`` skips nulls, so ``+ if(is_null, NULL, 0)`` makes it null).

    - INT96: ``DateTimeUtils.toJulianDay``'s quotient and remainder of Java's long division
      of the microseconds since the Julian day 0, then the nanoseconds of the day and the day,
      little-endian: the reverse of the day's and the nanoseconds' big-endian bytes, which
      ``lpad`` puts together in one copy. (XXH64 of the two numbers in long arithmetic runs
      2x faster, but its rotations and shifts use each step twice, and Spark copies the hash's
      expression into each of its uses in the lookup as it plans: 64 copies of the first
      step in each, 0.3 s to 0.4 s more planning a query.) With the JVM accelerator, its
      Java hash (``int96_hash``) instead: one static call in Spark's generated code.
    - TIMESTAMP_MILLIS: ``DateTimeUtils.microsToMillis``, a division rounding down.
    - Decimals of ``precision`` digits, from the unscaled value's digits: up to 9 an int's 4
      bytes; up to 18 the long that ``xxhash64`` hashes; FIXED_LEN_BYTE_ARRAY big-endian two's
      complement in ``width`` bytes: up to 8 from a long; wider from the 128 bits of two longs,
      hi = floor(u / 2**64) and lo, u's low 64 bits as a long, both from u's quotient and
      remainder by 2**64 (which have u's sign: hi is one less for a negative remainder; lo is
      the remainder wrapped into a long's range).
    """
    prefix = f"{SEED_ZERO_PREFIX}L"
    null = "if(is_null, NULL, 0L)"
    julian = f"(micros + {_JULIAN_EPOCH_MICROS}L)"
    int96 = (  # lpad(nanos, 12, day): the day's 4 bytes, then the nanoseconds' 8
        f"reverse(lpad(cast({julian} % {_MICROS_PER_DAY}L * {_NANOS_PER_MICRO}L as binary), 12, "
        f"cast(cast({julian} div {_MICROS_PER_DAY}L as int) as binary)))"
    )
    millis = f"micros div {_MICROS_PER_MILLI}L - if(micros % {_MICROS_PER_MILLI}L < 0, 1, 0)"
    u = "cast(unscaled as decimal(38, 0))"
    r = f"({u} % {_TWO_64})"
    hi = f"({u} div {_TWO_64} - if({r} < 0, 1, 0))"
    lo = f"cast(pmod({r} + 9223372036854775808BD, {_TWO_64}) - 9223372036854775808BD as bigint)"
    return f"""
CREATE OR REPLACE TEMPORARY FUNCTION {HASH_FUNCTION}(type_name STRING, native BOOLEAN,
    is_null BOOLEAN, value_hash BIGINT, micros BIGINT, unscaled STRING, precision INT, width INT,
    timestamp_type STRING, legacy_decimal BOOLEAN, int96_hash BIGINT, use_int96_hash BOOLEAN)
RETURNS BIGINT RETURN CASE
  WHEN native THEN value_hash + {null}
  WHEN type_name = 'timestamp' THEN CASE timestamp_type
    WHEN 'TIMESTAMP_MICROS' THEN value_hash + {null}
    WHEN 'INT96' THEN if(use_int96_hash, int96_hash, xxhash64({prefix}, {int96})) + {null}
    ELSE xxhash64({prefix}, {millis}) + {null} END
  WHEN NOT legacy_decimal AND precision <= {_MAX_INT_DIGITS}
    THEN xxhash64({prefix}, cast(unscaled as int)) + {null}
  WHEN NOT legacy_decimal AND precision <= {_MAX_LONG_DIGITS} THEN value_hash + {null}
  WHEN width <= 8 THEN xxhash64({prefix},
    substring(cast(cast(unscaled as bigint) as binary), 9 - width)) + {null}
  WHEN width > 8 THEN xxhash64({prefix},
    substring(concat(cast({hi} as binary), cast({lo} as binary)), 17 - width)) + {null}
END"""


HASH_FUNCTION_SQL = _hash_function_sql()


def sql_hash(values: Column, layout: SparkLayout, accelerator: Any | None = None) -> Column:
    """XXH64 of the bytes Spark stores for each value, in Spark's own expressions: null for a
    null, and for a type without a Parquet Bloom filter. Needs the SQL function of
    :data:`HASH_FUNCTION_SQL` in the session.

    Its arguments are what Spark expressions can say of a value of any type: its
    ``typeof()``, which Spark folds into a constant when it plans the query, so that one
    branch of the function's ``CASE`` remains; ``xxhash64`` of it; its microseconds, for a
    timestamp whose layout needs them; a decimal's unscaled digits (its plain string form
    without the point), precision and width. Whatever the branch left does not use is
    dropped from the plan. ``accelerator`` (parquet_bloom.spark._jvm): hash INT96 timestamps
    with its Java method instead of assembling their bytes.
    """
    type_name = F.typeof(values)
    is_decimal = type_name.startswith("decimal(")
    precision = F.when(is_decimal, F.substring_index(F.substring(type_name, 9, 2), ",", 1))
    unscaled = F.when(is_decimal, F.replace(values.cast("string"), F.lit("."), F.lit("")))
    micros = (
        timestamp_micros(values, type_name)
        if layout.timestamp_type != "TIMESTAMP_MICROS"
        else F.lit(None).cast("bigint")
    )
    int96 = accelerator is not None and layout.timestamp_type == "INT96"
    return F.call_function(
        HASH_FUNCTION,
        type_name,
        native_type(type_name),
        values.isNull(),
        F.xxhash64(F.lit(SEED_ZERO_PREFIX), values),
        micros,
        unscaled,
        precision.cast("int"),
        F.element_at(F.expr(_DECIMAL_WIDTHS), precision.cast("int")),
        F.lit(layout.timestamp_type),
        F.lit(layout.legacy_decimal),
        java_hash(accelerator, "int96", micros) if int96 else F.lit(None).cast("bigint"),
        F.lit(int96),
    )


def native_type(type_name: Column) -> Column:
    """Whether Spark's ``xxhash64`` hashes values of this ``typeof()`` as Parquet stores them
    (a literal array: three calls into the JVM, where ``isin`` makes one a name)."""
    return F.array_contains(F.expr(f"array({NATIVE_TYPES_SQL})"), type_name)


def timestamp_micros(values: Column, type_name: Column) -> Column:
    """A TimestampType value's microseconds, null for other types.

    Every function's arguments must be valid Spark for every type, and Spark may compute them
    before it drops the unused ones (it computes a projection of local rows as it plans), so
    the value goes through ``to_timestamp`` (valid for any type but nested ones, and nothing
    at all for a timestamp) behind a ``CASE`` on its type (which would fail, under ANSI mode,
    for a double's NaN or a string)."""
    return F.when(type_name == "timestamp", F.unix_micros(F.to_timestamp(values)))


def date_days(values: Column, type_name: Column) -> Column:
    """A DateType value's days since 1970-01-01, null for other types (as above)."""
    return F.when(type_name == "date", F.unix_date(F.to_date(values)))


@contextlib.contextmanager
def without_pandas_warning() -> Iterator[None]:
    """Silence pyspark's pandas-version warning while an Arrow UDF or job is made."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PANDAS_WARNING, category=FutureWarning)
        yield

/*
 * The optional JVM side of parquet_bloom.spark's hashing (docs/spark.md, "The JVM accelerator"):
 * XXH64, seed 0, of the bytes Spark stores for a value, where Spark's own expressions cannot say
 * them cheaply, as static methods that Spark's generated code calls with no boxing
 * ({@link #column}).
 *
 * - INT96 timestamps ({@link #int96}), as the SQL function of
 *   parquet_bloom.spark._types.HASH_FUNCTION_SQL computes them in a dozen expressions: the
 *   microseconds since the Julian day 0 (DateTimeUtils.toJulianDay), their quotient (the day, an
 *   int) and remainder (times 1000, the nanoseconds of the day) by a day's microseconds, in
 *   Java's division, which rounds towards zero; stored as the nanoseconds' 8 little-endian
 *   bytes, then the day's 4.
 * - Floats and doubles as the builds hash them ({@link #floatBits}, {@link #doubleBits}): their
 *   raw IEEE bits, as Parquet stores them. Spark's xxhash64 makes -0.0 into 0.0 and every NaN
 *   into one, which is right for the probe (Spark's equality) but not for a filter of the stored
 *   bytes.
 */
package parquet_bloom.spark.v1;

import java.util.List;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.objects.StaticInvoke;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.AbstractDataType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

public final class Hashes {
    static final long PRIME64_1 = 0x9E3779B185EBCA87L;
    static final long PRIME64_2 = 0xC2B2AE3D27D4EB4FL;
    static final long PRIME64_3 = 0x165667B19E3779F9L;
    static final long PRIME64_4 = 0x85EBCA77C2B2AE63L;
    static final long PRIME64_5 = 0x27D4EB2F165667C5L;
    static final long MICROS_PER_DAY = 86_400_000_000L;
    static final long JULIAN_DAY_OF_EPOCH = 2_440_588L;

    private Hashes() {}

    /** {@code method}'s hash of a Column's values (null for null): a call of that static method
     * (int96, floatBits or doubleBits) in Spark's generated code, like Spark's own helpers. */
    public static Column column(String method, Column values) {
        DataType type = switch (method) {
            case "int96" -> DataTypes.LongType;
            case "floatBits" -> DataTypes.FloatType;
            case "doubleBits" -> DataTypes.DoubleType;
            default -> throw new IllegalArgumentException("no hash method " + method);
        };
        List<Expression> arguments = List.of(ExpressionUtils.expression(values));
        List<AbstractDataType> types = List.of(type);
        return ExpressionUtils.column(new StaticInvoke(Hashes.class, DataTypes.LongType, method,
                CollectionConverters.asScala(arguments).toSeq(),
                CollectionConverters.asScala(types).toSeq(), true, false, true, Option.empty()));
    }

    /** The hash of an INT96 timestamp of {@code micros} microseconds since the epoch. */
    public static long int96(long micros) {
        long julian = micros + JULIAN_DAY_OF_EPOCH * MICROS_PER_DAY;
        long nanos = julian % MICROS_PER_DAY * 1000L;
        int day = (int) (julian / MICROS_PER_DAY);
        return avalanche(tail4(lane(PRIME64_5 + 12, nanos), day));
    }

    public static long floatBits(float value) {
        return avalanche(tail4(PRIME64_5 + 4, Float.floatToRawIntBits(value)));
    }

    public static long doubleBits(double value) {
        return avalanche(lane(PRIME64_5 + 8, Double.doubleToRawLongBits(value)));
    }

    // XXH64's steps for inputs under 32 bytes, from h = seed + PRIME64_5 + length (seed 0).
    private static long lane(long h, long bytes) {
        h ^= Long.rotateLeft(bytes * PRIME64_2, 31) * PRIME64_1;
        return Long.rotateLeft(h, 27) * PRIME64_1 + PRIME64_4;
    }

    private static long tail4(long h, int bytes) {
        h ^= (bytes & 0xFFFFFFFFL) * PRIME64_1;
        return Long.rotateLeft(h, 23) * PRIME64_2 + PRIME64_3;
    }

    private static long avalanche(long h) {
        h ^= h >>> 33;
        h *= PRIME64_2;
        h ^= h >>> 29;
        h *= PRIME64_3;
        return h ^ (h >>> 32);
    }
}

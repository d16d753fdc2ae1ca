/*
 * The optional JVM side of parquet_bloom.spark's filter build (docs/spark.md, "The JVM
 * accelerator"): the reduce-scatter of parquet_bloom/spark/_slices.py, over hashes that Spark's
 * own expressions computed (parquet_bloom.spark._types.sql_hash), with no Python worker.
 *
 * Each map task keeps a column's hashes while they take fewer bytes than its filter, and a
 * filter of the full size once they do not; it sends, per slice of the filter it has something
 * for, either the slice's hashes or the slice's bits. Spark shuffles them by slice index, and a
 * reduce task ORs the bits and inserts the hashes into one bitset per slice. The result is the
 * rows (slice int, bitset binary) of _slices.MERGED_SCHEMA, which the driver assembles as it
 * does the Python build's: bit for bit the filter a local SplitBlockBloomFilter of that size
 * holds after inserting the same hashes.
 *
 * The block layout is the SBBF's (docs/format-notes.md): 32-byte blocks of eight 32-bit words,
 * the block is the hash's high half times the block count over 2**32, and word i gets the bit
 * named by the top five bits of the low half times SALT[i] (an int product, which wraps).
 */
package parquet_bloom.spark.v1;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import org.apache.spark.Partitioner;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

import scala.Tuple2;

public final class SliceBuild {
    static final int[] SALT = {
        0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d,
        0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31,
    };
    static final int BLOCK_WORDS = 8;

    private SliceBuild() {}

    /** Sets the bits of {@code hash} in {@code words}: the blocks from {@code firstBlock} on
     * of a filter of {@code totalBlocks} blocks (a whole filter, or one of its slices). */
    static void insert(int[] words, long hash, long totalBlocks, long firstBlock) {
        long block = (((hash >>> 32) * totalBlocks) >>> 32) - firstBlock;
        if (block < 0 || (block + 1) * BLOCK_WORDS > words.length) {
            throw new IllegalStateException("hash " + hash + " is outside the slice");
        }
        int at = (int) block * BLOCK_WORDS;
        int low = (int) hash;
        for (int i = 0; i < BLOCK_WORDS; i++) {
            words[at + i] |= 1 << ((low * SALT[i]) >>> 27);
        }
    }

    /** One column's plan: the _slices.SlicePlan of the same numbers. */
    static final class Plan implements java.io.Serializable {
        final int numBytes;
        final int sliceBits;
        final int first;
        final long maxHashes;

        Plan(int numBytes, int sliceBits, int first, long maxHashes) {
            if (numBytes < 32 || Integer.bitCount(numBytes) != 1 || sliceBits < 0
                    || (numBytes >>> sliceBits) < 32 || maxHashes < 0) {
                throw new IllegalArgumentException("bad slice plan: " + numBytes + " bytes, "
                        + sliceBits + " slice bits, " + maxHashes + " hashes");
            }
            this.numBytes = numBytes;
            this.sliceBits = sliceBits;
            this.first = first;
            this.maxHashes = maxHashes;
        }

        int numSlices() { return 1 << sliceBits; }
        int sliceWords() { return (numBytes >>> sliceBits) / 4; }
        long numBlocks() { return numBytes / 32; }
    }

    /** Map side: one column's values in one task. */
    static final class Partial {
        final Plan plan;
        long[] hashes;
        int count;
        int[] words;  // the full filter, once the hashes outgrow it

        Partial(Plan plan) {
            this.plan = plan;
            this.hashes = new long[(int) Math.min(1024, plan.maxHashes + 1)];
        }

        void add(long hash) {
            if (words != null) {
                insert(words, hash, plan.numBlocks(), 0);
                return;
            }
            if (count == hashes.length) {
                if (count > plan.maxHashes) {
                    words = new int[plan.numBytes / 4];
                    for (int i = 0; i < count; i++) {
                        insert(words, hashes[i], plan.numBlocks(), 0);
                    }
                    hashes = null;
                    insert(words, hash, plan.numBlocks(), 0);
                    return;
                }
                hashes = Arrays.copyOf(hashes, (int) Math.min(2L * count, plan.maxHashes + 1));
            }
            hashes[count++] = hash;
        }

        /** (slice index, int[] bits or long[] hashes) for each slice this task reached. */
        void emit(List<Tuple2<Integer, Object>> out) {
            int sliceWords = plan.sliceWords();
            if (words != null) {
                for (int s = 0; s < plan.numSlices(); s++) {
                    int from = s * sliceWords;
                    for (int i = from; i < from + sliceWords; i++) {
                        if (words[i] != 0) {
                            out.add(new Tuple2<>(plan.first + s,
                                    Arrays.copyOfRange(words, from, from + sliceWords)));
                            break;
                        }
                    }
                }
                return;
            }
            int shift = 64 - plan.sliceBits;
            int[] counts = new int[plan.numSlices()];
            for (int i = 0; i < count; i++) {
                counts[slice(hashes[i], shift)]++;
            }
            long[][] bySlice = new long[counts.length][];
            for (int s = 0; s < counts.length; s++) {
                bySlice[s] = new long[counts[s]];
            }
            int[] filled = new int[counts.length];
            for (int i = 0; i < count; i++) {
                int s = slice(hashes[i], shift);
                bySlice[s][filled[s]++] = hashes[i];
            }
            for (int s = 0; s < counts.length; s++) {
                if (counts[s] > 0) {
                    out.add(new Tuple2<>(plan.first + s, bySlice[s]));
                }
            }
        }

        private int slice(long hash, int shift) {
            return plan.sliceBits == 0 ? 0 : (int) (hash >>> shift);
        }
    }

    /**
     * The merged slices of the filters of {@code hashes}' columns (bigint hashes, null for no
     * value), as rows (slice int, bitset binary); the plans are the columns' numBytes,
     * sliceBits and maxHashes, slices numbered one column after another; {@code reducers} reduce
     * tasks OR them.
     */
    public static Dataset<Row> build(Dataset<Row> hashes, List<? extends Number> numBytes,
            List<? extends Number> sliceBits, List<? extends Number> maxHashes, int reducers) {
        int columns = hashes.schema().fields().length;
        if (numBytes.size() != columns || sliceBits.size() != columns
                || maxHashes.size() != columns || reducers < 1) {
            throw new IllegalArgumentException("one plan per column, and at least one reducer");
        }
        Plan[] plans = new Plan[columns];
        int first = 0;
        for (int c = 0; c < columns; c++) {
            plans[c] = new Plan(numBytes.get(c).intValue(), sliceBits.get(c).intValue(), first,
                    maxHashes.get(c).longValue());
            first += plans[c].numSlices();
        }
        Plan[] owner = new Plan[first];
        for (Plan plan : plans) {
            Arrays.fill(owner, plan.first, plan.first + plan.numSlices(), plan);
        }
        JavaRDD<InternalRow> rows = hashes.queryExecution().toRdd().toJavaRDD();
        JavaPairRDD<Integer, Object> sent = rows.mapPartitionsToPair(it -> mapTask(it, plans));
        JavaRDD<Row> merged = sent.partitionBy(new SliceRanges(reducers, first))
                .mapPartitions(it -> reduceTask(it, owner));
        StructType schema = new StructType()
                .add("slice", DataTypes.IntegerType, false)
                .add("bitset", DataTypes.BinaryType, false);
        return hashes.sparkSession().createDataFrame(merged, schema);
    }

    /** Reduce task r gets the slices r * n / reducers to (r + 1) * n / reducers - 1, a range, so
     * that the driver, receiving the tasks' slices in order, fills its filters front to back
     * (_slices.slice_range_partition, the same for the Python build). */
    static final class SliceRanges extends Partitioner {
        private final int reducers;
        private final int slices;

        SliceRanges(int reducers, int slices) {
            this.reducers = reducers;
            this.slices = slices;
        }

        @Override
        public int numPartitions() { return reducers; }

        @Override
        public int getPartition(Object key) {
            return (int) ((long) (Integer) key * reducers / slices);
        }
    }

    static Iterator<Tuple2<Integer, Object>> mapTask(Iterator<InternalRow> rows, Plan[] plans) {
        Partial[] partials = new Partial[plans.length];
        for (int c = 0; c < plans.length; c++) {
            partials[c] = new Partial(plans[c]);
        }
        while (rows.hasNext()) {
            InternalRow row = rows.next();
            for (int c = 0; c < partials.length; c++) {
                if (!row.isNullAt(c)) {
                    partials[c].add(row.getLong(c));
                }
            }
        }
        List<Tuple2<Integer, Object>> out = new ArrayList<>();
        for (int c = 0; c < partials.length; c++) {
            partials[c].emit(out);
            partials[c] = null;  // its filter can go before the next column's is copied
        }
        return out.iterator();
    }

    static Iterator<Row> reduceTask(Iterator<Tuple2<Integer, Object>> parts, Plan[] owner) {
        Map<Integer, int[]> merged = new HashMap<>();
        while (parts.hasNext()) {
            Tuple2<Integer, Object> part = parts.next();
            int slice = part._1();
            Plan plan = owner[slice];
            int[] words = merged.computeIfAbsent(slice, s -> new int[plan.sliceWords()]);
            if (part._2() instanceof int[] bits) {
                for (int i = 0; i < words.length; i++) {
                    words[i] |= bits[i];
                }
            } else {
                long sliceBlocks = plan.numBlocks() >>> plan.sliceBits;
                long firstBlock = (slice - plan.first) * sliceBlocks;
                for (long hash : (long[]) part._2()) {
                    insert(words, hash, plan.numBlocks(), firstBlock);
                }
            }
        }
        List<Row> out = new ArrayList<>();
        for (int slice : new TreeSet<>(merged.keySet())) {
            int[] words = merged.remove(slice);
            ByteBuffer bytes = ByteBuffer.allocate(words.length * 4).order(ByteOrder.LITTLE_ENDIAN);
            bytes.asIntBuffer().put(words);
            out.add(RowFactory.create(slice, bytes.array()));
        }
        return out.iterator();
    }
}

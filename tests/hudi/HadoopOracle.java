// The oracle for Hudi's record-key filters: Hadoop's own Bloom filters (hadoop-client-api, among
// pyspark's jars), the classes Hudi ported (tests/hudi/test_java_oracle.py compiles and runs it).
//
//   java HadoopOracle MODE REQUEST RESPONSE
//
// REQUEST and RESPONSE are files of Java DataOutput values (big-endian). Keys are an int count,
// then each key as an int length and its bytes.
//   positions: int vectorSize, int nbHash, keys -> per key nbHash ints: HashFunction.hash(key)
//   simple:    int vectorSize, int nbHash, keys, probe keys -> int length, BloomFilter.write()
//              bytes, then one byte per probe key: membershipTest
//   dynamic:   int vectorSize, int nbHash, int nr, keys, probe keys -> the same for
//              DynamicBloomFilter
//   sizing:    int count, then count (int numEntries, double fpp) -> per pair int bits, int
//              hashes by Hudi's BloomFilterUtils formulas, in Java's double arithmetic
//   utf8:      int count, then count strings as (int length, that many UTF-16 chars) -> per
//              string int length and the bytes of String.getBytes(UTF_8)
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.util.bloom.BloomFilter;
import org.apache.hadoop.util.bloom.DynamicBloomFilter;
import org.apache.hadoop.util.bloom.Filter;
import org.apache.hadoop.util.bloom.HashFunction;
import org.apache.hadoop.util.bloom.Key;
import org.apache.hadoop.util.hash.Hash;

public final class HadoopOracle {
  private static List<byte[]> readKeys(DataInputStream in) throws IOException {
    int count = in.readInt();
    List<byte[]> keys = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      byte[] key = new byte[in.readInt()];
      in.readFully(key);
      keys.add(key);
    }
    return keys;
  }

  private static void filter(Filter f, DataInputStream in, DataOutputStream out)
      throws IOException {
    for (byte[] key : readKeys(in)) {
      f.add(new Key(key));
    }
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream written = new DataOutputStream(bytes);
    f.write(written);
    written.flush();
    out.writeInt(bytes.size());
    out.write(bytes.toByteArray());
    for (byte[] key : readKeys(in)) {
      out.writeByte(f.membershipTest(new Key(key)) ? 1 : 0);
    }
  }

  public static void main(String[] args) throws IOException {
    String mode = args[0];
    try (DataInputStream in =
            new DataInputStream(new BufferedInputStream(new FileInputStream(args[1])));
        DataOutputStream out =
            new DataOutputStream(new BufferedOutputStream(new FileOutputStream(args[2])))) {
      switch (mode) {
        case "positions": {
          int vectorSize = in.readInt();
          int nbHash = in.readInt();
          HashFunction hash = new HashFunction(vectorSize, nbHash, Hash.MURMUR_HASH);
          for (byte[] key : readKeys(in)) {
            for (int position : hash.hash(new Key(key))) {
              out.writeInt(position);
            }
          }
          break;
        }
        case "simple": {
          int vectorSize = in.readInt();
          int nbHash = in.readInt();
          filter(new BloomFilter(vectorSize, nbHash, Hash.MURMUR_HASH), in, out);
          break;
        }
        case "dynamic": {
          int vectorSize = in.readInt();
          int nbHash = in.readInt();
          int nr = in.readInt();
          filter(new DynamicBloomFilter(vectorSize, nbHash, Hash.MURMUR_HASH, nr), in, out);
          break;
        }
        case "sizing": {
          // Hudi's BloomFilterUtils.getBitSize and getNumHashes, as Hudi writes them.
          double log2Squared = Math.log(2) * Math.log(2);
          int count = in.readInt();
          for (int i = 0; i < count; i++) {
            int numEntries = in.readInt();
            double errorRate = in.readDouble();
            int bitSize = (int) Math.ceil(numEntries * (-Math.log(errorRate) / log2Squared));
            int numHashes = (int) Math.ceil(Math.log(2) * bitSize / numEntries);
            out.writeInt(bitSize);
            out.writeInt(numHashes);
          }
          break;
        }
        case "utf8": {
          int count = in.readInt();
          for (int i = 0; i < count; i++) {
            char[] units = new char[in.readInt()];
            for (int j = 0; j < units.length; j++) {
              units[j] = in.readChar();
            }
            byte[] bytes = new String(units).getBytes(StandardCharsets.UTF_8);
            out.writeInt(bytes.length);
            out.write(bytes);
          }
          break;
        }
        default:
          throw new IllegalArgumentException("unknown mode " + mode);
      }
    }
  }
}

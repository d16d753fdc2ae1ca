// Reads an encrypted Parquet file through parquet-java (the jars pyspark ships) with explicit
// keys, the oracle of tests/encryption/test_rewrite.py: every row is read (its pages decrypt and
// authenticate) and every value of every column named is looked up in its row group's Bloom
// filter, read and decrypted by parquet-java.
//
// args: FILE FOOTER_KEY AAD_PREFIX(- for none) COLUMN=KEY... then -- COLUMN... (the filtered
// columns, all of INT64, INT32, DOUBLE or BINARY); or, for files written through a KMS,
// FILE kms KEY_LIST -- COLUMN...: the keys recovered by parquet-java's
// PropertiesDrivenCryptoFactory (as Spark reads) through InMemoryKms.java, whose master keys
// KEY_LIST holds ("id: base64 key, ...").
// Prints "rows R filters F lookups L missing M absent A": A counts row groups of a named
// column without a filter.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.HadoopReadOptions;
import org.apache.parquet.ParquetReadOptions;
import org.apache.parquet.column.ColumnDescriptor;
import org.apache.parquet.column.page.PageReadStore;
import org.apache.parquet.column.values.bloomfilter.BloomFilter;
import org.apache.parquet.crypto.ColumnDecryptionProperties;
import org.apache.parquet.crypto.FileDecryptionProperties;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.example.data.simple.convert.GroupRecordConverter;
import org.apache.parquet.hadoop.BloomFilterReader;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.metadata.BlockMetaData;
import org.apache.parquet.hadoop.metadata.ColumnChunkMetaData;
import org.apache.parquet.hadoop.metadata.ColumnPath;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.io.ColumnIOFactory;
import org.apache.parquet.io.MessageColumnIO;
import org.apache.parquet.io.RecordReader;
import org.apache.parquet.io.api.Binary;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName;

public class ParquetJavaEncryptedReader {
  static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  public static void main(String[] args) throws Exception {
    String file = args[0];
    if (args[1].equals("kms")) {
      Configuration conf = new Configuration();
      conf.set("parquet.crypto.factory.class",
          "org.apache.parquet.crypto.keytools.PropertiesDrivenCryptoFactory");
      conf.set("parquet.encryption.kms.client.class", "InMemoryKms");
      conf.set("parquet.encryption.key.list", args[2]);
      List<String> filtered = new ArrayList<>();
      for (int i = 4; i < args.length; i++) {
        filtered.add(args[i]);
      }
      // The decryption properties the crypto factory makes for this file, as Spark's reader's.
      read(file, HadoopReadOptions.builder(conf, new Path(file)).build(), conf, filtered);
      return;
    }
    FileDecryptionProperties.Builder props =
        FileDecryptionProperties.builder().withFooterKey(ascii(args[1]));
    if (!args[2].equals("-")) {
      props.withAADPrefix(ascii(args[2]));
    }
    Map<ColumnPath, ColumnDecryptionProperties> keys = new HashMap<>();
    int i = 3;
    for (; i < args.length && !args[i].equals("--"); i++) {
      String[] pair = args[i].split("=", 2);
      keys.put(ColumnPath.get(pair[0]),
          ColumnDecryptionProperties.builder(pair[0]).withKey(ascii(pair[1])).build());
    }
    if (!keys.isEmpty()) {
      props.withColumnKeys(keys);
    }
    List<String> filtered = new ArrayList<>();
    for (i++; i < args.length; i++) {
      filtered.add(args[i]);
    }
    ParquetReadOptions options =
        ParquetReadOptions.builder().withDecryption(props.build()).build();
    read(file, options, new Configuration(), filtered);
  }

  static void read(String file, ParquetReadOptions options, Configuration conf,
      List<String> filtered) throws Exception {
    long rows = 0, filters = 0, lookups = 0, missing = 0, absent = 0;
    try (ParquetFileReader reader = ParquetFileReader.open(
        HadoopInputFile.fromPath(new Path(file), conf), options)) {
      MessageType schema = reader.getFooter().getFileMetaData().getSchema();
      MessageColumnIO io = new ColumnIOFactory().getColumnIO(schema);
      for (BlockMetaData block : reader.getFooter().getBlocks()) {
        BloomFilterReader bloomReader = reader.getBloomFilterDataReader(block);
        Map<String, BloomFilter> blooms = new HashMap<>();
        for (ColumnChunkMetaData chunk : block.getColumns()) {
          String name = chunk.getPath().toDotString();
          if (filtered.contains(name)) {
            BloomFilter bloom = bloomReader.readBloomFilter(chunk);
            if (bloom == null) {
              absent++;
            } else {
              blooms.put(name, bloom);
              filters++;
            }
          }
        }
        PageReadStore pages = reader.readNextRowGroup();
        RecordReader<Group> records = io.getRecordReader(pages, new GroupRecordConverter(schema));
        for (long r = 0; r < pages.getRowCount(); r++) {
          Group row = records.read();
          rows++;
          for (Map.Entry<String, BloomFilter> entry : blooms.entrySet()) {
            String name = entry.getKey();
            BloomFilter bloom = entry.getValue();
            ColumnDescriptor column = schema.getColumnDescription(new String[] {name});
            PrimitiveTypeName type = column.getPrimitiveType().getPrimitiveTypeName();
            long hash;
            switch (type) {
              case INT64: hash = bloom.hash(row.getLong(name, 0)); break;
              case INT32: hash = bloom.hash(row.getInteger(name, 0)); break;
              case DOUBLE: hash = bloom.hash(row.getDouble(name, 0)); break;
              case BINARY: hash = bloom.hash(row.getBinary(name, 0)); break;
              default: throw new IllegalArgumentException("type " + type);
            }
            lookups++;
            if (!bloom.findHash(hash)) {
              missing++;
            }
          }
        }
      }
    }
    System.out.println("rows " + rows + " filters " + filters + " lookups " + lookups
        + " missing " + missing + " absent " + absent);
  }
}

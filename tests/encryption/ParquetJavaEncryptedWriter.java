// Writes an encrypted Parquet file with Bloom filters through parquet-java (the jars pyspark
// ships), with explicit keys: the oracle tests/encryption/test_parquet_java.py reads back.
//
// args: OUT ROWS ALGORITHM(AES_GCM_V1|AES_GCM_CTR_V1) FOOTER(encrypted|plaintext)
//       KEYS(uniform|columns) AAD_PREFIX(- for none) STORE_PREFIX(true|false)
// Rows: id = i (INT64), name = "name_" + i (BINARY UTF8), x = i * 0.25 (DOUBLE),
// k = i % 1000 (INT32). Keys: footer "0123456789012345" (metadata "kf"); with "columns",
// id "1234567890123450" ("kc1") and name "1234567890123451" ("kc2"), x and k plaintext.

import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;

import org.apache.parquet.crypto.ColumnEncryptionProperties;
import org.apache.parquet.crypto.FileEncryptionProperties;
import org.apache.parquet.crypto.ParquetCipher;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.example.data.simple.SimpleGroupFactory;
import org.apache.parquet.hadoop.ParquetFileWriter;
import org.apache.parquet.hadoop.ParquetWriter;
import org.apache.parquet.hadoop.example.ExampleParquetWriter;
import org.apache.parquet.hadoop.metadata.ColumnPath;
import org.apache.parquet.io.LocalOutputFile;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.MessageTypeParser;

public class ParquetJavaEncryptedWriter {
  static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  public static void main(String[] args) throws Exception {
    String out = args[0];
    int rows = Integer.parseInt(args[1]);
    ParquetCipher cipher = ParquetCipher.valueOf(args[2]);
    boolean plaintextFooter = args[3].equals("plaintext");
    boolean columnKeys = args[4].equals("columns");
    String aadPrefix = args[5];
    boolean storePrefix = Boolean.parseBoolean(args[6]);

    MessageType schema = MessageTypeParser.parseMessageType(
        "message m { required int64 id; required binary name (UTF8); required double x;"
            + " required int32 k; }");
    FileEncryptionProperties.Builder props =
        FileEncryptionProperties.builder(ascii("0123456789012345"))
            .withFooterKeyMetadata(ascii("kf"))
            .withAlgorithm(cipher);
    if (columnKeys) {
      Map<ColumnPath, ColumnEncryptionProperties> columns = new HashMap<>();
      columns.put(ColumnPath.get("id"), ColumnEncryptionProperties.builder("id")
          .withKey(ascii("1234567890123450")).withKeyMetaData(ascii("kc1")).build());
      columns.put(ColumnPath.get("name"), ColumnEncryptionProperties.builder("name")
          .withKey(ascii("1234567890123451")).withKeyMetaData(ascii("kc2")).build());
      props.withEncryptedColumns(columns);
    }
    if (plaintextFooter) {
      props.withPlaintextFooter();
    }
    if (!aadPrefix.equals("-")) {
      props.withAADPrefix(ascii(aadPrefix));
      if (!storePrefix) {
        props.withoutAADPrefixStorage();
      }
    }

    SimpleGroupFactory groups = new SimpleGroupFactory(schema);
    try (ParquetWriter<Group> writer = ExampleParquetWriter.builder(
            new LocalOutputFile(Paths.get(out)))
        .withType(schema)
        .withWriteMode(ParquetFileWriter.Mode.OVERWRITE)
        .withRowGroupSize(256L * 1024)
        .withPageSize(16 * 1024)
        .withDictionaryEncoding(false)
        .withBloomFilterEnabled(true)
        .withMaxBloomFilterBytes(16 * 1024)
        .withEncryption(props.build())
        .build()) {
      for (int i = 0; i < rows; i++) {
        writer.write(groups.newGroup()
            .append("id", (long) i)
            .append("name", "name_" + i)
            .append("x", i * 0.25)
            .append("k", i % 1000));
      }
    }
  }
}

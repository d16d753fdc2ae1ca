// The oracle of the Paimon tests: Java Paimon itself (paimon-python-java-bridge-0.9.0.jar, the
// Paimon core that the PyPI sdist of pypaimon 0.2.0 carries), driven by a script on stdin.
//
//   java PaimonOracle bloom     BloomFilterFileIndex: bytes written, answers read back; sizing
//   java PaimonOracle writer D  DataFileIndexWriter (a data file's container) under directory D
//   java PaimonOracle table W   real tables under warehouse W, their files, Paimon's verdicts
//
// Values are written one per token (see value()): integers in decimal, floats and doubles as
// the hex of their bits, strings as the hex of their UTF-16 code units, binaries as hex,
// timestamps as "millis,nanosOfMilli", and N for null.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;

import org.apache.paimon.CoreOptions;
import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryRow;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.fileindex.FileIndexOptions;
import org.apache.paimon.fileindex.FileIndexPredicate;
import org.apache.paimon.fileindex.FileIndexReader;
import org.apache.paimon.fileindex.FileIndexWriter;
import org.apache.paimon.fileindex.FileIndexer;
import org.apache.paimon.fs.ByteArraySeekableStream;
import org.apache.paimon.fs.Path;
import org.apache.paimon.fs.local.LocalFileIO;
import org.apache.paimon.io.DataFileIndexWriter;
import org.apache.paimon.io.DataFileMeta;
import org.apache.paimon.options.Options;
import org.apache.paimon.predicate.Predicate;
import org.apache.paimon.predicate.PredicateBuilder;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.schema.SchemaChange;
import org.apache.paimon.schema.SchemaManager;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.source.DataSplit;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypeJsonParser;
import org.apache.paimon.types.RowType;
import org.apache.paimon.utils.BloomFilter64;

public class PaimonOracle {
    static byte[] unhex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return b;
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) {
            sb.append(String.format("%02x", x & 0xff));
        }
        return sb.toString();
    }

    static DataType type(String text) {
        return DataTypeJsonParser.parseAtomicTypeSQLString(text);
    }

    static Object value(DataType t, String s) {
        if (s.equals("N")) {
            return null;
        }
        switch (t.getTypeRoot()) {
            case CHAR:
            case VARCHAR:
                {
                    byte[] u = unhex(s);
                    char[] c = new char[u.length / 2];
                    for (int i = 0; i < c.length; i++) {
                        c[i] = (char) (((u[2 * i] & 0xff) << 8) | (u[2 * i + 1] & 0xff));
                    }
                    return BinaryString.fromString(new String(c));
                }
            case BINARY:
            case VARBINARY:
                return unhex(s);
            case TINYINT:
                return Byte.parseByte(s);
            case SMALLINT:
                return Short.parseShort(s);
            case INTEGER:
            case DATE:
            case TIME_WITHOUT_TIME_ZONE:
                return Integer.parseInt(s);
            case BIGINT:
                return Long.parseLong(s);
            case FLOAT:
                return Float.intBitsToFloat((int) Long.parseLong(s, 16));
            case DOUBLE:
                return Double.longBitsToDouble(Long.parseUnsignedLong(s, 16));
            case BOOLEAN:
                return Boolean.parseBoolean(s);
            case TIMESTAMP_WITHOUT_TIME_ZONE:
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                {
                    String[] p = s.split(",");
                    return Timestamp.fromEpochMillis(Long.parseLong(p[0]), Integer.parseInt(p[1]));
                }
            default:
                throw new IllegalArgumentException("type " + t);
        }
    }

    // CASE type items fpp / W value / P value / END -> BYTES hex, PROBE 0101...
    // SIZE items fpp -> SIZE bits hashes (SIZE -1 exception where Java fails)
    static void bloom(BufferedReader in) throws Exception {
        String line;
        DataType type = null;
        Options options = null;
        FileIndexWriter writer = null;
        List<String> probes = new ArrayList<>();
        while ((line = in.readLine()) != null) {
            String[] p = line.split("\t", -1);
            switch (p[0]) {
                case "SIZE":
                    {
                        try {
                            BloomFilter64 f =
                                    new BloomFilter64(Long.parseLong(p[1]), Double.parseDouble(p[2]));
                            System.out.println(
                                    "SIZE\t" + f.getBitSet().bitSize() + "\t" + f.getNumHashFunctions());
                        } catch (RuntimeException e) { // too many bits for a Java array
                            System.out.println("SIZE\t-1\t" + e.getClass().getSimpleName());
                        }
                        break;
                    }
                case "CASE":
                    type = type(p[1]);
                    options = new Options();
                    options.set("items", p[2]);
                    options.set("fpp", p[3]);
                    writer = FileIndexer.create("bloom-filter", type, options).createWriter();
                    probes.clear();
                    break;
                case "W":
                    writer.writeRecord(value(type, p[1]));
                    break;
                case "P":
                    probes.add(p[1]);
                    break;
                case "END":
                    {
                        byte[] bytes = writer.serializedBytes();
                        FileIndexReader reader =
                                FileIndexer.create("bloom-filter", type, options)
                                        .createReader(
                                                new ByteArraySeekableStream(bytes), 0, bytes.length);
                        StringBuilder answers = new StringBuilder();
                        for (String v : probes) {
                            answers.append(reader.visitEqual(null, value(type, v)).remain() ? '1' : '0');
                        }
                        System.out.println("BYTES\t" + hex(bytes));
                        System.out.println("PROBE\t" + answers);
                        break;
                    }
                default:
                    throw new IllegalArgumentException(line);
            }
        }
    }

    // COLUMN name type / OPTION key value / ROW v v ... / END -> EMBEDDED hex | FILE hex
    static void writer(String dir, BufferedReader in) throws Exception {
        String line;
        List<DataField> fields = new ArrayList<>();
        Options options = new Options();
        DataFileIndexWriter writer = null;
        int n = 0;
        while ((line = in.readLine()) != null) {
            String[] p = line.split("\t", -1);
            switch (p[0]) {
                case "COLUMN":
                    fields.add(new DataField(fields.size(), p[1], type(p[2])));
                    break;
                case "OPTION":
                    options.set(p[1], p[2]);
                    break;
                case "ROW":
                    {
                        if (writer == null) {
                            Path path = new Path(dir + "/container-" + (n++) + ".index");
                            writer =
                                    DataFileIndexWriter.create(
                                            LocalFileIO.create(),
                                            path,
                                            new RowType(fields),
                                            new FileIndexOptions(new CoreOptions(options)));
                        }
                        Object[] values = new Object[fields.size()];
                        for (int i = 0; i < values.length; i++) {
                            values[i] = value(fields.get(i).type(), p[i + 1]);
                        }
                        writer.write(GenericRow.of(values));
                        break;
                    }
                case "END":
                    {
                        writer.close();
                        DataFileIndexWriter.FileIndexResult result = writer.result();
                        if (result.embeddedIndexBytes() != null) {
                            System.out.println("EMBEDDED\t" + hex(result.embeddedIndexBytes()));
                        } else {
                            java.nio.file.Path file =
                                    java.nio.file.Paths.get(dir, result.independentIndexFile());
                            System.out.println("FILE\t" + hex(Files.readAllBytes(file)));
                        }
                        writer = null;
                        fields = new ArrayList<>();
                        options = new Options();
                        break;
                    }
                default:
                    throw new IllegalArgumentException(line);
            }
        }
    }

    static FileStoreTable table(Catalog catalog, Identifier id) throws Exception {
        return (FileStoreTable) catalog.getTable(id);
    }

    // TABLE name / COLUMN name type / PARTITION a,b / PK a,b / OPTION key value / CREATE /
    // ROW v v ... / COMMIT / COMPACT buckets (then COMMIT) / RENAME old new / SET key value /
    // UNSET key / MARK name -> MARK name / FILES -> FILE lines / PROBE column v v ... -> VERDICT
    // lines: each data file's answer to column IN (values) and to each column = value
    static void tables(String warehouse, BufferedReader in) throws Exception {
        Catalog catalog = CatalogFactory.createCatalog(CatalogContext.create(new Path(warehouse)));
        catalog.createDatabase("db", true);
        String line;
        Schema.Builder schema = null;
        Identifier id = null;
        BatchWriteBuilder builder = null;
        BatchTableWrite write = null;
        while ((line = in.readLine()) != null) {
            String[] p = line.split("\t", -1);
            switch (p[0]) {
                case "TABLE":
                    id = Identifier.create("db", p[1]);
                    schema = Schema.newBuilder();
                    break;
                case "COLUMN":
                    schema.column(p[1], type(p[2]));
                    break;
                case "PARTITION":
                    schema.partitionKeys(p[1].split(","));
                    break;
                case "PK":
                    schema.primaryKey(p[1].split(","));
                    break;
                case "OPTION":
                    schema.option(p[1], p[2]);
                    break;
                case "CREATE":
                    catalog.createTable(id, schema.build(), false);
                    break;
                case "ROW":
                    {
                        FileStoreTable t = table(catalog, id);
                        if (write == null) {
                            builder = t.newBatchWriteBuilder();
                            write = builder.newWrite();
                        }
                        List<DataField> fields = t.rowType().getFields();
                        Object[] values = new Object[fields.size()];
                        for (int i = 0; i < values.length; i++) {
                            values[i] = value(fields.get(i).type(), p[i + 1]);
                        }
                        write.write(GenericRow.of(values));
                        break;
                    }
                case "COMMIT":
                    {
                        List<CommitMessage> messages = write.prepareCommit();
                        try (BatchTableCommit commit = builder.newCommit()) {
                            commit.commit(messages);
                        }
                        write.close();
                        write = null;
                        break;
                    }
                case "COMPACT": // a full compaction of buckets 0..n-1 of an unpartitioned table
                    {
                        FileStoreTable t = table(catalog, id);
                        builder = t.newBatchWriteBuilder();
                        write = builder.newWrite();
                        for (int b = 0; b < Integer.parseInt(p[1]); b++) {
                            write.compact(BinaryRow.EMPTY_ROW, b, true);
                        }
                        break;
                    }
                case "RENAME":
                    catalog.alterTable(id, SchemaChange.renameColumn(p[1], p[2]), false);
                    break;
                case "SET":
                    catalog.alterTable(id, SchemaChange.setOption(p[1], p[2]), false);
                    break;
                case "UNSET":
                    catalog.alterTable(id, SchemaChange.removeOption(p[1]), false);
                    break;
                case "MARK": // turns to a table again, and says so in the output
                    id = Identifier.create("db", p[1]);
                    System.out.println("MARK\t" + p[1]);
                    break;
                case "FILES":
                case "PROBE":
                    verdicts(table(catalog, id), p);
                    break;
                default:
                    throw new IllegalArgumentException(line);
            }
        }
    }

    static void verdicts(FileStoreTable t, String[] p) throws Exception {
        SchemaManager schemas = new SchemaManager(t.fileIO(), t.location());
        for (Split split : t.newReadBuilder().newScan().plan().splits()) {
            DataSplit data = (DataSplit) split;
            for (DataFileMeta file : data.dataFiles()) {
                String dir = data.bucketPath();
                if (p[0].equals("FILES")) {
                    byte[] embedded = file.embeddedIndex();
                    System.out.println(
                            "FILE\t" + dir + "/" + file.fileName() + "\t"
                                    + String.join(",", file.extraFiles()) + "\t"
                                    + (embedded == null ? "-" : hex(embedded)));
                    continue;
                }
                // The column as this file's schema has it: by field id, as Paimon maps a
                // predicate onto an older file.
                int fieldId = t.rowType().getField(p[1]).id();
                RowType fileType = schemas.schema(file.schemaId()).logicalRowType();
                int index = -1;
                for (int i = 0; i < fileType.getFieldCount(); i++) {
                    if (fileType.getFields().get(i).id() == fieldId) {
                        index = i;
                    }
                }
                DataType type = fileType.getTypeAt(index);
                PredicateBuilder predicates = new PredicateBuilder(fileType);
                List<Object> literals = new ArrayList<>();
                for (int i = 2; i < p.length; i++) {
                    literals.add(value(type, p[i]));
                }
                StringBuilder answers = new StringBuilder();
                answers.append(test(t, dir, file, fileType, predicates.in(index, literals)) ? '1' : '0');
                answers.append('\t');
                for (Object literal : literals) {
                    answers.append(test(t, dir, file, fileType, predicates.equal(index, literal)) ? '1' : '0');
                }
                System.out.println("VERDICT\t" + file.fileName() + "\t" + answers);
            }
        }
    }

    static boolean test(FileStoreTable t, String dir, DataFileMeta file, RowType type, Predicate predicate)
            throws Exception {
        byte[] embedded = file.embeddedIndex();
        if (embedded != null) {
            try (FileIndexPredicate index = new FileIndexPredicate(embedded, type)) {
                return index.testPredicate(predicate);
            }
        }
        for (String extra : file.extraFiles()) {
            if (extra.endsWith(".index")) {
                try (FileIndexPredicate index =
                        new FileIndexPredicate(new Path(dir + "/" + extra), t.fileIO(), type)) {
                    return index.testPredicate(predicate);
                }
            }
        }
        return true;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        switch (args[0]) {
            case "bloom":
                bloom(in);
                break;
            case "writer":
                writer(args[1], in);
                break;
            case "table":
                tables(args[1], in);
                break;
            default:
                throw new IllegalArgumentException(args[0]);
        }
        System.out.flush();
    }
}

"""Spark's file helpers on encrypted files, and Spark reading our rewrites of its encrypted files.

Spark (parquet-java 1.17) writes encrypted files with Bloom filters through
``PropertiesDrivenCryptoFactory`` and the in-memory KMS ``tests/encryption/InMemoryKms.java``
(compiled for the run and added to the session's jars), in both footer modes; our Python client
of the same KMS (``tests/encryption/keys.py``) recovers the same keys from the files' key
material. The oracles:

- ``rewrite_files(..., decryption=)`` resizes Spark's filters and adds one, on the executors;
  Spark reads the new files back through the same KMS, rows equal to the values written, and
  with ``filterPushdown`` and ``parquet.filter.bloom.enabled`` its queries find every value
  looked up, while for absent values the scan reads no row group that only the Bloom filter
  excludes (its ``numOutputRows`` 0, where without the Bloom filter the statistics keep it);
  parquet-java (``ParquetJavaEncryptedReader.java``, with the crypto factory and KMS Spark
  uses) reads every row of every new file and finds every value in its row group's filter.
- ``bloom_filter_index`` and ``files_might_contain`` with ``decryption=`` agree with our local
  reader; without keys, or without one column's master key, they report or keep rather than
  guess.
- ``rewrite_files(..., in_place=True)`` adds a filter and leaves the files encrypted as they were;
  ``rewrite_table`` rewrites a Delta table, and an Iceberg table, of encrypted files in one
  commit on the executors.
- Keys that do not pickle are a TypeError on the driver naming the part, never the keys.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet.encryption as pe
import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

import parquet_bloom as pb
from parquet_bloom import DecryptionKeys
from parquet_bloom import spark as pbs
from parquet_bloom.errors import DecryptionError
from tests import skips
from tests.encryption import test_tables as encrypted_tables
from tests.encryption.keys import MASTER_KEYS, InServerWrapKms
from tests.encryption.test_parquet_java import pyspark_jars
from tests.spark.data import session_conf

pytestmark = pytest.mark.spark

ROWS = 20_000  # two files (Spark's two partitions), each of several row groups
FOOTERS = ["encrypted", "plaintext"]
FILTERED = ["id", "name", "x"]  # Spark writes their filters; k gets one from our rewrite
COLUMNS = ["id", "name", "x", "k"]
PHYSICAL = {"id": "INT64", "name": "BYTE_ARRAY", "x": "DOUBLE", "k": "INT32"}
KEY_LIST = ", ".join(f"{i}: {base64.b64encode(k).decode()}" for i, k in MASTER_KEYS.items())
READ_OPTIONS = {
    "parquet.crypto.factory.class": (
        "org.apache.parquet.crypto.keytools.PropertiesDrivenCryptoFactory"
    ),
    "parquet.encryption.kms.client.class": "InMemoryKms",
    "parquet.encryption.key.list": KEY_LIST,
}


def write_options(footer: str) -> dict[str, str]:
    """Footer key kf; id under kc1, name under kc2, x and k plaintext. Spark's filters are
    sized for far fewer values than a row group holds (an undersized filter to resize)."""
    options = {
        **READ_OPTIONS,
        "parquet.encryption.footer.key": "kf",
        "parquet.encryption.column.keys": "kc1:id;kc2:name",
        "parquet.encryption.plaintext.footer": str(footer == "plaintext").lower(),
        "parquet.block.size": str(48 * 1024),
        "parquet.enable.dictionary": "false",
    }
    for column in FILTERED:
        options[f"parquet.bloom.filter.enabled#{column}"] = "true"
        options[f"parquet.bloom.filter.expected.ndv#{column}"] = "200"
    return options


def values(column: str, i: np.ndarray) -> np.ndarray:
    """Row i's value of ``column`` (ids are even: the odd ones are absent within each row
    group's statistics)."""
    if column == "id":
        return (2 * i).astype(np.int64)
    if column == "x":
        return i * 0.25
    if column == "k":
        return (i % 1000).astype(np.int32)
    return np.array([f"name_{n}" for n in i], dtype=object)


def value(column: str, i: int) -> Any:
    """Row i's value of ``column``, a Python scalar."""
    return values(column, np.array([i])).tolist()[0]


def keys(master_keys: dict[str, bytes] = MASTER_KEYS) -> DecryptionKeys:
    return DecryptionKeys.from_kms(InServerWrapKms(master_keys))


@pytest.fixture(scope="module")
def java(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The KMS compiled and added to the session's jars (the executors load it by name), and
    the command running parquet-java's reader with it."""
    if shutil.which("javac") is None:
        pytest.skip(skips.NO_JAVAC)
    workdir = tmp_path_factory.mktemp("spark-kms")
    classes = workdir / "classes"
    here = Path(__file__).parents[1] / "encryption"
    classpath = f"{pyspark_jars()}/*"
    sources = [here / "InMemoryKms.java", here / "ParquetJavaEncryptedReader.java"]
    done = subprocess.run(
        ["javac", "-d", str(classes), "-cp", classpath, *map(str, sources)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    jar = workdir / "kms.jar"  # a jar is a zip; the class alone needs no manifest
    with zipfile.ZipFile(jar, "w") as archive:
        archive.write(classes / "InMemoryKms.class", "InMemoryKms.class")
    spark.sparkContext._jsc.addJar(str(jar))
    return ["java", "-cp", f"{classes}:{classpath}", "ParquetJavaEncryptedReader"]


@pytest.fixture(scope="module")
def written(
    spark: SparkSession, java: list[str], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Each footer mode's directory of two encrypted files, written by Spark."""
    root = tmp_path_factory.mktemp("spark-encrypted")
    df = spark.range(0, ROWS, 1, 2).selectExpr(
        "id * 2 AS id",
        "concat('name_', id) AS name",
        "CAST(id AS DOUBLE) * 0.25 AS x",
        "CAST(id % 1000 AS INT) AS k",
    )
    out = {}
    for footer in FOOTERS:
        df.write.options(**write_options(footer)).parquet(str(root / footer))
        out[footer] = root / footer
    return out


def data_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("part-*.parquet"))


def row_groups(files: list[Path], decryption: DecryptionKeys) -> list[tuple[Path, int, int, int]]:
    """(file, row group, first row, end row) of every row group: the files hold Spark's
    partitions in order, the rows of each in order."""
    out = []
    start = 0
    for file in files:
        with pb.BloomFilterReader(file, decryption=decryption) as reader:
            for rg in range(reader.num_row_groups):
                rows = reader.row_group(rg)[0].num_values
                out.append((file, rg, start, start + rows))
                start += rows
    assert start == ROWS
    return out


def scan(df: DataFrame) -> tuple[list[Any], int]:
    """The rows of ``df``, and how many rows its file scan read (row groups it did not skip)."""
    rows = df.collect()
    plan = df._jdf.queryExecution().executedPlan()
    if plan.nodeName() == "AdaptiveSparkPlan":
        plan = plan.executedPlan()
    leaves = plan.collectLeaves()
    (scans,) = [
        leaves.apply(i) for i in range(leaves.length()) if "Scan" in leaves.apply(i).nodeName()
    ]
    return rows, int(scans.metrics().apply("numOutputRows").value())


@pytest.mark.parametrize("footer", FOOTERS)
def test_spark_reads_our_rewrite_and_its_bloom_filters_find_every_value(
    spark: SparkSession,
    written: dict[str, Path],
    java: list[str],
    tmp_path: Path,
    footer: str,
) -> None:
    src, dst = written[footer], tmp_path / "rewritten"
    outcomes = pbs.rewrite_files(
        spark, str(src), str(dst), columns=COLUMNS, fpp=0.001, decryption=keys()
    )
    assert [o.error for o in outcomes] == [None, None]
    files = data_files(dst)
    assert [f.name for f in files] == [f.name for f in data_files(src)]
    groups = row_groups(files, keys())
    assert len(groups) >= 6
    # Our rewrite: still encrypted as Spark wrote it, every filter resized (Spark's were
    # sized for 200 values) and k given one; every value in its row group's filter.
    for file, rg, start, stop in groups:
        with (
            pb.BloomFilterReader(file, decryption=keys()) as new,
            pb.BloomFilterReader(src / file.name, decryption=keys()) as old,
        ):
            assert new.encrypted_footer == old.encrypted_footer == (footer == "encrypted")
            for chunk in new.row_group(rg):
                assert chunk.encrypted == (chunk.path in ("id", "name"))
                bloom = new.filter(rg, chunk.path)
                hashes = pb.hash_values(
                    values(chunk.path, np.arange(start, stop)), PHYSICAL[chunk.path]
                )
                assert bloom.find_hashes(hashes).all(), (file.name, rg, chunk.path)
                if chunk.path in FILTERED:
                    assert bloom.num_bytes > old.filter(rg, chunk.path).num_bytes
                else:
                    assert old.column_chunk(rg, chunk.path).bloom_filter_offset is None

    # Spark reads the new files back through the same KMS: the rows written.
    read = spark.read.options(**READ_OPTIONS).parquet(str(dst))
    table = read.toArrow().sort_by("id")
    i = np.arange(ROWS)
    for column in COLUMNS:
        assert table.column(column).to_numpy(zero_copy_only=False).tolist() == (
            values(column, i).tolist()
        ), column

    # Queries with Bloom filter pushdown (no dictionary filtering: only statistics and Bloom
    # filters prune) find every value looked up: one from each row group, of each column.
    pushdown = {
        "parquet.filter.bloom.enabled": "true",
        "parquet.filter.dictionary.enabled": "false",
    }
    with session_conf(spark, {"spark.sql.parquet.filterPushdown": "true"}):
        df = spark.read.options(**READ_OPTIONS, **pushdown).parquet(str(dst))
        df.createOrReplaceTempView("rewritten")
        for column in COLUMNS:
            picked = [value(column, (a + b) // 2) for _, _, a, b in groups]
            for at in range(0, len(picked), 8):  # at most 10: pushed down as an IN filter
                some = picked[at : at + 8]
                found = df.where(df[column].isin(some)).collect()
                assert {r[column] for r in found} == set(some), column
        middle = int(ROWS // 2 + 1)
        (row,) = spark.sql(f"SELECT * FROM rewritten WHERE id = {2 * middle}").collect()
        assert (row.name, row.x, row.k) == (f"name_{middle}", middle * 0.25, middle % 1000)
        assert (
            len(spark.sql(f"SELECT * FROM rewritten WHERE name = 'name_{middle}'").collect()) == 1
        )

        # Absent values inside a row group's statistics (odd ids, x between two rows' values),
        # which our filters exclude: the scan reads nothing with the Bloom filter, and the row
        # group without it.
        checked = 0
        for file, _, start, stop in groups[:: max(1, len(groups) // 4)]:
            with pb.BloomFilterReader(file, decryption=keys()) as reader:
                for column, absent in (("id", 2 * start + 1), ("x", start * 0.25 + 0.125)):
                    if reader.row_groups_might_contain(column, [absent]):
                        continue  # a false positive of ours (0.1 %): Spark's would be too
                    query = f"SELECT * FROM rewritten WHERE {column} = {absent}"
                    rows, scanned = scan(spark.sql(query))
                    assert rows == [] and scanned == 0, (query, scanned)
                    off = spark.read.options(
                        **READ_OPTIONS, **{**pushdown, "parquet.filter.bloom.enabled": "false"}
                    ).parquet(str(dst))
                    rows, scanned = scan(off.where(off[column] == absent))
                    assert rows == [] and scanned >= stop - start, (query, scanned)
                    checked += 1
        assert checked >= 6

    # parquet-java, with the crypto factory and KMS Spark uses, reads every row of the new
    # files and finds every value in its row group's filter.
    for file in files:
        run = subprocess.run(
            [*java, str(file), "kms", KEY_LIST, "--", *COLUMNS],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        words = run.stdout.split()
        got = {words[k]: int(words[k + 1]) for k in range(0, len(words), 2)}
        rgs = sum(1 for g in groups if g[0] == file)
        rows = sum(b - a for f, _, a, b in groups if f == file)
        assert got == {
            "rows": rows,
            "filters": 4 * rgs,
            "lookups": 4 * rows,
            "missing": 0,
            "absent": 0,
        }, file.name


@pytest.mark.parametrize("footer", FOOTERS)
def test_the_index_and_pruning_of_encrypted_files(
    spark: SparkSession, written: dict[str, Path], footer: str
) -> None:
    src = written[footer]
    files = data_files(src)
    groups = row_groups(files, keys())
    index = pbs.bloom_filter_index(spark, str(src), decryption=keys()).collect()
    assert len(index) == len(groups) * len(COLUMNS)
    for row in index:
        with pb.BloomFilterReader(row.file, decryption=keys()) as reader:
            chunk = reader.column_chunk(row.row_group, row.column)
            assert row.error is None and row.has_bloom_filter == (row.column in FILTERED)
            assert row.bloom_filter_offset == chunk.bloom_filter_offset
            if row.has_bloom_filter:
                assert row.num_bytes == reader.filter(row.row_group, row.column).num_bytes

    # Without keys: an encrypted footer makes each file one row with its error; under a
    # plaintext footer the plaintext columns are read, and the encrypted ones are errors or
    # show no filter (parquet-java leaves their offsets out of the plaintext footer).
    bare = pbs.bloom_filter_index(spark, str(src)).collect()
    if footer == "encrypted":
        assert len(bare) == len(files)
        assert all(r.row_group is None and "encrypted" in r.error for r in bare)
    else:
        assert len(bare) == len(index)
        plain = [r for r in bare if r.column in ("x", "k")]
        assert all(r.error is None and r.has_bloom_filter == (r.column == "x") for r in plain)
        hidden = [r for r in bare if r.column in ("id", "name")]
        assert all(r.error is not None or not r.has_bloom_filter for r in hidden)

    # Pruning: every row group of each value looked up is kept; with a KMS that lacks name's
    # master key, name's row groups are all kept, id's still pruned.
    looked_up = [(f, rg, value("id", a)) for f, rg, a, _ in groups]
    kept = pbs.files_might_contain(
        spark, str(src), "id", [v for _, _, v in looked_up], decryption=keys()
    ).collect()
    kept_pairs = {(r.file, r.row_group) for r in kept}
    assert {(str(f), rg) for f, rg, _ in looked_up} <= kept_pairs
    partial = keys({k: v for k, v in MASTER_KEYS.items() if k != "kc2"})
    names = pbs.files_might_contain(spark, str(src), "name", ["name_1"], decryption=partial)
    assert names.count() == len(groups)
    first_file, _, first = looked_up[0]
    ids = pbs.files_might_contain(spark, str(src), "id", [first], decryption=partial).collect()
    assert (str(first_file), 0) in {(r.file, r.row_group) for r in ids}
    assert len(ids) < len(groups)


def test_rewrite_files_in_place_keeps_them_encrypted(
    spark: SparkSession, written: dict[str, Path], tmp_path: Path
) -> None:
    src = shutil.copytree(written["plaintext"], tmp_path / "copy")
    outcomes = pbs.rewrite_files(spark, str(src), in_place=True, columns=["k"], decryption=keys())
    assert [o.error for o in outcomes] == [None, None]
    for file, rg, start, stop in row_groups(data_files(src), keys()):
        with pb.BloomFilterReader(file, decryption=keys()) as reader:
            assert not reader.encrypted_footer and reader.encryption_algorithm == "AES_GCM_V1"
            assert [c.encrypted for c in reader.row_group(rg)] == [True, True, False, False]
            hashes = pb.hash_values(values("k", np.arange(start, stop)), "INT32")
            assert reader.filter(rg, "k").find_hashes(hashes).all()
            assert reader.filter(rg, "id").num_bytes  # kept, still readable with the keys
    (file, *_) = data_files(src)
    with pytest.raises(DecryptionError):
        pb.BloomFilterReader(file, decryption=keys({"kf": MASTER_KEYS["kf"]})).filter(0, "id")


def test_rewrite_table_of_encrypted_delta_files(spark: SparkSession, tmp_path: Path) -> None:
    root = encrypted_tables.encrypted_table(tmp_path / "t", plaintext_footer=False)
    report = pbs.rewrite_table(
        spark, str(root), columns=["a", "b"], decryption=encrypted_tables.keys()
    )
    assert len(report.rewritten) == 2 and not report.failed and report.version == 1
    for uri in DeltaTable(str(root)).file_uris():
        with pb.BloomFilterReader(uri, decryption=encrypted_tables.keys()) as reader:
            assert reader.encrypted_footer
            filters, failed = reader.filters_with_errors()
            assert not failed and {c for _, c in filters} == {"a", "b"}


def test_rewrite_table_of_encrypted_iceberg_files(spark: SparkSession, tmp_path: Path) -> None:
    """An Iceberg table's encrypted files rewritten on the executors with the keys, kept
    encrypted, in one snapshot (as the local rewrite_bloom_filters does with decryption=)."""
    from tests.encryption import iceberg_encrypted as ie

    table = ie.encrypted_table(tmp_path / "t", plaintext_footer=False, bloom=())
    before = table.current_snapshot()
    assert before is not None
    report = pbs.rewrite_table(spark, table, columns=["a", "b"], decryption=ie.keys())
    assert len(report.rewritten) == ie.FILES and not report.failed, report.failed
    table.refresh()
    after = table.current_snapshot()
    assert after is not None and after.snapshot_id == report.version
    assert after.parent_snapshot_id == before.snapshot_id
    files = [t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()]
    assert len(files) == ie.FILES and all(".bloom-" in f for f in files)
    for path in files:
        assert Path(path).read_bytes()[-4:] == b"PARE"
        with pb.BloomFilterReader(path, decryption=ie.keys()) as reader:
            filters, failed = reader.filters_with_errors()
            assert not failed and {c for _, c in filters} == {"a", "b"}


class UnpicklableKms(pe.KmsClient):  # type: ignore[misc]
    """A pyarrow KmsClient subclass, as users write them: it does not pickle."""

    def unwrap_key(self, wrapped_key: str, master_key_identifier: str) -> bytes:
        return MASTER_KEYS[master_key_identifier]


class LockedRetriever:
    """A key retriever holding a lock (which does not pickle) and the keys."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.keys = dict(MASTER_KEYS)

    def __call__(self, key_metadata: bytes) -> bytes | None:
        with self.lock:
            return self.keys.get(key_metadata.decode())


@pytest.mark.parametrize("helper", ["index", "prune", "rewrite_files", "rewrite_table"])
@pytest.mark.parametrize("part", ["kms", "retriever"])
def test_keys_that_do_not_pickle_are_refused_on_the_driver(
    spark: SparkSession, tmp_path: Path, helper: str, part: str
) -> None:
    if part == "kms":
        decryption = DecryptionKeys.from_kms(UnpicklableKms())
        named = r"its KMS client \(tests\.spark\.test_encrypted\.UnpicklableKms\)"
    else:
        decryption = DecryptionKeys(b"0" * 16, {"id": b"1" * 16}, key_retriever=LockedRetriever())
        named = r"its key_retriever \(tests\.spark\.test_encrypted\.LockedRetriever\)"
    calls = {
        "index": lambda: pbs.bloom_filter_index(spark, str(tmp_path), decryption=decryption),
        "prune": lambda: pbs.files_might_contain(
            spark, str(tmp_path), "id", [1], decryption=decryption
        ),
        "rewrite_files": lambda: pbs.rewrite_files(
            spark, str(tmp_path), str(tmp_path / "out"), columns=["id"], decryption=decryption
        ),
        "rewrite_table": lambda: pbs.rewrite_table(
            spark, str(tmp_path / "no-table"), columns=["id"], decryption=decryption
        ),
    }
    with pytest.raises(
        TypeError, match=f"must be picklable to be sent to Spark's executors, but {named}"
    ) as err:
        calls[helper]()
    message = str(err.value)
    assert "__reduce__" in message
    for key in [*MASTER_KEYS.values(), b"0" * 16, b"1" * 16]:
        for text in (key.decode(), key.hex(), base64.b64encode(key).decode()):
            assert text not in message
    assert not (tmp_path / "out").exists()
    with pytest.raises(TypeError, match="must be a DecryptionKeys"):
        pbs.bloom_filter_index(spark, str(tmp_path), decryption=b"0" * 16)  # type: ignore[arg-type]


def test_files_might_contain_stops_on_a_wrong_key_as_prune_does(tmp_path: Path) -> None:
    """The executor's side of ``files_might_contain``: a key given that does not decrypt (a
    wrong column key, a tampered filter) fails the file with a located DecryptionError, as
    ``prune`` and ``delta.prune`` stop; it kept every row group in silence (the warning is
    dropped on the executors). A key not given still keeps its row groups."""
    from parquet_bloom.spark._files import _row_groups_to_read
    from tests.encryption import tables

    root = tables.with_filters(
        tables.encrypted_table(tmp_path / "t", plaintext_footer=True, files=1), ["a"], tables.keys()
    )
    (uri,) = DeltaTable(str(root)).file_uris()
    path = str(Path(uri))
    assert _row_groups_to_read(path, "a", [1500], {}, tables.keys()) == [1]
    with pb.BloomFilterReader(path, decryption=tables.keys()) as reader:
        footer_key = reader._decryptor.footer_key()  # type: ignore[union-attr]
        chunk = reader.column_chunk(1, "a")
    wrong = DecryptionKeys(footer_key, {"a": bytes(16)})
    with pytest.raises(DecryptionError, match="does not decrypt") as info:
        _row_groups_to_read(path, "a", [1500], {}, wrong)
    assert (info.value.source, info.value.column) == (path, "a")
    # Without a's key: kept.
    assert _row_groups_to_read(path, "a", [1500], {}, DecryptionKeys(footer_key)) == [0, 1, 2]
    # A tampered bitset.
    assert chunk.bloom_filter_offset is not None and chunk.bloom_filter_length is not None
    data = bytearray(Path(path).read_bytes())
    data[chunk.bloom_filter_offset + chunk.bloom_filter_length - 5] ^= 0x01
    Path(path).write_bytes(bytes(data))
    with pytest.raises(DecryptionError, match="does not decrypt") as info:
        _row_groups_to_read(path, "a", [10**9], {}, tables.keys())
    assert (info.value.row_group, info.value.module) == (1, "Bloom filter bitset")

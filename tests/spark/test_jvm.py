"""The JVM accelerator (parquet_bloom.spark._jvm and its Java sources): the jar compiles from the
sources the package ships and is cached; a session with it builds and probes in the JVM alone,
and a session without it (or with a jar of another release) runs as before, or refuses
``jvm=True`` saying how to add the jar. That its answers equal the Python ones is checked where
those answers are tested, once with the jar and once without (the ``jvm`` fixture)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from parquet_bloom import _plain as plain
from parquet_bloom import spark as pbs
from parquet_bloom.spark import _jvm
from parquet_bloom.spark._types import int96_rows, signed64
from tests import skips
from tests.spark.data import session_conf
from tests.spark.test_probe_layouts import uses_python

pytestmark = pytest.mark.spark


@pytest.fixture
def accelerated(spark: SparkSession) -> SparkSession:
    if _jvm.accelerator(spark, None) is None:
        pytest.skip(skips.NO_JAVAC_FOR_JAR)
    return spark


def test_the_jar_is_compiled_once_and_holds_the_classes(tmp_path: Path) -> None:
    if not skips.javac_for_jar():
        pytest.skip(skips.NO_JAVAC_FOR_JAR)
    jar = pbs.jar_path(tmp_path)
    assert jar.parent.parent == tmp_path and jar.name == _jvm.JAR_NAME
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
    for name in (_jvm.SLICE_BUILD, _jvm.HASHES):
        assert name.replace(".", "/") + ".class" in names
    built = jar.stat().st_mtime_ns
    assert pbs.jar_path(tmp_path) == jar and jar.stat().st_mtime_ns == built  # reused
    assert [p.name for p in jar.parent.iterdir()] == [_jvm.JAR_NAME]  # no work files left


def test_without_javac_the_jar_is_refused_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(FileNotFoundError, match="needs javac"):
        pbs.jar_path(tmp_path / "cache")
    assert not any((tmp_path / "cache").rglob("*.jar"))


def test_the_cache_directory_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not skips.javac_for_jar():
        pytest.skip(skips.NO_JAVAC_FOR_JAR)
    monkeypatch.setenv(_jvm.CACHE_ENV, str(tmp_path))
    assert pbs.jar_path().is_relative_to(tmp_path)


def test_a_jar_of_another_release_is_ignored_or_refused(
    accelerated: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session whose JVM lacks this release's classes: jvm=None runs without them, and
    jvm=True says how to add the jar."""
    monkeypatch.setattr(_jvm, "JAVA_PACKAGE", "parquet_bloom.spark.v0")
    monkeypatch.setattr(_jvm, "_FOUND", type(_jvm._FOUND)())
    df = accelerated.range(1000)
    with pytest.raises(RuntimeError, match=r"spark\.jars"):
        pbs.build_filter(df, "id", ndv=1000, jvm=True)
    with pytest.raises(RuntimeError, match=r"spark\.jars"):
        pbs.might_contain(pbs.build_filter(df, "id", ndv=1000), "id", jvm=True)
    assert _jvm.accelerator(accelerated, None) is None
    monkeypatch.undo()
    assert _jvm.accelerator(accelerated, None) is not None


def test_the_int96_hash_hashes_as_python_does(accelerated: SparkSession) -> None:
    """Microseconds across Spark's whole timestamp range (years 1 to 9999, both signs, the
    Julian day's edges): the Java hash equals the hash of the 12 bytes Python encodes."""
    accelerator = _jvm.accelerator(accelerated, True)
    lowest, highest = -62_135_596_800_000_000, 253_402_300_799_999_999  # 0001-01-01, 9999-12-31
    epoch_day = 2_440_588 * 86_400_000_000
    edges = [lowest, highest, 0, -1, 1, -epoch_day, -epoch_day - 1, -epoch_day + 1]
    rng = np.random.default_rng(7)
    micros = np.array(edges + rng.integers(lowest, highest, 5000).tolist(), np.int64)
    df = accelerated.createDataFrame([(int(m),) for m in micros], "micros bigint")
    got = df.select(_jvm.java_hash(accelerator, "int96", F.col("micros")).alias("h")).toArrow()
    expected = [signed64(h) for h in plain.hash_values(int96_rows(micros), "INT96")]
    assert got.column("h").to_pylist() == expected
    nulls = accelerated.createDataFrame([(None,)], "micros bigint")
    assert nulls.select(_jvm.java_hash(accelerator, "int96", F.col("micros"))).first() == (None,)


def test_int96_timestamps_are_built_and_probed_with_the_udf(accelerated: SparkSession) -> None:
    df = accelerated.range(0, 10_000, numPartitions=3).select(
        "id", F.timestamp_micros(F.col("id") * 977 - 10**15).alias("ts")
    )
    with session_conf(accelerated, {"spark.sql.parquet.outputTimestampType": "INT96"}):
        with_jar = pbs.build_filters(df, ["id", "ts"], ndv=10_000, jvm=True)
        without = pbs.build_filters(df, ["id", "ts"], ndv=10_000, jvm=False)
        assert with_jar == without
        for jvm in (True, False):
            probe = df.filter(pbs.might_contain(with_jar["ts"], "ts", jvm=jvm))
            plan = probe._jdf.queryExecution().executedPlan().toString()
            assert ("Hashes.int96" in plan) == jvm
            assert uses_python(probe) == [] and probe.count() == 10_000


def test_the_raw_bits_hashes_keep_signed_zeros_and_nan_payloads(
    accelerated: SparkSession,
) -> None:
    """Floats and doubles are built from their stored bits: -0.0 is not 0.0, and NaNs with other
    payloads are other values (Spark's xxhash64, which the probe uses, makes them one)."""
    accelerator = _jvm.accelerator(accelerated, True)
    bits32 = [0, 0x8000_0000, 0x7FC0_0000, 0x7FC0_0001, 0xFFC0_0000, 0x7F80_0000, 1]
    bits64 = [0, 1 << 63, 0x7FF8 << 48, (0x7FF8 << 48) | 1, 0xFFF8 << 48, 0x7FF << 52, 1]
    table = pa.table(
        {
            "f": pa.array(np.array(bits32, np.uint32).view(np.float32)),
            "d": pa.array(np.array(bits64, np.uint64).view(np.float64)),
        }
    )
    df = accelerated.createDataFrame(table)
    got = df.select(
        _jvm.java_hash(accelerator, "floatBits", F.col("f")).alias("f"),
        _jvm.java_hash(accelerator, "doubleBits", F.col("d")).alias("d"),
    ).toArrow()
    for column, physical_type in (("f", "FLOAT"), ("d", "DOUBLE")):
        values = table.column(column).to_numpy()
        expected = [signed64(h) for h in plain.hash_values(values, physical_type)]
        assert got.column(column).to_pylist() == expected, column
        assert len(set(expected)) == len(expected)

"""The optional JVM accelerator: a small jar that takes the two Python-bound steps of
parquet_bloom.spark into the JVM, like the compiled kernels do for the numpy core.

- :func:`build_filters` inserts, in Java map tasks, the hashes that Spark's own expressions
  compute (:func:`parquet_bloom.spark._types.sql_hash`), and ORs the slices in Java reduce
  tasks (``SliceBuild.java``): no Python worker starts, and no row crosses to Python.
- :func:`might_contain` (and the build) hash INT96 timestamps with one Java method
  (``Hashes.java``, called in Spark's generated code) instead of a dozen Spark expressions;
  the build hashes floats by their raw bits with it too (:func:`java_hash`).

Nothing needs it: without the jar on the session's classpath, or on Spark Connect, everything
runs as before, with the same answers, bit for bit. The jar is compiled from the Java sources
shipped in this package, by the local JDK against the installed PySpark's jars, the first time
:func:`jar_path` is called, and cached (docs/spark.md, "The JVM accelerator").
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import weakref
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column

JAR_NAME = "parquet-bloom-spark.jar"
# The classes' package: its version changes with their interface, so that a jar of another
# release on the classpath is not used (it is ignored, as if absent).
JAVA_PACKAGE = "parquet_bloom.spark.v1"
SLICE_BUILD = f"{JAVA_PACKAGE}.SliceBuild"
HASHES = f"{JAVA_PACKAGE}.Hashes"
CACHE_ENV = "PARQUET_BLOOM_CACHE"

_SOURCES = Path(__file__).with_name("java")
_FOUND: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def jar_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The accelerator's jar for the installed PySpark, compiled on first use.

    Add it to a session when you create it: ``SparkSession.builder.config("spark.jars",
    str(jar_path()))`` (on a cluster, wherever its jars are configured). It is compiled with
    ``javac`` (a JDK 17 or newer) against the jars of the installed PySpark, in a few seconds,
    into ``cache_dir`` (default: ``$PARQUET_BLOOM_CACHE``, else ``~/.cache/parquet-bloom``),
    under a name that changes with the sources and the Spark version, and reused after.
    """
    sources = sorted(_SOURCES.rglob("*.java"))
    spark_jars = _spark_jars()
    key = hashlib.sha256()
    for source in sources:
        key.update(source.relative_to(_SOURCES).as_posix().encode() + b"\0" + source.read_bytes())
    for jar in spark_jars:
        key.update(jar.name.encode() + b"\0")
    root = Path(cache_dir) if cache_dir is not None else _default_cache()
    jar = root / f"spark-{key.hexdigest()[:16]}" / JAR_NAME
    if not jar.is_file():
        _compile(sources, spark_jars, jar)
    return jar


def _default_cache() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "parquet-bloom"


def _spark_jars() -> list[Path]:
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    if not jars:
        raise FileNotFoundError(
            f"no jars under {Path(pyspark.__file__).parent / 'jars'}: the accelerator is "
            "compiled against the jars of a pip-installed PySpark"
        )
    return jars


def _compile(sources: list[Path], spark_jars: list[Path], jar: Path) -> None:
    javac = shutil.which("javac", path=java_path())
    if javac is None:
        raise FileNotFoundError(
            "compiling the parquet-bloom Spark accelerator needs javac (a JDK 17 or newer) on "
            "PATH or under JAVA_HOME; without it parquet_bloom.spark runs without the jar"
        )
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as work:
        classes = Path(work) / "classes"
        done = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-d", str(classes),
             "-cp", os.pathsep.join(str(j) for j in spark_jars), *map(str, sources)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"javac failed on the accelerator's sources:\n{done.stderr}")
        built = Path(work) / JAR_NAME
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as out:
            out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for file in sorted(classes.rglob("*.class")):
                out.write(file, file.relative_to(classes).as_posix())
        os.replace(built, jar)  # whole or absent, whoever else builds it meanwhile


def java_path() -> str:
    """Where javac is looked for: ``$JAVA_HOME/bin``, then ``PATH``."""
    paths = [os.environ.get("PATH", os.defpath)]
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        paths.insert(0, str(Path(java_home) / "bin"))
    return os.pathsep.join(paths)


def accelerator(session: Any, use: bool | None) -> Any | None:
    """The accelerator's Java package in ``session``'s JVM (a py4j view of it), or None.

    ``use``: None uses it when the jar is on the session's classpath; False never does; True
    requires it, and raises saying how to add it when it is missing.
    """
    if use is False:
        return None
    found = _FOUND.get(session)
    if found is None:
        found = _FOUND[session] = _look_up(session)
    if found is False:
        if use:
            raise RuntimeError(
                f"jvm=True, but this session's JVM has no {SLICE_BUILD}: create the session "
                "with .config('spark.jars', str(parquet_bloom.spark.jar_path())) "
                "(classic sessions only, not Spark Connect)"
            )
        return None
    return found


def _look_up(session: Any) -> Any:
    from py4j.java_gateway import JavaClass

    jvm = getattr(session, "_jvm", None)  # None on Spark Connect
    if jvm is None:
        return False
    package = jvm
    for part in JAVA_PACKAGE.split("."):
        package = getattr(package, part)
    classes = (getattr(package, name) for name in ("SliceBuild", "Hashes"))
    return package if all(isinstance(c, JavaClass) for c in classes) else False


def java_hash(accelerator: Any, method: str, values: Column) -> Column:
    """``Hashes.<method>`` of each value (null for null), called in Spark's generated code:
    ``int96`` of a bigint of microseconds, ``floatBits`` of a float, ``doubleBits`` of a
    double (XXH64 of the value's raw bits, as Parquet stores them)."""
    from pyspark.sql.classic.column import Column as ClassicColumn

    return ClassicColumn(accelerator.Hashes.column(method, values._jc))

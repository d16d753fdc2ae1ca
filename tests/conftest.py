"""Fixtures shared by the test modules: one local Spark session for the whole run, and the
choice between the compiled kernels and numpy alone; and the check that nothing is skipped
unexpectedly.

Starting Spark costs seconds and a JVM, so every test marked ``spark`` shares the session made
here. pyspark is a test dependency like duckdb and deltalake (``pip install -e '.[test]'``);
without a usable Java the Spark tests FAIL: ``make test`` installs Java where it can, and a run
that silently skipped Spark would claim more than it checked.

For the same reason a skip fails its test unless its reason is one of ``tests/skips.py``'s
expected skips and that reason is true here (``-m "not spark"`` deselects; it does not skip).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from parquet_bloom import kernels
from tests import skips

# Hypothesis's per-example deadline is a timing: on a loaded CI machine it fails correct code.
settings.register_profile("parquet-bloom", deadline=None)
settings.load_profile("parquet-bloom")

# The object-store servers' fixtures (s3, s3_requests, s3_faults, http_*), for every directory.
pytest_plugins = ["tests.remote.fixtures"]

# Spark 4 runs on Java 17 or newer.
MIN_JAVA_VERSION = 17


def _java_version() -> tuple[str, int | None]:
    """The java command Spark will use and its major version (None when it cannot run)."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if java is None or not os.path.exists(java):
        return "java", None
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return java, None
    # 'openjdk version "17.0.15" 2025-04-15', or "1.8.0_402" for Java 8
    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    if done.returncode != 0 or match is None:
        return java, None
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))
    return java, major


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A ``local[2]`` SparkSession: UTC, 4 shuffle partitions, no UI, a temporary warehouse,
    and parquet_bloom.spark's JVM accelerator where javac can compile it."""
    java, major = _java_version()
    if major is None or major < MIN_JAVA_VERSION:
        found = "no working java" if major is None else f"Java {major} at {java}"
        pytest.fail(
            f"The Spark tests need Java {MIN_JAVA_VERSION} or newer, found {found}. Install a "
            "JRE (e.g. 'apt-get install default-jre-headless') or set JAVA_HOME, then rerun.",
            pytrace=False,
        )
    from pyspark.sql import SparkSession

    # Python workers must be this interpreter, the one that has parquet_bloom installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    builder = SparkSession.builder
    if (
        skips.javac_for_jar()
    ):  # the JVM accelerator, compiled for this run (tests/spark/test_jvm.py)
        from parquet_bloom.spark import jar_path

        builder = builder.config("spark.jars", str(jar_path(tmp_path_factory.mktemp("jar"))))
    session = (
        builder.master("local[2]")
        .appName("parquet-bloom-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={Path(warehouse)}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module", params=["compiled", "numpy"])
def implementation(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a module's tests once with the compiled kernels and once on numpy alone (the way
    msgpack reruns its suite on its pure-Python fallback). Module-scoped, so Hypothesis's
    examples all run under one implementation."""
    built = kernels.compiled
    if request.param == "compiled" and built is None:
        pytest.skip(skips.kernels_off_reason())
    kernels.compiled = built if request.param == "compiled" else None
    try:
        yield str(request.param)
    finally:
        kernels.compiled = built


def _fail_if_skipped_unexpectedly(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    message = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = message.removeprefix("Skipped: ")
    if skips.unexpected(reason):
        report.outcome = "failed"
        report.longrepr = (
            f"skipped unexpectedly: {reason!r}. Only the skips listed in tests/skips.py may "
            "happen, each where its reason is true; a missing test dependency is an error "
            "(pip install -e '.[test]')."
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    _fail_if_skipped_unexpectedly(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    # A module skipped as a whole (pytest.importorskip at module level, say).
    report = yield
    _fail_if_skipped_unexpectedly(report)
    return report

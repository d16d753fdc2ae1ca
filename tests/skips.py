"""The skips a test run may have, each with the condition under which it is expected.

``tests/conftest.py`` fails every test skipped for any other reason, or for one of these where
its condition does not hold: a quiet "s" for a test dependency that is missing, or for compiled
kernels that should have been built, would claim more than the run checked. A test that skips
uses one of the reasons here, word for word.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shlex
import shutil
import socket
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from parquet_bloom import kernels

KERNELS_TURNED_OFF = f"the compiled kernels are turned off by {kernels.PURE_PYTHON_VARIABLE}"
KERNELS_NOT_BUILT = "the compiled kernels are not built"
KERNELS_BIG_ENDIAN = "the compiled kernels are off on a big-endian machine"
NO_C_COMPILER = "no C compiler here: the package runs on numpy alone"
# tests/hudi: real Hudi tables in the checkout's sibling ../shared/fixtures/hudi (never copied
# into the repository), and the Hadoop oracle compiled with the local JDK.
HUDI_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "hudi"
SHARED_ABSENT = "../shared/fixtures/hudi is absent: the real Hudi tables live there"
NO_JAVAC = "no javac here: the Hadoop oracle is compiled with the local JDK"
NO_JAVAC_FOR_JAR = "no javac here: the Spark accelerator's jar is compiled with the local JDK"
# tests/clickhouse/test_older.py: older chDB releases, each installed from PyPI on first use.
PYPI_OUT_OF_REACH = "PyPI is out of reach: the older chDB environments are installed from it"


def javac_for_jar() -> bool:
    """Whether parquet_bloom.spark.jar_path can compile the jar here (javac on its path)."""
    from parquet_bloom.spark import _jvm

    return shutil.which("javac", path=_jvm.java_path()) is not None


@functools.cache
def pypi_out_of_reach() -> bool:
    """Whether PyPI (its index and its files' host) cannot be connected to from here."""
    for host in ("pypi.org", "files.pythonhosted.org"):
        try:
            socket.create_connection((host, 443), timeout=10).close()
        except OSError:
            return True
    return False


def c_compiler() -> str | None:
    """The C compiler setup.py would build the kernels with, if there is one."""
    command = sysconfig.get_config_var("CC") or "cc"
    return shutil.which(shlex.split(command)[0])


def kernels_built() -> bool:
    return importlib.util.find_spec("parquet_bloom._kernels") is not None


def kernels_turned_off() -> bool:
    """Whether the environment turns the kernels off (read as kernels.py reads it)."""
    return os.environ.get(kernels.PURE_PYTHON_VARIABLE, "") not in ("", "0")


def kernels_off_reason() -> str:
    """Why ``kernels.compiled`` is None here: the reason to skip a test of the kernels with."""
    if kernels_turned_off():
        return KERNELS_TURNED_OFF
    if not kernels_built():
        return KERNELS_NOT_BUILT
    if sys.byteorder != "little":
        return KERNELS_BIG_ENDIAN
    # Built, not turned off, little-endian, yet not loaded: their import failed. That is a
    # broken build, and no reason listed below, so the test that skips with it fails.
    return "the compiled kernels are built but do not import"


@dataclass(frozen=True)
class ExpectedSkip:
    reason: str
    expected: Callable[[], bool]  # whether the reason is true here


EXPECTED_SKIPS = (
    ExpectedSkip(KERNELS_TURNED_OFF, kernels_turned_off),
    ExpectedSkip(KERNELS_NOT_BUILT, lambda: not kernels_built()),
    ExpectedSkip(KERNELS_BIG_ENDIAN, lambda: sys.byteorder != "little"),
    ExpectedSkip(NO_C_COMPILER, lambda: c_compiler() is None),
    # tests/io/test_sink.py: the kernel's copies, where the platform has them.
    ExpectedSkip("no O_DIRECT on this platform", lambda: not hasattr(os, "O_DIRECT")),
    ExpectedSkip("no copy_file_range on this platform", lambda: not hasattr(os, "copy_file_range")),
    ExpectedSkip(SHARED_ABSENT, lambda: not HUDI_FIXTURES.is_dir()),
    ExpectedSkip(NO_JAVAC, lambda: shutil.which("javac") is None),
    ExpectedSkip(NO_JAVAC_FOR_JAR, lambda: not javac_for_jar()),
    ExpectedSkip(PYPI_OUT_OF_REACH, pypi_out_of_reach),
)


def unexpected(reason: str) -> bool:
    """Whether a test skipped for ``reason`` should fail the run instead."""
    return not any(s.reason == reason and s.expected() for s in EXPECTED_SKIPS)

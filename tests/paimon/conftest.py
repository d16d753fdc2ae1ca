"""The oracle of the Paimon tests: Java Paimon itself.

The PyPI sdist of ``pypaimon==0.2.0`` carries ``deps/jars/paimon-python-java-bridge-0.9.0.jar``,
Paimon 0.9's core (paimon-common, paimon-core, the format writers, zero-allocation-hashing).
It is fetched with pip once (kept in pytest's cache directory, never in the repository; its
SHA-256 is pinned), and PaimonOracle.java is compiled against it with the local JDK into each
session's temporary directory. With pyspark's Hadoop client jars (Paimon's Parquet and ORC
writers need Hadoop's Configuration) it writes real tables.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
import struct
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from parquet_bloom.paimon import parse_type
from tests import skips

SDIST = "pypaimon-0.2.0.tar.gz"
SDIST_SHA256 = "43ac684779841da17528b5f241ede6149bcdab4d16f3cd80f713262f6ed04720"
JAR = "paimon-python-java-bridge-0.9.0.jar"
JAR_MEMBER = f"pypaimon-0.2.0/deps/jars/{JAR}"
_NS = {"D": 86_400 * 10**9, "s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def paimon_jar(cache: Path) -> Path:
    """The Paimon 0.9 jar, from the pypaimon 0.2.0 sdist (downloaded with pip once)."""
    jar = cache / JAR
    if jar.is_file():
        return jar
    sdist = cache / SDIST
    if not sdist.is_file():
        done = subprocess.run(
            [
                *(sys.executable, "-m", "pip", "download", "--no-deps"),
                *("--no-binary", ":all:", "--dest", str(cache), "pypaimon==0.2.0"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0 or not sdist.is_file():
            pytest.fail(
                "The Paimon tests need Java Paimon, from the PyPI sdist of pypaimon==0.2.0, and "
                f"pip could not download it:\n{done.stderr[-2000:]}",
                pytrace=False,
            )
    assert _sha256(sdist) == SDIST_SHA256, f"{sdist} is not the pypaimon 0.2.0 sdist"
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(JAR_MEMBER)
        assert member is not None
        partial = jar.with_suffix(".part")
        with partial.open("wb") as out:
            shutil.copyfileobj(member, out)
        partial.replace(jar)
    return jar


def hadoop_jars() -> list[Path]:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found = sorted(jars.glob("hadoop-client-api-*.jar")) + sorted(
        jars.glob("hadoop-client-runtime-*.jar")
    )
    assert found, "pyspark ships hadoop-client-api: it is a test dependency"
    return found


# -- values as the oracle reads them ----------------------------------------------------------


def timestamp_nanos(value: Any) -> int:
    """Epoch nanoseconds of a datetime or numpy datetime64."""
    if isinstance(value, np.datetime64):
        unit, step = np.datetime_data(value.dtype)
        return int(value.astype(np.int64)) * step * _NS[unit]
    assert isinstance(value, dt.datetime)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc if value.tzinfo else None)
    return ((value - epoch) // dt.timedelta(microseconds=1)) * 1000


def token(value: Any, data_type: str) -> str:
    """One value as PaimonOracle.java's value() reads it."""
    if value is None:
        return "N"
    kind = parse_type(data_type).kind
    if kind == "string":
        return str(value).encode("utf-16-be", "surrogatepass").hex()
    if kind == "binary":
        return bytes(value).hex()
    if kind == "float":
        return f"{int(np.float32(value).view(np.uint32)):08x}"
    if kind == "double":
        return struct.pack(">d", float(value)).hex()
    if kind == "timestamp":
        millis, nanos = divmod(timestamp_nanos(value), 10**6)
        return f"{millis},{nanos}"
    if kind == "date" and isinstance(value, dt.date):
        return str((value - dt.date(1970, 1, 1)).days)
    if kind == "time" and isinstance(value, dt.time):
        micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 10**6
        return str((micros + value.microsecond) // 1000)
    return str(int(value))


@dataclass
class Case:
    """One BloomFilterFileIndex written and probed by Java Paimon."""

    data_type: str
    items: int
    fpp: float
    values: Sequence[Any]
    probes: Sequence[Any]
    written: bytes = b""  # filled by the oracle
    answers: list[bool] = field(default_factory=list)


@dataclass
class PaimonOracle:
    """Runs PaimonOracle.java (Paimon 0.9)."""

    classpath: str
    workdir: Path
    runs: int = 0

    def run(self, args: Sequence[str], script: str) -> list[list[str]]:
        self.runs += 1
        done = subprocess.run(
            ["java", "-cp", self.classpath, "PaimonOracle", *args],
            input=script,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        return [line.split("\t") for line in done.stdout.splitlines() if "\t" in line]

    def bloom(self, cases: Sequence[Case]) -> None:
        """Java's bytes and answers for each case, filled in."""
        lines = []
        for c in cases:
            lines.append(f"CASE\t{c.data_type}\t{c.items}\t{c.fpp!r}")
            lines += [f"W\t{token(v, c.data_type)}" for v in c.values]
            lines += [f"P\t{token(v, c.data_type)}" for v in c.probes]
            lines.append("END")
        out = iter(self.run(["bloom"], "\n".join(lines) + "\n"))
        for c in cases:
            kind, written = next(out)
            assert kind == "BYTES"
            kind, answers = next(out)
            assert kind == "PROBE"
            c.written = bytes.fromhex(written)
            c.answers = [a == "1" for a in answers]

    def sizes(self, pairs: Sequence[tuple[int, float]]) -> list[tuple[int, int] | str]:
        """``BloomFilter64(items, fpp)``'s bits and hash count for each pair, or the name of
        the exception Java raised."""
        out = self.run(["bloom"], "".join(f"SIZE\t{n}\t{p!r}\n" for n, p in pairs))
        return [(int(bits), int(k)) if bits != "-1" else k for _, bits, k in out]

    def containers(
        self,
        specs: Sequence[tuple[Sequence[tuple[str, str]], dict[str, str], Iterable[Sequence[Any]]]],
    ) -> list[tuple[str, bytes]]:
        """``DataFileIndexWriter``'s container for each (columns, options, rows): whether it
        was embedded (``EMBEDDED``) or written to a file (``FILE``), and its bytes."""
        lines = []
        for columns, options, rows in specs:
            lines += [f"COLUMN\t{name}\t{typ}" for name, typ in columns]
            lines += [f"OPTION\t{k}\t{v}" for k, v in options.items()]
            for row in rows:
                cells = [token(v, typ) for v, (_, typ) in zip(row, columns, strict=True)]
                lines.append("ROW\t" + "\t".join(cells))
            lines.append("END")
        target = self.workdir / f"containers-{self.runs}"
        target.mkdir()
        out = self.run(["writer", str(target)], "\n".join(lines) + "\n")
        return [(kind, bytes.fromhex(data)) for kind, data in out]


@pytest.fixture(scope="session")
def paimon_java(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> PaimonOracle:
    """PaimonOracle.java compiled for this session against the Paimon 0.9 jar."""
    if shutil.which("javac") is None:
        pytest.skip(skips.NO_JAVAC)
    jar = paimon_jar(Path(request.config.cache.mkdir("paimon-java")))
    workdir = tmp_path_factory.mktemp("paimon-oracle")
    done = subprocess.run(
        [
            "javac",
            "-d",
            str(workdir),
            "-cp",
            str(jar),
            str(Path(__file__).with_name("PaimonOracle.java")),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    classpath = ":".join(str(p) for p in [workdir, jar, *hadoop_jars()])
    return PaimonOracle(classpath, workdir)

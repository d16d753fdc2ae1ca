"""The oracles of the Hudi tests: real Hudi tables (../shared/fixtures/hudi, unzipped into a
temporary directory) and Hadoop's own Bloom filters (HadoopOracle.java, compiled with the local
JDK against pyspark's hadoop-client-api jar)."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import skips

FIXTURES = skips.HUDI_FIXTURES
TABLES = (
    "sample_table__cow__v6_nonpartitioned",
    "sample_table__cow__v8_simplekeygen_nonhivestyle",
    "sample_table__cow__v9_txns_simple_meta",
)


@pytest.fixture(scope="session")
def hudi_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each fixture table's root (the directory holding ``.hoodie``), unzipped per session."""
    if not skips.HUDI_FIXTURES.is_dir():
        pytest.skip(skips.SHARED_ABSENT)
    roots = {}
    for name in TABLES:
        target = tmp_path_factory.mktemp(name)
        with zipfile.ZipFile(FIXTURES / f"{name}.zip") as archive:
            archive.extractall(target)
        found = [p for p in target.rglob(".hoodie") if "__MACOSX" not in p.parts]
        roots[name] = min(found, key=lambda p: len(p.parts)).parent  # not the metadata table's
    return roots


def base_files_on_disk(root: Path) -> list[Path]:
    """Every base file of a table, latest or not (the metadata table's files left out)."""
    return sorted(
        p
        for p in root.rglob("*.parquet")
        if ".hoodie" not in p.parts and not p.name.startswith(".")
    )


def _keys(keys: Sequence[bytes]) -> bytes:
    return struct.pack(">i", len(keys)) + b"".join(struct.pack(">i", len(k)) + k for k in keys)


@dataclass
class HadoopOracle:
    """Runs HadoopOracle.java: Hadoop's BloomFilter, DynamicBloomFilter and HashFunction."""

    classpath: str
    workdir: Path
    runs: int = 0
    answers: dict[tuple[str, bytes], bytes] = field(default_factory=dict)

    def _run(self, mode: str, request: bytes) -> bytes:
        """Hadoop's answer to a request; the same request (from the tests' two runs, compiled
        kernels and numpy) is answered from memory."""
        if (mode, request) not in self.answers:
            self.answers[mode, request] = self._java(mode, request)
        return self.answers[mode, request]

    def _java(self, mode: str, request: bytes) -> bytes:
        self.runs += 1
        src = self.workdir / f"request-{self.runs}"
        dst = self.workdir / f"response-{self.runs}"
        src.write_bytes(request)
        done = subprocess.run(
            ["java", "-cp", self.classpath, "HadoopOracle", mode, str(src), str(dst)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return dst.read_bytes()

    def positions(self, keys: Sequence[bytes], vector_size: int, num_hashes: int) -> list[int]:
        out = self._run("positions", struct.pack(">ii", vector_size, num_hashes) + _keys(keys))
        return list(struct.unpack(f">{len(out) // 4}i", out))

    def _filter(
        self, mode: str, head: bytes, keys: Sequence[bytes], probes: Sequence[bytes]
    ) -> tuple[bytes, list[bool]]:
        out = self._run(mode, head + _keys(keys) + _keys(probes))
        (length,) = struct.unpack_from(">i", out)
        written = out[4 : 4 + length]
        return written, [b == 1 for b in out[4 + length :]]

    def simple(
        self, keys: Sequence[bytes], probes: Sequence[bytes], vector_size: int, num_hashes: int
    ) -> tuple[bytes, list[bool]]:
        head = struct.pack(">ii", vector_size, num_hashes)
        return self._filter("simple", head, keys, probes)

    def dynamic(
        self,
        keys: Sequence[bytes],
        probes: Sequence[bytes],
        vector_size: int,
        num_hashes: int,
        nr: int,
    ) -> tuple[bytes, list[bool]]:
        head = struct.pack(">iii", vector_size, num_hashes, nr)
        return self._filter("dynamic", head, keys, probes)

    def sizing(self, pairs: Sequence[tuple[int, float]]) -> list[tuple[int, int]]:
        request = struct.pack(">i", len(pairs)) + b"".join(
            struct.pack(">id", n, p) for n, p in pairs
        )
        out = self._run("sizing", request)
        values = struct.unpack(f">{len(out) // 4}i", out)
        return list(zip(values[::2], values[1::2], strict=True))

    def utf8(self, strings: Sequence[str]) -> list[bytes]:
        """Java's ``getBytes(UTF_8)`` of each string, given as its UTF-16 code units."""
        parts = [struct.pack(">i", len(strings))]
        for s in strings:
            units = s.encode("utf-16-be", "surrogatepass")
            parts.append(struct.pack(">i", len(units) // 2) + units)
        out, at, found = self._run("utf8", b"".join(parts)), 0, []
        while at < len(out):
            (n,) = struct.unpack_from(">i", out, at)
            found.append(out[at + 4 : at + 4 + n])
            at += 4 + n
        return found


def hadoop_jars() -> list[Path]:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return sorted(jars.glob("hadoop-client-api-*.jar")) + sorted(
        jars.glob("hadoop-client-runtime-*.jar")
    )


@pytest.fixture(scope="session")
def hadoop(tmp_path_factory: pytest.TempPathFactory) -> HadoopOracle:
    """HadoopOracle.java compiled for this session."""
    if shutil.which("javac") is None:
        pytest.skip(skips.NO_JAVAC)
    jars = hadoop_jars()
    assert jars, "pyspark ships hadoop-client-api: it is a test dependency"
    workdir = tmp_path_factory.mktemp("hadoop-oracle")
    classpath = ":".join(str(j) for j in jars)
    done = subprocess.run(
        [
            "javac",
            "-d",
            str(workdir),
            "-cp",
            classpath,
            str(Path(__file__).with_name("HadoopOracle.java")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return HadoopOracle(f"{workdir}:{classpath}", workdir)

"""ByteSource: exact, counted, positioned reads from every kind of file; the one footer read."""

from __future__ import annotations

import io
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from parquet_bloom._io import source as source_module
from parquet_bloom._io.ranges import ByteRange
from parquet_bloom._io.source import FOOTER_READ_SIZE, ByteSource, SourceFile, read_footer
from parquet_bloom.errors import CorruptFileError

DATA = bytes(range(256)) * 1024  # 256 KiB, every offset's byte known


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "data.bin"
    p.write_bytes(DATA)
    return p


def _sources(path: Path) -> list[tuple[str, Any]]:
    memory = fsspec.filesystem("memory")
    memory.pipe(f"/source-test/{path.name}", DATA)
    return [
        ("path", ByteSource(path)),
        ("str", ByteSource(str(path))),
        ("file object", ByteSource(io.BytesIO(DATA))),
        ("fsspec", ByteSource(f"/source-test/{path.name}", filesystem=memory)),
        ("pyarrow.fs", ByteSource(str(path), filesystem=pafs.LocalFileSystem())),
    ]


def test_every_backend_reads_the_same_bytes_and_counts_them(path: Path) -> None:
    ranges = [ByteRange(0, 4), ByteRange(1000, 3000), ByteRange(len(DATA) - 10, 10)]
    for kind, source in _sources(path):
        with source:
            assert source.size == len(DATA), kind
            assert source.read(ranges) == [DATA[r.offset : r.end] for r in ranges], kind
            assert source.read_exact(77, 5) == DATA[77:82], kind
            assert (source.reads, source.bytes_read) == (4, 3019), kind
            assert source.read([]) == [], kind


def test_a_read_past_the_end_is_a_located_short_read(path: Path) -> None:
    for kind, source in _sources(path):
        with source, pytest.raises(CorruptFileError, match="short read: expected 20 bytes") as e:
            source.read_exact(len(DATA) - 10, 20)
        assert e.value.offset == len(DATA) - 10, kind
        assert e.value.source is not None, kind


class YieldingFile(io.BytesIO):
    """A file object that lets other threads run between a seek and the read after it."""

    def read(self, size: int | None = -1) -> bytes:
        time.sleep(0.0001)
        return super().read(size)


def test_threads_read_one_source_at_once(path: Path) -> None:
    offsets = np.random.default_rng(0).integers(0, len(DATA) - 4096, 400).tolist()
    sources = [*_sources(path), ("yielding file object", ByteSource(YieldingFile(DATA)))]
    for kind, source in sources:
        with source, ThreadPoolExecutor(4) as pool:
            got = list(pool.map(source.read_exact, offsets, [4096] * len(offsets)))
            assert got == [DATA[at : at + 4096] for at in offsets], kind
            assert source.reads == len(offsets), kind


def test_what_is_not_a_source_is_refused(path: Path) -> None:
    with pytest.raises(TypeError, match="source must be a path"):
        ByteSource(42)
    with pytest.raises(TypeError, match="with a filesystem, source must be a path string"):
        ByteSource(path, filesystem=fsspec.filesystem("memory"))


def test_a_source_file_gives_pyarrow_positioned_counted_reads(tmp_path: Path) -> None:
    table = pa.table({"x": np.arange(10_000), "s": [f"v{i}" for i in range(10_000)]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, row_group_size=2_000)
    source = ByteSource(io.BytesIO(buffer.getvalue()))
    first, second = SourceFile(source), SourceFile(source)
    assert first.seek(-4, io.SEEK_END) == source.size - 4 and first.read() == b"PAR1"
    assert second.tell() == 0 and second.read(4) == b"PAR1"  # each has its own position
    assert pq.ParquetFile(SourceFile(source)).read().equals(table)
    assert source.reads > 3
    with pytest.raises(ValueError, match="negative seek position"):
        first.seek(-1)
    # A local file goes to pyarrow by its path, for pyarrow's own reads.
    path = tmp_path / "t.parquet"
    path.write_bytes(buffer.getvalue())
    assert ByteSource(path).arrow_file() == str(path)


@pytest.mark.parametrize("metadata_bytes", [100, FOOTER_READ_SIZE])
def test_the_footer_costs_one_tail_read_or_two_for_a_long_one(
    tmp_path: Path, metadata_bytes: int
) -> None:
    path = tmp_path / "f.parquet"
    pq.write_table(
        pa.table({"x": [1, 2, 3]}).replace_schema_metadata({"pad": "p" * metadata_bytes}), path
    )
    data = path.read_bytes()
    with ByteSource(path) as source:
        footer = read_footer(source)
        length = int.from_bytes(data[-8:-4], "little")
        assert (footer.data, footer.start) == (data[-8 - length : -8], len(data) - 8 - length)
        # The tail read is kept: the bytes of the file's end, from tail_start on.
        assert footer.tail == data[footer.tail_start :]
        assert source.reads == (1 if length + 8 <= FOOTER_READ_SIZE else 2)
        assert source.bytes_read == (
            min(len(data), FOOTER_READ_SIZE) if source.reads == 1 else length + 8
        )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"PAR1", "too short"),
        (b"PAR1" + b"\x00" * 8, "trailing magic"),
        (b"PAR1" + (10**6).to_bytes(4, "little") + b"PAR1", "does not fit"),
    ],
)
def test_a_broken_trailer_is_corrupt(data: bytes, message: str) -> None:
    with pytest.raises(CorruptFileError, match=message):
        read_footer(ByteSource(io.BytesIO(data)))


def test_without_positioned_reads_a_local_file_is_read_through_a_locked_file_object(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on Windows, where os has no pread: the same bytes, counted, from several threads.
    monkeypatch.setattr(source_module, "pread", None)
    offsets = np.random.default_rng(1).integers(0, len(DATA) - 4096, 200).tolist()
    with ByteSource(path) as source, ThreadPoolExecutor(4) as pool:
        got = list(pool.map(source.read_exact, offsets, [4096] * len(offsets)))
        assert got == [DATA[at : at + 4096] for at in offsets]
        assert source.reads == len(offsets) and source.local_path == str(path)
    with pytest.raises(IsADirectoryError):
        ByteSource(path.parent)

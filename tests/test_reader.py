"""The reader: how many reads it makes, what it accepts, and how it fails."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import _reader as rd
from parquet_bloom._io.source import FOOTER_READ_SIZE
from tests.writers import drop_bloom_filter_lengths, rewrite_footer


@pytest.fixture(scope="module")
def small_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three row groups, three filtered columns (pyarrow puts all filters together)."""
    path = tmp_path_factory.mktemp("small") / "small.parquet"
    n = 3000
    table = pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64) * 7),
            "name": pa.array([f"name-{i}" for i in range(n)]),
            "code": pa.array(np.arange(n, dtype=np.int32) % 97),
            "plain": pa.array(np.arange(n, dtype=np.int64)),
        }
    )
    options = {c: {"ndv": 1000, "fpp": 0.01} for c in ("id", "name", "code")}
    pq.write_table(table, path, row_group_size=1000, bloom_filter_options=options)
    return path


@pytest.fixture(scope="module")
def big_filter_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One filter of 1 MiB: bigger than the guess read."""
    path = tmp_path_factory.mktemp("big") / "big.parquet"
    table = pa.table({"id": pa.array(np.arange(50_000, dtype=np.int64))})
    pq.write_table(table, path, bloom_filter_options={"id": {"ndv": 800_000, "fpp": 0.01}})
    return path


def footer_size(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[-8:-4], "little")


def test_all_filters_of_a_pyarrow_file_take_one_read_after_the_footer(small_file: Path) -> None:
    with pb.BloomFilterReader(small_file) as r:
        assert r.reads == 1  # the footer, in one tail read
        after_footer = r.bytes_read
        filters = r.filters()
        assert sorted(filters) == sorted((g, c) for g in range(3) for c in ("id", "name", "code"))
        assert r.reads == 2
        md = pq.ParquetFile(small_file).metadata
        lengths = [
            md.row_group(g).column(j).bloom_filter_length for g in range(3) for j in range(3)
        ]
        assert r.bytes_read - after_footer == sum(lengths)  # contiguous: no gap bytes read
        # Cached: asking again reads nothing.
        r.filter(1, "name")
        assert r.reads == 2


def test_one_filter_with_a_known_length_is_one_exact_read(small_file: Path) -> None:
    md = pq.ParquetFile(small_file).metadata
    with pb.BloomFilterReader(small_file) as r:
        before = r.bytes_read
        f = r.filter(2, "name")
        assert f is not None
        assert r.reads == 2
        assert r.bytes_read - before == md.row_group(2).column(1).bloom_filter_length
        assert r.filter(0, "plain") is None  # no filter: no read
        assert r.reads == 2


def test_without_lengths_a_small_filter_takes_one_guess_read(
    small_file: Path, tmp_path: Path
) -> None:
    old = rewrite_footer(small_file, tmp_path / "old.parquet", drop_bloom_filter_lengths)
    with pb.BloomFilterReader(old) as r:
        assert all(c.bloom_filter_length is None for c in r.column_chunks)
        before = r.bytes_read
        f = r.filter(0, "id")
        assert r.reads == 2
        offset = r.column_chunk(0, "id").bloom_filter_offset
        assert offset is not None
        assert r.bytes_read - before == min(rd.GUESS_READ_SIZE, r.footer_start - offset)
        with pb.BloomFilterReader(small_file) as fresh:
            assert f == fresh.filter(0, "id")
        # The guess covered the other filters too: reading them all costs nothing more.
        assert len(r.filters()) == 9
        assert r.reads == 2


def test_without_lengths_a_big_filter_takes_a_guess_then_the_uncovered_rest(
    big_filter_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Arrow C++ folds a filter to its fill (64 KiB here), so shrink the guess rather than
    # writing a file with a filter bigger than 256 KiB.
    monkeypatch.setattr(rd, "GUESS_READ_SIZE", 4096)
    old = rewrite_footer(big_filter_file, tmp_path / "old.parquet", drop_bloom_filter_lengths)
    true_length = (
        pq.ParquetFile(big_filter_file).metadata.row_group(0).column(0).bloom_filter_length
    )
    with pb.BloomFilterReader(old) as r:
        before = r.bytes_read
        f = r.filter(0, "id")
        assert f is not None and f.num_bytes > rd.GUESS_READ_SIZE
        assert r.reads == 3  # footer, guess, rest
        assert r.bytes_read - before == true_length  # the rest is exactly what the guess missed
        assert f.find_hashes(pb.hash_values(np.arange(50_000, dtype=np.int64))).all()


def test_a_footer_bigger_than_the_tail_read_takes_a_second_read(tmp_path: Path) -> None:
    path = tmp_path / "wide.parquet"
    table = pa.table({f"column_with_a_long_name_{i:04d}": pa.array([i, i + 1]) for i in range(600)})
    pq.write_table(table, path, row_group_size=1)
    assert footer_size(path) > FOOTER_READ_SIZE
    with pb.BloomFilterReader(path) as r:
        assert r.reads == 2
        assert r.num_row_groups == 2 and len(r.columns) == 600


def test_file_objects_and_fsspec(small_file: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    with pb.BloomFilterReader(small_file) as r:
        expected = r.filters()
    buf = io.BytesIO(small_file.read_bytes())
    with pb.BloomFilterReader(buf) as r:
        assert r.filters() == expected
    assert not buf.closed  # the caller's object stays the caller's
    memory = fsspec.filesystem("memory")
    memory.pipe("/data/small.parquet", small_file.read_bytes())
    with pb.BloomFilterReader("/data/small.parquet", filesystem=memory) as r:
        assert r.filters() == expected
        assert r.reads == 2
    local = fsspec.filesystem("file")
    with pb.BloomFilterReader(str(small_file), filesystem=local) as r:
        assert r.filters() == expected


def test_row_groups_might_contain(small_file: Path) -> None:
    with pb.BloomFilterReader(small_file) as r:
        assert r.row_groups_might_contain("id", [7 * 5]) == [0]
        assert r.row_groups_might_contain("id", [7 * 1500, 7 * 2999]) == [1, 2]
        assert r.row_groups_might_contain("name", "name-2500") == [2]
        assert r.row_groups_might_contain("plain", [5]) == [0, 1, 2]  # no filter: kept
        absent = [7 * i + 3 for i in range(200)]
        assert len(r.row_groups_might_contain("id", absent)) <= 1


def test_misuse_is_a_plain_error(small_file: Path) -> None:
    with pb.BloomFilterReader(small_file) as r:
        with pytest.raises(ValueError, match=r"no column 'nope'.*'id'"):
            r.filter(0, "nope")
        with pytest.raises(IndexError, match="row group 3 out of range"):
            r.filter(3, "id")
        with pytest.raises(TypeError):
            r.filter(0, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="source must be"):
        pb.BloomFilterReader(42)
    with pytest.raises(FileNotFoundError):
        pb.BloomFilterReader(small_file.parent / "missing.parquet")


def test_offsets_outside_the_data_are_corrupt_and_pruning_keeps_the_row_group(
    small_file: Path, tmp_path: Path
) -> None:
    def bad_offset(md: object) -> None:
        md.row_groups[1].columns[0].meta_data.bloom_filter_offset = 10**12  # type: ignore[attr-defined]

    bad = rewrite_footer(small_file, tmp_path / "bad.parquet", bad_offset)
    with pb.BloomFilterReader(bad) as r:
        with pytest.raises(pb.CorruptFileError) as info:
            r.filter(1, "id")
        err = info.value
        assert (err.row_group, err.column, err.offset) == (1, "id", 10**12)
        assert "row group 1" in str(err) and "'id'" in str(err) and str(10**12) in str(err)
        with pytest.warns(pb.BloomFilterWarning, match="row group 1"):
            kept = r.row_groups_might_contain("id", [7 * 5])
        assert kept == [0, 1]


def test_length_that_disagrees_with_the_header_is_corrupt(small_file: Path, tmp_path: Path) -> None:
    def bad_length(md: object) -> None:
        meta = md.row_groups[0].columns[1].meta_data  # type: ignore[attr-defined]
        meta.bloom_filter_length -= 32

    bad = rewrite_footer(small_file, tmp_path / "bad.parquet", bad_length)
    with pb.BloomFilterReader(bad) as r, pytest.raises(pb.CorruptFileError, match="does not match"):
        r.filter(0, "name")


def test_truncating_the_file_anywhere_gives_only_bloom_filter_errors(
    small_file: Path, tmp_path: Path
) -> None:
    data = small_file.read_bytes()
    md = pq.ParquetFile(small_file).metadata
    first_filter = md.row_group(0).column(0).bloom_filter_offset
    # Every cut through the footer and trailer, through the first filter's header, and a sample
    # of cuts through the data.
    footer_start = len(data) - 8 - footer_size(small_file)
    cuts = list(range(footer_start - 40, len(data))) + list(range(first_filter, first_filter + 40))
    cuts += list(range(0, first_filter, 997))
    for cut in cuts:
        try:
            with pb.BloomFilterReader(io.BytesIO(data[:cut])) as r:
                r.filters()
        except pb.BloomFilterError:
            pass


def test_flipping_bytes_of_footer_and_headers_gives_only_bloom_filter_errors(
    small_file: Path,
) -> None:
    data = bytearray(small_file.read_bytes())
    md = pq.ParquetFile(small_file).metadata
    footer_start = len(data) - 8 - footer_size(small_file)
    headers = [md.row_group(g).column(j).bloom_filter_offset for g in range(3) for j in range(3)]
    positions = [p for h in headers for p in range(h, h + 20)]
    positions += list(range(footer_start, len(data), 3))
    for pos in positions:
        for flip in (0x01, 0x80, 0xFF):
            mutated = bytearray(data)
            mutated[pos] ^= flip
            try:
                with pb.BloomFilterReader(io.BytesIO(bytes(mutated))) as r:
                    r.filters()
                    r.row_groups_might_contain("id", [5])
            except pb.BloomFilterError:
                pass
            except pb.BloomFilterWarning:
                pass


def test_encrypted_footer_is_unsupported() -> None:
    data = b"PARE" + b"\0" * 100 + (50).to_bytes(4, "little") + b"PARE"
    with pytest.raises(pb.UnsupportedFileError, match="encrypted"):
        pb.BloomFilterReader(io.BytesIO(data))


def test_not_parquet_is_corrupt() -> None:
    with pytest.raises(pb.CorruptFileError):
        pb.BloomFilterReader(io.BytesIO(b"hello world, not parquet at all"))
    with pytest.raises(pb.CorruptFileError, match="too short"):
        pb.BloomFilterReader(io.BytesIO(b"PAR1"))


class ShortReads(io.BytesIO):
    """A file object that returns too few bytes for a read that starts at or after ``region``
    and covers ``bad_offset``, as a flaky network file system might."""

    def __init__(self, data: bytes, region: int, bad_offset: int) -> None:
        super().__init__(data)
        self.region, self.bad_offset = region, bad_offset

    def read(self, size: int | None = -1) -> bytes:
        start = self.tell()
        data = super().read(size)
        if self.region <= start <= self.bad_offset < start + len(data):
            return data[: self.bad_offset - start]
        return data


def test_one_unreadable_filter_does_not_spoil_the_coalesced_read(small_file: Path) -> None:
    with pb.BloomFilterReader(small_file) as r:
        expected = r.filters()
        first = r.column_chunk(0, "id").bloom_filter_offset
        bad = r.column_chunk(1, "name").bloom_filter_offset
    assert first is not None and bad is not None
    with pb.BloomFilterReader(ShortReads(small_file.read_bytes(), first, bad)) as r:
        filters, failed = r.filters_with_errors()
        assert list(failed) == [(1, "name")]
        err = failed[(1, "name")]
        assert isinstance(err, pb.CorruptFileError) and "short read" in str(err)
        assert (err.row_group, err.column) == (1, "name")
        assert filters == {k: f for k, f in expected.items() if k != (1, "name")}
        with pytest.raises(pb.CorruptFileError, match="short read"):
            r.filters()
        with pytest.warns(pb.BloomFilterWarning, match="row group 1"):
            assert len(r.filters(errors="warn")) == 8
        with pytest.warns(pb.BloomFilterWarning):
            assert r.row_groups_might_contain("name", "name-1500") == [1]

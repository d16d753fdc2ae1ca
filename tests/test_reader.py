"""The reader: how many reads it makes, what it accepts, and how it fails.

Read sizes are pinned as the README states them (a 64 KiB tail read for the footer, a 256 KiB
guess for a filter without ``bloom_filter_length``), observed on real files through a file
object that records every read.
"""

from __future__ import annotations

import io
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
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
def big_filter_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One filter of 1 MiB (parquet-java's default size), four times the guess read: the file
    as written, and a copy whose footer has no bloom_filter_length (as before format 2.10)."""
    d = tmp_path_factory.mktemp("big")
    plain = d / "plain.parquet"
    pq.write_table(pa.table({"id": pa.array(np.arange(50_000, dtype=np.int64))}), plain)
    sized = d / "sized.parquet"
    pb.rewrite_bloom_filters(plain, sized, columns=["id"], num_bytes=1 << 20)
    return sized, rewrite_footer(sized, d / "old.parquet", drop_bloom_filter_lengths)


class RecordedReads(io.BytesIO):
    """A file object that records where each read starts and how many bytes it returns."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.log: list[tuple[int, int]] = []

    def read(self, size: int | None = -1) -> bytes:
        start = self.tell()
        data = super().read(size)
        self.log.append((start, len(data)))
        return data


def footer_size(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[-8:-4], "little")


def just_the_footer(path: Path) -> int:
    """A tail size that reads the footer and nothing before it."""
    return footer_size(path) + 8


def test_all_filters_of_a_pyarrow_file_take_one_read_after_the_footer(small_file: Path) -> None:
    with pb.BloomFilterReader(small_file, tail_size=just_the_footer(small_file)) as r:
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
    with pb.BloomFilterReader(small_file, tail_size=just_the_footer(small_file)) as r:
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
    recorded = RecordedReads(old.read_bytes())
    with pb.BloomFilterReader(recorded, tail_size=just_the_footer(old)) as r:
        assert all(c.bloom_filter_length is None for c in r.column_chunks)
        f = r.filter(0, "id")
        offset = r.column_chunk(0, "id").bloom_filter_offset
        assert offset is not None
        # The guess is clamped to the footer, which lies less than 256 KiB after the filter.
        assert r.footer_start - offset < 256 * 1024
        assert recorded.log[1:] == [(offset, r.footer_start - offset)]
        with pb.BloomFilterReader(small_file) as fresh:
            assert f == fresh.filter(0, "id")
        # The guess covered the other filters too: reading them all costs nothing more.
        assert len(r.filters()) == 9
        assert r.reads == 2 and len(recorded.log) == 2


def test_without_lengths_a_big_filter_takes_a_guess_then_the_uncovered_rest(
    big_filter_file: tuple[Path, Path],
) -> None:
    sized, old = big_filter_file
    true_length = pq.ParquetFile(sized).metadata.row_group(0).column(0).bloom_filter_length
    data = old.read_bytes()
    recorded = RecordedReads(data)
    with pb.BloomFilterReader(recorded) as r:
        chunk = r.column_chunk(0, "id")
        assert chunk.bloom_filter_length is None and chunk.bloom_filter_offset is not None
        offset = chunk.bloom_filter_offset
        f = r.filter(0, "id")
        assert f is not None and f.num_bytes == 1 << 20
        # The README's reads: 64 KiB from the end for the footer, a guess of 256 KiB at the
        # filter, then exactly the bytes of header and bitset that the guess did not cover.
        # The rest stops where the tail read began: its bytes before the footer are held.
        guess, tail_start = 256 * 1024, len(data) - 64 * 1024
        assert recorded.log == [
            (tail_start, 64 * 1024),
            (offset, guess),
            (offset + guess, tail_start - offset - guess),
        ]
        assert offset + true_length > tail_start  # the filter ends inside the tail
        assert (r.reads, r.bytes_read) == (3, len(data) - offset)
        assert f.find_hashes(pb.hash_values(np.arange(50_000, dtype=np.int64))).all()
    with pb.BloomFilterReader(sized) as r:
        assert r.filter(0, "id") == f  # bit for bit the filter read with its length known
    with pb.BloomFilterReader(old) as r:  # a path reads the same
        assert r.filter(0, "id") == f
        assert (r.reads, r.bytes_read) == (3, len(data) - offset)


def test_a_footer_bigger_than_the_tail_read_takes_a_second_read(tmp_path: Path) -> None:
    path = tmp_path / "wide.parquet"
    table = pa.table({f"column_with_a_long_name_{i:04d}": pa.array([i, i + 1]) for i in range(600)})
    pq.write_table(table, path, row_group_size=1)
    data = path.read_bytes()
    footer_start = len(data) - 8 - footer_size(path)
    assert len(data) - footer_start > 64 * 1024
    recorded = RecordedReads(data)
    with pb.BloomFilterReader(recorded) as r:
        # The 64 KiB tail, then the footer's first bytes, which it missed.
        assert recorded.log == [
            (len(data) - 64 * 1024, 64 * 1024),
            (footer_start, len(data) - 64 * 1024 - footer_start),
        ]
        assert r.reads == 2 and r.bytes_read == len(data) - footer_start
        assert r.num_row_groups == 2 and len(r.columns) == 600


def test_file_objects_and_fsspec(small_file: Path) -> None:
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
        assert r.reads == 1  # on a filesystem the tail read (1 MiB) held the filters too
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


def outside_the_data(path: Path) -> list[tuple[int, int | None]]:
    """(offset, length) of filters that do not lie in ``path``'s data region: inside the leading
    magic, inside the footer or the trailer, past the end, or starting in the data but running
    into the footer (by one byte, and by far); each with its length and without one."""
    size = path.stat().st_size
    footer_start = size - 8 - footer_size(path)
    md = pq.ParquetFile(path).metadata
    last = md.row_group(2).column(2)  # the last filter: it ends where the footer starts
    assert last.bloom_filter_offset + last.bloom_filter_length == footer_start
    offsets = [0, 1, 2, 3, footer_start, footer_start + 100, size - 8, size - 4, size - 1]
    return [
        # 144: a real filter's length (the last one's), so only the offset is wrong
        *((offset, length) for offset in [*offsets, size, 10**12] for length in (144, None)),
        (last.bloom_filter_offset, last.bloom_filter_length + 1),
        (last.bloom_filter_offset, last.bloom_filter_length + 1000),
    ]


def test_offsets_outside_the_data_are_refused_before_anything_is_read(
    small_file: Path, tmp_path: Path
) -> None:
    # The README: "Offsets are checked before anything is read". Only the footer's tail read
    # is ever made for the bad filter; the others still read, in one read.
    with pb.BloomFilterReader(small_file) as r:
        expected = r.filters()
    for offset, length in outside_the_data(small_file):

        def move(md: object, offset: int = offset, length: int | None = length) -> None:
            meta = md.row_groups[1].columns[0].meta_data  # type: ignore[attr-defined]
            meta.bloom_filter_offset, meta.bloom_filter_length = offset, length

        bad = rewrite_footer(small_file, tmp_path / "bad.parquet", move)
        tail = just_the_footer(bad)
        with pb.BloomFilterReader(bad, tail_size=tail) as r:
            assert (r.reads, r.bytes_read) == (1, tail)
            with pytest.raises(pb.CorruptFileError) as info:
                r.filter(1, "id")
            err = info.value
            assert (err.row_group, err.column, err.offset) == (1, "id", offset)
            assert err.source == str(bad)
            assert "row group 1" in str(err) and "'id'" in str(err) and str(offset) in str(err)
            assert (r.reads, r.bytes_read) == (1, tail), (offset, length)
            filters, failed = r.filters_with_errors()
            assert list(failed) == [(1, "id")] and failed[(1, "id")].offset == offset
            assert filters == {k: f for k, f in expected.items() if k != (1, "id")}
            assert r.reads == 2


def test_a_filter_outside_the_data_keeps_its_row_group(small_file: Path, tmp_path: Path) -> None:
    def bad_offset(md: object) -> None:
        md.row_groups[1].columns[0].meta_data.bloom_filter_offset = 10**12  # type: ignore[attr-defined]

    bad = rewrite_footer(small_file, tmp_path / "bad.parquet", bad_offset)
    with pb.BloomFilterReader(bad) as r:
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


def test_truncating_the_file_anywhere_is_a_located_error(small_file: Path) -> None:
    # Every cut through the footer and trailer, through the first filter's header, and a sample
    # of cuts through the data: the trailer is gone, so the file is refused when opened, with
    # the offset where its trailing magic should have been.
    data = small_file.read_bytes()
    md = pq.ParquetFile(small_file).metadata
    first_filter = md.row_group(0).column(0).bloom_filter_offset
    footer_start = len(data) - 8 - footer_size(small_file)
    cuts = list(range(footer_start - 40, len(data))) + list(range(first_filter, first_filter + 40))
    cuts += list(range(0, first_filter, 997))
    for cut in cuts:
        with pytest.raises(pb.CorruptFileError) as info:
            pb.BloomFilterReader(io.BytesIO(data[:cut]))
        err = info.value
        assert err.source == "<file object>", cut
        if cut < 12:
            assert "too short" in str(err), cut
        else:
            assert err.offset == cut - 4 and "trailing magic" in str(err), cut


def test_data_cut_short_under_an_intact_footer_loses_only_the_filters_it_held(
    small_file: Path,
) -> None:
    # The data region cut anywhere through the filters, the footer kept: every filter that
    # lies wholly before the cut reads bit for bit, every other one is a CorruptFileError at
    # its own offset; none goes missing, none reads as other bits.
    data = small_file.read_bytes()
    footer_start = len(data) - 8 - footer_size(small_file)
    with pb.BloomFilterReader(small_file) as r:
        expected = r.filters()
        where = {
            k: (r.column_chunk(*k).bloom_filter_offset, r.column_chunk(*k).bloom_filter_length)
            for k in expected
        }
    cuts = {footer_start}
    for offset, length in where.values():
        cuts.update(range(offset - 2, offset + 24))  # through the header
        cuts.update(range(offset + length - 24, offset + length + 2))  # the bitset's end
        cuts.update(range(offset, offset + length, 101))
    seen = {"whole": 0, "lost": 0}
    for cut in sorted(cuts):
        with pb.BloomFilterReader(io.BytesIO(data[:cut] + data[footer_start:])) as r:
            filters, failed = r.filters_with_errors()
        assert set(filters) | set(failed) == set(expected), cut
        for key, (offset, length) in where.items():
            if offset + length <= cut:
                assert filters[key] == expected[key], (cut, key)
                seen["whole"] += 1
            else:
                err = failed[key]
                assert isinstance(err, pb.CorruptFileError), (cut, key)
                assert (err.row_group, err.column, err.offset) == (*key, offset), (cut, key)
                seen["lost"] += 1
    assert seen["whole"] > 1000 and seen["lost"] > 1000


def test_flipping_bytes_of_footer_and_headers_gives_errors_warnings_or_the_same_filters(
    small_file: Path,
) -> None:
    # Each flip of a byte of a filter header, the footer or the trailer: the file is refused
    # when opened; or the filters it hits fail (filters() raises, pruning warns and keeps
    # the row group); or they read bit for bit as before (the byte did not matter to them:
    # statistics, or a column's name). Never other bits.
    data = small_file.read_bytes()
    md = pq.ParquetFile(small_file).metadata
    footer_start = len(data) - 8 - footer_size(small_file)
    with pb.BloomFilterReader(small_file) as r:
        columns = r.columns
        expected = {(g, columns.index(c)): f.to_bytes() for (g, c), f in r.filters().items()}
    positions = [
        p
        for g in range(3)
        for j in range(3)
        for meta in [md.row_group(g).column(j)]
        # the header: what the filter's length holds beyond its bitset (numBytes, a power of two)
        for p in range(
            meta.bloom_filter_offset,
            meta.bloom_filter_offset
            + meta.bloom_filter_length % 2 ** (meta.bloom_filter_length.bit_length() - 1),
        )
    ]
    positions += list(range(footer_start, len(data)))
    seen = {"refused": 0, "failed": 0, "same": 0}
    for pos in positions:
        for flip in (0x01, 0x80, 0xFF):
            mutated = bytearray(data)
            mutated[pos] ^= flip
            try:
                r = pb.BloomFilterReader(io.BytesIO(bytes(mutated)))
            except pb.BloomFilterError as err:
                assert err.source == "<file object>", (pos, flip)
                seen["refused"] += 1
                continue
            with r:
                try:  # a row group's column chunks are checked when first read
                    filters, failed = r.filters_with_errors()
                except pb.BloomFilterError as err:
                    assert err.source == "<file object>", (pos, flip)
                    seen["refused"] += 1
                    continue
                got = {(g, r.columns.index(c)): f.to_bytes() for (g, c), f in filters.items()}
                lost = {(g, r.columns.index(c)) for g, c in failed}
                # A filter the footer no longer names (its offset field became another field)
                # is as if never written: pruning keeps its row group.
                unnamed = {
                    (c.row_group, c.column_index)
                    for c in r.column_chunks
                    if c.bloom_filter_offset is None
                }
                assert lost <= set(expected), (pos, flip)
                assert got == {k: v for k, v in expected.items() if k not in lost | unnamed}, (
                    pos,
                    flip,
                )
                if not failed:
                    seen["same"] += 1
                    continue
                seen["failed"] += 1
                for (g, c), err in failed.items():
                    assert (err.row_group, err.column) == (g, c) and err.offset is not None
                with pytest.raises(pb.BloomFilterError):
                    r.filters()
                g, c = next(iter(failed))
                with pytest.warns(pb.BloomFilterWarning, match=f"row group {g}"):
                    assert g in r.row_groups_might_contain(c, ["absent"] if c == "name" else [-1])
    assert seen["refused"] > 1000 and seen["failed"] > 100 and seen["same"] > 1000, seen


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
    short_reads = ShortReads(small_file.read_bytes(), first, bad)
    with pb.BloomFilterReader(short_reads, tail_size=just_the_footer(small_file)) as r:
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


# -- the tail read and wide footers -------------------------------------------------------------


def test_filters_inside_the_tail_read_cost_no_read(small_file: Path) -> None:
    data = small_file.read_bytes()
    recorded = RecordedReads(data)
    with pb.BloomFilterReader(recorded, tail_size=len(data)) as r:
        assert recorded.log == [(0, len(data))]
        expected = r.filters()
        assert len(expected) == 9
        assert (r.reads, r.requests, r.bytes_read) == (1, 1, len(data))
    # A tail that ends just before the first filter: the filters cost one more read, of
    # exactly their bytes.
    with pb.BloomFilterReader(small_file, tail_size=just_the_footer(small_file)) as r:
        first = min(c.bloom_filter_offset or len(data) for c in r.column_chunks)
    with pb.BloomFilterReader(small_file, tail_size=len(data) - first - 1) as r:
        assert r.filters() == expected
        assert r.reads == 2


def test_a_file_object_and_a_local_file_take_a_64_kib_tail(small_file: Path) -> None:
    data = small_file.read_bytes()
    recorded = RecordedReads(data)
    with pb.BloomFilterReader(recorded):
        assert recorded.log == [(len(data) - 64 * 1024, 64 * 1024)]


@pytest.mark.parametrize(
    ("tail_size", "error"), [(7, ValueError), (0, ValueError), ("1", TypeError)]
)
def test_tail_size_is_checked(small_file: Path, tail_size: object, error: type) -> None:
    with pytest.raises(error, match="tail_size"):
        pb.BloomFilterReader(small_file, tail_size=tail_size)  # type: ignore[arg-type]


def test_a_footer_of_10000_column_chunks_opens_and_reads_one_filter(tmp_path: Path) -> None:
    # 100 columns x 100 row groups; a filter on one column. The reader decodes the row groups
    # it is asked about and reads that filter right.
    path = tmp_path / "wide.parquet"
    n = 100 * 100
    table = pa.table(
        {f"c{i:03d}": pa.array(np.arange(n, dtype=np.int64) * (i + 1)) for i in range(100)}
    )
    pq.write_table(
        table, path, row_group_size=100, bloom_filter_options={"c007": {"ndv": 100, "fpp": 0.01}}
    )
    arrow = pq.ParquetFile(path).metadata
    with pb.BloomFilterReader(path) as r:
        assert r.num_row_groups == 100 and len(r.columns) == 100
        chunk = r.column_chunk(57, "c007")
        assert chunk.bloom_filter_offset == arrow.row_group(57).column(7).bloom_filter_offset
        f = r.filter(57, "c007")
        assert f is not None
        assert f.find_hashes(pb.hash_values(np.arange(5700, 5800, dtype=np.int64) * 8)).all()
        kept = r.row_groups_might_contain("c007", [5750 * 8])
        assert 57 in kept and len(kept) <= 5  # a 1 % filter: a false positive or two
        assert len(r.column_chunks) == 10_000
        assert r.metadata.num_rows == n


def test_filter_blocks_answer_as_the_whole_filters(small_file: Path) -> None:
    # A point lookup's probe: per filter its header and the 32-byte block of each hash,
    # read after the footer's tail read; answers bit for bit those of the whole filters.
    hashes = {"id": [int(h) for h in pb.hash_values(np.array([7, 8, 700], dtype=np.int64))]}
    hashes["name"] = [int(pb.hash_values(["name-5"])[0])]
    with pb.BloomFilterReader(small_file) as whole:
        expected = whole.filters(["id", "name"])
    with pb.BloomFilterReader(small_file, tail_size=just_the_footer(small_file)) as r:
        before = r.bytes_read
        blocks, failed = r.filter_blocks(hashes, range(3))
        assert not failed and sorted(blocks) == sorted(expected)
        for (rg, column), part in blocks.items():
            assert isinstance(part, pb._sbbf.FilterBlocks)
            assert [part.find_hash(h) for h in hashes[column]] == [
                expected[(rg, column)].find_hash(h) for h in hashes[column]
            ]
        # One read after the footer (these small filters lie within a page of each other).
        assert r.reads == 2 and r.bytes_read > before
    with pb.BloomFilterReader(small_file) as r:  # in the 64 KiB tail read: no read at all
        blocks, failed = r.filter_blocks(hashes, [1])
        assert r.reads == 1 and not failed and len(blocks) == 2


def test_filter_blocks_of_a_big_filter_with_and_without_its_length(
    big_filter_file: tuple[Path, Path],
) -> None:
    sized, old = big_filter_file
    hashes = [int(h) for h in pb.hash_values(np.array([5, 49_999, 10**9], dtype=np.int64))]
    with pb.BloomFilterReader(sized) as whole:
        expected = whole.filter(0, "id")
    assert expected is not None
    for path in (sized, old):
        with pb.BloomFilterReader(path) as r:
            blocks, failed = r.filter_blocks({"id": hashes}, [0])
            assert not failed
            part = blocks[(0, "id")]
            found = [part.find_hash(h) for h in hashes]
            assert found == [True, True, expected.find_hash(hashes[2])]
            if path == sized:  # the header and the blocks only, never the 1 MiB bitset
                assert r.bytes_read - 64 * 1024 <= 19 + 3 * 32
            else:  # the guess read tells the header; then only the blocks it missed
                assert r.bytes_read - 64 * 1024 <= 256 * 1024 + 3 * 32


def test_filter_blocks_refuse_a_length_that_disagrees_with_the_header(
    small_file: Path, tmp_path: Path
) -> None:
    def bad_length(md: object) -> None:
        meta = md.row_groups[0].columns[1].meta_data  # type: ignore[attr-defined]
        meta.bloom_filter_length -= 32

    bad = rewrite_footer(small_file, tmp_path / "bad.parquet", bad_length)
    with pb.BloomFilterReader(bad, tail_size=just_the_footer(bad)) as r:
        blocks, failed = r.filter_blocks({"name": [1, 2]}, range(3))
        assert set(blocks) == {(1, "name"), (2, "name")}
        assert "does not match" in str(failed[(0, "name")])
        assert failed[(0, "name")].offset == r.column_chunk(0, "name").bloom_filter_offset


@pytest.mark.parametrize("in_tail", [True, False])
def test_flipping_bytes_filter_blocks_fail_and_answer_as_whole_filters(
    small_file: Path, in_tail: bool
) -> None:
    # Each flip of a byte of a filter header or of the footer: filter_blocks fails the same
    # filters with the same errors as filters_with_errors, and answers as the whole filters
    # for the others, whether the tail read held them or they are read after it.
    data = small_file.read_bytes()
    md = pq.ParquetFile(small_file).metadata
    footer_start = len(data) - 8 - footer_size(small_file)
    positions = [
        p
        for g in range(3)
        for j in range(3)
        for meta in [md.row_group(g).column(j)]
        for p in range(meta.bloom_filter_offset, meta.bloom_filter_offset + 20)
    ]
    positions += list(range(footer_start, len(data), 7))
    probes = [int(h) for h in pb.hash_values(np.array([7, 14, 21_000, -1], dtype=np.int64))]
    hashes = {"id": probes[:3], "name": [probes[3]], "code": probes[1:]}
    tail = len(data) if in_tail else just_the_footer(small_file)
    compared = with_failures = 0
    for pos in positions:
        for flip in (0x01, 0x80):
            mutated = bytearray(data)
            mutated[pos] ^= flip
            try:
                whole = pb.BloomFilterReader(io.BytesIO(bytes(mutated)), tail_size=tail)
                part = pb.BloomFilterReader(io.BytesIO(bytes(mutated)), tail_size=tail)
            except pb.BloomFilterError:
                continue
            with whole, part:
                if not set(hashes) <= set(whole.columns):  # a flip renamed a column
                    continue
                try:
                    filters, failed = whole.filters_with_errors(list(hashes))
                except pb.BloomFilterError as err:
                    with pytest.raises(type(err)):
                        part.filter_blocks(hashes, range(whole.num_row_groups))
                    continue
                blocks, failed_blocks = part.filter_blocks(hashes, range(whole.num_row_groups))
            assert {k: str(e) for k, e in failed_blocks.items()} == {
                k: str(e) for k, e in failed.items()
            }, (pos, flip)
            assert set(blocks) == set(filters), (pos, flip)
            for (g, column), f in filters.items():
                got = [blocks[(g, column)].find_hash(h) for h in hashes[column]]
                assert got == [f.find_hash(h) for h in hashes[column]], (pos, flip)
            compared += 1
            with_failures += bool(failed)
    assert compared > 300 and with_failures > 50, (compared, with_failures)

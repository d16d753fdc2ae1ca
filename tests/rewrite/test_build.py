"""Building the filters: from the pages or through pyarrow, the same bits on numpy alone, the
errors of chunks that cannot be read, and sizing for ndv="exact" without counting every chunk.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import parquet_bloom as pb
from parquet_bloom import _arrow_chunks as arrow_chunks
from parquet_bloom import _format as fmt
from parquet_bloom import kernels
from parquet_bloom._rewrite import build
from parquet_bloom._rewrite.api import rewrite_bloom_filters
from parquet_bloom._sbbf import SplitBlockBloomFilter, optimal_num_bytes
from tests.rewrite.files import (
    check_rewrite,
    filterable,
)
from tests.skips import kernels_off_reason
from tests.writers import rewrite_footer


@pytest.mark.parametrize("source", ["pyarrow-plain", "deltalake-plain", "duckdb"])
def test_every_column_of_the_real_writers_files_is_read_from_its_pages(
    sources: dict[str, Path], source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pyarrow path is the fallback for what the page reader does not read; none of these
    # files needs it, so the checks of test_api test the page reader, not the fallback.
    def no_arrow(*args: object) -> None:
        raise AssertionError("a chunk was read with pyarrow")

    monkeypatch.setattr(arrow_chunks, "chunk_hashes", no_arrow)
    columns = filterable(sources[source])
    report = rewrite_bloom_filters(sources[source], tmp_path / "out.parquet", columns=columns)
    assert (
        len(report.filters_written) == len(columns) * pq.ParquetFile(sources[source]).num_row_groups
    )


@pytest.mark.parametrize("source", ["pyarrow-plain", "deltalake-plain", "duckdb"])
def test_numpy_alone_writes_the_same_file_as_the_compiled_kernels(
    sources: dict[str, Path], source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other tests here run with the compiled kernels where they are built; the rewrite
    # on numpy alone (kernels.compiled is None) must give the same bytes, filters included.
    if kernels.compiled is None:
        pytest.skip(kernels_off_reason())
    src, columns = sources[source], filterable(sources[source])
    rewrite_bloom_filters(src, tmp_path / "compiled.parquet", columns=columns)
    monkeypatch.setattr(kernels, "compiled", None)
    rewrite_bloom_filters(src, tmp_path / "numpy.parquet", columns=columns)
    compiled = (tmp_path / "compiled.parquet").read_bytes()
    assert (tmp_path / "numpy.parquet").read_bytes() == compiled


@pytest.mark.parametrize(("codec", "name"), [(3, "LZO"), (99, "codec 99")])
def test_a_codec_pyarrow_lacks_is_unsupported_not_corrupt(
    sources: dict[str, Path], tmp_path: Path, codec: int, name: str
) -> None:
    # LZO is a Parquet codec that pyarrow has never decompressed (it says so with an OSError,
    # which would read as a corrupt file); a codec number from a newer format is unknown.
    def recompress(md: Any) -> None:
        md.row_groups[1].columns[0].meta_data.codec = codec

    src = rewrite_footer(sources["pyarrow-plain"], tmp_path / "lzo.parquet", recompress)
    dst = tmp_path / "out.parquet"
    with pytest.raises(pb.UnsupportedFileError, match=f"compressed with {name},") as info:
        rewrite_bloom_filters(src, dst, columns=["id"])
    assert (info.value.row_group, info.value.column) == (1, "id")
    assert not dst.exists()


@pytest.mark.parametrize(
    ("write_options", "message", "offset"),
    [
        # Read from the pages: our own error, at the page's offset.
        ({}, "cannot decode a page header", 4),
        # DELTA_BINARY_PACKED goes through pyarrow, which reports an OSError.
        (
            {"use_dictionary": False, "column_encoding": "DELTA_BINARY_PACKED"},
            "pyarrow cannot read",
            None,
        ),
    ],
)
@pytest.mark.parametrize("rows", [10_000, build.INLINE_MAX_VALUES - 1])
@pytest.mark.parametrize("with_filters", [False, True])
def test_an_undecodable_page_is_a_located_corrupt_file_error(
    tmp_path: Path,
    write_options: dict[str, Any],
    message: str,
    offset: int | None,
    rows: int,
    with_filters: bool,
) -> None:
    # A page header that does not decode is a corrupt source, named with its row group and
    # column, and no output appears: a chunk built on the build threads or (fewer values) by
    # the thread writing, its filter asked for when written or first peeked at (an old filter
    # to compare with, skip_unchanged).
    src, dst = tmp_path / "bad.parquet", tmp_path / "out.parquet"
    if with_filters:
        write_options = {**write_options, "bloom_filter_options": {"x": {"ndv": 100}}}
    pq.write_table(pa.table({"x": pa.array(range(rows))}), src, **write_options)
    data = bytearray(src.read_bytes())
    data[len(fmt.MAGIC) : len(fmt.MAGIC) + 64] = b"\xff" * 64  # the first page header
    src.write_bytes(bytes(data))
    with pytest.raises(pb.CorruptFileError, match=message) as info:
        rewrite_bloom_filters(src, dst, columns=["x"], skip_unchanged=with_filters)
    assert (info.value.row_group, info.value.column, info.value.offset) == (0, "x", offset)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.parquet"]


def test_what_pyarrow_does_not_implement_is_unsupported_not_corrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pyarrow raises NotImplemented for what it cannot decode by design (e.g. nested columns
    # too large for one chunk), which no small file makes it do: inject it where the rewrite
    # reads a chunk through pyarrow. The file is fine, so it is unsupported, not corrupt.
    src, dst = tmp_path / "delta.parquet", tmp_path / "out.parquet"
    table = pa.table({"x": pa.array(range(10_000))})
    pq.write_table(table, src, use_dictionary=False, column_encoding="DELTA_BINARY_PACKED")

    def not_implemented(*args: Any, **kwargs: Any) -> Any:
        raise pa.ArrowNotImplementedError("not implemented here")

    monkeypatch.setattr(arrow_chunks.ChunkReader, "batches", not_implemented)
    with pytest.raises(pb.UnsupportedFileError, match="pyarrow cannot read") as info:
        rewrite_bloom_filters(src, dst, columns=["x"])
    assert (info.value.row_group, info.value.column) == (0, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["delta.parquet"]


# -- sizing for ndv="exact" without counting every chunk --------------------------------------


def _last_ndv_at_most(num_bytes: int, size_of: Callable[[int], int]) -> int:
    """The largest NDV that ``size_of`` sizes at ``num_bytes`` or less (sizes are monotone)."""
    low, high = 0, 1 << 40
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if size_of(mid) <= num_bytes else (low, mid - 1)
    return low


# Flavors whose chunks are sized from an estimate of the NDV, and one (parquet-java) counted.
EXACT_SIZING_FLAVORS = [None, "arrow-cpp", "duckdb", "parquet-java", "clickhouse"]


@given(
    flavor=st.sampled_from(EXACT_SIZING_FLAVORS),
    fpp=st.sampled_from([0.01, 0.05, 0.001]),
    boundary=st.sampled_from([32 * 1024, 64 * 1024, 128 * 1024]),
    offset=st.integers(-400, 400) | st.integers(-20_000, 20_000),
    duplicates=st.integers(0, 30_000),
    seed=st.integers(0, 2**32 - 1),
)
def test_chunk_size_near_size_boundaries_is_the_exact_ndv_size(
    flavor: str | None, fpp: float, boundary: int, offset: int, duplicates: int, seed: int
) -> None:
    """For NDVs around the edge between two sizes, where an estimated NDV could pick the other
    size, the filter is the one sized for the exact count of distinct hashes."""
    sizing = build.check_sizing(fpp, "exact", None, flavor)
    ndv = max(_last_ndv_at_most(boundary, sizing.num_bytes_for) + offset, 1)
    rng = np.random.default_rng(seed)
    distinct = np.unique(rng.integers(0, 2**64, size=ndv, dtype=np.uint64))
    hashes = np.concatenate([distinct, rng.choice(distinct, size=duplicates)])
    rng.shuffle(hashes)
    expected = SplitBlockBloomFilter(sizing.num_bytes_for(distinct.size))
    expected.insert_hashes(distinct)
    assert build.chunk_filter(hashes.copy(), sizing) == expected


@pytest.mark.parametrize("ndv", [20_000, 40_000, 150_000])
def test_chunks_away_from_a_size_boundary_are_not_counted(
    ndv: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Away from the edge between two sizes the estimate alone picks the size: no sort."""
    counted: list[int] = []
    count = build.count_distinct

    def counting(hashes: np.ndarray) -> int:
        counted.append(hashes.size)
        return count(hashes)

    monkeypatch.setattr(build, "count_distinct", counting)
    rng = np.random.default_rng(ndv)
    distinct = np.unique(rng.integers(0, 2**64, size=ndv, dtype=np.uint64))
    hashes = np.concatenate([distinct, distinct[: ndv // 3]])
    sizing = build.check_sizing(0.01, "exact", None, None)
    expected = SplitBlockBloomFilter(optimal_num_bytes(distinct.size, 0.01))
    expected.insert_hashes(distinct)
    assert build.chunk_filter(hashes, sizing) == expected
    assert counted == []


def test_the_estimate_margin_bounds_the_estimate_error() -> None:
    """The margin allowed to the estimated NDV is far beyond its observed error (a few
    standard deviations at most), from nearly empty filters to the fullest ones it is used
    for, and the bounds derived from it hold the true NDV."""
    rng = np.random.default_rng(7)
    for ndv, num_values in [(1_000, 900_000), (20_000, 20_000), (60_000, 200_000), (300_000,) * 2]:
        num_bytes = optimal_num_bytes(num_values, build.ESTIMATE_FPP)
        margin = build.estimate_margin(ndv, num_bytes)
        errors = []
        for _ in range(20):
            bloom_filter = SplitBlockBloomFilter(num_bytes)
            bloom_filter.insert_hashes(rng.integers(0, 2**64, size=ndv, dtype=np.uint64))
            estimate = bloom_filter.estimate_ndv()
            errors.append(abs(estimate - ndv))
            low, high = build.ndv_bounds(estimate, num_values, num_bytes)
            assert low <= ndv <= high
            assert high - low < 4 * margin  # not so wide that it says nothing
        assert max(errors) < margin / 4, (ndv, num_values, max(errors), margin)


@pytest.mark.parametrize("flavor", [None, "parquet-java", "duckdb"])
def test_large_chunks_get_filters_sized_for_their_exact_ndv(
    tmp_path: Path, flavor: str | None
) -> None:
    """Chunks big enough that their NDV is estimated from the filter, not counted: unique,
    duplicated, dictionary-encoded and nullable columns, an NDV just past a size boundary."""
    from parquet_bloom._sizing import expected_num_bytes

    rows = 70_000
    rng = np.random.default_rng(3)
    # 27_080 distinct values in each row group: just past the last NDV of a 32 KiB filter at
    # fpp 0.01 (27_076), within the estimate's margin, so counted.
    assert _last_ndv_at_most(32 * 1024, optimal_num_bytes) == 27_076
    near_edge = np.concatenate([rng.permutation(np.arange(rows // 2) % 27_080) for _ in "ab"])
    table = pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "user_id": pa.array(rng.integers(0, 50_000, rows)),
            "near_edge": pa.array(near_edge.astype(np.int64)),
            "name": pa.array([f"name-{i % 30_000}" for i in range(rows)]),
            "score": pa.array(rng.random(rows), mask=rng.random(rows) < 0.1),
        }
    )
    src, dst = tmp_path / "big.parquet", tmp_path / "out.parquet"
    pq.write_table(table, src, row_group_size=35_000, use_dictionary=["name"])
    columns = ["id", "user_id", "near_edge", "name", "score"]
    report = rewrite_bloom_filters(src, dst, columns=columns, flavor=flavor)
    assert len(report.filters_written) == 2 * len(columns)
    check_rewrite(
        src,
        dst,
        report,
        expected_num_bytes=lambda ndv: expected_num_bytes(ndv, 0.01, flavor or "spec"),
    )

"""Pruning datasets: the pruned dataset returns exactly the rows of the original, reads fewer row
groups, and reports what it skipped and read.

Every dataset here is written by a real writer (pyarrow, deltalake's arrow-rs, DuckDB); every
check of a filter compares the rows that ``prune(d, e).dataset.to_table(filter=e)`` returns
with those of ``d.to_table(filter=e)``, by a unique row key.
"""

from __future__ import annotations

import datetime as dt
import decimal
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom._prune import PruneReport, prune
from tests import writers

FILES = 4
ROW_GROUPS_PER_FILE = 4
ROW_GROUP_ROWS = 500
ROWS_PER_FILE = ROW_GROUPS_PER_FILE * ROW_GROUP_ROWS
ROWS = FILES * ROWS_PER_FILE
TOTAL_ROW_GROUPS = FILES * ROW_GROUPS_PER_FILE
NEGATIVE_ZERO_ROW = 777
DAY_ZERO = dt.date(2020, 1, 1)
FILTERED = {"id", "name", "code", "score", "s.a", "day"}
BLOOM_OPTIONS = {c: {"ndv": ROW_GROUP_ROWS, "fpp": 0.01} for c in FILTERED}


def row_id(row: int) -> int:
    return row * 7919 + 13


def make_table(rows: np.ndarray) -> pa.Table:
    """Unique ids and names, a low-cardinality code, floats with NaN and one -0.0, a struct."""
    score = (rows + 1) / 8.0
    score[rows % 101 == 5] = np.nan
    score[rows == NEGATIVE_ZERO_ROW] = -0.0
    names = [None if r % 50 == 7 else f"user-{r:05d}" for r in rows]
    return pa.table(
        {
            "row": pa.array(rows, pa.int64()),
            "id": pa.array(row_id(rows), pa.int64()),
            "name": pa.array(names, pa.string()),
            "code": pa.array(rows % 97, pa.int32()),
            "score": pa.array(score, pa.float64()),
            "flag": pa.array(rows % 3 == 0),
            "s": pa.StructArray.from_arrays(
                [pa.array(rows * 3, pa.int64()), pa.array([f"b{r % 10}" for r in rows])],
                names=["a", "b"],
            ),
            "day": pa.array([DAY_ZERO + dt.timedelta(days=int(r // 10)) for r in rows]),
        }
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """FILES files of ROW_GROUPS_PER_FILE row groups, written by pyarrow (Arrow C++), which
    keeps all filters of a file together."""
    directory = tmp_path_factory.mktemp("multi")
    paths = []
    for f in range(FILES):
        rows = np.arange(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE)
        path = directory / f"part-{f}.parquet"
        pq.write_table(
            make_table(rows),
            path,
            row_group_size=ROW_GROUP_ROWS,
            bloom_filter_options=BLOOM_OPTIONS,
        )
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def dataset(files: list[Path]) -> ds.Dataset:
    return ds.dataset(files[0].parent, format="parquet")


def rows_of(table: pa.Table, key: str = "row") -> list[Any]:
    return sorted(table.column(key).to_pylist())


def check(dataset: ds.Dataset, expression: pc.Expression, key: str = "row") -> PruneReport:
    """Prune, then check that the pruned dataset returns exactly the original's rows."""
    result = prune(dataset, expression)
    expected = rows_of(dataset.to_table(filter=expression), key)
    assert rows_of(result.dataset.to_table(filter=expression), key) == expected, expression
    return result.report


def file_row_group(row: int) -> tuple[int, int]:
    return row // ROWS_PER_FILE, row % ROWS_PER_FILE // ROW_GROUP_ROWS


# -- the same rows, for many filters --------------------------------------------------------

ABSENT_ID = 5  # not 13 modulo 7919
NOWHERE = [
    pc.field("id") == ABSENT_ID,
    pc.field("name") == "nobody",
    pc.field("id").isin([ABSENT_ID, 6, 7]),
    pc.field("code") == 1000,  # beyond every code
    pc.field("s", "a") == 1,  # s.a is a multiple of 3
    pc.field("day") == dt.date(1999, 1, 1),
    (pc.field("id") == ABSENT_ID) | (pc.field("name") == "nobody"),
    (pc.field("id") == ABSENT_ID) & (pc.field("score") > 1.0),
    pc.field("id").isin([]),
]


@pytest.mark.parametrize("expression", NOWHERE, ids=str)
def test_values_absent_everywhere_skip_every_row_group(
    dataset: ds.Dataset, expression: pc.Expression
) -> None:
    report = check(dataset, expression)
    assert report.files == FILES
    assert report.row_groups == TOTAL_ROW_GROUPS
    # fpp 0.01 per filter: at most one false positive among the 16 row groups.
    assert report.row_groups_skipped >= TOTAL_ROW_GROUPS - 1
    assert report.files_skipped >= FILES - 1


SOMEWHERE: list[tuple[pc.Expression, set[int]]] = [
    # (filter, rows it matches; their row groups must be kept and few others)
    (pc.field("id") == row_id(1234), {1234}),
    (pc.field("id") == pa.scalar(row_id(6001), pa.int64()), {6001}),
    (pc.equal(pc.scalar(row_id(42)), pc.field("id")), {42}),
    (pc.field("score") == 10, {79}),  # an int literal against a double column
    (pc.field("id").isin([row_id(10), row_id(7000), ABSENT_ID]), {10, 7000}),
    (pc.field("name") == "user-04321", {4321}),
    (pc.field("name").isin(["user-00001", "user-07999"]), {1, 7999}),
    (pc.field("s", "a") == 3 * 2500, {2500}),
    ((pc.field("s", "a") == 3 * 2501) & (pc.field("s", "b") == "b1"), {2501}),
    (pc.field("day") == DAY_ZERO + dt.timedelta(days=555), set(range(5550, 5560))),
    ((pc.field("id") == row_id(100)) | (pc.field("name") == "user-05000"), {100, 5000}),
    ((pc.field("id") == row_id(100)) & (pc.field("score") > 10.0), {100}),
    ((pc.field("id") == row_id(100)) & (pc.field("name") == "user-00100"), {100}),
    ((pc.field("id") == row_id(100)) & (pc.field("name") == "user-00101"), set()),
    (pc.field("score") == 0.0, {NEGATIVE_ZERO_ROW}),  # only -0.0 is stored: probe both zeros
    (pc.field("score") == (3001 + 1) / 8.0, {3001}),
]


@pytest.mark.parametrize(("expression", "matches"), SOMEWHERE, ids=[str(e) for e, _ in SOMEWHERE])
def test_values_present_keep_their_row_groups_and_few_others(
    dataset: ds.Dataset, expression: pc.Expression, matches: set[int]
) -> None:
    assert set(rows_of(dataset.to_table(filter=expression))) == matches
    report = check(dataset, expression)
    needed = {file_row_group(r) for r in matches}
    assert report.row_groups - report.row_groups_skipped >= len(needed)
    assert report.row_groups - report.row_groups_skipped <= len(needed) + 1


KEEP_ALL = [
    pc.field("score") == float("nan"),  # NaN never excludes
    pc.field("score").isin([float("nan")]),  # is_in matches NaN to NaN
    pc.field("name") == None,  # noqa: E711  # a null literal never excludes
    pc.field("name").isin(["user-00001", None]),  # null matches null rows in is_in
    pc.field("flag") == True,  # noqa: E712  # no filter on the boolean column
    pc.field("score") > 100.0,
    ~(pc.field("id") == row_id(3)),
    (pc.field("id") == row_id(3)) | (pc.field("score") > 900.0),
    pc.field("s", "b") == "b3",  # no filter on s.b
    pc.field("code") == 5,  # present in every row group
]


@pytest.mark.parametrize("expression", KEEP_ALL, ids=str)
def test_filters_that_cannot_exclude_keep_every_row_group(
    dataset: ds.Dataset, expression: pc.Expression
) -> None:
    report = check(dataset, expression)
    assert report.row_groups_skipped == 0
    assert report.row_groups == TOTAL_ROW_GROUPS or report.reads == 0


def test_a_filter_without_equalities_reads_nothing(dataset: ds.Dataset) -> None:
    result = prune(dataset, (pc.field("score") > 3.0) & ~pc.field("flag"))
    assert result.dataset is dataset
    assert result.report == PruneReport(files=FILES)


# -- reads and report ----------------------------------------------------------------------


def test_all_filters_of_a_file_are_read_in_one_read(dataset: ds.Dataset) -> None:
    expression = (
        (pc.field("id") == ABSENT_ID)
        | (pc.field("name") == "nobody")
        | (pc.field("s", "a") == 1)
        | (pc.field("day") == dt.date(1999, 1, 1))
    )
    report = check(dataset, expression)
    # One read per file: the tail read that took the footer held the filters (pyarrow puts
    # them just before it), so no read is for filters alone.
    assert (report.reads, report.filter_reads) == (FILES, 0)
    assert report.row_groups_skipped >= TOTAL_ROW_GROUPS - 1


def test_a_tail_read_that_misses_the_filters_costs_one_more_read_a_file(
    dataset: ds.Dataset, files: list[Path]
) -> None:
    # A tail of 8 bytes: the trailer, then the footer, then all of a file's filters in one.
    expression = pc.field("id") == ABSENT_ID
    report = prune(dataset, expression, tail_size=8).report
    assert (report.requests, report.reads, report.filter_reads) == (3 * FILES, 3 * FILES, FILES)
    assert [c.path for c in report.per_file] == [str(p) for p in sorted(files)]
    assert [c.requests for c in report.per_file] == [3] * FILES
    assert sum(c.bytes_read for c in report.per_file) == report.bytes_read
    assert "12 requests (12 reads, 4 for filters alone)" in str(report)


def test_report_sizes_add_up_to_the_row_groups_compressed_bytes(
    dataset: ds.Dataset, files: list[Path]
) -> None:
    sizes = []
    for path in files:
        md = pq.ParquetFile(path).metadata
        for g in range(md.num_row_groups):
            group = md.row_group(g)
            sizes.append(
                sum(group.column(c).total_compressed_size for c in range(group.num_columns))
            )
    report = prune(dataset, pc.field("id") == row_id(2100)).report
    assert report.compressed_bytes == sum(sizes)
    kept = 1 * ROW_GROUPS_PER_FILE + 0  # file 1 holds row 2100, in its row group 0
    assert report.compressed_bytes - report.compressed_bytes_skipped == sizes[kept]
    assert report.files_skipped == FILES - 1
    assert "skipped 3 of 4 files, 15 of 16 row groups" in str(report)


def test_the_pruned_dataset_reads_only_the_kept_row_groups(dataset: ds.Dataset) -> None:
    result = prune(dataset, pc.field("name").isin(["user-00600", "user-06100"]))
    kept = {
        (Path(f.path).name, rg.id) for f in result.dataset.get_fragments() for rg in f.row_groups
    }
    assert kept == {("part-0.parquet", 1), ("part-3.parquet", 0)}
    # Without a filter, the pruned dataset is just those row groups. (Not count_rows():
    # pyarrow counts whole files for row-group subsets when it has no filter.)
    assert result.dataset.to_table().num_rows == 2 * ROW_GROUP_ROWS
    assert result.dataset.count_rows(filter=pc.field("code") >= 0) == 2 * ROW_GROUP_ROWS
    assert result.dataset.schema == dataset.schema


def test_fragments_that_are_already_row_group_subsets_stay_within_them(
    dataset: ds.Dataset,
) -> None:
    subsets = [f.subset(row_group_ids=[1, 3]) for f in dataset.get_fragments()]
    narrowed = ds.FileSystemDataset(subsets, dataset.schema, dataset.format, dataset.filesystem)
    # Row 2 lies in row group 0, outside the subsets; row 4700 in row group 1 of file 2.
    expression = pc.field("id").isin([row_id(2), row_id(4700)])
    report = check(narrowed, expression)
    assert report.row_groups == FILES * 2
    pruned = prune(narrowed, expression).dataset
    kept = {(Path(f.path).name, rg.id) for f in pruned.get_fragments() for rg in f.row_groups}
    assert ("part-2.parquet", 1) in kept
    assert all(rg in (1, 3) for _, rg in kept)
    assert len(kept) <= 2  # the one that matches, and at most one false positive


def test_a_filtered_dataset_is_refused_with_a_way_out(dataset: ds.Dataset) -> None:
    filtered = dataset.filter(pc.field("code") >= 0)
    with pytest.raises(ValueError, match=r"prune the dataset first"):
        prune(filtered, pc.field("name") == "user-03333")
    result = prune(dataset, pc.field("name") == "user-03333")
    assert rows_of(result.dataset.filter(pc.field("name") == "user-03333").to_table()) == [3333]


def test_a_union_of_datasets_is_pruned_child_by_child(files: list[Path]) -> None:
    union = ds.dataset([ds.dataset(files[:2]), ds.dataset(files[2:])])
    expression = pc.field("id").isin([row_id(1), row_id(7999)])
    report = check(union, expression)
    assert report.files == FILES
    assert report.row_groups_skipped >= TOTAL_ROW_GROUPS - 3
    assert isinstance(prune(union, expression).dataset, ds.UnionDataset)


# -- where the files come from ---------------------------------------------------------------


def test_paths_and_lists_of_paths_are_read_as_parquet(files: list[Path]) -> None:
    expression = pc.field("id") == row_id(4444)
    for source in (files[0].parent, str(files[0].parent), files, [str(p) for p in files]):
        result = prune(source, expression)
        assert result.report.files == FILES
        assert result.report.row_groups_skipped >= TOTAL_ROW_GROUPS - 2
        assert rows_of(result.dataset.to_table(filter=expression)) == [4444]


def test_an_fsspec_filesystem_reads_filters_through_fsspec(files: list[Path]) -> None:
    import fsspec

    memory = fsspec.filesystem("memory")
    paths = []
    for path in files:
        paths.append(f"/prune-test/{path.name}")
        memory.pipe(paths[-1], path.read_bytes())
    try:
        expression = pc.field("name") == "user-00123"
        result = prune(paths, expression, filesystem=memory)
        assert isinstance(result.dataset.filesystem, pafs.PyFileSystem)
        # One read per file through fsspec: its tail held footer and filters.
        assert (result.report.reads, result.report.filter_reads) == (FILES, 0)
        assert result.report.row_groups_skipped >= TOTAL_ROW_GROUPS - 2
        assert rows_of(result.dataset.to_table(filter=expression)) == [123]
    finally:
        memory.rm("/prune-test", recursive=True)


def test_another_pyarrow_filesystem_reads_filters_through_open_input_file(
    files: list[Path],
) -> None:
    subtree = pafs.SubTreeFileSystem(str(files[0].parent), pafs.LocalFileSystem())
    dataset = ds.dataset([p.name for p in files], format="parquet", filesystem=subtree)
    expression = pc.field("id") == row_id(5555)
    report = check(dataset, expression)
    assert (report.reads, report.filter_reads) == (FILES, 0)  # through read_at: tails
    assert report.row_groups_skipped >= TOTAL_ROW_GROUPS - 2


def test_hive_partition_keys_keep_row_groups_and_pyarrow_prunes_partitions(
    tmp_path: Path,
) -> None:
    for region, offset in (("eu", 0), ("us", ROWS_PER_FILE)):
        (tmp_path / f"region={region}").mkdir()
        pq.write_table(
            make_table(np.arange(offset, offset + ROWS_PER_FILE)),
            tmp_path / f"region={region}" / "part-0.parquet",
            row_group_size=ROW_GROUP_ROWS,
            bloom_filter_options=BLOOM_OPTIONS,
        )
    dataset = ds.dataset(tmp_path, format="parquet", partitioning="hive")
    eu = pc.field("region") == "eu"
    report = check(dataset, eu & (pc.field("id") == row_id(1500)))
    assert report.row_groups - report.row_groups_skipped == 1
    # The partition key is not in the files: on its own it keeps everything, unread.
    report = check(dataset, eu)
    assert (report.row_groups_skipped, report.reads) == (0, 0)
    # Nor can it rule anything out in an OR: the scan prunes the partitions.
    assert (
        check(dataset, eu | (pc.field("id") == row_id(ROWS_PER_FILE + 1))).row_groups_skipped == 0
    )
    pruned = prune(dataset, pc.field("id") == row_id(ROWS_PER_FILE + 1)).dataset
    [fragment] = pruned.get_fragments()
    assert fragment.partition_expression.equals(pc.field("region") == "us")
    assert pruned.to_table(filter=pc.field("id") == row_id(ROWS_PER_FILE + 1))[
        "region"
    ].to_pylist() == ["us"]


def test_an_int32_file_in_an_int64_dataset_still_prunes(tmp_path: Path) -> None:
    path = tmp_path / "narrow.parquet"
    pq.write_table(
        pa.table({"k": pa.array(np.arange(4000) * 3, pa.int32())}),
        path,
        row_group_size=1000,
        bloom_filter_options={"k": {"ndv": 1000, "fpp": 0.01}},
    )
    widened = ds.dataset(path, schema=pa.schema([("k", pa.int64())]))
    assert check(widened, pc.field("k") == 3 * 2500, key="k").row_groups_skipped >= 2
    # Read as doubles the values pass through a cast: no pruning on that column.
    as_double = ds.dataset(path, schema=pa.schema([("k", pa.float64())]))
    assert check(as_double, pc.field("k") == 3 * 2500.0, key="k").row_groups_skipped == 0


def test_literals_match_what_the_scan_compares_them_as(tmp_path: Path) -> None:
    """Arrow's is_in casts its value set to the column's type, rounding a double to float32
    or to the column's decimal scale and truncating a timestamp to its date; == compares
    decimals and floats as doubles through a cast that is not correctly rounded (0.3 becomes
    0.30000000000000004). Each filter below matches a row whose stored value differs from the
    literal: the pruned dataset must keep it, and where the match can be named, skip the
    other row groups."""
    path = tmp_path / "cast.parquet"
    table = pa.table(
        {
            "row": pa.array(range(4)),
            "f32": pa.array([1.5, 379072.5, 2.0, 3.0], pa.float32()),
            "day": pa.array([1, 2, 3, 4], pa.date32()),
            "tenths": pa.array([decimal.Decimal(v) for v in ["0.3", "0.4", "0.5", "0.6"]]),
            "real": pa.array([0.30000000000000004, 0.4, 0.5, 0.6]),
            "wide": pa.array(
                # The double 0.1 to 34 places (as Arrow casts it), then 0.1 itself.
                [
                    decimal.Decimal(v)
                    for v in ("0.1000000000000000055511151231257827", "0.1", "2", "3")
                ],
                pa.decimal128(38, 34),
            ),
        }
    )
    options = {c: {"ndv": 4} for c in table.column_names}
    pq.write_table(table, path, row_group_size=1, bloom_filter_options=options)
    dataset = ds.dataset(path)
    noon_of_day_2 = pa.array([2 * 86_400_000 + 43_200_000], pa.timestamp("ms"))
    named = [
        pc.field("f32").isin([1.5000000001]),
        pc.field("f32").isin([379072.500000001, 99.0]),
        pc.field("day").isin(noon_of_day_2),
        pc.field("tenths").isin([0.3000001]),
        pc.field("tenths") == 0.30000000000000004,  # not == 0.3, which matches no row
        pc.field("real") == decimal.Decimal("0.3"),
        pc.field("wide").isin([0.1]),
    ]
    for expression in named:
        assert dataset.to_table(filter=expression).num_rows == 1, expression
        assert check(dataset, expression).row_groups_skipped == 3, expression
    # Past 15 digits, too many decimals may cast to one double to name them: keep all.
    assert dataset.to_table(filter=pc.field("wide") == 0.1).num_rows == 1
    assert check(dataset, pc.field("wide") == 0.1).row_groups_skipped == 0
    # Arrow's == stays exact for a float32 column: a double it cannot hold matches nothing.
    assert check(dataset, pc.field("f32") == 1.5000000001).row_groups_skipped == 4


# -- unreadable filters ----------------------------------------------------------------------


def test_a_footer_whose_column_metadata_aborts_pyarrow_is_pruned(tmp_path: Path) -> None:
    """pyarrow aborts the process (an uncaught C++ exception) building the column metadata of
    a chunk whose size statistics have the wrong histogram length, while its scan raises a
    plain OSError. Pruning must not be what kills the process: it sizes row groups from its
    own footer. Run in a child process, so that a regression fails this test alone."""
    path = tmp_path / "t.parquet"
    table = pa.table({"a": pa.array(range(3000))})
    pq.write_table(table, path, row_group_size=1000, bloom_filter_options={"a": {"ndv": 1000}})

    def wrong_histogram(md: Any) -> None:
        md.row_groups[1].columns[0].meta_data.size_statistics.definition_level_histogram = [1, 2, 3]

    bad = writers.rewrite_footer(path, tmp_path / "bad.parquet", wrong_histogram)
    script = (
        "import sys, parquet_bloom as pb, pyarrow.dataset as ds, pyarrow.compute as pc\n"
        "r = pb.prune(ds.dataset(sys.argv[1]), pc.field('a') == 5).report\n"
        "print(r.row_groups, r.row_groups_skipped)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(bad)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.split() == ["3", "2"]


def test_a_corrupt_filter_keeps_its_row_group_and_warns(files: list[Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken.parquet"

    def point_outside(md: Any) -> None:
        for chunk in md.row_groups[2].columns:
            if chunk.meta_data.path_in_schema == ["id"]:
                chunk.meta_data.bloom_filter_offset = 10**12

    writers.rewrite_footer(files[0], broken, point_outside)
    dataset = ds.dataset([broken, *files[1:]], format="parquet")
    expression = pc.field("id") == ABSENT_ID
    with pytest.warns(pb.BloomFilterWarning, match=r"broken\.parquet.*row group 2"):
        report = check(dataset, expression)
    assert report.filters_unreadable == 1
    assert report.unreadable_files == (str(broken),)
    with pytest.warns(pb.BloomFilterWarning):
        kept = prune(dataset, expression).dataset
    assert [(Path(f.path).name, [rg.id for rg in f.row_groups]) for f in kept.get_fragments()] == [
        ("broken.parquet", [2])
    ]


# -- caller mistakes -----------------------------------------------------------------------------


def test_bad_arguments_are_refused_clearly(dataset: ds.Dataset) -> None:
    expression = pc.field("id") == 1
    with pytest.raises(TypeError, match=r"pyarrow\.compute\.Expression"):
        prune(dataset, "id == 1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Dataset, a path"):
        prune(42, expression)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Parquet FileSystemDataset"):
        prune(ds.dataset(pa.table({"id": [1]})), expression)
    with pytest.raises(ValueError, match="max_workers"):
        prune(dataset, expression, max_workers=0)
    with pytest.raises(ValueError, match="filesystem= is for paths"):
        prune(dataset, expression, filesystem=pafs.LocalFileSystem())


# -- other writers ---------------------------------------------------------------------------------


# Columns of writers.sample_table whose values hardly repeat.
UNIQUE_VALUES = {
    "int32", "int64", "uint32", "uint64", "float32", "float64", "decimal_9", "decimal_18",
    "decimal_30", "time_ms", "time_us", "ts_ms", "ts_us_utc", "ts_ns", "string", "large_string",
    "binary", "fixed",
}  # fmt: skip


def value_expressions(table: pa.Table, name: str, row: int) -> list[pc.Expression]:
    """``==`` the column's value at ``row`` (or the next non-null one) and ``isin`` that value
    and the next; a struct column stands for its first child."""
    path: tuple[str, ...] = (name,)
    values = table.column(name)
    if pa.types.is_struct(values.type):
        path, values = (name, values.type.field(0).name), pc.struct_field(values, [0])
    values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    while not values[row].is_valid:
        row += 1
    return [pc.field(*path) == values[row], pc.field(*path).isin(values.slice(row, 2).drop_null())]


def check_typed(
    dataset: ds.Dataset,
    table: pa.Table,
    column: str,
    row: int,
    key: str = "row",
    unique: Collection[str] = UNIQUE_VALUES,
) -> None:
    """The same rows for ``==`` and ``isin`` on ``column``; where values are (nearly) unique,
    only the matching row groups are kept, and at most one false positive."""
    for expression in value_expressions(table, column, row):
        report = check(dataset, expression, key)
        if column in unique:
            matched = dataset.to_table(filter=expression).num_rows
            assert 1 <= report.row_groups - report.row_groups_skipped <= matched + 1, expression


SAMPLE_COLUMNS = [
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
    "float64", "decimal_9", "decimal_18", "decimal_30", "date", "time_ms", "time_us", "ts_ms",
    "ts_us_utc", "ts_ns", "string", "large_string", "binary", "fixed", "dict_string", "struct",
]  # fmt: skip
DELTA_COLUMNS = [
    "int8", "int16", "int32", "int64", "float32", "float64", "decimal_9", "decimal_18",
    "decimal_30", "date", "ts_us_utc", "string", "binary", "struct",
]  # fmt: skip


@pytest.fixture(scope="module")
def sample() -> pa.Table:
    table = writers.sample_table()
    return table.append_column("row", pa.array(np.arange(table.num_rows), pa.int64()))


@pytest.fixture(scope="module")
def pyarrow_sample(tmp_path_factory: pytest.TempPathFactory, sample: pa.Table) -> ds.Dataset:
    directory = tmp_path_factory.mktemp("pyarrow-sample")
    half = sample.num_rows // 2
    for part in range(2):
        writers.write_pyarrow(directory / f"p{part}.parquet", sample.slice(part * half, half))
    return ds.dataset(directory, format="parquet")


@pytest.fixture(scope="module")
def deltalake_sample(tmp_path_factory: pytest.TempPathFactory, sample: pa.Table) -> ds.Dataset:
    directory = tmp_path_factory.mktemp("deltalake-sample")
    paths = writers.write_deltalake(directory, sample.select([*DELTA_COLUMNS, "row"]))
    return ds.dataset([str(p) for p in paths], format="parquet")


@pytest.mark.parametrize("column", SAMPLE_COLUMNS)
def test_pyarrow_files_of_every_type_return_the_same_rows(
    pyarrow_sample: ds.Dataset, sample: pa.Table, column: str
) -> None:
    check_typed(pyarrow_sample, sample, column, 4321)


@pytest.mark.parametrize("column", DELTA_COLUMNS)
def test_deltalake_files_return_the_same_rows(
    deltalake_sample: ds.Dataset, sample: pa.Table, column: str
) -> None:
    check_typed(deltalake_sample, sample, column, 1234)


def test_deltalake_files_skip_values_absent_everywhere(deltalake_sample: ds.Dataset) -> None:
    report = check(deltalake_sample, pc.field("string").isin(["nobody", "nothing"]))
    assert report.row_groups >= 3
    assert report.row_groups_skipped >= report.row_groups - 1


def test_duckdb_files_return_the_same_rows(tmp_path: Path) -> None:
    path = writers.write_duckdb(tmp_path / "duck.parquet")
    dataset = ds.dataset(path, format="parquet")
    table = dataset.to_table()
    for column in table.column_names:
        check_typed(dataset, table, column, 4321, key="int64", unique=())
    # DuckDB writes filters only for dictionary-encoded chunks (here int16, float32, date).
    report = check(dataset, pc.field("int16") == 1000, key="int64")
    assert report.row_groups_skipped == report.row_groups >= 3
    report = check(dataset, pc.field("date") == dt.date(2024, 1, 2), key="int64")
    assert report.row_groups_skipped == 0  # every row group holds every date

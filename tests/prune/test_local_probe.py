"""The compiled point lookup of local files (parquet_bloom._prune.local_probe, _kernels_probe.c)
against the Python path it stands in for: the same row groups left, the same report (reads,
bytes, sizes) on every file it answers for, and the Python path for every file it does not
(another writer's footer, odd or hostile bytes)."""

from __future__ import annotations

import random
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import kernels
from parquet_bloom._format._compact import varint
from parquet_bloom._prune import local_probe
from parquet_bloom._prune.expression import translate
from parquet_bloom._prune.probes import SCALAR_PROBE_MAX_HASHES, Probing
from tests import writers
from tests.skips import kernels_off_reason

pytestmark = pytest.mark.skipif(not local_probe.available(), reason=kernels_off_reason())


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """What the kernel answered, file by file (one file's call or many files' in one), during
    the test."""
    calls: list[Any] = []
    probe, probe_many = local_probe.probe, local_probe.probe_many

    def one(*args: Any) -> Any:
        got = probe(*args)
        calls.append(got)
        return got

    def many(*args: Any) -> Any:
        got = probe_many(*args)
        calls.extend(got)
        return got

    monkeypatch.setattr(local_probe, "probe", one)
    monkeypatch.setattr(local_probe, "probe_many", many)
    yield calls


def one_by_one(dataset: Any, expression: pc.Expression, **options: Any) -> Any:
    """``prune`` a file at a time, so that the first file makes the plan for all others."""
    return pb.prune(dataset, expression, max_workers=1, **options)


def outcome(result: Any) -> tuple[list[tuple[str, Any]], pb.PruneReport]:
    """The fragments left (path, row groups asked) and the report."""
    left = [(f.path, f.__reduce__()[1][3]) for f in result.dataset.get_fragments()]
    return left, result.report


def python_path(monkeypatch: pytest.MonkeyPatch, call: Any) -> Any:
    """``call()`` with the kernels off: the Python path for every file."""
    with monkeypatch.context() as m:
        m.setattr(kernels, "compiled", None)
        assert not local_probe.available()
        return call()


def assert_same(monkeypatch: pytest.MonkeyPatch, call: Any) -> tuple[Any, Any]:
    compiled = outcome(call())
    python = outcome(python_path(monkeypatch, call))
    assert compiled == python
    return compiled


def served(calls: list[Any]) -> int:
    return sum(isinstance(c, local_probe.Probed) for c in calls)


@pytest.fixture(scope="module")
def typed_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four files of the sample table (three row groups each, a filter on every column)."""
    directory = tmp_path_factory.mktemp("typed")
    for seed in range(4):
        writers.write_pyarrow(directory / f"part-{seed}.parquet", writers.sample_table(seed=seed))
    return directory


def _value(directory: Path, column: str, row: int) -> Any:
    return pq.read_table(directory / "part-2.parquet", columns=[column.split(".")[0]])[
        column.split(".")[0]
    ][row].as_py()


EXPRESSIONS = {
    "int64 present": lambda d: pc.field("int64") == _value(d, "int64", 2500),
    "int64 absent": lambda _: pc.field("int64") == 12345,
    "string isin": lambda d: pc.field("string").isin(
        [_value(d, "string", 10), "absent", _value(d, "string", 4100)]
    ),
    "struct leaf": lambda d: pc.field("struct", "a") == 7,
    "dictionary": lambda _: pc.field("dict_string") == "k5",
    "timestamp": lambda d: pc.field("ts_ms") == _value(d, "ts_ms", 3),
    "decimal": lambda d: pc.field("decimal_18") == _value(d, "decimal_18", 5000),
    "uint8 cast": lambda _: pc.field("uint8") == 150,
    "and": lambda d: (
        (pc.field("int64") == _value(d, "int64", 2500))
        & (pc.field("int32") == _value(d, "int32", 2500))
    ),
    "or": lambda d: (
        (pc.field("int64") == 99)
        | (pc.field("binary") == b"nothing")
        | (pc.field("fixed") == _value(d, "fixed", 10))
    ),
    "unknown and member": lambda _: (pc.field("int64") > 5) & (pc.field("string") == "x"),
}


@pytest.mark.parametrize("name", EXPRESSIONS)
def test_typed_columns_prune_as_the_python_path_does(
    typed_files: Path, name: str, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    expression = EXPRESSIONS[name](typed_files)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no filter unreadable on either path
        assert_same(monkeypatch, lambda: one_by_one(ds.dataset(typed_files), expression))
    # The first file of the schema is the Python path's (it makes the plan); the kernel
    # answers for the others, the same way.
    assert served(answered) == 3


def test_files_pruned_two_at_a_time_as_one_by_one(
    typed_files: Path, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """By default local files go two at a time (the kernel holds no GIL), after the first,
    whose Python path makes the plan."""
    expression = pc.field("string").isin(["absent", _value(typed_files, "string", 10)])
    threaded = outcome(pb.prune(ds.dataset(typed_files), expression))
    assert threaded == outcome(
        python_path(monkeypatch, lambda: one_by_one(ds.dataset(typed_files), expression))
    )
    assert served(answered) == 3


def test_a_probe_finds_what_the_filters_hold(typed_files: Path) -> None:
    """The kernel's answers, hash by hash, are the filters' own."""
    path = typed_files / "part-1.parquet"
    values = pq.read_table(path, columns=["int64"])["int64"]
    wanted = [*[v for v in values.to_pylist()[::997] if v is not None][:6], 1, 2, 3]
    hashes = [pb.hash_value(v, "INT64") for v in wanted]
    with pb.BloomFilterReader(path) as reader:
        key = reader.schema_key
        assert key is not None
        probes = {1: ("int64", np.array(hashes, dtype=np.uint64), hashes)}
        plan = local_probe.make_plan(key, reader.schema_leaves, probes, SCALAR_PROBE_MAX_HASHES)
        assert plan is not None
        got = local_probe.probe(path, None, 64 * 1024, plan)
        assert isinstance(got, local_probe.Probed)
        assert got.num_row_groups == reader.num_row_groups
        for rg in range(reader.num_row_groups):
            bloom = reader.filter(rg, "int64")
            assert bloom is not None
            answers = got.found[rg * len(hashes) : (rg + 1) * len(hashes)]
            assert list(answers) == [int(bloom.find_hash(h)) for h in hashes]
            chunks = reader.row_group(rg)
            assert got.sizes[rg] == sum(c.total_compressed_size for c in chunks)


@pytest.fixture(scope="module")
def ids(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six files of 3,000 ids in row groups of 500, a filter on ``id`` and ``s``."""
    directory = tmp_path_factory.mktemp("ids")
    for i in range(6):
        write_ids(directory / f"f{i}.parquet", i)
    return directory


def write_ids(path: Path, i: int, **extra: Any) -> None:
    n = np.arange(i * 3000, (i + 1) * 3000)
    table = pa.table({"id": n, "s": [f"v{v}" for v in n], **extra})
    options = {"id": {"ndv": 500}, "s": {"ndv": 500}}
    pq.write_table(table, path, row_group_size=500, bloom_filter_options=options)


def test_a_footer_longer_than_the_tail_costs_the_second_read_on_both_paths(
    ids: Path, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    expression = pc.field("id") == 4321
    left, report = assert_same(
        monkeypatch, lambda: one_by_one(ds.dataset(ids), expression, tail_size=64)
    )
    assert served(answered) == 5
    assert report.reads == report.filter_reads + 2 * 6  # two footer reads a file
    assert any(path.endswith("f1.parquet") and 2 in groups for path, groups in left)


def test_filters_in_the_tail_cost_no_read_on_both_paths(
    ids: Path, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # These files are small: their filters lie in the 64 KiB tail read with the footer.
    _, report = assert_same(monkeypatch, lambda: one_by_one(ds.dataset(ids), pc.field("s") == "v7"))
    assert served(answered) == 5
    assert report.filter_reads == 0 and report.reads == 6


def test_filters_outside_the_tail_are_read_as_the_python_path_reads_them(
    ids: Path, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    expression = pc.field("id").isin([5, 9000, 17999]) | (pc.field("s") == "v12000")
    _, report = assert_same(
        monkeypatch, lambda: one_by_one(ds.dataset(ids), expression, tail_size=4096)
    )
    assert served(answered) == 5
    assert report.filter_reads > 0


GROUPS = [[0], [2, 2, 1], [5, 0], [3], [1, 4], [0]]  # each file's row groups asked


@pytest.mark.parametrize("tail_size", [None, 4096])
def test_row_group_subsets_and_repeats_stay_within_the_fragment(
    ids: Path, tail_size: int | None, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the row groups a fragment asks for are probed, their filters alone read (with a
    short tail, the filters lie outside it: the reads are counted as on the Python path)."""

    def subsets() -> ds.Dataset:
        plain = ds.dataset(ids)
        fmt = plain.format
        fragments = [
            fmt.make_fragment(str(p), plain.filesystem, row_groups=groups)
            for p, groups in zip(
                sorted(ids.glob("*.parquet")),
                [[0], [2, 2, 1], [5, 0], [3], [1, 4], [0]],
                strict=True,
            )
        ]
        return ds.FileSystemDataset(fragments, plain.schema, fmt, plain.filesystem)

    expression = pc.field("id").isin([3000 + 1200, 3000 + 2700, 6000 + 10])
    left, report = assert_same(
        monkeypatch, lambda: one_by_one(subsets(), expression, tail_size=tail_size)
    )
    assert served(answered) == 5
    assert report.row_groups == 9 and (report.filter_reads > 0) == (tail_size is not None)
    assert (str(ids / "f1.parquet"), [2]) in left


def test_hive_partitions_and_partition_keys(
    tmp_path: Path, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for region in ("eu", "us"):
        (tmp_path / f"region={region}").mkdir()
        for i in range(3):
            write_ids(tmp_path / f"region={region}" / f"f{i}.parquet", i)

    def pruned(expression: pc.Expression) -> Any:
        return one_by_one(ds.dataset(tmp_path, partitioning="hive"), expression)

    assert_same(monkeypatch, lambda: pruned((pc.field("region") == "eu") & (pc.field("id") == 42)))
    assert served(answered) == 5
    answered.clear()
    _, report = assert_same(monkeypatch, lambda: pruned(pc.field("region") == "eu"))
    assert answered == [] and report.reads == 0  # partition keys only: nothing read


def test_files_of_two_schemas_each_use_their_plan(
    tmp_path: Path, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(6):
        extra = {"x": pa.array(np.zeros(3000))} if i % 2 else {}
        write_ids(tmp_path / f"f{i}.parquet", i, **extra)
    expression = pc.field("id").isin([10, 9000, 15500])
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("x", pa.float64())])
    assert_same(monkeypatch, lambda: one_by_one(ds.dataset(tmp_path, schema=schema), expression))
    # Each schema's first file is the Python path's; a file of the other schema is told so
    # (its schema key) and probed again with its own plan.
    assert served(answered) == 4
    assert sum(isinstance(c, bytes) for c in answered) >= 1


def test_many_hashes_on_a_column_read_whole_filters_on_the_python_path(
    ids: Path, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    values = list(range(0, 18000, 500))  # 36 hashes: more than a scalar probe takes
    assert len(values) > SCALAR_PROBE_MAX_HASHES
    assert_same(monkeypatch, lambda: one_by_one(ds.dataset(ids), pc.field("id").isin(values)))
    assert answered == []  # no plan: every file the Python path's


def test_delta_tables_prune_as_the_python_path_does(
    tmp_path: Path, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltalake import BloomFilterProperties, ColumnProperties, WriterProperties, write_deltalake

    from parquet_bloom import delta

    table = writers.sample_table(rows=4000).select(["int64", "string", "int32"])
    filters = ColumnProperties(bloom_filter_properties=BloomFilterProperties(True, 0.01, 500))
    properties = WriterProperties(max_row_group_size=500, default_column_properties=filters)
    for start in range(0, 4000, 1000):
        write_deltalake(
            str(tmp_path), table.slice(start, 1000), mode="append", writer_properties=properties
        )

    value = table["int64"][2500].as_py()
    expression = pc.field("int64") == value
    compiled = delta.prune(str(tmp_path), expression, max_workers=1)
    python = python_path(monkeypatch, lambda: delta.prune(str(tmp_path), expression))
    assert compiled.report == python.report
    assert compiled.to_table().equals(python.to_table())
    assert served(answered) == 3


def test_writers_and_footers_the_kernel_does_not_take_are_the_python_paths(
    ids: Path, tmp_path: Path, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(ids, tmp_path, dirs_exist_ok=True)
    # Filters without bloom_filter_length (before format 2.10), a DuckDB file (another schema).
    writers.rewrite_footer(
        ids / "f3.parquet", tmp_path / "f3.parquet", writers.drop_bloom_filter_lengths
    )
    writers.write_duckdb(tmp_path / "f9.parquet")
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    expression = (pc.field("id") == 9100) | (pc.field("s") == "v1")
    assert_same(monkeypatch, lambda: one_by_one(ds.dataset(tmp_path, schema=schema), expression))
    assert None in answered  # f3: not the kernel's
    assert served(answered) == 4  # f1, f2, f4, f5 (f0 made the plan)


def test_missing_and_truncated_files_keep_their_row_groups_as_on_the_python_path(
    ids: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(ids, tmp_path, dirs_exist_ok=True)
    dataset = ds.dataset(tmp_path)
    data = (tmp_path / "f4.parquet").read_bytes()
    (tmp_path / "f4.parquet").write_bytes(data[: len(data) // 2])
    (tmp_path / "f5.parquet").unlink()
    with pytest.warns(pb.BloomFilterWarning):
        left, report = assert_same(monkeypatch, lambda: one_by_one(dataset, pc.field("id") == 4))
    assert len(report.unreadable_files) == 2
    assert {Path(p).name for p, _ in left} >= {"f4.parquet", "f5.parquet"}


def _plan_of(path: Path, expression: pc.Expression) -> tuple[local_probe.Plan, Any]:
    """The plan the Python path makes of ``path``'s footer, and the tree it is for."""
    with pb.BloomFilterReader(path) as reader:
        probing = Probing(translate(expression), pq.read_schema(path), plans=True)
        probing.probes(reader)
    assert probing.plan is not None
    return probing.plan, probing.tree


def test_hostile_footers_are_the_python_paths_or_answered_as_it_would(
    ids: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes of the footer changed at random: the kernel never reads out of bounds (make
    asan runs this), and every file it still answers for is answered as the Python path
    answers it, without a warning."""
    source = ids / "f2.parquet"
    expression = pc.field("id").isin([6001, 7777, 42]) | (pc.field("s") == "v8500")
    plan, tree = _plan_of(ids / "f0.parquet", expression)
    data = source.read_bytes()
    footer_len = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - footer_len
    rng = random.Random(31)
    answered = 0
    for trial in range(300):
        mutated = bytearray(data)
        for _ in range(rng.choice([1, 1, 2, 4])):
            at = rng.randrange(start, len(data))
            mutated[at] = rng.choice([0, 0xFF, rng.randrange(256), mutated[at] ^ 1])
        if trial % 25 == 0:  # cut short, the trailer kept
            cut = rng.randrange(start, len(data) - 8)
            mutated = mutated[:cut] + mutated[-8:]
        path = tmp_path / f"m{trial}.parquet"
        path.write_bytes(bytes(mutated))
        got = local_probe.probe(path, None, 64 * 1024, plan)
        if not isinstance(got, local_probe.Probed):
            continue
        answered += 1
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            python = python_path(
                monkeypatch,
                lambda path=path: pb.prune(
                    ds.dataset([str(path)], schema=ds.dataset(ids).schema), expression
                ),
            )
        assert not seen, f"trial {trial}: the Python path warned where the kernel answered"
        keep = local_probe.might_match(tree, plan, got.found, range(got.num_row_groups))
        kept = [rg for rg in range(got.num_row_groups) if keep[rg]]
        report = python.report
        assert (report.row_groups, report.row_groups_skipped) == (
            got.num_row_groups,
            got.num_row_groups - len(kept),
        ), f"trial {trial}"
        assert python.report.bytes_read == got.bytes_read
    assert answered > 0  # some mutations leave a footer both read (a value changed, say)


ALL = np.zeros(0, dtype=np.int64)  # the kernel's "every row group"


def test_a_plan_that_does_not_fit_its_buffers_is_refused(ids: Path) -> None:
    plan, _ = _plan_of(ids / "f0.parquet", pc.field("id") == 1)
    compiled: Any = kernels.compiled
    args = [plan.key, plan.paths, plan.path_offsets, plan.types, plan.probe_leaves]
    with pytest.raises(ValueError, match="inconsistent"):
        compiled.probe_local_file(
            str(ids / "f0.parquet"), -1, 4, *args, plan.hash_counts, plan.hashes, ALL
        )
    with pytest.raises(ValueError, match="inconsistent"):
        compiled.probe_local_file(
            str(ids / "f0.parquet"), -1, 65536, *args, plan.hash_counts, plan.hashes[:0], ALL
        )
    bad_offsets = plan.path_offsets.copy()
    bad_offsets[-1] = len(plan.paths) + 1
    with pytest.raises(ValueError, match="inconsistent"):
        compiled.probe_local_file(
            str(ids / "f0.parquet"), -1, 65536, plan.key, plan.paths, bad_offsets, plan.types,
            plan.probe_leaves, plan.hash_counts, plan.hashes, ALL,
        )  # fmt: skip
    with pytest.raises(ValueError, match="inconsistent"):  # row groups of 8 bytes each
        compiled.probe_local_file(
            str(ids / "f0.parquet"), -1, 65536, *args, plan.hash_counts, plan.hashes, b"123"
        )
    # A leaf out of range, a row group asked that the footer lacks: the Python path's.
    leaves = np.array([len(plan.types)], dtype=np.int32)
    got = compiled.probe_local_file(
        str(ids / "f0.parquet"), -1, 65536, plan.key, plan.paths, plan.path_offsets, plan.types,
        leaves, plan.hash_counts, plan.hashes, ALL,
    )  # fmt: skip
    assert got[0] == 2
    assert local_probe.probe(ids / "f0.parquet", None, 65536, plan, [0, 6]) is None
    one = local_probe.probe(ids / "f0.parquet", None, 65536, plan, [5])
    assert isinstance(one, local_probe.Probed) and one.found[:5] == bytes([2] * 5)


def test_local_files_go_to_one_compiled_call_only_where_the_kernel_takes_them(
    ids: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files after the first (whose Python path makes the plan) go to one call of the
    kernel, on threads of its own; a tree it cannot take (too many hashes on a column) is
    pruned one file after another in the calling thread, as threads of the Python path would
    only take turns holding the GIL."""
    from parquet_bloom._prune import dataset as pruning

    calls: list[tuple[int, int]] = []
    many = local_probe.probe_many

    def recorded(paths: Any, sizes: Any, tail: int, plan: Any, threads: int) -> Any:
        calls.append((len(paths), threads))
        return many(paths, sizes, tail, plan, threads)

    pools: list[int] = []
    monkeypatch.setattr(local_probe, "probe_many", recorded)
    monkeypatch.setattr(pruning, "prune_pool", lambda n: pools.append(n))
    pb.prune(ds.dataset(ids), pc.field("id") == 4)
    assert calls == [(5, pruning.PROBE_THREADS)] and pools == []
    calls.clear()
    pb.prune(ds.dataset(ids), pc.field("id").isin(list(range(0, 18000, 500))))
    assert calls == [] and pools == []
    pb.prune(ds.dataset(ids), pc.field("id") == 4, max_workers=3)
    assert calls == [(5, 3)]


def _with_first_chunk_field(source: Path, target: Path, field: bytes) -> None:
    """``source`` with ``field`` (a field's header and value) added at the end of row group
    0's first ColumnMetaData (the ``id`` column's), the footer's length mended."""
    from parquet_bloom import _format as fmt
    from parquet_bloom._format import _compact as compact

    data = source.read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - length
    footer = data[start:-8]
    md = fmt.decode_file_metadata(footer, full=True)
    meta = md.row_groups[0].columns[0].meta_data
    spec = fmt.ColumnMetaData.thrift_spec
    encoded = compact.encode_struct(meta, fmt.ColumnMetaData, spec)
    assert footer.count(encoded) == 1
    stop = footer.index(encoded) + len(encoded) - 1  # the struct's stop byte
    footer = footer[:stop] + field + footer[stop:]
    target.write_bytes(data[:start] + footer + len(footer).to_bytes(4, "little") + fmt.MAGIC)


LONG_ID_100 = bytes([0xC8, 0x01])  # field id 100, zigzag varint, after a header of delta 0

HOSTILE_CHUNK_FIELDS = {
    # An i32 in 6 bytes: fastbinary's OverflowError "varint exceeded 5 bytes".
    "overlong i32": bytes([0x05]) + LONG_ID_100 + bytes([0x80] * 5 + [0x00]),
    # A field id in a 4-byte varint (an i16 takes 3 at most).
    "overlong field id": bytes([0x05, 0xC8, 0x81, 0x80, 0x00, 0x00]),
    # A binary whose length takes 6 bytes.
    "overlong length": bytes([0x08]) + LONG_ID_100 + bytes([0x81] + [0x80] * 4 + [0x00]) + b"x",
    # Nested structs deeper than fastbinary's 64 levels (a row group's field is 5 down).
    "deep nesting": bytes([0x0C]) + LONG_ID_100 + b"\x1c" * 62 + b"\x00" * 63,
    # A list of more than fastbinary's 1,000,000 elements (bytes).
    "long list": bytes([0x09]) + LONG_ID_100 + bytes([0xF3]) + varint(1_000_001)
    + b"\x01" * 1_000_001,
}  # fmt: skip


@pytest.mark.parametrize("name", HOSTILE_CHUNK_FIELDS)
def test_a_chunk_the_thrift_decoder_refuses_is_the_python_paths(
    ids: Path, tmp_path: Path, name: str, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row group whose bytes fastbinary refuses is unreadable on the Python path (a
    warning, every row group kept): the kernel must not answer for it."""
    shutil.copy(ids / "f0.parquet", tmp_path / "f0.parquet")
    _with_first_chunk_field(ids / "f1.parquet", tmp_path / "f1.parquet", HOSTILE_CHUNK_FIELDS[name])
    expression = pc.field("id") == 3000 + 100
    with pytest.warns(pb.BloomFilterWarning, match="f1.parquet"):
        left, report = assert_same(
            monkeypatch, lambda: one_by_one(ds.dataset(tmp_path), expression)
        )
    assert served(answered) == 0  # f0 made the plan; f1 is the Python path's
    assert report.unreadable_files == (str(tmp_path / "f1.parquet"),)
    assert any(path.endswith("f1.parquet") for path, _ in left)  # kept whole


def test_a_field_id_past_the_i16_range_is_the_python_paths(
    ids: Path, tmp_path: Path, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """fastbinary adds field id deltas in an int16: from id 32767, 2,185 deltas of 15 and one
    of 8 come round to 14, bloom_filter_offset, which then names row group 1's filter (the
    last of two wins). The Python path probes that filter for row group 0; the kernel must
    leave the file to it, not probe row group 0's own."""
    with pb.BloomFilterReader(ids / "f1.parquet") as reader:
        other = reader.row_group(1)[0].bloom_filter_offset
    field = bytes([0x01]) + varint(2 * 32767) + b"\xf1" * 2185 + bytes([0x86]) + varint(2 * other)
    shutil.copy(ids / "f0.parquet", tmp_path / "f0.parquet")
    _with_first_chunk_field(ids / "f1.parquet", tmp_path / "f1.parquet", field)
    expression = pc.field("id") == 3000 + 100  # in row group 0 of f1
    left, _ = assert_same(monkeypatch, lambda: one_by_one(ds.dataset(tmp_path), expression))
    assert served(answered) == 0
    assert all(not p.endswith("f1.parquet") for p, _ in left)  # row group 1's filter says no


def test_a_tail_size_past_a_c_long_long_reads_the_whole_file_as_the_python_path_does(
    ids: Path, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel takes the tail size as a C long long: a larger one (the whole file, for the
    Python path) raised an OverflowError."""
    expression = pc.field("id") == 4200
    _, report = assert_same(
        monkeypatch, lambda: one_by_one(ds.dataset(ids), expression, tail_size=2**64)
    )
    assert served(answered) == 5 and report.reads == 6  # one read a file: all of it


@pytest.mark.parametrize("size", [-5, -1, 2**63])
def test_a_size_no_file_has_is_the_python_paths(ids: Path, size: int) -> None:
    """A size from a table's log that no file has: the Python path refuses it (a negative one
    a ValueError, one past int64 an OSError); the kernel took a negative size for "unknown"
    (and answered from the file's own) and raised OverflowError past int64."""
    plan, _ = _plan_of(ids / "f0.parquet", pc.field("id") == 1)
    assert local_probe.probe(ids / "f1.parquet", size, 65536, plan) is None
    with pytest.raises((ValueError, OSError)):
        pb.BloomFilterReader(ids / "f1.parquet", size=size)


def test_a_plans_buffers_cannot_change_while_the_kernel_reads_them(ids: Path) -> None:
    """The kernel checks a plan's buffers with the GIL held and reads them without it, from
    the threads sharing the plan: they are read-only."""
    plan, _ = _plan_of(ids / "f0.parquet", pc.field("id") == 1)
    arrays = [plan.path_offsets, plan.types, plan.probe_leaves, plan.hash_counts, plan.hashes]
    for array in arrays:
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 7


@pytest.mark.parametrize("threads", [0, 1, 2, 7])
def test_many_files_in_one_call_answer_as_one_file_a_call(
    ids: Path, tmp_path: Path, threads: int
) -> None:
    plan, _ = _plan_of(ids / "f0.parquet", pc.field("id").isin([5, 4000, 9999]))
    shutil.copy(ids / "f1.parquet", tmp_path / "cut.parquet")
    cut = (tmp_path / "cut.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(cut[: len(cut) // 3])
    paths = [str(p) for p in sorted(ids.glob("*.parquet"))]
    paths += [str(tmp_path / "cut.parquet"), str(tmp_path / "missing.parquet")]
    sizes = [None] * len(paths)
    sizes[2] = (ids / "f2.parquet").stat().st_size
    many = local_probe.probe_many(paths, sizes, 65536, plan, threads)
    assert many == [local_probe.probe(p, s, 65536, plan) for p, s in zip(paths, sizes, strict=True)]
    assert [isinstance(a, local_probe.Probed) for a in many] == [True] * 6 + [False] * 2


def test_many_files_need_a_size_each_and_paths(ids: Path) -> None:
    plan, _ = _plan_of(ids / "f0.parquet", pc.field("id") == 1)
    compiled: Any = kernels.compiled
    args = (plan.key, plan.paths, plan.path_offsets, plan.types, plan.probe_leaves)
    path = str(ids / "f0.parquet")
    sizes = np.array([-1], dtype=np.int64)
    with pytest.raises(ValueError, match="one size a path"):
        compiled.probe_local_files(
            [path, path], sizes, 65536, *args, plan.hash_counts, plan.hashes, 2
        )
    with pytest.raises(TypeError):
        compiled.probe_local_files(7, sizes, 65536, *args, plan.hash_counts, plan.hashes, 2)
    with pytest.raises(TypeError):
        compiled.probe_local_files([7], sizes, 65536, *args, plan.hash_counts, plan.hashes, 2)
    with pytest.raises(ValueError, match="inconsistent"):
        compiled.probe_local_files(
            [path], sizes, 65536, *args, plan.hash_counts, plan.hashes[:0], 2
        )
    assert (
        compiled.probe_local_files([], sizes[:0], 65536, *args, plan.hash_counts, plan.hashes, 2)
        == []
    )


@pytest.mark.parametrize("size", [-5, -1, 2**63])
def test_a_size_no_file_has_is_the_python_paths_among_many(ids: Path, size: int) -> None:
    """probe_many as probe: a size no file has (-1 too, which the call uses for "unknown")
    is the Python path's, the other files' answered."""
    plan, _ = _plan_of(ids / "f0.parquet", pc.field("id") == 1)
    files = [str(ids / "f1.parquet"), str(ids / "f2.parquet")]
    sizes = [size, (ids / "f2.parquet").stat().st_size]
    got = local_probe.probe_many(files, sizes, 65536, plan, 2)
    assert got[0] is None and isinstance(got[1], local_probe.Probed)
    assert got[1] == local_probe.probe(files[1], sizes[1], 65536, plan)


def test_many_workers_past_a_c_int_prune_as_one(
    ids: Path, answered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A max_workers past a C int (a positive integer prune accepts) is the kernel's threads
    at most, not an OverflowError."""
    expression = pc.field("id") == 4321
    assert_same(monkeypatch, lambda: pb.prune(ds.dataset(ids), expression, max_workers=2**40))
    assert served(answered) == 5

"""The Bloom index (docs/index.md): lookups in an index of 1,000,000 row groups on object
storage, and a Delta table's point lookup through its index against DataFusion's SQL.

1. **An index of ``--row-groups`` (1,000,000) row groups** on moto's S3 server in a process of
   its own (``S3ServerProcess``, tests/remote/servers.py: every request waits ``--delay-ms``,
   20 ms, and every body is sent at ``--bandwidth-mbps``, 800 Mbit/s, a request, as
   bench_object_store.py's server). Writing 10^6 real Parquet files is out of this machine's
   reach, so the index is built directly from generated filters with the library's own pieces:

   - row group ``i`` (file ``i // 10``, row group ``i % 10``: 100,000 files of 10) holds the
     int64 values ``(i << 20) | j`` for ``j < ndv``, hashed as a Parquet INT64 column is
     (``parquet_bloom.hash_values``) and inserted (the compiled insert, else
     ``SplitBlockBloomFilter``) into a filter of ``--filter-bytes`` (1 KiB). ``ndv`` is the
     most values such a filter holds at the index's own target, a false-positive rate of 1/N
     (``optimal_num_bytes(ndv, 1/N) <= 1 KiB``: 200 values, 17.7 % of the bits set), so a
     lookup expects a few false candidates over the million, as a real index sized for it
     would; a lookup's cost does not depend on the filters' size, only on N;
   - the slices blob from ``_index.slices.slices_of``, the entries from
     ``_index.build.entries_blob`` (paths of a Spark-like name under ``s3://lake/orders/``),
     the file list from ``files_blob``, the column's type from a pyarrow-written INT64 column,
     all written by ``_index.build.write_blobs`` into one local Puffin file (cached under
     ``--cache``, with the filters' words, between runs), uploaded as an index directory's
     segment, and its pointer written by ``_index.store.write_pointer``.

   Checked first: ``BloomIndex.lookup`` on the local file, for ``--sample`` values held and as
   many not held, returns exactly the row groups whose filters, probed directly (the generated
   words, numpy), may hold the value (and the holder). Then, in turns, ``--repeat`` times:

   - *one GET*: a ranged read of one slice's bytes (N/8) through an open s3fs filesystem, the
     peer: one round trip of the same server;
   - *warm*: ``idx.lookup("id", v)`` on a ``BloomIndex`` opened before (its pointer and
     footer read): target at most 2 rounds and ``8 x N/8`` bytes + 64 KiB + the candidates'
     entries;
   - *cold, directory*: ``BloomIndex(directory)`` (its pointer, which carries the footer) +
     the lookup: target at most 3 rounds; *cold, .puffin*: the segment opened as one file
     (its footer read from its tail) + the lookup: at most 3 rounds;
   - *IN*: ``idx.lookup("id", [100 values])`` warm: at most 2 rounds (every value's slices
     planned together and read in one round);
   - *cold, dir, client kept*: the cold lookup through the directory with fsspec's instance
     cache on (its default; the session's options skip it), so that the S3 client an earlier
     call made is used, as in a process making many lookups;
   - after the turns, *cold, dir, 1,500 ptrs*: the directory given generations 2 to
     ``--pointers`` (1,500: more than a listing's page of 1,000 keys; pointers of the same
     segment), then cold lookups through it: at most 3 rounds still.

   A *round trip* is counted as the longest chain of the library's requests in which each
   starts after the one before it ended (its batches of reads, ``ByteSource.read`` calls; its
   suffix reads; size lookups; the index directory's listings: each timed by wrapping it), so
   that requests issued at once count once; *requests* and *bytes* are the server's (its
   meter). Each answer is checked against the direct probe. Shown: best and
   median wall time, and each over the one GET's best. The index's size is shown against the
   filters' sum, and what it would weigh with filters for 100,000 values a row group at 1 %
   and at 1/N (``optimal_num_bytes``).

2. **A Delta table of ``--delta-files`` (10,000) small files** on local disk, written by
   deltalake (one ``write_deltalake``, one file of ``--rows-per-file`` rows a record batch, one
   row group each, a 1 % Bloom filter on ``id`` sized for its rows; every id once, spread at
   random over the files so that min/max statistics prune nothing), cached under ``--cache``.

   - The index build (``parquet_bloom.delta.build_index(uri, ["id"])``: every file's tail)
     against reading those tails: ``BloomFilterReader(f).filters(["id"])`` of every file on
     the same thread pool. In turns; ratio shown.
   - A point lookup ``id == x``: ``parquet_bloom.delta.prune(uri, expr)`` (the index used)
     + ``result.dataset.to_table(filter=expr)`` against deltalake's SQL
     (``QueryBuilder().register("t", DeltaTable(uri)).execute("select * from t where id =
     x")``, DataFusion, which reads the files' Bloom filters itself), each loading the table
     in the timed call; a different id each turn, rows equal. Target: ours >= 10x faster.

Run: ``.venv/bin/python benchmarks/bench_index.py`` (``--skip-s3``, ``--skip-delta``). The
first run generates the index (1.2 GB; 5 minutes on the loaded 2-core VM) and the table
(15 s) into ``--cache`` (a temporary directory's ``parquet-bloom-bench-index/``); a run with
them cached took 8-9 minutes there, half of it the IN lookups and the local check. The
generating run peaked at 3.8 GB of RSS; moto then holds the 1.1 GB index in memory.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from timing import report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' servers

import parquet_bloom as pb
from parquet_bloom import _format as fmt
from parquet_bloom import _sbbf, kernels
from parquet_bloom._index import build, layout, puffin, slices, store
from parquet_bloom._index import entries as ent
from parquet_bloom._index.lookup import BloomIndex, IndexLookup
from parquet_bloom._io import source as io_source
from parquet_bloom._threads import read_pool
from tests.remote.servers import S3ServerProcess, S3Session

COLUMN = "id"
ROW_GROUPS_PER_FILE = 10
VALUE_BITS = 20  # a value is (row group << 20) | j
CACHE_VERSION = 1  # bump when the generated index changes
TARGET_ROUNDS_WARM = 2
TARGET_ROUNDS_COLD = 3
TARGET_ROUNDS_IN = 2
SLACK_BYTES = 64 * 1024
TARGET_DELTA_SPEEDUP = 10.0


# --- counting rounds -----------------------------------------------------------------------


class Rounds:
    """Round trips: the longest chain of the library's requests in which each starts after
    the one before it ended. Counted are its batches of reads (``ByteSource.read``: one
    ``cat_ranges``, its ranges fetched concurrently), suffix reads, size lookups and the
    listings of an index directory (the one-key listing of its newest pointer's name, a whole
    listing), each timed by wrapping it: the pointer's copy and the listing beside it, issued
    at once, overlap and make one round."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float]] = []

    def reset(self) -> None:
        self.calls = []

    @property
    def count(self) -> int:
        chain: list[tuple[float, int]] = []  # (end, longest chain ending with that call)
        for start, end in sorted(self.calls, key=lambda c: c[1]):
            before = max((n for e, n in chain if e <= start), default=0)
            chain.append((end, before + 1))
        return max((n for _, n in chain), default=0)

    def _timed(self, fn: Callable[..., Any], skip: Callable[..., bool] | None = None) -> Any:
        def timed(*args: Any) -> Any:
            if skip is not None and skip(*args):
                return fn(*args)
            start = time.perf_counter()
            try:
                return fn(*args)
            finally:
                self.calls.append((start, time.perf_counter()))

        return timed

    @contextmanager
    def installed(self) -> Iterator[None]:
        cls = io_source.ByteSource
        originals = [
            (cls, "read", cls.read),
            (io_source, "_suffix_read", io_source._suffix_read),
            (io_source, "_fsspec_size", io_source._fsspec_size),
            (store, "_first_pointer_name", store._first_pointer_name),
            (store, "_files", store._files),
        ]
        for owner, name, fn in originals:
            skip = (lambda _self, ranges: not ranges) if name == "read" else None
            setattr(owner, name, self._timed(fn, skip))
        try:
            yield
        finally:
            for owner, name, fn in originals:
                setattr(owner, name, fn)


ROUNDS = Rounds()


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def _summary(times: list[float]) -> str:
    return f"best {_ms(min(times))}, median {_ms(statistics.median(times))}"


# --- the generated index -------------------------------------------------------------------


class Generated:
    """The generated filters (``words``: (N, z, 8) uint32) and the index built from them."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.n: int = args.row_groups
        self.num_bytes: int = args.filter_bytes
        self.z = self.num_bytes // _sbbf.BYTES_PER_BLOCK
        self.fpp = 1.0 / self.n
        ndv = 1
        while _sbbf.optimal_num_bytes(ndv + 1, self.fpp) <= self.num_bytes:
            ndv += 1
        self.ndv = ndv
        if self.ndv >= 1 << VALUE_BITS:
            raise SystemExit("too many values a row group for the value scheme")
        self.files = (self.n + ROW_GROUPS_PER_FILE - 1) // ROW_GROUPS_PER_FILE
        tag = f"n{self.n}-b{self.num_bytes}-v{self.ndv}-c{CACHE_VERSION}"
        self.dir = Path(args.cache) / "index"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.puffin = self.dir / f"segment-{tag}.puffin"
        self.words_path = self.dir / f"words-{tag}.npy"
        self.meta_path = self.dir / f"segment-{tag}.json"

    @staticmethod
    def file_path(f: int) -> str:
        tail = f"{(f * 0x9E3779B97F4A7C15 + 12345) % 2**128:032x}"
        uuid = f"{tail[:8]}-{tail[8:12]}-{tail[12:16]}-{tail[16:20]}-{tail[20:]}"
        return f"s3://lake/orders/part-{f:05d}-{uuid}-c000.snappy.parquet"

    def values(self, rg: int, j: int) -> int:
        return (rg << VALUE_BITS) | j

    def make_words(self) -> np.ndarray:
        words = np.zeros((self.n, self.z, _sbbf.WORDS_PER_BLOCK), dtype=np.uint32)
        compiled = kernels.compiled
        j = np.arange(self.ndv, dtype=np.int64)
        chunk = 20_000
        for start in range(0, self.n, chunk):
            rgs = np.arange(start, min(start + chunk, self.n), dtype=np.int64)
            values = ((rgs[:, None] << VALUE_BITS) | j[None, :]).reshape(-1)
            hashes = pb.hash_values(values).reshape(len(rgs), self.ndv)
            for i, rg in enumerate(rgs):
                if compiled is not None:
                    compiled.insert(words[rg], hashes[i])
                else:
                    f = pb.SplitBlockBloomFilter(self.num_bytes)
                    f.insert_hashes(hashes[i])
                    words[rg] = np.frombuffer(f.to_bytes(), dtype="<u4").reshape(self.z, 8)
        return words

    def int64_type(self) -> tuple[dict[str, str], str]:
        """The type properties of a pyarrow-written INT64 column, and its Arrow field."""
        sink = io.BytesIO()
        pq.write_table(pa.table({COLUMN: pa.array([1], pa.int64())}), sink)
        sink.seek(0)
        with pb.BloomFilterReader(sink) as reader:
            leaf = next(leaf for leaf in reader.schema_leaves if leaf.path == COLUMN)
            typed = fmt.leaf_type_properties(leaf)
        field = pa.schema([pa.field(COLUMN, pa.int64())]).serialize().to_pybytes().hex()
        return typed, field

    def ensure(self) -> tuple[np.ndarray, build.Segment]:
        """The words and the Puffin segment: from the cache, or generated and written."""
        if self.puffin.exists() and self.words_path.exists() and self.meta_path.exists():
            meta = json.loads(self.meta_path.read_text())
            segment = build.Segment(
                meta["size"], meta["footer_offset"], meta["footer"].encode("utf-8")
            )
            if segment.size == self.puffin.stat().st_size:
                print(f"  (the index from the cache: {self.puffin})", flush=True)
                return np.load(self.words_path, mmap_mode="r"), segment
        start = time.perf_counter()
        words = self.make_words()
        generated = time.perf_counter() - start
        typed, field = self.int64_type()
        n = self.n
        common = {layout.COLUMN: COLUMN, layout.CLASS: "0", layout.ROW_GROUPS: str(n)}
        slice_meta = puffin.BlobMetadata(
            layout.SLICES_BLOB,
            offset=0,
            length=slices.slice_bytes(n) * self.z * _sbbf.BITS_PER_BLOCK,
            properties={
                **common,
                layout.NUM_BYTES: str(self.num_bytes),
                **{layout.TYPE_PREFIX + k: v for k, v in typed.items()},
                layout.ARROW_FIELD: field,
            },
        )
        file_size = 128 << 20
        members = [
            ent.Entry(self.file_path(rg // ROW_GROUPS_PER_FILE), rg % 10, file_size, 100_000)
            for rg in range(n)
        ]
        files = [[self.file_path(f), file_size, -1, -1] for f in range(self.files)]
        blobs = [
            (slice_meta, slices.slices_of(words)),
            build.entries_blob(members, common, "sbbf"),
            build.files_blob(files),
        ]
        del members
        tmp = self.puffin.with_suffix(".tmp.puffin")
        segment = build.write_blobs(str(tmp), blobs, [COLUMN], None)
        written = time.perf_counter() - start - generated
        np.save(self.words_path, words)
        os.replace(tmp, self.puffin)
        self.meta_path.write_text(
            json.dumps(
                {
                    "size": segment.size,
                    "footer_offset": segment.footer_offset,
                    "footer": segment.footer.decode("utf-8"),
                }
            )
        )
        print(
            f"  (generated: filters {generated:.0f} s, slices, entries and Puffin file "
            f"{written:.0f} s)",
            flush=True,
        )
        return words, segment


def direct(words: np.ndarray, values: int | list[int]) -> set[int]:
    """The row groups whose filters may hold ``values`` (one, or any of a list): each filter
    probed, numpy, each block's words gathered once."""
    many = [values] if isinstance(values, int) else values
    h = pb.hash_values(np.array(many, dtype=np.int64))
    z = words.shape[1]
    blocks = ((h >> np.uint64(32)) * np.uint64(z)) >> np.uint64(32)
    masks = _sbbf._masks(h)
    out: set[int] = set()
    for block in np.unique(blocks):
        part = np.asarray(words[:, int(block), :])
        for mask in masks[blocks == block]:
            hit = np.all((part & mask) == mask, axis=1)
            out.update(int(i) for i in np.flatnonzero(hit))
    return out


def rows_of(answer: IndexLookup) -> set[int]:
    """The answer's row groups as generated row-group numbers."""
    names = {}
    out = set()
    for e in answer.row_groups:
        f = names.get(e.path)
        if f is None:
            f = names[e.path] = int(e.path.split("part-")[1][:5])
        out.add(f * ROW_GROUPS_PER_FILE + e.row_group)
    return out


def check_local(gen: Generated, words: np.ndarray, sample: int, rng: np.random.Generator) -> None:
    """Lookups in the local Puffin file against the direct probe: ``sample`` values held and
    as many not held, and one IN of both."""
    held = [
        gen.values(int(rg), int(j))
        for rg, j in zip(
            rng.integers(0, gen.n, sample), rng.integers(0, gen.ndv, sample), strict=True
        )
    ]
    absent = [
        gen.values(int(rg), int(j))
        for rg, j in zip(
            rng.integers(0, gen.n, sample),
            rng.integers(gen.ndv, 1 << VALUE_BITS, sample),
            strict=True,
        )
    ]
    false = 0
    start = time.perf_counter()
    with BloomIndex(str(gen.puffin)) as idx:
        for v in held + absent:
            expected = direct(words, v)
            got = rows_of(idx.lookup(COLUMN, v))
            assert got == expected, (v, sorted(got ^ expected)[:10])
            if v in held:
                assert v >> VALUE_BITS in got, v
                false += len(got) - 1
            else:
                false += len(got)
        values = held[:50] + absent[:50]
        union = direct(words, values)
        assert rows_of(idx.lookup(COLUMN, values)) == union
    print(
        f"  checked: {2 * sample} lookups in the local file and an IN of 100 equal the filters "
        f"probed directly; {false / (2 * sample):.1f} false candidates a lookup "
        f"(expected {_sbbf.expected_fpp(gen.ndv, gen.num_bytes) * gen.n:.1f}) "
        f"({time.perf_counter() - start:.0f} s)",
        flush=True,
    )


# --- part 1: the index on S3 ---------------------------------------------------------------


class Measured:
    def __init__(self) -> None:
        self.wall: list[float] = []
        self.rounds: list[int] = []
        self.requests: list[int] = []
        self.bytes: list[int] = []
        self.candidates: list[int] = []


def bench_s3(args: argparse.Namespace) -> bool:
    gen = Generated(args)
    print(
        f"index of {gen.n:,} row groups ({gen.files:,} files of {ROW_GROUPS_PER_FILE}), "
        f"filters of {gen.num_bytes:,} B holding {gen.ndv} values each (sized at fpp 1/N = "
        f"{gen.fpp:.0e}), column {COLUMN} INT64",
        flush=True,
    )
    words, segment = gen.ensure()
    rng = np.random.default_rng(7)
    check_local(gen, words, args.sample, rng)

    bandwidth = args.bandwidth_mbps * 1e6 / 8
    server = S3ServerProcess(delay=args.delay_ms / 1e3, bandwidth=bandwidth, max_seconds=3600)
    s3 = S3Session(server)
    ok = True
    try:
        bucket = s3.bucket()
        directory = f"s3://{bucket}/orders.bloom-index"
        name = store.new_segment_name()
        start = time.perf_counter()
        segment_url = s3.upload(gen.puffin, f"{directory}/{name}")
        ref = store.SegmentRef(name, segment.size, segment.footer_offset, segment.footer)
        store.write_pointer(directory, store.Pointer(1, (COLUMN,), (ref,)), s3.storage_options)
        print(
            f"  uploaded {segment.size / 2**20:,.0f} MiB to the S3 server as {directory}/ "
            f"({time.perf_counter() - start:.0f} s); every request delayed {args.delay_ms:g} "
            f"ms, bodies at {args.bandwidth_mbps:g} Mbit/s a request",
            flush=True,
        )
        ok = measure_s3(args, gen, words, server, s3, directory, segment_url) and ok
    finally:
        server.stop()
    sizes(gen, segment)
    return ok


def measure_s3(
    args: argparse.Namespace,
    gen: Generated,
    words: np.ndarray,
    server: S3ServerProcess,
    s3: S3Session,
    directory: str,
    segment_url: str,
) -> bool:
    rng = np.random.default_rng(11)
    record = ent.record_size(len(gen.file_path(0).encode()))
    slice_bytes = slices.slice_bytes(gen.n)
    fs = s3.fs()
    key = segment_url.removeprefix("s3://")
    fs.cat_file(key, start=0, end=1)  # its connection opened, its client made
    warm = BloomIndex(directory, storage_options=s3.storage_options)
    warm.lookup(COLUMN, 0)  # its filesystem's client and connections made
    names = (
        "one GET (peer)",
        "8 GETs at once",
        "warm",
        "cold, directory",
        "cold, .puffin",
        f"IN of {args.in_values}",
        f"cold, dir, {args.pointers:,} ptrs",
        "cold, dir, client kept",
    )
    # fsspec's instance cache on (its default; the session's options skip it): a cold lookup
    # through the S3 client an earlier call made, as in a process making many.
    kept = {k: v for k, v in s3.storage_options.items() if k != "skip_instance_cache"}
    with BloomIndex(directory, storage_options=kept) as first:
        first.lookup(COLUMN, 0)
    results = {name: Measured() for name in names}

    def value() -> int:
        return gen.values(int(rng.integers(0, gen.n)), int(rng.integers(0, gen.ndv)))

    def one_get() -> set[int] | None:
        offset = int(rng.integers(0, 8192)) * slice_bytes
        data = fs.cat_file(key, start=offset, end=offset + slice_bytes)
        assert len(data) == slice_bytes
        return None

    def eight_gets() -> None:
        offsets = [int(o) * slice_bytes for o in rng.choice(8192, 8, replace=False)]
        datas = fs.cat_ranges([key] * 8, offsets, [o + slice_bytes for o in offsets])
        assert all(len(d) == slice_bytes for d in datas)

    def lookup_warm(v: Any) -> IndexLookup:
        return warm.lookup(COLUMN, v)

    def lookup_cold(where: str, v: Any, options: dict[str, Any] = s3.storage_options) -> Any:
        with BloomIndex(where, storage_options=options) as idx:
            return idx.lookup(COLUMN, v)

    def run(name: str, fn: Callable[[], Any], expected: set[int] | None) -> None:
        m = results[name]
        server.reset_counters()
        ROUNDS.reset()
        start = time.perf_counter()
        answer = fn()
        m.wall.append(time.perf_counter() - start)
        m.rounds.append(ROUNDS.count)
        c = server.counters()
        m.requests.append(c["requests"])
        m.bytes.append(c["bytes"])
        if expected is not None:
            got = rows_of(answer)
            assert got == expected, (name, sorted(got ^ expected)[:10])
            m.candidates.append(len(got))

    with ROUNDS.installed():
        for _ in range(args.repeat):
            v1, v2, v3 = value(), value(), value()
            many = [value() for _ in range(args.in_values // 2)]
            many += [
                gen.values(int(rng.integers(0, gen.n)), int(rng.integers(gen.ndv, 1 << 20)))
                for _ in range(args.in_values - len(many))
            ]
            e1, e2, e3 = direct(words, v1), direct(words, v2), direct(words, v3)
            e_many = direct(words, many)
            run(names[0], one_get, None)
            run(names[1], eight_gets, None)
            run(names[2], lambda v1=v1: lookup_warm(v1), e1)
            run(names[3], lambda v2=v2: lookup_cold(directory, v2), e2)
            run(names[4], lambda v3=v3: lookup_cold(segment_url, v3), e3)
            run(names[5], lambda many=many: lookup_warm(many), e_many)
            v5 = value()
            run(names[7], lambda v5=v5: lookup_cold(directory, v5, kept), direct(words, v5))
        # The directory after as many changes (pointers of the same segment), more than a
        # listing's page: cold lookups through it.
        add_pointers(s3, directory, args.pointers)
        for _ in range(args.repeat):
            v4 = value()
            run(names[6], lambda v4=v4: lookup_cold(directory, v4), direct(words, v4))
    warm.close()

    print(
        f"  {'':<22} {'wall: best':>11} {'median':>9} {'/ GET':>7} {'rounds':>7} "
        f"{'requests':>9} {'bytes (max)':>12} {'candidates':>11}"
    )
    peer = min(results[names[0]].wall)
    for name in names:
        m = results[name]
        cands = f"{min(m.candidates)}-{max(m.candidates)}" if m.candidates else "-"
        print(
            f"  {name:<22} {_ms(min(m.wall)):>11} {_ms(statistics.median(m.wall)):>9} "
            f"{min(m.wall) / peer:6.1f}x {max(m.rounds):>7} "
            f"{min(m.requests)}-{max(m.requests):<5} {max(m.bytes):>12,} {cands:>11}"
        )
    print(
        "  runs (ms): "
        + "; ".join(
            f"{name}: {', '.join(f'{t * 1e3:.0f}' for t in results[name].wall)}" for name in names
        )
    )
    ok = True
    warm_m = results[names[2]]
    allowed = 8 * slice_bytes + SLACK_BYTES + max(warm_m.candidates) * record
    ok = (
        report(
            "warm lookup, one value: rounds (max)",
            max(warm_m.rounds),
            f"<= {TARGET_ROUNDS_WARM}",
            max(warm_m.rounds) <= TARGET_ROUNDS_WARM,
        )
        and ok
    )
    ok = (
        report(
            f"warm lookup: bytes read (max) / (8 x {slice_bytes:,} + 64 KiB + entries)",
            max(warm_m.bytes) / allowed,
            "<= 1",
            max(warm_m.bytes) <= allowed,
        )
        and ok
    )
    for name in (*names[3:5], *names[6:]):
        m = results[name]
        ok = (
            report(
                f"{name} lookup, one value: rounds (max)",
                max(m.rounds),
                f"<= {TARGET_ROUNDS_COLD}",
                max(m.rounds) <= TARGET_ROUNDS_COLD,
            )
            and ok
        )
    m = results[names[5]]
    ok = (
        report(
            f"IN of {args.in_values}: rounds (max)",
            max(m.rounds),
            f"<= {TARGET_ROUNDS_IN}",
            max(m.rounds) <= TARGET_ROUNDS_IN,
        )
        and ok
    )
    for name in names[1:]:
        report(f"wall time, best: {name} / one GET", min(results[name].wall) / peer)
    return ok


def add_pointers(s3: S3Session, directory: str, newest: int) -> None:
    """Generations 2 to ``newest`` of the directory's pointer, each naming the same segment as
    the first (as changes that replaced it by itself would), and the copy of the newest."""
    bucket, _, prefix = directory.removeprefix("s3://").partition("/")
    client = s3.client()
    first = client.get_object(Bucket=bucket, Key=f"{prefix}/{store.POINTER}")["Body"].read()
    doc = json.loads(first)

    def put(generation: int, name: str | None = None) -> None:
        body = json.dumps({**doc, "generation": generation}).encode()
        key = f"{prefix}/{name or store.pointer_name(generation)}"
        client.put_object(Bucket=bucket, Key=key, Body=body)

    start = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(2, newest + 1)))
    put(newest, store.POINTER)
    print(f"  wrote pointers 2 to {newest:,} ({time.perf_counter() - start:.0f} s)", flush=True)


def sizes(gen: Generated, segment: build.Segment) -> None:
    """The index's size against the filters', and with filters of 100,000 values a row group."""
    n = gen.n
    record = ent.record_size(len(gen.file_path(0).encode()))
    entries = n * record
    rest = segment.size - slices.slice_bytes(n) * gen.z * 256 - entries
    filters = n * gen.num_bytes
    print(
        f"  the index: {segment.size:,} B = slices {slices.slice_bytes(n) * gen.z * 256:,} + "
        f"entries {entries:,} ({record} B a row group) + file list and footer {rest:,}; "
        f"the filters: {filters:,} B; index / filters {segment.size / filters:.3f}"
    )
    for label, fpp in (("1 %", 0.01), (f"1/N = {1 / n:.0e}", 1 / n)):
        size = _sbbf.optimal_num_bytes(100_000, fpp)
        slice_part = slices.slice_bytes(n) * (size // 32) * 256
        total = slice_part + entries + rest
        print(
            f"  with filters for 100,000 values at {label}: {size // 1024:,} KiB a filter, "
            f"index {total / 1e9:,.1f} GB ({n * size / 1e9:,.1f} GB of filters); "
            f"a lookup still reads 8 x {slices.slice_bytes(n):,} B"
        )


# --- part 2: a Delta table of 10,000 files -------------------------------------------------


def delta_table(args: argparse.Namespace) -> tuple[str, int]:
    """The table (written once into the cache) and its row count."""
    from deltalake import (
        BloomFilterProperties,
        ColumnProperties,
        DeltaTable,
        WriterProperties,
        write_deltalake,
    )

    files, rows = args.delta_files, args.rows_per_file
    uri = Path(args.cache) / f"delta-{files}x{rows}-c{CACHE_VERSION}"
    total = files * rows
    if (uri / "_delta_log").exists() and len(DeltaTable(str(uri)).file_uris()) == files:
        print(f"  (the table from the cache: {uri})", flush=True)
        return str(uri), total
    if uri.exists():
        import shutil

        shutil.rmtree(uri)
    rng = np.random.default_rng(0)
    ids = rng.permutation(total).astype(np.int64)
    table = pa.table(
        {
            "id": ids,
            "s": pc.binary_join_element_wise("key-", pc.cast(pa.array(ids), pa.string()), ""),
            "v": pa.array(rng.random(total, dtype=np.float32)),
        }
    )
    table = pa.Table.from_batches(table.to_batches(max_chunksize=rows))
    properties = WriterProperties(
        max_row_group_size=rows,
        write_batch_size=rows,
        compression="SNAPPY",
        column_properties={
            "id": ColumnProperties(bloom_filter_properties=BloomFilterProperties(True, 0.01, rows))
        },
    )
    start = time.perf_counter()
    write_deltalake(str(uri), table, target_file_size=1, writer_properties=properties)
    written = len(DeltaTable(str(uri)).file_uris())
    print(f"  (written in {time.perf_counter() - start:.0f} s: {written} files)", flush=True)
    if written != files:
        raise SystemExit(f"deltalake wrote {written} files, not {files}")
    return str(uri), total


def bench_delta(args: argparse.Namespace) -> bool:
    from deltalake import DeltaTable, QueryBuilder

    import parquet_bloom.delta as pbd

    uri, total = delta_table(args)
    dt = DeltaTable(uri)
    files = [str(f) for f in dt.file_uris()]
    md = pq.ParquetFile(files[0]).metadata
    size = sum(os.path.getsize(f) for f in files)
    print(
        f"Delta table of {len(files):,} files ({size / 2**20:.0f} MiB, {md.num_rows:,} rows and "
        f"{md.num_row_groups} row group a file, {md.created_by}), Bloom filter on id (1 %)",
        flush=True,
    )
    index_dir = Path(uri) / pbd.INDEX_DIRECTORY

    def build_index() -> Any:
        return pbd.build_index(uri, [COLUMN])

    def read_tails() -> int:
        def one(path: str) -> int:
            with pb.BloomFilterReader(path) as reader:
                return len(reader.filters([COLUMN]))

        return sum(read_pool().map(one, files))

    def tidy() -> None:
        """Only the pointer's segment kept (each build writes a new one)."""
        pointer = store.read_pointer(str(index_dir), None)
        keep = {s.name for s in pointer.segments} if pointer else set()
        for p in index_dir.glob("segment-*.puffin"):
            if p.name not in keep:
                p.unlink()

    builds, tails = [], []
    built = None
    for _ in range(args.delta_repeat):
        start = time.perf_counter()
        built = build_index()
        builds.append(time.perf_counter() - start)
        tidy()
        start = time.perf_counter()
        n = read_tails()
        tails.append(time.perf_counter() - start)
        assert n == len(files), n
    assert built is not None and built.row_groups == len(files), built
    print(f"  {built}".replace("\n", "\n  "))
    print(f"  build_index: {_summary(builds)}; reading the tails: {_summary(tails)}")
    report("index build / reading the files' tails (best)", min(builds) / min(tails))

    rng = np.random.default_rng(5)
    ours_t, sql_t = [], []
    last: Any = None
    for _ in range(args.delta_repeat):
        key = int(rng.integers(0, total))
        expr = pc.field("id") == key

        def ours(expr: pc.Expression = expr) -> pa.Table:
            nonlocal last
            last = pbd.prune(uri, expr)
            return last.dataset.to_table(filter=expr)

        def sql(key: int = key) -> pa.Table:
            qb = QueryBuilder().register("t", DeltaTable(uri))
            return pa.RecordBatchReader.from_stream(
                qb.execute(f"select * from t where id = {key}")
            ).read_all()

        start = time.perf_counter()
        mine = ours()
        ours_t.append(time.perf_counter() - start)
        start = time.perf_counter()
        theirs = sql()
        sql_t.append(time.perf_counter() - start)
        schema = mine.schema
        a = mine.sort_by("id")
        b = theirs.select(schema.names).cast(schema).sort_by("id")
        assert a.num_rows == 1 and a.equals(b), (key, a, b)
    print(f"  prune's report (last): {last.report}")
    print(
        f"  prune + pruned scan: {_summary(ours_t)}; deltalake SQL (DataFusion): {_summary(sql_t)}"
    )
    ratio = min(sql_t) / min(ours_t)
    report(
        "point lookup, median: DataFusion SQL / ours",
        statistics.median(sql_t) / statistics.median(ours_t),
    )
    return report(
        "point lookup, best: DataFusion SQL / (prune with the index + scan)",
        ratio,
        f">= {TARGET_DELTA_SPEEDUP:g}",
        ratio >= TARGET_DELTA_SPEEDUP,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--row-groups", type=int, default=1_000_000)
    parser.add_argument("--filter-bytes", type=int, default=1024)
    parser.add_argument("--delay-ms", type=float, default=20.0, help="added to every request")
    parser.add_argument(
        "--bandwidth-mbps", type=float, default=800.0, help="Mbit/s a response body, each"
    )
    parser.add_argument("--repeat", type=int, default=5, help="turns on the S3 server")
    parser.add_argument(
        "--pointers",
        type=int,
        default=1500,
        help="the index directory's generations for the last cold lookups (over a listing's "
        "page of 1,000 keys)",
    )
    parser.add_argument("--in-values", type=int, default=100)
    parser.add_argument("--sample", type=int, default=100, help="values checked locally, x2")
    parser.add_argument("--delta-files", type=int, default=10_000)
    parser.add_argument("--rows-per-file", type=int, default=1024)
    parser.add_argument("--delta-repeat", type=int, default=3)
    parser.add_argument(
        "--cache",
        default=os.path.join(tempfile.gettempdir(), "parquet-bloom-bench-index"),
        help="where the generated index and the table are kept between runs",
    )
    parser.add_argument("--skip-s3", action="store_true")
    parser.add_argument("--skip-delta", action="store_true")
    args = parser.parse_args()
    ok = True
    if not args.skip_s3:
        ok = bench_s3(args) and ok
    if not args.skip_delta:
        ok = bench_delta(args) and ok
    print(f"load average (1 min) {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

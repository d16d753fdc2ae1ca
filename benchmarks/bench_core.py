"""Hash + insert and find, against Arrow C++ and a Python loop over xxhash, in one run.

Arrow C++'s per-value cost is pyarrow.parquet.write_table with a Bloom filter minus the same write
without one (same data, same run, best of several), so it includes exactly its hashing and
inserting. Ratios, not seconds, are the figures: machines here are noisy.

The int64 figures are taken with the compiled kernels (where built and not turned off) and on
numpy alone, in this one run: ``kernels.compiled`` is set to None for the numpy figures, as
``PARQUET_BLOOM_PURE_PYTHON=1`` would at import.

    python benchmarks/bench_core.py [--cpu-time]

``--cpu-time`` times every side by this process's CPU time instead of the wall clock: on a
machine other work keeps busy, the wall clock charges each side for the time it waited.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import timing
import xxhash
from timing import report

import parquet_bloom as pb
from parquet_bloom import kernels
from parquet_bloom._sbbf import SALT

REPEATS = 5
CPU_TIME = False  # --cpu-time


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """timing.best_of, or with --cpu-time the least CPU time this process took in a run."""
    if not CPU_TIME:
        return timing.best_of(fn, repeat)
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def arrow_cost(column: pa.Array, fpp: float) -> float:
    """Seconds Arrow C++ spends on the filter of one column chunk (one row group)."""
    table = pa.table({"x": column})
    n = len(column)

    def write(options: dict[str, object] | None) -> None:
        pq.write_table(
            table,
            io.BytesIO(),
            compression="none",
            use_dictionary=False,
            row_group_size=n,
            write_statistics=False,
            bloom_filter_options=options,
        )

    with_filter = best_of(lambda: write({"x": {"ndv": n, "fpp": fpp}}), REPEATS)
    without = best_of(lambda: write(None), REPEATS)
    return with_filter - without


@contextmanager
def numpy_alone(on: bool) -> Iterator[None]:
    """The kernels off (``on``), as on a machine where they were not built."""
    built = kernels.compiled
    if on:
        kernels.compiled = None
    try:
        yield
    finally:
        kernels.compiled = built


def main() -> bool:
    rng = np.random.default_rng(0)
    ok = True
    n = 5_000_000
    ints = rng.integers(-(2**62), 2**62, n)
    arrow = arrow_cost(pa.array(ints), 0.01)
    f = pb.SplitBlockBloomFilter.from_ndv(n, 0.01)
    hashes = pb.hash_values(ints)
    print(f"int64, {n:,} values, 1 % filter of {f.num_bytes:,} bytes:")
    print(f"  Arrow C++ hash+insert {arrow / n * 1e9:.1f} ns/value")
    ways = ["numpy"] if kernels.compiled is None else ["compiled", "numpy"]
    if kernels.compiled is None:
        print("  (the compiled kernels are not in use here: numpy figures only)")
    timed: dict[str, dict[str, float]] = {}
    for way in ways:
        with numpy_alone(way == "numpy"):
            timed[way] = {
                "hash+insert": best_of(lambda: f.insert(ints), REPEATS),
                "find_hashes": best_of(lambda: f.find_hashes(hashes), REPEATS),
                "might_contain_many": best_of(lambda: f.might_contain_many(ints), REPEATS),
            }
        print(
            f"  ours, {way}: "
            + ", ".join(f"{what} {t / n * 1e9:.1f}" for what, t in timed[way].items())
            + " ns/value"
        )
    first = timed[ways[0]]
    ok &= report(
        f"hash+insert / Arrow C++ hash+insert ({ways[0]})",
        first["hash+insert"] / arrow,
        "<= 1.5",
        first["hash+insert"] / arrow <= 1.5,
    )
    for way in ways:
        for what in ("might_contain_many", "find_hashes"):
            ratio = timed[way][what] / arrow
            if way == "compiled":  # the kernels' target; numpy's figures are shown
                ok &= report(f"{what} / Arrow C++ hash+insert", ratio, "<= 0.5", ratio <= 0.5)
            else:
                report(f"{what} / Arrow C++ hash+insert (numpy alone)", ratio)
    if "compiled" in timed:
        report("numpy hash+insert / Arrow C++ hash+insert", timed["numpy"]["hash+insert"] / arrow)

    ok &= compare_with_loops(ints, f, lambda v: v.to_bytes(8, "little", signed=True), "INT64")

    m = 1_000_000
    strings = pa.array([f"customer-{v:x}-{v % 977}" for v in rng.integers(0, 2**48, m)])
    lengths = pc.binary_length(strings).to_numpy()
    arrow = arrow_cost(strings, 0.01)
    g = pb.SplitBlockBloomFilter.from_ndv(m, 0.01)
    ours = best_of(lambda: g.insert(strings), REPEATS)
    print(f"\nstrings of {lengths.min()}-{lengths.max()} bytes, {m:,} values:")
    print(f"  Arrow C++ {arrow / m * 1e9:.1f} ns/value; ours hash+insert {ours / m * 1e9:.1f}")
    ok &= report("hash+insert / Arrow C++ hash+insert", ours / arrow, "<= 3", ours / arrow <= 3)
    ok &= compare_with_loops(strings, g, str.encode, "BYTE_ARRAY")
    return ok


def compare_with_loops(
    values: object, f: pb.SplitBlockBloomFilter, plain: Callable[[object], bytes], ptype: str
) -> bool:
    """Against what one writes without this library: a Python loop calling xxhash per value,
    and the same loop also setting the filter's bits per value (the scalar spec algorithm)."""
    sample = values.to_pylist() if isinstance(values, pa.Array) else list(values.tolist())
    sample = sample[:200_000]
    scale = len(values) / len(sample)  # type: ignore[arg-type]
    hash_loop = best_of(lambda: [xxhash.xxh64_intdigest(plain(v)) for v in sample], 2) * scale
    words = [0] * (f.num_blocks * 8)
    z = f.num_blocks

    def insert_loop() -> None:
        for v in sample:
            h = xxhash.xxh64_intdigest(plain(v))
            block, key = ((h >> 32) * z) >> 32, h & 0xFFFFFFFF
            for i, salt in enumerate(SALTS):
                words[block * 8 + i] |= 1 << (((key * salt) & 0xFFFFFFFF) >> 27)

    loop_insert = best_of(insert_loop, 1) * scale
    ours_hash = best_of(lambda: pb.hash_values(values, ptype), REPEATS)
    ours_insert = best_of(lambda: f.insert(values, ptype), REPEATS)
    ok = report(
        "Python xxhash loop / ours, hashing only",
        hash_loop / ours_hash,
        ">= 10",
        hash_loop / ours_hash >= 10,
    )
    ok &= report(
        "Python xxhash + insert loop / ours hash+insert",
        loop_insert / ours_insert,
        ">= 10",
        loop_insert / ours_insert >= 10,
    )
    return ok


SALTS = [int(s) for s in SALT]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-time", action="store_true", help="time by CPU time, not wall")
    CPU_TIME = parser.parse_args().cpu_time
    sys.exit(0 if main() else 1)

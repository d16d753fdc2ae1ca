"""How much faster is the vectorised XXH64 than a Python loop over xxhash?

Prints ns/value for ``parquet_bloom.hash_values`` and for the obvious loop
(encode each value, call ``xxhash.xxh64_intdigest``), and their ratio, for 5M int64 and 1M
short strings (as a pyarrow array, a numpy 'U' array and a Python list). Ratios, not
asserts: timings on a shared machine vary, so each of ours is the best of several runs.

    python benchmarks/bench_hashing.py [--ints N] [--strings N] [--repeat R]
"""

from __future__ import annotations

import argparse
import struct

import numpy as np
import pyarrow as pa
import xxhash
from timing import best_of

from parquet_bloom import hash_values


def report(label: str, count: int, ours: float, loop: float) -> None:
    ours_ns, loop_ns = ours / count * 1e9, loop / count * 1e9
    print(f"{label:<44} {ours_ns:9.1f} {loop_ns:9.1f} {loop_ns / ours_ns:8.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ints", type=int, default=5_000_000)
    parser.add_argument("--strings", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    digest = xxhash.xxh64_intdigest

    ints = rng.integers(-(2**63), 2**63 - 1, args.ints, dtype=np.int64)
    as_python = ints.tolist()
    pack = struct.Struct("<q").pack
    assert int(hash_values(ints)[0]) == digest(pack(as_python[0]))
    loop = best_of(lambda: [digest(pack(v)) for v in as_python], 1)
    print(f"{'':<44} {'ours':>9} {'loop':>9} {'speedup':>9}   (ns/value)")
    report(
        f"{args.ints:,} int64 (numpy)",
        args.ints,
        best_of(lambda: hash_values(ints), args.repeat),
        loop,
    )

    lengths = rng.integers(5, 31, args.strings)
    text = [f"user-{i:08d}-{'x' * 30}"[:n] for i, n in enumerate(lengths.tolist())]
    assert int(hash_values(text[:1])[0]) == digest(text[0].encode())
    loop = best_of(lambda: [digest(s.encode()) for s in text], 1)
    label = f"{args.strings:,} strings of 5-30 bytes"
    arrow = pa.array(text)
    report(
        f"{label} (pyarrow)",
        args.strings,
        best_of(lambda: hash_values(arrow), args.repeat),
        loop,
    )
    unicode = np.array(text)
    report(
        f"{label} (numpy U)",
        args.strings,
        best_of(lambda: hash_values(unicode), args.repeat),
        loop,
    )
    report(f"{label} (list)", args.strings, best_of(lambda: hash_values(text), args.repeat), loop)


if __name__ == "__main__":
    main()

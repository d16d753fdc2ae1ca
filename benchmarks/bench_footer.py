"""Footer decode speed: parquet_bloom._format.decode_file_metadata vs pyarrow.

Builds a file with 10,000 column chunks (100 int64 columns x 100 row groups, statistics on),
then times, best of several runs:

- ``decode_file_metadata(footer)``: the fast decode a Bloom filter reader uses (the footer
  bytes are read once up front, so this is decode only);
- ``decode_file_metadata(footer, full=True)``: everything, as a footer rewrite needs;
- ``pyarrow.parquet.read_metadata(path)``: Arrow C++ opening the file and decoding its
  footer (the file is in the page cache after the first run).

The target is fast/pyarrow <= 3. Run: ``.venv/bin/python benchmarks/bench_footer.py``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from timing import best_of

from parquet_bloom._format import (
    FOOTER_TRAILER_SIZE,
    column_chunks,
    decode_file_metadata,
    parse_footer_trailer,
)

TARGET_RATIO = 3.0


def build_file(path: Path, columns: int, row_groups: int, rows_per_group: int) -> None:
    rng = np.random.default_rng(0)
    n = row_groups * rows_per_group
    table = pa.table({f"c{i:03d}": rng.integers(0, 1 << 40, n) for i in range(columns)})
    pq.write_table(table, path, row_group_size=rows_per_group, write_statistics=True)


def read_footer(path: Path) -> bytes:
    data = path.read_bytes()
    length = parse_footer_trailer(data[-FOOTER_TRAILER_SIZE:], file_size=len(data))
    return data[-FOOTER_TRAILER_SIZE - length : -FOOTER_TRAILER_SIZE]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--columns", type=int, default=100)
    parser.add_argument("--row-groups", type=int, default=100)
    parser.add_argument("--rows-per-group", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wide.parquet"
        build_file(path, args.columns, args.row_groups, args.rows_per_group)
        footer = read_footer(path)
        md = decode_file_metadata(footer)
        chunks = sum(len(rg.columns) for rg in md.row_groups)
        size = path.stat().st_size
        print(f"file: {size:,} bytes, footer: {len(footer):,} bytes, {chunks:,} column chunks")
        assert pq.read_metadata(path).num_row_groups == args.row_groups

        fast = best_of(lambda: decode_file_metadata(footer), args.repeat)
        full = best_of(lambda: decode_file_metadata(footer, full=True), max(5, args.repeat // 3))
        chunk_list = best_of(lambda: column_chunks(md), max(5, args.repeat // 3))
        arrow = best_of(lambda: pq.read_metadata(path), args.repeat)

    ratio = fast / arrow
    print(f"decode_file_metadata (fast): {fast * 1e3:8.2f} ms")
    print(f"decode_file_metadata (full): {full * 1e3:8.2f} ms  ({full / arrow:.1f}x pyarrow)")
    print(f"column_chunks (flatten):     {chunk_list * 1e3:8.2f} ms")
    print(f"pyarrow.parquet.read_metadata: {arrow * 1e3:6.2f} ms")
    print(f"ratio fast/pyarrow: {ratio:.2f} (target <= {TARGET_RATIO})")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Opening a wide footer: parquet_bloom's reader vs pyarrow.parquet.read_metadata.

Builds a file with 10,000 column chunks (100 int64 columns x 100 row groups, statistics on,
a Bloom filter on one column), then times, best of several runs taken in turns:

- ``BloomFilterReader(path)`` then ``column_chunk(50, "c000")``: opening the file ready to
  read one filter (the footer read, its top level and schema decoded, the row group list
  walked, one row group's column chunks decoded: ``_format.FooterView``);
- ``pyarrow.parquet.read_metadata(path)``: Arrow C++ opening the file and decoding its
  footer (the file is in the page cache after the first run);

and, for reference, ``decode_file_metadata(footer)`` (every row group's chunks, as the
audit and the rewrite decode them) and with ``full=True`` (everything, as a rewrite needs).

The target is open/pyarrow <= 1.5. Run: ``.venv/bin/python benchmarks/bench_footer.py``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from timing import best_in_turns, best_of

from parquet_bloom import BloomFilterReader
from parquet_bloom._format import (
    FOOTER_TRAILER_SIZE,
    decode_file_metadata,
    parse_footer_trailer,
)

TARGET_RATIO = 1.5


def build_file(path: Path, columns: int, row_groups: int, rows_per_group: int) -> None:
    rng = np.random.default_rng(0)
    n = row_groups * rows_per_group
    table = pa.table({f"c{i:03d}": rng.integers(0, 1 << 40, n) for i in range(columns)})
    pq.write_table(
        table,
        path,
        row_group_size=rows_per_group,
        write_statistics=True,
        bloom_filter_options={"c000": {"ndv": rows_per_group, "fpp": 0.01}},
    )


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

        row_group = args.row_groups // 2

        def open_ready() -> None:
            with BloomFilterReader(path) as reader:
                assert reader.column_chunk(row_group, "c000").bloom_filter_offset is not None

        times = best_in_turns(
            {"open": open_ready, "arrow": lambda: pq.read_metadata(path)}, args.repeat
        )
        fast = best_of(lambda: decode_file_metadata(footer), max(5, args.repeat // 3))
        full = best_of(lambda: decode_file_metadata(footer, full=True), max(5, args.repeat // 3))

    opened, arrow = times["open"], times["arrow"]
    ratio = opened / arrow
    print(f"BloomFilterReader, ready to read one filter: {opened * 1e3:8.2f} ms")
    print(f"pyarrow.parquet.read_metadata:               {arrow * 1e3:8.2f} ms")
    print(f"decode_file_metadata (every row group):      {fast * 1e3:8.2f} ms")
    print(f"decode_file_metadata (full=True):            {full * 1e3:8.2f} ms")
    print(f"ratio open/pyarrow: {ratio:.2f} (target <= {TARGET_RATIO})")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())

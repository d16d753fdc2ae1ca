"""The example data the README's blocks read, written by the writers they name: ``make demo``
leaves it in ``demo/`` and tests/test_readme.py writes it for its runs. Everything is
deterministic (seeded, one thread), so the README can show the exact output.

- ``orders.parquet``: 100,000 rows of 800 skus and 50 stores, written by DuckDB (which puts a
  Bloom filter on each dictionary-encoded column).
- ``lake/orders``: a Delta table written by deltalake in 8 appends (versions 0 to 7), each one
  file for each of the two regions: 16 files of 10,000 orders, no Bloom filters yet.
- ``clickhouse/``: a MergeTree part written by ClickHouse 26 (chDB), 4,096 rows with a
  ``bloom_filter`` and a ``tokenbf_v1`` skip index, and its table's ``ATTACH TABLE`` statement:
  copied from ``examples/clickhouse/`` (the demo does not install chDB).
- ``encrypted/``: an encrypted Parquet file with Bloom filters (parquet-mr's, from Apache
  parquet-testing) and its published test keys, copied from ``examples/encrypted/``.

Run ``python examples/readme_data.py DIRECTORY`` to write it (DIRECTORY is emptied first).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

ORDERS_ROWS = 100_000
APPENDS = 8
REGIONS = ("eu", "us")
ROWS_A_FILE = 10_000


def write_orders_file(path: Path) -> None:
    """orders.parquet, by DuckDB: one row group, filters on ``sku`` and ``store``."""
    import duckdb

    with duckdb.connect() as con:
        con.execute("SET threads = 1")  # one writer: the same bytes on every run
        con.execute(
            f"COPY (SELECT 'sku-' || (i % 800) AS sku, 'store-' || (i % 50) AS store, "
            f"i AS quantity FROM range({ORDERS_ROWS}) t(i)) TO '{path}' (FORMAT parquet)"
        )


def write_delta_table(path: Path) -> None:
    """lake/orders, by deltalake: order ids shuffled over every file (their statistics cannot
    rule a file out), partitioned by region; 16 files, versions 0 to 7."""
    from deltalake import write_deltalake

    rng = np.random.default_rng(30)
    rows_an_append = len(REGIONS) * ROWS_A_FILE
    order_ids = rng.permutation(APPENDS * rows_an_append).astype(np.int64) + 400_000
    regions = pa.array(np.repeat(REGIONS, ROWS_A_FILE))
    for append in range(APPENDS):
        batch = pa.table(
            {
                "order_id": order_ids[append * rows_an_append : (append + 1) * rows_an_append],
                "region": regions,
                "amount": rng.integers(1, 100_000, rows_an_append) / 100,
            }
        )
        write_deltalake(str(path), batch, mode="append", partition_by=["region"])


def write_example_data(directory: Path) -> list[str]:
    """Empty ``directory`` and write the example data into it; the names written."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    write_orders_file(directory / "orders.parquet")
    write_delta_table(directory / "lake" / "orders")
    shutil.copytree(Path(__file__).parent / "clickhouse", directory / "clickhouse")
    shutil.copytree(Path(__file__).parent / "encrypted", directory / "encrypted")
    return ["orders.parquet", "lake/orders", "clickhouse", "encrypted"]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/readme_data.py DIRECTORY")
    written = write_example_data(Path(sys.argv[1]))
    print(f"\nthe README's example data, in {sys.argv[1]}/: {', '.join(written)}")
    print(f"(its examples run there: cd {sys.argv[1]} && . ../.venv/bin/activate)")

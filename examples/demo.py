"""The main job, on an embedded example: write a Parquet file with Bloom filters using pyarrow,
then read the filters back with parquet-bloom and probe them.

Run with ``make demo``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import parquet_bloom as pb


def main() -> None:
    rows, row_group_size = 40_000, 10_000
    rng = np.random.default_rng(2026)
    table = pa.table(
        {
            "user_id": pa.array(rng.permutation(rows).astype(np.int64) * 1_000_003),
            "email": pa.array([f"user{i}@example.com" for i in range(rows)]),
            "country": pa.array(rng.choice(["DE", "FR", "JP", "BR", "US"], rows)),
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "users.parquet"
        pq.write_table(
            table,
            path,
            row_group_size=row_group_size,
            bloom_filter_options={
                "user_id": {"ndv": row_group_size, "fpp": 0.01},
                "email": {"ndv": row_group_size, "fpp": 0.01},
            },
        )
        print(
            f"wrote {path.name}: {rows} rows in {rows // row_group_size} row groups, "
            f"Bloom filters on user_id and email (pyarrow {pa.__version__})\n"
        )

        with pb.BloomFilterReader(path) as reader:
            filters = reader.filters()
            print(
                f"read {len(filters)} filters in {reader.reads} reads "
                f"({reader.bytes_read} bytes, footer included)\n"
            )
            print(
                f"{'row group':>9}  {'column':<8} {'bytes':>6} {'bits set':>9} "
                f"{'est. NDV':>9} {'fpp':>8}"
            )
            for (row_group, column), f in sorted(filters.items()):
                print(
                    f"{row_group:>9}  {column:<8} {f.num_bytes:>6} {f.fraction_set():>9.1%} "
                    f"{f.estimate_ndv():>9.0f} {f.fpp():>8.4f}"
                )

            wanted_id = int(table["user_id"][23_456].as_py())
            wanted_email = "user31337@example.com"
            print()
            for column, value in (
                ("user_id", wanted_id),
                ("email", wanted_email),
                ("email", "nobody@example.com"),
            ):
                groups = reader.row_groups_might_contain(column, [value])
                print(f"{column} = {value!r}: read row groups {groups} of {reader.num_row_groups}")

            # Without a filter nothing could be skipped; with them, check the answer is right.
            group = reader.row_groups_might_contain("email", [wanted_email])
            hits = [
                g
                for g in range(reader.num_row_groups)
                if wanted_email
                in pq.ParquetFile(path).read_row_group(g, ["email"]).column(0).to_pylist()
            ]
            assert set(hits) <= set(group), "a Bloom filter must never drop a row group"
            print(f"\nthe row group that holds {wanted_email!r} is {hits}: kept, as it must be")


if __name__ == "__main__":
    main()

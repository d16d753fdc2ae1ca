"""Small datasets of one ``id`` column with Bloom filters, and what probing every file gives:
what the index tests compare lookups with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import parquet_bloom as pb


def write_ids(path: Path, ids: np.ndarray) -> None:
    """A file of ``ids``, row groups of 1,000 rows, each with a filter for 1,000 values at 1 %."""
    pq.write_table(
        pa.table({"id": ids}),
        path,
        row_group_size=1000,
        bloom_filter_options={"id": {"ndv": 1000, "fpp": 0.01}},
    )


def probed(root: Path, values: Any) -> dict[str, list[int]]:
    """Each file under ``root`` -> the row groups its own filters say may hold a value."""
    out = {}
    for path in sorted(root.glob("*.parquet")):
        with pb.BloomFilterReader(str(path)) as reader:
            found = reader.row_groups_might_contain("id", values)
        if found:
            out[str(path)] = found
    return out

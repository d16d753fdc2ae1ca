"""The dataset ``prune`` returns for a URL reads what pyarrow's scan asks for and no more: for
each file left, its footer (pyarrow's 64 KiB tail read) and one read of the kept row group's
column chunks, no HEAD (the listing gave the sizes) and no read-ahead past the row group. Counts
and ranges are the S3 server's own."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

import parquet_bloom as pb

FILES = 3
ROW_GROUPS = 4
ROWS = 20_000  # a row group's; files of about 1.6 MiB, far over pyarrow's 64 KiB footer read


def _write(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    n = ROW_GROUPS * ROWS
    ids = rng.permutation(n).astype(np.int64) + seed * n
    table = pa.table({"id": ids, "v": rng.random(n), "w": rng.random(n)})
    pq.write_table(
        table,
        path,
        row_group_size=ROWS,
        bloom_filter_options={"id": {"ndv": ROWS, "fpp": 0.001}},
    )
    return path


def _chunk_span(path: Path, row_group: int) -> tuple[int, int]:
    """The bytes of a row group's column chunks: first start, last end (exclusive)."""
    rg = pq.ParquetFile(path).metadata.row_group(row_group)
    spans = []
    for j in range(rg.num_columns):
        c = rg.column(j)
        start = c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset
        spans.append((start, start + c.total_compressed_size))
    return min(s for s, _ in spans), max(e for _, e in spans)


def test_the_pruned_scan_reads_a_footer_and_the_kept_row_group(
    s3: Any, s3_requests: Any, tmp_path: Path
) -> None:
    paths = [_write(tmp_path / f"part-{i}.parquet", i) for i in range(FILES)]
    bucket = s3.bucket()
    for path in paths:
        s3.upload(path, f"s3://{bucket}/t/{path.name}")
    needle = int(pq.read_table(paths[1]).column("id")[ROWS * 2 + 7].as_py())  # row group 2
    expr = pc.field("id") == needle
    result = pb.prune(f"s3://{bucket}/t/", expr, storage_options=s3.storage_options)
    s3_requests.reset()
    table = result.dataset.to_table(filter=expr)
    requests = [(r.method, r.key, r.range) for r in s3_requests.list()]
    # (Asked after the scan: a fragment's row_groups reads its footer when not yet read.)
    kept = {Path(f.path).name: [g.id for g in f.row_groups] for f in result.dataset.get_fragments()}
    assert kept == {paths[1].name: [2]}  # no false positive at 0.1 %, for these files
    size = paths[1].stat().st_size
    start, end = _chunk_span(paths[1], 2)
    key = f"t/{paths[1].name}"
    assert requests == [
        ("GET", key, f"bytes={size - 64 * 1024}-{size - 1}"),  # pyarrow's footer read
        ("GET", key, f"bytes={start}-{end - 1}"),  # the row group, nothing past it
    ]
    expected = ds.dataset([str(p) for p in paths], format="parquet").to_table(filter=expr)
    assert expected.num_rows == 1
    assert table.equals(expected)
    # The dataset travels (to a process pool, say) with its filesystem and sizes.
    assert pickle.loads(pickle.dumps(result.dataset)).to_table(filter=expr).equals(expected)

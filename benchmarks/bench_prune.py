"""A point lookup on a dataset: pyarrow alone vs pruning with the Bloom filters first.

Writes FILES files of ROW_GROUPS row groups each (random int64 ids, so row group statistics
cannot rule anything out; Bloom filters on ``id`` and ``name``), then, for ``id == <one id>``:

- ``ds.to_table(filter=e)``: pyarrow's scan, with its statistics pruning;
- ``prune(ds, e).dataset.to_table(filter=e)``: our pruning (footers and filters read
  concurrently) and then the same scan over the surviving row groups; the time includes the
  pruning.

Bytes are counted through a pyarrow filesystem that wraps every file it opens (both scans and
our filter reads go through it); times are best of ``--repeat`` on the local filesystem with
the files in the page cache, which understates the gain on object storage, where every skipped
row group is a saved request. Run: ``.venv/bin/python benchmarks/bench_prune.py``.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from timing import best_of

from parquet_bloom import prune


class CountingFile:
    """A binary file whose reads add to a shared counter."""

    def __init__(self, raw: Any, counter: Counter) -> None:
        self._raw = raw
        self._counter = counter
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        data: bytes = self._raw.read(size)
        self._counter.add(len(data))
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._raw.seek(offset, whence))

    def tell(self) -> int:
        return int(self._raw.tell())

    def size(self) -> int:
        return int(self._raw.size)

    def close(self) -> None:
        self.closed = True
        self._raw.close()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False


class Counter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.bytes = 0
        self.opens = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.bytes += n

    def reset(self) -> None:
        self.bytes = self.opens = 0


class CountingHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    """The local filesystem (through fsspec), counting what its input files read. Not an
    FSSpecHandler, so prune opens files through it too rather than through fsspec directly."""

    def __init__(self, counter: Counter) -> None:
        self._inner = pafs.FSSpecHandler(fsspec.filesystem("file"))
        self._counter = counter

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountingHandler) and other._counter is self._counter

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_type_name(self) -> str:
        return "counting"

    def normalize_path(self, path: str) -> str:
        return str(self._inner.normalize_path(path))

    def get_file_info(self, paths: list[str]) -> Any:
        return self._inner.get_file_info(paths)

    def get_file_info_selector(self, selector: Any) -> Any:
        return self._inner.get_file_info_selector(selector)

    def open_input_file(self, path: str) -> pa.PythonFile:
        self._counter.opens += 1
        raw = fsspec.filesystem("file").open(path, "rb")
        return pa.PythonFile(CountingFile(raw, self._counter), mode="r")

    def open_input_stream(self, path: str) -> pa.PythonFile:
        return self.open_input_file(path)

    def create_dir(self, path: str, recursive: bool) -> None:
        raise NotImplementedError("read-only")

    delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = create_dir
    move = copy_file = open_output_stream = open_append_stream = create_dir


def build(directory: Path, files: int, row_groups: int, rows_per_group: int) -> list[int]:
    """Write the dataset; return every id, in file order."""
    rng = np.random.default_rng(7)
    options = {c: {"ndv": rows_per_group, "fpp": 0.01} for c in ("id", "name")}
    ids = []
    for f in range(files):
        n = row_groups * rows_per_group
        id_ = rng.integers(0, 2**62, n)
        table = pa.table(
            {
                "id": id_,
                "name": pa.array([f"user-{v:x}" for v in id_]),
                "amount": rng.random(n) * 1000,
                "category": pa.array(rng.integers(0, 50, n), pa.int32()),
            }
        )
        pq.write_table(
            table,
            directory / f"part-{f:03d}.parquet",
            row_group_size=rows_per_group,
            bloom_filter_options=options,
        )
        ids.extend(id_.tolist())
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--row-groups", type=int, default=10)
    parser.add_argument("--rows-per-group", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        ids = build(directory, args.files, args.row_groups, args.rows_per_group)
        size = sum(p.stat().st_size for p in directory.iterdir())
        print(
            f"dataset: {args.files} files x {args.row_groups} row groups x "
            f"{args.rows_per_group:,} rows, {size:,} bytes"
        )
        needle = ids[len(ids) // 2 + 17]
        expression = pc.field("id") == needle

        # Bytes, through the counting filesystem (fresh datasets: no cached footers).
        counter = Counter()
        counting = pafs.PyFileSystem(CountingHandler(counter))
        paths = sorted(str(p) for p in directory.iterdir())

        counter.reset()
        baseline_table = ds.dataset(paths, format="parquet", filesystem=counting).to_table(
            filter=expression
        )
        baseline_bytes = counter.bytes

        counter.reset()
        result = prune(ds.dataset(paths, format="parquet", filesystem=counting), expression)
        prune_bytes = counter.bytes
        pruned_table = result.dataset.to_table(filter=expression)
        pruned_bytes = counter.bytes
        assert pruned_table.equals(baseline_table), "pruning changed the result"
        print(f"lookup: {expression}, {baseline_table.num_rows} row(s)")
        print(f"prune: {result.report}")

        # Time, on the native local filesystem, pruning included.
        def baseline() -> pa.Table:
            return ds.dataset(directory, format="parquet").to_table(filter=expression)

        def pruned() -> pa.Table:
            dataset = ds.dataset(directory, format="parquet")
            return prune(dataset, expression).dataset.to_table(filter=expression)

        baseline(), pruned()  # warm the page cache
        baseline_time = best_of(baseline, args.repeat)
        pruned_time = best_of(pruned, args.repeat)
        prune_only = best_of(
            lambda: prune(ds.dataset(directory, format="parquet"), expression), args.repeat
        )

    print(
        f"bytes read: pyarrow {baseline_bytes:,}; prune + pyarrow {pruned_bytes:,} "
        f"(of which pruning {prune_bytes:,})"
    )
    print(f"  ratio pyarrow / pruned: {baseline_bytes / pruned_bytes:.1f}x fewer bytes")
    print(
        f"time: pyarrow {baseline_time * 1e3:.1f} ms; prune + pyarrow {pruned_time * 1e3:.1f} ms "
        f"(of which pruning {prune_only * 1e3:.1f} ms)"
    )
    print(f"  ratio pyarrow / pruned: {baseline_time / pruned_time:.1f}x faster")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

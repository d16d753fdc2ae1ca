# The compiled kernels (_kernels.c); see parquet_bloom.kernels, whose Kernels protocol this
# module satisfies. Each argument is read through the buffer protocol; the callers pass numpy
# arrays (numpy's stubs declare no __buffer__ before Python 3.12, hence the explicit union).
import os
from typing import Any, TypeAlias

from numpy.typing import NDArray

_Bytes: TypeAlias = NDArray[Any] | bytes | bytearray | memoryview

def xxh64_rows(
    data: _Bytes, offset: int, stride: int, width: int, count: int, out: _Bytes, /
) -> None: ...
def xxh64_spans(data: _Bytes, starts: _Bytes, lengths: _Bytes, out: _Bytes, /) -> None: ...
def xxh64_byte_arrays(data: _Bytes, count: int, out: _Bytes, /) -> int: ...
def rle_scan(
    data: _Bytes, bit_width: int, count: int, marks: _Bytes, target: int, /
) -> tuple[int, int, int]: ...
def snappy_decompress(data: _Bytes, out: _Bytes, length: int, /) -> None: ...

# Linux only.
def splice_copy(
    src_fd: int, dst_fd: int, start: int, end: int, pipe_read: int, pipe_write: int, align: int, /
) -> tuple[int, int]: ...
def insert(words: _Bytes, hashes: _Bytes, /) -> None: ...
def find(words: _Bytes, hashes: _Bytes, out: _Bytes, /) -> None: ...
def set_vector_path(use: bool, /) -> bool: ...
def hudi_hashes(data: _Bytes, offsets: _Bytes, num_hashes: int, out: _Bytes, /) -> None: ...
def probe_local_file(
    path: str | bytes | os.PathLike[str],
    size: int,
    tail_size: int,
    key: _Bytes,
    paths: _Bytes,
    path_offsets: _Bytes,
    types: _Bytes,
    probe_leaves: _Bytes,
    hash_counts: _Bytes,
    hashes: _Bytes,
    row_groups: _Bytes,
    /,
) -> tuple[Any, ...]: ...
def probe_local_files(
    paths: list[str],
    sizes: _Bytes,
    tail_size: int,
    key: _Bytes,
    paths_in_schema: _Bytes,
    path_offsets: _Bytes,
    types: _Bytes,
    probe_leaves: _Bytes,
    hash_counts: _Bytes,
    hashes: _Bytes,
    threads: int,
    /,
) -> list[tuple[Any, ...]]: ...

# The compiled kernels (_kernels.c); see parquet_bloom.kernels, whose Kernels protocol this
# module satisfies. Each argument is read through the buffer protocol; the callers pass numpy
# arrays (numpy's stubs declare no __buffer__ before Python 3.12, hence the explicit union).
from typing import Any, TypeAlias

from numpy.typing import NDArray

_Bytes: TypeAlias = NDArray[Any] | bytes | bytearray | memoryview

def xxh64_rows(
    data: _Bytes, offset: int, stride: int, width: int, count: int, out: _Bytes, /
) -> None: ...
def xxh64_spans(data: _Bytes, starts: _Bytes, lengths: _Bytes, out: _Bytes, /) -> None: ...
def byte_array_spans(data: _Bytes, count: int, starts: _Bytes, lengths: _Bytes, /) -> int: ...
def insert(words: _Bytes, hashes: _Bytes, /) -> None: ...

"""Record keys as Hudi hashes them: the UTF-8 bytes of each key, in one buffer with offsets.

Hudi adds ``key.getBytes(StandardCharsets.UTF_8)`` of each record key (a Java ``String``) to
its filter (docs/hudi.md#keys). For a Python ``str`` that is ``key.encode("utf-8")``, except
for surrogates, which a Java string holds as UTF-16 code units: Java encodes a high surrogate
followed by a low one as the code point they make, and any other surrogate as ``?`` (its
encoder's replacement byte); :func:`parquet_bloom._java.java_utf8` does the same. ``bytes``
are taken as they are.

Many keys are held as one ``uint8`` buffer and ``int64`` offsets (key ``i`` is
``data[offsets[i]:offsets[i + 1]]``), the layout of an Arrow binary array, so that an Arrow
column of keys is read without a Python object per key. Hudi refuses empty keys ("key length
must be > 0", ``HashFunction.hash``) and null keys; so do we, with ValueError.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._java import java_utf8

__all__ = ["KeyBuffer", "encode_keys"]


@dataclass(frozen=True)
class KeyBuffer:
    """Keys as one buffer: key ``i`` is ``data[offsets[i]:offsets[i + 1]]``."""

    data: NDArray[np.uint8]
    offsets: NDArray[np.int64]  # len(keys) + 1 non-decreasing offsets into data

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> NDArray[np.int64]:
        return np.diff(self.offsets)

    def key(self, i: int) -> bytes:
        return self.data[int(self.offsets[i]) : int(self.offsets[i + 1])].tobytes()


def _one(key: Any) -> bytes:
    if isinstance(key, str):
        return java_utf8(key)
    if isinstance(key, bytes | bytearray | memoryview):
        return bytes(key)
    if key is None:
        raise ValueError("a record key cannot be None (Hudi refuses null keys)")
    raise TypeError(f"a record key is a str or bytes, not {type(key).__name__}")


def _from_arrow(keys: Any) -> KeyBuffer:
    import pyarrow as pa

    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    if not (
        pa.types.is_string(keys.type)
        or pa.types.is_large_string(keys.type)
        or pa.types.is_binary(keys.type)
        or pa.types.is_large_binary(keys.type)
        or pa.types.is_string_view(keys.type)
        or pa.types.is_binary_view(keys.type)
    ):
        raise TypeError(f"record keys are strings or binaries, not Arrow {keys.type}")
    if keys.null_count:
        raise ValueError("a record key cannot be null (Hudi refuses null keys)")
    keys = keys.cast(pa.large_binary())
    _, offsets_buffer, data_buffer = keys.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype="<i8")[keys.offset : keys.offset + len(keys) + 1]
    start, stop = (int(offsets[0]), int(offsets[-1])) if len(offsets) else (0, 0)
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)[start:stop]
        if data_buffer is not None
        else np.zeros(0, np.uint8)
    )
    return KeyBuffer(data, (offsets - start).astype(np.int64))


def _from_python(keys: list[Any]) -> KeyBuffer:
    text = None
    if set(map(type, keys)) <= {str}:
        joined = "".join(keys)
        if joined.isascii():  # the common case: one encode, lengths from len()
            text = joined.encode("ascii")
    if text is None:
        encoded = [_one(k) for k in keys]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        text = b"".join(encoded)
    else:
        lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return KeyBuffer(np.frombuffer(text, dtype=np.uint8), offsets)


def encode_keys(keys: Any) -> KeyBuffer:
    """Record keys -> :class:`KeyBuffer`: an iterable of ``str`` / ``bytes``, a numpy array of
    strings, bytes or objects, or an Arrow string or binary array (no copy per key). Raises
    ValueError for an empty or null key, TypeError for anything else."""
    if isinstance(keys, str | bytes | bytearray | memoryview):
        raise TypeError("pass record keys as a sequence (a single key: might_contain)")
    module = type(keys).__module__
    if module.startswith("pyarrow"):
        buffer = _from_arrow(keys)
    else:
        if isinstance(keys, np.ndarray):
            keys = keys.ravel().tolist()
        elif not isinstance(keys, Iterable):
            raise TypeError(f"record keys must be iterable, not {type(keys).__name__}")
        buffer = _from_python(keys if isinstance(keys, list) else list(keys))
    if len(buffer) and int(np.diff(buffer.offsets).min()) <= 0:
        raise ValueError("a record key cannot be empty (Hudi: 'key length must be > 0')")
    return buffer

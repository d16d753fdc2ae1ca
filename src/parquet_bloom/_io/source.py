"""Positioned reads from one file, each exact and counted, whatever holds the file.

A :class:`ByteSource` reads byte ranges from a local path, a binary file object, or a path on
an fsspec or pyarrow filesystem. Every read is checked to return exactly the bytes asked for
(a short read means the file is shorter than its footer says, a located
:class:`~parquet_bloom.errors.CorruptFileError`), and counted (``reads``, ``bytes_read``), so
callers can report what a task cost. Reads are safe from several threads at once: local files
are read with ``pread``, file objects under a lock.

:func:`read_footer` is the one footer read: one read of the file's tail, a second only when the
footer is longer than that tail.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Sequence
from typing import IO, Any, NamedTuple

from parquet_bloom import _format as fmt
from parquet_bloom._io.ranges import ByteRange
from parquet_bloom.errors import CorruptFileError

__all__ = ["FOOTER_READ_SIZE", "ByteSource", "Footer", "SourceFile", "read_footer"]

# How much to read from the end of the file for the footer. Most footers are far smaller; a
# larger one costs exactly one more read.
FOOTER_READ_SIZE = 64 * 1024


class ByteSource:
    """Exact, counted, positioned reads from one file.

    ``source`` is a path (``str`` or ``os.PathLike``), a binary file object with ``seek`` and
    ``read`` (not closed here), or a path on ``filesystem``: an fsspec filesystem (read with
    its ``cat_ranges``) or a ``pyarrow.fs.FileSystem`` (read with ``read_at``).
    """

    def __init__(self, source: Any, *, filesystem: Any | None = None) -> None:
        self.reads = 0
        self.bytes_read = 0
        self._lock = threading.Lock()
        self._fd: int | None = None  # a local file we opened: read with pread
        self._file: IO[bytes] | None = None  # a caller's file object: seek and read, locked
        self._fs: Any | None = None  # an fsspec filesystem: cat_ranges
        self._arrow: Any | None = None  # a pyarrow RandomAccessFile: read_at
        self.local_path: str | None = None  # the path of a local file, for OS-level copies
        if filesystem is not None:
            if not isinstance(source, str):
                raise TypeError("with a filesystem, source must be a path string")
            self.name = source
            if hasattr(filesystem, "open_input_file"):  # pyarrow.fs.FileSystem
                self._arrow = filesystem.open_input_file(source)
                self.size = int(self._arrow.size())
            else:
                self._fs = filesystem
                self.size = int(filesystem.size(source))
        elif isinstance(source, str | os.PathLike):
            self.name = self.local_path = os.fspath(source)
            self._fd = os.open(self.name, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            self.size = os.fstat(self._fd).st_size
        elif hasattr(source, "read") and hasattr(source, "seek"):
            self._file = source
            self.name = str(getattr(source, "name", "<file object>"))
            self.size = source.seek(0, os.SEEK_END)
        else:
            raise TypeError(
                "source must be a path, a binary file object with seek() and read(), or a path "
                f"with filesystem=..., not {type(source).__name__}"
            )

    def read(self, ranges: Sequence[ByteRange]) -> list[bytes]:
        """The bytes of each range, in order; a short read raises ``CorruptFileError``."""
        if not ranges:
            return []
        if self._fs is not None:
            datas = [
                bytes(d)
                for d in self._fs.cat_ranges(
                    [self.name] * len(ranges),
                    [r.offset for r in ranges],
                    [r.end for r in ranges],
                )
            ]
        else:
            datas = [self._read_one(r) for r in ranges]
        for r, data in zip(ranges, datas, strict=True):
            with self._lock:
                self.reads += 1
                self.bytes_read += len(data)
            if len(data) != r.length:
                raise CorruptFileError(
                    f"short read: expected {r.length} bytes, got {len(data)}",
                    source=self.name,
                    offset=r.offset,
                )
        return datas

    def read_exact(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset``; a short read raises ``CorruptFileError``."""
        (data,) = self.read([ByteRange(offset, length)])
        return data

    def arrow_file(self) -> Any:
        """This file as pyarrow should open it (``pyarrow.parquet.ParquetFile(...)``): a local
        file by its path, so that pyarrow reads it natively; anything else as a file object
        whose reads are this source's own (positioned, exact, counted)."""
        if self.local_path is not None:
            return self.local_path
        return SourceFile(self)

    def _read_one(self, r: ByteRange) -> bytes:
        if self._fd is not None:
            parts, at = [], r.offset
            while at < r.end:  # pread may return less than asked (a signal, a pipe)
                part = os.pread(self._fd, r.end - at, at)
                if not part:
                    break
                parts.append(part)
                at += len(part)
            return b"".join(parts) if len(parts) != 1 else parts[0]
        if self._arrow is not None:
            return bytes(self._arrow.read_at(r.length, r.offset))
        assert self._file is not None
        with self._lock:
            self._file.seek(r.offset)
            return self._file.read(r.length)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._arrow is not None:
            self._arrow.close()
            self._arrow = None

    def __enter__(self) -> ByteSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SourceFile(io.RawIOBase):
    """A read-only, seekable file object over a :class:`ByteSource`, with a position of its
    own: several can read one source at once, each read a positioned read of the source."""

    def __init__(self, source: ByteSource) -> None:
        super().__init__()
        self._source = source
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self._source.size}
        if whence not in base:
            raise ValueError(f"invalid whence {whence!r}")
        if base[whence] + offset < 0:
            raise ValueError(f"negative seek position {base[whence] + offset}")
        self._position = base[whence] + offset
        return self._position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = max(0, min(len(view), self._source.size - self._position))
        if n:
            view[:n] = self._source.read_exact(self._position, n)
            self._position += n
        return n


class Footer(NamedTuple):
    """A file's footer: the Thrift ``FileMetaData`` bytes and the offset where they start."""

    data: bytes
    start: int


def read_footer(source: ByteSource, tail_size: int = FOOTER_READ_SIZE) -> Footer:
    """Read the footer of ``source``: one read of its last ``tail_size`` bytes, and one more
    when the footer is longer than that. The trailer is checked (magic, a length that fits)."""
    size = source.size
    if size < len(fmt.MAGIC) + fmt.FOOTER_TRAILER_SIZE:
        raise CorruptFileError(f"file of {size} bytes is too short to be Parquet")
    tail_len = min(size, tail_size)
    tail = source.read_exact(size - tail_len, tail_len)
    footer_len = fmt.parse_footer_trailer(tail[-fmt.FOOTER_TRAILER_SIZE :], file_size=size)
    trailer = fmt.FOOTER_TRAILER_SIZE
    start = size - trailer - footer_len
    if footer_len + trailer <= tail_len:
        return Footer(tail[tail_len - trailer - footer_len : -trailer], start)
    head = source.read_exact(start, footer_len + trailer - tail_len)
    return Footer(head + tail[:-trailer], start)

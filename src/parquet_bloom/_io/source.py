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

import errno
import io
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from stat import S_ISDIR
from typing import IO, Any, NamedTuple

from parquet_bloom import _format as fmt
from parquet_bloom._io import limits, location
from parquet_bloom._io.failures import describe_range, fetching
from parquet_bloom._io.ranges import MAX_GAP, ByteRange
from parquet_bloom.errors import CorruptFileError

__all__ = [
    "FOOTER_READ_SIZE",
    "REMOTE_MAX_GAP",
    "REMOTE_TAIL_SIZE",
    "ByteSource",
    "Footer",
    "SourceFile",
    "describe_range",
    "fetching",
    "read_footer",
]

# How much to read from the end of a local file (or a file object) for the footer. Most
# footers are far smaller; a larger one costs exactly one more read, which on a local file is
# microseconds: reading more would only copy bytes (docs/performance.md, "Tail reads").
FOOTER_READ_SIZE = 64 * 1024
# The first read of a file on a filesystem (object storage): footer and, for writers that put
# them just before it, the filters, in one request. Measured (docs/performance.md, "Tail
# reads"): a request costs its round trip whatever its size up to 8 MiB on the loopback test
# server; at a real store's ~100 MB/s a stream 1 MiB adds ~10 ms, under one round trip, and
# holds the footer and filters of most such files.
REMOTE_TAIL_SIZE = 1024 * 1024
# Filters this close together are fetched in one request from a filesystem: a gap of this many
# bytes costs less than another round trip (docs/object-storage.md, "Requests").
REMOTE_MAX_GAP = 1024 * 1024


# Positioned reads of a descriptor, where the platform has them (POSIX); elsewhere a local file
# is read through a file object under the source's lock.
pread: Callable[[int, int, int], bytes] | None = getattr(os, "pread", None)
_O_BINARY: int = getattr(os, "O_BINARY", 0)


def _fsspec_size(filesystem: Any, path: str) -> int:
    """The size of a file on an fsspec filesystem: one ``info`` (a HEAD on object stores). A
    directory (a prefix on object storage) is IsADirectoryError, which callers that take
    directories answer by listing it."""
    info = filesystem.info(path, **limits.deadline_kwargs(filesystem.info))
    if info.get("type") == "directory":
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if info.get("size") is None:
        raise OSError(f"{path}: the server does not tell the size; pass size=")
    return int(info["size"])


class ByteSource:
    """Exact, counted, positioned reads from one file.

    ``source`` is a path (``str`` or ``os.PathLike``), a binary file object with ``seek`` and
    ``read`` (not closed here), or a path on ``filesystem``: an fsspec filesystem (read with
    its ``cat_ranges``) or a ``pyarrow.fs.FileSystem`` (read with ``read_at``).
    """

    def __init__(
        self,
        source: Any,
        *,
        filesystem: Any | None = None,
        storage_options: Mapping[str, Any] | None = None,
        size: int | None = None,
        exists: bool = False,
    ) -> None:
        """``source``: a local path, a URL (``file://``, or any fsspec protocol, resolved with
        ``storage_options`` by :func:`parquet_bloom._io.location.resolve`), a binary file object,
        or a path on ``filesystem``. ``size``, when known (a listing gave it), is trusted: no
        size lookup (HEAD) is made, and a read past the object's real end is a located short
        read. ``exists``: the object is known to be there (another source of the same caller
        has read it): a "not found" from its first request is then a read error, not a
        missing file (see :func:`fetching`)."""
        if size is not None and (isinstance(size, bool) or not isinstance(size, int)):
            raise TypeError(f"size must be an integer, not {type(size).__name__}")
        if size is not None and size < 0:
            raise ValueError(f"size must be >= 0, not {size}")
        self.reads = 0
        self.bytes_read = 0
        # Whether a request about the object succeeded: a "not found" from then on means it
        # vanished while being read (fetching()).
        self._found = exists
        self._lock = threading.Lock()
        self._fd: int | None = None  # a local file we opened: read with pread
        self._file: IO[bytes] | None = None  # a caller's file object: seek and read, locked
        self._owned: IO[bytes] | None = None  # a file object we opened ourselves
        self._fs: Any | None = None  # an fsspec filesystem: cat_ranges
        self._arrow: Any | None = None  # a pyarrow RandomAccessFile: read_at
        self.local_path: str | None = None  # the path of a local file, for OS-level copies
        if filesystem is not None and not isinstance(source, str):
            raise TypeError("with a filesystem, source must be a path string")
        if isinstance(source, str | os.PathLike) and (
            filesystem is not None or storage_options is not None or location.is_url(str(source))
        ):
            text = os.fspath(source)
            filesystem, path = location.resolve(
                text, filesystem=filesystem, storage_options=storage_options
            )
            if filesystem is None:  # a file:// URL
                source = path
            else:
                # fsspec strips the protocol itself, so a URL names the file in messages and reads.
                self.name = text if location.is_url(text) and "::" not in text else path
        if filesystem is not None:
            if hasattr(filesystem, "open_input_file"):  # pyarrow.fs.FileSystem
                with fetching(self.name, action="open", found=self._found):
                    self._arrow = filesystem.open_input_file(path)
                    self.size = int(self._arrow.size()) if size is None else size
                self._found = True
            else:
                self._fs = filesystem
                self.size = size  # None: looked up, or learnt from a suffix read, when needed
        elif isinstance(source, str | os.PathLike):
            self.name = self.local_path = os.fspath(source)
            if pread is None:  # no positioned reads here (Windows): a file object, locked
                self._file = self._owned = open(self.name, "rb")  # noqa: SIM115  # close()
                descriptor = self._file.fileno()
            else:
                self._fd = descriptor = os.open(self.name, os.O_RDONLY | _O_BINARY)
            try:
                stat = os.fstat(descriptor)
                if S_ISDIR(stat.st_mode):
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), self.name)
            except BaseException:
                self.close()
                raise
            self.size = stat.st_size if size is None else size
        elif hasattr(source, "read") and hasattr(source, "seek"):
            self._file = source
            self.name = str(getattr(source, "name", "<file object>"))
            end = source.seek(0, os.SEEK_END)
            self.size = end if size is None else size
        else:
            raise TypeError(
                "source must be a path, a URL, a binary file object with seek() and read(), or "
                f"a path with filesystem=..., not {type(source).__name__}"
            )

    # -- the size, looked up only when a read needs it and nothing told it ---------------------

    _size: int | None = None
    size_lookups = 0  # size lookups made (a HEAD on object stores): requests, like reads

    @property
    def size(self) -> int:
        """The file's size: given, known from opening it, from the suffix read of
        :meth:`read_tail`, or else looked up (one request on object stores)."""
        if self._size is None:
            if self._fs is None:
                raise ValueError(f"the size of {self.name} is not known")
            with fetching(self.name, action="look up", found=self._found):
                size = _fsspec_size(self._fs, self.name)
            self._found = True
            with self._lock:
                self.size_lookups += 1
            self._size = size
        return self._size

    @size.setter
    def size(self, value: int | None) -> None:
        self._size = value

    @property
    def requests(self) -> int:
        """Requests made so far: reads and size lookups."""
        return self.reads + self.size_lookups

    @property
    def remote(self) -> bool:
        """Whether reads go through a filesystem (object storage: each read a round trip)."""
        return self._fs is not None or self._arrow is not None

    @property
    def default_tail_size(self) -> int:
        """How much of the file's end :func:`read_footer` reads first."""
        return REMOTE_TAIL_SIZE if self.remote else FOOTER_READ_SIZE

    @property
    def max_gap(self) -> int:
        """Ranges closer than this are read as one (:func:`parquet_bloom._io.ranges.coalesce`)."""
        return REMOTE_MAX_GAP if self.remote else MAX_GAP

    def read_tail(self, length: int) -> tuple[int, bytes]:
        """The last ``length`` bytes (all of a shorter file) and the offset they start at. When
        the size is not known, one suffix-range read gives both where the backend allows it
        (s3fs, fsspec's HTTP); elsewhere the size is looked up first."""
        if self._size is None and self._fs is not None:
            with fetching(self.name, None, length, found=self._found):
                got = _suffix_read(self._fs, self.name, length)
            self._found = True
            if got is not None:
                data, size = got
                self._count_read(len(data))
                self._size = size
                if len(data) != min(length, size):
                    raise CorruptFileError(
                        f"short read: expected {min(length, size)} bytes, got {len(data)}",
                        source=self.name,
                        offset=size - min(length, size),
                    )
                return size - len(data), data
        size = self.size
        n = min(size, length)
        if n == 0:  # an empty file: nothing to read (a read of no bytes may read them all)
            return size, b""
        return size - n, self.read_exact(size - n, n)

    def _count_read(self, length: int) -> None:
        """One read of ``length`` bytes, in ``reads`` and ``bytes_read`` (threads share a
        source: under its lock)."""
        with self._lock:
            self.reads += 1
            self.bytes_read += length

    def read(self, ranges: Sequence[ByteRange]) -> list[bytes]:
        """The bytes of each range, in order; a short read raises ``CorruptFileError``."""
        if not ranges:
            return []
        if self._fs is not None:
            start, end = ranges[0].offset, max(r.end for r in ranges)
            with fetching(self.name, start, end - start, found=self._found):
                fetched = self._fs.cat_ranges(
                    [self.name] * len(ranges),
                    [r.offset for r in ranges],
                    [r.end for r in ranges],
                    on_error="raise",
                    **limits.deadline_kwargs(self._fs.cat_ranges),
                )
            self._found = True
            datas = [bytes(d) for d in fetched]
        else:
            datas = [self._read_one(r) for r in ranges]
        for r, data in zip(ranges, datas, strict=True):
            self._count_read(len(data))
            if len(data) != r.length:
                raise CorruptFileError(
                    f"short read: expected {r.length} bytes, got {len(data)}",
                    source=self.name,
                    offset=r.offset,
                )
        return datas

    def read_exact(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset``; a short read raises ``CorruptFileError``."""
        fd = self._fd
        if fd is not None and pread is not None:
            # A local file, read whole at once (the usual case, a page at a time while
            # hashing): one pread, without read()'s lists; a short one goes the long way.
            data = pread(fd, length, offset)
            if len(data) == length:
                self._count_read(length)
                return data
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
        if self._fd is not None and pread is not None:
            parts, at = [], r.offset
            while at < r.end:  # pread may return less than asked (a signal, a pipe)
                part = pread(self._fd, r.end - at, at)
                if not part:
                    break
                parts.append(part)
                at += len(part)
            return b"".join(parts) if len(parts) != 1 else parts[0]
        if self._arrow is not None:
            with fetching(self.name, r.offset, r.length, found=True):
                return bytes(self._arrow.read_at(r.length, r.offset))
        assert self._file is not None
        with self._lock:
            self._file.seek(r.offset)
            return self._file.read(r.length)

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None
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
    """A file's footer: the Thrift ``FileMetaData`` bytes and the offset where they start; and
    the tail read that found it (``tail``, from offset ``tail_start``), which often holds the
    file's Bloom filters too."""

    data: bytes
    start: int
    tail_start: int = 0
    tail: bytes = b""


def read_footer(
    source: ByteSource, tail_size: int | None = None, *, encrypted: bool = False
) -> Footer:
    """Read the footer of ``source``: one read of its last ``tail_size`` bytes (default: the
    source's :attr:`~ByteSource.default_tail_size`), and one more when the footer is longer
    than that. The trailer is checked (magic, a length that fits). When the source does not
    know its size yet, the tail read is a suffix-range read that tells it. ``encrypted``: a
    file ending in ``PARE`` is read too (its footer's bytes are then the FileCryptoMetaData
    and the encrypted FileMetaData); otherwise it is an UnsupportedFileError."""
    if tail_size is None:
        tail_size = source.default_tail_size
    if isinstance(tail_size, bool) or not isinstance(tail_size, int):
        raise TypeError(f"tail_size must be an integer, not {type(tail_size).__name__}")
    if tail_size < fmt.FOOTER_TRAILER_SIZE:
        raise ValueError(f"tail_size must be at least {fmt.FOOTER_TRAILER_SIZE}, not {tail_size}")
    tail_start, tail = source.read_tail(tail_size)
    size = source.size
    if size < len(fmt.MAGIC) + fmt.FOOTER_TRAILER_SIZE:
        raise CorruptFileError(f"file of {size} bytes is too short to be Parquet")
    tail_len = len(tail)
    footer_len = fmt.parse_footer_trailer(
        tail[-fmt.FOOTER_TRAILER_SIZE :], file_size=size, encrypted=encrypted
    )
    trailer = fmt.FOOTER_TRAILER_SIZE
    start = size - trailer - footer_len
    if footer_len + trailer <= tail_len:
        return Footer(tail[tail_len - trailer - footer_len : -trailer], start, tail_start, tail)
    head = source.read_exact(start, footer_len + trailer - tail_len)
    return Footer(head + tail[:-trailer], start, tail_start, tail)


def _content_range_total(value: str | None) -> int | None:
    """The complete length in a ``Content-Range`` header (``bytes 10-19/20``), if given."""
    if not value or "/" not in value:
        return None
    total = value.rsplit("/", 1)[1].strip()
    return int(total) if total.isdigit() else None


def _suffix_read(filesystem: Any, path: str, length: int) -> tuple[bytes, int] | None:
    """The last ``length`` bytes of ``path`` and the object's size, in one request
    (``Range: bytes=-N``; docs/object-storage.md, "Requests"), on the backends that let us see
    the response's ``Content-Range``: s3fs and fsspec's HTTP. None elsewhere."""
    module = type(filesystem).__module__
    coroutine: Callable[[Any, str, int], Awaitable[tuple[bytes, int | None]]]
    if module.startswith("s3fs") and hasattr(filesystem, "_call_s3"):
        coroutine = _s3_suffix
    elif module.startswith("fsspec.implementations.http"):
        coroutine = _http_suffix
    else:
        return None
    from fsspec.asyn import sync  # fsspec is installed: the filesystem is one of its own

    result: tuple[bytes, int | None] = sync(
        filesystem.loop,
        coroutine,
        filesystem,
        path,
        length,
        timeout=limits.get_request_limits().total,
    )
    data, total = result
    return None if total is None else (data, total)


async def _s3_suffix(filesystem: Any, path: str, length: int) -> tuple[bytes, int | None]:
    bucket, key, version = filesystem.split_path(path)
    extra = {"VersionId": version} if version else {}
    response = await filesystem._call_s3(
        "get_object", Bucket=bucket, Key=key, Range=f"bytes=-{length}", **extra
    )
    try:
        data = await response["Body"].read()
    finally:
        response["Body"].close()
    total = _content_range_total(response.get("ContentRange"))
    if total is None and len(data) < length:  # the whole object, sent without a range
        total = len(data)
    return bytes(data), total


async def _http_suffix(filesystem: Any, url: str, length: int) -> tuple[bytes, int | None]:
    session = await filesystem.set_session()
    kwargs = dict(filesystem.kwargs)
    headers = dict(kwargs.pop("headers", None) or {})
    headers["Range"] = f"bytes=-{length}"
    async with session.get(filesystem.encode_url(url), headers=headers, **kwargs) as response:
        filesystem._raise_not_found_for_status(response, url)
        data = await response.read()
        if response.status == 200:  # the server ignored the range: the whole object
            return bytes(data), len(data)
        return bytes(data), _content_range_total(response.headers.get("Content-Range"))

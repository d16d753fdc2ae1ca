"""Atomic output, and copies of a source's unchanged bytes into it.

A :class:`FileSink` is a file that appears whole or not at all: it is written to a temporary
file next to its target, flushed, fsynced, given the mode (and, where allowed, the owner) of
the file it replaces, renamed over the target, and the directory is fsynced. On any exception
(KeyboardInterrupt included) the temporary file is removed and the target is untouched.

What goes into it: :meth:`FileSink.write` for new bytes, :meth:`FileSink.copy` for a byte range
of a :class:`~parquet_bloom._io.source.ByteSource` copied unchanged. A local source is copied by
the kernel where it can (``copy_file_range``: no bytes through user space, a fifth of the CPU
time of read and write), long runs around the page cache with ``direct=True`` (see
:data:`DIRECT_COPY_MIN`), the rest through one reused buffer; any other source through its
``read``. A copy can be cancelled from another thread between blocks.

The sink is the seam other outputs plug into: the rewrite uses only ``write``,
``copy``, ``sync`` and the context manager. Object stores (:mod:`~parquet_bloom._io.object_sink`):

- ``S3Sink``: an S3 object sent when complete, in one PutObject or a multipart upload
  completed only after every part succeeded and aborted on any failure; long unchanged ranges
  of a source object on the same endpoint are copied by the store (UploadPartCopy), the parts
  planned by ``plan_parts`` (pure);
- ``StreamSink``: any other fsspec filesystem, streamed through the process in bounded
  memory, committed by the backend's own mechanism.
"""

from __future__ import annotations

import errno
import io
import mmap
import os
import secrets
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import IO

from parquet_bloom import kernels
from parquet_bloom._io.source import ByteSource
from parquet_bloom.errors import CorruptFileError

__all__ = [
    "COPY_BUFFER_SIZE",
    "DIRECT_COPY_ALIGN",
    "DIRECT_COPY_MIN",
    "DIRECT_COPY_WINDOW",
    "KERNEL_COPY_SIZE",
    "MAPPED_COPY_MIN",
    "WRITEBACK_MIN",
    "Cancelled",
    "DirectorySyncs",
    "FileSink",
    "check_cancel",
    "copy_direct",
    "deferred_directory_syncs",
    "open_temporary",
    "write_all",
]

# Bytes copied per read and write when copying through user space: large enough that system
# calls cost nothing next to the copy, small enough not to matter for memory.
COPY_BUFFER_SIZE = 1024 * 1024

# copy_file_range(2): Linux and FreeBSD; elsewhere, or where the kernel or file system says it
# cannot (these errnos), the copy goes through user space.
copy_file_range = getattr(os, "copy_file_range", None)
_CANNOT_COPY_IN_KERNEL = frozenset(
    {errno.ENOSYS, errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF, errno.EPERM}
)
# Bytes per copy_file_range call: the copy can be cancelled between calls.
KERNEL_COPY_SIZE = 64 * 1024 * 1024

# Long runs of unchanged bytes are written around the page cache (O_DIRECT):
# copy_file_range on a file system that cannot share extents (ext4) copies every byte into new
# page-cache pages, which must then be written back, at a CPU cost the filter builds on the
# other threads would rather have (docs/performance.md, the rewrite). Where the run's offsets in
# the source and in the output are equal modulo the block (a body copied from the start, as
# when filters are added to a file that had none), the source's own pages are written as they
# are: the device reads them from the source's page cache, and no byte is copied by the CPU.
# They go through a pipe (splice(2): the pipe holds references to the pages, and the direct
# write takes them from it); where the kernel cannot splice, the source is mapped and written
# from the mapping (whose page tables cost the CPU more). Otherwise the run is read into one
# buffer and written from there. The copy is then not in the page cache: a reader of the new
# file reads it from the disk.
# Direct I/O wants file offsets, lengths and memory aligned to the device's logical block: 4 KiB
# is a multiple of the common ones (512 B, 4 KiB); a larger one refuses the writes (EINVAL) and
# the kernel's copy takes over. Mappings, of the source or anonymous, start on a page.
DIRECT_COPY_ALIGN = 4096
# Shorter runs are not worth the set-up: changing the file's flags, and for a run written from
# a buffer, the buffer and the copy into it.
DIRECT_COPY_MIN = 8 * 1024 * 1024
# The same for a run written from the source's own pages (no buffer, no copy).
MAPPED_COPY_MIN = 1024 * 1024
# Bytes read and written at a time: the buffer's size, or the source mapped at a time.
DIRECT_COPY_WINDOW = 8 * 1024 * 1024
# FileSink.writeback fsyncs only when at least this much went through the page cache since the
# last sync: what went around it is on its way to the disk already, and an fsync costs a
# journal commit and a flush of the device's cache whatever it has to write.
WRITEBACK_MIN = 4 * 1024 * 1024
O_DIRECT: int | None = getattr(os, "O_DIRECT", None)
# Errors that say "not here" (a file system without direct I/O, a block larger than we align
# to): the copy goes on through copy_file_range.
_CANNOT_WRITE_DIRECT = frozenset({errno.EINVAL, errno.EOPNOTSUPP})
# write(2) for direct I/O, under a name of its own so that tests can make it fail.
write_direct = os.write
# splice(2) (Linux), under a name of its own so that tests can make it fail or take it away;
# None elsewhere. Errors that say "not for these files" (a file system that cannot splice, or
# not into a direct write): the mapped copy takes over from where the pipe stopped.
splice: Callable[..., int] | None = getattr(os, "splice", None)
_SYSTEM_SPLICE = splice
_CANNOT_SPLICE = frozenset({errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS})
# Bytes a pipe of the spliced copy holds, asked for with F_SETPIPE_SZ: Linux lets anyone have
# up to 1 MiB (/proc/sys/fs/pipe-max-size). Refused, the source is mapped instead.
SPLICE_PIPE_SIZE = 1024 * 1024
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, which Python names on Linux only


# Errors of writing the output itself (its device, its quota, its size limit, a read-only file
# system), which name no file: the sink names its target in them.
_OUTPUT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EFBIG, errno.EROFS} | {getattr(errno, "EDQUOT", errno.ENOSPC)}
)


# What os.link says on a filesystem without hard links (FAT, some network and FUSE mounts).
_NO_LINKS = frozenset(
    getattr(errno, name)
    for name in ("EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS", "EMLINK", "EXDEV")
    if hasattr(errno, name)
)


def _create_new(written: str, target: str) -> None:
    """Make the complete file ``written`` appear as ``target`` only if no ``target`` exists
    (FileExistsError naming it otherwise)."""
    try:
        os.link(written, target)
        return
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, "it exists already", target) from None
    except OSError as err:
        if err.errno not in _NO_LINKS:
            raise
    with open(written, "rb") as source:
        data = source.read()
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, "it exists already", target) from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


class Cancelled(Exception):
    """A copy was told to stop (its caller failed elsewhere): the sink is to be aborted."""


class FileSink:
    """A local file that becomes ``target`` only when the ``with`` block completes.

    ``like``: the stat of the file being replaced, whose permissions the new file takes, and
    its owner and group where we may give them (root may; anyone may keep their own).
    ``exclusive``: the file must not exist yet; it appears by a hard link of the complete
    temporary file (atomic, and refused when the name exists: FileExistsError), or, where the
    filesystem has no hard links, by an exclusive create (O_EXCL) written whole.
    """

    bytes_uploaded = 0  # nothing is sent to a store (an object sink's counts)
    bytes_copied = 0

    def __init__(
        self, target: str, like: os.stat_result | None = None, *, exclusive: bool = False
    ) -> None:
        self.target = target
        self._like = like
        self._exclusive = exclusive
        self._directory = os.path.dirname(os.path.abspath(target))
        self._tmp_path: str | None = None
        self._out: IO[bytes] | None = None
        self._inputs: dict[str, int] = {}  # local sources' descriptors, for the kernel's copies
        self._inputs_lock = threading.Lock()
        self._cached = 0  # bytes written through the page cache since the last sync

    # -- lifetime -----------------------------------------------------------------------------

    def __enter__(self) -> FileSink:
        if not os.path.isdir(self._directory):  # else the error would name our temporary file
            raise FileNotFoundError(
                errno.ENOENT, f"no directory to write {self.target!r} in", self._directory
            )
        try:
            self._tmp_path, self._out = open_temporary(
                self._directory, os.path.basename(self.target)
            )
        except OSError as err:  # it would name our temporary file, not the output
            if err.errno is None:
                raise
            reason = f"{err.strerror or err}: cannot write {self.target}"
            raise type(err)(err.errno, reason, self.target) from err
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._tmp_path is not None and self._out is not None
        committed = False
        written = None
        try:
            try:
                written = self._out.tell()
                if exc_type is None:
                    self.sync()
            finally:
                self._out.close()
                self._close_inputs()
            if exc_type is None:
                if self._like is not None:
                    _take_ownership_and_mode(self._tmp_path, self._like)
                if self._exclusive:
                    _create_new(self._tmp_path, self.target)
                else:
                    os.replace(self._tmp_path, self.target)
                committed = True
        except OSError as err:  # the final sync, close or rename
            named = self._named(err, written)
            if named is err:
                raise
            raise named from err
        finally:
            if not committed or self._exclusive:  # a link leaves the temporary name too
                with suppress(FileNotFoundError):
                    os.unlink(self._tmp_path)
        if isinstance(exc, OSError) and exc.errno in _OUTPUT_ERRNOS and exc.filename is None:
            # The output's own failure (a full disk, a file size limit) inside the block:
            # named here, where the target is known, once the temporary file is gone.
            raise self._named(exc, written).with_traceback(exc.__traceback__) from exc
        if committed:
            deferred = _deferred_syncs.get()
            if deferred is None:
                _fsync_directory(self._directory)
            else:
                deferred.add(self._directory)

    def _named(self, err: OSError, written: int | None) -> OSError:
        """``err`` (same type and errno) naming the target and how far the output got; an
        error that names a file already is left as it is."""
        if err.filename is not None or err.errno is None:
            return err
        where = "" if written is None else f" after {written:,} bytes"
        reason = err.strerror or str(err)
        return type(err)(err.errno, f"{reason}: cannot write {self.target}{where}", self.target)

    # -- output -------------------------------------------------------------------------------

    def write(self, data: bytes | memoryview) -> None:
        """Append ``data``."""
        write_all(self._file(), data)
        self._cached += len(data)

    def sync(self) -> None:
        """Flush what was written and fsync it."""
        out = self._file()
        out.flush()
        os.fsync(out.fileno())
        self._cached = 0

    def writeback(self) -> None:
        """Get what was written so far on its way to the disk, so that the sync that ends the
        ``with`` block has little left to wait for: an fsync, if at least
        :data:`WRITEBACK_MIN` bytes went through the page cache since the last one."""
        if self._cached >= WRITEBACK_MIN:
            self.sync()

    def copy(
        self,
        source: ByteSource,
        start: int,
        end: int,
        *,
        cancel: threading.Event | None = None,
        direct: bool = False,
    ) -> None:
        """Append ``source[start:end]``: with ``direct``, its long aligned runs around the
        page cache; the rest in the kernel where it can, else through one reused buffer. A
        source shorter than ``end`` raises ``CorruptFileError``; ``cancel`` set stops the copy
        between blocks (the sink must then be aborted)."""
        out = self._file()
        if source.local_path is None:
            _copy_reads(source, out, start, end, cancel)
            self._cached += end - start
            return
        fd = self._input(source.local_path)
        self._cached += _copy_local(fd, out, start, end, source.name, cancel, direct)

    def _file(self) -> IO[bytes]:
        if self._out is None:
            raise RuntimeError("the sink is used outside its with block")
        return self._out

    def _input(self, path: str) -> int:
        with self._inputs_lock:
            if path not in self._inputs:
                self._inputs[path] = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            return self._inputs[path]

    def _close_inputs(self) -> None:
        with self._inputs_lock:
            for fd in self._inputs.values():
                os.close(fd)
            self._inputs.clear()


class DirectorySyncs:
    """Directories whose fsync, which makes a FileSink's rename durable, was put off (see
    :func:`deferred_directory_syncs`): many files renamed into one directory then cost one
    fsync of it, not one each."""

    def __init__(self) -> None:
        self._directories: set[str] = set()
        self._lock = threading.Lock()

    def add(self, directory: str) -> None:
        with self._lock:
            self._directories.add(directory)

    def sync(self) -> dict[str, OSError]:
        """Fsync each directory once; the error of each that failed (its files' renames may
        not survive a crash)."""
        with self._lock:
            directories, self._directories = sorted(self._directories), set()
        failed = {}
        for directory in directories:
            try:
                _fsync_directory(directory)
            except OSError as err:
                failed[directory] = err
        return failed


_deferred_syncs: ContextVar[DirectorySyncs | None] = ContextVar(
    "parquet_bloom_deferred_syncs", default=None
)


@contextmanager
def deferred_directory_syncs(syncs: DirectorySyncs) -> Iterator[DirectorySyncs]:
    """Within the block (in this thread or task), a FileSink's rename is not yet durable when
    its ``with`` block ends: its directory goes to ``syncs`` instead, whose
    :meth:`~DirectorySyncs.sync` the caller must run (and check) before relying on the files."""
    token = _deferred_syncs.set(syncs)
    try:
        yield syncs
    finally:
        _deferred_syncs.reset(token)


def open_temporary(directory: str, name: str) -> tuple[str, IO[bytes]]:
    """Create a new file next to the destination (a rename within one directory is atomic)
    and open it for writing, unbuffered. Mode 0o666 less the umask, as for any new file."""
    for _ in range(100):
        path = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666
            )
        except FileExistsError:
            continue
        return path, os.fdopen(fd, "wb", buffering=0)
    raise FileExistsError(f"cannot create a temporary file in {directory}")


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable (POSIX); not possible, nor needed, on Windows."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _take_ownership_and_mode(path: str, like: os.stat_result) -> None:
    if hasattr(os, "chown"):
        current = os.stat(path)
        if (current.st_uid, current.st_gid) != (like.st_uid, like.st_gid):
            # Not allowed unless root (or the group is one of ours): the file is then ours.
            with suppress(PermissionError):
                os.chown(path, like.st_uid, like.st_gid)
    # After chown, which may clear the set-id bits.
    os.chmod(path, stat.S_IMODE(like.st_mode))


def write_all(out: IO[bytes], data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = out.write(view)
        if written is None:  # a non-blocking raw file that could not write; ours never is
            raise OSError("the output file accepted no bytes")
        view = view[written:]


def check_cancel(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled


def _copy_reads(
    source: ByteSource, out: IO[bytes], start: int, end: int, cancel: threading.Event | None
) -> None:
    """Copy through the source's own reads (a source that is not a local file)."""
    position = start
    while position < end:
        check_cancel(cancel)
        length = min(COPY_BUFFER_SIZE, end - position)
        write_all(out, source.read_exact(position, length))
        position += length


def _copy_local(
    fd: int,
    out: IO[bytes],
    start: int,
    end: int,
    source: str,
    cancel: threading.Event | None,
    direct: bool,
) -> int:
    """Copy ``fd[start:end]`` to the end of ``out``; returns how many bytes went through the
    page cache (all but what direct I/O wrote, give or take its unaligned head)."""
    position = start
    if isinstance(out, io.FileIO):  # unbuffered: the kernel may write to its descriptor
        if direct and O_DIRECT is not None:
            position = copy_direct(fd, out, start, end, source, cancel)
        cached_from = position
        if copy_file_range is not None:
            position = _copy_in_kernel(fd, out, position, end, cancel)
    else:
        cached_from = start
    if position < end:
        _copy_through_buffer(fd, out, position, end, source, cancel)
    return end - cached_from


# Positioned reads into a buffer (POSIX); where the platform has none (Windows), a seek and a
# read under one lock, since the sink's copies may share a descriptor between threads.
preadv: Callable[[int, list[memoryview], int], int] | None = getattr(os, "preadv", None)
_seek_lock = threading.Lock()


def _read_into(fd: int, buffer: memoryview, position: int) -> int:
    if preadv is not None:
        return preadv(fd, [buffer], position)
    with _seek_lock:
        os.lseek(fd, position, os.SEEK_SET)
        data = os.read(fd, len(buffer))
    buffer[: len(data)] = data
    return len(data)


def _copy_through_buffer(
    fd: int,
    out: IO[bytes],
    start: int,
    end: int,
    source: str,
    cancel: threading.Event | None,
) -> None:
    buffer = memoryview(bytearray(min(COPY_BUFFER_SIZE, end - start)))
    position = start
    while position < end:
        check_cancel(cancel)
        n = _read_into(fd, buffer[: min(len(buffer), end - position)], position)
        if not n:
            raise CorruptFileError(
                f"short read: the file ended {end - position} bytes early",
                source=source,
                offset=end,
            )
        write_all(out, buffer[:n])
        position += n


def _copy_in_kernel(
    fd: int, out: io.FileIO, start: int, end: int, cancel: threading.Event | None
) -> int:
    """Copy what the kernel will of ``fd[start:end]``; returns where it stopped (``end``, or
    earlier when the file ended or the kernel cannot, for the buffered copy to go on from)."""
    assert copy_file_range is not None
    position = start
    while position < end:
        check_cancel(cancel)
        try:
            copied = copy_file_range(
                fd, out.fileno(), min(KERNEL_COPY_SIZE, end - position), position
            )
        except OSError as err:
            if err.errno in _CANNOT_COPY_IN_KERNEL and position == start:
                return position
            raise
        if copied == 0:  # the source ended early: the buffered copy reports it
            return position
        position += copied
    return position


def copy_direct(
    fd: int,
    out: io.FileIO,
    start: int,
    end: int,
    source: str,
    cancel: threading.Event | None,
) -> int:
    """Copy most of ``fd[start:end]`` to the end of ``out`` with direct I/O: all but the head
    (up to where ``out`` reaches an aligned offset, copied here first the usual way) and the
    tail (less than a block). Returns where it stopped, for the usual copy to go on from:
    ``start`` when the run is too short for direct I/O, else the tail's start, or wherever
    direct I/O was refused or the source ended."""
    import fcntl

    assert O_DIRECT is not None
    first = start + -out.tell() % DIRECT_COPY_ALIGN  # where the output is aligned
    last = first + (end - first) // DIRECT_COPY_ALIGN * DIRECT_COPY_ALIGN
    # Where the source is aligned too (to what mmap needs: a page, 4 KiB on most machines), its
    # pages are written as they are.
    mapped = first % max(DIRECT_COPY_ALIGN, mmap.ALLOCATIONGRANULARITY) == 0
    if last - first < max(MAPPED_COPY_MIN if mapped else DIRECT_COPY_MIN, DIRECT_COPY_ALIGN):
        return start
    _copy_local(fd, out, start, first, source, cancel, direct=False)
    out_fd = out.fileno()
    flags = fcntl.fcntl(out_fd, fcntl.F_GETFL)
    try:
        fcntl.fcntl(out_fd, fcntl.F_SETFL, flags | O_DIRECT)
    except OSError as err:
        if err.errno in _CANNOT_WRITE_DIRECT:
            return first
        raise
    try:
        if mapped:
            position = _write_spliced(fd, out_fd, first, last, cancel)
            if position == last:
                return position
            return _write_mapped_windows(fd, out_fd, position, last, cancel)
        # Anonymous mappings are page-aligned, as direct I/O wants its memory.
        with mmap.mmap(-1, min(DIRECT_COPY_WINDOW, last - first)) as buffer:
            return _write_direct_windows(fd, out_fd, buffer, first, last, cancel)
    finally:
        fcntl.fcntl(out_fd, fcntl.F_SETFL, flags)


def _write_direct_windows(
    src_fd: int, fd: int, buffer: mmap.mmap, start: int, end: int, cancel: threading.Event | None
) -> int:
    """Copy ``src[start:end]`` (aligned) through ``buffer`` to ``fd`` (opened for direct I/O);
    returns where it stopped."""
    position = start
    # Views are released on the way out, whatever still holds them (a traceback may): else the
    # buffer could not be closed.
    with memoryview(buffer) as whole:
        while position < end:
            check_cancel(cancel)
            length = min(len(whole), end - position)
            with whole[:length] as window:
                if os.preadv(src_fd, [window], position) < length:
                    return position  # the source ended early: the buffered copy reports it
            done = _write_window(fd, whole, length)
            position += done
            if done < length:
                return position
    return position


def _write_spliced(
    src_fd: int, fd: int, start: int, end: int, cancel: threading.Event | None
) -> int:
    """Copy ``src[start:end]`` (aligned, as is the output) to ``fd`` (opened for direct I/O)
    through a pipe: the source's page-cache pages go into it and out of it into direct writes,
    never mapped or copied; by the compiled kernels' loop where there is one, else by the loop
    here, the same system calls either way. Returns where it stopped: ``end``, or where the
    kernel could not splice these files, a write left the output unaligned or the source
    ended, for the mapped copy, then the usual one, to go on from (what the pipe still held is
    dropped)."""
    import fcntl

    if splice is None:
        return start
    read_end, write_end = os.pipe()
    try:
        try:
            sized = fcntl.fcntl(write_end, _F_SETPIPE_SZ, SPLICE_PIPE_SIZE)
        except OSError:
            sized = 0
        if sized < SPLICE_PIPE_SIZE:
            # A pipe of the default 64 KiB makes 16 times the calls and direct writes (the
            # copy took half as long again as mapped): the mapped copy does better then.
            return start
        position = start
        loop = _compiled_splice_loop()
        while loop is not None and position < end:
            # The loop in C, without the GIL between its system calls: a thread that waits
            # for the GIL to issue the next write leaves the disk idle (docs/performance.md).
            # As many bytes a call as a kernel copy, so that a copy can still be cancelled.
            check_cancel(cancel)
            stop = min(end, position + KERNEL_COPY_SIZE)
            reached, error = loop(
                src_fd, fd, position, stop, read_end, write_end, DIRECT_COPY_ALIGN
            )
            if error in _CANNOT_SPLICE:
                return reached
            if error:
                raise OSError(error, os.strerror(error))
            if reached < stop:  # the source ended, or a write left the output unaligned
                return reached
            position = reached
        while position < end:
            check_cancel(cancel)
            try:
                held = splice(src_fd, write_end, end - position, offset_src=position)
                if held == 0:
                    return position  # the source ended early: the usual copy reports it
                while held:
                    written = splice(read_end, fd, held)
                    position += written
                    held -= written
                    if written <= 0 or written % DIRECT_COPY_ALIGN:  # (unaligned from here)
                        return position
            except OSError as err:
                if err.errno in _CANNOT_SPLICE:
                    return position
                raise
        return position
    finally:
        os.close(read_end)
        os.close(write_end)


def _compiled_splice_loop() -> Callable[..., tuple[int, int]] | None:
    """The compiled kernels' splice loop (Linux), unless the kernels are off or ``splice`` is
    not the system's (a test's stand-in, which only the loop in Python calls)."""
    if splice is not _SYSTEM_SPLICE:
        return None
    return getattr(kernels.compiled, "splice_copy", None)


def _write_mapped_windows(
    src_fd: int, fd: int, start: int, end: int, cancel: threading.Event | None
) -> int:
    """Copy ``src[start:end]`` (aligned, as is the output) to ``fd`` (opened for direct I/O)
    from the source's own pages, mapped a window at a time; returns where it stopped."""
    position = start
    while position < end:
        check_cancel(cancel)
        length = min(DIRECT_COPY_WINDOW, end - position)
        try:
            window = mmap.mmap(src_fd, length, access=mmap.ACCESS_READ, offset=position)
        except (ValueError, OSError):  # shorter than that: the buffered copy reports it
            return position
        with window, memoryview(window) as whole:
            done = _write_window(fd, whole, length)
        position += done
        if done < length:
            return position
    return position


def _write_window(fd: int, whole: memoryview, length: int) -> int:
    """Write ``whole[:length]`` to ``fd`` (opened for direct I/O); returns how much was
    written before direct I/O was refused, a short write left the output unaligned, or the
    memory could not be read (EFAULT: a mapped source cut short under the mapping), for the
    usual copy to go on from there (and report a source that ended)."""
    done = 0
    while done < length:
        with whole[done:length] as rest:
            try:
                written = write_direct(fd, rest)
            except OSError as err:
                if err.errno in _CANNOT_WRITE_DIRECT or err.errno == errno.EFAULT:
                    return done
                raise
        done += written
        if written % DIRECT_COPY_ALIGN:  # a short write left the output unaligned
            return done
    return done

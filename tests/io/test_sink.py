"""The atomic output and the copies of unchanged bytes into it: direct I/O, the kernel's copy
and the buffered copy give the same bytes, and a failure anywhere leaves no output.
"""

from __future__ import annotations

import errno
import hashlib
import io
import itertools
import os
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

import parquet_bloom as pb
from parquet_bloom import kernels
from parquet_bloom._io import sink
from parquet_bloom._io.object_sink import SOURCE, WRITTEN, Part, Piece, plan_parts
from parquet_bloom._io.source import ByteSource
from parquet_bloom._rewrite.api import rewrite_bloom_filters
from parquet_bloom._sbbf import SplitBlockBloomFilter
from tests.rewrite.files import (
    check_rewrite,
    write_sources,
)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_sources(tmp_path_factory.mktemp("sources"))


# -- the sink on its own ------------------------------------------------------------------------


def test_a_sink_appears_whole_with_what_was_written_and_copied(tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    data = random.Random(3).randbytes(3 * sink.COPY_BUFFER_SIZE + 5)
    src.write_bytes(data)
    target = tmp_path / "out.bin"
    with ByteSource(src) as local, ByteSource(io.BytesIO(data)) as remote:
        assert local.local_path == str(src) and remote.local_path is None
        with sink.FileSink(str(target)) as out:
            out.write(b"head")
            out.copy(local, 10, 2 * sink.COPY_BUFFER_SIZE + 1)
            out.copy(remote, 7, 3 * sink.COPY_BUFFER_SIZE)  # through the source's own reads
            assert not target.exists()  # not before the block completes
    expected = (
        b"head" + data[10 : 2 * sink.COPY_BUFFER_SIZE + 1] + data[7 : 3 * sink.COPY_BUFFER_SIZE]
    )
    assert target.read_bytes() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin", "src.bin"]


@pytest.mark.parametrize("where", ["local", "file object"])
def test_a_source_shorter_than_the_copy_is_corrupt_and_leaves_nothing(
    tmp_path: Path, where: str
) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 1000)
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with (
        ByteSource(src if where == "local" else io.BytesIO(src.read_bytes())) as source,
        pytest.raises(pb.CorruptFileError, match="short read"),
        sink.FileSink(str(target)) as out,
    ):
        out.copy(source, 0, 1010)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin", "src.bin"]


def test_a_cancelled_copy_stops_and_leaves_nothing(tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 1000)
    cancel = threading.Event()
    cancel.set()
    with (
        ByteSource(src) as source,
        pytest.raises(sink.Cancelled),
        sink.FileSink(str(tmp_path / "out.bin")) as out,
    ):
        out.copy(source, 0, 1000, cancel=cancel)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.bin"]


class FailingFile:
    """A file that raises OSError once ``budget`` bytes have been written (a full disk, a
    crash): it writes what fits, then fails."""

    def __init__(self, inner: IO[bytes], budget: int) -> None:
        self.inner = inner
        self.budget = budget

    def write(self, data: bytes | memoryview) -> int:
        if self.budget <= 0:
            raise OSError(28, "No space left on device (simulated)")
        part = bytes(data[: self.budget])
        self.budget -= len(part)
        written: int = self.inner.write(part)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("source", ["pyarrow-filters", "deltalake-filters"])
def test_a_crash_mid_write_leaves_src_intact_and_no_dst(
    sources: dict[str, Path], source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src.parquet"
    src.write_bytes(sources[source].read_bytes())
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    dst = tmp_path / "out.parquet"
    probe = rewrite_bloom_filters(src, dst, columns=["id", "name"], remove=["code"])
    size = probe.bytes_after
    dst.unlink()
    real_open = sink.open_temporary
    rng = random.Random(1)
    budgets = [0, 1, 4, size - 9, size - 1, *rng.sample(range(size), 12)]
    for budget in budgets:

        def failing_open(directory: str, name: str, budget: int = budget) -> tuple[str, Any]:
            path, file = real_open(directory, name)
            return path, FailingFile(file, budget)

        monkeypatch.setattr(sink, "open_temporary", failing_open)
        for options in ({"in_place": True}, {"dst": dst}):
            with pytest.raises(OSError, match="simulated"):
                rewrite_bloom_filters(src, columns=["id", "name"], remove=["code"], **options)
            assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
            assert sorted(os.listdir(tmp_path)) == ["src.parquet"], budget


@pytest.fixture
def small_direct_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Direct I/O for the small test files too, in several windows (or pipefuls) each."""
    if sink.O_DIRECT is None:
        pytest.skip("no O_DIRECT on this platform")
    monkeypatch.setattr(sink, "DIRECT_COPY_MIN", sink.DIRECT_COPY_ALIGN)
    monkeypatch.setattr(sink, "MAPPED_COPY_MIN", sink.DIRECT_COPY_ALIGN)
    monkeypatch.setattr(sink, "DIRECT_COPY_WINDOW", 4 * sink.DIRECT_COPY_ALIGN)
    monkeypatch.setattr(sink, "SPLICE_PIPE_SIZE", 4 * sink.DIRECT_COPY_ALIGN)


def record_direct_copies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (start, stop) of every run of the body copied with direct I/O."""
    real = sink.copy_direct
    runs: list[tuple[int, int]] = []

    def recording(src: Any, out: Any, start: int, *args: Any) -> int:
        stop = real(src, out, start, *args)
        runs.append((start, stop))
        return stop

    monkeypatch.setattr(sink, "copy_direct", recording)
    return runs


def direct_runs_of_a_rewrite(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[int, int]]:
    """Rewrite ``src`` (a filter for "id") as patched, check that the bytes are those of the
    rewrite without direct I/O, and return the runs the patched one copied with it."""
    with monkeypatch.context() as without:
        without.setattr(sink, "O_DIRECT", None)
        expected = tmp_path / "expected.parquet"
        rewrite_bloom_filters(src, expected, columns=["id"])
    runs = record_direct_copies(monkeypatch)
    out = tmp_path / "out.parquet"
    rewrite_bloom_filters(src, out, columns=["id"])
    assert out.read_bytes() == expected.read_bytes()
    return runs


@pytest.mark.usefixtures("small_direct_copies")
@pytest.mark.parametrize("source", ["pyarrow-plain", "deltalake-filters"])
def test_the_body_is_copied_around_the_page_cache_in_the_kernel_and_through_a_buffer_alike(
    sources: dict[str, Path], source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Long runs go around the page cache (O_DIRECT) where the file system allows; the rest is
    # copied by copy_file_range where the kernel can, and through a buffer where it cannot (EXDEV
    # across file systems, ENOSYS on old kernels): the same bytes every way. deltalake puts its
    # filters after each row group, so its body has splices, after which the source's pages no
    # longer line up with the output's blocks (those runs take the kernel's copy).
    if sink.copy_file_range is None:
        pytest.skip("no copy_file_range on this platform")
    src = sources[source]
    options: dict[str, Any] = {"columns": ["id"], "remove": ["code"]}
    direct, kernel, buffered = (tmp_path / f"{way}.parquet" for way in ("d", "k", "b"))

    runs = record_direct_copies(monkeypatch)
    kernel_calls: list[int] = []
    real_copy_file_range = sink.copy_file_range

    def counting(*args: Any) -> int:
        kernel_calls.append(args[2])
        return real_copy_file_range(*args)  # type: ignore[no-any-return]

    monkeypatch.setattr(sink, "copy_file_range", counting)
    rewrite_bloom_filters(src, direct, **options)
    copied = sum(stop - start for start, stop in runs)
    assert copied > src.stat().st_size // 2, runs  # most of the body went around the cache
    assert kernel_calls  # the heads and tails did not

    monkeypatch.setattr(sink, "O_DIRECT", None)
    kernel_calls.clear()
    rewrite_bloom_filters(src, kernel, **options)
    assert kernel_calls

    def cannot(*args: Any) -> int:
        raise OSError(errno.EXDEV, "Invalid cross-device link (simulated)")

    monkeypatch.setattr(sink, "copy_file_range", cannot)
    rewrite_bloom_filters(src, buffered, **options)
    # And where the platform has no positioned reads (Windows): a seek and a read.
    seeked = tmp_path / "s.parquet"
    monkeypatch.setattr(sink, "preadv", None)
    rewrite_bloom_filters(src, seeked, **options)
    assert direct.read_bytes() == kernel.read_bytes() == buffered.read_bytes()
    assert seeked.read_bytes() == buffered.read_bytes()
    check_rewrite(src, direct, rewrite_bloom_filters(src, direct, **options))


def record_calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[tuple[Any, ...]]:
    """The arguments of every call of ``sink.<name>`` from now on."""
    real = getattr(sink, name)
    calls: list[tuple[Any, ...]] = []

    def recording(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(sink, name, recording)
    return calls


# The source's own pages are written through a pipe (splice), by the compiled kernels' loop
# where they are built (and splice is the system's) or by the loop in Python, or from a mapping
# where the kernel cannot splice: the tests of those writes run every way.
WAYS = ["spliced", "spliced in Python", "mapped"]


def direct_writes(
    monkeypatch: pytest.MonkeyPatch,
    way: str,
    behave: Callable[[int, int, Callable[[int], int]], int],
) -> None:
    """Route each direct write of the source's own pages through ``behave(call, length,
    write)``: ``write(k)`` writes the first ``k`` of the ``length`` bytes for real and returns
    how many it wrote; ``behave`` returns what the write is to return, or raises. ``way``:
    through the pipe (splice) or, with splice taken away, from the mapping."""
    calls = itertools.count()
    if way == "mapped":
        monkeypatch.setattr(sink, "splice", None)
        real_write = sink.write_direct

        def write_direct(fd: int, data: memoryview) -> int:
            def write(k: int) -> int:
                with data[:k] as part:  # released here, whatever a traceback holds
                    return real_write(fd, part)

            return behave(next(calls), len(data), write)

        monkeypatch.setattr(sink, "write_direct", write_direct)
        return
    real_splice = sink.splice
    assert real_splice is not None

    def splice(src: int, dst: int, count: int, **offsets: Any) -> int:
        if offsets:  # from the source into the pipe
            return real_splice(src, dst, count, **offsets)
        return behave(next(calls), count, lambda k: real_splice(src, dst, k))

    monkeypatch.setattr(sink, "splice", splice)


@pytest.fixture
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param != "mapped" and sink.splice is None:
        pytest.skip("no splice(2) on this platform")
    if request.param == "mapped":
        monkeypatch.setattr(sink, "splice", None)
    if request.param == "spliced in Python":
        monkeypatch.setattr(kernels, "compiled", None)
    elif request.param == "spliced" and sink._compiled_splice_loop() is None:
        pytest.skip("the compiled kernels are not built or have no splice loop here")
    return str(request.param)


def test_the_compiled_splice_loop_copies_stops_and_returns_errors(tmp_path: Path) -> None:
    # The loop without the GIL: the bytes asked for; up to the end of a source shorter than
    # that; up to a write that is not a multiple of `align`; an error's errno returned (a
    # descriptor not open for writing), not raised.
    loop = sink._compiled_splice_loop()
    if loop is None:
        pytest.skip("the compiled kernels are not built or have no splice loop here")
    data = random.Random(5).randbytes(3_000_000)
    (tmp_path / "src.bin").write_bytes(data)
    out = tmp_path / "out.bin"

    def run(start: int, end: int, align: int, flags: int = os.O_WRONLY) -> tuple[int, int]:
        # A pipe of its own each time, as _write_spliced has: one left holding bytes would
        # block the next copy.
        fds = [os.open(tmp_path / "src.bin", os.O_RDONLY), *os.pipe()]
        fds.append(os.open(out, flags | os.O_CREAT | os.O_TRUNC))
        try:
            assert loop is not None
            return loop(fds[0], fds[3], start, end, fds[1], fds[2], align)
        finally:
            for fd in fds:
                os.close(fd)

    for start, end, reached in (
        (0, len(data), len(data)),
        (1000, 200_000, 200_000),
        (4096, len(data) + 5000, len(data)),  # the source ends first
    ):
        assert run(start, end, 1) == (reached, 0)
        assert out.read_bytes() == data[start:reached]
    reached, error = run(0, len(data), 7)  # the first write (a pipeful) is not a multiple of 7
    assert error == 0 and 0 < reached < len(data) and reached % 7
    assert out.read_bytes() == data[:reached]
    assert run(0, 10_000, 1, os.O_RDONLY) == (0, errno.EBADF)
    assert run(0, 10_000, 1, os.O_WRONLY | os.O_APPEND) == (0, errno.EINVAL)  # cannot splice
    with pytest.raises(ValueError, match="start -1"):
        run(-1, 10, 1)


@pytest.mark.usefixtures("small_direct_copies")
def test_the_compiled_loop_copies_a_slice_a_call_and_can_be_cancelled_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where it is built, the compiled loop does the spliced copy, KERNEL_COPY_SIZE bytes a call
    # (checking for a cancel before each); the same bytes.
    loop = sink._compiled_splice_loop()
    if loop is None:
        pytest.skip("the compiled kernels are not built or have no splice loop here")
    align = sink.DIRECT_COPY_ALIGN
    monkeypatch.setattr(sink, "KERNEL_COPY_SIZE", 8 * align)
    calls: list[tuple[int, int]] = []

    def recording(src: int, dst: int, start: int, end: int, *rest: int) -> tuple[int, int]:
        calls.append((start, end))
        assert loop is not None
        return loop(src, dst, start, end, *rest)

    monkeypatch.setattr(kernels.compiled, "splice_copy", recording)
    data = random.Random(11).randbytes(30 * align + 5)
    (tmp_path / "src.bin").write_bytes(data)
    with sink.FileSink(str(tmp_path / "out.bin")) as out:
        out.copy(ByteSource(str(tmp_path / "src.bin")), 0, len(data), direct=True)
    assert (tmp_path / "out.bin").read_bytes() == data
    assert calls == [(k * align, min(k + 8, 30) * align) for k in range(0, 30, 8)]
    cancel = threading.Event()
    cancel.set()
    calls.clear()
    src = os.open(tmp_path / "src.bin", os.O_RDONLY)
    dst = os.open(tmp_path / "out.bin", os.O_WRONLY)
    try:
        with pytest.raises(sink.Cancelled):
            sink._write_spliced(src, dst, 0, 8 * align, cancel)
    finally:
        os.close(src)
        os.close(dst)
    assert calls == []


@pytest.mark.parametrize("way", ["spliced", "spliced in Python"], indirect=True)
def test_a_file_that_cannot_be_spliced_into_is_left_to_the_mapping_either_loop(
    way: str, tmp_path: Path
) -> None:
    # splice(2) refuses an output opened to append (EINVAL): nothing is written, and the copy
    # reports where the mapping is to go on from, its start.
    (tmp_path / "src.bin").write_bytes(bytes(1 << 16))
    src = os.open(tmp_path / "src.bin", os.O_RDONLY)
    dst = os.open(tmp_path / "out.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        assert sink._write_spliced(src, dst, 4096, 1 << 16, None) == 4096
    finally:
        os.close(src)
        os.close(dst)
    assert (tmp_path / "out.bin").read_bytes() == b""


@pytest.mark.parametrize("way", ["spliced", "spliced in Python"], indirect=True)
def test_an_error_while_splicing_is_raised_either_loop(way: str, tmp_path: Path) -> None:
    # Not "cannot splice here" (EINVAL...): an error, from either loop.
    (tmp_path / "src.bin").write_bytes(bytes(1 << 16))
    src = os.open(tmp_path / "src.bin", os.O_RDONLY)
    dst = os.open(tmp_path / "src.bin", os.O_RDONLY)
    try:
        with pytest.raises(OSError) as raised:
            sink._write_spliced(src, dst, 0, 1 << 16, None)
        assert raised.value.errno == errno.EBADF
    finally:
        os.close(src)
        os.close(dst)


@pytest.mark.usefixtures("small_direct_copies")
@pytest.mark.parametrize("way", WAYS, indirect=True)
@pytest.mark.parametrize(
    ("written", "start", "aligned"),
    [
        (0, 0, True),  # a body copied from the start: source and output line up
        (100, 100, True),  # both 100 bytes past a block: aligned from 4096 on
        (0, 8192, True),
        (100, 0, False),  # the output 100 bytes ahead of the source: through a buffer
        (4096, 777, False),
    ],
)
def test_direct_copies_write_the_sources_own_pages_where_they_line_up(
    way: str,
    written: int,
    start: int,
    aligned: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Where a run's offsets in the source and the output are equal modulo the block, the
    # source's pages are written as they are (through a pipe, else mapped); otherwise they go
    # through a buffer. The same bytes every way, the unaligned head and tail copied the usual
    # way.
    data = random.Random(start).randbytes(20 * sink.DIRECT_COPY_ALIGN + 123)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    ways = ("_write_spliced", "_write_mapped_windows", "_write_direct_windows")
    calls = {name: record_calls(monkeypatch, name) for name in ways}
    with sink.FileSink(str(tmp_path / "out.bin")) as out:
        out.write(b"h" * written)
        out.copy(ByteSource(str(src)), start, len(data), direct=True)
    assert (tmp_path / "out.bin").read_bytes() == b"h" * written + data[start:]
    used = [name for name in ways for _ in calls[name]]  # (each called at most once, in order)
    if not aligned:
        assert used == ["_write_direct_windows"]
    elif way != "mapped":
        assert used == ["_write_spliced"]
    else:  # no splice here: the pipe writes nothing, the mapping all
        assert used == ["_write_spliced", "_write_mapped_windows"]


@pytest.mark.usefixtures("small_direct_copies")
@pytest.mark.parametrize("refusal", ["refused", "smaller"])
def test_a_pipe_that_cannot_be_sized_leaves_the_copy_to_the_mapping(
    refusal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pipe left at its default size (F_SETPIPE_SZ refused, or granted less) would take many
    # more calls and smaller direct writes than mapping the source: the mapping copies it all.
    import fcntl

    if sink.splice is None:
        pytest.skip("no splice(2) on this platform")
    real_fcntl = fcntl.fcntl

    def limited(fd: int, cmd: int, arg: int = 0) -> Any:
        if cmd == sink._F_SETPIPE_SZ:
            if refusal == "refused":
                raise OSError(errno.EPERM, "Operation not permitted (simulated)")
            return real_fcntl(fd, cmd, arg // 2)
        return real_fcntl(fd, cmd, arg)

    monkeypatch.setattr(fcntl, "fcntl", limited)
    spliced = record_calls(monkeypatch, "_write_spliced")
    mapped = record_calls(monkeypatch, "_write_mapped_windows")
    data = random.Random(3).randbytes(20 * sink.DIRECT_COPY_ALIGN + 5)
    (tmp_path / "src.bin").write_bytes(data)
    with sink.FileSink(str(tmp_path / "out.bin")) as out:
        out.copy(ByteSource(str(tmp_path / "src.bin")), 0, len(data), direct=True)
    assert (tmp_path / "out.bin").read_bytes() == data
    ((_, _, start, end, _),) = spliced
    assert mapped == [(mapped[0][0], mapped[0][1], start, end, None)]  # all of it, mapped


@pytest.mark.usefixtures("small_direct_copies")
@pytest.mark.parametrize("way", WAYS, indirect=True)
@pytest.mark.parametrize("mapped", [True, False])
def test_a_source_shorter_than_its_copy_is_reported_whichever_way(
    way: str, mapped: bool, tmp_path: Path
) -> None:
    # A source cut short (truncated since its footer was read) cannot be spliced, mapped or
    # read into the buffer to the end of the run: the usual copy goes on and reports where it
    # ended.
    src = tmp_path / "src.bin"
    src.write_bytes(bytes(10 * sink.DIRECT_COPY_ALIGN))
    with (
        pytest.raises(pb.CorruptFileError, match="ended 4096 bytes early"),
        sink.FileSink(str(tmp_path / "out.bin")) as out,
    ):
        out.write(b"" if mapped else b"h")
        out.copy(ByteSource(str(src)), 0, 11 * sink.DIRECT_COPY_ALIGN, direct=True)
    assert sorted(os.listdir(tmp_path)) == ["src.bin"]


@pytest.mark.usefixtures("small_direct_copies")
def test_a_fault_after_a_short_mapped_write_goes_on_from_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A short write of whole blocks moves the output on; a fault (EFAULT) on the next one must
    # not hand the usual copy the window's start, which would write those blocks twice.
    data = random.Random(7).randbytes(12 * sink.DIRECT_COPY_ALIGN + 123)
    src = tmp_path / "src.bin"
    src.write_bytes(data)

    def short_then_fault(call: int, length: int, write: Callable[[int], int]) -> int:
        if call == 0:
            return write(sink.DIRECT_COPY_ALIGN)
        if call == 1:
            raise OSError(errno.EFAULT, "Bad address (simulated)")
        return write(length)

    direct_writes(monkeypatch, "mapped", short_then_fault)
    with sink.FileSink(str(tmp_path / "out.bin")) as out:
        out.copy(ByteSource(str(src)), 0, len(data), direct=True)
    assert (tmp_path / "out.bin").read_bytes() == data


@pytest.mark.usefixtures("small_direct_copies")
@pytest.mark.parametrize("way", WAYS, indirect=True)
@pytest.mark.parametrize("refused", ["flag", "first write", "later write"])
def test_direct_io_refused_falls_back_to_the_same_bytes(
    sources: dict[str, Path],
    way: str,
    refused: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A file system may refuse O_DIRECT when the flag is set, or only at a write (EINVAL): the
    # copy goes on without it from where it stopped.
    import fcntl

    if refused == "flag":
        real_fcntl = fcntl.fcntl

        def no_direct(fd: int, cmd: int, arg: int = 0) -> Any:
            if cmd == fcntl.F_SETFL and arg & sink.O_DIRECT:
                raise OSError(errno.EINVAL, "Invalid argument (simulated)")
            return real_fcntl(fd, cmd, arg)

        monkeypatch.setattr(fcntl, "fcntl", no_direct)
    else:
        refuse_from = 0 if refused == "first write" else 2

        def refusing(call: int, length: int, write: Callable[[int], int]) -> int:
            if call < refuse_from:
                return write(length)
            raise OSError(errno.EINVAL, "Invalid argument (simulated)")

        direct_writes(monkeypatch, way, refusing)
    mapped = record_calls(monkeypatch, "_write_mapped_windows")
    ((start, stop),) = direct_runs_of_a_rewrite(sources["pyarrow-plain"], tmp_path, monkeypatch)
    if refused == "flag":
        assert stop == start  # the body starts aligned: no head
    elif way != "mapped":  # a splice refused: the mapping writes the rest, around the cache
        assert mapped and stop > start
    else:
        direct = 2 * sink.DIRECT_COPY_WINDOW if refused == "later write" else 0
        assert stop == start + direct


@pytest.mark.usefixtures("small_direct_copies")
@pytest.mark.parametrize("way", WAYS, indirect=True)
@pytest.mark.parametrize("short", ["aligned", "unaligned"])
def test_short_direct_writes_go_on_from_where_they_stopped(
    sources: dict[str, Path], way: str, short: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A write may write less than asked. A whole number of blocks: the next write goes on from
    # there. Anything else would leave the output unaligned for direct I/O, so the copy goes on
    # without it (simulated by writing the odd length with the flag cleared).
    import fcntl

    src = sources["deltalake-filters"]
    align = sink.DIRECT_COPY_ALIGN
    outputs: list[int] = []
    real_fcntl = fcntl.fcntl

    def remember_output(fd: int, cmd: int, arg: int = 0) -> Any:
        if cmd == fcntl.F_SETFL and arg & sink.O_DIRECT:
            outputs.append(fd)
        return real_fcntl(fd, cmd, arg)

    monkeypatch.setattr(fcntl, "fcntl", remember_output)

    def partial(call: int, length: int, write: Callable[[int], int]) -> int:
        if short == "aligned" or length <= align:
            return write(max(align, length // 2 // align * align))
        flags = real_fcntl(outputs[-1], fcntl.F_GETFL)
        real_fcntl(outputs[-1], fcntl.F_SETFL, flags & ~sink.O_DIRECT)
        try:
            return write(align + 1)
        finally:
            real_fcntl(outputs[-1], fcntl.F_SETFL, flags)

    direct_writes(monkeypatch, way, partial)
    runs = direct_runs_of_a_rewrite(src, tmp_path, monkeypatch)
    if short == "aligned":
        assert sum(stop - start for start, stop in runs) > src.stat().st_size // 2
    else:
        assert runs[0] == (0, align + 1)  # the body starts aligned; its first write was odd


@pytest.mark.usefixtures("small_direct_copies")
@pytest.mark.parametrize("way", WAYS, indirect=True)
def test_a_disk_full_during_the_direct_copy_leaves_no_file(
    sources: dict[str, Path], way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src.parquet"
    src.write_bytes(sources["pyarrow-filters"].read_bytes())
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    left = [0]  # direct writes before the disk is full

    def full(call: int, length: int, write: Callable[[int], int]) -> int:
        if left[0] > 0:
            left[0] -= 1
            return write(length)
        raise OSError(errno.ENOSPC, "No space left on device (simulated)")

    direct_writes(monkeypatch, way, full)
    for budget in (0, 1, 3):
        for options in ({"in_place": True}, {"dst": tmp_path / "out.parquet"}):
            left[0] = budget
            with pytest.raises(OSError, match="simulated"):
                rewrite_bloom_filters(src, columns=["id"], **options)
            assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
            assert sorted(os.listdir(tmp_path)) == ["src.parquet"]


def test_a_disk_full_during_the_kernel_copy_leaves_no_file(
    sources: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An error that is not "cannot copy here" (ENOSPC, EIO) is an error, not a fallback.
    src = tmp_path / "src.parquet"
    src.write_bytes(sources["pyarrow-filters"].read_bytes())
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    if sink.copy_file_range is None:
        pytest.skip("no copy_file_range on this platform")

    def full(*args: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device (simulated)")

    monkeypatch.setattr(sink, "copy_file_range", full)
    for options in ({"in_place": True}, {"dst": tmp_path / "out.parquet"}):
        with pytest.raises(OSError, match="simulated"):
            rewrite_bloom_filters(src, columns=["id"], **options)
        assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
        assert sorted(os.listdir(tmp_path)) == ["src.parquet"]


def test_a_failed_rename_leaves_no_file(
    sources: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_rename(a: str, b: str) -> None:
        raise PermissionError("rename refused (simulated)")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(PermissionError):
        rewrite_bloom_filters(sources["pyarrow-plain"], tmp_path / "out.parquet", columns=["id"])
    assert os.listdir(tmp_path) == []


# A real failure of the output's writes, no stand-in: the kernel refuses writes past the
# process's file size limit (RLIMIT_FSIZE) with EFBIG, as a full disk refuses them with ENOSPC;
# SIGXFSZ, which would kill the process first, is ignored. In a child process, so that the
# limit is its own.
_LIMITED_REWRITE = """
import json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), int(sys.argv[3])))
import parquet_bloom as pb
try:
    pb.rewrite_bloom_filters(sys.argv[1], sys.argv[2], columns=["id"])
except OSError as err:
    print(json.dumps([type(err).__name__, err.errno, err.filename, str(err)]))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="RLIMIT_FSIZE is POSIX")
def test_an_output_that_cannot_grow_names_its_path_and_leaves_nothing(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    import json
    import subprocess
    import sys

    src = sources["pyarrow-filters"]
    out = tmp_path / "out" / "rewritten.parquet"
    out.parent.mkdir()
    limit = 16 * 1024
    assert src.stat().st_size > 2 * limit
    done = subprocess.run(
        [sys.executable, "-B", "-c", _LIMITED_REWRITE, str(src), str(out), str(limit)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    kind, number, filename, message = json.loads(done.stdout)
    assert (kind, number) == ("OSError", errno.EFBIG), done.stdout
    assert filename == str(out)
    assert str(out) in message and "bytes" in message, message
    assert os.listdir(out.parent) == []


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_an_output_directory_not_ours_to_write_names_the_output(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    # A directory without write permission; root writes anywhere but in sysfs, which refuses
    # new files to everyone.
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.geteuid() == 0:
        if not os.path.isdir("/sys/kernel"):
            pytest.skip("root, and no sysfs to be refused by")
        locked = Path("/sys")
    with pytest.raises(PermissionError) as caught:
        rewrite_bloom_filters(sources["pyarrow-plain"], locked / "out.parquet", columns=["id"])
    assert caught.value.filename == str(locked / "out.parquet")


@pytest.mark.parametrize("direct", [False, True])
def test_a_failure_while_building_filters_creates_no_file(
    sources: dict[str, Path], direct: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if direct:  # the body copy, around the page cache, is told to stop
        monkeypatch.setattr(sink, "DIRECT_COPY_MIN", sink.DIRECT_COPY_ALIGN)
        monkeypatch.setattr(sink, "MAPPED_COPY_MIN", sink.DIRECT_COPY_ALIGN)
        monkeypatch.setattr(sink, "DIRECT_COPY_WINDOW", sink.DIRECT_COPY_ALIGN)

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(SplitBlockBloomFilter, "insert_hashes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rewrite_bloom_filters(sources["pyarrow-plain"], tmp_path / "out.parquet", columns=["id"])
    assert os.listdir(tmp_path) == []


# -- the parts of an object on S3 (pure) ----------------------------------------------------------

MiB = 1024 * 1024


def _check_parts(pieces: list[Piece], parts: list[Part], min_part: int) -> None:
    """The parts hold the pieces' bytes in order, every part but the last is at least
    ``min_part``, and a copied part is one range of the source."""

    def flat(ps: list[Piece]) -> list[tuple[int, int]]:
        return [(p.origin, p.offset + i) for p in ps for i in range(p.length)]

    assert flat([p for part in parts for p in part.pieces]) == flat(pieces)
    assert all(part.length >= min_part for part in parts[:-1])
    for part in parts:
        if part.server_copy:
            assert len(part.pieces) == 1 and part.pieces[0].origin == SOURCE


def test_a_body_without_splices_is_copied_whole_and_only_the_new_tail_uploaded() -> None:
    pieces = [Piece(SOURCE, 0, 900 * MiB), Piece(WRITTEN, 0, 3 * MiB)]
    parts = plan_parts(pieces, server_copy=True)
    assert parts == [
        Part((Piece(SOURCE, 0, 450 * MiB),), True),
        Part((Piece(SOURCE, 450 * MiB, 450 * MiB),), True),
        Part((Piece(WRITTEN, 0, 3 * MiB),), False),  # the last part may be short
    ]


def test_short_runs_between_copies_borrow_the_next_ranges_first_bytes() -> None:
    pieces = [
        Piece(SOURCE, 0, 20 * MiB),
        Piece(WRITTEN, 0, 1000),  # a relocated offset index
        Piece(SOURCE, 20 * MiB + 500, 30 * MiB),
        Piece(WRITTEN, 1000, 2 * MiB),
    ]
    parts = plan_parts(pieces, server_copy=True, min_part=5 * MiB)
    need = 5 * MiB - 1000
    assert parts == [
        Part((Piece(SOURCE, 0, 20 * MiB),), True),
        Part((Piece(WRITTEN, 0, 1000), Piece(SOURCE, 20 * MiB + 500, need)), False),
        Part((Piece(SOURCE, 20 * MiB + 500 + need, 30 * MiB - need),), True),
        Part((Piece(WRITTEN, 1000, 2 * MiB),), False),
    ]
    _check_parts(pieces, parts, 5 * MiB)
    uploaded = sum(p.length for p in parts if not p.server_copy)
    assert uploaded == 1000 + need + 2 * MiB  # the slack: what the minimum forced


def test_a_range_too_short_to_leave_a_part_behind_is_uploaded_whole() -> None:
    pieces = [Piece(WRITTEN, 0, 10), Piece(SOURCE, 0, 7 * MiB), Piece(WRITTEN, 10, 10)]
    parts = plan_parts(pieces, server_copy=True, min_part=5 * MiB)
    assert [p.server_copy for p in parts] == [False]
    _check_parts(pieces, parts, 5 * MiB)


def test_without_server_copy_everything_is_uploaded_in_bounded_parts() -> None:
    pieces = [Piece(SOURCE, 0, 50 * MiB), Piece(WRITTEN, 0, 3 * MiB + 7)]
    parts = plan_parts(pieces, server_copy=False, min_part=5 * MiB, upload_part=16 * MiB)
    assert not any(p.server_copy for p in parts)
    assert all(16 * MiB <= p.length < 32 * MiB for p in parts)
    _check_parts(pieces, parts, 5 * MiB)


@pytest.mark.parametrize("seed", range(40))
def test_any_pieces_make_valid_parts(seed: int) -> None:
    rng = random.Random(seed)
    pieces, written, source = [], 0, 0
    for _ in range(rng.randrange(1, 12)):
        length = rng.choice([0, 1, rng.randrange(1, 40), rng.randrange(40, 200)])
        if rng.random() < 0.5:
            pieces.append(Piece(WRITTEN, written, length))
            written += length
        else:
            pieces.append(Piece(SOURCE, source, length))
            source += length + rng.randrange(3)
    parts = plan_parts(
        [p for p in pieces if p.length],
        server_copy=rng.random() < 0.8,
        min_part=10,
        upload_part=rng.choice([10, 25]),
        copy_part=rng.choice([10, 30, 1000]),
    )
    _check_parts([p for p in pieces if p.length], parts, 10)
    assert all(p.length <= 1000 for p in parts if p.server_copy)


def test_an_exclusive_file_sink_never_replaces_a_file(tmp_path: Path) -> None:
    target = tmp_path / "latest.2.json"
    with sink.FileSink(str(target), exclusive=True) as out:
        out.write(b"first")
    with (
        pytest.raises(FileExistsError) as raised,
        sink.FileSink(str(target), exclusive=True) as out,
    ):
        out.write(b"second")
    assert raised.value.filename == str(target)
    assert target.read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.2.json"]  # no temporary left

"""Assembling the new file in a sink: the unchanged bytes, then every filter, then the footer.

The new file is the old one up to its footer with the plan's splices applied (the old filters
cut out, moved offset indexes re-encoded), copied through the sink on a copy thread while
the filters are built (:class:`BodyCopy`: the copy waits on the disk, the builds on the CPU);
then every filter, kept or new, together in (row group, column) order, so that a reader fetches
them all in one read (:func:`write_filters`); then the relocated footer (:func:`write_footer`).

Where it goes (:func:`open_sink`): a local file through :class:`~parquet_bloom._io.sink.FileSink`;
an S3 object through :class:`~parquet_bloom._io.object_sink.S3Sink`, whose unchanged ranges the
store copies itself when the source is an object on the same endpoint; an object on any other
fsspec filesystem through :class:`~parquet_bloom._io.object_sink.StreamSink`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from typing import Any

from parquet_bloom import _format as fmt
from parquet_bloom._io.object_sink import ObjectSink, S3Sink, StreamSink
from parquet_bloom._io.sink import FileSink
from parquet_bloom._io.source import ByteSource
from parquet_bloom._rewrite.build import FilterBuilds
from parquet_bloom._rewrite.plan import OldFilter, Relocation
from parquet_bloom._sbbf import SplitBlockBloomFilter
from parquet_bloom._threads import copy_pool

__all__ = ["BodyCopy", "Placements", "Sink", "is_s3", "open_sink", "write_filters", "write_footer"]

# Where the new file goes: a local file, or an object.
Sink = FileSink | ObjectSink
# (row group, column index) -> (offset, length) of the chunk's filter in the new file.
Placements = dict[tuple[int, int], tuple[int, int]]


class BodyCopy:
    """Copies the part of the file before the old footer, spliced, into the sink on one of the
    process's copy threads (:mod:`parquet_bloom._threads`) and starts its writeback, while the
    build threads build the filters.

    :meth:`finish` waits for the copy and raises its error, if any. Leaving the ``with`` block
    on an exception stops the copy after its current block and waits for it.
    """

    def __init__(self, sink: Sink, source: ByteSource, relocation: Relocation, end: int) -> None:
        self._sink = sink
        self._source = source
        self._relocation = relocation
        self._end = end
        self._cancel = threading.Event()
        self._error: BaseException | None = None
        self._done: Future[None] | None = None

    def _run(self) -> None:
        try:
            position = 0
            for splice in self._relocation.splices:
                self._copy(position, splice.start)
                self._sink.write(splice.replacement)
                position = splice.end
            self._copy(position, self._end)
            self._sink.writeback()  # most of the file reaches the disk during the build
        except BaseException as err:  # handed to the calling thread by finish()
            self._error = err

    def _copy(self, start: int, end: int) -> None:
        self._sink.copy(self._source, start, end, cancel=self._cancel, direct=True)

    def finish(self) -> None:
        assert self._done is not None
        wait([self._done])
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def __enter__(self) -> BodyCopy:
        self._done = copy_pool().submit(self._run)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.finish()
            return
        self._cancel.set()
        assert self._done is not None
        self._done.cancel()  # not started yet: it never will be
        wait([self._done])


def _protocols(filesystem: Any) -> tuple[str, ...]:
    protocol = getattr(filesystem, "protocol", ())
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def is_s3(filesystem: Any) -> bool:
    """Whether ``filesystem`` is s3fs's (an S3 endpoint, AWS's or another's)."""
    return (
        filesystem is not None and "s3" in _protocols(filesystem) and hasattr(filesystem, "call_s3")
    )


def open_sink(
    filesystem: Any | None,
    path: str,
    *,
    like: os.stat_result | None = None,
    source_filesystem: Any | None = None,
    source_path: str | None = None,
    source_etag: str | None = None,
    if_match: str | None = None,
) -> Sink:
    """The sink for ``path`` on ``filesystem`` (None: a local file, which takes the mode and
    owner of ``like``). On S3, the source's unchanged ranges are copied by the store when the
    source is an object on the same endpoint with the same credentials (``source_filesystem``
    configured alike), conditional on ``source_etag``; ``if_match``: the ETag the replaced
    object must still have."""
    if filesystem is None:
        return FileSink(path, like)
    if is_s3(filesystem):
        copy_source = None
        if (
            source_filesystem is not None
            and is_s3(source_filesystem)
            and source_path is not None
            and source_filesystem.storage_options == filesystem.storage_options
        ):
            bucket, key, _ = source_filesystem.split_path(source_path)
            copy_source = {"Bucket": bucket, "Key": key}
        return S3Sink(
            filesystem,
            path,
            copy_source=copy_source,
            source_etag=source_etag if copy_source is not None else None,
            if_match=if_match,
        )
    return StreamSink(filesystem, path)


# An encrypted file's new filters, built then sealed and written in batches of at most this many
# bytes of bitsets or filters (see write_filters).
SEAL_BATCH_BYTES = 1024 * 1024
SEAL_BATCH_FILTERS = 256

Seal = Callable[[tuple[int, int], bytes, memoryview], bytes | memoryview | None]


def write_filters(
    sink: Sink,
    source: ByteSource,
    chunks: Sequence[fmt.ColumnChunkInfo],
    builds: FilterBuilds,
    kept: dict[tuple[int, int], OldFilter],
    at: int,
    seal: Seal | None = None,
) -> tuple[Placements, list[tuple[int, str, int]]]:
    """Write each chunk's filter at ``at`` on: the one built, else the old one in ``kept``
    (copied from ``source``), else none. Returns where each went and (row group, column,
    num_bytes) of each built one, in file order. ``seal(key, header, bitset)``: a built
    filter's bytes encrypted, for a chunk of an encrypted column (None: written as it is).

    With ``seal``, built filters are taken in batches (at most :data:`SEAL_BATCH_BYTES` of
    bitsets or :data:`SEAL_BATCH_FILTERS` filters, a kept filter between them ending one): a
    batch's filters are all built (a small chunk's when asked for: FilterBuilds.result)
    before each is sealed and written, rather than each step alternating with the others at
    every filter, which measured slower (docs/performance.md, the encrypted rewrite).
    """
    placements: Placements = {}
    written: list[tuple[int, str, int]] = []
    batch: list[tuple[fmt.ColumnChunkInfo, SplitBlockBloomFilter]] = []
    batch_bytes = 0

    def seal_batch() -> None:
        nonlocal at, batch_bytes
        assert seal is not None
        for chunk, bloom_filter in batch:
            header = fmt.encode_bloom_filter_header(bloom_filter.num_bytes)
            bitset = bloom_filter.words.data.cast("B")
            one = seal((chunk.row_group, chunk.column_index), header, bitset)
            if one is None:  # a plaintext column's chunk: as written without seal
                sink.write(header)
                sink.write(bitset)
                length = len(header) + bloom_filter.num_bytes
            else:
                sink.write(one)
                length = len(one)
            written.append((chunk.row_group, chunk.path, bloom_filter.num_bytes))
            placements[(chunk.row_group, chunk.column_index)] = (at, length)
            at += length
        batch.clear()
        batch_bytes = 0

    for chunk in chunks:
        key = (chunk.row_group, chunk.column_index)
        if key in builds:
            bloom_filter = builds.result(key)
            if seal is not None:
                batch.append((chunk, bloom_filter))
                batch_bytes += bloom_filter.num_bytes
                del bloom_filter  # held by the batch alone
                if batch_bytes >= SEAL_BATCH_BYTES or len(batch) >= SEAL_BATCH_FILTERS:
                    seal_batch()
                continue
            header = fmt.encode_bloom_filter_header(bloom_filter.num_bytes)
            # serialize_bloom_filter's bytes, written from the filter's own words.
            sink.write(header)
            sink.write(bloom_filter.words.data.cast("B"))
            length = len(header) + bloom_filter.num_bytes
            written.append((chunk.row_group, chunk.path, bloom_filter.num_bytes))
            del bloom_filter
        elif key in kept:
            if batch:
                seal_batch()
            old = kept[key]
            sink.copy(source, old.offset, old.offset + old.length)
            length = old.length
        else:
            continue
        placements[key] = (at, length)
        at += length
    if batch:
        seal_batch()
    return placements, written


def write_footer(sink: Sink, md: Any, seal: Callable[[Any], bytes] | None = None) -> int:
    """Write ``md`` and the trailer (``seal(md)``: both, encrypted or signed, for an
    encrypted file); returns how many bytes that took."""
    if seal is not None:
        sealed = seal(md)
        sink.write(sealed)
        return len(sealed)
    footer = fmt.encode_file_metadata(md)
    sink.write(footer)
    sink.write(len(footer).to_bytes(4, "little") + fmt.MAGIC)
    return len(footer) + fmt.FOOTER_TRAILER_SIZE

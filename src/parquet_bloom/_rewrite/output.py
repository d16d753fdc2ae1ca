"""Assembling the new file in a sink: the unchanged bytes, then every filter, then the footer.

The new file is the old one up to its footer with the plan's splices applied (the old filters
cut out, moved offset indexes re-encoded), copied through the sink on a thread of its own while
the filters are built (:class:`BodyCopy`: the copy waits on the disk, the builds on the CPU);
then every filter, kept or new, together in (row group, column) order, so that a reader fetches
them all in one read (:func:`write_filters`); then the relocated footer (:func:`write_footer`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from parquet_bloom import _format as fmt
from parquet_bloom._io.sink import FileSink
from parquet_bloom._io.source import ByteSource
from parquet_bloom._rewrite.build import FilterBuilds
from parquet_bloom._rewrite.plan import OldFilter, Relocation

__all__ = ["BodyCopy", "Placements", "write_filters", "write_footer"]

# (row group, column index) -> (offset, length) of the chunk's filter in the new file.
Placements = dict[tuple[int, int], tuple[int, int]]


class BodyCopy:
    """Copies the part of the file before the old footer, spliced, into the sink on a
    background thread and fsyncs it, while the calling thread builds the filters.

    :meth:`finish` waits for the copy and raises its error, if any. Leaving the ``with`` block
    on an exception stops the copy after its current block and waits for it.
    """

    def __init__(
        self, sink: FileSink, source: ByteSource, relocation: Relocation, end: int
    ) -> None:
        self._sink = sink
        self._source = source
        self._relocation = relocation
        self._end = end
        self._cancel = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="parquet-bloom-copy", daemon=True)

    def _run(self) -> None:
        try:
            position = 0
            for splice in self._relocation.splices:
                self._copy(position, splice.start)
                self._sink.write(splice.replacement)
                position = splice.end
            self._copy(position, self._end)
            self._sink.sync()  # most of the file reaches the disk during the build
        except BaseException as err:  # handed to the calling thread by finish()
            self._error = err

    def _copy(self, start: int, end: int) -> None:
        self._sink.copy(self._source, start, end, cancel=self._cancel, direct=True)

    def finish(self) -> None:
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def __enter__(self) -> BodyCopy:
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.finish()
            return
        self._cancel.set()
        self._thread.join()


def write_filters(
    sink: FileSink,
    source: ByteSource,
    chunks: Sequence[fmt.ColumnChunkInfo],
    builds: FilterBuilds,
    kept: dict[tuple[int, int], OldFilter],
    at: int,
) -> tuple[Placements, list[tuple[int, str, int]]]:
    """Write each chunk's filter at ``at`` on: the one built, else the old one in ``kept``
    (copied from ``source``), else none. Returns where each went and (row group, column,
    num_bytes) of each built one, in file order."""
    placements: Placements = {}
    written: list[tuple[int, str, int]] = []
    for chunk in chunks:
        key = (chunk.row_group, chunk.column_index)
        if key in builds:
            bloom_filter = builds.result(key)
            header = fmt.encode_bloom_filter_header(bloom_filter.num_bytes)
            # serialize_bloom_filter's bytes, written from the filter's own words.
            sink.write(header)
            sink.write(bloom_filter.words.data.cast("B"))
            length = len(header) + bloom_filter.num_bytes
            written.append((chunk.row_group, chunk.path, bloom_filter.num_bytes))
            del bloom_filter
        elif key in kept:
            old = kept[key]
            sink.copy(source, old.offset, old.offset + old.length)
            length = old.length
        else:
            continue
        placements[key] = (at, length)
        at += length
    return placements, written


def write_footer(sink: FileSink, md: Any) -> int:
    """Write ``md`` and the trailer; returns how many bytes that took."""
    footer = fmt.encode_file_metadata(md)
    sink.write(footer)
    sink.write(len(footer).to_bytes(4, "little") + fmt.MAGIC)
    return len(footer) + fmt.FOOTER_TRAILER_SIZE

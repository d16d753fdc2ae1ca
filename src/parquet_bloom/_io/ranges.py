"""Byte ranges of a file: planning which to read, and holding what was read. No IO here."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["MAX_GAP", "ByteRange", "ReadBuffer", "coalesce"]

# Two ranges closer than this are read as one: fetching a gap this small costs less than another
# round trip to object storage (fsspec and zarr use gaps of the same order).
MAX_GAP = 64 * 1024


class ByteRange(NamedTuple):
    """``length`` bytes at file offset ``offset``."""

    offset: int
    length: int

    @property
    def end(self) -> int:
        return self.offset + self.length


def coalesce(ranges: Iterable[ByteRange], max_gap: int = MAX_GAP) -> list[ByteRange]:
    """Merge ranges that overlap or lie less than ``max_gap`` bytes apart, in file order."""
    merged: list[ByteRange] = []
    for r in sorted(ranges):
        if merged and r.offset - merged[-1].end <= max_gap:
            last = merged[-1]
            merged[-1] = ByteRange(last.offset, max(last.end, r.end) - last.offset)
        else:
            merged.append(r)
    return merged


class ReadBuffer:
    """Bytes read so far, addressed by file offset; a range may span several reads.

    Pieces are kept in file order, so a lookup bisects to the first piece that may hold it
    (files from arrow-rs have one read per row group: thousands of pieces).
    """

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._pieces: list[tuple[int, bytes]] = []

    def add(self, offset: int, data: bytes) -> None:
        at = bisect.bisect_left(self._starts, offset)
        self._starts.insert(at, offset)
        self._pieces.insert(at, (offset, data))

    def pieces(self) -> list[tuple[int, bytes]]:
        return list(self._pieces)

    def _from(self, offset: int) -> list[tuple[int, bytes]]:
        """The pieces that may hold ``offset`` or come after it, in file order."""
        # Step back over the pieces just before ``offset`` that still reach it. Pieces can
        # overlap (a coalesced read may span bytes already held), so a long piece hidden behind
        # a short one may be missed: then missing() asks for bytes again, get() never errs.
        at = bisect.bisect_right(self._starts, offset)
        while at > 0 and self._pieces[at - 1][0] + len(self._pieces[at - 1][1]) > offset:
            at -= 1
        return self._pieces[at:]

    def missing(self, r: ByteRange) -> list[ByteRange]:
        """The parts of ``r`` not read yet."""
        gaps, at = [], r.offset
        for start, data in self._from(r.offset):
            if start >= r.end:
                break
            if start > at:
                gaps.append(ByteRange(at, start - at))
            at = max(at, start + len(data))
            if at >= r.end:
                break
        if at < r.end:
            gaps.append(ByteRange(at, r.end - at))
        return gaps

    def get(self, r: ByteRange) -> bytes:
        """The bytes of ``r``, which must have been read (see :meth:`missing`)."""
        parts, at = [], r.offset
        for start, data in self._from(r.offset):
            if start <= at < start + len(data):
                take = data[at - start : min(r.end, start + len(data)) - start]
                parts.append(take)
                at += len(take)
                if at >= r.end:
                    break
        if at < r.end:
            raise ValueError(f"bytes [{r.offset}, {r.end}) were not read")
        return b"".join(parts) if len(parts) > 1 else parts[0] if parts else b""

    def available(self, offset: int, limit: int) -> memoryview:
        """Up to ``limit`` bytes read from ``offset`` on (possibly fewer, possibly none)."""
        for start, data in self._from(offset):
            if start <= offset < start + len(data):
                return memoryview(data)[offset - start : min(offset - start + limit, len(data))]
            if start > offset:
                break
        return memoryview(b"")

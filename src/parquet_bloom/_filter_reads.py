"""The reads of one Parquet file's Bloom filters, from their locations in the footer: whole
filters (:meth:`FilterReads.load`) or the blocks a point lookup needs
(:meth:`FilterReads.load_blocks`), each in as few coalesced reads as their placement allows.

It holds what was read that may hold filters (the tail read's bytes before the footer, guess
reads) and the filters loaded; a read that fails is retried range by range, so that one bad
filter does not spoil the others. Which filters to load, and their checks against the file's
layout, are :class:`parquet_bloom._reader.BloomFilterReader`'s and :mod:`parquet_bloom._locate`'s;
the encrypted filters' reads are :mod:`parquet_bloom._encrypted_reads`'.
"""

from __future__ import annotations

from collections.abc import Sequence

from parquet_bloom import _format as fmt
from parquet_bloom._io.ranges import ByteRange, ReadBuffer, coalesce
from parquet_bloom._io.source import ByteSource
from parquet_bloom._locate import FilterLocation, check_header
from parquet_bloom._sbbf import BYTES_PER_BLOCK, FilterBlocks, SplitBlockBloomFilter, block_index
from parquet_bloom.errors import BloomFilterError, FileReadError

# Blocks of a local file's filter this close are read as one (a page: a smaller gap saves
# nothing); further apart, each is its own pread rather than copying the bytes between them.
BLOCK_READ_GAP = 4096


class FilterReads:
    """The reads of one file's filters: ``source`` (the file), ``footer_start`` (where its
    footer starts), ``held`` (bytes read that may hold filters) and ``cache`` (the filters
    loaded, None for a column chunk without one, by ``(row_group, column)``)."""

    def __init__(self, source: ByteSource, footer_start: int, held: ReadBuffer) -> None:
        self.source = source
        self.footer_start = footer_start
        self.held = held
        self.cache: dict[tuple[int, str], SplitBlockBloomFilter | None] = {}

    def load(
        self,
        todo: list[FilterLocation],
        out: dict[tuple[int, str], SplitBlockBloomFilter | None],
        failed: dict[tuple[int, str], BloomFilterError],
    ) -> None:
        """Load the filters at ``todo`` (cached) into ``out``, the errors of unusable ones
        into ``failed``: the first reads (the filter, or a guess where its length is not
        known), then the bitset bytes the guesses did not cover."""
        name = self.source.name

        def fail(loc: FilterLocation, err: BloomFilterError) -> None:
            record_failure(failed, name, loc, err)

        buffer = self.held_copy()
        firsts = {id(loc): loc.first_read(self.footer_start) for loc in todo}
        guessing = any(loc.length is None for loc in todo)
        unread = self.read_into(
            buffer,
            [gap for r in firsts.values() for gap in buffer.missing(r)],
            keep=self.held if guessing else None,
        )

        # Headers tell how long each filter is; fetch the bitset bytes the guesses did not cover.
        parsed: list[tuple[FilterLocation, ByteRange]] = []
        for loc in todo:
            if unreadable := overlapping(firsts[id(loc)], unread):
                fail(loc, unreadable)
                continue
            try:
                # The first read's bytes, where they lie in one piece (mostly: the whole
                # filter, read with its neighbours), are read where they lie; else they lie in
                # two (a read, then the tail read) and are joined.
                first = firsts[id(loc)]
                held = buffer.available(first.offset, first.length)
                limit = min(first.length, fmt.MAX_BLOOM_FILTER_HEADER_SIZE)
                head: bytes | memoryview = held
                if len(held) < limit:
                    head = buffer.get(ByteRange(first.offset, limit))
                header, header_len = fmt.parse_bloom_filter_header(head[:limit])
                check_header(header, header_len, loc, footer_start=self.footer_start, source=name)
            except BloomFilterError as err:
                fail(loc, err)
                continue
            if len(held) >= header_len + header.num_bytes:
                key = (loc.chunk.row_group, loc.chunk.path)
                bits = held[header_len : header_len + header.num_bytes]
                self.cache[key] = out[key] = SplitBlockBloomFilter.from_bytes(bits)
                continue
            parsed.append((loc, ByteRange(loc.offset + header_len, header.num_bytes)))
        unread = self.read_into(buffer, [gap for _, b in parsed for gap in buffer.missing(b)])

        for loc, bitset in parsed:
            if unreadable := overlapping(bitset, unread):
                fail(loc, unreadable)
                continue
            key = (loc.chunk.row_group, loc.chunk.path)
            self.cache[key] = out[key] = SplitBlockBloomFilter.from_bytes(buffer.get(bitset))

    def load_blocks(
        self,
        todo: list[tuple[FilterLocation, list[int], int | None]],
        out: dict[tuple[int, str], SplitBlockBloomFilter | FilterBlocks],
        failed: dict[tuple[int, str], BloomFilterError],
    ) -> None:
        """Load into ``out`` the blocks that the hashes of each of ``todo`` (a location, its
        hashes and its bitset's length when the footer gives the filter's) fall in, the errors
        of unusable filters into ``failed``
        (:meth:`parquet_bloom._reader.BloomFilterReader.filter_blocks`)."""
        name = self.source.name
        footer_start = self.footer_start

        def fail(loc: FilterLocation, err: BloomFilterError) -> None:
            record_failure(failed, name, loc, err)

        buffer = self.held_copy()
        # The first reads: where the length is known, the header (the length less the
        # guessed bitset) and the guessed blocks; elsewhere the guess read.
        firsts: list[ByteRange] = []
        for loc, wanted, num_bytes in todo:
            if num_bytes is None:
                firsts.append(loc.first_read(footer_start))
                continue
            assert loc.length is not None
            bitset = loc.offset + loc.length - num_bytes
            firsts.append(ByteRange(loc.offset, loc.length - num_bytes))
            firsts.extend(_block_ranges(bitset, num_bytes, wanted).values())
        guessing = any(num_bytes is None for _, _, num_bytes in todo)
        # On a filesystem a request costs its round trip: header and blocks in one read. A
        # local file's reads cost a system call each: blocks apart are read apart.
        read_gap = self.source.max_gap if self.source.remote else BLOCK_READ_GAP
        unread = self.read_into(
            buffer,
            [gap for r in firsts for gap in buffer.missing(r)],
            keep=self.held if guessing else None,
            max_gap=read_gap,
        )

        # The headers, then the blocks the first reads did not cover (a wrong guess of the
        # header's length, filters of unknown length): one more coalesced read.
        parsed: list[tuple[FilterLocation, int, dict[int, ByteRange]]] = []
        for loc, wanted, num_bytes in todo:
            first = loc.first_read(footer_start)  # as filters_with_errors reads
            if num_bytes is not None:  # the header guessed
                first = ByteRange(loc.offset, first.length - num_bytes)
            if (unreadable := overlapping(first, unread)) is not None:
                fail(loc, unreadable)
                continue
            limit = min(loc.first_read(footer_start).length, fmt.MAX_BLOOM_FILTER_HEADER_SIZE)
            try:
                header, header_len = fmt.parse_bloom_filter_header(
                    buffer.available(loc.offset, limit)
                )
                guessed = num_bytes is None or (
                    header.num_bytes == num_bytes and header_len + num_bytes == loc.length
                )
            except BloomFilterError as err:
                if num_bytes is None:  # the guess read held all a header may take
                    fail(loc, err)
                    continue
                guessed = False
            if not guessed:
                # Not the header guessed: read what filters_with_errors would have read of
                # it, and decode that (its error, if any, is the same).
                whole = ByteRange(loc.offset, limit)
                missed = self.read_into(buffer, buffer.missing(whole))
                if unreadable := overlapping(whole, missed):
                    fail(loc, unreadable)
                    continue
                try:
                    header, header_len = fmt.parse_bloom_filter_header(buffer.get(whole))
                except BloomFilterError as err:
                    fail(loc, err)
                    continue
            try:
                check_header(header, header_len, loc, footer_start=footer_start, source=name)
            except BloomFilterError as err:
                fail(loc, err)
                continue
            parsed.append(
                (
                    loc,
                    header.num_bytes,
                    _block_ranges(loc.offset + header_len, header.num_bytes, wanted),
                )
            )
        blocks = [
            gap for _, _, ranges in parsed for r in ranges.values() for gap in buffer.missing(r)
        ]
        if blocks:
            unread.update(self.read_into(buffer, blocks, max_gap=read_gap))
        for loc, num_bytes, ranges in parsed:
            errors = (overlapping(r, unread) for r in ranges.values())
            if unread and (unreadable := next((e for e in errors if e is not None), None)):
                fail(loc, unreadable)
                continue
            key = (loc.chunk.row_group, loc.chunk.path)
            out[key] = FilterBlocks(num_bytes, {b: buffer.get(r) for b, r in ranges.items()})

    def held_copy(self) -> ReadBuffer:
        """A buffer holding what the reader holds already (the tail before the footer, guess
        reads), for one load to add its reads to."""
        buffer = ReadBuffer()
        for offset, data in self.held.pieces():
            buffer.add(offset, data)
        return buffer

    def read_into(
        self,
        buffer: ReadBuffer,
        ranges: list[ByteRange],
        keep: ReadBuffer | None = None,
        max_gap: int | None = None,
    ) -> dict[ByteRange, BloomFilterError]:
        """Read ``ranges``, coalesced, into ``buffer`` (and ``keep``); returns the ranges that
        could not be read. When a coalesced read fails (a truncated file, say), each range is
        read alone, so that one bad range does not spoil the others; not when the store failed
        to answer (a :class:`FileReadError`), which says nothing about the ranges: every one
        is then unread with that error, without asking a failing store again."""
        merged = coalesce(ranges, self.source.max_gap if max_gap is None else max_gap)
        try:
            datas = self.source.read(merged)
        except FileReadError as err:
            return dict.fromkeys(ranges, err)
        except BloomFilterError:
            datas = None
        if datas is not None:
            for r, data in zip(merged, datas, strict=True):
                buffer.add(r.offset, data)
                if keep is not None:
                    keep.add(r.offset, data)
            return {}
        unread: dict[ByteRange, BloomFilterError] = {}
        for r in ranges:
            try:
                (data,) = self.source.read([r])
            except BloomFilterError as err:
                unread[r] = err
                continue
            buffer.add(r.offset, data)
            if keep is not None:
                keep.add(r.offset, data)
        return unread


def record_failure(
    failed: dict[tuple[int, str], BloomFilterError],
    name: str,
    loc: FilterLocation,
    err: BloomFilterError,
) -> None:
    """Record ``err`` as the error of the filter at ``loc``, located."""
    chunk = loc.chunk
    failed[(chunk.row_group, chunk.path)] = err.located(
        source=name, row_group=chunk.row_group, column=chunk.path, offset=loc.offset
    )


def overlapping(r: ByteRange, unread: dict[ByteRange, BloomFilterError]) -> BloomFilterError | None:
    """The error of an unread range that overlaps ``r``, if any."""
    for bad, err in unread.items():
        if bad.offset < r.end and r.offset < bad.end:
            return err
    return None


def _block_ranges(bitset: int, num_bytes: int, hashes: Sequence[int]) -> dict[int, ByteRange]:
    """The 32-byte blocks the hashes fall in, by index, of the bitset of ``num_bytes`` at
    ``bitset``."""
    num_blocks = num_bytes // BYTES_PER_BLOCK
    ranges = {}
    for h in hashes:
        block = block_index(h, num_blocks)
        ranges[block] = ByteRange(bitset + block * BYTES_PER_BLOCK, BYTES_PER_BLOCK)
    return ranges

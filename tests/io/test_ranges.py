"""Planning byte ranges: coalescing, and the buffer of what was read."""

from __future__ import annotations

from parquet_bloom._io.ranges import MAX_GAP, ByteRange, ReadBuffer, coalesce


def test_coalesce_plans() -> None:
    R = ByteRange
    assert coalesce([R(10**6, 10), R(0, 10), R(10, 5)]) == [R(0, 15), R(10**6, 10)]
    assert coalesce([R(100, 10), R(0, 10)]) == [R(0, 110)]  # a small gap is read through
    assert coalesce([R(0, 10), R(5, 2)]) == [R(0, 10)]
    assert coalesce(
        [R(0, 10), R(10 + MAX_GAP + 1, 1)],
    ) == [R(0, 10), R(10 + MAX_GAP + 1, 1)]
    assert coalesce([R(0, 10), R(10 + MAX_GAP, 1)]) == [R(0, 11 + MAX_GAP)]
    assert coalesce([]) == []


def test_read_buffer_serves_ranges_across_pieces_and_reports_gaps() -> None:
    buffer = ReadBuffer()
    buffer.add(100, bytes(range(10)))  # [100, 110)
    buffer.add(0, b"abcdefghij")  # [0, 10)
    buffer.add(105, bytes(range(5, 25)))  # [105, 125), overlapping the first piece
    assert buffer.get(ByteRange(2, 3)) == b"cde"
    assert buffer.get(ByteRange(100, 25)) == bytes(range(25))
    assert buffer.missing(ByteRange(0, 130)) == [ByteRange(10, 90), ByteRange(125, 5)]
    assert buffer.missing(ByteRange(101, 20)) == []
    assert bytes(buffer.available(8, 100)) == b"ij"
    assert bytes(buffer.available(50, 10)) == b""
    assert [offset for offset, _ in buffer.pieces()] == [0, 100, 105]

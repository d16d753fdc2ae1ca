"""What an index holds, for ``parquet-bloom index inspect``: per column and size class, its row
groups, bytes, the filters' fill and the false candidates a lookup of an absent value expects.

A filter answers "maybe" for an absent value when its hash finds the eight bits it tests set:
for a random hash, the mean over the filter's blocks of the product over the block's eight words
of (bits set in the word / 32). Summed over a class's row groups, that is the false candidates
a lookup expects from the class. The slices hold every filter's bits, so this is computed from
them, a run of blocks at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from parquet_bloom._index import slices
from parquet_bloom._index.lookup import BloomIndex, IndexClass, IndexSegment
from parquet_bloom._sbbf import BITS_PER_BLOCK, WORDS_PER_BLOCK

__all__ = ["ClassStats", "column_stats"]


@dataclass(frozen=True)
class ClassStats:
    """One class of a column (over every segment): ``num_bytes`` (the filters' size; None for
    the row groups without filters), ``row_groups``, ``slice_bytes`` (what the slices weigh),
    ``fill`` (the mean fraction of bits set), ``expected_false`` (the row groups a lookup of an
    absent value returns, by estimate; the class without filters returns all of them)."""

    num_bytes: int | None
    row_groups: int
    slice_bytes: int
    fill: float
    expected_false: float


def column_stats(index: BloomIndex, column: str) -> list[ClassStats]:
    """Every class of ``column``, by filter size (reads every slice of the column once)."""
    index.classes(column)  # an unknown column is a ValueError naming the ones there are
    totals: dict[int | None, list[float]] = {}
    for segment in index.segments:
        for c in segment.column_classes(column):
            row = totals.setdefault(c.num_bytes, [0, 0, 0.0, 0.0])
            row[0] += c.row_groups
            if c.num_bytes is None or c.slices is None:
                row[3] += c.row_groups
                continue
            fill, false = _class_stats(segment, c)
            row[1] += c.slices.length
            row[2] += fill * c.row_groups
            row[3] += false
    out = []
    for size, (n, weight, fill_sum, false) in sorted(
        totals.items(), key=lambda item: (item[0] is None, item[0] or 0)
    ):
        out.append(
            ClassStats(size, int(n), int(weight), fill_sum / n if n and size else 0.0, false)
        )
    return out


def _class_stats(segment: IndexSegment, c: IndexClass) -> tuple[float, float]:
    """The mean fill of a class's filters and the sum of their false-positive rates."""
    assert c.slices is not None
    data = np.frombuffer(segment.read_blob(c.slices), dtype=np.uint8)
    n, s = c.row_groups, slices.slice_bytes(c.row_groups)
    num_blocks = c.num_blocks
    step = max(1, slices.PASS_BITS // max(n * BITS_PER_BLOCK, 1))
    rates = np.zeros(n, dtype=np.float64)
    bits_set = np.zeros(n, dtype=np.float64)
    for start in range(0, num_blocks, step):
        stop = min(num_blocks, start + step)
        part = data[start * BITS_PER_BLOCK * s : stop * BITS_PER_BLOCK * s]
        rows = part.reshape((stop - start) * BITS_PER_BLOCK, s)
        bits = np.unpackbits(rows, axis=1, bitorder="little")[:, :n]
        # (blocks, 8 words, 32 bits, N) -> bits set per word, per row group.
        counts = bits.reshape(stop - start, WORDS_PER_BLOCK, 32, n).sum(axis=2, dtype=np.int64)
        bits_set += counts.sum(axis=(0, 1))
        rates += np.prod(counts / 32.0, axis=1).sum(axis=0)
    rates /= num_blocks
    fill = float(bits_set.sum() / (n * num_blocks * BITS_PER_BLOCK)) if n else 0.0
    return fill, float(rates.sum())

"""What pruning skipped and what it cost: the report and the result :func:`prune` returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._prune.rows import matching_rows

__all__ = ["FileCost", "PruneReport", "PruneResult"]


@dataclass(frozen=True)
class FileCost:
    """What reading one file's footer and filters cost: ``requests`` (reads, and a size
    lookup when nothing gave the size) and ``bytes_read``."""

    path: str
    requests: int
    bytes_read: int


@dataclass(frozen=True)
class PruneReport:
    """What pruning skipped and what it cost.

    Sizes are the row groups' compressed column chunk bytes (``total_compressed_size``), what a
    scan of all columns would read; a file whose footer we cannot decode counts its row groups
    (as pyarrow counts them) but not their bytes, and one we cannot fetch neither.
    ``requests`` are our own requests (on object storage, each a round trip): ``reads``
    (footers and filters; ``filter_reads`` those after the footer's, none when the tail read
    held the filters, at most one per file when a writer keeps a file's filters together) and
    size lookups (none when a listing gave the size); ``bytes_read``
    their bytes; ``per_file`` each file's :class:`FileCost`, in the order of the dataset's
    files. pyarrow's own requests (listing, schema inference, the scan) are not counted.
    ``filters_unreadable`` counts column chunk filters that could not be used (their row
    groups were kept, with a :class:`BloomFilterWarning`), ``unreadable_columns`` their columns
    (each once: a column whose key was not given to read encrypted files shows here);
    ``unreadable_files`` names the files
    (by URL on object storage) whose footer or some filter could not be read or used, a store's
    failure or a missing object as much as a corrupt footer: all their row groups, or those of
    the filters concerned, were kept. A filter with nothing a Bloom filter can decide reads
    nothing at all and counts only ``files``. With an index, ``index_files`` were decided by
    it without opening them (``files`` and ``files_skipped`` count them, the row group and
    byte counts do not: their footers were not read), and ``index_reads`` and
    ``index_bytes_read`` are the index's reads (also in ``requests``, ``reads`` and
    ``bytes_read``). ``tables``: a directory that was a Delta or Iceberg table (or held one)
    was read as the table's live files; one sentence a table says which and how many files
    it left out.
    """

    files: int = 0
    files_skipped: int = 0
    row_groups: int = 0
    row_groups_skipped: int = 0
    compressed_bytes: int = 0
    compressed_bytes_skipped: int = 0
    reads: int = 0
    filter_reads: int = 0
    bytes_read: int = 0
    filters_unreadable: int = 0
    requests: int = 0
    per_file: tuple[FileCost, ...] = ()
    unreadable_files: tuple[str, ...] = ()
    index_files: int = 0
    index_reads: int = 0
    index_bytes_read: int = 0
    tables: tuple[str, ...] = ()
    unreadable_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # a column named once, however many files' filters of it could not be used
        if len(set(self.unreadable_columns)) != len(self.unreadable_columns):
            distinct = tuple(dict.fromkeys(self.unreadable_columns))
            object.__setattr__(self, "unreadable_columns", distinct)

    def __add__(self, other: PruneReport) -> PruneReport:
        return PruneReport(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    def __str__(self) -> str:
        # The row groups and bytes of the files the index decided are not known (their footers
        # were not read): counted for the files opened only, and said so.
        opened = self.files - self.index_files
        parts = [f"skipped {self.files_skipped} of {self.files} files"]
        if opened or not self.index_files:
            parts.append(
                f"{self.row_groups_skipped} of {self.row_groups} row groups, "
                f"{self.compressed_bytes_skipped:,} of {self.compressed_bytes:,} bytes"
                + (f" of the {opened} files opened" if self.index_files else "")
            )
        return (
            "".join(f"{table}; " for table in self.tables) + ", ".join(parts) + "; "
            f"{self.requests} requests ({self.reads} reads, {self.filter_reads} for filters "
            f"alone), {self.bytes_read:,} bytes read"
            + (
                f"; {self.filters_unreadable} filters unreadable"
                + (f" ({', '.join(self.unreadable_columns)})" if self.unreadable_columns else "")
                if self.filters_unreadable
                else ""
            )
            + (
                f"; {len(self.unreadable_files)} files not read in full (their row groups kept): "
                + ", ".join(self.unreadable_files[:3])
                + (", ..." if len(self.unreadable_files) > 3 else "")
                if self.unreadable_files
                else ""
            )
            + (
                f"; {self.index_files} files decided by the index ({self.index_reads} reads, "
                f"{self.index_bytes_read:,} bytes)"
                if self.index_files
                else ""
            )
        )


@dataclass(frozen=True)
class PruneResult:
    """The pruned ``dataset`` (a ``FileSystemDataset``, or a ``UnionDataset`` of them) and the
    ``report``. A plain pair rather than a Dataset subclass: pyarrow's datasets are extension
    types that cannot be subclassed from Python and keep their own state."""

    dataset: ds.Dataset
    report: PruneReport
    filter: pc.Expression | None = None  # the filter pruned for
    # the keys the dataset's scan decryption was made from, to tell its failures
    decryption: DecryptionKeys | None = field(default=None, repr=False)

    def to_table(self, columns: Sequence[str] | None = None) -> pa.Table:
        """The rows the filter keeps: ``dataset.to_table(filter=filter, columns=columns)``,
        the same rows in the same order and schema, read late (the filter's columns of each
        row group left first, the other columns only of the row groups holding a match, and
        of those only the matching rows' pages where the file's offset index says where they
        lie: docs/performance.md, "The point lookup without an index")."""
        if self.filter is None:
            return self.dataset.to_table(columns=columns)
        return matching_rows(self.dataset, self.filter, columns, self.decryption)

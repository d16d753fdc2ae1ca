"""The report of a table scan pruned twice: first by the table's own metadata (partitions,
column statistics), then by the Bloom filters of the files left."""

from __future__ import annotations

from dataclasses import dataclass

from parquet_bloom._prune.report import PruneReport

__all__ = ["TablePruneReport"]


@dataclass(frozen=True)
class TablePruneReport:
    """``table_files`` and ``table_bytes``: the data files of the snapshot read and their
    sizes; ``files_after_table``, ``bytes_after_table``: what the table's own pruning left;
    ``bloom``: what the Bloom filters then skipped of those, and the requests that cost
    (:class:`parquet_bloom.PruneReport`); ``files_left_to_table``: files whose rows the table
    library reads itself (deletion vectors, delete files), never pruned by filters here;
    ``files_with_deletes``: files left whose deletes were applied here (Delta deletion
    vectors: the file's row groups left were read at prune time, its deleted rows dropped, and
    the rest held in memory)."""

    table_files: int
    table_bytes: int
    files_after_table: int
    bytes_after_table: int
    bloom: PruneReport
    files_left_to_table: int = 0
    files_with_deletes: int = 0

    @property
    def files_read(self) -> int:
        """Files a scan of the result still opens."""
        return self.files_after_table - self.bloom.files_skipped

    def __str__(self) -> str:
        return (
            f"table: {self.files_after_table} of {self.table_files} files "
            f"({self.bytes_after_table:,} of {self.table_bytes:,} bytes) left by partitions and "
            f"statistics; Bloom filters: {self.bloom}"
            + (
                f"; {self.files_left_to_table} files left to the table library"
                if self.files_left_to_table
                else ""
            )
            + (
                f"; {self.files_with_deletes} files read with their deletes applied"
                if self.files_with_deletes
                else ""
            )
        )

"""Sizing advice for the Bloom filters of a file or a table's live files: :func:`advise`.

For each column asked about and each row group (column chunk), the chunk's distinct values
(NDV), the size each writer's rule and the spec's formula give for that NDV at the target rate,
the advised size (what ``resize`` writes by default) and its rate, the filter the chunk has now
and its rate, and what filters cost against the column's own bytes (the chunks' compressed
sizes): the numbers to choose a rate and a size by (docs/api.md, sizing advice).

The NDV is counted exactly (the distinct hashes of the chunk's values, read through pyarrow)
for chunks of at most ``exact_limit`` values, and for every chunk without a filter; a larger
chunk with a filter is estimated from its filter's bits set
(:meth:`~parquet_bloom.SplitBlockBloomFilter.estimate_ndv`: exact enough while the filter is
not nearly full), which reads only the filter. Each row says which (``ndv_basis``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from parquet_bloom import _logical as logical
from parquet_bloom import _sizing as sizing
from parquet_bloom._arrow_chunks import ChunkReader, Unmapped
from parquet_bloom._audit import format_bytes
from parquet_bloom._gate import named_leaves
from parquet_bloom._io.source import ByteSource
from parquet_bloom._reader import BloomFilterReader
from parquet_bloom._sbbf import bits_per_value, expected_fpp
from parquet_bloom._size_advice import ADVICE_FLAVORS, advise_size
from parquet_bloom.errors import BloomFilterError, FileReadError

__all__ = ["EXACT_LIMIT", "Advice", "ChunkAdvice", "ColumnAdvice", "advise"]

# Chunks of up to this many values are counted exactly: hashing and sorting 8 Mi values takes
# about a second and 200 MB; a larger chunk with a filter is estimated from the filter.
EXACT_LIMIT = 8 * 1024 * 1024
_BASIS_EXACT = "exact"
_BASIS_FILTER = "estimated from the filter"


@dataclass(frozen=True)
class ChunkAdvice:
    """One column chunk: ``ndv`` (``ndv_basis`` "exact" or "estimated from the filter"),
    ``column_bytes`` (its compressed size), the filter it has (``filter_bytes``,
    ``filter_fpp`` its expected rate for ``ndv``; None without one), and the advice: the
    ``advised_bytes`` and ``advised_fpp``, the spec's unrounded ``spec_bytes``, each writer's
    size (``writers``) and the rate at half the advised size (``half_fpp``)."""

    file: str
    row_group: int
    num_values: int
    ndv: int
    ndv_basis: str
    column_bytes: int
    filter_bytes: int | None
    filter_fpp: float | None
    advised_bytes: int
    advised_fpp: float
    spec_bytes: float
    writers: dict[str, int] = field(default_factory=dict)
    half_fpp: float | None = None


@dataclass(frozen=True)
class ColumnAdvice:
    """Every chunk of one column, and their totals."""

    column: str
    physical_type: str
    chunks: tuple[ChunkAdvice, ...]
    notes: tuple[str, ...] = ()

    @property
    def column_bytes(self) -> int:
        return sum(c.column_bytes for c in self.chunks)

    @property
    def filter_bytes(self) -> int:
        return sum(c.filter_bytes or 0 for c in self.chunks)

    @property
    def advised_bytes(self) -> int:
        return sum(c.advised_bytes for c in self.chunks)


@dataclass(frozen=True)
class Advice:
    """The result of :func:`advise`: ``str()`` reads as a report, :meth:`to_dict` as JSON."""

    source: str
    fpp: float
    files: int
    columns: tuple[ColumnAdvice, ...]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "fpp": self.fpp, "files": self.files}
        out["columns"] = [
            {
                "column": c.column,
                "physical_type": c.physical_type,
                "column_bytes": c.column_bytes,
                "filter_bytes": c.filter_bytes,
                "advised_bytes": c.advised_bytes,
                "chunks": [asdict(chunk) for chunk in c.chunks],
                "notes": list(c.notes),
            }
            for c in self.columns
        ]
        return out

    def __str__(self) -> str:
        files = f"{self.files} file{'s' if self.files != 1 else ''}"
        lines = [f"{self.source}: {files}, target fpp {_rate(self.fpp)}"]
        for c in self.columns:
            lines.extend(_column_text(c, self.fpp))
        return "\n".join(lines)


# Row groups listed one a line, at most; past it, the rows of like NDV are summarised.
_MAX_LISTED = 12


def _column_text(c: ColumnAdvice, fpp: float) -> list[str]:
    lines = [f"column {c.column} ({c.physical_type}), {len(c.chunks)} row groups"]
    headers = ["file", "rg", "values", "NDV", "column", "filter", "fpp@NDV", "advised", "fpp"]
    headers += [*ADVICE_FLAVORS, "spec formula"]
    rows = []
    for chunk in c.chunks[:_MAX_LISTED]:
        ndv = f"{chunk.ndv:,}" + ("" if chunk.ndv_basis == _BASIS_EXACT else " ~")
        rows.append(
            [
                os.path.basename(chunk.file),
                str(chunk.row_group),
                f"{chunk.num_values:,}",
                ndv,
                format_bytes(chunk.column_bytes),
                "-" if chunk.filter_bytes is None else format_bytes(chunk.filter_bytes),
                _rate(chunk.filter_fpp),
                format_bytes(chunk.advised_bytes),
                _rate(chunk.advised_fpp),
                *(format_bytes(chunk.writers[f]) for f in ADVICE_FLAVORS),
                format_bytes(chunk.spec_bytes),
            ]
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    for row in [headers, *rows]:
        cells = [
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    if len(c.chunks) > _MAX_LISTED:
        lines.append(f"  ... {len(c.chunks) - _MAX_LISTED} more row groups (to_dict / --json)")
    if any(chunk.ndv_basis != _BASIS_EXACT for chunk in c.chunks):
        lines.append("  (~: NDV estimated from the chunk's filter)")
    column = c.column_bytes
    now, advised = c.filter_bytes, c.advised_bytes
    lines.append(
        f"  filters now: {format_bytes(now)} ({_share(now, column)} of the column's "
        f"{format_bytes(column)} compressed)"
        if now
        else f"  filters now: none (the column is {format_bytes(column)} compressed)"
    )
    lines.append(
        f"  advised at fpp {_rate(fpp)}: {format_bytes(advised)} ({_share(advised, column)} of "
        "the column's bytes)" + ("" if not now else f", {_change(now, advised)}")
    )
    half = [ch.half_fpp for ch in c.chunks if ch.half_fpp is not None]
    if half:
        lines.append(
            f"  at half the advised sizes: {format_bytes(advised / 2)}, expected fpp up to "
            f"{_rate(max(half))}"
        )
    lines.extend(f"  note: {n}" for n in c.notes)
    return lines


def _rate(fpp: float | None) -> str:
    if fpp is None:
        return "-"
    if fpp == 0:
        return "0%"
    return f"{fpp:.2%}" if fpp >= 0.0001 else f"{fpp:.2g}"


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def _change(now: int, advised: int) -> str:
    if advised == now:
        return "the same as now"
    if advised < now:
        return f"{format_bytes(now - advised)} less than now"
    return f"{format_bytes(advised - now)} more than now"


def advise(
    source: Any,
    columns: Iterable[str] | str | None = None,
    fpp: float = 0.01,
    *,
    storage_options: Mapping[str, Any] | None = None,
    exact_limit: int = EXACT_LIMIT,
    progress: Callable[[int, int], None] | None = None,
) -> Advice:
    """Sizing advice for the filters of ``columns`` (dotted paths; a group stands for its leaves;
    None: the columns that have a filter) at target rate ``fpp``.

    ``source``: a Parquet file (a path or URL, ``storage_options`` for its store), a list of
    them, a Delta table (a ``deltalake.DeltaTable``, or the path or URL of its root: its live
    files) or a pyiceberg ``Table`` (its current snapshot's Parquet data files). Chunks of at
    most ``exact_limit`` values, and chunks without a filter, are counted exactly; others are
    estimated from their filter. ``progress(done, total)`` is called after each file.

    Raises ValueError for an unknown column, a bad ``fpp``, or no column to advise on (none
    named and none with a filter).
    """
    if isinstance(fpp, bool) or not isinstance(fpp, float | int):
        raise TypeError(f"fpp must be a float, not {type(fpp).__name__}")
    bits_per_value(float(fpp))  # ValueError unless 0 < fpp < 1
    if isinstance(exact_limit, bool) or not isinstance(exact_limit, int) or exact_limit < 0:
        raise ValueError(f"exact_limit must be an int >= 0, not {exact_limit!r}")
    name, files, options = _files(source, storage_options)
    wanted = None if columns is None else [columns] if isinstance(columns, str) else list(columns)
    by_column: dict[str, list[ChunkAdvice]] = {}
    types: dict[str, str] = {}
    notes: dict[str, list[str]] = {}
    for done, path in enumerate(files, 1):
        _advise_file(path, wanted, float(fpp), options, exact_limit, by_column, types, notes)
        if progress is not None:
            progress(done, len(files))
    if not by_column:
        raise ValueError(
            f"no column to advise on in {name}: none has a Bloom filter; name the columns "
            "(columns=, --column)"
        )
    out = tuple(
        ColumnAdvice(c, types[c], tuple(chunks), tuple(dict.fromkeys(notes.get(c, ()))))
        for c, chunks in by_column.items()
    )
    return Advice(name, float(fpp), len(files), out)


def _files(source: Any, storage_options: Mapping[str, Any] | None) -> tuple[str, list[str], Any]:
    """The source's name, its Parquet files, and the storage options to read them with."""
    if isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        if "://" in path or not os.path.isdir(path):
            return path, [path], storage_options
        if os.path.isdir(os.path.join(path, "_delta_log")):
            from deltalake import DeltaTable

            return _delta_files(DeltaTable(path), storage_options)
        raise ValueError(
            f"{path} is a directory but not a Delta table's root: pass a file, a list of "
            "files, a Delta table or an Iceberg table"
        )
    if type(source).__name__ == "DeltaTable":
        return _delta_files(source, storage_options)
    if hasattr(source, "current_snapshot") and hasattr(source, "metadata"):
        return _iceberg_files(source, storage_options)
    if isinstance(source, Sequence):
        paths = [os.fspath(p) for p in source]
        if not paths:
            raise ValueError("no file to advise on")
        return paths[0] if len(paths) == 1 else f"{len(paths)} files", paths, storage_options
    raise TypeError(f"cannot advise on a {type(source).__name__}: pass a path, files or a table")


def _delta_files(
    table: Any, storage_options: Mapping[str, Any] | None
) -> tuple[str, list[str], Any]:
    from parquet_bloom._tables.delta_check import live_files
    from parquet_bloom._tables.delta_snapshot import file_storage_options, table_root

    files = [f.source for f in live_files(table)]
    options = file_storage_options(table.table_uri, storage_options)
    return f"{table_root(table)} (Delta, version {table.version()})", files, options


def _iceberg_files(
    table: Any, storage_options: Mapping[str, Any] | None
) -> tuple[str, list[str], Any]:
    from parquet_bloom._tables.iceberg_check import live_parquet_files
    from parquet_bloom._tables.iceberg_io import storage_options_for
    from parquet_bloom._tables.iceberg_rewrite import table_name

    files, _ = live_parquet_files(table, table.current_snapshot())
    options = storage_options if storage_options is not None else storage_options_for(table)
    return f"{table_name(table)} (Iceberg)", [f.source for f in files], options


def _advise_file(
    path: str,
    wanted: list[str] | None,
    fpp: float,
    storage_options: Mapping[str, Any] | None,
    exact_limit: int,
    by_column: dict[str, list[ChunkAdvice]],
    types: dict[str, str],
    notes: dict[str, list[str]],
) -> None:
    options = storage_options if "://" in path else None
    with (
        BloomFilterReader(path, storage_options=options) as reader,
        ByteSource(path, storage_options=options, size=reader.size, exists=True) as source,
        ChunkReader(source) as values,
    ):
        leaves = reader.schema_leaves
        by_path = {leaf.path: leaf for leaf in leaves}
        if wanted is None:
            selected = {c.path for c in reader.column_chunks if c.bloom_filter_offset is not None}
        else:
            selected = set(named_leaves(wanted, leaves, path))
        for chunk in reader.column_chunks:
            if chunk.path not in selected:
                continue
            if chunk.physical_type == "BOOLEAN":
                notes.setdefault(chunk.path, []).append(
                    "BOOLEAN: writers disagree on how booleans are hashed; no filter advised"
                )
                continue
            f = None
            if chunk.bloom_filter_offset is not None:
                try:
                    f = reader.filter(chunk.row_group, chunk.path)
                except FileReadError:
                    raise
                except BloomFilterError as err:
                    notes.setdefault(chunk.path, []).append(f"{path}: unreadable filter: {err}")
            if f is not None and chunk.num_values > exact_limit:
                ndv, basis = max(math.ceil(f.estimate_ndv()), 0), _BASIS_FILTER
            else:
                try:
                    arr = values.leaf(chunk.row_group, by_path[chunk.path], leaves)
                    hashes = logical.column_hashes(arr, by_path[chunk.path])
                except (Unmapped, TypeError, ValueError) as err:
                    notes.setdefault(chunk.path, []).append(f"{path}: values not read: {err}")
                    continue
                ndv, basis = int(sizing.distinct_hashes(hashes).size), _BASIS_EXACT
            advice = advise_size(ndv, fpp)
            types[chunk.path] = chunk.physical_type
            by_column.setdefault(chunk.path, []).append(
                ChunkAdvice(
                    file=path,
                    row_group=chunk.row_group,
                    num_values=chunk.num_values,
                    ndv=ndv,
                    ndv_basis=basis,
                    column_bytes=chunk.total_compressed_size,
                    filter_bytes=None if f is None else f.num_bytes,
                    filter_fpp=None if f is None else expected_fpp(ndv, f.num_bytes),
                    advised_bytes=advice.advised_bytes,
                    advised_fpp=advice.advised_fpp,
                    spec_bytes=advice.spec_bytes,
                    writers=advice.writers,
                    half_fpp=advice.half_fpp,
                )
            )

"""Building a Bloom index from the filters already in a dataset's files: each file's footer and
filters are read (its tail; no data is decoded), the row groups of each column are grouped by
filter size, each group's filters turned into bit slices, and everything written as one Puffin
file that appears whole or not at all (docs/index.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

import pyarrow as pa

from parquet_bloom import __version__
from parquet_bloom import _format as fmt
from parquet_bloom._index import entries as ent
from parquet_bloom._index import layout, puffin, slices, store, text_build
from parquet_bloom._index.files import IndexedFile, dataset_files, file_columns
from parquet_bloom._index.text import TextFilter
from parquet_bloom._index.text_build import TextSummary
from parquet_bloom._io import location
from parquet_bloom._io.source import ByteSource
from parquet_bloom._prune.dataset import file_schema
from parquet_bloom._reader import BloomFilterReader
from parquet_bloom._rewrite.build import FilterBuilds, Sizing, check_sizing
from parquet_bloom._rewrite.output import open_sink
from parquet_bloom._threads import read_pool
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

# Which filters a build makes from the values: none, those missing, or every one.
FromData = Literal["missing", "all"] | None

__all__ = [
    "ClassSlices",
    "ColumnSummary",
    "FileRead",
    "FromData",
    "IndexBuildReport",
    "Segment",
    "build_index",
    "check_columns",
    "check_from_data",
    "check_read_columns",
    "create_index",
    "create_index_with",
    "data_sizing",
    "entries_blob",
    "files_blob",
    "filters_from_data",
    "needs_data",
    "read_file",
    "reporting_progress",
    "segment_blobs",
    "target_fpp",
    "write_blobs",
    "write_segment",
]


@dataclass
class ColumnSummary:
    """One column of a built index: ``classes`` (filter size in bytes -> row groups),
    ``unfiltered`` (row groups, or whole files, every lookup returns), ``slice_bytes`` (the
    slices' bytes) and ``filter_bytes`` (the bytes of the filters they were made from)."""

    classes: dict[int, int] = field(default_factory=dict)
    unfiltered: int = 0
    slice_bytes: int = 0
    filter_bytes: int = 0


@dataclass
class IndexBuildReport:
    """What :func:`build_index` wrote: ``location``, ``files``, ``row_groups``, ``columns``
    (name -> :class:`ColumnSummary`), ``index_bytes`` (the Puffin file's size), the reads of the
    files (``reads``, ``bytes_read``), ``unreadable`` (``(path, reason)`` of files whose footer
    could not be read: each is in the index as a whole file every lookup returns; and of files
    whose values could not be read to build filters: those row groups have none), and
    ``built_from_data`` (the filters built from the values), ``text`` (each token or n-gram
    filter: :class:`TextSummary`)."""

    location: str
    files: int = 0
    row_groups: int = 0
    columns: dict[str, ColumnSummary] = field(default_factory=dict)
    index_bytes: int = 0
    reads: int = 0
    bytes_read: int = 0
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    built_from_data: int = 0
    text: list[TextSummary] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [
            f"index {self.location}: {self.files} files, {self.row_groups} row groups, "
            f"{self.index_bytes:,} bytes ({self.reads} reads, {self.bytes_read:,} bytes read)"
        ]
        if self.built_from_data:
            lines.append(f"  {self.built_from_data} filters built from the values")
        for name, c in self.columns.items():
            sizes = ", ".join(f"{n} x {size:,} B" for size, n in sorted(c.classes.items()))
            lines.append(
                f"  {name}: {sizes or 'no filters'}; {c.unfiltered} without a filter; "
                f"slices {c.slice_bytes:,} B from filters of {c.filter_bytes:,} B"
            )
        for t in self.text:
            lines.append(
                f"  {t.column}: {t.spec} over {t.filtered} row groups; {t.unfiltered} without "
                f"one; slices {t.slice_bytes:,} B"
            )
        for path, reason in self.unreadable:
            lines.append(f"  unreadable, always a candidate: {path}: {reason}")
        return "\n".join(lines)


@dataclass
class FileRead:
    """What one file gave: its row groups' rows, and per column each row group's filter (its
    bitset), or why it has none usable."""

    file: IndexedFile
    size: int
    rows: list[int] = field(default_factory=list)
    types: dict[str, dict[str, str]] = field(default_factory=dict)
    arrow: dict[str, str] = field(default_factory=dict)  # column -> its top-level Arrow field
    filters: dict[str, list[bytes | None]] = field(default_factory=dict)
    own: dict[str, str] = field(default_factory=dict)  # column -> its path in the file
    # Each row group's filter size by column, where the bitsets are not here (a distributed
    # build's driver, parquet_bloom.spark): then used instead of ``filters``.
    sizes: dict[str, list[int | None]] | None = None
    error: str | None = None
    data_error: str | None = None  # why filters could not be built from the values
    built: int = 0  # filters built from the values (a distributed build's count)
    reads: int = 0
    bytes_read: int = 0

    @property
    def path(self) -> str:
        return self.file.key

    def filter_sizes(self, column: str) -> list[int | None]:
        """Each row group's filter size for ``column`` (None: no usable filter)."""
        if self.sizes is not None:
            return self.sizes[column]
        return [None if b is None else len(b) for b in self.filters[column]]

    def entry(self, row_group: int, rows: int) -> ent.Entry:
        f = self.file
        return ent.Entry(f.key, row_group, max(self.size, 0), rows, f.modified, f.sequence)


@dataclass(frozen=True)
class Segment:
    """A Puffin file written: its ``size``, and its footer (``footer_offset``, and ``footer``:
    the bytes from the footer's leading magic to the end of its payload), so that an index's
    pointer can carry it and a lookup need not read it."""

    size: int
    footer_offset: int
    footer: bytes


def build_index(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    columns: Sequence[str],
    index_location: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    index_storage_options: Mapping[str, Any] | None = None,
    from_data: FromData = None,
    fpp: float | None = None,
    text: Sequence[TextFilter] = (),
) -> IndexBuildReport:
    """Build a Bloom index of ``columns`` over the Parquet files of ``source`` (a file, a
    directory, a prefix or glob, or a list of them, as :func:`parquet_bloom.prune` takes) from
    the filters the files hold, and write it to ``index_location`` (a local path or a URL;
    ``index_storage_options`` configure it, default ``storage_options``): one Puffin file there
    when its name ends in ``.puffin``, else an index directory (a segment and the pointer to
    it, which ``refresh_index`` and ``compact_index`` maintain). ``from_data``: also build,
    from the values, the filters of row groups that have none (``"missing"``) or replace every
    filter (``"all"``), at ``fpp`` (default about 1/N for N row groups, see
    docs/index.md#lookups-and-their-cost); None: only the filters the files hold. ``text``:
    token and n-gram filters (:class:`TextFilter`) to build from the string columns' values
    (docs/index.md#token-and-n-gram-filters); ``columns`` may then be empty.

    Raises ValueError for no column, or a column no file has, and the read error of a file
    that could not be fetched (nothing is written then). A file that is not a readable Parquet
    file is recorded as a whole file every lookup returns."""
    texts = text_build.check_text_filters(text)
    wanted = check_columns(columns, allow_empty=bool(texts))
    check_from_data(from_data, fpp)
    files = dataset_files(source, storage_options)
    options = storage_options if index_storage_options is None else index_storage_options
    target = os.fspath(index_location)
    what = os.fspath(source) if isinstance(source, str | os.PathLike) else "the dataset"
    if store.is_single_file(target):
        report, _ = write_segment(
            files, wanted, target, options, what=what, from_data=from_data, fpp=fpp, text=texts
        )
        return report
    return create_index(
        target, files, wanted, options, what=what, from_data=from_data, fpp=fpp, text=texts
    )


def check_from_data(from_data: FromData, fpp: float | None) -> None:
    """Refuse options no build could take, before any work."""
    if from_data not in (None, "missing", "all"):
        raise ValueError(f'from_data must be None, "missing" or "all", not {from_data!r}')
    if fpp is not None:
        if from_data is None:
            raise ValueError("fpp sizes the filters built from the values: pass from_data too")
        check_sizing(fpp, "exact", None, None)


def create_index(
    directory: str,
    files: Sequence[IndexedFile],
    columns: list[str],
    storage_options: Mapping[str, Any] | None,
    *,
    what: str,
    from_data: FromData = None,
    fpp: float | None = None,
    text: Sequence[TextFilter] = (),
) -> IndexBuildReport:
    """A new index in ``directory``: one segment, then the pointer to it alone (an index there
    before is replaced: its segments stay until :func:`compact_index` removes them)."""

    def write(target: str) -> tuple[IndexBuildReport, Segment]:
        return write_segment(
            files,
            columns,
            target,
            storage_options,
            what=what,
            from_data=from_data,
            fpp=fpp,
            text=text,
        )

    return create_index_with(directory, columns, storage_options, write)


def create_index_with(
    directory: str,
    columns: list[str],
    storage_options: Mapping[str, Any] | None,
    write: Callable[[str], tuple[IndexBuildReport, Segment]],
) -> IndexBuildReport:
    """:func:`create_index` with the segment written by ``write(target)`` (a distributed build
    writes it from what its tasks send)."""
    previous = store.read_pointer(directory, storage_options)
    name = store.new_segment_name()
    report, segment = write(store.join(directory, name))
    ref = store.SegmentRef(name, segment.size, segment.footer_offset, segment.footer)
    replaced = set() if previous is None else {s.name for s in previous.segments}

    def change(current: store.Pointer | None) -> store.Pointer:
        # The segments the build read are replaced; those another writer added since (a
        # refresh that went in first) stay after it, for the same columns.
        kept: tuple[store.SegmentRef, ...] = ()
        if current is not None and current.columns == tuple(columns):
            # (Its own segment too, named when its pointer went in though the store answered
            # that it existed.)
            kept = tuple(s for s in current.segments if s.name not in replaced and s.name != name)
        return store.Pointer(0, tuple(columns), (ref, *kept))

    store.commit(directory, previous, change, storage_options)
    report.location = directory
    return report


def check_columns(columns: Sequence[str], *, allow_empty: bool = False) -> list[str]:
    """``columns`` as a list without repeats; a mistake is a ValueError or TypeError
    (``allow_empty``: no column is fine, an index of text filters only)."""
    if isinstance(columns, str) or (not columns and not allow_empty):
        raise ValueError("columns must be a non-empty list of column names")
    if not all(isinstance(c, str) for c in columns):
        raise TypeError("columns must be column names (str)")
    return list(dict.fromkeys(columns))


def write_segment(
    files: Sequence[IndexedFile],
    columns: list[str],
    target: str,
    storage_options: Mapping[str, Any] | None,
    *,
    what: str = "the dataset",
    require_columns: bool = True,
    from_data: FromData = None,
    fpp: float | None = None,
    fields: Mapping[str, int] | None = None,
    snapshot: tuple[int, int] = (-1, -1),
    text: Sequence[TextFilter] = (),
) -> tuple[IndexBuildReport, Segment]:
    """Read ``files``' filters of ``columns`` and write them as one Puffin file at ``target``
    (``require_columns``: a column no file has is a ValueError). ``from_data``: build from the
    values the filters of the row groups that have none (``"missing"``) or of every row group
    (``"all"``), at false-positive rate ``fpp`` (default about 1/N for N row groups: a lookup
    over the whole index then expects about one false candidate). ``fields`` and ``snapshot``
    as :func:`write_blobs` takes them. ``text``: token and n-gram filters built from the
    values (:mod:`.text_build`)."""
    reads = _tracked("reading", read_pool().map(partial(read_file, columns), files), len(files))
    check_read_columns(reads, columns, what, require_columns)
    built = 0
    if from_data is not None:
        sizing = data_sizing(reads, fpp)
        every = from_data == "all"
        fill = partial(filters_from_data, columns, sizing, every)
        todo = [r for r in reads if needs_data(r, columns, every)]
        built = sum(_tracked("building from the values", read_pool().map(fill, todo), len(todo)))
    report, blobs = segment_blobs(reads, columns, target, built_from_data=built)
    if text:
        # A file whose footer could not be read is a whole file here too: not read again.
        ok = [f for f, r in zip(files, reads, strict=True) if not r.error]
        readable = iter(text_build.read_all(text, ok))
        texts = [text_build.TextRead(error=r.error) if r.error else next(readable) for r in reads]
        missing = [f.column for i, f in enumerate(text) if not any(i in t.pairs for t in texts)]
        if require_columns and missing and any(t.error is None for t in texts):
            raise ValueError(f"no file of {what} has the column(s) {', '.join(map(repr, missing))}")
        wrong = text_build.not_strings(text, texts) if require_columns else []
        if wrong:
            raise ValueError(
                f"the files of {what} hold column(s) {', '.join(map(repr, wrong))} as another "
                "type, not strings: a token or n-gram filter indexes string columns"
            )
        members = [
            (r.entry(rg, rows), i, rg) if r.error is None else (r.entry(-1, -1), i, -1)
            for i, r in enumerate(reads)
            for rg, rows in (enumerate(r.rows) if r.error is None else [(-1, -1)])
        ]
        report.text, more = text_build.text_blobs(text, texts, members)
        blobs[-1:-1] = more  # before the files blob
        report.reads += sum(t.reads for t in texts)
        report.bytes_read += sum(t.bytes_read for t in texts)
        report.unreadable += [
            (r.path, t.error) for r, t in zip(reads, texts, strict=True) if t.error and not r.error
        ]
    segment = write_blobs(target, blobs, columns, storage_options, fields=fields, snapshot=snapshot)
    report.index_bytes = segment.size
    return report, segment


# Who is told of a build's progress in this context (the command's progress bar): called in
# the building thread with the stage, the files done and the files of the stage.
Progress = Callable[[str, int, int], None]
_progress: ContextVar[Progress | None] = ContextVar("parquet_bloom_index_progress", default=None)
_T = TypeVar("_T")


@contextmanager
def reporting_progress(report: Progress) -> Iterator[None]:
    """Within the block, builds in this context call ``report(stage, done, total)`` as each
    file's tail is read ("reading") and each file's filters are built from the values."""
    token = _progress.set(report)
    try:
        yield
    finally:
        _progress.reset(token)


def _tracked(stage: str, results: Iterable[_T], total: int) -> list[_T]:
    report = _progress.get()
    out: list[_T] = []
    for result in results:
        out.append(result)
        if report is not None:
            report(stage, len(out), total)
    return out


def check_read_columns(
    reads: Sequence[FileRead], columns: list[str], what: str, require_columns: bool
) -> None:
    """A column no file read has is a ValueError (when ``require_columns``, and some file could
    be read)."""
    missing = [c for c in columns if not any(c in r.types for r in reads)]
    if require_columns and missing and any(r.error is None for r in reads):
        raise ValueError(f"no file of {what} has the column(s) {', '.join(map(repr, missing))}")


# The slices of one size class, given its column, class number, filter size and members (each
# a read and a row group, in the order of the class's bits): the blob's bytes in order.
ClassSlices = Callable[[str, int, int, list[tuple[FileRead, int]]], Iterable[bytes]]


def segment_blobs(
    reads: list[FileRead],
    columns: list[str],
    target: str,
    *,
    built_from_data: int = 0,
    class_slices: ClassSlices | None = None,
) -> tuple[IndexBuildReport, list[tuple[puffin.BlobMetadata, Iterable[bytes]]]]:
    """The report and the blobs (for :func:`write_blobs`) of the files ``reads``: each class's
    slices made by ``class_slices`` (default: from the bitsets the reads hold, here)."""
    report = IndexBuildReport(location=target, files=len(reads), built_from_data=built_from_data)
    report.row_groups = sum(len(r.rows) for r in reads)
    report.reads = sum(r.reads for r in reads)
    report.bytes_read = sum(r.bytes_read for r in reads)
    report.unreadable = [(r.path, r.error) for r in reads if r.error is not None]
    report.unreadable += [(r.path, r.data_error) for r in reads if r.data_error is not None]
    blobs: list[tuple[puffin.BlobMetadata, Iterable[bytes]]] = []
    for column in columns:
        summary = ColumnSummary()
        report.columns[column] = summary
        blobs += _column_blobs(column, reads, summary, class_slices or _local_slices)
    blobs.append(_files_blob(reads))
    return report, blobs


def target_fpp(row_groups: int) -> float:
    """The false-positive rate at which a lookup over ``row_groups`` row groups expects about
    one false candidate: 1/N, at most 1 %."""
    return min(0.01, 1.0 / max(row_groups, 1))


def data_sizing(reads: Sequence[FileRead], fpp: float | None) -> Sizing:
    """How filters built from the values are sized: exactly for each row group's distinct
    values, at ``fpp`` (default :func:`target_fpp` of every row group of ``reads``)."""
    total = sum(len(r.rows) for r in reads)
    return check_sizing(fpp if fpp is not None else target_fpp(total), "exact", None, None)


def needs_data(read: FileRead, columns: Sequence[str], every: bool) -> bool:
    """Whether :func:`filters_from_data` would build a filter of ``read``'s (``every``: for
    every row group, else for those without one)."""
    if read.error is not None:
        return False
    return any(
        every or size is None for c in columns if c in read.types for size in read.filter_sizes(c)
    )


def filters_from_data(columns: list[str], sizing: Sizing, every: bool, got: FileRead) -> int:
    """Build, from the values, the filters of ``got``'s row groups that have none (``every``:
    all of them); how many were built. The values are hashed from the pages by the rewrite's
    builds (its page reader, on the build threads)."""
    wanted = [
        (column, rg)
        for column in columns
        if column in got.filters
        for rg, bitset in enumerate(got.filters[column])
        if every or bitset is None
    ]
    if not wanted:
        return 0
    file = got.file
    try:
        with (
            BloomFilterReader(file.path, filesystem=file.filesystem, size=got.size) as reader,
            ByteSource(file.path, filesystem=file.filesystem, size=reader.size) as source,
        ):
            md = fmt.decode_file_metadata(reader.footer_bytes, full=True)
            targets = [reader.column_chunk(rg, got.own[column]) for column, rg in wanted]
            with FilterBuilds(source, targets, reader.schema_leaves, md, sizing) as builds:
                for (column, rg), chunk in zip(wanted, targets, strict=True):
                    bloom = builds.result((chunk.row_group, chunk.column_index))
                    got.filters[column][rg] = bloom.to_bytes()
            got.reads += reader.reads + source.reads
            got.bytes_read += reader.bytes_read + source.bytes_read
    except (CorruptFileError, UnsupportedFileError) as err:
        # Values that cannot be read: those row groups stay without a filter (every lookup
        # returns them), and the report says why.
        got.data_error = str(err)
        return 0
    return len(wanted)


def read_file(columns: list[str], file: IndexedFile) -> FileRead:
    """``file``'s footer and filters of ``columns`` (its tail; no data)."""
    got = FileRead(file=file, size=file.size if file.size is not None else -1)
    try:
        with BloomFilterReader(file.path, filesystem=file.filesystem, size=file.size) as reader:
            got.size = reader.size
            groups = reader.metadata.row_groups or []
            got.rows = [int(rg.num_rows) for rg in groups]
            named = file_columns(file, reader.schema_leaves, columns)
            if named is None:
                raise UnsupportedFileError(
                    "its schema has no field ids to find the columns by", source=file.key
                )
            got.own = named
            leaves = {leaf.path: leaf for leaf in reader.schema_leaves}
            found, failed = reader.filters_with_errors(list(named.values()))
            schema = file_schema(reader) if named else None
            for column, own in named.items():
                got.types[column] = fmt.leaf_type_properties(leaves[own])
                assert schema is not None
                top = schema.field(leaves[own].path_in_schema[0])
                got.arrow[column] = pa.schema([top]).serialize().to_pybytes().hex()
                row = []
                for rg in range(len(groups)):
                    f = found.get((rg, own))
                    row.append(None if f is None or (rg, own) in failed else f.to_bytes())
                got.filters[column] = row
            got.reads, got.bytes_read = reader.reads, reader.bytes_read
    except (CorruptFileError, UnsupportedFileError) as err:
        # Not a Parquet file we can read: a whole file every lookup returns. (A failure to
        # fetch it is raised: the build is to be tried again, not an index of guesses.)
        got.error = str(err)
        got.rows, got.types, got.filters = [], {}, {}
    return got


def _local_slices(
    column: str, number: int, num_bytes: int, members: list[tuple[FileRead, int]]
) -> Iterable[bytes]:
    bitsets: list[bytes] = []
    for r, rg in members:
        bitset = r.filters[column][rg]
        assert bitset is not None  # a class's members have a filter
        bitsets.append(bitset)
    return slices.slices_of(slices.words_of(bitsets, num_bytes))


def _column_blobs(
    column: str, reads: list[FileRead], summary: ColumnSummary, class_slices: ClassSlices
) -> list[tuple[puffin.BlobMetadata, Iterable[bytes]]]:
    """The blobs of one column: a slices and an entries blob per filter size, and the entries of
    the row groups without a usable filter."""
    typed = [r for r in reads if column in r.types]
    kind = typed[0].types[column] if typed else {}
    arrow = typed[0].arrow[column] if typed else None
    classes: dict[int, list[tuple[ent.Entry, tuple[FileRead, int]]]] = {}
    none: list[ent.Entry] = []
    for r in reads:
        if r.error is not None:
            none.append(r.entry(-1, -1))
            continue
        if column not in r.types:
            continue  # no such column in this file: its rows hold none of the values
        same_type = r.types[column] == kind
        for rg, (rows, size) in enumerate(zip(r.rows, r.filter_sizes(column), strict=True)):
            entry = r.entry(rg, rows)
            if size is None or not same_type:
                none.append(entry)
            else:
                classes.setdefault(size, []).append((entry, (r, rg)))
    type_properties = {layout.TYPE_PREFIX + k: v for k, v in kind.items()}
    if arrow is not None:
        type_properties[layout.ARROW_FIELD] = arrow
    out: list[tuple[puffin.BlobMetadata, Iterable[bytes]]] = []
    for number, (num_bytes, members) in enumerate(sorted(classes.items())):
        n = len(members)
        length = slices.slice_bytes(n) * (num_bytes // 32) * 256
        common = {layout.COLUMN: column, layout.CLASS: str(number), layout.ROW_GROUPS: str(n)}
        meta = puffin.BlobMetadata(
            layout.SLICES_BLOB,
            offset=0,
            length=length,
            properties={**common, layout.NUM_BYTES: str(num_bytes), **type_properties},
        )
        out.append((meta, class_slices(column, number, num_bytes, [m for _, m in members])))
        out.append(entries_blob([e for e, _ in members], common, "sbbf"))
        summary.classes[num_bytes] = n
        summary.slice_bytes += length
        summary.filter_bytes += n * num_bytes
    if none:
        common = {layout.COLUMN: column, layout.CLASS: "none", layout.ROW_GROUPS: str(len(none))}
        out.append(entries_blob(none, common, "none"))
        summary.unfiltered = len(none)
    return out


def entries_blob(
    members: list[ent.Entry], common: dict[str, str], filters: str
) -> tuple[puffin.BlobMetadata, Iterable[bytes]]:
    data, width = ent.encode_entries(members)
    meta = puffin.BlobMetadata(
        layout.ROW_GROUPS_BLOB,
        offset=0,
        length=len(data),
        properties={**common, layout.PATH_WIDTH: str(width), layout.FILTERS: filters},
    )
    return meta, (data,)


def _files_blob(reads: list[FileRead]) -> tuple[puffin.BlobMetadata, Iterable[bytes]]:
    return files_blob([[r.path, r.size, r.file.modified, r.file.sequence] for r in reads])


def files_blob(rows: list[list[Any]]) -> tuple[puffin.BlobMetadata, Iterable[bytes]]:
    """The files blob of ``rows``: ``[path, size, modified, sequence]`` each."""
    data = json.dumps(rows, separators=(",", ":")).encode()
    return puffin.BlobMetadata(layout.FILES_BLOB, offset=0, length=len(data)), (data,)


def write_blobs(
    target: str,
    blobs: list[tuple[puffin.BlobMetadata, Iterable[bytes]]],
    columns: list[str],
    storage_options: Mapping[str, Any] | None,
    *,
    fields: Mapping[str, int] | None = None,
    snapshot: tuple[int, int] = (-1, -1),
) -> Segment:
    """Write the Puffin file (whole or not at all). ``fields``: each column's Iceberg field
    id, put in its blobs' ``fields``; ``snapshot``: the snapshot id and sequence number the
    index was built from, put in every blob's (-1 outside Iceberg)."""
    filesystem, path = location.resolve(target, storage_options=storage_options)
    if filesystem is None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    placed: list[puffin.BlobMetadata] = []
    at = len(puffin.MAGIC)
    with open_sink(filesystem, path) as sink:
        sink.write(puffin.MAGIC)
        for meta, parts in blobs:
            written = 0
            for part in _nonempty(parts):
                sink.write(part)
                written += len(part)
            if written != meta.length:
                raise AssertionError(f"blob {meta.type} wrote {written} bytes, not {meta.length}")
            placed.append(_at(meta, at, fields or {}, snapshot))
            at += written
        footer = puffin.encode_footer(
            placed,
            {
                "created-by": f"parquet-bloom {__version__}",
                layout.VERSION_PROPERTY: layout.FORMAT_VERSION,
                "parquet-bloom.columns": json.dumps(columns),
            },
        )
        sink.write(footer)
    return Segment(at + len(footer), at, footer[: -puffin.TRAILER_SIZE])


def _nonempty(parts: Iterable[bytes]) -> Iterator[bytes]:
    return (p for p in parts if p)


def _at(
    meta: puffin.BlobMetadata,
    offset: int,
    fields: Mapping[str, int],
    snapshot: tuple[int, int],
) -> puffin.BlobMetadata:
    column = meta.properties.get(layout.COLUMN)
    field_id = fields.get(column) if column is not None else None
    snapshot_id, sequence_number = snapshot
    return puffin.BlobMetadata(
        meta.type,
        offset=offset,
        length=meta.length,
        fields=meta.fields if field_id is None else (field_id,),
        snapshot_id=meta.snapshot_id if snapshot_id < 0 else snapshot_id,
        sequence_number=meta.sequence_number if sequence_number < 0 else sequence_number,
        properties=meta.properties,
    )

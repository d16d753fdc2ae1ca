"""What a Parquet file's Bloom filters look like, and whether they are right.

Two questions, for two audiences:

- :func:`inspect_file` (for anyone holding a file): which column chunks have filters, where they
  lie, how full they are, what false-positive rate that gives, and whether a filter is badly
  sized (parquet-java's default 1 MiB for a few hundred values, or so small that most probes
  pass). It reads only the footer and the filters.
- :func:`check_file` (for people who write Parquet writers): is every filter usable and correct?
  Header, offset and length are valid; every value of every filtered chunk is found (a missing
  value is a false negative, which makes readers drop rows that exist); the size is what some
  writer's rule gives for the chunk's actual NDV; the rate is within a bound. It also reads the
  column chunks' values, one chunk at a time, through pyarrow.

Filters come from :class:`~parquet_bloom._reader.BloomFilterReader`; a chunk's values become the
hashes the writer should have inserted through :func:`parquet_bloom._logical.column_hashes`.
A filter that cannot be decoded is a finding (a violation), not a crash. A read that fails
(the store refuses, resets, times out, or the object vanishes mid-run) is no finding about the
file: both raise :class:`~parquet_bloom.errors.FileReadError`, naming the URL and the bytes.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from parquet_bloom import _format as fmt
from parquet_bloom import _logical as logical
from parquet_bloom import _sizing as sizing
from parquet_bloom._arrow_chunks import ChunkReader, Unmapped
from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._gate import (
    EMPTY_KIND,
    MISSING_KIND,
    empty_message,
    missing_filters,
    named_leaves,
)
from parquet_bloom._gate import required_paths as _required_paths
from parquet_bloom._io.source import ByteSource
from parquet_bloom._locate import locate_filter
from parquet_bloom._prune.decryption import refuses
from parquet_bloom._reader import BloomFilterReader
from parquet_bloom._sbbf import SplitBlockBloomFilter, expected_fpp
from parquet_bloom._size_advice import DEFAULT_TARGET_FPP, size_notes
from parquet_bloom.errors import (
    BloomFilterError,
    DecryptionError,
    FileReadError,
    UnsupportedFileError,
)

__all__ = [
    "CheckReport",
    "ChunkCheck",
    "ChunkInspection",
    "FileReport",
    "SizeMatch",
    "Violation",
    "check_file",
    "decode_key_value_metadata",
    "format_bytes",
    "inspect_file",
]

# -- thresholds for warnings ---------------------------------------------------------------------

# "Oversized": at least this many times the bytes that the filter's estimated NDV needs at
# OVERSIZE_REFERENCE_FPP, and at least OVERSIZE_MIN_BYTES (below that the waste does not matter).
# parquet-java's default, a 1 MiB filter for a chunk of a few hundred values, is the case in mind.
OVERSIZE_FACTOR = 8
OVERSIZE_MIN_BYTES = 64 * 1024
OVERSIZE_REFERENCE_FPP = 0.01
# "Useless": a filter that lets through more than half of the values it never saw saves less
# than the read of the filter costs.
USELESS_FPP = 0.5

_BOOLEAN_WARNING = (
    "BOOLEAN column: writers disagree on how booleans are hashed, so this filter cannot be used "
    "for pruning"
)
_BOOLEAN_NOTE = _BOOLEAN_WARNING + " (not checked for missing values)"


# -- reports -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkInspection:
    """One column chunk's filter as :func:`inspect_file` sees it."""

    row_group: int
    column: str
    physical_type: str
    present: bool  # the footer gives a bloom_filter_offset
    offset: int | None = None
    length: int | None = None  # bloom_filter_length: header + bitset (format >= 2.10)
    location: str | None = None  # e.g. "after row group 2", "before the footer, ..."
    num_bytes: int | None = None  # bitset size
    fraction_set: float | None = None
    estimated_ndv: float | None = None  # distinct values that best explain the bits set
    fpp: float | None = None  # rate at which values never inserted pass, from the bits set
    warnings: tuple[str, ...] = ()
    error: str | None = None  # why the filter could not be read


@dataclass(frozen=True)
class FileReport:
    """Every column chunk of one file, with or without a filter."""

    path: str
    num_rows: int
    num_row_groups: int
    created_by: str | None
    chunks: tuple[ChunkInspection, ...]
    requests: int = 0
    """Requests made: reads, and a size lookup (a HEAD on object stores) if one was needed."""
    bytes_read: int = 0
    size: int | None = None
    """The file's size in bytes."""
    footer: bytes = field(default=b"", repr=False, compare=False)
    """The footer as read (the Thrift FileMetaData): more of it than the report holds, for a
    caller that needs it, without reading it again (:attr:`key_value_metadata`)."""

    @property
    def filters(self) -> tuple[ChunkInspection, ...]:
        """The chunks that have a filter (readable or not)."""
        return tuple(c for c in self.chunks if c.present)

    @cached_property
    def key_value_metadata(self) -> dict[str, str | None]:
        """The footer's key-value metadata, decoded from :attr:`footer` on first use."""
        return decode_key_value_metadata(self.footer)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON, without what reading it cost (``requests``, ``bytes_read``) and
        the footer's bytes (``size``, ``footer``)."""
        return _to_dict(self)


@dataclass(frozen=True)
class Violation:
    """Something a reader would get wrong, or refuse, because of how the file was written.

    ``kind``: "offset", "length" or "header" (the filter cannot be located or decoded),
    "unsupported" (a header this library cannot read), "overlap" (the filter's bytes overlap
    column data or another filter), "false-negative" (a value of the chunk is not in its
    filter; ``value`` is the first one), "fpp" (the rate exceeds ``max_fpp``) or "data" (the
    chunk's values could not be read to check the filter), "decryption" (an encrypted filter,
    or the metadata of an encrypted column chunk, that does not decrypt with the keys given: a
    wrong key or tampered bytes; a key not given is a note, not a violation).
    """

    kind: str
    file: str
    row_group: int | None
    column: str | None
    value: Any
    message: str

    def __str__(self) -> str:
        where = [self.file]
        if self.row_group is not None:
            where.append(f"row group {self.row_group}")
        if self.column is not None:
            where.append(f"column {self.column!r}")
        return f"{', '.join(where)}: {self.message}"


@dataclass(frozen=True)
class SizeMatch:
    """A writer rule that reproduces a filter's size, and what it was asked about."""

    flavor: str
    basis: str  # "chunk NDV" or "no NDV configured"
    ndv: int | None
    fpp: float | None


@dataclass(frozen=True)
class ChunkCheck:
    """One filtered column chunk as :func:`check_file` measured it."""

    row_group: int
    column: str
    physical_type: str
    num_bytes: int
    num_values: int | None = None  # non-null values read from the chunk
    ndv: int | None = None  # distinct values (distinct hashes) in the chunk
    missing: int | None = None  # distinct values not found in the filter
    fpp: float = 0.0  # rate from the bits actually set
    fpp_at_ndv: float | None = None  # rate expected for `ndv` values at this size
    exact: bool | None = None  # the filter is exactly the one its values give at this size
    matching_flavors: tuple[str, ...] = ()
    size_matches: tuple[SizeMatch, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckReport:
    """The result of :func:`check_file`: ``ok`` when there are no violations."""

    path: str
    chunks: tuple[ChunkCheck, ...]
    violations: tuple[Violation, ...]
    notes: tuple[str, ...] = ()
    requests: int = 0
    """Requests made (the filters' reader's and the values' reads, and size lookups)."""
    bytes_read: int = 0
    size: int | None = None
    """The file's size in bytes."""
    footer: bytes = field(default=b"", repr=False, compare=False)
    """The footer as read, as :attr:`FileReport.footer`."""

    @property
    def ok(self) -> bool:
        return not self.violations

    @cached_property
    def key_value_metadata(self) -> dict[str, str | None]:
        """The footer's key-value metadata, decoded from :attr:`footer` on first use."""
        return decode_key_value_metadata(self.footer)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON, as :meth:`FileReport.to_dict`, with ``ok``."""
        return _to_dict(self) | {"ok": self.ok}


def _to_dict(report: FileReport | CheckReport) -> dict[str, Any]:
    out = asdict(report)
    for name in ("requests", "bytes_read", "size", "footer"):
        del out[name]
    plain: dict[str, Any] = _plain(out)
    return plain


def decode_key_value_metadata(footer: bytes) -> dict[str, str | None]:
    """The key-value metadata of a footer (the Thrift FileMetaData bytes; none in ``b""``),
    the last value of a key winning as in parquet-java's map. Decodes the whole footer: the
    reader's decode skips these fields."""
    if not footer:
        return {}
    found: dict[str, str | None] = {}
    for kv in fmt.decode_file_metadata(footer, full=True).key_value_metadata or ():
        key = _text(kv.key)
        if key is not None:
            found[key] = _text(kv.value)
    return found


def _text(value: str | bytes | None) -> str | None:
    """A Thrift string as text: the full decode may leave it as bytes (UTF-8, leniently)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


# -- layout: where filters lie -----------------------------------------------------------------


@dataclass(frozen=True)
class _Extent:
    start: int
    end: int  # exclusive


def _chunk_extent(chunk: fmt.ColumnChunkInfo) -> _Extent:
    start = fmt.chunk_start(chunk)
    return _Extent(start, start + chunk.total_compressed_size)


def _row_group_extents(chunks: Sequence[fmt.ColumnChunkInfo]) -> dict[int, _Extent]:
    extents: dict[int, _Extent] = {}
    for chunk in chunks:
        if chunk.encrypted:
            continue
        e = _chunk_extent(chunk)
        old = extents.get(chunk.row_group)
        if old is not None:
            e = _Extent(min(old.start, e.start), max(old.end, e.end))
        extents[chunk.row_group] = e
    return extents


def _describe_locations(
    filtered: Sequence[fmt.ColumnChunkInfo], extents: dict[int, _Extent]
) -> dict[tuple[int, str], str]:
    """Describe each filter's place relative to the row groups' column data.

    Writers differ (docs/format-notes.md, where writers place filters): arrow-rs writes each
    row group's filters after it, Arrow C++ all filters after the last row group, parquet-java
    after the page indexes, DuckDB just before the footer. So the description says what the
    offsets show, not whose it is.
    """
    ordered = sorted(extents.items(), key=lambda item: item[1].start)
    last_row_group = max(extents) if extents else None
    first_start = ordered[0][1].start if ordered else None
    places: dict[tuple[int, str], tuple[str, int | None]] = {}
    for chunk in filtered:
        offset = chunk.bloom_filter_offset
        assert offset is not None
        place: tuple[str, int | None] = ("end", None)
        for row_group, e in ordered:
            if e.start <= offset < e.end:
                place = ("inside", row_group)
                break
        else:
            if first_start is not None and offset < first_start:
                place = ("before", None)
            else:
                before = [rg for rg, e in ordered if e.end <= offset]
                later = [rg for rg, e in ordered if e.start > offset]
                if later and before:
                    place = ("between", before[-1])
        places[(chunk.row_group, chunk.path)] = place
    at_end = [key for key, place in places.items() if place[0] == "end"]
    between = any(place[0] == "between" for place in places.values())
    # With filters after each earlier row group, those at the end are the last row group's.
    end_is_last_row_group = between and all(rg == last_row_group for rg, _ in at_end)
    out = {}
    for key, (kind, near) in places.items():
        if kind == "inside":
            out[key] = f"inside row group {near}'s column data"
        elif kind == "before":
            out[key] = "before the first row group"
        elif kind == "between":
            out[key] = f"after row group {near}"
        elif end_is_last_row_group:
            out[key] = f"after row group {last_row_group}"
        elif len(at_end) > 1:
            out[key] = "before the footer, with the other filters"
        else:
            out[key] = "before the footer"
    return out


# -- inspect -------------------------------------------------------------------------------------


def format_bytes(n: float) -> str:
    """A byte count for people: "512 B", "1 MiB", "1.5 KiB"."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" or n == int(n) else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _size_warnings(f: SplitBlockBloomFilter, estimated_ndv: float, fpp: float) -> list[str]:
    out = []
    needed = sizing.expected_num_bytes(max(math.ceil(estimated_ndv), 0), OVERSIZE_REFERENCE_FPP)
    if f.num_bytes >= OVERSIZE_FACTOR * needed and f.num_bytes >= OVERSIZE_MIN_BYTES:
        hint = (
            " (parquet-java's size when no NDV is configured)"
            if f.num_bytes == sizing.PARQUET_JAVA_DEFAULT_MAX_BYTES
            else ""
        )
        out.append(
            f"oversized: {format_bytes(f.num_bytes)}{hint} for about {estimated_ndv:.0f} "
            f"distinct values, which need {format_bytes(needed)} for a "
            f"{OVERSIZE_REFERENCE_FPP:.0%} rate ({f.num_bytes // needed}x)"
        )
    if fpp > USELESS_FPP:
        out.append(
            f"too small to be useful: {f.fraction_set():.0%} of bits set, so {fpp:.0%} of "
            "values never inserted pass the filter"
        )
    return out


def inspect_file(
    path: str | os.PathLike[str],
    *,
    filesystem: Any | None = None,
    storage_options: Mapping[str, Any] | None = None,
    size: int | None = None,
    tail_size: int | None = None,
    decryption: DecryptionKeys | None = None,
) -> FileReport:
    """Describe every column chunk's filter in ``path`` (reads the footer and the filters).

    ``path`` is a local path, a URL (``s3://``, ``gs://``, ``abfs://``, ``https://``, any
    fsspec protocol, configured by ``storage_options``) or a path on ``filesystem``; ``size``,
    when known, saves the size lookup; ``tail_size`` is the first read's size
    (:class:`~parquet_bloom.BloomFilterReader`).

    Raises :class:`~parquet_bloom.errors.BloomFilterError` when the footer itself is unusable;
    a filter that cannot be decoded is reported in its chunk's ``error``. A read that fails
    raises :class:`~parquet_bloom.errors.FileReadError` (nothing is known about the filter).
    ``decryption``: the keys of an encrypted file (docs/encryption.md); a chunk whose key is
    not among them has ``present`` False (its metadata is unreadable) and its ``error`` says
    why.
    """
    name = os.fspath(path) if filesystem is None else str(path)
    with BloomFilterReader(
        name,
        filesystem=filesystem,
        storage_options=storage_options,
        size=size,
        tail_size=tail_size,
        decryption=decryption,
    ) as reader:
        chunks = reader.column_chunks
        filtered = [c for c in chunks if c.bloom_filter_offset is not None]
        locations = _describe_locations(filtered, _row_group_extents(chunks))
        # One coalesced read, in which one bad filter spoils no other.
        filters, failed = reader.filters_with_errors()
        _raise_read_error(failed.values())
        errors = {key: err.reason for key, err in failed.items()}
        out = []
        for chunk in chunks:
            key = (chunk.row_group, chunk.path)
            if chunk.bloom_filter_offset is None:
                absent = ChunkInspection(chunk.row_group, chunk.path, chunk.physical_type, False)
                out.append(replace(absent, error=errors.get(key)))  # an encrypted chunk's why
                continue
            location = locations[key]
            warnings = []
            if location.startswith("inside"):
                warnings.append("the filter's offset lies inside the row group's column data")
            if chunk.physical_type == "BOOLEAN":
                warnings.append(_BOOLEAN_WARNING)
            found = ChunkInspection(
                chunk.row_group,
                chunk.path,
                chunk.physical_type,
                present=True,
                offset=chunk.bloom_filter_offset,
                length=chunk.bloom_filter_length,
                location=location,
            )
            f = filters.get(key)
            if f is None:
                error = errors.get(key, "unreadable")
                out.append(replace(found, warnings=tuple(warnings), error=error))
                continue
            estimated_ndv, fpp = f.estimate_ndv(), f.fpp()
            warnings.extend(_size_warnings(f, estimated_ndv, fpp))
            out.append(
                replace(
                    found,
                    num_bytes=f.num_bytes,
                    fraction_set=f.fraction_set(),
                    estimated_ndv=estimated_ndv,
                    fpp=fpp,
                    warnings=tuple(warnings),
                )
            )
        md = reader.metadata
        return FileReport(
            path=name,
            num_rows=int(md.num_rows or 0),
            num_row_groups=reader.num_row_groups,
            created_by=md.created_by,
            chunks=tuple(out),
            requests=reader.requests,
            bytes_read=reader.bytes_read,
            size=reader.size,
            footer=bytes(reader.footer_bytes),
        )


# -- check ---------------------------------------------------------------------------------------


def _select_columns(
    columns: Iterable[str] | None, leaves: Sequence[fmt.SchemaLeaf], name: str
) -> set[str]:
    if columns is None:
        return {leaf.path for leaf in leaves}
    return set(named_leaves(columns, leaves, name))


def _violation_kind(err: BloomFilterError, chunk: fmt.ColumnChunkInfo, footer_start: int) -> str:
    if isinstance(err, DecryptionError):
        return "decryption"
    if isinstance(err, UnsupportedFileError):
        return "unsupported"
    try:
        locate_filter(chunk, footer_start=footer_start)
    except BloomFilterError as located:
        return "length" if "bloom_filter_length" in located.reason else "offset"
    if "bloom_filter_length" in err.reason or "short read" in err.reason:
        return "length"
    return "header"


def _overlaps(
    reader: BloomFilterReader, filtered: Sequence[fmt.ColumnChunkInfo], name: str
) -> list[Violation]:
    """Filters whose bytes (as bloom_filter_length gives them) overlap column data or each other."""
    data = [(c, _chunk_extent(c)) for c in reader.column_chunks if not c.encrypted]
    spans = sorted(
        (
            (c.bloom_filter_offset, c.bloom_filter_offset + c.bloom_filter_length, c)
            for c in filtered
            if c.bloom_filter_offset is not None and c.bloom_filter_length is not None
        ),
        key=lambda span: span[0],
    )
    out = []
    for start, end, chunk in spans:
        for other, e in data:
            if start < e.end and e.start < end:
                out.append(
                    Violation(
                        "overlap",
                        name,
                        chunk.row_group,
                        chunk.path,
                        None,
                        f"the filter's bytes [{start}, {end}) overlap the column data of row group "
                        f"{other.row_group}, column {other.path!r} [{e.start}, {e.end})",
                    )
                )
                break
    for (start_a, end_a, a), (start_b, _, b) in itertools.pairwise(spans):
        if start_b < end_a:
            out.append(
                Violation(
                    "overlap",
                    name,
                    b.row_group,
                    b.path,
                    None,
                    f"the filter at offset {start_b} overlaps the filter of row group "
                    f"{a.row_group}, column {a.path!r} [{start_a}, {end_a})",
                )
            )
    return out


def _first_missing_value(values: Any, found: npt.NDArray[np.bool_], num_hashes: int) -> Any:
    """The first value whose hash was not found, as a Python value (None if unknown)."""
    non_null = values.drop_null()
    missing = np.flatnonzero(~found)
    if len(non_null) != num_hashes or missing.size == 0:
        return None
    value = non_null[int(missing[0])]
    try:
        return value.as_py()
    except UnicodeDecodeError:  # a string that is not UTF-8 (a corrupt page): its bytes
        return value.cast(pa.binary()).as_py()


def _size_matches(
    num_bytes: int, ndv: int, max_fpp: float | None, hashes: npt.NDArray[np.uint64]
) -> list[SizeMatch]:
    """Which writers' rules give ``num_bytes``, asked what can be asked honestly.

    The file records neither the NDV nor the rate its writer was configured with. So each
    writer's rule is asked about the chunk's actual NDV (folding writers: that NDV or more, which
    covers their large defaults) at the writer's own default rate, and at ``max_fpp`` when the
    caller names the rate they target; and parquet-java's size when no NDV is configured.
    """
    bits_set = sizing.bits_set_by_size(hashes)
    fpps = sorted(set(sizing.DEFAULT_FPP.values()) | ({max_fpp} if max_fpp is not None else set()))
    out = []
    for fpp in fpps:
        for flavor in sizing.matching_flavors(num_bytes, ndv, fpp, bits_set=bits_set):
            if fpp in (sizing.DEFAULT_FPP[flavor], max_fpp):
                out.append(SizeMatch(flavor, "chunk NDV", ndv, fpp))
    # parquet-java without an expected NDV writes filters of its maximum size.
    if num_bytes == sizing.PARQUET_JAVA_DEFAULT_MAX_BYTES:
        out.append(SizeMatch("parquet-java", "no NDV configured", None, None))
    return out


def check_file(
    path: str | os.PathLike[str],
    columns: Iterable[str] | None = None,
    max_fpp: float | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    filesystem: Any | None = None,
    storage_options: Mapping[str, Any] | None = None,
    size: int | None = None,
    tail_size: int | None = None,
    decryption: DecryptionKeys | None = None,
    require: Iterable[str] | None = None,
    allow_empty: bool = False,
) -> CheckReport:
    """Check every filter of ``path`` (or those of ``columns``) as a writer author needs to.

    Violations (see :class:`Violation`): a filter that cannot be located or decoded, whose bytes
    overlap column data or another filter, that misses a value of its chunk, or whose rate
    (from the bits set) exceeds ``max_fpp``. For each filtered chunk the report also gives its
    actual NDV, rate, whether the filter is exactly the one its values give, which writers'
    sizing rules reproduce its size (for the chunk's NDV, at each writer's default rate and at
    ``max_fpp``), and a note when it is larger or smaller than its NDV needs at ``max_fpp``
    (1 % when not given): a warning, not a violation (docs/api.md, sizing advice).
    ``progress(done, total)`` is called after each chunk. ``path``, ``filesystem``,
    ``storage_options``, ``size`` and ``tail_size`` are as :func:`inspect_file` takes them.

    ``require``: columns (dotted paths; a group stands for its leaves) every chunk of which must
    have a filter: a chunk without one is a violation ("missing-filter"); they are checked
    whether or not ``columns`` names them. A file in which no filter was checked fails (an
    "empty" violation) unless ``allow_empty=True``: a check that checked nothing must not pass
    (docs/api.md, checks that fail).

    Raises :class:`~parquet_bloom.errors.BloomFilterError` when the footer itself is unusable,
    ValueError/TypeError for an unknown column or a bad ``max_fpp``. A read that fails, of the
    footer, a filter or a chunk's values, is never a violation: it raises
    :class:`~parquet_bloom.errors.FileReadError` (the URL and the bytes in its message,
    ``source`` and ``offset``), including a "not found" once the footer was read (the object
    was deleted or replaced meanwhile); a file missing when first read is FileNotFoundError.

    ``decryption``: the keys of an encrypted file (docs/encryption.md). The filters of encrypted
    columns are decrypted and checked (rate, size), but not against the chunk's values: their
    pages are encrypted, and this library does not decrypt pages. Chunks whose keys are not
    given are listed in the notes.
    """
    if max_fpp is not None:
        if isinstance(max_fpp, bool) or not isinstance(max_fpp, float | int):
            raise TypeError(f"max_fpp must be a float, not {type(max_fpp).__name__}")
        if not 0.0 < max_fpp < 1.0:
            raise ValueError(f"max_fpp must be strictly between 0 and 1, got {max_fpp!r}")
        max_fpp = float(max_fpp)
    name = os.fspath(path) if filesystem is None else str(path)
    # The values are read with pyarrow, opened on first use, inside _check_chunk's try, through
    # a source of their own given the size the reader learnt (no second size lookup).
    with (
        BloomFilterReader(
            name,
            filesystem=filesystem,
            storage_options=storage_options,
            size=size,
            tail_size=tail_size,
            decryption=decryption,
        ) as reader,
        ByteSource(
            name,
            filesystem=filesystem,
            storage_options=storage_options,
            size=reader.size,
            exists=True,  # the reader found it: a "not found" now is a read error
        ) as source,
        ChunkReader(source, decryption_properties=_arrow_decryption(reader)) as values,
    ):
        leaves = reader.schema_leaves
        required = _required_paths(require, leaves, name)
        selected = _select_columns(columns, leaves, name)
        if columns is not None:
            selected.update(required)
        by_path = {leaf.path: leaf for leaf in leaves}
        filtered = [
            c
            for c in reader.column_chunks
            if c.path in selected and c.bloom_filter_offset is not None
        ]
        violations = _overlaps(reader, filtered, name)
        notes = [] if filtered else ["no Bloom filters in the columns checked"]
        if filtered and any(c.bloom_filter_length is None for c in filtered):
            notes.append(
                "some filters have no bloom_filter_length (format < 2.10): readers must guess "
                "how much to read"
            )
        if decryption is not None:
            notes.extend(_unreadable_notes(reader, selected))
            violations.extend(_wrong_keys(reader, selected, name))
        checks = []
        for done, chunk in enumerate(filtered, 1):
            try:
                f = reader.filter(chunk.row_group, chunk.path)
            except FileReadError:
                raise  # the store failed, not the writer
            except BloomFilterError as err:
                kind = _violation_kind(err, chunk, reader.footer_start)
                findings = [_Finding(kind, None, err.reason)]
                f = None
            unreadable_values = reader.encrypted_footer and reader.footer_decryption() is None
            if f is not None and (chunk.encrypted or unreadable_values):
                check, findings = _check_encrypted_chunk(chunk, f, max_fpp)
                checks.append(check)
            elif f is not None:
                leaf = by_path[chunk.path]
                check, findings = _check_chunk(chunk, leaf, leaves, f, values, max_fpp)
                checks.append(check)
            violations.extend(
                Violation(x.kind, name, chunk.row_group, chunk.path, x.value, x.message)
                for x in findings
            )
            if progress is not None:
                progress(done, len(filtered))
        unreadable = [
            (rg, column)
            for rg in range(reader.num_row_groups)
            for column in reader.unreadable_columns(rg)
        ]
        violations.extend(
            Violation(MISSING_KIND, name, m.row_group, m.column, None, m.message)
            for m in missing_filters(reader.column_chunks, required, unreadable)
        )
        if not checks and not violations and not allow_empty:
            message = empty_message("the file", "pass allow_empty=True")
            violations.append(Violation(EMPTY_KIND, name, None, None, None, message))
        requests = reader.requests + source.requests
        bytes_read = reader.bytes_read + source.bytes_read
        size, footer = reader.size, bytes(reader.footer_bytes)
    order = {leaf.path: leaf.column_index for leaf in leaves}

    def place(v: Violation) -> tuple[int, int]:
        return (-1 if v.row_group is None else v.row_group, order.get(v.column or "", -1))

    return CheckReport(
        name,
        tuple(checks),
        tuple(sorted(violations, key=place)),
        tuple(notes),
        requests=requests,
        bytes_read=bytes_read,
        size=size,
        footer=footer,
    )


def _raise_read_error(errors: Iterable[BaseException]) -> None:
    """Raise the first :class:`FileReadError` among ``errors`` or behind them (pyarrow may
    raise its own error over the one a read of ours raised inside it)."""
    for err in errors:
        seen: BaseException | None = err
        while seen is not None:
            if isinstance(seen, FileReadError):
                raise seen
            seen = seen.__cause__ or seen.__context__


def _unreadable_notes(reader: BloomFilterReader, selected: Iterable[str]) -> list[str]:
    """One note per encrypted column whose chunks cannot be read with the keys given."""
    wanted = set(selected)
    why: dict[str, list[BloomFilterError]] = {}
    for rg in range(reader.num_row_groups):
        for column, err in reader.unreadable_columns(rg).items():
            if column in wanted and not refuses(err):
                why.setdefault(column, []).append(err)
    # The reason says which key is missing and why: not given, or refused by the KMS client.
    return [
        f"column {column!r}: {len(errs)} encrypted chunk(s) not checked: {errs[0].reason}"
        for column, errs in why.items()
    ]


def _wrong_keys(reader: BloomFilterReader, selected: Iterable[str], name: str) -> list[Violation]:
    """A "decryption" violation per encrypted chunk of the ``selected`` columns whose key was
    given but does not decrypt its metadata (a wrong key, a wrong AAD prefix, tampered bytes):
    by the rule every prune follows (:func:`parquet_bloom._prune.decryption.refuses`), a key
    given wrong is a finding, not a chunk left unchecked as one whose key is not given."""
    wanted = set(selected)
    return [
        Violation("decryption", name, rg, column, None, err.reason)
        for rg in range(reader.num_row_groups)
        for column, err in reader.unreadable_columns(rg).items()
        if column in wanted and refuses(err)
    ]


def _arrow_decryption(reader: BloomFilterReader) -> Any | None:
    """pyarrow's decryption properties for a file with an encrypted footer (its footer key:
    enough for its plaintext columns), when pyarrow has the low-level API (pyarrow >= 26)."""
    footer = reader.footer_decryption()
    if footer is None:
        return None
    import pyarrow.parquet.encryption as pe

    create = getattr(pe, "create_decryption_properties", None)
    if create is None:
        return None
    key, aad_prefix = footer
    return create(key, aad_prefix=aad_prefix)


def _check_encrypted_chunk(
    chunk: fmt.ColumnChunkInfo, f: SplitBlockBloomFilter, max_fpp: float | None
) -> tuple[ChunkCheck, list[_Finding]]:
    """An encrypted chunk's decrypted filter: its rate, not its values (pages encrypted)."""
    fpp = f.fpp()
    findings = []
    if max_fpp is not None and fpp > max_fpp:
        message = f"false-positive rate {fpp:.4g} (from the bits set) exceeds max_fpp {max_fpp:g}"
        findings.append(_Finding("fpp", None, message))
    note = (
        "values not checked: the column's pages are encrypted (only its filter is decrypted)"
        if chunk.encrypted
        else "values not checked: the file's footer is encrypted, and pyarrow cannot read it "
        "here (its footer key unknown, or pyarrow older than 26)"
    )
    check = ChunkCheck(
        chunk.row_group, chunk.path, chunk.physical_type, f.num_bytes, fpp=fpp, notes=(note,)
    )
    return check, findings


@dataclass(frozen=True)
class _Finding:
    """A violation before it is given its place (file, row group, column)."""

    kind: str
    value: Any
    message: str


def _check_chunk(
    chunk: fmt.ColumnChunkInfo,
    leaf: fmt.SchemaLeaf,
    leaves: Sequence[fmt.SchemaLeaf],
    f: SplitBlockBloomFilter,
    values: ChunkReader,
    max_fpp: float | None,
) -> tuple[ChunkCheck, list[_Finding]]:
    """Measure one chunk; return its report and what is wrong with it."""
    fpp = f.fpp()
    findings = []
    if max_fpp is not None and fpp > max_fpp:
        message = f"false-positive rate {fpp:.4g} (from the bits set) exceeds max_fpp {max_fpp:g}"
        findings.append(_Finding("fpp", None, message))
    base = ChunkCheck(chunk.row_group, chunk.path, chunk.physical_type, f.num_bytes, fpp=fpp)
    if chunk.physical_type == "BOOLEAN":
        return replace(base, notes=(_BOOLEAN_NOTE,)), findings
    try:
        arr = values.leaf(chunk.row_group, leaf, leaves)
    except Unmapped as err:
        return replace(base, notes=(f"values not checked: {err}",)), findings
    except (pa.ArrowException, OSError) as err:  # pyarrow cannot decode the chunk
        _raise_read_error([err])  # unless our read of its bytes failed
        findings.append(_Finding("data", None, f"cannot read the chunk's values: {err}"))
        return base, findings
    try:
        hashes = logical.column_hashes(arr, leaf)
    except (TypeError, ValueError) as err:
        return replace(base, notes=(f"values not checked: {err}",)), findings
    found = f.find_hashes(hashes)
    distinct = sizing.distinct_hashes(hashes)
    ndv = int(distinct.size)
    missing = int(sizing.distinct_hashes(hashes[~found]).size)
    if missing:
        first = _first_missing_value(arr, found, hashes.size)
        message = (
            f"{missing} of {ndv} distinct values are not in the filter (false negatives), "
            f"the first {first!r}"
        )
        findings.append(_Finding("false-negative", first, message))
    rebuilt = SplitBlockBloomFilter(f.num_bytes)
    rebuilt.insert_hashes(distinct)
    matches = _size_matches(f.num_bytes, ndv, max_fpp, distinct)
    flavors = tuple(fl for fl in sizing.FLAVORS if any(m.flavor == fl for m in matches))
    exact = rebuilt == f
    notes = size_notes(f.num_bytes, ndv, DEFAULT_TARGET_FPP if max_fpp is None else max_fpp)
    if not missing and not exact:
        notes.append("the filter has bits set that the chunk's values do not set")
    check = replace(
        base,
        num_values=int(hashes.size),
        ndv=ndv,
        missing=missing,
        fpp_at_ndv=expected_fpp(ndv, f.num_bytes),
        exact=exact,
        matching_flavors=flavors,
        size_matches=tuple(matches),
        notes=tuple(notes),
    )
    return check, findings


# -- JSON ----------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """``value`` with everything JSON cannot hold turned into text (NaN, bytes, dates, ...)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "0x" + bytes(value).hex()
    if isinstance(value, np.generic):
        return _plain(value.item())
    return str(value)

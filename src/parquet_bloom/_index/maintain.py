"""Keeping an index directory current: ``refresh_index`` adds a segment for the files the index
does not know (new, or rewritten to another size); ``compact_index`` merges every segment into
one, dropping the row groups of files that are gone or superseded (docs/index.md#index-directories).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from parquet_bloom._index import entries as ent
from parquet_bloom._index import layout, puffin, slices, store
from parquet_bloom._index.build import (
    ColumnSummary,
    FromData,
    IndexBuildReport,
    Segment,
    check_from_data,
    entries_blob,
    files_blob,
    target_fpp,
    write_blobs,
    write_segment,
)
from parquet_bloom._index.files import IndexedFile, dataset_files, same_file
from parquet_bloom._index.lookup import BloomIndex, IndexSegment
from parquet_bloom._index.text import TextFilter, TextSpec
from parquet_bloom._index.text_build import TextSummary, class_blobs
from parquet_bloom._io import location
from parquet_bloom._sbbf import BITS_PER_BLOCK, BYTES_PER_BLOCK

__all__ = [
    "DEFAULT_RETAIN_SECONDS",
    "SAFE_RETAIN_SECONDS",
    "CompactReport",
    "check_retain",
    "compact_files",
    "compact_index",
    "index_text_filters",
    "merge_segments",
    "refresh_files",
    "refresh_index",
]

# Segments no pointer names any more are removed by compact_index once they are this old: a
# lookup that read the pointer before the compaction may still be reading them.
DEFAULT_RETAIN_SECONDS = 3600.0
# Below this, a compaction may remove a segment a concurrent refresh or build has written but
# not yet named in the pointer (it names it once written: the time between the two is the
# pointer's read and compare-and-swap, and their retries): asked only with
# ``no_concurrent_writers=True``.
SAFE_RETAIN_SECONDS = 60.0


def check_retain(
    retain_seconds: float, no_concurrent_writers: bool = False, *, flags: bool = False
) -> float:
    """``retain_seconds`` checked: a number of seconds, not negative, and at least
    :data:`SAFE_RETAIN_SECONDS` unless ``no_concurrent_writers`` says no other process writes
    the index meanwhile (ValueError, saying what to do, otherwise; ``flags``: worded with the
    command's options)."""
    name, ack = (
        ("--retain-seconds", "--no-concurrent-writers")
        if flags
        else ("retain_seconds", "no_concurrent_writers=True")
    )
    if isinstance(retain_seconds, bool) or not isinstance(retain_seconds, int | float):
        raise ValueError(f"{name} must be a number of seconds, not {retain_seconds!r}")
    if not retain_seconds >= 0:  # negative, or NaN
        raise ValueError(
            f"{name} must be 0 or more, not {retain_seconds:g}: it is how old a segment no "
            "pointer names must be before a compaction removes it"
        )
    if retain_seconds < SAFE_RETAIN_SECONDS and not no_concurrent_writers:
        raise ValueError(
            f"{name} {retain_seconds:g} is below {SAFE_RETAIN_SECONDS:g}: a refresh or build "
            "running meanwhile writes its segment before the pointer names it, and the "
            "compaction could remove it, leaving an index that names a missing file; pass "
            f"{ack} if no other process writes the index, or retain at least "
            f"{SAFE_RETAIN_SECONDS:g} seconds"
        )
    return float(retain_seconds)


def refresh_index(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    index_location: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    index_storage_options: Mapping[str, Any] | None = None,
    from_data: FromData = None,
    fpp: float | None = None,
) -> IndexBuildReport:
    """Add to the index directory at ``index_location`` a segment of the files of ``source`` it
    does not know at their present size (none: nothing is written, ``files`` is 0). Lookups
    read every segment; :func:`compact_index` merges them. ``from_data`` and ``fpp`` as for
    :func:`~parquet_bloom.index.build_index` (the default ``fpp`` counts the index's row
    groups too)."""
    check_from_data(from_data, fpp)
    directory = _directory(index_location)
    options = storage_options if index_storage_options is None else index_storage_options
    files = dataset_files(source, storage_options)
    return refresh_files(directory, files, options, from_data=from_data, fpp=fpp)


def index_text_filters(idx: BloomIndex) -> list[TextFilter]:
    """The index's token and n-gram filters, at the very shape it has them (what a refresh
    builds for new files: a lookup ANDs the same positions in every segment)."""
    return [
        TextFilter(column, spec.kind, spec.n, spec.size, spec.hashes, spec.seed)
        for column in idx.text_columns
        for spec in idx.text_filters(column)
    ]


def refresh_files(
    directory: str,
    files: Sequence[IndexedFile],
    storage_options: Mapping[str, Any] | None,
    *,
    from_data: FromData = None,
    fpp: float | None = None,
) -> IndexBuildReport:
    """Add a segment of the ``files`` the index in ``directory`` does not know as they are.
    When another writer changes the index first, the files are compared with its index
    again: the segment is added as it is if they are still the ones it lacks, else written
    again for those it lacks (none: nothing is added)."""
    pointer = store.read_pointer(directory, storage_options)
    if pointer is None:
        raise FileNotFoundError(f"no Bloom index at {directory} to refresh: build one first")
    report = IndexBuildReport(location=directory)
    written: list[tuple[store.Pointer, frozenset[str], store.SegmentRef]] = []

    def change(current: store.Pointer | None) -> store.Pointer | None:
        nonlocal report
        if current is None:
            raise FileNotFoundError(f"the Bloom index at {directory} was removed during a refresh")
        with BloomIndex(directory, storage_options=storage_options, pointer=current) as idx:
            known = idx.file_rows()
            indexed = max((idx.row_groups(c) for c in idx.columns), default=0)
            text = index_text_filters(idx)
        new = [f for f in files if f.key not in known or not same_file(known[f.key], f)]
        keys = frozenset(f.key for f in new)
        if written:
            made, made_keys, ref = written[-1]
            if made.columns == current.columns and made_keys == keys:
                return store.Pointer(0, current.columns, (*current.segments, ref))
            _remove(directory, ref.name, storage_options)  # named by no pointer
            written.clear()
        if not new:
            report = IndexBuildReport(location=directory)
            return None
        want = fpp
        if from_data is not None and want is None:
            # About one false candidate over the whole index, with what this segment adds
            # (its row groups are not known before their footers are read: one a file).
            want = target_fpp(indexed + len(new))
        name = store.new_segment_name()
        report, segment = write_segment(
            new,
            list(current.columns),
            store.join(directory, name),
            storage_options,
            require_columns=False,
            from_data=from_data,
            fpp=want,
            text=text,
        )
        ref = store.SegmentRef(name, segment.size, segment.footer_offset, segment.footer)
        written.append((current, keys, ref))
        return store.Pointer(0, current.columns, (*current.segments, ref))

    store.commit(directory, pointer, change, storage_options)
    report.location = directory
    return report


@dataclass
class CompactReport:
    """What :func:`compact_index` did: ``segments_before``, the ``row_groups`` kept and
    ``row_groups_dropped`` (of files gone, or superseded by a newer segment's), ``index_bytes``
    (the new segment's size; 0 when there was nothing to merge), ``removed`` (segment files
    deleted), ``columns`` and ``text`` (as a build reports them)."""

    location: str
    segments_before: int = 0
    row_groups: int = 0
    row_groups_dropped: int = 0
    index_bytes: int = 0
    removed: list[str] = field(default_factory=list)
    columns: dict[str, ColumnSummary] = field(default_factory=dict)
    text: list[TextSummary] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"index {self.location}: {self.segments_before} segments merged into one of "
            f"{self.index_bytes:,} bytes; {self.row_groups} row groups kept, "
            f"{self.row_groups_dropped} dropped; {len(self.removed)} old segments removed"
        )


def compact_index(
    index_location: str | os.PathLike[str],
    *,
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    index_storage_options: Mapping[str, Any] | None = None,
    retain_seconds: float = DEFAULT_RETAIN_SECONDS,
    no_concurrent_writers: bool = False,
) -> CompactReport:
    """Merge the segments of the index directory at ``index_location`` into one. Each file
    keeps the row groups of its newest segment's version; with ``source``, only the files
    live there at that size are kept. Then segment files no pointer names and older than
    ``retain_seconds`` are removed (a lookup that read the old pointer may still read them).
    ``retain_seconds`` below :data:`SAFE_RETAIN_SECONDS` (60) needs
    ``no_concurrent_writers=True``: a refresh or build running meanwhile has written its
    segment before its pointer names it, and would lose it (:func:`check_retain`)."""
    check_retain(retain_seconds, no_concurrent_writers)
    directory = _directory(index_location)
    options = storage_options if index_storage_options is None else index_storage_options
    live = None if source is None else dataset_files(source, storage_options)
    return compact_files(directory, live, options, retain_seconds, no_concurrent_writers)


def compact_files(
    directory: str,
    live: Sequence[IndexedFile] | None,
    storage_options: Mapping[str, Any] | None,
    retain_seconds: float = DEFAULT_RETAIN_SECONDS,
    no_concurrent_writers: bool = False,
) -> CompactReport:
    """Merge the segments of the index in ``directory``, keeping each file's newest version,
    or (``live``) only the files live as they are (``retain_seconds``: as
    :func:`compact_index` checks it)."""
    retain_seconds = check_retain(retain_seconds, no_concurrent_writers)
    pointer = store.read_pointer(directory, storage_options)
    if pointer is None:
        raise FileNotFoundError(f"no Bloom index at {directory} to compact")
    report = CompactReport(location=directory)
    written: list[tuple[store.Pointer, store.SegmentRef]] = []

    def change(current: store.Pointer | None) -> store.Pointer:
        nonlocal report
        if current is None:
            raise FileNotFoundError(
                f"the Bloom index at {directory} was removed during a compaction"
            )
        if written:
            merged, ref = written[-1]
            k = len(merged.segments)
            if current.columns == merged.columns and current.segments[:k] == merged.segments:
                # Another writer added segments after those merged: they stay after it.
                return store.Pointer(0, current.columns, (ref, *current.segments[k:]))
            _remove(directory, ref.name, storage_options)  # named by no pointer
            written.clear()
        report = CompactReport(location=directory, segments_before=len(current.segments))
        ref = _merge_all(directory, current, live, storage_options, report)
        written.append((current, ref))
        return store.Pointer(0, current.columns, (ref,))

    made = store.commit(directory, pointer, change, storage_options)
    assert made is not None
    report.removed = _remove_unnamed(directory, made, storage_options, retain_seconds)
    return report


def _merge_all(
    directory: str,
    pointer: store.Pointer,
    live: Sequence[IndexedFile] | None,
    storage_options: Mapping[str, Any] | None,
    report: CompactReport,
) -> store.SegmentRef:
    """One new segment of every segment ``pointer`` names: each file's newest version, or
    (``live``) only the files live as they are."""
    with BloomIndex(directory, storage_options=storage_options, pointer=pointer) as idx:
        rows_by_path = idx.file_rows()
        if live is None:
            keep = {path: size for path, (size, _, _) in rows_by_path.items()}
        else:
            keep = {
                f.key: rows_by_path[f.key][0]
                for f in live
                if f.key in rows_by_path and same_file(rows_by_path[f.key], f)
            }
        name = store.new_segment_name()
        segment = merge_segments(
            idx.segments,
            newest_versions(idx.segments, keep),
            rows_by_path,
            list(pointer.columns),
            store.join(directory, name),
            storage_options,
            report,
        )
    report.index_bytes = segment.size
    return store.SegmentRef(name, segment.size, segment.footer_offset, segment.footer)


def newest_versions(
    segments: Sequence[IndexSegment], keep: Mapping[str, int]
) -> list[dict[str, int]]:
    """What each segment keeps of ``keep`` (path -> size): a path's row groups from the newest
    segment that knows it at that size only (two segments may know one file: two writers
    indexed it at once)."""
    keeps: list[dict[str, int]] = [{} for _ in segments]
    owner: dict[str, int] = {}
    for i, segment in enumerate(segments):
        for path, size, _, _ in segment.file_rows():
            if keep.get(path) == size:
                owner[path] = i
    for path, i in owner.items():
        keeps[i][path] = keep[path]
    return keeps


def merge_segments(
    segments: Sequence[IndexSegment],
    keeps: Sequence[Mapping[str, int]],
    file_rows: Mapping[str, tuple[int, int, int]],
    columns: list[str],
    target: str,
    storage_options: Mapping[str, Any] | None,
    report: CompactReport,
    *,
    fields: Mapping[str, int] | None = None,
    snapshot: tuple[int, int] = (-1, -1),
) -> Segment:
    """Write one Puffin file at ``target`` holding the row groups of ``segments`` that
    ``keeps`` keep (one mapping a segment: path -> the size of the file whose entries stay),
    and the ``file_rows`` (path -> size, modified, sequence) of the files kept; ``fields`` and
    ``snapshot`` as :func:`write_blobs` takes them. ``report`` counts what was kept."""
    blobs: list[tuple[puffin.BlobMetadata, Iterable[bytes]]] = []
    for column in columns:
        summary = ColumnSummary()
        report.columns[column] = summary
        blobs += _merged_column(column, segments, keeps, summary, report)
    kept = {path: size for keep in keeps for path, size in keep.items()}
    rows: list[list[Any]] = [
        [path, size, modified, sequence]
        for path, (size, modified, sequence) in sorted(file_rows.items())
        if kept.get(path) == size
    ]
    text_filters = dict.fromkeys(
        (name, spec)
        for segment in segments
        for name in segment.text_columns
        for spec in segment.text_filters(name)
    )
    for column, spec in text_filters:
        merged, more = _merged_text(column, spec, segments, keeps, file_rows)
        report.text.append(merged)
        blobs += more
    blobs.append(files_blob(rows))
    return write_blobs(target, blobs, columns, storage_options, fields=fields, snapshot=snapshot)


def _directory(index_location: str | os.PathLike[str]) -> str:
    target = os.fspath(index_location)
    if store.is_single_file(target):
        raise ValueError(
            f"{target} is one Puffin file: only an index directory (a location not ending in "
            ".puffin) has segments to refresh or compact; build the index into a directory"
        )
    return target


def _merged_column(
    column: str,
    segments: Sequence[IndexSegment],
    keeps: Sequence[Mapping[str, int]],
    summary: ColumnSummary,
    report: CompactReport,
) -> list[tuple[puffin.BlobMetadata, Iterable[bytes]]]:
    """One column's classes, merged over the segments: the kept row groups of each filter size
    (of the first type met), and the rest without filters."""
    by_size: dict[int, list[tuple[bytes, list[ent.Entry], npt.NDArray[np.intp], int]]] = {}
    none: list[ent.Entry] = []
    kind: dict[str, str] | None = None
    arrow: str | None = None
    for segment, keep_size in zip(segments, keeps, strict=True):
        for c in segment.column_classes(column):
            entries = segment.read_entries(c)
            kept = [i for i, e in enumerate(entries) if keep_size.get(e.path) == e.file_size]
            report.row_groups_dropped += len(entries) - len(kept)
            if c.num_bytes is None or c.slices is None:
                none += [entries[i] for i in kept]
                continue
            props = segment.type_properties(column)
            if kind is None:
                kind = props
                arrow = c.slices.properties.get(layout.ARROW_FIELD)
            if props != kind:  # another type than the merged classes': kept unfiltered
                none += [entries[i] for i in kept]
                continue
            data = segment.read_blob(c.slices)
            by_size.setdefault(c.num_bytes, []).append(
                (data, [entries[i] for i in kept], np.asarray(kept, dtype=np.intp), c.row_groups)
            )
    out: list[tuple[puffin.BlobMetadata, Iterable[bytes]]] = []
    type_properties = {layout.TYPE_PREFIX + k: v for k, v in (kind or {}).items()}
    if arrow is not None:  # the column's Arrow field, as the build recorded it
        type_properties[layout.ARROW_FIELD] = arrow
    for number, (num_bytes, parts) in enumerate(sorted(by_size.items())):
        members = [e for _, entries, _, _ in parts for e in entries]
        n = len(members)
        if n == 0:
            continue
        num_blocks = num_bytes // BYTES_PER_BLOCK
        length = slices.slice_bytes(n) * num_blocks * BITS_PER_BLOCK
        common = {layout.COLUMN: column, layout.CLASS: str(number), layout.ROW_GROUPS: str(n)}
        meta = puffin.BlobMetadata(
            layout.SLICES_BLOB,
            offset=0,
            length=length,
            properties={**common, layout.NUM_BYTES: str(num_bytes), **type_properties},
        )
        out.append((meta, _merged_slices(parts, num_blocks * BITS_PER_BLOCK)))
        out.append(entries_blob(members, common, "sbbf"))
        summary.classes[num_bytes] = n
        summary.slice_bytes += length
        summary.filter_bytes += n * num_bytes
        report.row_groups += n
    if none:
        common = {layout.COLUMN: column, layout.CLASS: "none", layout.ROW_GROUPS: str(len(none))}
        out.append(entries_blob(none, common, "none"))
        summary.unfiltered = len(none)
        report.row_groups += len(none)
    return out


def _merged_text(
    column: str,
    spec: TextSpec,
    segments: Sequence[IndexSegment],
    keeps: Sequence[Mapping[str, int]],
    file_rows: Mapping[str, tuple[int, int, int]],
) -> tuple[TextSummary, list[tuple[puffin.BlobMetadata, Iterable[bytes]]]]:
    """One text filter merged over the segments: the kept row groups of its class, and the
    rest without a filter: those of its own, and every kept file of a segment without the
    filter, whole (its row groups are not known here)."""
    parts: list[tuple[bytes, list[ent.Entry], npt.NDArray[np.intp], int]] = []
    none: list[ent.Entry] = []
    for segment, keep_size in zip(segments, keeps, strict=True):
        classes = segment.text_classes(column, spec)
        if not classes:
            for path, size, _, _ in segment.file_rows():
                if keep_size.get(path) == size:
                    _, modified, sequence = file_rows.get(path, (size, -1, -1))
                    none.append(ent.Entry(path, -1, size, -1, modified, sequence))
            continue
        for c in classes:
            entries = segment.read_entries(c)
            kept = [i for i, e in enumerate(entries) if keep_size.get(e.path) == e.file_size]
            if c.slices is None:
                none += [entries[i] for i in kept]
            else:
                data = segment.read_blob(c.slices)
                parts.append(
                    (data, [entries[i] for i in kept], np.asarray(kept, np.intp), c.row_groups)
                )
    filtered = [e for _, entries, _, _ in parts for e in entries]
    return class_blobs(column, spec, filtered, _merged_slices(parts, spec.num_bits), none)


def _merged_slices(
    parts: list[tuple[bytes, list[ent.Entry], npt.NDArray[np.intp], int]], positions: int
) -> Iterable[bytes]:
    """The slices of the kept row groups of several classes of one size (``positions`` bit
    positions), in their order: each position's bits, part after part, a run at a time."""
    total = sum(len(kept) for _, _, kept, _ in parts)
    step = max(
        BITS_PER_BLOCK, (slices.PASS_BITS // max(total, 1)) // BITS_PER_BLOCK * BITS_PER_BLOCK
    )
    for start in range(0, positions, step):
        stop = min(positions, start + step)
        pieces = []
        for data, _, kept, n in parts:
            s = slices.slice_bytes(n)
            rows = np.frombuffer(data, dtype=np.uint8)[start * s : stop * s].reshape(
                stop - start, s
            )
            bits = np.unpackbits(rows, axis=1, bitorder="little")[:, :n]
            pieces.append(bits[:, kept])
        merged = np.concatenate(pieces, axis=1)
        yield np.packbits(merged, axis=1, bitorder="little").tobytes()


def _remove_unnamed(
    directory: str, made: store.Pointer, storage_options: Mapping[str, Any] | None, retain: float
) -> list[str]:
    """Delete the directory's segment files that neither ``made`` nor the newest pointer name,
    and its pointers older than ``made``, once older than ``retain`` seconds (the times the
    listing gives; a store's whose listing has none, looked up file by file)."""
    newest = store.read_pointer(directory, storage_options)
    named = {s.name for p in (made, newest) if p is not None for s in p.segments}
    old = []
    now = time.time()
    for file in store.directory_files(directory, storage_options):
        segment = file.name.startswith("segment-") and file.name.endswith(".puffin")
        generation = store.pointer_generation(file.name)
        if not (
            (segment and file.name not in named)
            or (generation is not None and generation < made.generation)
        ):
            continue
        modified = file.modified if file.modified is not None else _modified(file.entry)
        if modified is None or now - modified < retain:
            continue
        old.append(file)
    return store.remove(directory, old)


def _remove(directory: str, name: str, storage_options: Mapping[str, Any] | None) -> None:
    """Delete the segment ``name`` this process wrote and no pointer names."""
    filesystem, path = location.resolve(
        store.join(directory, name), storage_options=storage_options
    )
    store.remove(directory, [store.Listed(name, location.Entry(path, None, filesystem))])


def _modified(entry: location.Entry) -> float | None:
    if entry.filesystem is None:
        return os.stat(entry.path).st_mtime
    return store.modified_time(entry.filesystem.info(entry.path))

"""The rewrite's entry points: check the options, read the source once, plan, build, write.

One :class:`~parquet_bloom._io.source.ByteSource` per rewrite serves every read: the footer
(:func:`~parquet_bloom._io.source.read_footer`), the leading magic, the ranges the plan asks for
(old filter headers, offset indexes) and the builds' page reads. The plan is made from the
footer and those bytes before any output is written (:mod:`parquet_bloom._rewrite.plan`); the
output goes through one :class:`~parquet_bloom._io.sink.FileSink`, which makes it appear whole
or not at all.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from parquet_bloom import _format as fmt
from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._io import limits, location
from parquet_bloom._io.ranges import ByteRange, ReadBuffer, coalesce
from parquet_bloom._io.source import ByteSource, fetching, read_footer
from parquet_bloom._rewrite import encryption, plan
from parquet_bloom._rewrite.build import FilterBuilds, Ndv, Sizing, check_sizing
from parquet_bloom._rewrite.output import BodyCopy, is_s3, open_sink, write_filters, write_footer
from parquet_bloom._tables import markers
from parquet_bloom.errors import (
    BloomFilterError,
    CorruptFileError,
    TableFileError,
    UnsupportedFileError,
)

__all__ = ["RewriteReport", "check_options", "rewrite_bloom_filters", "rewrite_files"]

# Writers disagree on BOOLEAN filters (docs/format-notes.md, BOOLEAN columns: parquet-java
# writes an empty one, Arrow C++ refuses, arrow-rs hashes one byte), so no reader can rely on
# one: we do not write them.
_UNFILTERABLE_TYPES = frozenset({"BOOLEAN"})


@dataclass
class RewriteReport:
    """What :func:`rewrite_bloom_filters` did to one file."""

    src: str
    dst: str
    filters_written: list[tuple[int, str, int]] = field(default_factory=list)
    """(row_group, column, num_bytes) of every filter built, in file order."""
    filters_kept: int = 0
    """Filters copied unchanged from ``src``."""
    filters_removed: int = 0
    """Filters of ``src`` that ``dst`` no longer has (a rebuilt filter is not counted)."""
    bytes_before: int = 0
    bytes_after: int = 0
    bytes_downloaded: int = 0
    """Bytes read from ``src`` through the process (footer, headers, the chunks hashed, kept
    filters, unchanged bytes copied through the process). A local ``src``'s unchanged bytes
    copied by the kernel into a local ``dst`` are not read through the process: not counted."""
    bytes_uploaded: int = 0
    """Bytes sent to an object store for ``dst`` (0 for a local ``dst``)."""
    bytes_copied: int = 0
    """Bytes of ``src`` the store copied into ``dst`` itself (S3 UploadPartCopy), never
    through the process."""
    unchanged: bool = False
    """With ``skip_unchanged=True``: the rewrite would have changed no filter, so ``dst`` was
    not written (``bytes_after`` is then ``bytes_before``)."""


def check_options(
    columns: object, remove: object, fpp: float, ndv: Ndv, num_bytes: int | None, flavor: str | None
) -> Sizing:
    """Raise for options that no file could take; the sizing they ask for."""
    sizing = check_sizing(fpp, ndv, num_bytes, flavor)
    if isinstance(remove, str) and remove != "all":
        raise TypeError(f'remove must be a list of column paths or "all", not {remove!r}')
    if isinstance(columns, str) and columns != "existing":
        raise TypeError(
            f'columns must be a list of column paths, "existing" or None, not {columns!r}'
        )
    return sizing


def _column_list(value: object, what: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"{what} must be a list of column paths, not {value!r}")
    columns = list(value)
    for column in columns:
        if not isinstance(column, str):
            raise TypeError(f"{what} must hold dotted column paths (str), not {column!r}")
    return columns


def _check_columns(columns: list[str], leaves: dict[str, fmt.SchemaLeaf], source: str) -> None:
    for column in columns:
        if column in leaves:
            continue
        under = [path for path in leaves if path.startswith(column + ".")]
        hint = (
            f"it is a group; its leaf columns are {', '.join(map(repr, under))}"
            if under
            else f"its columns are {', '.join(map(repr, leaves))}"
        )
        raise ValueError(f"no leaf column {column!r} in {source}: {hint}")


def _check_supported(md: Any, *, decrypted: bool) -> None:
    """Refuse what cannot be rewritten: an encrypted file without its keys (``decrypted``:
    opened with them), chunks whose data lives in another file."""
    if md.encryption_algorithm is not None and not decrypted:
        raise UnsupportedFileError(
            "the file is encrypted (plaintext footer mode): pass its keys, "
            "decryption=DecryptionKeys(...), to rewrite it encrypted (docs/encryption.md)"
        )
    for i, rg in enumerate(md.row_groups):
        for chunk in rg.columns:
            path = chunk.meta_data.path_in_schema if chunk.meta_data else None
            column = ".".join(path) if path else None  # a missing path is reported later
            encrypted = chunk.crypto_metadata is not None or chunk.encrypted_column_metadata
            if encrypted is not None and not decrypted:
                raise UnsupportedFileError(
                    "the column chunk is encrypted: pass the file's keys, "
                    "decryption=DecryptionKeys(...), to rewrite it encrypted",
                    row_group=i,
                    column=column,
                )
            if chunk.file_path is not None:
                raise UnsupportedFileError(
                    f"the column chunk's data lives in another file ({chunk.file_path!r}); "
                    "only self-contained files can be rewritten",
                    row_group=i,
                    column=column,
                )


def _resolve_targets(
    chunks: Sequence[fmt.ColumnChunkInfo],
    leaves: dict[str, fmt.SchemaLeaf],
    columns: Sequence[str] | Literal["existing"] | None,
    remove: Sequence[str] | Literal["all"],
    source: str,
    existing_only: bool = False,
) -> tuple[list[fmt.ColumnChunkInfo], set[str]]:
    """The chunks to build filters for and the columns whose filters go (``existing_only``:
    of ``columns``, the chunks that have a filter; a column with none is refused)."""
    if remove == "all":
        removed = set(leaves)
    else:
        removed_list = _column_list(remove, "remove")
        _check_columns(removed_list, leaves, source)
        removed = set(removed_list)
    if columns is None:
        return [], removed
    if columns == "existing":
        targets = [
            c
            for c in chunks
            if c.bloom_filter_offset is not None
            and c.path not in removed
            and c.physical_type not in _UNFILTERABLE_TYPES
        ]
        return targets, removed
    wanted = _column_list(columns, "columns")
    _check_columns(wanted, leaves, source)
    both = sorted(removed.intersection(wanted)) if remove != "all" else []
    if both:
        raise ValueError(f"columns {both} are both to be given filters and to lose them")
    if remove == "all" and wanted:
        raise ValueError('remove="all" removes every filter; it cannot be combined with columns')
    for column in wanted:
        if leaves[column].physical_type in _UNFILTERABLE_TYPES:
            raise ValueError(
                f"column {column!r} is {leaves[column].physical_type}: writers disagree on how "
                "its values are hashed (parquet-java writes an empty filter, Arrow C++ refuses, "
                "arrow-rs hashes one byte), so no reader can use such a filter"
            )
    chosen = set(wanted)
    if existing_only:
        having = {c.path for c in chunks if c.bloom_filter_offset is not None}
        missing = [column for column in wanted if column not in having]
        if missing:
            raise ValueError(
                f"column {missing[0]!r} has no Bloom filter in {source} to resize: a resize "
                "rebuilds the filters a file has and adds none; add one with "
                f"columns=[{missing[0]!r}] (parquet-bloom add --column {missing[0]})"
            )
        return [
            c for c in chunks if c.path in chosen and c.bloom_filter_offset is not None
        ], removed
    return [c for c in chunks if c.path in chosen], removed


def rewrite_bloom_filters(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str] | None = None,
    *,
    columns: Sequence[str] | Literal["existing"] | None = None,
    fpp: float = 0.01,
    ndv: Ndv = "exact",
    num_bytes: int | None = None,
    flavor: str | None = None,
    remove: Sequence[str] | Literal["all"] = (),
    in_place: bool = False,
    force: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    ignore_table: bool = False,
    decryption: DecryptionKeys | None = None,
    existing_only: bool = False,
    skip_unchanged: bool = False,
) -> RewriteReport:
    """Write ``src`` to ``dst`` with Bloom filters added, re-sized or removed; the pages are
    copied byte for byte, only the filters and the footer change.

    ``columns``: dotted leaf paths to build filters for (replacing any they have), ``None`` to
    build none (only ``remove``), or ``"existing"`` to rebuild every filter the file already
    has, sized for its chunk. ``remove``: dotted leaf paths whose filters go, or ``"all"``.
    Every other filter is copied unchanged. ``existing_only=True`` (a resize of ``columns``):
    only the chunks of ``columns`` that have a filter are rebuilt, chunks without one stay
    without, and a column with no filter in the file is a ValueError (nothing is added
    unasked).

    Sizing, per chunk: ``num_bytes`` if given; else for ``ndv`` distinct values (``"exact"``:
    the chunk's own count of distinct hashes) at false-positive rate ``fpp``, rounded as
    ``flavor`` rounds (see :func:`parquet_bloom._sizing.expected_num_bytes`; default the spec's
    :func:`parquet_bloom._sbbf.optimal_num_bytes`).

    ``dst`` appears only once complete (temporary file, fsync, rename) and is replaced if it
    exists; ``src`` is only read. ``in_place=True`` (with ``dst`` None) replaces ``src`` the
    same way (the file a symlink names, not the link), keeping its permissions and, where
    allowed, its owner; other hard links to it keep the old file. The footer must re-encode to
    its exact bytes, else :class:`~parquet_bloom.errors.UnsupportedFileError` unless
    ``force=True``. Files whose chunks live in other files are refused.

    ``decryption``: the keys of an encrypted file (:class:`~parquet_bloom.DecryptionKeys`,
    docs/encryption.md), which the rewrite keeps encrypted with them: new filters of encrypted
    columns encrypted with their column's key, the footer encrypted or signed again, the pages
    copied as they are. The footer key and every encrypted column's key are needed
    (:class:`~parquet_bloom.errors.MissingKeyError` otherwise); without ``decryption`` an
    encrypted file is refused.

    A file of a table (a Delta ``_delta_log/``, an Iceberg ``metadata/``, a Hudi ``.hoodie/``
    or a Paimon ``snapshot/`` in an ancestor directory) is never replaced, in place or as an
    existing local ``dst``: the table records its size, and would break
    (:class:`~parquet_bloom.errors.TableFileError`, naming the table-aware call:
    :func:`parquet_bloom.delta.rewrite_bloom_filters`,
    :func:`parquet_bloom.iceberg.rewrite_bloom_filters`). ``force`` does not change that;
    ``ignore_table=True`` does.
    """
    source = os.fspath(src)
    source_fs, source_path = _resolve(source, storage_options)
    if in_place:
        if dst is not None and not _same_object(
            source_fs, source_path, *_resolve(os.fspath(dst), storage_options)
        ):
            raise ValueError("in_place=True rewrites src itself; pass no dst")
        target_fs, target = source_fs, source_path
        if source_fs is None:
            target = os.path.realpath(source)  # through symlinks: the file itself
    else:
        if dst is None:
            raise ValueError("pass dst, or in_place=True to replace src")
        target_fs, target = _resolve(os.fspath(dst), storage_options)
        if target_fs is None:
            if source_fs is None and os.path.exists(target) and os.path.samefile(source, target):
                raise ValueError(f"dst {target!r} is src; pass in_place=True to replace src")
            if os.path.isdir(target):  # found now, not by the rename after all the work
                raise IsADirectoryError(errno.EISDIR, "dst is a directory, not a file path", target)
        elif _same_object(source_fs, source_path, target_fs, target):
            raise ValueError(f"dst {os.fspath(dst)!r} is src; pass in_place=True to replace src")
    sizing = check_options(columns, remove, fpp, ndv, num_bytes, flavor)
    if decryption is not None and not isinstance(decryption, DecryptionKeys):
        raise TypeError(f"decryption must be a DecryptionKeys, not {type(decryption).__name__}")
    if not ignore_table:
        _refuse_table_file(target_fs, target, replacing=in_place)
    report = RewriteReport(source, source if in_place else os.fspath(dst or source))
    # In place: the new file takes the mode and owner of the one it replaces.
    replaced = os.stat(source) if in_place and source_fs is None else None
    etag = None
    if source_fs is None:
        opened = ByteSource(source_path)
    else:
        # One request for the size and the ETag: the version the rewrite reads, on which an
        # in-place rewrite and the store's copies are conditional.
        # Its failures are a read's (fetching): a located FileReadError (a timeout saying so),
        # or FileNotFoundError naming src. Read errors from here on name src as given (its URL).
        with fetching(source, action="look up"):
            info = source_fs.info(source_path, **limits.deadline_kwargs(source_fs.info))
        if info.get("type") == "directory":
            raise IsADirectoryError(errno.EISDIR, "src is a directory, not a file", source)
        etag = info.get("ETag")
        name = source if location.is_url(source) and "::" not in source else source_path
        opened = ByteSource(name, filesystem=source_fs, size=int(info["size"]), exists=True)
    with opened as file:
        report.bytes_before = file.size
        try:
            footer = read_footer(file, encrypted=True)
            if decryption is None and footer.tail[-len(fmt.MAGIC) :] != fmt.MAGIC:
                raise UnsupportedFileError(
                    "the file's footer is encrypted: pass its keys, "
                    "decryption=DecryptionKeys(...), to rewrite it encrypted (docs/encryption.md)"
                )
            head = file.read_exact(0, len(fmt.MAGIC))
            # An encrypted footer's file starts as it ends, with PARE (Encryption.md 5.4).
            magic = footer.tail[-len(fmt.MAGIC) :]
            if head != magic:
                raise CorruptFileError(
                    f"not a Parquet file: leading magic is {head!r}, expected {magic!r}",
                    offset=0,
                )
            crypt = None
            if decryption is None:
                md = fmt.decode_file_metadata(footer.data, full=True)
            else:
                md, crypt = encryption.open_footer(footer, decryption, force=force, source=source)
            _check_supported(md, decrypted=crypt is not None)
            if not force and decryption is None:
                plan.check_lossless(footer.data, md, fmt.encode_file_metadata, "the footer")
        except BloomFilterError as err:
            raise err.located(source=source) from err.__cause__
        footer_start = footer.start
        leaf_list = fmt.schema_leaves(md)
        chunks = fmt.column_chunks(md, leaf_list)
        leaves = {leaf.path: leaf for leaf in leaf_list}
        targets, removed = _resolve_targets(chunks, leaves, columns, remove, source, existing_only)

        # Plan, read what the plan asks for, plan on: nothing below opens a file but the sink.
        protected = plan.layout_ranges(md, footer_start, source)
        if crypt is None:
            locations = plan.filter_locations(chunks, footer_start, source)
        else:
            locations = encryption.locations(chunks, crypt, footer_start, source)
        headers = _fetch(file, plan.header_ranges(locations, footer_start))
        old_filters = plan.old_filters(locations, headers, footer_start, source)
        cuts = plan.filter_splices(old_filters.values(), protected, source)
        if crypt is not None:
            crypt.check_cuts(md, cuts, source)
        indexes = _fetch(file, plan.offset_index_ranges(md, cuts))
        moves = plan.relocation(md, cuts, indexes, force, source)

        building = {(c.row_group, c.column_index) for c in targets}
        kept = {
            key: old
            for key, old in old_filters.items()
            if key not in building and old.column not in removed
        }
        report.filters_kept = len(kept)
        report.filters_removed = len(old_filters.keys() - building - kept.keys())
        with FilterBuilds(
            file,
            targets,
            leaf_list,
            md,
            sizing,
            encrypted=crypt,
            arrow_decryption=None if crypt is None else crypt.arrow_decryption(),
        ) as builds:
            # (An encrypted file's filters are compared by their ciphertext: never skipped.)
            unchanged = skip_unchanged and crypt is None
            if unchanged and _unchanged(file, targets, old_filters, builds, report):
                report.unchanged = True
                report.bytes_after = report.bytes_before
                report.bytes_downloaded = file.bytes_read
                return report
            # The body is copied (IO) on a thread while others build the filters (CPU); each
            # filter is written out as soon as it and those before it are done.
            output = open_sink(
                target_fs,
                target,
                like=replaced,
                source_filesystem=source_fs,
                source_path=source_path,
                source_etag=etag,
                if_match=etag if in_place and is_s3(target_fs) else None,
            )
            with output as sink, BodyCopy(sink, file, moves, footer_start) as body:
                at = moves(footer_start)
                body.finish()  # the builds go on meanwhile, on their own threads
                placements, report.filters_written = write_filters(
                    sink,
                    file,
                    chunks,
                    builds,
                    kept,
                    at,
                    None if crypt is None else crypt.seal_filter,
                )
                plan.relocate_footer(md, moves, footer_start, placements)
                if crypt is not None:
                    crypt.seal_metadata(md, moves, footer_start)
                filters_end = at + sum(length for _, length in placements.values())
                seal = None if crypt is None else crypt.footer
                report.bytes_after = filters_end + write_footer(sink, md, seal)
        report.bytes_downloaded = file.bytes_read
        report.bytes_uploaded = output.bytes_uploaded
        report.bytes_copied = output.bytes_copied
    return report


def _unchanged(
    file: ByteSource,
    targets: Sequence[fmt.ColumnChunkInfo],
    old_filters: Mapping[tuple[int, int], plan.OldFilter],
    builds: FilterBuilds,
    report: RewriteReport,
) -> bool:
    """Whether the rewrite changes nothing: no filter removed, and every filter to build has
    an old one of exactly the same bytes (header and bitset). Waits for the builds only when
    every target has an old filter; reads those old filters to compare."""
    if report.filters_removed:
        return False
    keys = [(c.row_group, c.column_index) for c in targets]
    if any(key not in old_filters for key in keys):
        return False
    for key in keys:
        new = builds.peek(key)
        old = old_filters[key]
        header = fmt.encode_bloom_filter_header(new.num_bytes)
        if old.length != len(header) + new.num_bytes:
            return False
        if file.read_exact(old.offset, old.length) != header + new.to_bytes():
            return False
    return True


def _refuse_table_file(filesystem: Any | None, path: str, *, replacing: bool) -> None:
    """Raise TableFileError if writing ``path`` would replace a data file of a table: ``path``
    is the file rewritten in place (``replacing``), or an existing local ``dst``, in a table.
    (An object-store ``dst`` is not looked up: that would cost every rewrite requests.)"""
    if not replacing and (filesystem is not None or not os.path.lexists(path)):
        return
    table = markers.find_table(path, filesystem)
    if table is not None:
        name = path if filesystem is None else location.Entry(path, None, filesystem).name
        raise TableFileError(
            table.refusal(name), path=name, table_format=table.format, table_root=table.root
        )


def _resolve(name: str, storage_options: Mapping[str, Any] | None) -> tuple[Any | None, str]:
    """``(filesystem, path)`` of a src or dst: ``(None, path)`` for a local file."""
    return location.resolve(
        name, storage_options=storage_options if location.is_url(name) else None
    )


def _same_object(fs1: Any | None, path1: str, fs2: Any | None, path2: str) -> bool:
    """Whether two resolved names are one file (local: by path) or object."""
    if fs1 is None or fs2 is None:
        both_local = fs1 is None and fs2 is None
        return both_local and os.path.abspath(path1) == os.path.abspath(path2)
    strip1 = fs1._strip_protocol(path1)
    return bool(
        type(fs1) is type(fs2)
        and fs1.storage_options == fs2.storage_options
        and strip1 == fs2._strip_protocol(path2)
    )


def _fetch(source: ByteSource, ranges: Sequence[ByteRange]) -> ReadBuffer:
    """The bytes of ``ranges``, read coalesced."""
    fetched = ReadBuffer()
    merged = coalesce(ranges)
    for r, data in zip(merged, source.read(merged), strict=True):
        fetched.add(r.offset, data)
    return fetched


def rewrite_files(
    jobs: Iterable[tuple[str | os.PathLike[str], str | os.PathLike[str] | None]],
    *,
    columns: Sequence[str] | Literal["existing"] | None = None,
    fpp: float = 0.01,
    ndv: Ndv = "exact",
    num_bytes: int | None = None,
    flavor: str | None = None,
    remove: Sequence[str] | Literal["all"] = (),
    in_place: bool = False,
    force: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    ignore_table: bool = False,
    existing_only: bool = False,
    progress: Callable[[RewriteReport], None] | None = None,
    on_error: Callable[[str, Exception], None] | None = None,
    decryption: DecryptionKeys | None = None,
) -> list[RewriteReport]:
    """:func:`rewrite_bloom_filters` over many ``(src, dst)`` pairs (``dst`` None with
    ``in_place=True``), one file at a time, with the same options for all.

    Options that no file could take raise before any file is read. ``progress(report)`` is
    called after each file that was rewritten. Without ``on_error`` the first failure is raised
    (the files before it are done, the rest untouched); with it, a file that fails with a
    :class:`BloomFilterError`, an ``OSError`` or a ``ValueError`` (a column it lacks, a dst that
    is its src) is passed to ``on_error(src, error)`` and the others go on. Returns the reports
    of the files rewritten.
    """
    check_options(columns, remove, fpp, ndv, num_bytes, flavor)
    reports: list[RewriteReport] = []
    for src, dst in jobs:
        try:
            report = rewrite_bloom_filters(
                src,
                dst,
                columns=columns,
                fpp=fpp,
                ndv=ndv,
                num_bytes=num_bytes,
                flavor=flavor,
                remove=remove,
                in_place=in_place,
                force=force,
                storage_options=storage_options,
                ignore_table=ignore_table,
                decryption=decryption,
                existing_only=existing_only,
            )
        except (BloomFilterError, OSError, ValueError) as err:
            if on_error is None:
                raise
            on_error(os.fspath(src), err)
            continue
        reports.append(report)
        if progress is not None:
            progress(report)
    return reports

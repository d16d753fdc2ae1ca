"""Building an index's token and n-gram filters from the data: each file's string column is read
a row group at a time with pyarrow, split into its distinct tokens (or n-grams) and hashed as
ClickHouse hashes them; once every row group's tokens are known, the filters' size is fixed
(one size for all: a lookup ANDs the same positions in every row group) and each row group's
filter is set and sliced (docs/index.md#token-and-n-gram-filters).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from parquet_bloom._index import entries as ent
from parquet_bloom._index import layout, puffin, slices, text
from parquet_bloom._index.files import IndexedFile
from parquet_bloom._io.source import ByteSource
from parquet_bloom._threads import read_pool
from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

__all__ = [
    "TextRead",
    "TextSummary",
    "check_text_filters",
    "class_blobs",
    "not_strings",
    "read_text",
    "text_blobs",
]


@dataclass
class TextRead:
    """What one file gave the text filters: per filter (by its place in the build's list),
    each row group's ``(h1, h2)`` token hashes, or None where the column is not strings; a
    filter whose column the file lacks is absent. ``not_text``: the filters whose column the
    file holds as another type than strings. ``error``: why the values could not be read
    (its row groups then have no filter)."""

    pairs: dict[int, list[npt.NDArray[np.uint64] | None]] = field(default_factory=dict)
    not_text: set[int] = field(default_factory=set)
    error: str | None = None
    reads: int = 0
    bytes_read: int = 0


def check_text_filters(filters: Sequence[text.TextFilter]) -> list[text.TextFilter]:
    """``filters`` as a list; a mistake is a TypeError or ValueError."""
    if isinstance(filters, text.TextFilter):
        filters = [filters]
    out = list(filters)
    for f in out:
        if not isinstance(f, text.TextFilter):
            raise TypeError(f"text= takes TextFilter objects, not {type(f).__name__}")
        if "." in f.column:
            raise ValueError(f"text filters index top-level columns, not {f.column!r}")
    keys = [(f.column, f.kind, f.ngram, f.size, f.hashes, f.seed) for f in out]
    if len(set(keys)) != len(keys):
        raise ValueError("the same text filter is asked for twice")
    return out


def read_text(
    filters: Sequence[text.TextFilter], caches: Sequence[text.HashCache], file: IndexedFile
) -> TextRead:
    """The token hashes of every row group of ``file`` for each of ``filters``."""
    got = TextRead()
    try:
        with ByteSource(file.path, filesystem=file.filesystem, size=file.size) as source:
            parquet = pq.ParquetFile(source.arrow_file())
            schema = parquet.schema_arrow
            done: list[int] = []  # the column chunks read
            for number, (f, cache) in enumerate(zip(filters, caches, strict=True)):
                name = _file_column(file, schema, f.column)
                if name is None:
                    continue  # no such column: its rows hold no value of it
                if name is _UNKNOWN or not text.is_text_type(schema.field(name).type):
                    got.pairs[number] = [None] * parquet.num_row_groups
                    if name is not _UNKNOWN:
                        got.not_text.add(number)
                    continue
                paths = [parquet.schema.column(j).path for j in range(len(parquet.schema))]
                leaf = paths.index(name)
                row: list[npt.NDArray[np.uint64] | None] = []
                for rg in range(parquet.num_row_groups):
                    values = parquet.read_row_group(rg, columns=[name]).column(0)
                    chunk = parquet.metadata.row_group(rg).column(leaf)
                    done.append(chunk.total_compressed_size)
                    row.append(text.row_group_pairs(values, f.ngram, cache))
                got.pairs[number] = row
            got.reads, got.bytes_read = source.reads, source.bytes_read
            if source.local_path is not None:
                # pyarrow read the local file itself: count the column chunks it read.
                got.reads += len(done)
                got.bytes_read += sum(done)
    except (CorruptFileError, UnsupportedFileError, pa.ArrowInvalid) as err:
        # Values that cannot be read: the file's row groups have no text filter (every
        # lookup returns them), and the report says why. A failure to fetch is raised.
        got.pairs, got.not_text, got.error = {}, set(), str(err)
    return got


def not_strings(filters: Sequence[text.TextFilter], reads: Sequence[TextRead]) -> list[str]:
    """The columns of ``filters`` that files hold, but none as strings."""
    return [
        f.column
        for i, f in enumerate(filters)
        if any(i in r.not_text for r in reads)
        and not any(i in r.pairs and i not in r.not_text for r in reads)
    ]


# A file whose columns cannot be told by field id (its schema has none): no filter of it.
_UNKNOWN = "\x00unknown"
_FIELD_ID = b"PARQUET:field_id"


def _file_column(file: IndexedFile, schema: pa.Schema, column: str) -> str | None:
    """The top-level column of ``file`` that is the index's ``column``: by name, or by field id
    where ``file.field_ids`` says (a column renamed since the file was written; a column
    dropped and added again is another id). None: the file lacks it; ``_UNKNOWN``: its schema
    has no field ids to tell."""
    if file.field_ids is None:
        return column if schema.get_field_index(column) >= 0 else None
    by_id: dict[int, str] = {}
    for fld in schema:
        if fld.metadata and _FIELD_ID in fld.metadata:
            by_id.setdefault(int(fld.metadata[_FIELD_ID]), fld.name)
    if len(schema) and not by_id:
        return _UNKNOWN
    wanted = dict(file.field_ids).get(column)
    return None if wanted is None else by_id.get(wanted)


def read_all(filters: Sequence[text.TextFilter], files: Sequence[IndexedFile]) -> list[TextRead]:
    """:func:`read_text` of every file, on the read threads."""
    caches = [text.HashCache(f.seed) for f in filters]
    return list(read_pool().map(partial(read_text, filters, caches), files))


def resolve(
    f: text.TextFilter, number: int, reads: Sequence[TextRead], row_groups: int
) -> text.TextSpec:
    """The filter's shape: as asked, or sized for its largest row group's distinct tokens."""
    kind = text.NGRAMBF if f.ngram is not None else text.TOKENBF
    if f.size is not None and f.hashes is not None:
        return text.TextSpec(kind, f.ngram, f.size, f.hashes, f.seed)
    most = max((len(p) for r in reads for p in r.pairs.get(number, []) if p is not None), default=1)
    fpp = f.fpp if f.fpp is not None else min(0.01, 1.0 / max(row_groups, 1))
    size, hashes = text.size_for(most, fpp)
    return text.TextSpec(
        kind, f.ngram, f.size if f.size is not None else size, f.hashes or hashes, f.seed
    )


@dataclass
class TextSummary:
    """One text filter of a built index: its ``spec`` key, the row groups with a filter
    (``filtered``) and without (``unfiltered``), and the slices' bytes."""

    column: str
    spec: str
    filtered: int = 0
    unfiltered: int = 0
    slice_bytes: int = 0


def text_blobs(
    filters: Sequence[text.TextFilter],
    reads: Sequence[TextRead],
    members: Sequence[tuple[ent.Entry, int, int]],
) -> tuple[list[TextSummary], list[tuple[puffin.BlobMetadata, Iterable[bytes]]]]:
    """The blobs of each text filter: its slices and entries, and the entries of the row
    groups without a filter. ``members``: every row group of the build as (entry, the read's
    place in ``reads``, row group; -1 for a file that could not be read)."""
    row_groups = sum(1 for _, _, rg in members if rg >= 0)
    summaries = []
    out: list[tuple[puffin.BlobMetadata, Iterable[bytes]]] = []
    for number, f in enumerate(filters):
        spec = resolve(f, number, reads, row_groups)
        filtered: list[tuple[ent.Entry, npt.NDArray[np.uint64]]] = []
        none: list[ent.Entry] = []
        for entry, r, rg in members:
            read = reads[r]
            if rg < 0 or read.error is not None:
                none.append(entry)
                continue
            row = read.pairs.get(number)
            if row is None:
                continue  # the file has no such column
            pairs = row[rg]
            if pairs is None:
                none.append(entry)
            else:
                filtered.append((entry, pairs))
        bitsets = [text.bitset(p, spec) for _, p in filtered]
        summary, blobs = class_blobs(
            f.column, spec, [e for e, _ in filtered], text.text_slices(bitsets, spec.size), none
        )
        out += blobs
        summaries.append(summary)
    return summaries, out


def class_blobs(
    column: str,
    spec: text.TextSpec,
    filtered: list[ent.Entry],
    slice_parts: Iterable[bytes],
    none: list[ent.Entry],
) -> tuple[TextSummary, list[tuple[puffin.BlobMetadata, Iterable[bytes]]]]:
    """The blobs of one text filter of ``column``: the slices (``slice_parts``, in order) and
    entries of the row groups ``filtered``, and the entries of those without a filter."""
    common = {layout.COLUMN: column, layout.TEXT: spec.key}
    summary = TextSummary(column, spec.key)
    out: list[tuple[puffin.BlobMetadata, Iterable[bytes]]] = []
    if filtered:
        n = len(filtered)
        length = slices.slice_bytes(n) * spec.num_bits
        props = {
            **common,
            layout.CLASS: "0",
            layout.ROW_GROUPS: str(n),
            layout.KIND: spec.kind,
            layout.NUM_BYTES: str(spec.size),
            layout.HASHES: str(spec.hashes),
            layout.SEED: str(spec.seed),
        }
        if spec.n is not None:
            props[layout.NGRAM] = str(spec.n)
        meta = puffin.BlobMetadata(layout.TEXT_SLICES_BLOB, 0, length, properties=props)
        out.append((meta, slice_parts))
        out.append(_entries(filtered, {**common, layout.CLASS: "0"}, spec))
        summary.filtered, summary.slice_bytes = n, length
    if none:
        out.append(_entries(none, {**common, layout.CLASS: "none"}, None))
        summary.unfiltered = len(none)
    return summary, out


def _entries(
    members: list[ent.Entry], common: dict[str, str], spec: text.TextSpec | None
) -> tuple[puffin.BlobMetadata, Iterable[bytes]]:
    data, width = ent.encode_entries(members)
    props = {
        **common,
        layout.ROW_GROUPS: str(len(members)),
        layout.PATH_WIDTH: str(width),
        layout.FILTERS: spec.kind if spec is not None else "none",
    }
    return puffin.BlobMetadata(layout.TEXT_ROW_GROUPS_BLOB, 0, len(data), properties=props), (data,)

"""The rows of a pruned dataset that a filter keeps, read late: the filter's columns first,
then the other columns of the row groups that hold a match, and of those only the rows.

A point lookup's pruning leaves a few row groups, most of them a filter's false positives
(about 1 % of the files' with 1 % filters): ``dataset.to_table(filter=expr)`` decodes every
column of each before it evaluates the filter, and the columns a lookup does not filter on
(text, mostly) hold most of the bytes. Here each file's row groups left are read for the
columns ``expr`` reads, ``expr`` is evaluated on them, and only the row groups with a
matching row are read for the rest, their matching rows taken. DuckDB's Parquet reader
does the same ("late materialization"); pyarrow's scan does not.

The result is the table ``dataset.to_table(filter=expr, columns=columns)`` gives: the same
rows in the same order (fragments in the dataset's order, row groups in each fragment's, rows
in each row group's), the same schema. Each read is pyarrow's own scan of a fragment in the
dataset's schema, so partition columns, missing columns and casts are pyarrow's. What this
cannot tell apart (an expression on nested fields or by field position, computed columns, a
dataset other than Parquet files) is read by ``dataset.to_table`` itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._prune.decryption import scan_failure
from parquet_bloom._prune.expression import referenced_columns
from parquet_bloom._prune.page_rows import page_columns
from parquet_bloom._threads import read_pool

__all__ = ["matching_rows"]

# Files whose filter columns are read, and the filter evaluated on, at a time (a lookup's
# pruning leaves a few; a filter that keeps more is read in windows of this many).
FILES_AT_ONCE = 32
# The column of row positions added to a fragment's filter columns to evaluate the filter.
_POSITION = "__parquet_bloom_position__"


def matching_rows(
    dataset: ds.Dataset,
    expr: pc.Expression,
    columns: Sequence[str] | None = None,
    decryption: DecryptionKeys | None = None,
) -> pa.Table:
    """``dataset.to_table(filter=expr, columns=columns)``, read late (see the module).
    ``decryption``: the keys the dataset's scan decryption was made from, if any, to tell
    pyarrow's failures to decrypt a file (:func:`.decryption.scan_failure`)."""
    if not isinstance(expr, pc.Expression):
        raise TypeError(f"filter must be a pyarrow.compute.Expression, not {type(expr).__name__}")
    schema = dataset.schema
    known = set(schema.names)
    names = list(schema.names) if columns is None else list(columns)
    wanted = referenced_columns(expr)
    if (
        wanted is None
        or not names  # a table of no columns but its row count
        or not wanted <= known
        or not all(isinstance(n, str) and n in known for n in names)
        or len(set(names)) != len(names)
        or len(known) != len(schema.names)
        or _POSITION in known
    ):
        return dataset.to_table(filter=expr, columns=columns)
    result = pa.schema([schema.field(n) for n in names], metadata=schema.metadata)
    found = _parts(dataset, expr, names, wanted, result, decryption)
    parts = [part for part in found if part.num_rows]
    if not parts:
        return result.empty_table()
    return pa.concat_tables(parts)


def _parts(
    dataset: ds.Dataset,
    expr: pc.Expression,
    names: list[str],
    wanted: frozenset[str],
    result: pa.Schema,
    keys: DecryptionKeys | None,
) -> Iterator[pa.Table]:
    """Each fragment's matching rows, in the dataset's order."""
    if isinstance(dataset, ds.UnionDataset):
        for child in dataset.children:
            yield from _parts(child, expr, names, wanted, result, keys)
    elif isinstance(dataset, ds.FileSystemDataset) and isinstance(
        dataset.format, ds.ParquetFileFormat
    ):
        yield from _files_rows(dataset, expr, names, wanted, result, keys)
    else:
        yield dataset.to_table(filter=expr, columns=names).cast(result)


def _files_rows(
    dataset: ds.FileSystemDataset,
    expr: pc.Expression,
    names: list[str],
    wanted: frozenset[str],
    result: pa.Schema,
    keys: DecryptionKeys | None,
) -> Iterator[pa.Table]:
    """The matching rows of each file of a Parquet dataset, :data:`FILES_AT_ONCE` files at a
    time: their filter columns read (at once: pyarrow decodes without the GIL, and a store's
    reads wait), the filter evaluated once over them, then each file holding a match read for
    the other columns. A window of files bounds what is held: a filter that keeps few rows
    of many files never holds every file's filter columns."""
    schema = dataset.schema
    fragments = list(dataset.get_fragments())
    first = [n for n in schema.names if n in wanted]
    rest = [n for n in names if n not in wanted]

    def head(fragment: ds.ParquetFileFragment) -> pa.Table:
        return _read(fragment, keys, schema=schema, columns=first, use_threads=False)

    for at in range(0, len(fragments), FILES_AT_ONCE):
        window = fragments[at : at + FILES_AT_ONCE]
        heads = list(map(head, window) if len(window) <= 1 else read_pool().map(head, window))
        starts = np.cumsum([0] + [h.num_rows for h in heads])
        every = pa.concat_tables(heads)
        positions = pa.array(np.arange(every.num_rows, dtype=np.int64))
        matched = every.append_column(_POSITION, positions).filter(expr)
        if not matched.num_rows:
            continue
        where = matched.column(_POSITION).to_numpy()
        owner = np.searchsorted(starts, where, side="right") - 1
        for index in np.unique(owner):
            mine = owner == index
            rows = matched.filter(pa.array(mine))
            columns = {n: rows.column(n) for n in names if n in wanted}
            if rest:
                local = where[mine] - starts[index]
                others = _other_columns(window[int(index)], schema, rest, local, keys)
                columns.update(zip(rest, others, strict=True))
            yield pa.Table.from_arrays([columns[n] for n in names], schema=result)


def _read(
    fragment: ds.ParquetFileFragment, keys: DecryptionKeys | None, **options: Any
) -> pa.Table:
    """``fragment.to_table(**options)``; pyarrow's failure to decrypt an encrypted file's
    columns told as a located error that says what to do (:mod:`.decryption`)."""
    try:
        return fragment.to_table(**options)
    except Exception as err:  # pyarrow's, or a KMS client's raised inside its scan
        told = scan_failure(fragment, options.get("columns"), err, keys)
        if told is None:
            raise
        raise told from err


def _other_columns(
    fragment: ds.ParquetFileFragment,
    schema: pa.Schema,
    rest: list[str],
    where: npt.NDArray[np.int64],
    keys: DecryptionKeys | None,
) -> list[pa.ChunkedArray]:
    """Columns ``rest`` of the rows at ``where`` (positions in the fragment's rows), read
    from the row groups that hold them, each row group once."""
    groups = fragment.row_groups  # the footer pyarrow read for the first read
    starts = np.cumsum([0] + [rg.num_rows for rg in groups])
    if starts[-1] <= where.max():
        raise ValueError(
            f"{fragment.path}: read {where.max() + 1} rows or more of row groups holding "
            f"{starts[-1]}"
        )
    owner = np.searchsorted(starts, where, side="right") - 1
    pieces = []
    for index in np.unique(owner):
        group = groups[int(index)]
        local = where[owner == index] - starts[index]
        found = page_columns(fragment, schema, group.id, group.num_rows, rest, local)
        left = [n for n in rest if n not in found]
        if left:  # read from the whole row group
            whole = fragment.subset(row_group_ids=[group.id])
            rows = _read(whole, keys, schema=schema, columns=left)
            found.update(zip(left, rows.take(pa.array(local)).columns, strict=True))
        pieces.append(pa.table([found[n] for n in rest], names=rest))
    table = pa.concat_tables(pieces)
    return [table.column(n) for n in rest]

"""What makes a check fail when filters are missing: the chunks of required columns without a
filter, and a run that checked no filter at all.

A check that only looks at the filters a file has passes a file that has none, so a CI gate
built on it never notices a writer that stopped writing them (issue #30). Two rules close that:

- ``require``: every column chunk of a required column must have a filter. A chunk without
  one is a violation (kind ``"missing-filter"``). Chunks of empty row groups (no values) are
  exempt: there is nothing to filter. Encrypted chunks whose metadata cannot be read with the
  keys given are not judged (their filter's presence is unknown; the check's notes list them).
- ``allow_empty``: a run (one file for :func:`parquet_bloom.check_file`, every file of a
  command or a table's snapshot otherwise) that checked no filter fails (kind ``"empty"``)
  unless ``allow_empty`` is true.

The rules are plain functions of the chunks' metadata, without the report types, so that the
check (:mod:`parquet_bloom._audit`), the command and the table checks share them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from parquet_bloom import _format as fmt

__all__ = [
    "EMPTY_KIND",
    "MISSING_KIND",
    "MissingFilter",
    "empty_message",
    "missing_filters",
    "named_leaves",
    "required_paths",
]

MISSING_KIND = "missing-filter"
EMPTY_KIND = "empty"


@dataclass(frozen=True)
class MissingFilter:
    """A chunk of a required column that has no filter."""

    row_group: int
    column: str
    message: str


def named_leaves(
    names: Iterable[str], leaves: Sequence[fmt.SchemaLeaf], name: str, role: str = ""
) -> list[str]:
    """The leaf paths ``names`` name (a group, a struct or a list, stands for every leaf under
    it), in schema order; a name that is no column of ``name`` (the file) is a ValueError naming
    the columns there are. ``role`` words the error ("to require")."""
    if isinstance(names, str):
        names = [names]
    paths = [leaf.path for leaf in leaves]
    selected: set[str] = set()
    for column in names:
        if not isinstance(column, str):
            raise TypeError(f"columns must be dotted path strings, not {type(column).__name__}")
        hits = [p for p in paths if p == column or p.startswith(column + ".")]
        if not hits:
            where = f" {role}" if role else ""
            raise ValueError(
                f"no column {column!r}{where} in {name}; its columns are {', '.join(paths)}"
            )
        selected.update(hits)
    return [p for p in paths if p in selected]


def required_paths(
    require: Iterable[str] | None, leaves: Sequence[fmt.SchemaLeaf], name: str
) -> list[str]:
    """The leaf paths of the ``require`` columns (:func:`named_leaves`), none for None."""
    return [] if require is None else named_leaves(require, leaves, name, "to require")


def missing_filters(
    chunks: Iterable[fmt.ColumnChunkInfo],
    required: Iterable[str],
    unreadable: Iterable[tuple[int, str]] = (),
) -> list[MissingFilter]:
    """The chunks of ``required`` columns without a filter, in file order; chunks of empty row
    groups and the ``unreadable`` ones ((row group, column) of encrypted chunks whose metadata
    the keys given do not open) are not judged."""
    wanted = set(required)
    skip = set(unreadable)
    out = []
    for chunk in chunks:
        if chunk.path not in wanted or chunk.bloom_filter_offset is not None:
            continue
        if (chunk.row_group, chunk.path) in skip or (chunk.num_values == 0 and not chunk.encrypted):
            continue
        out.append(
            MissingFilter(
                chunk.row_group,
                chunk.path,
                "the column is required to have a Bloom filter, and this chunk has none",
            )
        )
    return out


def empty_message(what: str, flag: str) -> str:
    """Why a run that checked no filter fails, and what to pass if that is expected: ``what``
    names the run ("the file", "the table's 3 live files"), ``flag`` the option (CLI or
    API)."""
    verb = "have" if what.endswith("files") or what.endswith("files checked") else "has"
    return (
        f"no Bloom filter checked: {what} {verb} none in the columns checked (a check that "
        f"checks nothing cannot pass; {flag} if no filter is expected)"
    )

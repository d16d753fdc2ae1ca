"""Token and substring lookups of a dataset's live files through the token and n-gram filters of
its Bloom index: the row groups whose values may match ``has_token``, ``match_substring``,
``starts_with``, ``ends_with`` or ``match_like`` with a pattern, never wrong. The index answers
for the files it knows as they are; a live file it does not know holds no such filter of its
own, so every row group of it stays a candidate (docs/index.md#token-and-n-gram-filters).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from parquet_bloom._index.files import IndexedFile, dataset_files, same_file
from parquet_bloom._index.live import DatasetLookup
from parquet_bloom._index.lookup import BloomIndex
from parquet_bloom._prune.text import HAS_TOKEN, SUBSTRING_FUNCTIONS, has_token, match_tokens

__all__ = ["TEXT_FUNCTIONS", "TextLookup", "lookup_text", "lookup_text_files"]

# What a text lookup matches its patterns by: pyarrow's functions of the same names, and
# has_token (:func:`parquet_bloom.index.has_token`).
TEXT_FUNCTIONS = (HAS_TOKEN, *SUBSTRING_FUNCTIONS)

# A file (its path and size in the index) -> its candidate row groups (None: all of them).
_Found = dict[tuple[str, int], "frozenset[int] | None"]


@dataclass
class TextLookup(DatasetLookup):
    """Where ``column`` may match ``function(value, pattern)`` for one of ``patterns`` among a
    dataset's live files: ``files`` (path -> the row groups that may; ``[-1]``: the whole file),
    ``from_index`` (live files the index answered for), ``unindexed`` (live files it does not
    know as they are: files hold no token filters of their own, so each is a candidate whole;
    nothing is read of them), ``gone``, and the index's cost (``index_reads``,
    ``index_bytes_read``). ``probed`` stays empty."""

    function: str = HAS_TOKEN
    patterns: list[str] = field(default_factory=list)
    unindexed: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        groups = sum(len(g) for g in self.files.values() if g != [-1])
        whole = sum(1 for g in self.files.values() if g == [-1])
        return (
            f"{self.column} {self.function}: {len(self.files)} files may match ({groups} row "
            f"groups, {whole} whole files); {self.from_index} files answered by the index "
            f"({self.index_reads} reads, {self.index_bytes_read:,} bytes), "
            f"{len(self.unindexed)} not indexed (candidates whole), {len(self.gone)} indexed "
            "files gone"
        )


def lookup_text(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    column: str,
    patterns: str | Sequence[str],
    *,
    index: str | os.PathLike[str] | BloomIndex,
    function: str = HAS_TOKEN,
    storage_options: Mapping[str, Any] | None = None,
    index_storage_options: Mapping[str, Any] | None = None,
) -> TextLookup:
    """The row groups of ``source``'s live Parquet files (listed now) whose ``column`` may hold
    a value matching ``function(value, pattern)`` for any of ``patterns``: ``"has_token"`` (the
    default: the pattern is one token, as :func:`parquet_bloom.index.has_token` matches),
    ``"match_substring"``, ``"starts_with"``, ``"ends_with"`` or ``"match_like"`` (as pyarrow's
    functions of those names match, case-sensitive), through the token and n-gram filters of
    the index at ``index`` (a location, or an open :class:`BloomIndex`).

    Raises ValueError when the index has no text filter of ``column``, or a pattern holds no
    whole token or n-gram any of them can look up (too short for an n-gram filter, or only
    separators)."""
    files = dataset_files(source, storage_options)
    if isinstance(index, BloomIndex):
        return lookup_text_files(files, column, patterns, index, function=function)
    options = storage_options if index_storage_options is None else index_storage_options
    with BloomIndex(index, storage_options=options) as idx:
        return lookup_text_files(files, column, patterns, idx, function=function, opened_here=True)


def lookup_text_files(
    files: Sequence[IndexedFile],
    column: str,
    patterns: str | Sequence[str],
    idx: BloomIndex,
    *,
    function: str = HAS_TOKEN,
    opened_here: bool = False,
) -> TextLookup:
    """:func:`lookup_text` of the live ``files`` through an open index (``opened_here``: count
    the index's opening in the cost)."""
    wanted = _check(column, patterns, function, idx)
    reads, read_bytes = (0, 0) if opened_here else (idx.reads, idx.bytes_read)
    found: _Found = {}
    for pattern in wanted:
        for key, groups in _pattern(idx, column, function, pattern).items():
            if key in found:
                before = found[key]
                found[key] = None if before is None or groups is None else before | groups
            else:
                found[key] = groups
    known = idx.file_rows()
    live = {f.key: f for f in files}
    unchanged = {k for k, f in live.items() if k in known and same_file(known[k], f)}
    result = TextLookup(column, function=function, patterns=wanted)
    result.index_reads = idx.reads - reads
    result.index_bytes_read = idx.bytes_read - read_bytes
    for (path, size), groups in found.items():
        # A path in several segments (rewritten, refreshed since) answers by the entries of
        # the size it has now.
        if path in unchanged and size == known[path][0]:
            result.files[path] = [-1] if groups is None else sorted(groups)
    result.from_index = len(unchanged)
    result.gone = sorted(set(known) - set(live))
    result.unindexed = sorted(set(live) - unchanged)
    for path in result.unindexed:
        result.files[path] = [-1]
    result.files = {p: g for p, g in sorted(result.files.items()) if g}
    return result


def _check(column: str, patterns: str | Sequence[str], function: str, idx: BloomIndex) -> list[str]:
    """The patterns as a list; a mistake is a TypeError or ValueError."""
    if function not in TEXT_FUNCTIONS:
        raise ValueError(f"function must be one of {', '.join(TEXT_FUNCTIONS)}, not {function!r}")
    wanted = [patterns] if isinstance(patterns, str) else list(patterns)
    if not wanted:
        raise ValueError("a text lookup needs at least one pattern")
    for pattern in wanted:
        if not isinstance(pattern, str):
            raise TypeError(f"patterns are str, not {type(pattern).__name__}")
        if function == HAS_TOKEN:
            has_token(column, pattern)  # raises ValueError for what is not one token
    if column not in idx.text_columns:
        have = ", ".join(map(repr, idx.text_columns)) or "none"
        raise ValueError(
            f"the index has no token or n-gram filter of column {column!r} (it has {have}); "
            "build one with text=[TextFilter(...)]"
        )
    return wanted


def _pattern(idx: BloomIndex, column: str, function: str, pattern: str) -> _Found:
    """The candidates of one pattern: what every filter of the column that can look it up
    keeps (the intersection)."""
    result: _Found | None = None
    for spec in idx.text_filters(column):
        tokens = match_tokens(function, pattern, spec.n)
        if not tokens:
            continue
        groups: dict[tuple[str, int], set[int]] = {}
        whole: set[tuple[str, int]] = set()
        for e in idx.lookup_tokens(column, spec, tokens).row_groups:
            if e.row_group < 0:
                whole.add((e.path, e.file_size))
            else:
                groups.setdefault((e.path, e.file_size), set()).add(e.row_group)
        got: _Found = {k: frozenset(g) for k, g in groups.items()}
        got.update(dict.fromkeys(whole))
        if result is None:
            result = got
        else:
            both: _Found = {}
            for key in result.keys() & got.keys():
                x, y = result[key], got[key]
                both[key] = y if x is None else x if y is None else x & y
            result = both
    if result is None:
        kinds = ", ".join(s.key for s in idx.text_filters(column))
        raise ValueError(
            f"{function}({pattern!r}) holds no whole token or n-gram that the filters of "
            f"{column!r} ({kinds}) can look up: a pattern needs a token bounded on both sides "
            "(tokenbf) or n characters (ngrambf)"
        )
    return result

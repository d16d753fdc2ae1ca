"""Pruning decided by a Bloom index: each member of the filter tree (``column = value``,
``column IN values``) that the index can answer becomes the set of row groups whose filters
may hold it, the tree's ANDs and ORs become intersections and unions, and anything else keeps
every row group (docs/index.md#pruning-with-an-index).

A decision maps a file's key to the row groups to keep (``None``: all of them); a file it does
not name has none to keep. The whole decision is ``None`` when nothing could be decided.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import pyarrow as pa

from parquet_bloom._index.entries import Entry
from parquet_bloom._index.lookup import BloomIndex
from parquet_bloom._index.text import is_text_type
from parquet_bloom._prune.compare import compared_values, field_type, reads_unchanged, value_type
from parquet_bloom._prune.expression import And, Equal, IsIn, Node, Or, TextMatch
from parquet_bloom._prune.text import match_tokens

__all__ = ["Decision", "Probe", "TextProbe", "decide", "scan_probe", "text_probe"]

# A member's column in the index and the literals to look up, or None: the index cannot
# decide the member.
Probe = Callable[[Equal | IsIn], tuple[str, Any] | None]
# A string match's column in the index, or None: the index's text filters cannot decide it.
TextProbe = Callable[[TextMatch], str | None]


def scan_probe(index: BloomIndex, schema: pa.Schema, partition_keys: set[str]) -> Probe:
    """The probe of a scan in ``schema``: a member on a column the index holds, not a
    partition key, whose values the scan compares as the files store them (the column's Arrow
    field as the index recorded it, read unchanged), with the literals as the scan compares
    them; None for any other."""
    columns = set(index.columns)

    def probe(member: Equal | IsIn) -> tuple[str, Any] | None:
        column = ".".join(member.column)
        if member.column[0] in partition_keys or column not in columns:
            return None
        physical = index.arrow_schema(column)
        dataset_type = field_type(schema, member.column)
        if physical is None or dataset_type is None:
            return None
        if not reads_unchanged(schema, physical, member.column):
            return None
        values = compared_values(member, value_type(dataset_type))
        return None if values is None else (column, values)

    return probe


def text_probe(index: BloomIndex, schema: pa.Schema, partition_keys: set[str]) -> TextProbe:
    """The text probe of a scan in ``schema``: a match on a top-level string column the index
    has token or n-gram filters of, not a partition key."""
    columns = set(index.text_columns)

    def probe(member: TextMatch) -> str | None:
        if len(member.column) != 1 or member.column[0] in partition_keys:
            return None
        column = member.column[0]
        t = field_type(schema, member.column)
        if column not in columns or t is None or not is_text_type(t):
            return None
        return column

    return probe


# None: every row group of every file. A mapping: file key -> its row groups to keep (None:
# every one); a file missing from it keeps none.
Decision: TypeAlias = "Mapping[str, frozenset[int] | None] | None"


def decide(
    tree: Node, probe: Probe, index: BloomIndex, text: TextProbe | None = None
) -> tuple[Decision, bool]:
    """The row groups ``tree`` may keep, by the index, and whether the index decided every
    member (if not, each file's own filters may drop more of what it keeps). ``probe`` says,
    for a member, the index's column and the literals to look up as the scan compares them, or
    None when the index cannot decide it (the member then keeps everything); ``text`` the
    same for string matches (None: none is decided; a file's own filters never decide one)."""
    undecided: list[Equal | IsIn] = []

    def asked(member: Equal | IsIn) -> tuple[str, Any] | None:
        found = probe(member)
        if found is None:
            undecided.append(member)
        return found

    decision = _decide(tree, asked, index, undecided, text)
    return decision, not undecided


def _decide(
    tree: Node,
    probe: Probe,
    index: BloomIndex,
    undecided: list[Equal | IsIn],
    text: TextProbe | None,
) -> Decision:
    if isinstance(tree, And):
        result: Decision = None
        for child in tree.children:
            result = _intersect(result, _decide(child, probe, index, undecided, text))
        return result
    if isinstance(tree, Or):
        parts = [_decide(child, probe, index, undecided, text) for child in tree.children]
        if any(p is None for p in parts):
            return None
        union: dict[str, frozenset[int] | None] = {}
        for part in parts:
            assert part is not None
            for key, kept in part.items():
                union[key] = _union(union[key], kept) if key in union else kept
        return union
    if isinstance(tree, TextMatch):
        column = None if text is None else text(tree)
        return None if column is None else _decide_text(tree, column, index)
    if isinstance(tree, Equal | IsIn):
        asked = probe(tree)
        if asked is None:
            return None
        column, values = asked
        try:
            answer = index.lookup(column, values)
        except TypeError:
            # A literal the column's type cannot hold as the probe encodes it (pyarrow casts
            # more freely than the Parquet types allow a probe to): the scan decides.
            undecided.append(tree)
            return None
        return _as_decision(answer.row_groups)
    return None  # Unknown: nothing a Bloom filter decides, by the index or by a file


def _decide_text(member: TextMatch, column: str, index: BloomIndex) -> Decision:
    """The row groups every text filter of ``column`` that can decide ``member`` keeps (the
    intersection); None when none can (the pattern holds no whole token or n-gram)."""
    result: Decision = None
    for spec in index.text_filters(column):
        tokens = match_tokens(member.function, member.pattern, spec.n)
        if tokens:
            answer = index.lookup_tokens(column, spec, tokens)
            result = _intersect(result, _as_decision(answer.row_groups))
    return result


def _as_decision(found: list[Entry]) -> Decision:
    """A lookup's entries as a decision (an entry of row group -1: the whole file)."""
    whole: set[str] = set()
    groups: dict[str, set[int]] = {}
    for entry in found:
        if entry.row_group < 0:
            whole.add(entry.path)  # a whole file: every row group
        else:
            groups.setdefault(entry.path, set()).add(entry.row_group)
    decided: dict[str, frozenset[int] | None] = {k: frozenset(g) for k, g in groups.items()}
    decided.update(dict.fromkeys(whole))
    return decided


def _intersect(a: Decision, b: Decision) -> Decision:
    if a is None:
        return b
    if b is None:
        return a
    out: dict[str, frozenset[int] | None] = {}
    for key in a.keys() & b.keys():
        x, y = a[key], b[key]
        out[key] = y if x is None else x if y is None else x & y
    return out


def _union(x: frozenset[int] | None, y: frozenset[int] | None) -> frozenset[int] | None:
    return None if x is None or y is None else x | y

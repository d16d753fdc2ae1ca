"""What a filter tree probes in one file, and its answer there.

:class:`Probing` holds what pruning the files of one dataset with one tree shares: each
member's probe (the column chunk and the hashes to look for, as the scan compares the literal
with the file's column) by footer schema key, and, for local files, the plans of the compiled
point lookup (:mod:`parquet_bloom._prune.local_probe`). :class:`FilePruning` reads the filters,
or the blocks of them, one open file's probes need and evaluates the tree there, one boolean a
row group. The dataset, table and index pruning (:mod:`parquet_bloom._prune.dataset`) decides
which files to open and what to do with the answers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from parquet_bloom import _format as fmt
from parquet_bloom._logical import literal_probe
from parquet_bloom._prune import local_probe
from parquet_bloom._prune.compare import compared_values, field_type, reads_unchanged, value_type
from parquet_bloom._prune.decryption import refuses
from parquet_bloom._prune.expression import And, Equal, IsIn, Node, Or, members
from parquet_bloom._prune.local_probe import MemberProbe
from parquet_bloom._reader import BloomFilterReader
from parquet_bloom._sbbf import FilterBlocks, SplitBlockBloomFilter
from parquet_bloom.errors import BloomFilterError

# Up to this many hashes a row group's filter is probed hash by hash: a point lookup or a short
# IN list costs microseconds that way, while a vectorised probe pays a fixed numpy overhead
# (measured: scalar wins below about 40 hashes).
SCALAR_PROBE_MAX_HASHES = 32


def physical_schema(reader: BloomFilterReader) -> pa.Schema:
    """The Arrow schema of the reader's file, as pyarrow reads it (its ``ARROW:schema``
    metadata included), from the footer bytes the reader already holds: a file of just the
    footer, between its magic numbers (docs/format-notes.md, file layout). Made once for the
    footers of one schema key (the footer but its row groups and row count: the schema and
    key-value metadata pyarrow makes it from), which a table's files mostly share."""
    key = reader.schema_key
    if key is not None and (known := _arrow_schemas.get(key)) is not None:
        return known
    footer = reader.footer_bytes
    trailer = len(footer).to_bytes(4, "little") + fmt.MAGIC
    schema: pa.Schema = pq.read_schema(pa.BufferReader(fmt.MAGIC + footer + trailer))
    if key is not None:
        with _arrow_schemas_lock:
            if len(_arrow_schemas) >= _ARROW_SCHEMAS_CACHED:
                del _arrow_schemas[next(iter(_arrow_schemas))]
            _arrow_schemas[key] = schema
    return schema


# Arrow schemas made from footers, by schema key (see physical_schema): a few tables' worth.
_ARROW_SCHEMAS_CACHED = 16
_arrow_schemas: dict[bytes, pa.Schema] = {}
_arrow_schemas_lock = threading.Lock()


class Probing:
    """What pruning the files of one dataset with one tree shares: the tree's members and
    the dataset's schema, and, by footer schema key, the probes: a table's files mostly share
    their schema, so each literal is encoded and hashed once, not once a file."""

    def __init__(self, tree: Node, schema: pa.Schema, *, plans: bool = False) -> None:
        self.tree = tree
        self.members = list(members(tree))
        self.columns = {m.column[0] for m in self.members}
        self.schema = schema
        self._by_key: dict[bytes, dict[int, MemberProbe]] = {}
        # With ``plans``, the compiled point lookup's plans by schema key (None: the kernel
        # cannot serve that key's probes), and the latest made: most tables have one schema.
        self._plans = plans
        self.plans: dict[bytes, local_probe.Plan | None] = {}
        self.plan: local_probe.Plan | None = None

    def probes(
        self, reader: BloomFilterReader, in_file: pa.Schema | None = None
    ) -> dict[int, MemberProbe]:
        """Each member's probe in the reader's file (by ``id`` of the member); ``in_file``:
        the file's Arrow schema, when the caller has it."""
        key = reader.schema_key
        if key is not None and (known := self._by_key.get(key)) is not None:
            return known
        if in_file is None:
            in_file = physical_schema(reader)
        leaves = {leaf.path_in_schema: leaf for leaf in reader.schema_leaves}
        compared: dict[tuple[str, ...], pa.DataType | None] = {}
        found = {
            id(m): _member_probe(m, leaves, self.schema, in_file, compared) for m in self.members
        }
        if key is not None:
            self._by_key[key] = found
            if self._plans:
                plan = local_probe.make_plan(
                    key, reader.schema_leaves, found, SCALAR_PROBE_MAX_HASHES
                )
                self.plans[key] = plan
                self.plan = plan or self.plan
        return found


def _member_probe(
    member: Equal | IsIn,
    leaves: Mapping[tuple[str, ...], fmt.SchemaLeaf],
    schema: pa.Schema,
    physical_schema: pa.Schema,
    compared: dict[tuple[str, ...], pa.DataType | None],
) -> MemberProbe:
    """The column chunk path and hashes to look for, or None when the member cannot prune in
    this file: keep every row group for it."""
    leaf = leaves.get(member.column)
    if member.column not in compared:
        # The type the scan compares the column's values in (the dataset's, dictionary
        # unwrapped), or None when those are not the file's own values.
        unchanged = reads_unchanged(schema, physical_schema, member.column)
        dataset_type = field_type(schema, member.column)
        compared[member.column] = (
            value_type(dataset_type) if unchanged and dataset_type is not None else None
        )
    column_type = compared[member.column]
    if leaf is None or column_type is None:
        return None
    values = compared_values(member, column_type)
    if values is None:
        return None
    try:
        probe = literal_probe(values, leaf)
    except TypeError:
        # A literal this library cannot compare with the column (pyarrow casts more
        # freely than the Parquet types allow a probe to); the scan decides, not us.
        return None
    if probe.always_keep:
        return None
    hashes = np.asarray(probe.hashes, dtype=np.uint64)
    scalar = [int(h) for h in hashes] if hashes.size <= SCALAR_PROBE_MAX_HASHES else None
    return leaf.path, hashes, scalar


class FilePruning:
    """Evaluates the tree against one file's filters, one boolean per row group."""

    def __init__(
        self,
        reader: BloomFilterReader,
        probing: Probing,
        probes: dict[int, MemberProbe],
        row_groups: list[int],
    ) -> None:
        self.reader = reader
        self.row_groups = row_groups
        self.unreadable: list[str] = []
        self.columns_unread: dict[str, None] = {}  # the columns of those, each once
        self._probing = probing
        self._hashes = probes
        self._filters: dict[tuple[int, str], SplitBlockBloomFilter | FilterBlocks] = {}

    def might_match(self) -> npt.NDArray[np.bool_]:
        if any(not 0 <= rg < self.reader.num_row_groups for rg in self.row_groups):
            # pyarrow and the footer we read disagree: the file changed under us.
            self.unreadable.append(
                f"row groups {self.row_groups} do not fit the {self.reader.num_row_groups} "
                "row groups of the footer"
            )
            return np.ones(len(self.row_groups), dtype=bool)
        few: dict[str, list[int]] = {}  # columns probed for a few hashes: their blocks
        many: set[str] = set()  # the others: whole filters
        for probe in self._hashes.values():
            if probe is None:
                continue
            column, _, scalar = probe
            if scalar is None:
                many.add(column)
            else:
                few.setdefault(column, []).extend(scalar)
        for column in [c for c, hashes in few.items() if len(hashes) > SCALAR_PROBE_MAX_HASHES]:
            many.add(column)
        for column in many:
            few.pop(column, None)
        if few:
            # The blocks the hashes fall in, header and all, in coalesced reads.
            blocks, failed = self.reader.filter_blocks(few, self.row_groups)
            self._filters.update(blocks)
            self._unreadable(failed.values())
        if many:
            # One coalesced read; an unusable filter is reported and its row groups kept.
            filters, failed = self.reader.filters_with_errors(sorted(many), self.row_groups)
            self._filters.update(filters)
            self._unreadable(failed.values())
        return self._evaluate(self._probing.tree)

    def _unreadable(self, errors: Iterable[BloomFilterError]) -> None:
        """Filters that could not be read keep their row groups; a key that does not decrypt
        one stops the pruning (:func:`parquet_bloom._prune.decryption.refuses`)."""
        for err in errors:
            if refuses(err):
                raise err
            self.unreadable.append(str(err))
            if err.column is not None:
                self.columns_unread[err.column] = None

    def _evaluate(self, node: Node) -> npt.NDArray[np.bool_]:
        if isinstance(node, And | Or):
            combine = np.logical_and if isinstance(node, And) else np.logical_or
            masks = [self._evaluate(c) for c in node.children]
            result: npt.NDArray[np.bool_] = combine.reduce(masks, axis=0)
            return result
        probe = self._hashes.get(id(node)) if isinstance(node, Equal | IsIn) else None
        if probe is None:
            return np.ones(len(self.row_groups), dtype=bool)
        column, hashes, scalar = probe
        keep = np.ones(len(self.row_groups), dtype=bool)
        for i, rg in enumerate(self.row_groups):
            bloom = self._filters.get((rg, column))
            if bloom is None:
                continue
            if scalar is not None:
                keep[i] = any(bloom.find_hash(h) for h in scalar)
            else:
                assert isinstance(bloom, SplitBlockBloomFilter)
                keep[i] = bool(bloom.find_hashes(hashes).any())
        return keep

"""The point lookup of a local file in one compiled call, without the GIL.

For a point lookup or a short ``IN`` list, pruning a local file is a tail read, a walk of its
footer to the probed columns' chunks, a header and a 32-byte block read a filter, and eight bit
tests a hash. In Python that is about 0.2 ms a file under the GIL, most of it bookkeeping; the
kernel ``probe_local_file`` (``_kernels_probe.c``) does it all in C with the GIL released, so
that two threads prune two files at once (docs/performance.md, "The point lookup without an
index").

The kernel takes the common case only, and says so otherwise: it needs a *plan*, made from a
footer the Python path decoded (the file's schema leaves and each member's hashes, which
depend on the file's schema), and it only answers for a file whose schema key (the footer but
its row groups and row count: :attr:`parquet_bloom._format.FooterView.schema_key`) is the
plan's. Anything else (another schema, an encrypted or unusual footer, a filter without
``bloom_filter_length``, any error) is the Python path's, which reads the file again and reports
what is wrong, located. The reads it makes, and counts, are those of the Python path
(:meth:`parquet_bloom._filter_reads.FilterReads.load_blocks`), and its answer is the same bit
for bit: the tests compare both on every file they prune.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from parquet_bloom import _format as fmt
from parquet_bloom import kernels
from parquet_bloom._prune.expression import And, Equal, IsIn, Node, Or

# What a member of the tree probes in a file: its column's dotted path, its hashes, and the
# same as Python ints when few enough to probe one by one (None: whole filters are read); None
# when the member cannot prune in the file.
MemberProbe = tuple[str, npt.NDArray[np.uint64], list[int] | None] | None

_OK, _OTHER_KEY = 0, 1
_Array = npt.NDArray[Any]
_NO_ROW_GROUPS = np.zeros(0, dtype=np.int64)  # every row group
# The kernel takes a tail size as a C long long; a larger one reads the whole file, as this.
_LONGEST_TAIL = 2**62
# The most threads probe_many's call starts (_kernels_probe.c: 64).
_MOST_THREADS = 64


@dataclass(frozen=True)
class Plan:
    """What the kernel needs to probe the files of one schema key: the leaves (each one's
    ``path_in_schema`` as the footer encodes it, and its physical type), the probed leaves
    with their hashes, and where each member's hashes lie among them."""

    key: bytes
    paths: bytes
    path_offsets: npt.NDArray[np.int64]
    types: npt.NDArray[np.int32]
    probe_leaves: npt.NDArray[np.int32]
    hash_counts: npt.NDArray[np.int32]
    hashes: npt.NDArray[np.uint64]
    members: dict[int, tuple[int, ...]]  # by id of the member: its hashes' positions

    def buffers(
        self,
    ) -> tuple[bytes, bytes, _Array, _Array, _Array, _Array, _Array]:
        """The kernel's arguments from the schema key to the hashes, in its order."""
        return (
            self.key, self.paths, self.path_offsets, self.types, self.probe_leaves,
            self.hash_counts, self.hashes,
        )  # fmt: skip


def make_plan(
    key: bytes,
    leaves: Sequence[fmt.SchemaLeaf],
    probes: Mapping[int, MemberProbe],
    max_hashes: int,
) -> Plan | None:
    """The plan for files of schema key ``key``, whose leaves are ``leaves``, where ``probes``
    are the tree's members' probes; None when the kernel cannot serve them: a column probed
    for more than ``max_hashes`` hashes (the Python path reads its whole filters), a member
    probing whole filters, or a type this library does not know."""
    by_path = {leaf.path: leaf for leaf in leaves}
    columns: dict[str, list[int]] = {}  # column -> its hashes, every member's, in order
    spans: dict[int, tuple[str, int, int]] = {}
    for member, probe in probes.items():
        if probe is None:
            continue
        column, _, scalar = probe
        if not scalar or column not in by_path:
            return None  # whole filters, or no hash: the Python path's
        hashes = columns.setdefault(column, [])
        spans[member] = (column, len(hashes), len(hashes) + len(scalar))
        hashes.extend(scalar)
    if any(len(hashes) > max_hashes for hashes in columns.values()):
        return None
    type_values = fmt.Type._NAMES_TO_VALUES
    if any(leaf.physical_type not in type_values for leaf in leaves):
        return None
    encoded = [fmt.encoded_path(leaf) for leaf in leaves]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    order = list(columns)
    starts = dict(zip(order, np.cumsum([0] + [len(columns[c]) for c in order]), strict=False))
    return Plan(
        key=key,
        paths=b"".join(encoded),
        path_offsets=_read_only(offsets),
        types=_read_only(
            np.array([type_values[leaf.physical_type] for leaf in leaves], dtype=np.int32)
        ),
        probe_leaves=_read_only(np.array([by_path[c].column_index for c in order], dtype=np.int32)),
        hash_counts=_read_only(np.array([len(columns[c]) for c in order], dtype=np.int32)),
        hashes=_read_only(np.array([h for c in order for h in columns[c]], dtype=np.uint64)),
        members={m: tuple(range(starts[c] + a, starts[c] + b)) for m, (c, a, b) in spans.items()},
    )


def _read_only(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``array``, no longer writable: the kernel checks a plan's buffers (offsets within the
    paths, counts that add up) with the GIL held, then reads them without it, from threads
    that share the plan; nothing may change them in between."""
    array.flags.writeable = False
    return array


class Probed(NamedTuple):
    """One file probed: its row groups' compressed sizes; for each row group, each of the
    plan's hashes' answer, a byte at ``row_group * len(plan.hashes) + i`` of ``found``: 1
    (might be there), 0 (is not) or 2 (the chunk has no filter); the reads made (the
    footer's and the filters') and their bytes, and the reads of filters alone."""

    sizes: list[int]
    found: bytes
    reads: int
    bytes_read: int
    filter_reads: int

    @property
    def num_row_groups(self) -> int:
        return len(self.sizes)


def available() -> bool:
    """Whether the compiled kernel is there (:mod:`parquet_bloom.kernels`)."""
    return kernels.compiled is not None and hasattr(kernels.compiled, "probe_local_file")


def probe(
    path: str | os.PathLike[str],
    size: int | None,
    tail_size: int,
    plan: Plan,
    row_groups: Sequence[int] | None = None,
) -> Probed | bytes | None:
    """Probe the local file ``path`` (of ``size`` bytes if known) with ``plan``, in
    ``row_groups`` (default: all; the others' filters are not read, their answers are 2):
    what it found, or the file's schema key when that is not the plan's (None when it cannot
    tell), or None when the Python path is to read the file."""
    compiled = kernels.compiled
    assert compiled is not None  # available() was asked first
    if not _fits(size):
        return None  # a table's log says so: the Python path refuses it, located
    got = compiled.probe_local_file(
        path,
        -1 if size is None else size,
        min(tail_size, _LONGEST_TAIL),
        *plan.buffers(),
        _NO_ROW_GROUPS if row_groups is None else np.asarray(row_groups, dtype=np.int64),
    )
    return _answer(got)


def probe_many(
    paths: Sequence[str], sizes: Sequence[int | None], tail_size: int, plan: Plan, threads: int
) -> list[Probed | bytes | None]:
    """:func:`probe` of every row group of each of ``paths`` (of ``sizes`` bytes, None where
    not known), in one call: ``threads`` threads take the next file when done, without the
    GIL (a Python thread a file, taking turns with the GIL at each, cost more than it saved)."""
    compiled = kernels.compiled
    assert compiled is not None  # available() was asked first
    # Sizes no file has (negative, -1 too, past int64): the Python path refuses them,
    # located, as probe() leaves them; the call takes -1 for "not known".
    unfit = {i for i, size in enumerate(sizes) if not _fits(size)}
    known = [-1 if size is None or i in unfit else size for i, size in enumerate(sizes)]
    answers = compiled.probe_local_files(
        list(paths),
        np.array(known, dtype=np.int64),
        min(tail_size, _LONGEST_TAIL),
        *plan.buffers(),
        min(threads, _MOST_THREADS),  # a max_workers past a C int too
    )
    got = [_answer(a) for a in answers]
    for i in unfit:
        got[i] = None
    return got


def _fits(size: int | None) -> bool:
    """Whether ``size`` (None: not known) is one a file can have, as the kernel takes it."""
    return size is None or 0 <= size < 2**63


def _answer(got: tuple[Any, ...]) -> Probed | bytes | None:
    if got[0] == _OTHER_KEY:
        return got[1] if got[1] is not None else None
    if got[0] != _OK:
        return None
    _, _, sizes, found, reads, bytes_read, filter_reads = got
    return Probed(memoryview(sizes).cast("q").tolist(), found, reads, bytes_read, filter_reads)


def might_match(node: Node, plan: Plan, found: bytes, row_groups: Sequence[int]) -> list[bool]:
    """For each of ``row_groups``, whether ``node`` might hold there, from the kernel's
    answers (:attr:`Probed.found`): as :class:`parquet_bloom._prune.probes.FilePruning`
    evaluates the tree, where a member without a probe, or a chunk without a filter, keeps
    the row group. Python lists, not numpy: a point lookup's file has a few row groups."""
    if isinstance(node, And | Or):
        combine = all if isinstance(node, And) else any
        answers = [might_match(c, plan, found, row_groups) for c in node.children]
        return [combine(each) for each in zip(*answers, strict=True)]
    positions = plan.members.get(id(node)) if isinstance(node, Equal | IsIn) else None
    if positions is None:
        return [True] * len(row_groups)
    n = len(plan.hashes)
    return [any(found[rg * n + p] for p in positions) for rg in row_groups]

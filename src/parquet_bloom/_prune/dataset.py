"""Prune a pyarrow dataset's row groups with the Bloom filters of its Parquet files.

``prune(dataset, filter)`` returns the dataset restricted to the row groups whose filters might
hold a row that ``filter`` keeps, so that ``prune(d, f).dataset.to_table(filter=f)`` equals
``d.to_table(filter=f)`` while reading only those row groups. Only equality, ``isin`` and AND/OR
of them can be decided by a Bloom filter; anything else keeps the row group. Pruning never drops
a row group that holds a matching row: a NaN or null literal, a BOOLEAN column, a column absent
from the file (a hive partition key, a newer column), a file column whose type the dataset casts,
and a filter that cannot be read (with a :class:`BloomFilterWarning`) all keep it. Literals are
probed as the scan compares them, casts and all (see :func:`_compared_values`).

IO. Files are pruned concurrently in threads (the work is waiting on reads). For each file the
footer is read once by us (for the filter offsets and the row groups' sizes), and all filters
the filter needs from that file are loaded in one coalesced ``BloomFilterReader.filters``
call; pyarrow reads a footer again only when the pruned dataset is scanned, for the files
left. A dataset made from a listing reads its files exactly as pyarrow's scan asks
(:class:`ListedFiles`).
"""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, fields, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._index.files import IndexedFile, file_key, same_file
from parquet_bloom._index.lookup import BloomIndex
from parquet_bloom._io import location
from parquet_bloom._io.source import FOOTER_READ_SIZE
from parquet_bloom._prune import local_probe
from parquet_bloom._prune.decryption import scan_options, stop_if_refused
from parquet_bloom._prune.expression import (
    Node,
    Unknown,
    members,
    translate,
)
from parquet_bloom._prune.indexed import Decision, decide, scan_probe, text_probe
from parquet_bloom._prune.listed import ListedFiles, describe_filesystem, same_filesystem
from parquet_bloom._prune.probes import FilePruning, Probing, physical_schema
from parquet_bloom._prune.report import FileCost, PruneReport, PruneResult
from parquet_bloom._reader import BloomFilterReader, BloomFilterWarning
from parquet_bloom._tables.directories import list_live_files
from parquet_bloom._threads import PROBE_THREADS, prune_pool, shared_map
from parquet_bloom.errors import BloomFilterError, FileReadError

# Files pruned at once. Pruning waits on requests (one a file, mostly), so more threads than
# cores pay off on object storage: measured over 200 files with 20 ms a request, 16 in flight
# beat 8 (docs/performance.md, "Files in flight"); more only queue at s3fs's connection pool
# (10 connections unless its config says otherwise).
DEFAULT_MAX_WORKERS = 16
# Local files, unless told otherwise, are pruned one after another in the calling thread: their
# reads take microseconds from the page cache, the rest is Python holding the GIL, and threads
# only handed it to each other (docs/performance.md, "The point lookup without an index").
LOCAL_MAX_WORKERS = 1
# ... unless the compiled point lookup takes them (parquet_bloom._prune.local_probe): then one
# call prunes them, on threads of its own that hold no GIL (_threads.PROBE_THREADS).


# -- pruning ---------------------------------------------------------------------------------


def prune(
    dataset: ds.Dataset | str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    filter: pc.Expression,  # the name pyarrow's scan methods use
    *,
    filesystem: Any | None = None,
    storage_options: Mapping[str, Any] | None = None,
    max_workers: int | None = None,
    tail_size: int | None = None,
    index: str | os.PathLike[str] | BloomIndex | None = None,
    index_storage_options: Mapping[str, Any] | None = None,
    decryption: DecryptionKeys | None = None,
) -> PruneResult:
    """Restrict ``dataset`` to the row groups whose Bloom filters might hold a match of ``filter``.

    ``dataset`` is a ``pyarrow.dataset`` Parquet ``FileSystemDataset`` (hive-partitioned or
    not; fragments may already be row-group subsets), a ``UnionDataset`` of them, or where its
    files are: a path, a URL (``s3://bucket/table/``, any fsspec protocol, configured by
    ``storage_options``), a directory or prefix, a glob (``lake/day=*/``), or a list of them,
    on ``filesystem`` (pyarrow or fsspec) if given. Those are listed once
    (:func:`parquet_bloom._io.location.list_files`: hidden and metadata entries such as
    ``_SUCCESS`` left out; a directory that is or holds a Delta or Iceberg table stands for
    the table's live files, never the replaced ones, and ``report.tables`` says so:
    docs/cli.md#table-directories), the dataset is made of the files listed, and
    each file's filters are read knowing its size from the listing. Row groups are never
    dropped unless every matching row is provably absent, so
    ``prune(d, f).dataset.to_table(filter=f)`` equals ``d.to_table(filter=f)``; a filter that
    cannot be read keeps its row group and warns with :class:`BloomFilterWarning`.
    ``prune(d, f).to_table()`` gives the same rows, read late (the filter's columns first).

    The pruned dataset holds ``ParquetFileFragment`` row-group subsets (files with nothing
    left are dropped) with their partition expressions. Two pyarrow behaviours to know: a
    dataset given ``.filter()`` hides its fragments, so prune first and filter the result;
    and ``count_rows()`` *without* a filter answers from each file's footer, counting whole
    files even for subsets (``count_rows(filter=f)`` and ``to_table()`` are exact).

    ``max_workers`` files are pruned at once, in threads (default: 16 on a filesystem, where
    each waits on requests; local files one after another, in the calling thread, where
    threads would only take turns holding the GIL, but two at a time where the compiled
    point lookup, which holds no GIL, takes them: :mod:`parquet_bloom._prune.local_probe`).
    Each file costs one request when
    its filters lie just before its footer (the tail read of ``tail_size`` bytes, see
    :class:`BloomFilterReader`, holds both), two otherwise; pyarrow's copy of the footer is not
    read here (the pruned fragments are made from our footer), only by the scan. The report
    counts requests and bytes per file and in total.

    ``index``: a Bloom index of the dataset's files (its location, or an open
    :class:`parquet_bloom.index.BloomIndex`; ``index_storage_options`` configure a location,
    default ``storage_options``): the files it knows as they are (same name and size) are
    decided by its lookups without opening them; every other file is pruned by its own
    filters (docs/index.md#pruning-with-an-index).

    ``decryption``: the keys of encrypted files (:class:`parquet_bloom.DecryptionKeys`,
    docs/encryption.md#pruning-tables-and-datasets): a filter whose key is not available keeps
    its row groups, with the usual warning; a key that does not decrypt (wrong, or tampered
    bytes) is a :class:`~parquet_bloom.errors.DecryptionError` naming the file. A dataset made
    here from paths is scanned by pyarrow with decryption made from the same keys (through the
    same KMS client; keys given directly: the footer key only); a dataset you made is scanned
    as you made it.
    """
    sizes: dict[str, int] = {}  # each listed file's size, so that opening it costs no lookup
    names: dict[str, str] = {}  # each listed file's name as an index knows it
    tables: tuple[str, ...] = ()  # the tables whose live files stand for their directories
    listed = None  # the dataset made here from paths
    if isinstance(dataset, ds.Dataset):
        if filesystem is not None or storage_options is not None:
            raise ValueError(
                "filesystem= is for paths, and storage_options= for URLs; a dataset brings its "
                "own filesystem"
            )
    elif isinstance(dataset, str | os.PathLike) or (
        isinstance(dataset, Sequence) and all(isinstance(p, str | os.PathLike) for p in dataset)
    ):
        listed = _listed_dataset(dataset, filesystem, storage_options, decryption)
        dataset, sizes, names, tables = listed
    else:
        raise TypeError(
            "dataset must be a pyarrow.dataset.Dataset, a path or a list of paths, "
            f"not {type(dataset).__name__}"
        )
    if max_workers is not None and (not isinstance(max_workers, int) or max_workers < 1):
        raise ValueError(f"max_workers must be a positive integer, not {max_workers!r}")
    tree = translate(filter)
    identities = {path: IndexedFile(key, path, size=sizes.get(path)) for path, key in names.items()}
    with ExitStack() as stack:
        opened = None
        if isinstance(index, BloomIndex):
            opened = index
        elif index is not None:
            options = storage_options if index_storage_options is None else index_storage_options
            opened = stack.enter_context(BloomIndex(index, storage_options=options))
        result = prune_with(
            dataset,
            tree,
            _Reading(sizes, tail_size, identities, opened, decryption=decryption),
            max_workers,
        )
    # the filter, for result.to_table(); the tables read as their live files, for the report;
    # the keys the scan's decryption was made from, when it was made here
    report = replace(result.report, tables=tables)
    keys = decryption if listed is not None else None
    return replace(result, filter=filter, report=report, decryption=keys)


def prune_with(
    dataset: ds.Dataset, tree: Node, reading: _Reading, max_workers: int | None = None
) -> PruneResult:
    """:func:`prune` of a dataset, its filter translated, read as ``reading`` says (the table
    formats give their files' sizes and identities, and their index)."""
    pruned, report, problems = _prune_dataset(dataset, tree, max_workers, reading)
    for problem in problems:
        warnings.warn(problem, BloomFilterWarning, stacklevel=3)
    return PruneResult(pruned, report)


def _listed_dataset(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    filesystem: Any | None,
    storage_options: Mapping[str, Any] | None,
    decryption: DecryptionKeys | None = None,
) -> tuple[ds.Dataset, dict[str, int], dict[str, str], tuple[str, ...]]:
    """The dataset of the files ``source`` names, listed once (a table directory standing for
    its live files; scanned with ``decryption``), their sizes, their names as an index knows
    them, and the tables read."""
    listing = list_live_files(
        source, filesystem=filesystem, storage_options=storage_options, list_plain=True
    )
    entries = listing.files
    if not entries:
        raise ValueError("no paths given: a dataset needs at least one file")
    fs = entries[0].filesystem
    for entry in entries[1:]:
        if not same_filesystem(fs, entry.filesystem):
            raise ValueError(
                "the paths of one dataset must all be on one filesystem: "
                f"{entries[0].name} is on {describe_filesystem(fs)}, {entry.name} on "
                f"{describe_filesystem(entry.filesystem)}"
            )
    sizes = {e.path: e.size for e in entries if e.size is not None}
    names = {e.path: file_key(e.name) for e in entries}
    if fs is not None and not isinstance(fs, pafs.FileSystem):
        fs = pafs.PyFileSystem(ListedFiles(fs, sizes))
    paths = [e.path for e in entries]
    parquet = ds.ParquetFileFormat(default_fragment_scan_options=scan_options(decryption))
    try:
        dataset = ds.dataset(paths, format=parquet, filesystem=fs)
    except Exception as err:
        # pyarrow takes the schema from the first file's footer. When that file cannot be
        # read (gone since the listing, a store's failure, a key the KMS client refuses:
        # its own error, raised through pyarrow), the schema comes from the first file that
        # can be: the unreadable one stays in, and pruning keeps its row groups. (The first
        # is tried again by us: keys that do not decrypt it are told as ours.)
        readable = (BloomFilterError, OSError, pa.ArrowException)
        if decryption is None and not isinstance(err, readable):
            raise
        schema, first_error = _first_readable_schema(entries, decryption)
        if schema is None:
            if decryption is not None and isinstance(first_error, BloomFilterError):
                raise first_error.located(source=entries[0].name) from err
            raise
        dataset = ds.dataset(paths, schema=schema, format=parquet, filesystem=fs)
    return dataset, sizes, names, tuple(str(t) for t in listing.tables)


def _first_readable_schema(
    entries: Sequence[location.Entry], decryption: DecryptionKeys | None
) -> tuple[pa.Schema | None, Exception | None]:
    """The Arrow schema of the first of ``entries`` whose footer can be read, as pyarrow's
    dataset discovery would take it from that file (None if none can be), and the error of
    the first that could not be (None if it could)."""
    first: Exception | None = None
    for entry in entries:
        try:
            with BloomFilterReader(
                entry.path, filesystem=entry.filesystem, size=entry.size, decryption=decryption
            ) as r:
                return physical_schema(r), first
        except (BloomFilterError, OSError, pa.ArrowException) as err:
            # Keys that do not decrypt: told as ours, not pyarrow's.
            stop_if_refused(err, entry.name)
            if first is None:
                first = err
            continue
    return None, first


@dataclass(frozen=True)
class _Reading:
    """How each file is read: its size when a listing gave it, the tail read's size; and, with
    an ``index``, each file's identity (by its path in the dataset) to find it in the index."""

    sizes: Mapping[str, int]
    tail_size: int | None
    identities: Mapping[str, IndexedFile] = field(default_factory=dict)
    index: BloomIndex | None = None
    decryption: DecryptionKeys | None = None  # the keys of encrypted files


Reading = _Reading  # for the table formats, which read their files as their snapshot says


def _prune_dataset(
    dataset: ds.Dataset, tree: Node, max_workers: int | None, reading: _Reading
) -> tuple[ds.Dataset, PruneReport, list[str]]:
    if isinstance(dataset, ds.UnionDataset):
        _fragments(dataset)  # refuses a filtered union, whose filter a rebuild would lose
        children, report, problems = [], PruneReport(), []
        for child in dataset.children:
            pruned, child_report, child_problems = _prune_dataset(child, tree, max_workers, reading)
            children.append(pruned)
            report += child_report
            problems += child_problems
        pruned = ds.UnionDataset(dataset.schema, children)
    elif isinstance(dataset, ds.FileSystemDataset) and isinstance(
        dataset.format, ds.ParquetFileFormat
    ):
        pruned, report, problems = _prune_files(dataset, tree, max_workers, reading)
    else:
        raise TypeError(
            "prune needs a Parquet FileSystemDataset (or a UnionDataset of them), not "
            f"{type(dataset).__name__} of {type(getattr(dataset, 'format', None)).__name__}"
        )
    return pruned, report, problems


def _prune_files(
    dataset: ds.FileSystemDataset, tree: Node, max_workers: int | None, reading: _Reading
) -> tuple[ds.Dataset, PruneReport, list[str]]:
    fragments = _fragments(dataset)
    if isinstance(tree, Unknown) or (reading.index is None and not any(members(tree))):
        # Nothing to decide: read nothing, return the dataset as it is.
        return dataset, PruneReport(files=len(fragments)), []
    reader_filesystem = _reader_filesystem(dataset.filesystem)
    decided, narrowed, index_cost = _by_index(dataset, fragments, tree, reading)
    probed = [narrowed.get(i, f) for i, f in enumerate(fragments) if i not in decided]
    compiled = reader_filesystem is None and reading.decryption is None and local_probe.available()
    probing = Probing(tree, dataset.schema, plans=compiled)

    def pruned_file(fragment: ds.ParquetFileFragment) -> _Outcome:
        if compiled and (done := _prune_compiled(fragment, probing, reading)) is not None:
            return done
        return _prune_fragment(fragment, probing, reader_filesystem, reading)

    done: Iterator[_Outcome]
    first = [pruned_file(f) for f in probed[:1]] if compiled else []  # makes the kernel's plan
    rest = probed[len(first) :]
    if compiled and probing.plan is not None:
        threads = PROBE_THREADS if max_workers is None else max_workers
        done = itertools.chain(first, _prune_many(rest, probing, reading, threads))
    else:
        if max_workers is None:
            # Local files one after another: threads would only take turns holding the GIL.
            max_workers = (
                DEFAULT_MAX_WORKERS if reader_filesystem is not None else LOCAL_MAX_WORKERS
            )
        if max_workers == 1 or len(rest) <= 1:
            done = itertools.chain(first, map(pruned_file, rest))
        else:
            pool = prune_pool(max_workers)
            done = itertools.chain(first, shared_map(pruned_file, rest, pool, max_workers))
    outcomes = [decided[i] if i in decided else next(done) for i in range(len(fragments))]
    for i in narrowed:  # narrowed by the index, then by the file's own filters
        outcomes[i] = replace(outcomes[i], report=replace(outcomes[i].report, index_files=1))
    pruned = ds.FileSystemDataset(
        [o.fragment for o in outcomes if o.fragment is not None],
        dataset.schema,
        dataset.format,
        dataset.filesystem,
        root_partition=dataset.partition_expression,
    )
    report = _total([o.report for o in outcomes], index_cost)
    return pruned, report, [o.problem for o in outcomes if o.problem is not None]


def _by_index(
    dataset: ds.FileSystemDataset,
    fragments: list[ds.Fragment],
    tree: Node,
    reading: _Reading,
) -> tuple[dict[int, _Outcome], dict[int, ds.Fragment], PruneReport]:
    """For the fragments whose files the index knows as they are (by their place in
    ``fragments``): the outcomes the index decided alone, the fragments it narrowed that are
    still to be probed (where the tree has members it could not decide), and what its
    lookups cost."""
    idx = reading.index
    if idx is None or isinstance(tree, Unknown) or not reading.identities:
        return {}, {}, PruneReport()
    keys: set[str] = set()
    for fragment in fragments:
        keys.update(ds.get_partition_keys(fragment.partition_expression))
    probe = scan_probe(idx, dataset.schema, keys)

    reads, read_bytes = idx.reads, idx.bytes_read
    known = idx.file_rows()
    decision, complete = decide(tree, probe, idx, text_probe(idx, dataset.schema, keys))
    index_reads, index_bytes = idx.reads - reads, idx.bytes_read - read_bytes
    cost = PruneReport(
        reads=index_reads,
        requests=index_reads,
        bytes_read=index_bytes,
        index_reads=index_reads,
        index_bytes_read=index_bytes,
    )
    outcomes: dict[int, _Outcome] = {}
    narrowed: dict[int, ds.Fragment] = {}
    if decision is None and not complete:
        return outcomes, narrowed, cost  # the index decided nothing: each file's own filters
    for i, fragment in enumerate(fragments):
        file = reading.identities.get(fragment.path)
        if file is None or file.key not in known or not same_file(known[file.key], file):
            continue
        if fragment.buffer is not None:
            continue
        outcome = _decided(fragment, decision, file)
        if complete or outcome.fragment is None:
            outcomes[i] = outcome
        else:
            narrowed[i] = outcome.fragment
    return outcomes, narrowed, cost


def _decided(fragment: ds.ParquetFileFragment, decision: Decision, file: IndexedFile) -> _Outcome:
    """A fragment as the index's decision leaves it (no read: its footer is the scan's)."""
    report = PruneReport(files=1, index_files=1)
    if decision is None:
        return _Outcome(fragment, report, None)
    if file.key not in decision:
        return _Outcome(None, replace(report, files_skipped=1), None)
    keep = decision[file.key]
    covered = _fragment_row_groups(fragment)
    if keep is None:
        return _Outcome(fragment, report, None)
    kept = sorted(keep if covered is None else keep & set(covered))
    if not kept:
        return _Outcome(None, replace(report, files_skipped=1), None)
    if covered is not None and kept == sorted(covered):
        return _Outcome(fragment, report, None)
    subset = fragment.format.make_fragment(
        fragment.path,
        fragment.filesystem,
        fragment.partition_expression,
        row_groups=kept,
        file_size=file.size,
    )
    return _Outcome(subset, report, None)


def _fragments(dataset: ds.Dataset) -> list[ds.Fragment]:
    try:
        return list(dataset.get_fragments())
    except ValueError as err:  # pyarrow hides the fragments of a dataset given .filter()
        raise ValueError(
            f"{err}: prune the dataset first, then filter it: prune(d, f).dataset.filter(...)"
        ) from None


def _reader_filesystem(filesystem: pafs.FileSystem) -> Any:
    """What to read a fragment's path with: None for local paths, the fsspec filesystem behind
    a wrapped one (so filter reads use its ``cat_ranges``), or the pyarrow filesystem itself."""
    if isinstance(filesystem, pafs.LocalFileSystem):
        return None
    if isinstance(filesystem, pafs.PyFileSystem) and isinstance(
        filesystem.handler, pafs.FSSpecHandler
    ):
        return filesystem.handler.fs
    return filesystem


@dataclass(frozen=True)
class _Outcome:
    fragment: ds.ParquetFileFragment | None  # None: every row group was skipped
    report: PruneReport
    problem: str | None  # a warning to give, in the caller's thread


def _prune_fragment(
    fragment: ds.ParquetFileFragment,
    probing: Probing,
    filesystem: Any,
    reading: _Reading,
) -> _Outcome:
    # Only our own footer read: the row groups the fragment covers (it may be a subset
    # already) and the Arrow types its file holds come from it, not from pyarrow's copy of
    # the footer, which would cost the same requests again (the scan reads that).
    size = reading.sizes.get(fragment.path)
    row_group_ids = _fragment_row_groups(fragment)
    name = _file_name(fragment.path, filesystem)
    keys = ds.get_partition_keys(fragment.partition_expression)
    if probing.columns <= keys.keys():
        # Only partition keys, which are not in the file: nothing to read, every row group
        # kept (pyarrow prunes partitions itself). The sizes are pyarrow's.
        sizes = [_compressed_size(rg.metadata) for rg in fragment.row_groups]
        report = PruneReport(files=1, row_groups=len(sizes), compressed_bytes=sum(sizes))
        return _Outcome(fragment, report, None)
    try:
        reader = BloomFilterReader(
            fragment.path,
            filesystem=filesystem,
            size=size,
            tail_size=reading.tail_size,
            decryption=reading.decryption,
        )
    except (BloomFilterError, OSError) as err:
        # Any file we cannot read, a missing one too (deleted since the listing): one
        # file's trouble must not fail the pruning of the others, nor drop its rows. But a
        # key that does not decrypt stops it (parquet_bloom._prune.decryption).
        stop_if_refused(err, name)
        report = _file_report(
            fragment.path, None, row_groups=_count(fragment, err), unreadable=name
        )
        return _Outcome(fragment, report, _keeping_all(name, err))
    with reader:
        compressed = 0
        try:  # a row group's column chunks are checked when first read
            if row_group_ids is None:
                row_group_ids = list(range(reader.num_row_groups))
            # Sizes from our footer, not pyarrow's: pyarrow aborts the process (a C++
            # exception nothing catches) building the column metadata of some corrupt footers.
            row_groups = dict.fromkeys(row_group_ids, 0)
            for rg in row_groups:
                if 0 <= rg < reader.num_row_groups:
                    row_groups[rg] = reader.compressed_size(rg)
            compressed = sum(row_groups.values())
            footer_requests = reader.requests
            pruning = FilePruning(reader, probing, probing.probes(reader), list(row_groups))
            keep = pruning.might_match()
        except (BloomFilterError, OSError) as err:
            stop_if_refused(err, name)
            report = _file_report(
                fragment.path,
                reader,
                row_groups=len(row_group_ids or ()),
                compressed_bytes=compressed,
                unreadable=name,
            )
            return _Outcome(fragment, report, _keeping_all(name, err))
        kept = [rg for rg, k in zip(row_groups, keep, strict=True) if k]
        report = _file_report(
            fragment.path,
            reader,
            row_groups=len(row_groups),
            compressed_bytes=compressed,
            unreadable=name if pruning.unreadable else None,
            files_skipped=int(not kept),
            row_groups_skipped=len(row_groups) - len(kept),
            compressed_bytes_skipped=compressed - sum(row_groups[rg] for rg in kept),
            filter_reads=reader.requests - footer_requests,
            filters_unreadable=len(pruning.unreadable),
            unreadable_columns=tuple(pruning.columns_unread),
        )
    problem = None
    if pruning.unreadable:
        problem = (
            f"{len(pruning.unreadable)} Bloom filter(s) of {name} could not be read, "
            f"so their row groups were kept; first: {pruning.unreadable[0]}"
        )
    return _kept(fragment, kept, len(row_groups), size, report, problem)


def _kept(
    fragment: ds.ParquetFileFragment,
    kept: list[int],
    row_groups: int,
    size: int | None,
    report: PruneReport,
    problem: str | None,
) -> _Outcome:
    """The outcome of a fragment of ``row_groups`` row groups of which ``kept`` are left."""
    if len(kept) == row_groups:
        return _Outcome(fragment, report, problem)
    if not kept:
        return _Outcome(None, report, problem)
    if fragment.buffer is not None:  # a fragment of bytes in memory: nothing to read
        return _Outcome(fragment.subset(row_group_ids=kept), report, problem)
    # A fragment made, not subset: subset() would have pyarrow read the footer now.
    subset = fragment.format.make_fragment(
        fragment.path,
        fragment.filesystem,
        fragment.partition_expression,
        row_groups=kept,
        file_size=size,
    )
    return _Outcome(subset, report, problem)


def _prune_many(
    fragments: Sequence[ds.ParquetFileFragment],
    probing: Probing,
    reading: _Reading,
    threads: int,
) -> list[_Outcome]:
    """:func:`_prune_fragment` of local files, those of whole files in one call of the
    compiled point lookup on ``threads`` threads (:func:`local_probe.probe_many`), a file it
    does not answer for as :func:`_prune_compiled` or the Python path prunes it."""
    plan = probing.plan
    assert plan is not None
    tail_size = FOOTER_READ_SIZE if reading.tail_size is None else reading.tail_size
    whole = [
        i
        for i, f in enumerate(fragments)
        if type(tail_size) is int and _compiled_may_take(f, probing)
        and _fragment_row_groups(f) is None
    ]  # fmt: skip
    paths = [fragments[i].path for i in whole]
    sizes = [reading.sizes.get(path) for path in paths]
    answers = local_probe.probe_many(paths, sizes, tail_size, plan, threads) if whole else []
    out: dict[int, _Outcome] = {}
    python: set[int] = set()
    for i, size, got in zip(whole, sizes, answers, strict=True):
        if isinstance(got, local_probe.Probed):
            outcome = _compiled_outcome(fragments[i], probing, plan, got, None, size)
            if outcome is not None:
                out[i] = outcome
        elif got is None:
            python.add(i)  # not the kernel's: the Python path's, not asked again
    return [
        out[i]
        if i in out
        else _prune_fragment(f, probing, None, reading)
        if i in python
        else _prune_compiled(f, probing, reading) or _prune_fragment(f, probing, None, reading)
        for i, f in enumerate(fragments)
    ]


def _compiled_may_take(fragment: ds.ParquetFileFragment, probing: Probing) -> bool:
    """Whether the compiled lookup may prune ``fragment``: a file, whose columns probed are
    not all partition keys (:func:`_prune_fragment` reads nothing then)."""
    if fragment.buffer is not None:
        return False
    return not probing.columns <= ds.get_partition_keys(fragment.partition_expression).keys()


def _prune_compiled(
    fragment: ds.ParquetFileFragment, probing: Probing, reading: _Reading
) -> _Outcome | None:
    """:func:`_prune_fragment` of a local file by the compiled point lookup
    (:mod:`parquet_bloom._prune.local_probe`): the same outcome and report, or None where the
    kernel cannot answer (the Python path then reads the file)."""
    plan = probing.plan
    tail_size = FOOTER_READ_SIZE if reading.tail_size is None else reading.tail_size
    if plan is None or type(tail_size) is not int or not _compiled_may_take(fragment, probing):
        return None
    size = reading.sizes.get(fragment.path)
    asked = _fragment_row_groups(fragment)
    unique = None if asked is None else list(dict.fromkeys(asked))
    got = local_probe.probe(fragment.path, size, tail_size, plan, unique)
    if isinstance(got, bytes):  # another schema: its plan, if one was made
        other = probing.plans.get(got)
        if other is None:
            return None
        plan = other
        got = local_probe.probe(fragment.path, size, tail_size, plan, unique)
    if not isinstance(got, local_probe.Probed):
        return None  # the Python path's, a row group asked that the footer lacks too
    return _compiled_outcome(fragment, probing, plan, got, unique, size)


def _compiled_outcome(
    fragment: ds.ParquetFileFragment,
    probing: Probing,
    plan: local_probe.Plan,
    got: local_probe.Probed,
    unique: list[int] | None,
    size: int | None,
) -> _Outcome | None:
    """The outcome of ``fragment`` (its row groups ``unique``, None for all) from the kernel's
    answers ``got``; None when a row group asked is not in the footer (the Python path's)."""
    sizes = got.sizes
    ids: Sequence[int] = range(len(sizes)) if unique is None else unique
    if any(not 0 <= rg < len(sizes) for rg in ids):
        return None
    keep = local_probe.might_match(probing.tree, plan, got.found, ids)
    kept = [rg for rg, k in zip(ids, keep, strict=True) if k]
    compressed = sum(sizes) if unique is None else sum(sizes[rg] for rg in ids)
    report = _counted_report(
        fragment.path,
        got.reads,
        got.reads,
        got.bytes_read,
        row_groups=len(ids),
        compressed_bytes=compressed,
        files_skipped=int(not kept),
        row_groups_skipped=len(ids) - len(kept),
        compressed_bytes_skipped=compressed - sum(sizes[rg] for rg in kept),
        filter_reads=got.filter_reads,
    )
    return _kept(fragment, kept, len(ids), size, report, None)


def _compressed_size(row_group: Any) -> int:
    """A row group's column chunks' ``total_compressed_size`` (pyarrow RowGroupMetaData)."""
    return sum(row_group.column(j).total_compressed_size for j in range(row_group.num_columns))


def _file_name(path: str, filesystem: Any) -> str:
    """A fragment's file as a person names it: its URL on an fsspec filesystem, else its
    path."""
    if filesystem is None or isinstance(filesystem, pafs.FileSystem):
        return path
    return location.Entry(path, None, filesystem).name


def _keeping_all(name: str, err: Exception) -> str:
    """The warning for a file whose footer or filters could not be read: it names the file
    once (our errors name it already)."""
    text = " ".join(str(err).split()) or type(err).__name__
    if name not in text and _path_of(name) not in text:
        text = f"{name}: {text}"
    return f"{text}; keeping all row groups of the file"


def _path_of(name: str) -> str:
    """A URL without its scheme (``s3://b/k`` -> ``b/k``), as fsspec names a path."""
    return name.split("://", 1)[-1]


def _count(fragment: ds.ParquetFileFragment, err: Exception) -> int:
    """The row groups of a fragment whose footer we could not decode, as pyarrow counts them
    (0 when pyarrow cannot read it either). A file we could not fetch (a store's failure, a
    missing object) is not asked for again: 0."""
    if isinstance(err, FileReadError | OSError):
        return 0
    try:
        return int(fragment.num_row_groups)
    except Exception:  # pyarrow's, or a KMS client's through pyarrow's decryption
        return 0


def _fragment_row_groups(fragment: ds.ParquetFileFragment) -> list[int] | None:
    """The row groups a fragment was made to cover, or None for all of its file's, asked
    without reading the file: ``fragment.row_groups`` would read its footer. A fragment's
    ``__reduce__`` gives the arguments it was made with (pyarrow's pickling)."""
    _, (_, _, _, row_groups) = fragment.__reduce__()
    return None if row_groups is None else [int(rg) for rg in row_groups]


def _file_report(
    path: str,
    reader: BloomFilterReader | None,
    *,
    row_groups: int = 0,
    compressed_bytes: int = 0,
    unreadable: str | None = None,
    unreadable_columns: tuple[str, ...] = (),
    **outcome: int,
) -> PruneReport:
    """One file's report, with the requests and bytes of ``reader`` (None: it did not open),
    in total and as the file's own entry; ``unreadable`` names the file when some of it could
    not be read, ``unreadable_columns`` the columns whose filters could not be."""
    return _counted_report(
        path,
        0 if reader is None else reader.reads,
        0 if reader is None else reader.requests,
        0 if reader is None else reader.bytes_read,
        row_groups=row_groups,
        compressed_bytes=compressed_bytes,
        unreadable=unreadable,
        unreadable_columns=unreadable_columns,
        **outcome,
    )


def _counted_report(
    path: str,
    reads: int,
    requests: int,
    bytes_read: int,
    *,
    row_groups: int = 0,
    compressed_bytes: int = 0,
    unreadable: str | None = None,
    unreadable_columns: tuple[str, ...] = (),
    **outcome: int,
) -> PruneReport:
    """One file's report, with the reads, requests and bytes it took (:func:`_file_report`)."""
    return PruneReport(
        files=1,
        row_groups=row_groups,
        compressed_bytes=compressed_bytes,
        reads=reads,
        requests=requests,
        bytes_read=bytes_read,
        per_file=(FileCost(path, requests, bytes_read),),
        unreadable_files=() if unreadable is None else (unreadable,),
        unreadable_columns=unreadable_columns,
        tables=(),
        **outcome,
    )


def _total(reports: Sequence[PruneReport], start: PruneReport) -> PruneReport:
    """The sum of ``reports`` (counts added, tuples joined in order) and ``start``, first."""
    values: dict[str, Any] = {}
    for name in _REPORT_FIELDS:
        first = getattr(start, name)
        if isinstance(first, tuple):
            values[name] = first + tuple(
                item for report in reports for item in getattr(report, name)
            )
        else:
            values[name] = first + sum(getattr(report, name) for report in reports)
    return PruneReport(**values)


_REPORT_FIELDS = tuple(f.name for f in fields(PruneReport))

# -- one open file, for the table formats (parquet_bloom._tables) ----------------------------


def file_schema(reader: BloomFilterReader) -> pa.Schema:
    """The Arrow schema of ``reader``'s file as pyarrow reads it, from the footer it holds
    (no read): what a table library needs to build its per-file filter before probing."""
    return physical_schema(reader)


@dataclass(frozen=True)
class FilePruned:
    """One file's row groups pruned: ``kept`` (their indices, in file order), the ``report``
    (one file, with the reader's requests and bytes) and a warning to give, if any."""

    kept: list[int]
    report: PruneReport
    problem: str | None


def prune_reader(
    reader: BloomFilterReader, tree: Node, path: str, schema: pa.Schema | None = None
) -> FilePruned:
    """The row groups of the file ``reader`` has open (named ``path`` in the report) whose
    filters might hold a match of ``tree``, compared as a scan in ``schema`` (default: the
    file's own Arrow schema) compares them. A filter that cannot be read keeps its row group,
    and the problem says so. This is :func:`prune` for one file whose reader the caller
    opened (the table formats know each file's size and build each file's filter)."""
    everything = list(range(reader.num_row_groups))
    compressed = 0
    try:
        sizes = [sum(c.total_compressed_size for c in reader.row_group(rg)) for rg in everything]
        compressed = sum(sizes)
        footer_requests = reader.requests
        in_file = physical_schema(reader)
        probing = Probing(tree, in_file if schema is None else schema)
        probes = probing.probes(reader, in_file)
        pruning = FilePruning(reader, probing, probes, everything)
        keep = pruning.might_match()
    except BloomFilterError as err:
        stop_if_refused(err, path)
        report = _file_report(
            path, reader, row_groups=len(everything), compressed_bytes=compressed, unreadable=path
        )
        return FilePruned(everything, report, f"{err}; keeping all row groups of the file")
    kept = [rg for rg in everything if keep[rg]]
    report = _file_report(
        path,
        reader,
        row_groups=len(everything),
        compressed_bytes=compressed,
        unreadable=path if pruning.unreadable else None,
        files_skipped=int(not kept),
        row_groups_skipped=len(everything) - len(kept),
        compressed_bytes_skipped=compressed - sum(sizes[rg] for rg in kept),
        filter_reads=reader.requests - footer_requests,
        filters_unreadable=len(pruning.unreadable),
        unreadable_columns=tuple(pruning.columns_unread),
    )
    problem = None
    if pruning.unreadable:
        problem = (
            f"{len(pruning.unreadable)} Bloom filter(s) of {path} could not be read, so their "
            f"row groups were kept; first: {pruning.unreadable[0]}"
        )
    return FilePruned(kept, report, problem)

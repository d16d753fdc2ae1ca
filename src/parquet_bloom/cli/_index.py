"""The ``parquet-bloom index`` command: ``build``, ``refresh``, ``compact``, ``inspect`` and
``lookup`` of a Bloom index (docs/index.md, docs/cli.md#index).

TARGET is a Delta table (a path or URL with ``_delta_log/``: its index is
``<table>/_bloom_index/``, its files its snapshot's), an Iceberg table (with ``--catalog NAME``,
its identifier, as the ``table`` command names it; or its location or ``metadata.json``,
read-only, for ``inspect`` and ``lookup``: its index is the statistics file registered for its
current snapshot or the nearest ancestor) or a dataset (a directory, prefix, glob or file: its
index where ``--index`` says). :mod:`parquet_bloom.cli` calls :func:`extend` with its
subcommands; the parsing of values and storage options is handed in, so that this module does
not import the command's.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import IO, Any

from parquet_bloom._format import SchemaLeaf
from parquet_bloom._io import location
from parquet_bloom.cli._options import add_limit_options, fpp
from parquet_bloom.cli._output import EXIT_BAD_INPUT, EXIT_OK, Progress, Run
from parquet_bloom.cli._table_open import Table, TableError, detect_format, open_table

__all__ = ["extend"]

_DELTA_LOG = "_delta_log"


class _IndexError(ValueError):
    """A mistake in what was asked: one line, exit status 2."""


def extend(
    subcommands: Any,
    *,
    storage_option: Callable[[str], tuple[str, Any]],
    parse_literal: Callable[[str, SchemaLeaf], Any],
) -> None:
    """Add the ``index`` command to ``subcommands`` (the command's ``add_subparsers()``)."""
    index = subcommands.add_parser(
        "index",
        help="Build, refresh, compact, inspect or look up a Bloom index of many files.",
        description="A Bloom index of a Delta or Iceberg table's or a dataset's files: their "
        "row groups' "
        "filters, bit-sliced into one place, so that a lookup reads a few slices instead of "
        "every file's filter (docs/index.md).",
    )
    commands = "{build,refresh,compact,inspect,lookup}"
    sub = index.add_subparsers(dest="index_command", required=True, metavar=commands)

    def command(name: str, help: str, run: Run) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
        p.add_argument(
            "target",
            metavar="TARGET",
            help="a Delta table's path or URL (its index: TABLE/_bloom_index/); with "
            "--catalog, an Iceberg table's identifier (ns.table; its index: a statistics file "
            "of its snapshot); an Iceberg table's location or metadata.json (read-only: "
            "inspect, lookup); or a dataset: a directory, prefix, glob or file (its index: "
            "--index)",
        )
        p.add_argument(
            "--catalog", metavar="NAME", help="the pyiceberg catalog of an Iceberg TARGET"
        )
        p.add_argument(
            "--index",
            metavar="LOCATION",
            help="the index: a directory, or one file ending in .puffin (default for a Delta "
            "table: TABLE/_bloom_index/; required for a dataset)",
        )
        p.add_argument("--json", action="store_true", help="print JSON instead of text")
        p.add_argument(
            "--storage-option",
            action="append",
            type=storage_option,
            default=[],
            metavar="KEY=VALUE",
            help="for a Delta table, deltalake's storage options (AWS_ENDPOINT_URL=...); for "
            "an Iceberg table, FileIO properties (s3.endpoint=...); for a dataset, fsspec's "
            "(endpoint_url=...); repeatable",
        )
        add_limit_options(p)
        p.set_defaults(run=_guarded(run), parse_literal=parse_literal, index_parser=p)
        return p

    def from_data(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--progress", action="store_true", help="show progress on stderr even if not a TTY"
        )
        p.add_argument(
            "--from-data",
            choices=("missing", "all"),
            help="also build filters from the values: for row groups without one, or all",
        )
        p.add_argument(
            "--fpp",
            type=fpp,
            help="the rate of the filters built from the values (default about 1/N for N "
            "row groups: a lookup then expects about one false candidate)",
        )

    p = command("build", "Build the index from the filters in the files (a progress bar).", _build)
    p.add_argument("--column", action="append", default=[], metavar="C", help="column (repeatable)")
    p.add_argument(
        "--text",
        action="append",
        default=[],
        type=text_filter,
        metavar="C:KIND[:K=V,...]",
        help="a token (tokenbf) or n-gram (ngrambf) filter of string column C, built from the "
        "values, for substring and token searches; options n=, size=, hashes=, seed=, fpp= "
        "(e.g. message:ngrambf:n=4); repeatable (docs/index.md#token-and-n-gram-filters)",
    )
    from_data(p)
    p = command("refresh", "Add a segment for the files the index does not know.", _refresh)
    from_data(p)
    p = command("compact", "Merge the index's segments into one.", _compact)
    p.add_argument(
        "--retain-seconds",
        type=float,
        metavar="S",
        help="remove segments no longer named once older than this (default 3600; at least 60 "
        "unless --no-concurrent-writers; not for an Iceberg table, whose old index files go "
        "with their snapshots)",
    )
    p.add_argument(
        "--no-concurrent-writers",
        action="store_true",
        help="no other process builds or refreshes the index meanwhile: allows --retain-seconds "
        "below 60 (a segment written but not yet named could otherwise be removed)",
    )

    def snapshot(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--snapshot-id",
            type=int,
            metavar="N",
            help="an Iceberg table's snapshot (default the current one): the index it uses",
        )

    snapshot(
        command(
            "inspect",
            "Columns, size classes, row groups, bytes and the false candidates a lookup expects.",
            _inspect,
        )
    )
    p = command(
        "lookup",
        "The files and row groups that may hold any of the values (exit 1 if none may).",
        _lookup,
    )
    p.usage = (
        "parquet-bloom index lookup [options] TARGET --column C VALUE [VALUE ...]\n"
        "       parquet-bloom index lookup [options] TARGET --column C --token T [T ...]"
    )
    snapshot(p)
    p.add_argument(
        "--column",
        nargs="+",
        required=True,
        metavar=("C", "VALUE"),
        help="the column, then the values, read as the column's type (none with a text match)",
    )
    matches = p.add_mutually_exclusive_group()
    for flag, function, what in _TEXT_MATCHES:
        matches.add_argument(
            flag,
            nargs="+",
            metavar="S",
            dest=function,
            help=f"through the column's token and n-gram filters: row groups that may hold a "
            f"value {what} any of these",
        )


# index lookup's text matches: option, the function (parquet_bloom.index.lookup_text), help.
_TEXT_MATCHES = (
    ("--token", "has_token", "holding as a whole token"),
    ("--substring", "match_substring", "holding"),
    ("--starts-with", "starts_with", "starting with"),
    ("--ends-with", "ends_with", "ending with"),
    ("--like", "match_like", "matching the LIKE pattern of"),
)


def _guarded(run: Run) -> Run:
    def guarded(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
        try:
            return run(args, out, err)
        except (_IndexError, TableError) as e:
            err.write(f"parquet-bloom: error: {e}\n")
            return EXIT_BAD_INPUT

    return guarded


# -- what TARGET is --------------------------------------------------------------------------


def _is_delta(target: str, options: dict[str, Any]) -> bool:
    if not location.is_url(target):
        return os.path.isdir(os.path.join(target, _DELTA_LOG))
    filesystem, path = location.resolve(target, storage_options=_fsspec_options(target, options))
    assert filesystem is not None
    return bool(filesystem.isdir(f"{path.rstrip('/')}/{_DELTA_LOG}"))


def _fsspec_options(target: str, options: dict[str, Any]) -> dict[str, Any] | None:
    """fsspec's options for a Delta table's files, from deltalake's (the AWS_* names)."""
    from parquet_bloom._tables.delta_snapshot import file_storage_options

    return file_storage_options(target, {k: str(v) for k, v in options.items()}) or None


@dataclass
class _Target:
    """What TARGET is: ``kind`` ("delta", "iceberg" or "dataset"), the storage ``options``
    given, and an Iceberg ``table``, opened."""

    kind: str
    options: dict[str, Any]
    table: Table | None = None

    @property
    def handle(self) -> Any:
        assert self.table is not None
        return self.table.handle

    @property
    def table_snapshot(self) -> int | None:
        assert self.table is not None
        return self.table.snapshot_id


def _where(args: argparse.Namespace, *, writing: bool = False) -> _Target:
    """What TARGET is; an Iceberg table opened (``writing``: through its catalog only)."""
    options = dict(args.storage_option)
    delta = args.catalog is None and _is_delta(args.target, options)
    iceberg = args.catalog is not None or (
        not delta and args.index is None and detect_format(args.target, options) == "iceberg"
    )
    if iceberg:
        if args.index is not None:
            raise _IndexError(
                f"{args.target} is an Iceberg table: its index is a statistics file of its "
                "snapshot, in its metadata; leave out --index"
            )
        opened = argparse.Namespace(
            table=args.target,
            catalog=args.catalog,
            format="iceberg",
            storage_option=args.storage_option,
            snapshot_id=getattr(args, "snapshot_id", None),
            parser=args.index_parser,
        )
        return _Target("iceberg", options, open_table(opened, writing=writing))
    if getattr(args, "snapshot_id", None) is not None:
        raise _IndexError("--snapshot-id is for Iceberg tables")
    if not delta and args.index is None:
        raise _IndexError(
            f"{args.target} is not a Delta table: name the dataset's index with --index "
            "LOCATION (a directory, or a file ending in .puffin), or an Iceberg table's "
            "catalog with --catalog NAME"
        )
    if delta and args.index is not None:
        raise _IndexError(
            f"{args.target} is a Delta table: its index is {args.target.rstrip('/')}/"
            "_bloom_index/; leave out --index"
        )
    return _Target("delta" if delta else "dataset", options)


def _iceberg_column(target: _Target, column: str, idx: Any) -> str:
    """The index's name of an Iceberg table's column (named as its current schema names it;
    indexed by field id, under the name it had at the build)."""
    from parquet_bloom._tables.iceberg_index import index_columns

    try:
        field_id = target.handle.schema().find_field(column).field_id
    except ValueError:
        raise _IndexError(f"the Iceberg table has no column {column!r}") from None
    return index_columns(idx).get(field_id, column)


def _dump(document: dict[str, Any], out: IO[str]) -> None:
    out.write(json.dumps(document, indent=2, default=str) + "\n")


# -- the subcommands -------------------------------------------------------------------------


def text_filter(text: str) -> Any:
    """``C:KIND[:K=V,...]`` as a :class:`parquet_bloom.index.TextFilter`."""
    from parquet_bloom.index import TextFilter

    column, _, rest = text.partition(":")
    kind, _, options = rest.partition(":")
    if not column or kind not in ("tokenbf", "ngrambf"):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected COLUMN:tokenbf or COLUMN:ngrambf, then :K=V,... options"
        )
    values: dict[str, Any] = {}
    for item in filter(None, options.split(",")):
        key, eq, value = item.partition("=")
        if not eq or key not in ("n", "size", "hashes", "seed", "fpp"):
            raise argparse.ArgumentTypeError(
                f"{text!r}: option {item!r} is not one of n=, size=, hashes=, seed=, fpp="
            )
        try:
            values[key] = float(value) if key == "fpp" else int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: {key}={value!r} is not a number") from None
    try:
        return TextFilter(column, kind, **values)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r}: {err}") from None


@contextmanager
def _progress(args: argparse.Namespace, err: IO[str]) -> Iterator[None]:
    """A progress bar on stderr over the files a build reads (when stderr is a terminal, or
    with --progress), then over those whose filters it builds from the values."""
    from parquet_bloom._index.build import reporting_progress

    tty = getattr(err, "isatty", lambda: False)()
    bar = Progress(0, bool(args.progress) or tty, err)

    def show(stage: str, done: int, total: int) -> None:
        bar.total = total
        bar.show(done, stage)

    try:
        with reporting_progress(show):
            yield
    finally:
        bar.close()


def _build(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    with _progress(args, err):
        return _build_now(args, out, err)


def _build_now(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    target = _where(args, writing=True)
    options = target.options
    if not args.column and not args.text:
        raise _IndexError("index build needs --column or --text (or both)")
    if target.kind == "iceberg":
        import parquet_bloom.iceberg as pbi

        report = pbi.build_index(
            target.handle, args.column, from_data=args.from_data, fpp=args.fpp, text=args.text
        )
    elif target.kind == "delta":
        from parquet_bloom import delta as pbd

        report = pbd.build_index(
            args.target,
            args.column,
            storage_options=options or None,
            from_data=args.from_data,
            fpp=args.fpp,
            text=args.text,
        )
    else:
        from parquet_bloom import index

        report = index.build_index(
            args.target,
            args.column,
            args.index,
            storage_options=options or None,
            from_data=args.from_data,
            fpp=args.fpp,
            text=args.text,
        )
    return _report(args, out, asdict(report), str(report))


def _refresh(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    with _progress(args, err):
        return _refresh_now(args, out, err)


def _refresh_now(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    target = _where(args, writing=True)
    options = target.options
    if target.kind == "iceberg":
        import parquet_bloom.iceberg as pbi

        report = pbi.refresh_index(target.handle, from_data=args.from_data, fpp=args.fpp)
    elif target.kind == "delta":
        from parquet_bloom import delta as pbd

        report = pbd.refresh_index(
            args.target, storage_options=options or None, from_data=args.from_data, fpp=args.fpp
        )
    else:
        from parquet_bloom import index

        report = index.refresh_index(
            args.target,
            args.index,
            storage_options=options or None,
            from_data=args.from_data,
            fpp=args.fpp,
        )
    text = str(report) if report.files else f"index {report.location}: no file to add"
    return _report(args, out, asdict(report), text)


def _compact(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    target = _where(args, writing=True)
    options = target.options
    retain = 3600.0 if args.retain_seconds is None else args.retain_seconds
    if target.kind != "iceberg":
        from parquet_bloom._index.maintain import check_retain

        try:
            check_retain(retain, args.no_concurrent_writers, flags=True)
        except ValueError as e:  # the user's choice: told before anything is read
            raise _IndexError(str(e)) from None
    if target.kind == "iceberg":
        import parquet_bloom.iceberg as pbi

        if args.retain_seconds is not None:
            raise _IndexError(
                "--retain-seconds is for index directories: an Iceberg table's old index "
                "files are removed with their snapshots (expiry, then orphan-file cleanup)"
            )
        report = pbi.compact_index(target.handle)
    elif target.kind == "delta":
        from parquet_bloom import delta as pbd

        report = pbd.compact_index(
            args.target,
            storage_options=options or None,
            retain_seconds=retain,
            no_concurrent_writers=args.no_concurrent_writers,
        )
    else:
        from parquet_bloom import index

        report = index.compact_index(
            args.index,
            source=args.target,
            storage_options=options or None,
            retain_seconds=retain,
            no_concurrent_writers=args.no_concurrent_writers,
        )
    return _report(args, out, asdict(report), str(report))


def _report(args: argparse.Namespace, out: IO[str], document: dict[str, Any], text: str) -> int:
    if args.json:
        _dump(document, out)
    else:
        out.write(text + "\n")
    return EXIT_OK


@contextmanager
def _open(args: argparse.Namespace, target: _Target) -> Iterator[Any]:
    """The index, opened (an Iceberg table's: the one its current snapshot uses)."""
    from parquet_bloom.index import BloomIndex

    if target.kind == "iceberg":
        from parquet_bloom._tables.iceberg_index import open_table_index

        assert target.table is not None
        snapshot = target.table.snapshot()
        with open_table_index(target.handle, snapshot, True, target.table.file_options) as t:
            assert t is not None
            yield t.index
        return
    if target.kind == "delta":
        where = f"{args.target.rstrip('/')}/_bloom_index"
        if not location.is_url(args.target):
            where = os.path.join(args.target, "_bloom_index")
        options = _fsspec_options(args.target, target.options)
    else:
        where, options = args.index, target.options or None
    with BloomIndex(where, storage_options=options) as idx:
        yield idx


def _inspect(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from parquet_bloom._index.stats import column_stats

    target = _where(args)
    with _open(args, target) as idx:
        columns = {c: column_stats(idx, c) for c in idx.columns}
        document = {
            "index": idx.location,
            "generation": idx.generation,
            "segments": len(idx.segments),
            "bytes": idx.num_bytes,
            "columns": {
                c: {
                    "row_groups": sum(s.row_groups for s in stats),
                    "expected_false_candidates": sum(s.expected_false for s in stats),
                    "classes": [asdict(s) for s in stats],
                }
                for c, stats in columns.items()
            },
            "text": {c: [spec.key for spec in idx.text_filters(c)] for c in idx.text_columns},
        }
    if args.json:
        _dump(document, out)
        return EXIT_OK
    lines = [
        f"index {document['index']}: {document['segments']} segment(s), "
        f"{document['bytes']:,} bytes, generation {document['generation']}"
    ]
    for column, stats in columns.items():
        summary = document["columns"][column]
        lines.append(
            f"  {column}: {summary['row_groups']} row groups; a lookup of an absent value "
            f"expects {summary['expected_false_candidates']:.2f} false candidates"
        )
        for s in stats:
            size = "no filter" if s.num_bytes is None else f"{s.num_bytes:,} B filters"
            detail = "" if s.num_bytes is None else f", {s.slice_bytes:,} B of slices, "
            detail += "" if s.num_bytes is None else f"fill {s.fill:.1%}"
            lines.append(
                f"    {size}: {s.row_groups} row groups{detail}, "
                f"{s.expected_false:.2f} false candidates"
            )
    for column, keys in document["text"].items():
        lines.append(f"  {column}: text filters {', '.join(keys)}")
    out.write("\n".join(lines) + "\n")
    return EXIT_OK


def _lookup(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    column, *texts = args.column
    asked = [(f, getattr(args, f)) for _, f, _ in _TEXT_MATCHES if getattr(args, f) is not None]
    if asked:
        if texts:
            raise _IndexError("a text match takes the column alone: --column C --token T ...")
        function, patterns = asked[0]
        return _lookup_text(args, column, function, patterns, out)
    if not texts:
        raise _IndexError("--column needs the column, then at least one value")
    target = _where(args)
    options = target.options
    with _open(args, target) as idx:
        name = _iceberg_column(target, column, idx) if target.kind == "iceberg" else column
        if name not in idx.columns:
            known = ", ".join(map(repr, idx.columns))
            raise _IndexError(f"the index has no column {column!r} (it has {known})")
        leaf = idx.column_type(name)
        try:
            values = [args.parse_literal(t, leaf) if leaf is not None else t for t in texts]
        except ValueError as e:
            raise _IndexError(str(e)) from None
        if target.kind == "iceberg":
            import parquet_bloom.iceberg as pbi

            found = pbi.lookup(target.handle, column, values, snapshot_id=target.table_snapshot)
        elif target.kind == "delta":
            from parquet_bloom._tables.delta_index import lookup_opened

            found = lookup_opened(args.target, column, values, idx, options or None)
        else:
            from parquet_bloom._index.live import lookup_files
            from parquet_bloom.index import dataset_files

            files = dataset_files(args.target, options or None)
            found = lookup_files(files, column, values, idx)
    document = {
        "column": column,
        "values": texts,
        "files": found.files,
        "from_index": found.from_index,
        "probed": found.probed,
        "gone": found.gone,
        "index_reads": found.index_reads,
        "index_bytes_read": found.index_bytes_read,
        "probe_reads": found.probe_reads,
        "probe_bytes_read": found.probe_bytes_read,
    }
    _print_found(args, document, found, out)
    return EXIT_OK if found.files else 1


def _print_found(
    args: argparse.Namespace, document: dict[str, Any], found: Any, out: IO[str]
) -> None:
    if args.json:
        _dump(document, out)
    else:
        for path, groups in found.files.items():
            where = (
                "the whole file" if groups == [-1] else "row groups " + ", ".join(map(str, groups))
            )
            out.write(f"{path}: {where}\n")
        out.write(str(found) + "\n")


def _lookup_text(
    args: argparse.Namespace, column: str, function: str, patterns: list[str], out: IO[str]
) -> int:
    """``index lookup --token/--substring/...``: the candidates of a text match."""
    from parquet_bloom._index.text_lookup import lookup_text_files

    target = _where(args)
    options = target.options
    try:
        if target.kind == "iceberg":
            import parquet_bloom.iceberg as pbi

            found = pbi.lookup_text(
                target.handle,
                column,
                patterns,
                function=function,
                snapshot_id=target.table_snapshot,
            )
        else:
            with _open(args, target) as idx:
                if target.kind == "delta":
                    from parquet_bloom._tables.delta_index import latest_files

                    files = latest_files(args.target, options or None)
                else:
                    from parquet_bloom.index import dataset_files

                    files = dataset_files(args.target, options or None)
                found = lookup_text_files(files, column, patterns, idx, function=function)
    except ValueError as e:
        raise _IndexError(str(e)) from None
    document = {
        "column": column,
        "function": function,
        "patterns": patterns,
        "files": found.files,
        "from_index": found.from_index,
        "unindexed": found.unindexed,
        "gone": found.gone,
        "index_reads": found.index_reads,
        "index_bytes_read": found.index_bytes_read,
    }
    _print_found(args, document, found, out)
    return EXIT_OK if found.files else 1

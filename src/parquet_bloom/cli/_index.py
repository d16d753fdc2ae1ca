"""The ``parquet-bloom index`` command: ``build``, ``refresh``, ``compact``, ``inspect`` and
``lookup`` of a Bloom index (docs/index.md, docs/cli.md#index).

TARGET is a Delta table (a path or URL with ``_delta_log/``: its index is
``<table>/_bloom_index/``, its files its snapshot's) or a dataset (a directory, prefix, glob or
file: its index where ``--index`` says). :mod:`parquet_bloom.cli` calls :func:`extend` with its
subcommands; the parsing of values and storage options is handed in, so that this module does
not import the command's.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from dataclasses import asdict
from typing import IO, Any

from parquet_bloom._format import SchemaLeaf
from parquet_bloom._io import location
from parquet_bloom.cli._options import add_limit_options, fpp
from parquet_bloom.cli._output import EXIT_BAD_INPUT, EXIT_OK, Run

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
        description="A Bloom index of a Delta table's or a dataset's files: their row groups' "
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
            help="a Delta table's path or URL (its index: TABLE/_bloom_index/), or a dataset: "
            "a directory, prefix, glob or file (its index: --index)",
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
            "a dataset, fsspec's (endpoint_url=...); repeatable",
        )
        add_limit_options(p)
        p.set_defaults(run=_guarded(run), parse_literal=parse_literal)
        return p

    def from_data(p: argparse.ArgumentParser) -> None:
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

    p = command("build", "Build the index from the filters in the files.", _build)
    p.add_argument(
        "--column", action="append", required=True, metavar="C", help="column (repeatable)"
    )
    from_data(p)
    p = command("refresh", "Add a segment for the files the index does not know.", _refresh)
    from_data(p)
    p = command("compact", "Merge the index's segments into one.", _compact)
    p.add_argument(
        "--retain-seconds",
        type=float,
        default=3600.0,
        metavar="S",
        help="remove segments no longer named once older than this (default 3600)",
    )
    command(
        "inspect",
        "Columns, size classes, row groups, bytes and the false candidates a lookup expects.",
        _inspect,
    )
    p = command(
        "lookup",
        "The files and row groups that may hold any of the values (exit 1 if none may).",
        _lookup,
    )
    p.usage = "parquet-bloom index lookup [options] TARGET --column C VALUE [VALUE ...]"
    p.add_argument(
        "--column",
        nargs="+",
        required=True,
        metavar=("C", "VALUE"),
        help="the column, then the values, read as the column's type",
    )


def _guarded(run: Run) -> Run:
    def guarded(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
        try:
            return run(args, out, err)
        except _IndexError as e:
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


def _where(args: argparse.Namespace) -> tuple[bool, dict[str, Any]]:
    """Whether TARGET is a Delta table, and the storage options given."""
    options = dict(args.storage_option)
    delta = _is_delta(args.target, options)
    if not delta and args.index is None:
        raise _IndexError(
            f"{args.target} is not a Delta table: name the dataset's index with --index "
            "LOCATION (a directory, or a file ending in .puffin)"
        )
    if delta and args.index is not None:
        raise _IndexError(
            f"{args.target} is a Delta table: its index is {args.target.rstrip('/')}/"
            "_bloom_index/; leave out --index"
        )
    return delta, options


def _dump(document: dict[str, Any], out: IO[str]) -> None:
    out.write(json.dumps(document, indent=2, default=str) + "\n")


# -- the subcommands -------------------------------------------------------------------------


def _build(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    delta, options = _where(args)
    if delta:
        from parquet_bloom import delta as pbd

        report = pbd.build_index(
            args.target,
            args.column,
            storage_options=options or None,
            from_data=args.from_data,
            fpp=args.fpp,
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
        )
    return _report(args, out, asdict(report), str(report))


def _refresh(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    delta, options = _where(args)
    if delta:
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
    delta, options = _where(args)
    if delta:
        from parquet_bloom import delta as pbd

        report = pbd.compact_index(
            args.target, storage_options=options or None, retain_seconds=args.retain_seconds
        )
    else:
        from parquet_bloom import index

        report = index.compact_index(
            args.index,
            source=args.target,
            storage_options=options or None,
            retain_seconds=args.retain_seconds,
        )
    return _report(args, out, asdict(report), str(report))


def _report(args: argparse.Namespace, out: IO[str], document: dict[str, Any], text: str) -> int:
    if args.json:
        _dump(document, out)
    else:
        out.write(text + "\n")
    return EXIT_OK


def _open(args: argparse.Namespace, delta: bool, options: dict[str, Any]) -> Any:
    from parquet_bloom.index import BloomIndex

    if delta:
        where = f"{args.target.rstrip('/')}/_bloom_index"
        if not location.is_url(args.target):
            where = os.path.join(args.target, "_bloom_index")
        return BloomIndex(where, storage_options=_fsspec_options(args.target, options))
    return BloomIndex(args.index, storage_options=options or None)


def _inspect(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from parquet_bloom._index.stats import column_stats

    delta, options = _where(args)
    with _open(args, delta, options) as idx:
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
    out.write("\n".join(lines) + "\n")
    return EXIT_OK


def _lookup(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    column, *texts = args.column
    if not texts:
        raise _IndexError("--column needs the column, then at least one value")
    delta, options = _where(args)
    with _open(args, delta, options) as idx:
        if column not in idx.columns:
            known = ", ".join(map(repr, idx.columns))
            raise _IndexError(f"the index has no column {column!r} (it has {known})")
        leaf = idx.column_type(column)
        try:
            values = [args.parse_literal(t, leaf) if leaf is not None else t for t in texts]
        except ValueError as e:
            raise _IndexError(str(e)) from None
        if delta:
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
    if args.json:
        _dump(document, out)
    else:
        for path, groups in found.files.items():
            where = (
                "the whole file" if groups == [-1] else "row groups " + ", ".join(map(str, groups))
            )
            out.write(f"{path}: {where}\n")
        out.write(str(found) + "\n")
    return EXIT_OK if found.files else 1

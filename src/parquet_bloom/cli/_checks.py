"""``parquet-bloom table check`` and ``parquet-bloom advise``: the checks that fail when filters
are missing, on a table's live files, and the sizing advice for a file or a table
(docs/cli.md#table-check, docs/cli.md#advise).

``table check`` is :func:`parquet_bloom.delta.check` / :func:`parquet_bloom.iceberg.check` on the
table :mod:`._table_open` opens, printed as ``check`` prints each file; exit 1 on a violation,
including a table in which no filter was checked (unless ``--allow-empty``). ``advise`` is
:func:`parquet_bloom.advise` on a file, files, or a table (a directory or ``--catalog``)."""

from __future__ import annotations

import argparse
import json
import os
from typing import IO, Any

from parquet_bloom._gate import EMPTY_KIND, empty_message
from parquet_bloom._io import location
from parquet_bloom.cli import _output as output
from parquet_bloom.cli._files import check_text
from parquet_bloom.cli._table_open import Table, TableError, heading, open_table

__all__ = ["add_advise", "run_advise", "run_table_check"]


def run_table_check(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    table = open_table(args)
    progress = output.progress_bar(args, 0, err)
    done = 0

    def step(report: Any) -> None:
        nonlocal done
        done += 1
        progress.show(done, os.path.basename(report.path))

    common: dict[str, Any] = {
        "require": args.require,
        "max_fpp": args.max_fpp,
        "allow_empty": args.allow_empty,
        "progress": step,
    }
    try:
        if table.format == "delta":
            import parquet_bloom.delta as pbd

            keys = args.decryption_config
            report = pbd.check(table.handle, args.column, decryption=keys, **common)
        else:
            if args.decryption_config is not None:
                raise TableError(
                    f"{args.table}: --decryption-config checks Delta tables of encrypted files "
                    "only (the Iceberg check takes no keys yet)"
                )
            import parquet_bloom.iceberg as pbi

            report = pbi.check(
                table.handle,
                args.column,
                snapshot_id=table.snapshot_id,
                storage_options=table.file_options or None,
                **common,
            )
    finally:
        progress.close()
    if args.json:
        document = report.to_dict() | {"table": table.name}
        if args.stats:
            document["stats"] = output.stats_dict(_costs(report, table))
        json.dump(document, out, indent=2)
        out.write("\n")
    else:
        out.write(_table_check_text(report, table) + "\n")
        if args.stats:
            out.write("\n" + output.stats_text(_costs(report, table)) + "\n")
    return output.EXIT_OK if report.ok else output.EXIT_FOUND_NOTHING


def _costs(report: Any, table: Table) -> list[output.Stats]:
    return [(table.display(f.path), f.requests, f.bytes_read) for f in report.files]


def _table_check_text(report: Any, table: Table) -> str:
    live = output.plural(len(report.files), "live file")
    lines = [f"{heading(table)}: {live}, {output.plural(report.filters_checked, 'filter')} checked"]
    lines += [check_text(f) for f in report.files]
    lines += [f"note: {n}" for n in report.notes]
    for v in report.violations:  # the table's own: said with the command's flag
        what = f"the table's {live}" if report.files else "the table (no live file)"
        message = empty_message(what, "pass --allow-empty") if v.kind == EMPTY_KIND else v
        lines.append(f"VIOLATION [{v.kind}] {table.name}: {message}")
    failed = len(report.all_violations)
    files = sum(not f.ok for f in report.files)
    lines.append(
        f"OK: {live}, {output.plural(report.filters_checked, 'filter')} checked, no violations"
        if report.ok
        else f"FAILED: {output.plural(failed, 'violation')}"
        + (f" in {files} of {live}" if files else "")
        + ("" if not report.violations else " (the table's)" if not files else " and the table")
    )
    return "\n".join(lines)


# -- advise ----------------------------------------------------------------------------------


def add_advise(sub: Any, command: Any, fpp: Any, count: Any) -> None:
    """The ``advise`` command, on the main parser's ``sub`` (``command`` makes a subcommand
    with the shared options)."""
    p = command(
        "advise",
        "What size the Bloom filters of columns should have, and what they cost.",
        run_advise,
    )
    p.add_argument(
        "source",
        nargs="+",
        metavar="FILE_OR_TABLE",
        help="Parquet files (paths or URLs; a directory, prefix or glob stands for the files "
        "under it); or one table: a Delta table's root, an Iceberg table's location, or with "
        "--catalog an Iceberg table's identifier",
    )
    p.add_argument(
        "--column", action="append", help="a column (repeatable; default: those with a filter)"
    )
    p.add_argument("--fpp", type=fpp, default=0.01, help="the target rate (default 0.01)")
    p.add_argument(
        "--exact-limit",
        type=count,
        metavar="N",
        help="count the NDV of chunks of up to N values exactly; estimate larger ones from "
        "their filter (default 8388608)",
    )
    p.add_argument("--catalog", metavar="NAME", help="the pyiceberg catalog of an Iceberg table")
    p.add_argument(
        "--format", choices=("delta", "iceberg"), help="FILE_OR_TABLE is a table of this format"
    )
    p.add_argument(
        "--progress", action="store_true", help="show progress on stderr even if not a TTY"
    )
    p.set_defaults(parser=p)


def run_advise(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    import parquet_bloom as pb
    from parquet_bloom._advise import EXACT_LIMIT

    source: Any
    options: Any = dict(args.storage_option) or None
    if _is_table(args):
        if len(args.source) != 1:
            raise output.UsageError("advise takes one table")
        args.table, args.storage_option = (
            args.source[0],
            [(k, str(v)) for k, v in args.storage_option],
        )
        table = open_table(args)
        source = table.handle
        options = (table.options or None) if table.format == "delta" else table.file_options
    else:
        source = [
            entry.name
            for arg in args.source
            for entry in location.list_files(
                arg, storage_options=options if location.is_url(arg) else None
            )
        ]
    progress = output.progress_bar(args, 0, err)

    def step(done: int, total: int) -> None:
        progress.total = total
        progress.show(done)

    try:
        advice = pb.advise(
            source,
            args.column,
            args.fpp,
            storage_options=options,
            exact_limit=EXACT_LIMIT if args.exact_limit is None else args.exact_limit,
            progress=step,
        )
    finally:
        progress.close()
    if args.json:
        json.dump(advice.to_dict(), out, indent=2)
        out.write("\n")
    else:
        out.write(str(advice) + "\n")
    return output.EXIT_OK


def _is_table(args: argparse.Namespace) -> bool:
    """FILE_OR_TABLE names a table: ``--catalog`` or ``--format`` say so, or it is one local
    directory with a Delta log or an Iceberg ``metadata/`` directory."""
    if args.catalog is not None or args.format is not None:
        return True
    if len(args.source) != 1 or location.is_url(args.source[0]):
        return False
    root = args.source[0]
    return os.path.isdir(os.path.join(root, "_delta_log")) or os.path.isdir(
        os.path.join(root, "metadata")
    )

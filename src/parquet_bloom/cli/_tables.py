"""The ``parquet-bloom table`` command: ``inspect``, ``prune``, ``add``, ``resize`` and
``remove`` on a whole Delta Lake or Iceberg table (docs/cli.md#table).

:mod:`parquet_bloom.cli` calls :func:`extend` with its subcommands once they are built. TABLE
is a Delta table's path or URL (it has ``_delta_log/``), an Iceberg table named in a catalog
(``--catalog NAME``, TABLE its identifier; pyiceberg's ``load_catalog`` configuration, read when
the command runs), or an Iceberg table's location or ``metadata.json``, opened read-only as a
pyiceberg ``StaticTable``. The work is :mod:`parquet_bloom.delta`'s and
:mod:`parquet_bloom.iceberg`'s; :mod:`._table_open` opens the table; this module types the
values, runs the rewrite's stages with a progress bar over files, and prints as the file
commands print: a table for people, ``--json``, ``--stats``, one-line errors, exit 0, 1 (prune:
nothing might match) or 2 (bad input, or files a rewrite did not commit).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
import warnings
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc

from parquet_bloom._io import location
from parquet_bloom._io.advice import what_to_do
from parquet_bloom._logical import hex_bytes
from parquet_bloom._reader import BloomFilterReader
from parquet_bloom._sizing import FLAVORS
from parquet_bloom._tables.jobs import JobOutcome, TableRewriteReport, run_jobs
from parquet_bloom.cli import _output as output
from parquet_bloom.cli._checks import run_table_check
from parquet_bloom.cli._flags import in_flags
from parquet_bloom.cli._options import (
    add_gate_options,
    add_limit_options,
    count,
    decryption_config,
    fpp,
    ndv,
)
from parquet_bloom.cli._table_open import (
    DataFile,
    Table,
    TableError,
    data_files,
    heading,
    open_table,
)

__all__ = ["extend"]


# Footers read at once by inspect: a few requests in flight hide a store's latency.
_MAX_WORKERS = 4
# What reading one file may raise: that file is reported and the others go on.
# The libraries whose own exceptions mean "this table, its store or the configuration is bad":
# the table libraries, pyiceberg's catalogs, and the object stores' clients under fsspec.
_TABLE_LIBRARIES = frozenset(
    {"deltalake", "pyiceberg", "sqlalchemy", "pydantic", "botocore", "aiobotocore", "aiohttp"}
    | {"google", "gcsfs", "azure", "adlfs", "fsspec", "s3fs"}
)


def extend(subcommands: Any, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``table`` command to ``subcommands`` (``parser``'s ``add_subparsers()``
    action); returns ``parser``."""
    table = subcommands.add_parser(
        "table",
        help="Inspect, prune, check, add, resize or remove the filters of a Delta or Iceberg "
        "table.",
        description="The Bloom filters of a whole Delta Lake or Iceberg table: inspect its data "
        "files, prune a scan, or add, resize or remove filters in one commit.",
    )
    commands = "{inspect,prune,check,add,resize,remove}"
    sub = table.add_subparsers(dest="table_command", required=True, metavar=commands)

    def command(name: str, help: str, run: output.Run) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
        p.add_argument(
            "table",
            metavar="TABLE",
            help="a Delta table's path or URL; an Iceberg table's location or metadata.json "
            "(read-only); or, with --catalog, an Iceberg table's identifier (ns.table)",
        )
        p.add_argument("--catalog", metavar="NAME", help="the pyiceberg catalog of TABLE")
        p.add_argument(
            "--format", choices=("delta", "iceberg"), help="the table's format (default: told)"
        )
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")
        p.add_argument(
            "--storage-option",
            action="append",
            type=_storage_option,
            default=[],
            metavar="KEY=VALUE",
            help="an option of the table library (repeatable): deltalake's storage options "
            "(AWS_ENDPOINT_URL=...) or Iceberg FileIO properties (s3.endpoint=...)",
        )
        p.add_argument("--stats", action="store_true", help="also print what each file cost")
        add_limit_options(p)
        p.add_argument(
            "--progress", action="store_true", help="show progress on stderr even if not a TTY"
        )
        p.set_defaults(run=_guarded(run, p))
        return p

    def at_version(p: argparse.ArgumentParser) -> None:
        p.add_argument("--version", type=count, metavar="N", help="the Delta table version")
        p.add_argument("--snapshot-id", type=int, metavar="N", help="the Iceberg snapshot")

    def reading_keys(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument(
            "--decryption-config",
            type=decryption_config,
            metavar="FILE",
            help=f"keys of encrypted data files, {what} (docs/cli.md#encrypted-files)",
        )

    def rewriting(p: argparse.ArgumentParser, sizing: bool = True) -> None:
        p.add_argument(
            "--files",
            nargs="+",
            metavar="F",
            help="only these data files, named as 'table inspect' names them",
        )
        p.add_argument(
            "--decryption-config",
            type=decryption_config,
            metavar="FILE",
            help="keys of encrypted data files, which stay encrypted with them "
            "(docs/cli.md#encrypted-files)",
        )
        if sizing:
            p.add_argument("--fpp", type=fpp, help="false-positive rate (default 0.01)")
            p.add_argument("--ndv", type=ndv, help="size for this many values")
            p.add_argument("--bytes", type=count, help="bitset size, a power of two")
            p.add_argument("--flavor", choices=FLAVORS, help="round sizes as this writer does")

    p = command("inspect", "Each data file's rows, size, row groups and filters.", _inspect)
    at_version(p)
    reading_keys(p, "to read their footers and filters with")
    p = command(
        "prune",
        "The data files and row groups that might hold rows with these values (exit 1 if "
        "none might).",
        _prune,
    )
    at_version(p)
    reading_keys(p, "to read their filters with")
    p.usage = (
        f"{output.PROG} table prune [options] TABLE --column C VALUE [VALUE ...] [--column ...]"
    )
    p.add_argument(
        "--column",
        nargs="+",
        action="append",
        required=True,
        metavar=("C", "VALUE"),
        help="a column, then values read as its type (repeatable: every column must match)",
    )
    p = command(
        "check",
        "Check the filters of the table's live files as 'check' checks a file (exit 1 on any "
        "violation, or if no filter was checked).",
        run_table_check,
    )
    at_version(p)
    reading_keys(p, "to read their filters with (a Delta table's)")
    p.add_argument("--column", action="append", help="check only this column (repeatable)")
    p.add_argument("--max-fpp", type=fpp, help="also flag filters whose rate exceeds this")
    add_gate_options(p)
    p = command("add", "Add (or replace) filters for columns, in one commit.", _add)
    p.add_argument("--column", action="append", required=True, help="column (repeatable)")
    rewriting(p)
    p = command("resize", "Rebuild filters (default: every existing one), in one commit.", _resize)
    p.add_argument("--column", action="append", help="column (repeatable)")
    rewriting(p)
    p = command("remove", "Remove the filters of columns, in one commit.", _remove)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--column", action="append", help="column (repeatable)")
    which.add_argument("--all", action="store_true", help="every filter")
    rewriting(p, sizing=False)
    return parser


# -- options and errors ----------------------------------------------------------------------


def _storage_option(text: str) -> tuple[str, str]:
    """``KEY=VALUE``, kept as strings: the table libraries take strings."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _from_table_library(e: Exception) -> bool:
    """Whether ``e`` is a table library's, or its store client's, own exception (deltalake's
    are defined in its compiled module, ``_internal``: told by class)."""
    if type(e).__module__.split(".")[0] in _TABLE_LIBRARIES:
        return True
    delta = sys.modules.get("deltalake.exceptions")
    return delta is not None and isinstance(e, delta.DeltaError)


def _guarded(run: output.Run, parser: argparse.ArgumentParser) -> output.Run:
    """``run`` with the table libraries' own exceptions reported as bad input (one line, exit
    2) and the warnings raised meanwhile printed one line each, after the output."""

    def guarded(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
        args.parser = parser
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return run(args, out, err)
            except Exception as e:
                if _from_table_library(e) and not isinstance(e, ValueError | OSError):
                    advice = what_to_do(e)
                    raise TableError(
                        f"{args.table}: {type(e).__name__}: {e}" + (f"; {advice}" if advice else "")
                    ) from e
                raise
            finally:
                seen = set()
                for w in caught:
                    message = in_flags(" ".join(str(w.message).split()))
                    if message not in seen:
                        seen.add(message)
                        err.write(f"{output.PROG}: warning: {message}\n")

    return guarded


# -- output helpers --------------------------------------------------------------------------


def _dump(document: dict[str, Any], out: IO[str]) -> None:
    json.dump(document, out, indent=2)
    out.write("\n")


def _error(err: IO[str], message: str) -> None:
    output.print_error(err, " ".join(message.split()))


def _stats(out: IO[str], table: Table, costs: Sequence[tuple[str, int, int]]) -> None:
    """The --stats table: each file's requests and bytes read, and the total."""
    shown = [(table.display(name), requests, n) for name, requests, n in costs]
    out.write("\n" + output.stats_text(shown) + "\n")


# -- inspect ---------------------------------------------------------------------------------


def _footer(file: DataFile, options: dict[str, Any], keys: Any = None) -> dict[str, Any]:
    """One data file's entry: rows, bytes, row groups, and per column the row groups with a
    filter and their bytes (``bloom_filter_length``, or for files that do not record it the
    bitsets' sizes, read); the requests and bytes that took; or the ``error``. ``keys``: the
    DecryptionKeys of encrypted files (a column whose key is missing shows no filter)."""
    entry: dict[str, Any] = {"path": file.key}
    try:
        if file.file_format != "PARQUET":
            raise ValueError(f"a {file.file_format} file, not Parquet")
        url = location.is_url(file.source)
        with BloomFilterReader(
            file.source,
            storage_options=options if url else None,
            size=file.size,
            decryption=keys,
        ) as reader:
            counts: Counter[str] = Counter()
            sizes: Counter[str] = Counter()
            unknown = set()  # columns with a filter whose length the footer does not give
            for chunk in reader.column_chunks:
                if chunk.bloom_filter_offset is not None:
                    counts[chunk.path] += 1
                    sizes[chunk.path] += chunk.bloom_filter_length or 0
                    if chunk.bloom_filter_length is None:
                        unknown.add(chunk.path)
            if unknown:
                found, _ = reader.filters_with_errors(columns=sorted(unknown))
                for (rg, column), f in found.items():
                    if reader.column_chunk(rg, column).bloom_filter_length is None:
                        sizes[column] += f.num_bytes
            return entry | {
                "num_rows": reader.metadata.num_rows,
                "num_bytes": file.size,
                "num_row_groups": reader.num_row_groups,
                "filters": {c: {"row_groups": counts[c], "num_bytes": sizes[c]} for c in counts},
                "requests": reader.requests,
                "bytes_read": reader.bytes_read,
            }
    except output.INPUT_ERRORS as e:
        message = " ".join(str(e).split()) or type(e).__name__
        return entry | {"error": message if file.key in message else f"{file.key}: {message}"}


def _inspect(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    table = open_table(args)
    files = data_files(table)
    progress = output.progress_bar(args, len(files), err)
    entries: list[dict[str, Any]] = []
    with ThreadPoolExecutor(_MAX_WORKERS, thread_name_prefix="table-inspect") as pool:
        progress.show(0, os.path.basename(files[0].key) if files else "")
        keys = args.decryption_config
        for entry in pool.map(lambda f: _footer(f, table.file_options, keys), files):
            entries.append(entry)
            progress.show(len(entries), os.path.basename(entry["path"]))
    progress.close()
    for entry in entries:
        if "error" in entry:
            _error(err, entry["error"])
    read = [e for e in entries if "error" not in e]
    columns: dict[str, dict[str, int]] = {}
    for entry in read:
        for column, f in entry["filters"].items():
            totals = columns.setdefault(column, {"files": 0, "row_groups": 0, "num_bytes": 0})
            totals["files"] += 1
            totals["row_groups"] += f["row_groups"]
            totals["num_bytes"] += f["num_bytes"]
    cost = {"files": len(read)} | {
        key: sum(e[key] for e in read) for key in ("requests", "bytes_read")
    }
    if not args.stats:
        for entry in read:
            del entry["requests"], entry["bytes_read"]
    if args.json:
        document: dict[str, Any] = {"table": table.name, "format": table.format}
        document |= {"version": table.version, "files": entries, "columns": columns}
        _dump(document | ({"stats": cost} if args.stats else {}), out)
    else:
        out.write(
            f"{heading(table)}: {len(files)} data files, "
            f"{sum(e['num_rows'] for e in read):,} rows, {sum(f.size for f in files):,} bytes\n"
        )
        rows = []
        for e in read:
            groups = e["num_row_groups"]
            filtered = [
                c if f["row_groups"] == groups else f"{c} ({f['row_groups']}/{groups} rg)"
                for c, f in e["filters"].items()
            ]
            filter_bytes = sum(f["num_bytes"] for f in e["filters"].values())
            cells = [table.display(e["path"]), f"{e['num_rows']:,}", f"{e['num_bytes']:,}"]
            shown = output.bytes_text(filter_bytes or None)
            rows.append([*cells, str(groups), ", ".join(filtered) or "-", shown])
        if rows:
            headers = ["file", "rows", "bytes", "row groups", "filters", "filter bytes"]
            out.write(output.table(headers, rows, right=(1, 2, 3, 5)) + "\n")
        if columns:
            all_groups = sum(e["num_row_groups"] for e in read)
            rows = [
                [
                    c,
                    f"{t['files']}/{len(read)}",
                    f"{t['row_groups']}/{all_groups}",
                    output.bytes_text(t["num_bytes"]),
                ]
                for c, t in columns.items()
            ]
            headers = ["column", "files", "row groups", "bytes"]
            out.write("\n" + output.table(headers, rows, right=(1, 2, 3)) + "\n")
        out.write(
            f"{sum(1 for e in read if e['filters'])} of {len(read)} files with Bloom filters, "
            f"{output.bytes_text(sum(t['num_bytes'] for t in columns.values()))} of filters\n"
        )
        if args.stats:
            _stats(out, table, [(e["path"], e["requests"], e["bytes_read"]) for e in read])
    return output.EXIT_BAD_INPUT if len(read) < len(entries) else output.EXIT_OK


# -- prune -----------------------------------------------------------------------------------


def _column_types(table: Table) -> dict[str, pa.DataType]:
    """The table's columns by name, and the fields of structs by dotted path."""
    if table.format == "iceberg":
        from pyiceberg.io.pyarrow import schema_to_pyarrow

        schema = schema_to_pyarrow(table.handle.schema(), include_field_ids=False)
    else:
        schema = pa.schema(table.handle.schema().to_arrow())
    types, fields = {}, list(schema)
    while fields:
        f = fields.pop(0)
        types[f.name] = f.type
        if pa.types.is_struct(f.type):
            fields += f.flatten()
    return types


def _value(text: str, type_: pa.DataType, column: str) -> Any:
    """A command-line value as the column's type reads it, as ``probe`` reads values for a
    file's column: integers, floats (a float32 column's nearest), ISO dates, times and
    timestamps (without an offset: UTC, for a column with a zone), decimals (at most the
    column's scale), UUIDs, strings, and bytes (0x-hex, or the text's UTF-8)."""
    try:
        if pa.types.is_string(type_) or pa.types.is_large_string(type_):
            return text
        if isinstance(type_, pa.BaseExtensionType) and type_.extension_name == "arrow.uuid":
            return uuid.UUID(text)
        if pa.types.is_nested(type_):
            raise ValueError("not a leaf column: name one of its fields")
        if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
            return hex_bytes(text) if text.startswith("0x") else text.encode()
        if pa.types.is_fixed_size_binary(type_):
            raw = hex_bytes(text) if text.startswith("0x") else text.encode()
            if len(raw) != type_.byte_width:
                raise ValueError(f"{len(raw)} bytes, not {type_.byte_width}")
            return raw
        if pa.types.is_time(type_):
            day = pa.scalar(f"1970-01-01T{text}").cast(pa.timestamp(type_.unit))
            return day.cast(type_).as_py()
        if pa.types.is_timestamp(type_) and type_.tz is not None:
            try:
                return pa.scalar(text).cast(type_).as_py()
            except pa.ArrowInvalid:  # no offset: the instant in UTC
                return pa.scalar(text).cast(pa.timestamp(type_.unit)).cast(type_).as_py()
        return pa.scalar(text).cast(type_).as_py()
    except (ValueError, pa.ArrowException) as e:
        message = " ".join(str(e).split())
        raise TableError(
            f"cannot read {text!r} as {type_} for column {column!r}: {message}"
        ) from None


def _delta_kept(result: Any) -> list[tuple[str, list[int] | None]]:
    """Each file a Delta prune left, as the log names it, with its row groups (None: all,
    or a file whose rows were read with its deletion vector applied)."""
    from urllib.parse import unquote

    import pyarrow.dataset as ds

    children = result.dataset.children if isinstance(result.dataset, ds.UnionDataset) else []
    groups: dict[str, list[int] | None] = {}
    for dataset in [result.dataset, *children]:
        if isinstance(dataset, ds.FileSystemDataset):
            for fragment in dataset.get_fragments():
                # The row groups it was made with, asked without reading its footer.
                _, (_, _, _, row_groups) = fragment.__reduce__()
                path = fragment.path.replace(os.sep, "/")
                groups[path] = None if row_groups is None else [int(rg) for rg in row_groups]
    kept = []
    for key in result.files:
        path = unquote(key)
        found = [g for p, g in groups.items() if p == path or p.endswith("/" + path)]
        kept.append((key, found[0] if found else None))
    return kept


def _prune(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    table = open_table(args)
    types = _column_types(table)
    conditions = []
    for column, *texts in args.column:
        if not texts:
            args.parser.error(f"--column {column} needs values after it")
        if column not in types:
            names = ", ".join(n for n in types if "." not in n)
            raise TableError(f"no column {column!r} in {table.name}: its columns are {names}")
        conditions.append((column, texts, [_value(t, types[column], column) for t in texts]))
    if table.format == "delta":
        import parquet_bloom.delta as pbd

        expression = None
        for column, _, values in conditions:
            term = pc.field(*column.split(".")) if "." in column else pc.field(column)
            condition = term.isin(pa.array(values, types[column]))
            expression = condition if expression is None else expression & condition
        delta = pbd.prune(table.handle, expression, decryption=args.decryption_config)
        kept, report = _delta_kept(delta), delta.report
        version: int | None = delta.version
    else:
        from pyiceberg import expressions as ice

        import parquet_bloom.iceberg as pbi

        make: Any = ice.In  # pydantic's signature hides In(term, literals)
        predicates = [make(column, values) for column, _, values in conditions]
        iceberg = pbi.prune(
            table.handle,
            predicates[0] if len(predicates) == 1 else ice.And(*predicates),
            snapshot_id=table.snapshot_id,
            storage_options=table.file_options,
            decryption=args.decryption_config,
        )
        kept = [(t.file.file_path, iceberg.row_groups[t.file.file_path]) for t in iceberg.tasks]
        report, version = iceberg.report, table.version
    bloom = asdict(report.bloom)
    per_file = bloom.pop("per_file")
    if args.json:
        counts = asdict(report)
        del counts["bloom"]
        document: dict[str, Any] = {"table": table.name, "format": table.format}
        document["version"] = version
        document |= {
            "columns": [{"column": c, "values": texts} for c, texts, _ in conditions],
            "files": [{"path": key, "row_groups": groups} for key, groups in kept],
            "report": counts | {"files_read": report.files_read, "bloom": bloom},
            "might_contain": bool(kept),
        }
        _dump(document | ({"stats": per_file} if args.stats else {}), out)
    else:
        described = " and ".join(f"{c} in ({', '.join(texts)})" for c, texts, _ in conditions)
        out.write(f"{heading(table)}: {described}\n")
        rows = [
            [table.display(key), "all" if groups is None else ", ".join(map(str, groups))]
            for key, groups in kept
        ]
        if rows:
            out.write(output.table(["file", "row groups"], rows) + "\n")
        out.write(f"{len(kept)} of {report.table_files} files might hold a match; {report}\n")
        if args.stats:
            _stats(out, table, [(f["path"], f["requests"], f["bytes_read"]) for f in per_file])
    return output.EXIT_OK if kept else output.EXIT_FOUND_NOTHING


# -- add, resize, remove ---------------------------------------------------------------------


def _add(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    return _rewrite(args, out, err, columns=args.column, **_sizing(args))


def _resize(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    # --column X rebuilds X's filters where files have them, and adds none (as the file-level
    # resize): a file without one is left as it is; no file with one is an error.
    kwargs: dict[str, Any] = {"columns": args.column or "existing", **_sizing(args)}
    if args.column:
        kwargs["existing_only"] = True
    return _rewrite(args, out, err, **kwargs)


def _remove(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    return _rewrite(args, out, err, columns=None, remove="all" if args.all else args.column)


def _sizing(args: argparse.Namespace) -> dict[str, Any]:
    if args.bytes is not None and (args.fpp is not None or args.ndv is not None):
        args.parser.error("--bytes sets the size itself; do not combine it with --fpp or --ndv")
    kwargs: dict[str, Any] = {"num_bytes": args.bytes, "flavor": args.flavor}
    if args.fpp is not None:
        kwargs["fpp"] = args.fpp
    if args.ndv is not None:
        kwargs["ndv"] = args.ndv
    return kwargs


def _chosen_files(table: Table, names: Sequence[str] | None) -> list[str] | None:
    """``--files`` as the table's metadata names them: an Iceberg file given by its path under
    the table's location becomes its URI."""
    if names is None or table.format == "delta":
        return None if names is None else list(names)
    root = table.root.rstrip("/")
    return [n if "://" in n or n.startswith("/") else f"{root}/{n}" for n in names]


def _rewrite(args: argparse.Namespace, out: IO[str], err: IO[str], **kwargs: Any) -> int:
    """Plan, rewrite each file (a progress bar over files), commit once; print the report."""
    table = open_table(args, writing=True)
    files = _chosen_files(table, args.files)
    if table.format == "delta":
        import parquet_bloom.delta as pbd

        options = table.options or None
        plan: Any = pbd.plan_rewrite(table.handle, files=files, **kwargs)
    else:
        import parquet_bloom.iceberg as pbi

        plan = pbi.plan_rewrite(table.handle, files=files, **kwargs)
    progress = output.progress_bar(args, len(plan.jobs), err)
    done = 0

    def step(outcome: JobOutcome) -> None:
        nonlocal done
        done += 1
        progress.show(done, os.path.basename(outcome.job.key))

    if plan.jobs:
        progress.show(0, os.path.basename(plan.jobs[0].key))
    try:
        outcomes = run_jobs(
            plan.jobs,
            plan.options,
            table.file_options or None,
            progress=step,
            decryption=args.decryption_config,
        )
    finally:
        progress.close()
    if table.format == "delta":
        report = pbd.commit_rewrite(
            plan, outcomes, storage_options=options, file_storage_options=table.file_options
        )
    else:
        report = pbi.commit_rewrite(
            table.handle,
            plan,
            outcomes,
            storage_options=table.file_options,
            decryption=args.decryption_config,
        )
    report.table = table.name  # as given, as the other commands name it
    document = _report_dict(report, args.stats)
    if args.json:
        _dump(document, out)
    else:
        out.write(_report_text(report, document, table) + "\n")
    missed: dict[str, list[Any]] = {"refused": report.refused, "failed": report.failed}
    missed["to retry"] = report.to_retry
    if any(missed.values()):
        parts = ", ".join(f"{len(items)} {label}" for label, items in missed.items() if items)
        committed = f"{'version' if table.format == 'delta' else 'snapshot'} {report.version}"
        _error(
            err,
            f"{report.table}: {sum(map(len, missed.values()))} of "
            f"{len(plan.jobs) + len(plan.refused)} files not rewritten ({parts}); "
            + (
                f"the others were committed in {committed}"
                if report.rewritten
                else "nothing was committed"
            ),
        )
        return output.EXIT_BAD_INPUT
    return output.EXIT_OK


_TRANSFER = ("bytes_downloaded", "bytes_uploaded", "bytes_copied")


def _report_dict(report: TableRewriteReport, stats: bool) -> dict[str, Any]:
    rewritten = []
    for outcome in report.rewritten:
        r = outcome.report
        assert r is not None  # committed: rewritten
        entry: dict[str, Any] = {"path": outcome.job.key, "new_path": outcome.job.new_key}
        entry["filters_written"] = [
            {"row_group": rg, "column": column, "num_bytes": n}
            for rg, column, n in r.filters_written
        ]
        entry |= {"filters_kept": r.filters_kept, "filters_removed": r.filters_removed}
        entry |= {"bytes_before": r.bytes_before, "bytes_after": outcome.size}
        rewritten.append(entry | ({k: getattr(r, k) for k in _TRANSFER} if stats else {}))
    document: dict[str, Any] = {
        "table": report.table,
        "format": report.format,
        "version": report.version,
        "attempts": report.attempts,
        "rewritten": rewritten,
        "filters_written": report.filters_written,
        "bytes_before": report.bytes_before,
        "bytes_after": report.bytes_after,
        "refused": [{"path": key, "reason": in_flags(why)} for key, why in report.refused],
        "failed": [{"path": key, "error": in_flags(error)} for key, error in report.failed],
        "to_retry": list(report.to_retry),
        "leftovers": list(report.leftovers),
        "unchanged": list(report.unchanged),
        "ok": not (report.refused or report.failed or report.to_retry),
    }
    if stats:
        totals = {k: sum(e[k] for e in rewritten) for k in _TRANSFER}
        document["stats"] = totals | {"files": len(rewritten)}
    return document


def _report_text(report: TableRewriteReport, document: dict[str, Any], table: Table) -> str:
    lines = [str(report)]
    rows = []
    for e in document["rewritten"]:
        written = e["filters_written"]
        cells = [table.display(e["path"]), str(len(written))]
        written_bytes = output.bytes_text(sum(f["num_bytes"] for f in written))
        cells += [written_bytes, str(e["filters_removed"])]
        rows.append([*cells, f"{e['bytes_before']:,}", f"{e['bytes_after']:,}"])
    if rows:
        headers = ["file", "filters", "bytes", "removed", "size before", "after"]
        lines.append(output.table(headers, rows, right=(1, 2, 3, 4, 5)))
    lines += [f"refused: {table.display(key)}: {in_flags(why)}" for key, why in report.refused]
    lines += [f"failed: {table.display(key)}: {in_flags(error)}" for key, error in report.failed]
    lines += [f"to retry: {table.display(key)}" for key in report.to_retry]
    lines += [f"left to delete: {path}" for path in report.leftovers]
    if "stats" in document and rows:
        rows = [
            [table.display(e["path"]), *(f"{e[k]:,}" for k in _TRANSFER)]
            for e in document["rewritten"]
        ]
        total = document["stats"]
        rows.append([f"total ({total['files']} files)", *(f"{total[k]:,}" for k in _TRANSFER)])
        headers = ["file", "downloaded", "uploaded", "copied"]
        lines.append("\n" + output.table(headers, rows, right=(1, 2, 3)))
    return "\n".join(lines)

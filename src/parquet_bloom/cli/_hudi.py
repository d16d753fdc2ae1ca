"""The command line's Hudi parts: ``inspect`` and ``check`` also show each base file's Hudi
record-key filter, and ``probe --hudi-key KEY...`` probes it.

:mod:`parquet_bloom.cli` calls :func:`extend` with its subcommands once they are built; this
module wraps the three commands' ``run`` functions, so the Parquet output is printed as before
and the Hudi part follows it: a table after the text (one row per file with a Hudi filter), or
a ``"hudi"`` entry in each file's JSON object. Files are named as the commands name them
(paths, URLs, directories, prefixes, globs; ``--storage-option`` for URLs).

``inspect`` and ``check`` list the files and read each footer once, for both parts: the
wrappers set ``args.report_hook``, which the Parquet commands call with each file's report
(:class:`~parquet_bloom._audit.FileReport`, :class:`~parquet_bloom._audit.CheckReport`, each
holding the footer it read) and the keyword arguments the file was opened with; the hook
returns the report, its cost including the Hudi part's own reads (``check`` reads the
``_hoodie_record_key`` column, through pyarrow given the footer already read), so that
``--stats`` counts them. ``probe --hudi-key`` lists the files and reads each footer once; a
file whose extension is one of Hudi's other base file formats (ORC, HFile, Lance) is not opened:
it has no Parquet footer, so no filter here to consult, and is kept for every key, saying so.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import struct
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import IO, TYPE_CHECKING, Any, TypeVar

from parquet_bloom import _audit as audit
from parquet_bloom._io import location
from parquet_bloom._io.source import ByteSource
from parquet_bloom.cli._files import take_files
from parquet_bloom.cli._output import (
    EXIT_BAD_INPUT,
    EXIT_FOUND_NOTHING,
    EXIT_OK,
    PROG,
    Run,
    one_line,
    stats_text,
    table,
)
from parquet_bloom.errors import BloomFilterError

if TYPE_CHECKING:
    from parquet_bloom.hudi import HudiBloomFilter, HudiCheckReport

__all__ = ["extend"]

Report = TypeVar("Report", audit.FileReport, audit.CheckReport)


def extend(subcommands: Any) -> None:
    """Hook the Hudi parts into the ``inspect``, ``check`` and ``probe`` subparsers of
    ``subcommands`` (the parser's ``add_subparsers()`` action)."""
    parsers: dict[str, argparse.ArgumentParser] = subcommands.choices
    for name, wrapper in (("inspect", _inspect), ("check", _check), ("probe", _probe)):
        parser = parsers[name]
        parser.set_defaults(run=partial(wrapper, parser.get_default("run")))
    probe = parsers["probe"]
    for action in probe._actions:
        if action.dest == "column":
            action.required = False  # --hudi-key instead
    probe.add_argument(
        "--hudi-key",
        nargs="+",
        metavar="KEY",
        help="instead of --column: whether each file's Hudi record-key filter (and key "
        "range) may hold these record keys",
    )


# -- shared --------------------------------------------------------------------------------------


def _hook(args: argparse.Namespace, seen: Callable[[Report, dict[str, Any]], Report]) -> None:
    """Have the Parquet command hand each file's report to ``seen`` (after any hook set
    before)."""
    before = getattr(args, "report_hook", None)

    def hook(report: Report, kwargs: dict[str, Any]) -> Report:
        return seen(report if before is None else before(report, kwargs), kwargs)

    args.report_hook = hook


def _hudi_filter(report: audit.FileReport | audit.CheckReport) -> HudiBloomFilter | None:
    """The Hudi filter of the footer the report read, or None. A footer whose bytes do not
    hold the filter's key has none, and is not decoded further. Raises BloomFilterError
    (located) for a filter that does not decode."""
    from parquet_bloom.hudi import FOOTER_KEY, LEGACY_FOOTER_KEY, filter_from_metadata

    if not any(key.encode() in report.footer for key in (FOOTER_KEY, LEGACY_FOOTER_KEY)):
        return None
    found = {k: v for k, v in report.key_value_metadata.items() if v is not None}
    return filter_from_metadata(found, source=report.path)


def _files(args: argparse.Namespace, err: IO[str]) -> tuple[list[tuple[str, Any]], int]:
    """The files the FILE arguments name, each with its storage options and listed size; an
    argument that lists nothing is reported on ``err``."""
    found, status = [], EXIT_OK
    for arg in args.files:
        options = _options(arg, args)
        try:
            entries = location.list_files(arg, storage_options=options)
        except (OSError, ValueError) as e:
            _error(err, arg, e)
            status = EXIT_BAD_INPUT
            continue
        found += [(e.name, {"storage_options": options, "size": e.size}) for e in entries]
    return found, status


def _options(name: str, args: argparse.Namespace) -> dict[str, Any] | None:
    return dict(args.storage_option) if location.is_url(name) and args.storage_option else None


def _error(err: IO[str], name: str, error: BaseException) -> str:
    """Report a file that cannot be read, in one line naming it once; returns the message."""
    message = one_line(error)
    err.write(f"{PROG}: error: {message if name in message else f'{name}: {message}'}\n")
    return message


def _number(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 1 or x == 0 else f"{x:.2g}"


def _percent(x: float) -> str:
    return "0%" if x == 0 else f"{x * 100:.2g}%"


def _rate(x: float) -> str:
    return "0" if x == 0 else f"{x:.2g}"


def _merge_json(
    buffer: io.StringIO, out: IO[str], extra: dict[str, dict[str, Any]], ok: bool | None = None
) -> None:
    """Add each file's Hudi entry to the JSON the command wrote into ``buffer``."""
    text = buffer.getvalue()
    if not text.strip():
        out.write(text)
        return
    document = json.loads(text)
    for entry in document.get("files", []):
        if entry.get("path") in extra and "error" not in entry:
            entry["hudi"] = extra[entry["path"]]
    if ok is False and "ok" in document:
        document["ok"] = False
    json.dump(document, out, indent=2)
    out.write("\n")


def _filter_row(path: str, d: dict[str, Any]) -> list[str]:
    return [
        path,
        d["type"],
        str(d["num_hashes"]),
        f"{d['vector_size']:,}",
        str(d["rows"]),
        _number(d["keys_added"]),
        _percent(d["fraction_set"]),
        _number(d["estimated_keys"]),
        _rate(d["fpp_at_estimate"]),
        "-" if d["min_record_key"] is None else f"{d['min_record_key']} .. {d['max_record_key']}",
    ]


_FILTER_HEADERS = ["file", "type", "hashes", "bits", "rows", "keys", "set", "est. keys"]
_FILTER_HEADERS += ["fpp@est", "key range"]


# -- inspect -------------------------------------------------------------------------------------


def _inspect(run: Run, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    described: dict[str, dict[str, Any]] = {}

    def seen(report: audit.FileReport, kwargs: dict[str, Any]) -> audit.FileReport:
        try:
            found = _hudi_filter(report)
        except BloomFilterError as e:
            described[report.path] = {"error": one_line(e)}
        else:
            if found is not None:
                described[report.path] = found.describe()
        return report

    _hook(args, seen)
    buffer = io.StringIO() if args.json else None
    status = run(args, buffer or out, err)
    if buffer is not None:
        _merge_json(buffer, out, described)
        return status
    rows = [_filter_row(n, d) for n, d in described.items() if "error" not in d]
    rows += [
        [n, f"unreadable: {d['error']}"] + [""] * 8 for n, d in described.items() if "error" in d
    ]
    if rows:
        out.write("\nHudi record-key filters (footer key-value metadata):\n")
        out.write(table(_FILTER_HEADERS, rows, right=(2, 3, 4, 5, 6, 7, 8), rule=False) + "\n")
    return status


# -- check ---------------------------------------------------------------------------------------


def _check(run: Run, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    reports: dict[str, dict[str, Any]] = {}
    lines: list[str] = []
    violations = False

    def seen(report: audit.CheckReport, kwargs: dict[str, Any]) -> audit.CheckReport:
        nonlocal violations
        checked = _check_file(report, kwargs.get("storage_options"))
        if checked is None:
            return report
        reports[report.path] = checked.to_dict()
        violations = violations or not checked.ok
        d = checked.filter
        if d is not None:
            # A filter checked, for the run's "no filter checked" rule (cli._files.run_check).
            args.other_filters_checked = getattr(args, "other_filters_checked", 0) + 1
            exact = "-" if checked.exact is None else ("yes" if checked.exact else "no")
            keys = "-" if checked.num_keys is None else f"{checked.num_keys:,}"
            lines.append(
                f"{report.path}: Hudi {d['type']} filter, {d['num_hashes']} hashes, "
                f"{d['vector_size']:,} bits x {d['rows']} rows; {keys} record keys, "
                f"{checked.missing:,} missing, rebuilt byte for byte: {exact}"
            )
        lines.extend(f"  note: {n}" for n in checked.notes)
        lines.extend(f"  VIOLATION [{v.split(':')[0]}] {v}" for v in checked.violations)
        return replace(
            report,
            requests=report.requests + checked.requests,
            bytes_read=report.bytes_read + checked.bytes_read,
        )

    _hook(args, seen)
    buffer = io.StringIO() if args.json else None
    status = run(args, buffer or out, err)
    if violations and status == EXIT_OK:
        status = EXIT_FOUND_NOTHING
    if buffer is not None:
        _merge_json(buffer, out, reports, ok=not violations)
    elif lines:
        out.write("\nHudi record-key filters:\n" + "\n".join(lines) + "\n")
    return status


def _check_file(
    report: audit.CheckReport, storage_options: Mapping[str, Any] | None
) -> HudiCheckReport | None:
    """What :func:`parquet_bloom.hudi.check_file` finds in the file of ``report`` (None: no
    Hudi filter), from the footer the Parquet check read: only the record keys are read
    (their cost in the result's ``requests`` and ``bytes_read``)."""
    from parquet_bloom._hudi.check import check_keys, unreadable_filter
    from parquet_bloom._hudi.table import RECORD_KEY_COLUMN
    from parquet_bloom.hudi import HudiCheckReport

    checked = HudiCheckReport(report.path)
    try:
        found = _hudi_filter(report)
    except BloomFilterError as e:
        checked.violations.append(unreadable_filter(e))
        with contextlib.suppress(ValueError):
            checked.num_rows = _arrow_metadata(report.footer).num_rows
        return checked
    if found is None:
        return None
    checked.filter = found.describe()
    try:
        keys = _read_keys(report, storage_options, checked)
    except (BloomFilterError, OSError, ValueError, TypeError) as e:
        message = f"keys: the record keys cannot be read: {one_line(e)}"
        checked.violations.append(message)
        return checked
    if keys is None:
        checked.notes.append(f"no {RECORD_KEY_COLUMN} column: the keys are not checked")
        return checked
    check_keys(found, keys, checked)
    return checked


def _read_keys(
    report: audit.CheckReport, storage_options: Mapping[str, Any] | None, into: HudiCheckReport
) -> list[Any] | None:
    """The file's record keys in order (None without the column), read with pyarrow given the
    footer already read (so that it reads only the column's chunks); the footer's row count and
    the reads' cost go ``into`` the report."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from parquet_bloom._hudi.table import RECORD_KEY_COLUMN

    metadata = _arrow_metadata(report.footer)
    into.num_rows = metadata.num_rows
    if RECORD_KEY_COLUMN not in metadata.schema.to_arrow_schema().names:
        return None
    with ByteSource(report.path, storage_options=storage_options, size=report.size) as source:
        try:
            parquet = pq.ParquetFile(source.arrow_file(), metadata=metadata)
            keys: list[Any] = parquet.read(columns=[RECORD_KEY_COLUMN]).column(0).to_pylist()
        except pa.ArrowException as e:
            raise ValueError(f"pyarrow cannot read {RECORD_KEY_COLUMN}: {e}") from e
        finally:
            into.requests += source.requests
            into.bytes_read += source.bytes_read
    return keys


def _arrow_metadata(footer: bytes) -> Any:
    """The footer as pyarrow's FileMetaData, parsed from the bytes already read (pyarrow reads a
    footer from a buffer's end: the footer, its length and the magic). ValueError if pyarrow
    cannot parse it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    trailer = struct.pack("<I", len(footer)) + b"PAR1"
    try:
        return pq.read_metadata(pa.BufferReader(footer + trailer))
    except pa.ArrowException as e:
        raise ValueError(f"pyarrow cannot read the footer: {one_line(e)}") from e


# -- probe ---------------------------------------------------------------------------------------


def _probe(run: Run, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    if args.hudi_key is None:
        if args.column is None:
            raise ValueError("probe needs --column C VALUE... or --hudi-key KEY...")
        return run(args, out, err)
    if args.column is not None:
        raise ValueError("probe takes --column or --hudi-key, not both")
    args.hudi_key = take_files(args, args.hudi_key, "--hudi-key")
    from parquet_bloom._hudi.footer import read_hudi_metadata
    from parquet_bloom._hudi.table import NOT_PARQUET_FORMATS, base_file_format
    from parquet_bloom.hudi import filter_from_metadata

    files, status = _files(args, err)
    results: list[dict[str, Any]] = []
    costs: list[tuple[str, int, int]] = []  # each file read: its requests and bytes
    not_parquet = 0
    for name, kwargs in files:
        kind = base_file_format(name)
        if kind in NOT_PARQUET_FORMATS:
            # A base file Hudi names as ORC, HFile or Lance: no Parquet footer, so no filter
            # here to consult; kept for every key, not opened.
            not_parquet += 1
            why = f"not Parquet ({kind} base file): no filter to consult"
            answers = [{"key": k, "result": "might contain", "reason": why} for k in args.hudi_key]
            results.append({"path": name, "keys": answers, "not_parquet": kind})
            continue
        try:
            footer = read_hudi_metadata(name, tail_size=getattr(args, "tail_size", None), **kwargs)
            found = filter_from_metadata(footer.metadata, source=footer.name)
        except Exception as e:
            results.append({"path": name, "error": _error(err, name, e)})
            status = EXIT_BAD_INPUT
            continue
        keys = []
        hits = found.might_contain_many(args.hudi_key) if found is not None else None
        for i, key in enumerate(args.hudi_key):
            if found is None:
                result, reason = "might contain", "no Hudi filter"
            elif not found.key_in_range(key):
                result = "excluded"
                reason = f"outside the key range [{found.min_record_key}, {found.max_record_key}]"
            elif hits is not None and hits[i]:
                result, reason = "might contain", "in the filter"
            else:
                result, reason = "excluded", "not in the filter"
            keys.append({"key": key, "result": result, "reason": reason})
        entry: dict[str, Any] = {"path": name, "keys": keys}
        costs.append((name, footer.requests, footer.bytes_read))
        if args.stats:
            entry |= {"requests": footer.requests, "bytes_read": footer.bytes_read}
        results.append(entry)
    outcomes = [k["result"] for r in results for k in r.get("keys", ())]
    might = "might contain" in outcomes
    if args.json:
        document: dict[str, Any] = {
            "files": results,
            "might_contain": might,
            "files_not_parquet": not_parquet,
        }
        if args.stats:
            document["stats"] = {
                "files": len(costs),
                "requests": sum(c[1] for c in costs),
                "bytes_read": sum(c[2] for c in costs),
            }
        json.dump(document, out, indent=2)
        out.write("\n")
    elif outcomes or status == EXIT_OK:
        rows = [
            [r["path"], k["key"], k["result"], k["reason"]]
            for r in results
            for k in r.get("keys", ())
        ]
        out.write(f"Hudi record keys ({', '.join(args.hudi_key)})\n")
        out.write(table(["file", "key", "result", "why"], rows, right=(), rule=False) + "\n")
        kept = outcomes.count("might contain")
        out.write(f"{kept} of {len(outcomes)} file-key pairs might hold the key\n")
        if not_parquet:
            out.write(
                f"{not_parquet} files are not Parquet (Hudi's ORC, HFile or Lance base files): "
                "kept for every key, not opened\n"
            )
        if args.stats:
            out.write("\n" + stats_text(costs) + "\n")
    if status != EXIT_OK:
        return status
    return EXIT_OK if might else EXIT_FOUND_NOTHING

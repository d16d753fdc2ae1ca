"""The ``parquet-bloom`` command: inspect, probe, check, add, resize and remove Bloom filters.

Every command prints a table for people by default and JSON with ``--json``. Bad input (a file
that is not Parquet, a truncated file, an unknown column, a value the column cannot hold) is one
line on stderr and exit status 2, never a traceback. With several files, a progress bar goes to
stderr when stderr is a terminal or ``--progress`` is given.

Exit status: 0 success; 1 ``probe`` found every row group excluded, or ``check`` found a
violation; 2 bad input or usage, or a file that could not be read (a store's error, a reset, a
timeout, an object gone mid-run: never a violation, whatever read failed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import IO, Any, NoReturn

import pyarrow as pa

from parquet_bloom import _audit as audit
from parquet_bloom import _cli_clickhouse, _cli_hudi, _cli_index, _cli_paimon, _cli_table
from parquet_bloom import _logical as logical
from parquet_bloom._cli_options import add_limit_options, count, fpp, storage_option
from parquet_bloom._cli_values import parse_literal
from parquet_bloom._io import limits, location
from parquet_bloom._reader import BloomFilterReader
from parquet_bloom._sizing import FLAVORS
from parquet_bloom.errors import BloomFilterError

__all__ = ["main"]

PROG = "parquet-bloom"

EXIT_OK = 0
EXIT_FOUND_NOTHING = 1  # probe: every row group excluded; check: violations
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT
EXIT_BROKEN_PIPE = 141  # the shell's status for a command killed by SIGPIPE (128 + 13)

# Errors that mean "this input is bad" (file, arguments, values), reported in one line. Anything
# else is a bug in this library, reported in one line too, but saying so.
_INPUT_ERRORS = (BloomFilterError, OSError, ValueError, TypeError, pa.ArrowException)

_PROGRESS_WIDTH = 24  # characters of bar
_PROGRESS_LINE = 79  # the whole line, so that it fits an 80-column terminal


class _UsageError(Exception):
    """Bad command-line usage, reported like argparse's own errors but on one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message} (see {self.prog} --help)")


# -- output helpers ------------------------------------------------------------------------------


def _size(n: int | None) -> str:
    return "-" if n is None else audit.format_bytes(n)


def _rate(x: float | None) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0%"
    if x < 1e-4:
        return f"{x:.1e}"
    return f"{x:.2%}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        out = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text or type(err).__name__


class Progress:
    """A progress bar on stderr, drawn over itself with carriage returns (no dependencies)."""

    def __init__(self, total: int, enabled: bool, stream: IO[str]) -> None:
        self.total = total
        self.enabled = enabled
        self.stream = stream
        self._width = 0

    def show(self, done: int, detail: str = "") -> None:
        if not self.enabled:
            return
        filled = _PROGRESS_WIDTH * done // max(self.total, 1)
        bar = "#" * filled + "-" * (_PROGRESS_WIDTH - filled)
        text = f"[{bar}] {done}/{self.total} "
        room = _PROGRESS_LINE - len(text)
        text += detail if len(detail) <= room else "..." + detail[len(detail) - room + 3 :]
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()


def _bad_file(
    path: str, error: Exception, progress: Progress, err: IO[str], results: list[dict[str, Any]]
) -> int:
    """Report a file that cannot be read: one line on stderr, and an entry in the JSON output.
    The line names the file, once (most of our errors name it already)."""
    progress.close()
    message = _one_line(error)
    _error(err, message if path in message else f"{path}: {message}")
    results.append({"path": path, "error": message})
    return EXIT_BAD_INPUT


def progress_bar(args: argparse.Namespace, total: int, stderr: IO[str]) -> Progress:
    tty = getattr(stderr, "isatty", lambda: False)()
    return Progress(total, bool(args.progress) or (tty and total > 1), stderr)


# -- files: paths, URLs, directories, globs -------------------------------------------------------


def decryption_config(path: str) -> Any:
    """The keys in a --decryption-config file (JSON; DecryptionKeys.from_config)."""
    from parquet_bloom._crypto.keys import DecryptionKeys

    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        return DecryptionKeys.from_config(config)
    except (OSError, ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(f"decryption config {path}: {e}") from None


def _options_for(name: str, args: argparse.Namespace) -> dict[str, Any] | None:
    """The storage options to open ``name`` with: those given, for a URL; none for a path."""
    return dict(args.storage_option) if location.is_url(name) and args.storage_option else None


Stats = tuple[str, int, int]  # a file, the requests and the bytes reading it took


def _each_file(
    args: argparse.Namespace,
    err: IO[str],
    results: list[dict[str, Any]],
    work: Callable[[str, dict[str, Any], int, Progress], tuple[int, int]],
) -> tuple[int, list[Stats]]:
    """Run ``work(name, open_kwargs, index, progress)`` on every file the FILE arguments name
    (each a path, a URL, a directory, a prefix ending in ``/`` or a glob, listed once;
    ``open_kwargs`` are ``storage_options`` and the ``size`` the listing found). ``work``
    returns the requests and bytes the file took. A file that cannot be read is reported and
    the others go on. A remote URL taken for one object that is a directory (a prefix) after
    all is listed then. Returns the exit status so far and each file's cost."""
    status = EXIT_OK
    queue: deque[location.Entry] = deque()
    for arg in args.files:
        try:
            queue.extend(location.list_files(arg, storage_options=_options_for(arg, args)))
        except BrokenPipeError:
            raise
        except _INPUT_ERRORS as e:
            status = _bad_file(arg, e, Progress(0, False, err), err, results)
    progress = progress_bar(args, len(queue), err)
    stats: list[Stats] = []
    index = 0
    while queue:
        entry = queue.popleft()
        name = entry.name
        progress.show(index, os.path.basename(name.rstrip("/")))
        options = _options_for(name, args)
        kwargs: dict[str, Any] = {"storage_options": options, "size": entry.size}
        kwargs["tail_size"] = getattr(args, "tail_size", None)
        if getattr(args, "decryption_config", None) is not None:
            kwargs["decryption"] = args.decryption_config
        try:
            requests, bytes_read = work(name, kwargs, index, progress)
        except BrokenPipeError:
            raise
        except _INPUT_ERRORS as e:
            if not entry.listed and isinstance(e, FileNotFoundError | IsADirectoryError):
                try:
                    inner = location.list_files(name + "/", storage_options=options)
                except _INPUT_ERRORS:  # not a prefix either: the first error says what
                    inner = []
                if inner:
                    queue.extendleft(reversed(inner))
                    progress.total += len(inner) - 1
                    continue
            status = _bad_file(name, e, progress, err, results)
        else:
            stats.append((name, requests, bytes_read))
        index += 1
    progress.close()
    return status, stats


def _stats_text(stats: Sequence[Stats]) -> str:
    rows = [[name, f"{requests:,}", f"{n:,}"] for name, requests, n in stats]
    totals = (sum(s[1] for s in stats), sum(s[2] for s in stats))
    rows.append([f"total ({len(stats)} files)", *(f"{n:,}" for n in totals)])
    return table(["file", "requests", "bytes read"], rows, right=(1, 2))


def _stats_dict(stats: Sequence[Stats]) -> dict[str, int]:
    return {
        "files": len(stats),
        "requests": sum(s[1] for s in stats),
        "bytes_read": sum(s[2] for s in stats),
    }


def _finish(
    args: argparse.Namespace,
    out: IO[str],
    document: dict[str, Any],
    stats: Sequence[Stats],
) -> None:
    """Print the JSON document, or with ``--stats`` the table of costs after the text output."""
    if args.json:
        if args.stats:
            document["stats"] = _stats_dict(stats)
        json.dump(document, out, indent=2)
        out.write("\n")
    elif args.stats:
        out.write("\n" + _stats_text(stats) + "\n")


# -- inspect -------------------------------------------------------------------------------------


def _inspect_text(report: audit.FileReport) -> str:
    head = (
        f"{report.path}: {report.num_row_groups} row groups, {report.num_rows:,} rows, "
        f"{len(report.filters)} of {len(report.chunks)} column chunks with a Bloom filter"
    )
    if report.created_by:
        head += f"\n  written by {report.created_by}"
    rows = []
    for c in report.chunks:
        if not c.present:
            unknown = c.error is not None  # an encrypted chunk whose key was not given
            why = f"unreadable: {c.error}" if unknown else ""
            rows.append([str(c.row_group), c.column, "?" if unknown else "no"] + ["-"] * 7 + [why])
            continue
        notes = list(c.warnings) + ([f"unreadable: {c.error}"] if c.error else [])
        rows.append(
            [
                str(c.row_group),
                c.column,
                "yes",
                str(c.offset),
                "-" if c.length is None else str(c.length),
                c.location or "-",
                _size(c.num_bytes),
                "-" if c.fraction_set is None else f"{c.fraction_set:.1%}",
                "-" if c.estimated_ndv is None else f"{c.estimated_ndv:,.0f}",
                _rate(c.fpp),
                "; ".join(notes),
            ]
        )
    headers = ["rg", "column", "filter", "offset", "length", "location", "bytes", "set"]
    headers += ["est. NDV", "fpp", "warnings"]
    return head + "\n" + table(headers, rows, right=(0, 3, 4, 6, 7, 8, 9))


def _cmd_inspect(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    results: list[dict[str, Any]] = []

    def work(name: str, kwargs: dict[str, Any], i: int, progress: Progress) -> tuple[int, int]:
        report = args.report_hook(audit.inspect_file(name, **kwargs), kwargs)
        if args.json:
            results.append(report.to_dict() | _cost(args, report.requests, report.bytes_read))
        else:
            progress.close()
            out.write(("\n" if i else "") + _inspect_text(report) + "\n")
        return report.requests, report.bytes_read

    status, stats = _each_file(args, err, results, work)
    _finish(args, out, {"files": results}, stats)
    return status


def _cost(args: argparse.Namespace, requests: int, bytes_read: int) -> dict[str, int]:
    """A file's cost for its JSON entry, with ``--stats``."""
    return {"requests": requests, "bytes_read": bytes_read} if args.stats else {}


# -- probe ---------------------------------------------------------------------------------------


def _probe_file(
    path: str, column: str, texts: Sequence[str], **kwargs: Any
) -> tuple[dict[str, Any], int, int]:
    """The probe's outcome for one file, and the requests and bytes it took."""
    with BloomFilterReader(path, **kwargs) as reader:
        leaves = {leaf.path: leaf for leaf in reader.schema_leaves}
        if column not in leaves:
            raise ValueError(f"no column {column!r} in {path}; its columns are {', '.join(leaves)}")
        leaf = leaves[column]
        probe = logical.literal_probe([parse_literal(t, leaf) for t in texts], leaf)
        row_groups = []
        for rg in range(reader.num_row_groups):
            try:
                f = reader.filter(rg, column)
            except BloomFilterError as e:
                result, reason = "might contain", f"filter unreadable: {e.reason}"
            else:
                if f is None:
                    result, reason = "might contain", "no filter"
                elif probe.always_keep:
                    result, reason = "might contain", "a value the filter cannot exclude"
                elif probe.keeps(f):
                    result, reason = "might contain", "in the filter"
                else:
                    result, reason = "excluded", "not in the filter"
            row_groups.append({"row_group": rg, "result": result, "reason": reason})
    outcome = {"path": path, "column": column, "values": list(texts), "row_groups": row_groups}
    return outcome, reader.requests, reader.bytes_read


def _cmd_probe(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    column, *texts = args.column
    if not texts:
        raise _UsageError(f"probe needs values after --column {column} (see {PROG} probe --help)")
    results: list[dict[str, Any]] = []

    def work(name: str, kwargs: dict[str, Any], i: int, progress: Progress) -> tuple[int, int]:
        outcome, requests, bytes_read = _probe_file(name, column, texts, **kwargs)
        results.append(outcome | _cost(args, requests, bytes_read))
        return requests, bytes_read

    status, stats = _each_file(args, err, results, work)
    outcomes = [rg["result"] for r in results for rg in r.get("row_groups", ())]
    might = "might contain" in outcomes
    if args.json:
        _finish(args, out, {"files": results, "might_contain": might}, stats)
    elif len(outcomes) or status == EXIT_OK:
        rows = [
            [r["path"], str(rg["row_group"]), rg["result"], rg["reason"]]
            for r in results
            for rg in r.get("row_groups", ())
        ]
        values = ", ".join(texts)
        out.write(f"{column} in ({values})\n")
        out.write(table(["file", "rg", "result", "why"], rows, right=(1,)) + "\n")
        kept = outcomes.count("might contain")
        out.write(f"{kept} of {len(outcomes)} row groups might contain a value\n")
        _finish(args, out, {}, stats)
    if status != EXIT_OK:
        return status
    return EXIT_OK if might else EXIT_FOUND_NOTHING


# -- check ---------------------------------------------------------------------------------------


def _check_text(report: audit.CheckReport) -> str:
    lines = [f"{report.path}:"]
    if report.chunks:
        rows = []
        for c in report.chunks:
            rows.append(
                [
                    str(c.row_group),
                    c.column,
                    _size(c.num_bytes),
                    "-" if c.num_values is None else f"{c.num_values:,}",
                    "-" if c.ndv is None else f"{c.ndv:,}",
                    "-" if c.missing is None else f"{c.missing:,}",
                    _rate(c.fpp),
                    _rate(c.fpp_at_ndv),
                    "-" if c.exact is None else ("yes" if c.exact else "no"),
                    ", ".join(c.matching_flavors) or "none",
                    "; ".join(c.notes),
                ]
            )
        headers = ["rg", "column", "bytes", "values", "NDV", "missing", "fpp", "fpp@NDV"]
        headers += ["exact", "sized like", "notes"]
        lines.append(table(headers, rows, right=(0, 2, 3, 4, 5, 6, 7)))
    lines.extend(f"  note: {n}" for n in report.notes)
    for v in report.violations:
        lines.append(f"  VIOLATION [{v.kind}] {v}")
    checked = len(report.chunks)
    if report.ok:
        lines.append(f"OK: {checked} filters checked, no violations")
    else:
        lines.append(f"FAILED: {len(report.violations)} violations ({checked} filters checked)")
    return "\n".join(lines)


def _cmd_check(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    results: list[dict[str, Any]] = []
    violations = False

    def work(name: str, kwargs: dict[str, Any], i: int, progress: Progress) -> tuple[int, int]:
        nonlocal violations
        base = os.path.basename(name)

        def chunk_progress(done: int, total: int) -> None:
            progress.show(i, f"{base} (filter {done}/{total})")

        report = args.report_hook(
            audit.check_file(name, args.column, args.max_fpp, progress=chunk_progress, **kwargs),
            kwargs,
        )
        violations = violations or not report.ok
        if args.json:
            results.append(report.to_dict() | _cost(args, report.requests, report.bytes_read))
        else:
            progress.close()
            out.write(("\n" if i else "") + _check_text(report) + "\n")
        return report.requests, report.bytes_read

    status, stats = _each_file(args, err, results, work)
    if violations and status == EXIT_OK:
        status = EXIT_FOUND_NOTHING
    ok = all(r.get("ok", False) for r in results)
    _finish(args, out, {"files": results, "ok": ok}, stats)
    return status


# -- add, resize, remove (parquet_bloom.writer) ----------------------------------------------------


def _sources(paths: Sequence[str], args: argparse.Namespace) -> list[str]:
    """The files SRC arguments name: each a path, a URL, a directory, a prefix or a glob."""
    return [
        entry.name
        for path in paths
        for entry in location.list_files(path, storage_options=_options_for(path, args))
    ]


def _rewrite_jobs(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """(SRC, DST) pairs from the paths: SRC DST; SRC... DIR; or, with --in-place, the files.
    A SRC that is a directory, a prefix or a glob stands for the files under it; a DIR on
    object storage ends in ``/``."""
    paths: list[str] = args.paths
    if args.in_place:
        return [(path, None) for path in _sources(paths, args)]
    if len(paths) < 2:
        raise _UsageError(
            "pass SRC and DST, several SRC and the directory to write them into, "
            "or --in-place and the files to rewrite"
        )
    *sources, target = paths
    sources = _sources(sources, args)
    remote_dir = location.is_url(target) and target.endswith("/")
    if remote_dir or os.path.isdir(target):
        names = [os.path.basename(os.path.normpath(source)) for source in sources]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise _UsageError(f"several files named {twice[0]!r} would be written to {target}")
        return [
            (src, target + name if remote_dir else os.path.join(target, name))
            for src, name in zip(sources, names, strict=True)
        ]
    if len(sources) > 1:
        raise _UsageError(
            f"{target} is not a directory: with several files, the last path is the directory "
            "to write them into (or pass --in-place)"
        )
    return [(sources[0], target)]


def _rewrite_text(report: Any) -> str:
    written = sum(n for _, _, n in report.filters_written)
    where = report.src if report.dst == report.src else f"{report.src} -> {report.dst}"
    text = (
        f"{where}: wrote {len(report.filters_written)} filters "
        f"({_size(written)}), removed {report.filters_removed}; "
        f"file {report.bytes_before:,} -> {report.bytes_after:,} bytes"
    )
    if report.filters_written:
        rows = [[str(rg), column, _size(n)] for rg, column, n in report.filters_written]
        text += "\n" + table(["rg", "column", "bytes"], rows, right=(0, 2))
    return text


def _rewrite_dict(report: Any) -> dict[str, Any]:
    return {
        "src": report.src,
        "dst": report.dst,
        "filters_written": [
            {"row_group": rg, "column": column, "num_bytes": n}
            for rg, column, n in report.filters_written
        ],
        "filters_kept": report.filters_kept,
        "filters_removed": report.filters_removed,
        "bytes_before": report.bytes_before,
        "bytes_after": report.bytes_after,
    }


def _transfer(report: Any) -> dict[str, int]:
    """What a rewrite moved: bytes read from src, sent for dst, copied by the store itself."""
    return {
        "bytes_downloaded": report.bytes_downloaded,
        "bytes_uploaded": report.bytes_uploaded,
        "bytes_copied": report.bytes_copied,
    }


def _transfer_text(reports: Sequence[Any]) -> str:
    rows = [[f"{r.src} -> {r.dst}", *(f"{n:,}" for n in _transfer(r).values())] for r in reports]
    totals = [sum(_transfer(r)[key] for r in reports) for key in _transfer(reports[0])]
    rows.append([f"total ({len(reports)} files)", *(f"{n:,}" for n in totals)])
    return table(["file", "downloaded", "uploaded", "copied"], rows, right=(1, 2, 3))


def _rewrite(args: argparse.Namespace, out: IO[str], err: IO[str], **kwargs: Any) -> int:
    """Rewrite each file in turn; a file that fails is reported and the others go on."""
    jobs = _rewrite_jobs(args)
    # Imported here so that inspect, probe and check never depend on the writer.
    from parquet_bloom._rewrite import rewrite_files

    results: list[dict[str, Any]] = []  # printed with --json
    reports: list[Any] = []  # for --stats
    finished = failed = 0

    def after(src: str) -> None:
        nonlocal finished
        finished += 1
        progress.show(finished, os.path.basename(src))

    def done(report: Any) -> None:
        reports.append(report)
        if args.json:
            results.append(_rewrite_dict(report) | (_transfer(report) if args.stats else {}))
        else:
            progress.close()
            out.write(("\n" if finished else "") + _rewrite_text(report) + "\n")
        after(report.src)

    def failure(src: str, error: Exception) -> None:
        nonlocal failed
        failed += 1
        _bad_file(src, error, progress, err, results)
        after(src)

    progress = progress_bar(args, len(jobs), err)
    progress.show(0, os.path.basename(jobs[0][0]))
    options = dict(args.storage_option) if args.storage_option else None
    rewrite_files(
        jobs,
        in_place=args.in_place,
        force=args.force,
        storage_options=options,
        ignore_table=args.ignore_table,
        progress=done,
        on_error=failure,
        **kwargs,
    )
    progress.close()
    if args.json:
        document: dict[str, Any] = {"files": results, "ok": not failed}
        if args.stats:
            document["stats"] = {
                key: sum(_transfer(r)[key] for r in reports)
                for key in ("bytes_downloaded", "bytes_uploaded", "bytes_copied")
            } | {"files": len(reports)}
        json.dump(document, out, indent=2)
        out.write("\n")
    elif args.stats and reports:
        out.write("\n" + _transfer_text(reports) + "\n")
    return EXIT_BAD_INPUT if failed else EXIT_OK


def _cmd_add(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    if args.bytes is not None and (args.fpp is not None or args.ndv is not None):
        raise _UsageError("--bytes sets the size itself; do not combine it with --fpp or --ndv")
    kwargs: dict[str, Any] = {"columns": args.column, "num_bytes": args.bytes}
    if args.fpp is not None:
        kwargs["fpp"] = args.fpp
    if args.ndv is not None:
        kwargs["ndv"] = args.ndv
    if args.flavor is not None:
        kwargs["flavor"] = args.flavor
    return _rewrite(args, out, err, **kwargs)


def _cmd_resize(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    kwargs: dict[str, Any] = {"columns": args.column or "existing"}
    if args.fpp is not None:
        kwargs["fpp"] = args.fpp
    return _rewrite(args, out, err, **kwargs)


def _cmd_remove(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    return _rewrite(args, out, err, columns=None, remove=args.column)


# -- the parser ----------------------------------------------------------------------------------


def _positive(text: str) -> int:
    if (value := count(text)) == 0:
        raise argparse.ArgumentTypeError("must be > 0, got 0")
    return value


def _version() -> str:
    """The version, and whether the compiled kernels do the hashing and inserting (what to ask
    first about a slow build, e.g. on a Spark executor that got the package zipped)."""
    from parquet_bloom import __version__, kernels

    implementation = "compiled kernels" if kernels.compiled is not None else "numpy alone"
    return f"{PROG} {__version__} ({implementation})"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Inspect, probe, check and rewrite the Bloom filters of Parquet files.",
        epilog="Exit status: 0 ok; 1 probe excluded everything / check found violations; "
        "2 bad input, or a file that could not be read.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def command(name: str, help: str, run: Callable[..., int]) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")
        p.add_argument(
            "--storage-option",
            action="append",
            type=storage_option,
            default=[],
            metavar="KEY=VALUE",
            help="an option of the URLs' filesystem (fsspec storage_options; repeatable), "
            "e.g. endpoint_url=http://localhost:9000 or anon=true: true/false and integers "
            "are converted, a JSON object, array or quoted string is decoded "
            "(config_kwargs='{\"max_pool_connections\": 50}'), anything else stays a string",
        )
        add_limit_options(p)
        stats = "also print what each file cost: requests and bytes read (a rewrite: bytes "
        stats += "downloaded, uploaded and copied by the store)"
        p.add_argument("--stats", action="store_true", help=stats)
        p.set_defaults(run=run)
        return p

    def reading(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "files",
            nargs="+",
            metavar="FILE",
            help="Parquet files: paths or URLs (s3://, gs://, abfs://, https://...); a "
            "directory, a prefix ending in / or a glob stands for the files under it",
        )
        p.add_argument(
            "--progress", action="store_true", help="show progress on stderr even if not a TTY"
        )
        tail = "the first read's size, from each file's end (default 1 MiB from a URL, 64 KiB)"
        p.add_argument("--tail-size", type=_positive, metavar="BYTES", help=tail)
        p.add_argument(
            "--decryption-config",
            type=decryption_config,
            metavar="FILE",
            help="keys of encrypted files: a JSON file with footer_key, column_keys, key_ids "
            "(keys as 'hex:...' or 'base64:...') and aad_prefix (docs/cli.md#encrypted-files)",
        )
        # inspect and check pass each file's report through this (an extension's: _cli_hudi)
        p.set_defaults(report_hook=lambda report, kwargs: report)

    p = command("inspect", "Describe every column chunk's Bloom filter.", _cmd_inspect)
    reading(p)

    p = command(
        "probe",
        "Which row groups might contain any of the values (exit 1 if none might).",
        _cmd_probe,
    )
    reading(p)
    p.add_argument(
        "--column",
        nargs="+",
        required=True,
        metavar=("C", "VALUE"),
        help="the column (dotted path), then the values, read as the column's type: integers, "
        "floats, ISO dates/times/timestamps, decimals, UUIDs, strings; 0x-hex for binary",
    )

    p = command(
        "check",
        "Check filters for writer conformance: header, offset, length, no missing values, "
        "size (exit 1 on any violation).",
        _cmd_check,
    )
    reading(p)
    p.add_argument("--column", action="append", help="check only this column (repeatable)")
    p.add_argument("--max-fpp", type=fpp, help="also flag filters whose rate exceeds this")

    def rewriting(p: argparse.ArgumentParser) -> None:
        p.usage = (
            f"{PROG} {p.prog.split()[-1]} [options] SRC DST | SRC [SRC ...] DIR | "
            "--in-place FILE [FILE ...]"
        )
        p.add_argument(
            "paths",
            nargs="+",
            metavar="PATH",
            help="SRC and DST; or files and the directory to write them into, each under its "
            "own name; or, with --in-place, the files to rewrite. Paths or URLs; a SRC "
            "directory, prefix or glob stands for the files under it; a DIR URL ends in /",
        )
        p.add_argument("--in-place", action="store_true", help="replace each file itself")
        p.add_argument(
            "--force", action="store_true", help="rewrite even if the footer does not round-trip"
        )
        p.add_argument("--ignore-table", action="store_true", help="replace a table's data file")
        p.add_argument(
            "--progress", action="store_true", help="show progress on stderr even if not a TTY"
        )

    p = command("add", "Add (or replace) filters for columns, sized per chunk.", _cmd_add)
    rewriting(p)
    p.add_argument("--column", action="append", required=True, help="column (repeatable)")
    p.add_argument("--fpp", type=fpp, help="false-positive rate (default 0.01)")
    p.add_argument("--ndv", type=count, help="size for this many values (default: the chunk's)")
    p.add_argument("--bytes", type=count, help="bitset size, a power of two from 32")
    p.add_argument("--flavor", choices=FLAVORS, help="round sizes as this writer does")

    p = command(
        "resize", "Rebuild filters at a new rate (default: every existing filter).", _cmd_resize
    )
    rewriting(p)
    p.add_argument("--column", action="append", help="column (repeatable)")
    p.add_argument("--fpp", type=fpp, help="false-positive rate (default 0.01)")

    p = command("remove", "Remove the filters of columns.", _cmd_remove)
    rewriting(p)
    p.add_argument("--column", action="append", required=True, help="column (repeatable)")
    _cli_hudi.extend(sub)
    _cli_index.extend(sub, storage_option=storage_option, parse_literal=parse_literal)
    _cli_clickhouse.extend(sub)
    return _cli_table.extend(sub, _cli_paimon.extend(sub, parser))


def _error(err: IO[str], message: str) -> None:
    err.write(f"{PROG}: error: {message}\n")
    err.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see the module docstring)."""
    out, err = sys.stdout, sys.stderr
    try:
        args = _parser().parse_args(argv)
        timeout, retries = getattr(args, "timeout", None), getattr(args, "retries", None)
        with limits.request_limits(timeout=timeout, retries=retries):
            status: int = args.run(args, out, err)
        out.flush()  # a closed pipe shows here, not at exit
        return status
    except SystemExit as e:  # --help and --version exit through argparse
        return e.code if isinstance(e.code, int) else EXIT_OK
    except BrokenPipeError:
        # The reader of our output went away (``| head``): end quietly with the shell's
        # status for it. stdout points at devnull so that the flush at exit does not fail
        # again. SIGPIPE is left ignored, as Python sets it: its default action would also
        # kill the process on a socket closed by a server.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    except _UsageError as e:
        _error(err, str(e))
    except _INPUT_ERRORS as e:
        _error(err, _one_line(e))
    except KeyboardInterrupt:
        _error(err, "interrupted")
        return EXIT_INTERRUPTED
    except Exception as e:  # a bug: still one line, but say so
        _error(err, f"internal error ({type(e).__name__}: {_one_line(e)}); please report it")
    return EXIT_BAD_INPUT

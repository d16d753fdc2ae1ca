"""The commands on files: ``inspect``, ``probe`` and ``check`` read each file the FILE arguments
name (a path, a URL, a directory, a prefix or a glob); ``add``, ``resize`` and ``remove``
rewrite files through :mod:`parquet_bloom._rewrite`. Each ``run_*`` takes the parsed arguments
(:mod:`._main` builds the parser) and returns the exit status."""

from __future__ import annotations

import argparse
import glob
import json
import os
from collections import deque
from collections.abc import Callable, Sequence
from typing import IO, Any

from parquet_bloom import _audit as audit
from parquet_bloom import _logical as logical
from parquet_bloom._gate import EMPTY_KIND, empty_message
from parquet_bloom._io import location
from parquet_bloom._prune.decryption import refused, refuses
from parquet_bloom._reader import BloomFilterReader
from parquet_bloom._tables.directories import list_live_files
from parquet_bloom.cli._output import (
    EXIT_BAD_INPUT,
    EXIT_FOUND_NOTHING,
    EXIT_OK,
    INPUT_ERRORS,
    PROG,
    Progress,
    Stats,
    UsageError,
    bad_file,
    bytes_text,
    finish,
    plural,
    progress_bar,
    rate_text,
    table,
)
from parquet_bloom.cli._values import parse_literal
from parquet_bloom.errors import BloomFilterError

__all__ = [
    "check_text",
    "run_add",
    "run_check",
    "run_inspect",
    "run_probe",
    "run_remove",
    "run_resize",
    "take_files",
]


def _options_for(name: str, args: argparse.Namespace) -> dict[str, Any] | None:
    """The storage options to open ``name`` with: those given, for a URL; none for a path."""
    return dict(args.storage_option) if location.is_url(name) and args.storage_option else None


def _listed(name: str, args: argparse.Namespace, err: IO[str]) -> list[location.Entry]:
    """The files ``name`` stands for: a table directory's live files, which it says on stderr
    and keeps in ``args.tables`` for the JSON output (docs/cli.md#table-directories)."""
    listing = list_live_files(name, storage_options=_options_for(name, args))
    for found in listing.tables:
        err.write(f"{PROG}: {found}\n")
        err.flush()
        args.tables = [*getattr(args, "tables", []), str(found)]
    return listing.files


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
    all is listed then. A directory that is (or holds) a Delta or Iceberg table stands for the
    table's live files, said on stderr (:func:`_listed`). Returns the exit status so far and
    each file's cost."""
    status = EXIT_OK
    queue: deque[location.Entry] = deque()
    for arg in args.files:
        try:
            queue.extend(_listed(arg, args, err))
        except BrokenPipeError:
            raise
        except INPUT_ERRORS as e:
            status = bad_file(arg, e, Progress(0, False, err), err, results)
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
        except INPUT_ERRORS as e:
            if not entry.listed and isinstance(e, FileNotFoundError | IsADirectoryError):
                try:
                    inner = _listed(name + "/", args, err)
                except INPUT_ERRORS:  # not a prefix either: the first error says what
                    inner = []
                if inner:
                    queue.extendleft(reversed(inner))
                    progress.total += len(inner) - 1
                    continue
            status = bad_file(name, e, progress, err, results)
        else:
            stats.append((name, requests, bytes_read))
        index += 1
    progress.close()
    return status, stats


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
                bytes_text(c.num_bytes),
                "-" if c.fraction_set is None else f"{c.fraction_set:.1%}",
                "-" if c.estimated_ndv is None else f"{c.estimated_ndv:,.0f}",
                rate_text(c.fpp),
                "; ".join(notes),
            ]
        )
    headers = ["rg", "column", "filter", "offset", "length", "location", "bytes", "set"]
    headers += ["est. NDV", "fpp", "warnings"]
    return head + "\n" + table(headers, rows, right=(0, 3, 4, 6, 7, 8, 9))


def run_inspect(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
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
    finish(args, out, {"files": results}, stats)
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
                if refuses(e):  # a key given that does not decrypt: an error, as prune stops
                    raise refused(e, path) from None
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


def take_files(args: argparse.Namespace, values: list[str], option: str) -> list[str]:
    """``probe OPTION VALUE... FILE...``: with no FILE before the option, the files are the
    trailing arguments of its values that name files (a path that exists, a URL, a glob that
    matches), at least one value kept; they become ``args.files`` and the values left are
    returned. Nothing that names a file there: a usage error saying where files go."""
    if args.files:
        return values
    split = len(values)
    while split > 1 and _names_files(values[split - 1]):
        split -= 1
    if split == len(values):
        raise UsageError(
            f"no FILE given: name the files before {option}, or end its values with -- "
            f"({PROG} probe {option} ... -- FILE ...)"
        )
    args.files = values[split:]
    return values[:split]


def _names_files(text: str) -> bool:
    if location.is_url(text) or os.path.lexists(text):
        return True
    return location.has_glob(text) and bool(glob.glob(text))


def run_probe(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    column, *texts = args.column
    if texts:
        texts = take_files(args, texts, "--column")
    if not texts:
        raise UsageError(f"probe needs values after --column {column} (see {PROG} probe --help)")
    results: list[dict[str, Any]] = []

    def work(name: str, kwargs: dict[str, Any], i: int, progress: Progress) -> tuple[int, int]:
        outcome, requests, bytes_read = _probe_file(name, column, texts, **kwargs)
        results.append(outcome | _cost(args, requests, bytes_read))
        return requests, bytes_read

    status, stats = _each_file(args, err, results, work)
    outcomes = [rg["result"] for r in results for rg in r.get("row_groups", ())]
    might = "might contain" in outcomes
    if args.json:
        finish(args, out, {"files": results, "might_contain": might}, stats)
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
        finish(args, out, {}, stats)
    if status != EXIT_OK:
        return status
    return EXIT_OK if might else EXIT_FOUND_NOTHING


# -- check ---------------------------------------------------------------------------------------


def check_text(report: audit.CheckReport) -> str:
    """One file's check as ``check`` prints it."""
    lines = [f"{report.path}:"]
    if report.chunks:
        rows = []
        for c in report.chunks:
            rows.append(
                [
                    str(c.row_group),
                    c.column,
                    bytes_text(c.num_bytes),
                    "-" if c.num_values is None else f"{c.num_values:,}",
                    "-" if c.ndv is None else f"{c.ndv:,}",
                    "-" if c.missing is None else f"{c.missing:,}",
                    rate_text(c.fpp),
                    rate_text(c.fpp_at_ndv),
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
    if report.ok and not checked:
        lines.append("no filter checked")
    elif report.ok:
        lines.append(f"OK: {plural(checked, 'filter')} checked, no violations")
    else:
        failed = plural(len(report.violations), "violation")
        lines.append(f"FAILED: {failed} ({plural(checked, 'filter')} checked)")
    return "\n".join(lines)


def run_check(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    results: list[dict[str, Any]] = []
    violations = False
    checked = 0  # filters checked, in every file
    files = 0  # files checked

    def work(name: str, kwargs: dict[str, Any], i: int, progress: Progress) -> tuple[int, int]:
        nonlocal violations, checked, files
        base = os.path.basename(name)

        def chunk_progress(done: int, total: int) -> None:
            progress.show(i, f"{base} (filter {done}/{total})")

        report = args.report_hook(
            audit.check_file(
                name,
                args.column,
                args.max_fpp,
                progress=chunk_progress,
                require=args.require,
                allow_empty=True,  # the run, not each file, must have checked something
                **kwargs,
            ),
            kwargs,
        )
        violations = violations or not report.ok
        checked += len(report.chunks)
        files += 1
        if args.json:
            results.append(report.to_dict() | _cost(args, report.requests, report.bytes_read))
        else:
            progress.close()
            out.write(("\n" if i else "") + check_text(report) + "\n")
        return report.requests, report.bytes_read

    status, stats = _each_file(args, err, results, work)
    # Filters an extension's hook checked (Hudi's record-key filters, cli._hudi) count too.
    checked += getattr(args, "other_filters_checked", 0)
    # A run that checked no filter at all fails (a CI gate must not pass on nothing), unless
    # --allow-empty; one whose files could not be read has failed already (status 2).
    empty = not checked and not violations and status == EXIT_OK and not args.allow_empty
    if violations and status == EXIT_OK:
        status = EXIT_FOUND_NOTHING
    ok = all(r.get("ok", False) for r in results) and not empty
    document: dict[str, Any] = {"files": results, "filters_checked": checked, "ok": ok}
    if empty:
        status = EXIT_FOUND_NOTHING
        what = f"the {files} file{'s' if files != 1 else ''} checked" if files else "the run"
        message = empty_message(what, "pass --allow-empty")
        document["violations"] = [{"kind": EMPTY_KIND, "message": message}]
        if not args.json:
            out.write(f"FAILED: {message}\n")
    finish(args, out, document, stats)
    return status


# -- add, resize, remove (parquet_bloom.writer) ----------------------------------------------------


def _sources(paths: Sequence[str], args: argparse.Namespace, err: IO[str]) -> list[str]:
    """The files SRC arguments name: each a path, a URL, a directory, a prefix or a glob (a
    table directory: its live files)."""
    return [entry.name for path in paths for entry in _listed(path, args, err)]


def _rewrite_jobs(args: argparse.Namespace, err: IO[str]) -> list[tuple[str, str | None]]:
    """(SRC, DST) pairs from the paths: SRC DST; SRC... DIR; or, with --in-place, the files.
    A SRC that is a directory, a prefix or a glob stands for the files under it; a DIR on
    object storage ends in ``/``. A local DIR named with a trailing ``/`` that does not exist
    yet is made (as ``rsync`` and ``aws s3 cp`` make theirs); one without is not guessed at."""
    paths: list[str] = args.paths
    if args.in_place:
        return [(path, None) for path in _sources(paths, args, err)]
    if len(paths) < 2:
        raise UsageError(
            "pass SRC and DST, several SRC and the directory to write them into, "
            "or --in-place and the files to rewrite"
        )
    *sources, target = paths
    sources = _sources(sources, args, err)
    remote_dir = location.is_url(target) and target.endswith("/")
    if not location.is_url(target) and target.endswith(("/", os.sep)):
        os.makedirs(target, exist_ok=True)  # named as a directory: made if it is not there
    if remote_dir or os.path.isdir(target):
        names = [os.path.basename(os.path.normpath(source)) for source in sources]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise UsageError(f"several files named {twice[0]!r} would be written to {target}")
        return [
            (src, target + name if remote_dir else os.path.join(target, name))
            for src, name in zip(sources, names, strict=True)
        ]
    if len(sources) > 1:
        if not location.is_url(target) and not os.path.lexists(target):
            raise UsageError(
                f"{target} does not exist: with several files, the last path is the directory "
                f"to write them into; name it {target}/ to have it made (or pass --in-place)"
            )
        raise UsageError(
            f"{target} is not a directory: with several files, the last path is the directory "
            "to write them into (or pass --in-place)"
        )
    return [(sources[0], target)]


def _rewrite_text(report: Any) -> str:
    written = sum(n for _, _, n in report.filters_written)
    where = report.src if report.dst == report.src else f"{report.src} -> {report.dst}"
    text = (
        f"{where}: wrote {len(report.filters_written)} filters "
        f"({bytes_text(written)}), removed {report.filters_removed}; "
        f"file {report.bytes_before:,} -> {report.bytes_after:,} bytes"
    )
    if report.filters_written:
        rows = [[str(rg), column, bytes_text(n)] for rg, column, n in report.filters_written]
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
    jobs = _rewrite_jobs(args, err)
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
        bad_file(src, error, progress, err, results)
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
        decryption=args.decryption_config,
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


def run_add(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    if args.bytes is not None and (args.fpp is not None or args.ndv is not None):
        raise UsageError("--bytes sets the size itself; do not combine it with --fpp or --ndv")
    kwargs: dict[str, Any] = {"columns": args.column, "num_bytes": args.bytes}
    if args.fpp is not None:
        kwargs["fpp"] = args.fpp
    if args.ndv is not None:
        kwargs["ndv"] = args.ndv
    if args.flavor is not None:
        kwargs["flavor"] = args.flavor
    return _rewrite(args, out, err, **kwargs)


def run_resize(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    # --column: the filters those columns have, none added (a column without is refused)
    kwargs: dict[str, Any] = {"columns": args.column or "existing", "existing_only": True}
    if args.fpp is not None:
        kwargs["fpp"] = args.fpp
    return _rewrite(args, out, err, **kwargs)


def run_remove(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    return _rewrite(args, out, err, columns=None, remove=args.column)

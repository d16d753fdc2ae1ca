"""The command line's Hudi parts: ``inspect`` and ``check`` also show each base file's Hudi
record-key filter, and ``probe --hudi-key KEY...`` probes it.

:mod:`parquet_bloom.cli` calls :func:`extend` with its subcommands once they are built; this
module wraps the three commands' ``run`` functions, so the Parquet output is printed as before
and the Hudi part follows it: a table after the text (one row per file with a Hudi filter), or
a ``"hudi"`` entry in each file's JSON object. Files are named as the commands name them
(paths, URLs, directories, prefixes, globs; ``--storage-option`` for URLs).
"""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Callable, Sequence
from functools import partial
from typing import IO, Any

from parquet_bloom._io import location

__all__ = ["extend"]

Run = Callable[[argparse.Namespace, IO[str], IO[str]], int]

_EXIT_OK, _EXIT_FOUND_NOTHING, _EXIT_BAD_INPUT = 0, 1, 2


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


def _files(args: argparse.Namespace, err: IO[str] | None) -> tuple[list[tuple[str, Any]], int]:
    """The files the FILE arguments name, each with its storage options and listed size; an
    argument that lists nothing is reported on ``err`` (None: the Parquet part of the
    command reported it already)."""
    found, status = [], _EXIT_OK
    for arg in args.files:
        options = _options(arg, args)
        try:
            entries = location.list_files(arg, storage_options=options)
        except (OSError, ValueError) as e:
            if err is not None:
                _error(err, arg, e)
            status = _EXIT_BAD_INPUT
            continue
        found += [(e.name, {"storage_options": options, "size": e.size}) for e in entries]
    return found, status


def _options(name: str, args: argparse.Namespace) -> dict[str, Any] | None:
    return dict(args.storage_option) if location.is_url(name) and args.storage_option else None


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _error(err: IO[str], name: str, error: BaseException) -> str:
    """Report a file that cannot be read, in one line naming it once; returns the message."""
    message = _one_line(error)
    err.write(f"parquet-bloom: error: {message if name in message else f'{name}: {message}'}\n")
    return message


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int]) -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(headers)] + [line(r) for r in rows])


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
        if entry.get("path") in extra:
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
    from parquet_bloom.hudi import read_bloom_filter

    buffer = io.StringIO() if args.json else None
    status = run(args, buffer or out, err)
    files, _ = _files(args, None)
    described: dict[str, dict[str, Any]] = {}
    for name, kwargs in files:
        try:
            found = read_bloom_filter(name, tail_size=getattr(args, "tail_size", None), **kwargs)
        except Exception as e:  # the Parquet part reported unreadable files
            described[name] = {"error": _one_line(e)}
            continue
        if found is not None:
            described[name] = found.describe()
    if buffer is not None:
        _merge_json(buffer, out, described)
        return status
    rows = [_filter_row(n, d) for n, d in described.items() if "error" not in d]
    rows += [
        [n, f"unreadable: {d['error']}"] + [""] * 8 for n, d in described.items() if "error" in d
    ]
    if rows:
        out.write("\nHudi record-key filters (footer key-value metadata):\n")
        out.write(_table(_FILTER_HEADERS, rows, right=(2, 3, 4, 5, 6, 7, 8)) + "\n")
    return status


# -- check ---------------------------------------------------------------------------------------


def _check(run: Run, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from parquet_bloom.hudi import check_file

    buffer = io.StringIO() if args.json else None
    status = run(args, buffer or out, err)
    files, _ = _files(args, None)
    reports: dict[str, dict[str, Any]] = {}
    lines, violations = [], False
    for name, kwargs in files:
        try:
            report = check_file(name, tail_size=getattr(args, "tail_size", None), **kwargs)
        except Exception as e:  # the Parquet part reported unreadable files
            reports[name] = {"error": _one_line(e)}
            continue
        if report.filter is None and report.ok:
            continue
        reports[name] = report.to_dict()
        violations = violations or not report.ok
        d = report.filter
        if d is not None:
            exact = "-" if report.exact is None else ("yes" if report.exact else "no")
            keys = "-" if report.num_keys is None else f"{report.num_keys:,}"
            lines.append(
                f"{name}: Hudi {d['type']} filter, {d['num_hashes']} hashes, "
                f"{d['vector_size']:,} bits x {d['rows']} rows; {keys} record keys, "
                f"{report.missing:,} missing, rebuilt byte for byte: {exact}"
            )
        lines += [f"  note: {n}" for n in report.notes]
        lines += [f"  VIOLATION [{v.split(':')[0]}] {v}" for v in report.violations]
    if violations and status == _EXIT_OK:
        status = _EXIT_FOUND_NOTHING
    if buffer is not None:
        _merge_json(buffer, out, reports, ok=not violations)
    elif lines:
        out.write("\nHudi record-key filters:\n" + "\n".join(lines) + "\n")
    return status


# -- probe ---------------------------------------------------------------------------------------


def _probe(run: Run, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    if args.hudi_key is None:
        if args.column is None:
            raise ValueError("probe needs --column C VALUE... or --hudi-key KEY...")
        return run(args, out, err)
    if args.column is not None:
        raise ValueError("probe takes --column or --hudi-key, not both")
    from parquet_bloom._hudi.footer import read_hudi_metadata
    from parquet_bloom.hudi import filter_from_metadata

    files, status = _files(args, err)
    results: list[dict[str, Any]] = []
    for name, kwargs in files:
        try:
            footer = read_hudi_metadata(name, tail_size=getattr(args, "tail_size", None), **kwargs)
            found = filter_from_metadata(footer.metadata, source=footer.name)
        except Exception as e:
            results.append({"path": name, "error": _error(err, name, e)})
            status = _EXIT_BAD_INPUT
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
        if args.stats:
            entry |= {"requests": footer.requests, "bytes_read": footer.bytes_read}
        results.append(entry)
    outcomes = [k["result"] for r in results for k in r.get("keys", ())]
    might = "might contain" in outcomes
    if args.json:
        json.dump({"files": results, "might_contain": might}, out, indent=2)
        out.write("\n")
    elif outcomes or status == _EXIT_OK:
        rows = [
            [r["path"], k["key"], k["result"], k["reason"]]
            for r in results
            for k in r.get("keys", ())
        ]
        out.write(f"Hudi record keys ({', '.join(args.hudi_key)})\n")
        out.write(_table(["file", "key", "result", "why"], rows, right=()) + "\n")
        kept = outcomes.count("might contain")
        out.write(f"{kept} of {len(outcomes)} file-key pairs might hold the key\n")
    if status != _EXIT_OK:
        return status
    return _EXIT_OK if might else _EXIT_FOUND_NOTHING

"""What the ``parquet-bloom`` commands print and how they end: the exit statuses, the errors
that are the user's input (one line, exit 2), tables, sizes and rates as text, the progress bar
on stderr, a file that could not be read, and the JSON document or the table of costs
(``--stats``) that ends a run over files. Every command family (:mod:`._files`,
:mod:`._tables`, ...) prints through here."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import IO, Any

import pyarrow as pa

from parquet_bloom import _audit as audit
from parquet_bloom.cli._flags import in_flags
from parquet_bloom.errors import BloomFilterError, MissingExtraError

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BROKEN_PIPE",
    "EXIT_FOUND_NOTHING",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "INPUT_ERRORS",
    "PROG",
    "Progress",
    "Run",
    "Stats",
    "UsageError",
    "bad_file",
    "bytes_text",
    "finish",
    "one_line",
    "plural",
    "print_error",
    "progress_bar",
    "rate_text",
    "stats_dict",
    "stats_text",
    "table",
]

PROG = "parquet-bloom"

EXIT_OK = 0
EXIT_FOUND_NOTHING = 1  # probe: every row group excluded; check: violations
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT
EXIT_BROKEN_PIPE = 141  # the shell's status for a command killed by SIGPIPE (128 + 13)

# Errors that mean "this input is bad" (file, arguments, values), reported in one line. Anything
# else is a bug in this library, reported in one line too, but saying so.
INPUT_ERRORS = (
    BloomFilterError,
    OSError,
    ValueError,
    TypeError,
    pa.ArrowException,
    MissingExtraError,  # the user's environment: the message names the pip line
)

_PROGRESS_WIDTH = 24  # characters of bar
_PROGRESS_LINE = 79  # the whole line, so that it fits an 80-column terminal


# A command: the parsed arguments, stdout and stderr in; the exit status out.
Run = Callable[[argparse.Namespace, IO[str], IO[str]], int]


class UsageError(Exception):
    """Bad command-line usage, reported like argparse's own errors but on one line."""


def bytes_text(n: int | None) -> str:
    return "-" if n is None else audit.format_bytes(n)


def rate_text(x: float | None) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0%"
    if x < 1e-4:
        return f"{x:.1e}"
    return f"{x:.2%}"


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: Sequence[int] = (),
    rule: bool = True,
) -> str:
    """Columns padded to their widest cell (those in ``right`` aligned right) under the
    headers; ``rule``: a line of dashes under the headers."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        out = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    dashes = [line(["-" * w for w in widths])] if rule else []
    return "\n".join([line(headers), *dashes, *map(line, rows)])


def one_line(err: BaseException) -> str:
    """An error's message on one line, in the command's words (:func:`._flags.in_flags`)."""
    text = " ".join(str(err).split())
    return in_flags(text) if text else type(err).__name__


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


def print_error(err: IO[str], message: str) -> None:
    err.write(f"{PROG}: error: {message}\n")
    err.flush()


def bad_file(
    path: str, error: Exception, progress: Progress, err: IO[str], results: list[dict[str, Any]]
) -> int:
    """Report a file that cannot be read: one line on stderr, and an entry in the JSON output.
    The line names the file, once (most of our errors name it already)."""
    progress.close()
    message = one_line(error)
    print_error(err, message if path in message else f"{path}: {message}")
    results.append({"path": path, "error": message})
    return EXIT_BAD_INPUT


def progress_bar(args: argparse.Namespace, total: int, stderr: IO[str]) -> Progress:
    tty = getattr(stderr, "isatty", lambda: False)()
    return Progress(total, bool(args.progress) or (tty and total > 1), stderr)


Stats = tuple[str, int, int]  # a file, the requests and the bytes reading it took


def stats_text(stats: Sequence[Stats]) -> str:
    rows = [[name, f"{requests:,}", f"{n:,}"] for name, requests, n in stats]
    totals = (sum(s[1] for s in stats), sum(s[2] for s in stats))
    rows.append([f"total ({len(stats)} files)", *(f"{n:,}" for n in totals)])
    return table(["file", "requests", "bytes read"], rows, right=(1, 2))


def stats_dict(stats: Sequence[Stats]) -> dict[str, int]:
    return {
        "files": len(stats),
        "requests": sum(s[1] for s in stats),
        "bytes_read": sum(s[2] for s in stats),
    }


def finish(
    args: argparse.Namespace,
    out: IO[str],
    document: dict[str, Any],
    stats: Sequence[Stats],
) -> None:
    """Print the JSON document (with ``tables``: the table directories read as their live
    files), or with ``--stats`` the table of costs after the text output."""
    if args.json:
        if getattr(args, "tables", None):
            document["tables"] = args.tables
        if args.stats:
            document["stats"] = stats_dict(stats)
        json.dump(document, out, indent=2)
        out.write("\n")
    elif args.stats:
        out.write("\n" + stats_text(stats) + "\n")


def plural(n: int, what: str) -> str:
    """``n`` and the noun, plural unless ``n`` is 1: "1 filter", "4 filters"."""
    return f"{n} {what}{'' if n == 1 else 's'}"

"""The entry point of the ``parquet-bloom`` command: the argument parser (the file commands'
arguments here, each other family's from its module's ``extend``), the dispatch to the
command's ``run``, and how a run ends: its status, or one line on stderr for a usage error,
bad input, an interrupt, a closed pipe or a bug (the package docstring lists the statuses)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from parquet_bloom._io import limits
from parquet_bloom._sizing import FLAVORS
from parquet_bloom.cli import _checks, _clickhouse, _files, _hudi, _index, _paimon, _tables
from parquet_bloom.cli._options import (
    add_gate_options,
    add_limit_options,
    count,
    decryption_config,
    fpp,
    ndv,
    positive,
    storage_option,
)
from parquet_bloom.cli._output import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    INPUT_ERRORS,
    PROG,
    UsageError,
    one_line,
    print_error,
)
from parquet_bloom.cli._values import parse_literal

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


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

    def keys(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument(
            "--decryption-config",
            type=decryption_config,
            metavar="FILE",
            help=f"keys {what}: a JSON file with footer_key, column_keys, key_ids (keys as "
            "'hex:...' or 'base64:...') and aad_prefix (docs/cli.md#encrypted-files)",
        )

    def reading(p: argparse.ArgumentParser, files: str = "+") -> None:
        p.add_argument(
            "files",
            nargs=files,  # probe: "*", its files may follow the values (_files.take_files)
            metavar="FILE",
            help="Parquet files: paths or URLs (s3://, gs://, abfs://, https://...); a "
            "directory, a prefix ending in / or a glob stands for the files under it",
        )
        p.add_argument(
            "--progress", action="store_true", help="show progress on stderr even if not a TTY"
        )
        tail = "the first read's size, from each file's end (default 1 MiB from a URL, 64 KiB)"
        p.add_argument("--tail-size", type=positive, metavar="BYTES", help=tail)
        keys(p, "of encrypted files")
        # inspect and check pass each file's report through this (an extension's: cli._hudi)
        p.set_defaults(report_hook=lambda report, kwargs: report)

    p = command("inspect", "Describe every column chunk's Bloom filter.", _files.run_inspect)
    reading(p)

    p = command(
        "probe",
        "Which row groups might contain any of the values (exit 1 if none might).",
        _files.run_probe,
    )
    reading(p, files="*")
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
        _files.run_check,
    )
    reading(p)
    p.add_argument("--column", action="append", help="check only this column (repeatable)")
    p.add_argument("--max-fpp", type=fpp, help="also flag filters whose rate exceeds this")
    add_gate_options(p)

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
        keys(p, "of encrypted files, which stay encrypted with them")
        p.add_argument(
            "--progress", action="store_true", help="show progress on stderr even if not a TTY"
        )

    p = command("add", "Add (or replace) filters for columns, sized per chunk.", _files.run_add)
    rewriting(p)
    p.add_argument("--column", action="append", required=True, help="column (repeatable)")
    p.add_argument("--fpp", type=fpp, help="false-positive rate (default 0.01)")
    p.add_argument("--ndv", type=ndv, help="size for this many values (default: the chunk's)")
    p.add_argument("--bytes", type=count, help="bitset size, a power of two from 32")
    p.add_argument("--flavor", choices=FLAVORS, help="round sizes as this writer does")

    p = command(
        "resize",
        "Rebuild filters at a new rate (default: every existing filter).",
        _files.run_resize,
    )
    rewriting(p)
    p.add_argument("--column", action="append", help="column (repeatable)")
    p.add_argument("--fpp", type=fpp, help="false-positive rate (default 0.01)")

    p = command("remove", "Remove the filters of columns.", _files.run_remove)
    rewriting(p)
    p.add_argument("--column", action="append", required=True, help="column (repeatable)")
    _checks.add_advise(sub, command, fpp, count)
    _hudi.extend(sub)
    _index.extend(sub, storage_option=storage_option, parse_literal=parse_literal)
    _clickhouse.extend(sub)
    return _tables.extend(sub, _paimon.extend(sub, parser))


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
    except UsageError as e:
        print_error(err, str(e))
    except INPUT_ERRORS as e:
        print_error(err, one_line(e))
    except KeyboardInterrupt:
        print_error(err, "interrupted")
        return EXIT_INTERRUPTED
    except Exception as e:  # a bug: still one line, but say so
        print_error(err, f"internal error ({type(e).__name__}: {one_line(e)}); please report it")
    return EXIT_BAD_INPUT

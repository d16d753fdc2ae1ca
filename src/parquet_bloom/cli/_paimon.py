"""Paimon's ``.index`` files in the command line: ``parquet-bloom inspect`` describes them.

:func:`extend` wraps the ``inspect`` subcommand: the FILE arguments ending in ``.index`` (a
data file's Paimon file index, ``<data file>.index``) are described here, every other
argument goes to the Parquet part as before. For each index file: its indexes in the head's
order, and for each bloom-filter index its hash count, bits, the fraction set, the items it
holds by estimate and the false-positive rate at that estimate.
"""

from __future__ import annotations

import argparse
import io
import json
from functools import partial
from typing import IO, Any

from parquet_bloom._io import location
from parquet_bloom.cli._output import EXIT_BAD_INPUT, EXIT_OK, PROG, Run, one_line, table

__all__ = ["describe", "extend"]

SUFFIX = ".index"


def extend(subcommands: Any, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Hook ``.index`` files into the ``inspect`` subparser of ``subcommands`` (``parser``'s
    ``add_subparsers()`` action); returns ``parser``."""
    inspect: argparse.ArgumentParser = subcommands.choices["inspect"]
    inspect.set_defaults(run=partial(_inspect, inspect.get_default("run")))
    return parser


def describe(path: str, storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One ``.index`` file as a dict: its size, head and indexes."""
    from parquet_bloom.paimon import BLOOM_FILTER, read_file_index

    index = read_file_index(path, storage_options=storage_options)
    entries = []
    for e in index.entries:
        d: dict[str, Any] = {
            "column": e.column,
            "index_type": e.index_type,
            "offset": None if e.empty else e.offset,
            "length": e.length,
            "empty": e.empty,
        }
        if e.index_type == BLOOM_FILTER and not e.empty:
            f = index.bloom_filter(e.column)
            assert f is not None
            estimate = f.estimate_items()
            d |= {
                "num_hashes": f.num_hashes,
                "num_bits": f.num_bits,
                "fraction_set": f.fraction_set(),
                "estimated_items": None if estimate == float("inf") else estimate,
                "fpp_at_estimate": f.fpp(),
            }
        entries.append(d)
    return {
        "path": index.source or path,
        "paimon_file_index": {
            "size": index.size,
            "version": index.head.version,
            "head_length": index.head.head_length,
            "indexes": entries,
        },
    }


def _text(d: dict[str, Any]) -> str:
    info = d["paimon_file_index"]
    head = (
        f"{d['path']}: Paimon file index (version {info['version']}), {info['size']:,} bytes, "
        f"head {info['head_length']} bytes, {len(info['indexes'])} indexes"
    )
    rows = []
    for e in info["indexes"]:
        bloom = "num_hashes" in e
        estimate = e.get("estimated_items")
        rows.append(
            [
                e["column"],
                e["index_type"],
                "empty" if e["empty"] else f"{e['offset']:,}",
                f"{e['length']:,}",
                str(e["num_hashes"]) if bloom else "-",
                f"{e['num_bits']:,}" if bloom else "-",
                f"{e['fraction_set']:.1%}" if bloom else "-",
                ("all bits set" if estimate is None else f"{estimate:,.0f}") if bloom else "-",
                f"{e['fpp_at_estimate']:.2g}" if bloom else "-",
            ]
        )
    headers = ["column", "index", "offset", "length", "hashes", "bits", "set", "est. items"]
    headers += ["fpp@est"]
    return head + "\n" + table(headers, rows, right=(2, 3, 4, 5, 6, 7, 8), rule=False)


def _inspect(run: Run, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    names = [f for f in args.files if str(f).rstrip("/").endswith(SUFFIX)]
    if not names:
        return run(args, out, err)
    rest = [f for f in args.files if f not in names]
    status, document = EXIT_OK, None
    if rest:
        buffer = io.StringIO()
        status = run(argparse.Namespace(**(vars(args) | {"files": rest})), buffer, err)
        if args.json and buffer.getvalue().strip():
            document = json.loads(buffer.getvalue())
        else:
            out.write(buffer.getvalue())
    described = []
    for i, name in enumerate(names):
        options = None
        if location.is_url(name) and getattr(args, "storage_option", None):
            options = dict(args.storage_option)
        try:
            d = describe(name, options)
        except (OSError, ValueError) as e:
            message = one_line(e)
            where = message if name in message else f"{name}: {message}"
            err.write(f"{PROG}: error: {where}\n")
            status = EXIT_BAD_INPUT
            continue
        described.append(d)
        if not args.json:
            out.write(("\n" if i or rest else "") + _text(d) + "\n")
    if args.json:
        document = document or {"files": []}
        document["files"] = document.get("files", []) + described
        json.dump(document, out, indent=2)
        out.write("\n")
    return status

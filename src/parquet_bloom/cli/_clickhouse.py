"""ClickHouse parts in the command line: ``inspect``, ``check`` and ``probe`` take a MergeTree
part directory (one holding ``checksums.txt`` and ``count.txt``) among their FILE arguments.

:func:`extend` wraps the three subcommands: part directories are handled here, every other
argument goes to the Parquet commands as before. The index definitions come from
``--table-sql FILE`` (the table's CREATE/ATTACH statement) or from the ClickHouse data directory
the part lies in.

- ``inspect PART``: each Bloom filter index (bloom_filter, tokenbf_v1, ngrambf_v1): its
  expression, granularity, granules, bytes on disk and of filters, the fraction of bits set,
  the distinct values (or tokens) estimated from it and the false-positive rate at that fill.
- ``check PART``: each bloom_filter granule against ClickHouse's sizing
  (``calculationBestPractices``: ``bits_per_row * N`` bits for the N distinct values it records),
  and its false-positive rate at its fill against the rate asked; ``--max-fpp`` also bounds
  every token and n-gram granule. Exit 1 on any violation.
- ``probe PART --index NAME VALUE...``: the granules ClickHouse would read for ``column =
  VALUE`` (``has`` for an array column; ``--function`` for another function, such as
  ``hasToken`` or ``like``), per value. Exit 1 if no granule may match.
"""

from __future__ import annotations

import argparse
import io
import json
import os
from functools import partial
from typing import IO, TYPE_CHECKING, Any

from parquet_bloom.cli._output import EXIT_BAD_INPUT, EXIT_FOUND_NOTHING, EXIT_OK, Run
from parquet_bloom.errors import BloomFilterError

if TYPE_CHECKING:
    from parquet_bloom.clickhouse import Index, Part

__all__ = ["describe", "extend", "is_part_dir"]

# check: a bloom_filter granule whose false-positive rate at its fill is over the rate asked by
# more than this factor is flagged (small granules scatter around the rate asked).
FPP_TOLERANCE = 2.0
# check: a granule whose filter holds, by its fill, more than this many times its recorded N
# (plus a small allowance) was filled from more values than it was sized for.
NDV_TOLERANCE = 2.0


def is_part_dir(name: str) -> bool:
    """Whether ``name`` is a local MergeTree part directory."""
    path = str(name)
    return os.path.isdir(path) and all(
        os.path.isfile(os.path.join(path, f)) for f in ("checksums.txt", "count.txt")
    )


def extend(subcommands: Any) -> None:
    """Hook part directories into the ``inspect``, ``check`` and ``probe`` subparsers."""
    parsers: dict[str, argparse.ArgumentParser] = subcommands.choices
    for name, handler in (("inspect", _inspect), ("check", _check), ("probe", _probe)):
        parser = parsers[name]
        parser.set_defaults(run=partial(_dispatch, handler, parser.get_default("run")))
        parser.add_argument(
            "--table-sql",
            metavar="FILE",
            help="ClickHouse parts: the table's CREATE/ATTACH TABLE statement (default: found in "
            "the ClickHouse data directory the part lies in)",
        )
    probe = parsers["probe"]
    for action in probe._actions:
        if action.dest == "column":
            action.required = False  # --index instead
    probe.add_argument(
        "--index",
        nargs="+",
        metavar=("NAME", "VALUE"),
        help="ClickHouse parts: the skip index, then the values: which granules ClickHouse "
        "would read for column = VALUE (has() for an array column)",
    )
    probe.add_argument(
        "--function",
        help="ClickHouse parts: the function to decide instead of equals/has (hasToken, like, "
        "startsWith, endsWith, ...; in, hasAny, hasAll, multiSearchAny take all the values "
        "as one set)",
    )


def _open(name: str, args: argparse.Namespace) -> Part:
    from parquet_bloom._clickhouse.part import MAX_TEXT_FILE, read_whole
    from parquet_bloom.clickhouse import open_part

    sql = None
    if getattr(args, "table_sql", None):
        sql = read_whole(args.table_sql, None, MAX_TEXT_FILE).decode("utf-8")
    return open_part(name, sql)


def _index_info(idx: Index) -> dict[str, Any]:
    flat = [f for g in idx.filters for f in g]
    fills = [f.fill() for f in flat]
    ndvs = [f.estimate_ndv() for f in flat]
    fpps = [f.fpp() for f in flat]
    info: dict[str, Any] = {
        "index": idx.name,
        "type": idx.type,
        "expression": idx.definition.expression,
        "arguments": list(idx.definition.arguments),
        "granularity": idx.definition.granularity,
        "granules": len(idx.filters),
        "bytes_on_disk": idx.num_bytes,
        "filter_bytes": sum(f.num_bytes for f in flat),
        "num_hashes": flat[0].num_hashes if flat else None,
        "fill_mean": sum(fills) / len(fills) if fills else None,
        "fill_max": max(fills) if fills else None,
        "estimated_ndv_mean": (
            sum(n for n in ndvs if n != float("inf")) / len(ndvs) if ndvs else None
        ),
        "fpp_at_fill_max": max(fpps) if fpps else None,
    }
    if idx.fpp_asked is not None:
        info |= {"fpp_asked": idx.fpp_asked, "bits_per_row": idx.bits_per_row}
    return info


def describe(part: Part) -> dict[str, Any]:
    """A part's Bloom filter indexes as a dict (``inspect --json``)."""
    return {
        "path": part.path,
        "clickhouse_part": {
            "name": part.name,
            "rows": part.rows,
            "kind": "compact" if part.compact else "wide",
            "data_granules": len(part.data_granule_rows),
            "indexes": [_index_info(i) for i in part.indexes.values()],
            "not_read": dict(part.skipped),
        },
    }


def _text_inspect(d: dict[str, Any]) -> str:
    p = d["clickhouse_part"]
    lines = [
        f"{d['path']}: ClickHouse {p['kind']} part {p['name']}, {p['rows']:,} rows, "
        f"{p['data_granules']} granules, {len(p['indexes'])} Bloom filter indexes"
    ]
    for i in p["indexes"]:
        args = ", ".join(str(a) for a in i["arguments"])
        lines.append(
            f"  {i['index']}: {i['type']}({args}) on {i['expression']}, GRANULARITY "
            f"{i['granularity']}: {i['granules']} granules, {i['bytes_on_disk']:,} bytes on "
            f"disk, {i['filter_bytes']:,} bytes of filters, {i['num_hashes']} hashes; fill "
            f"{i['fill_mean']:.1%} mean, {i['fill_max']:.1%} max; ~{i['estimated_ndv_mean']:,.0f} "
            f"distinct {'values' if i['type'] == 'bloom_filter' else 'tokens'} a granule; "
            f"fpp at fill {i['fpp_at_fill_max']:.2g} max"
            + (f" (asked {i['fpp_asked']})" if "fpp_asked" in i else "")
        )
    lines += [f"  {name}: not read: {why}" for name, why in p["not_read"].items()]
    return "\n".join(lines)


def check_part(part: Part, max_fpp: float | None = None) -> list[dict[str, Any]]:
    """The violations of a part's Bloom filter granules (see the module's docstring)."""
    from parquet_bloom.clickhouse import BLOOM_FILTER, best_practices

    problems: list[dict[str, Any]] = []
    for idx in part.indexes.values():
        for g, granule in enumerate(idx.filters):
            for f in granule:
                where = {"index": idx.name, "granule": g, "column_type": str(f.column_type)}
                if idx.type == BLOOM_FILTER:
                    assert idx.fpp_asked is not None and f.num_rows is not None
                    bits, k = best_practices(idx.fpp_asked)
                    want = (bits * f.num_rows + 7) // 8
                    found = []
                    if f.num_bytes != want or f.num_hashes != k:
                        found.append(
                            f"{f.num_bytes} bytes, {f.num_hashes} hashes; ClickHouse sizes "
                            f"{want} bytes, {k} hashes"
                        )
                    ndv = f.estimate_ndv()
                    if ndv > NDV_TOLERANCE * f.num_rows + 8:
                        found.append(f"holds ~{ndv:.0f} values by its fill, sized for {f.num_rows}")
                    if f.fpp() > FPP_TOLERANCE * idx.fpp_asked and f.num_rows >= 8:
                        found.append(f"fpp at fill {f.fpp():.3g}, asked {idx.fpp_asked}")
                    problems += [where | {"problem": p} for p in found]
                if max_fpp is not None and f.fpp() > max_fpp:
                    problems.append(
                        where | {"problem": f"fpp at fill {f.fpp():.3g} over {max_fpp}"}
                    )
    return problems


def _dispatch(handler: Any, run: Run, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    files = list(getattr(args, "files", []) or [])
    parts = [f for f in files if is_part_dir(f)]
    if not parts:
        if getattr(args, "index", None):
            err.write("parquet-bloom: error: --index needs ClickHouse part directories\n")
            return EXIT_BAD_INPUT
        return run(args, out, err)
    rest = [f for f in files if f not in parts]
    status, document = EXIT_OK, None
    if rest:
        buffer = io.StringIO()
        status = run(argparse.Namespace(**(vars(args) | {"files": rest})), buffer, err)
        if args.json and buffer.getvalue().strip():
            document = json.loads(buffer.getvalue())
        else:
            out.write(buffer.getvalue())
    results: list[dict[str, Any]] = []
    codes = [status] if rest else []
    failed = False
    for name in parts:
        try:
            part = _open(name, args)
            result, code = handler(part, args)
        except (OSError, ValueError) as e:
            message = " ".join(str(e).split()) or type(e).__name__
            kind = "corrupt part" if isinstance(e, BloomFilterError) else "error"
            err.write(f"parquet-bloom: {kind}: {name}: {message}\n")
            failed = True
            continue
        codes.append(code)
        text = result.pop("_text")
        results.append(result)
        if not args.json:
            out.write(text + "\n")
    if failed or EXIT_BAD_INPUT in codes:
        status = EXIT_BAD_INPUT
    elif handler is _probe:  # found if any file or part might hold a value
        status = EXIT_OK if EXIT_OK in codes else EXIT_FOUND_NOTHING
    else:
        status = max(codes, default=EXIT_OK)
    if args.json:
        document = document or {"files": []}
        document["files"] = document.get("files", []) + results
        json.dump(document, out, indent=2, default=str)
        out.write("\n")
    return status


def _inspect(part: Part, args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    d = describe(part)
    return d | {"_text": _text_inspect(d)}, EXIT_OK


def _check(part: Part, args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    problems = check_part(part, getattr(args, "max_fpp", None))
    granules = sum(len(i.filters) for i in part.indexes.values())
    lines = [f"{part.path}: ClickHouse part {part.name}: {granules} granules of "
             f"{len(part.indexes)} indexes checked, {len(problems)} problems"]  # fmt: skip
    lines += [f"  {p['index']} granule {p['granule']}: {p['problem']}" for p in problems]
    result = {"path": part.path, "clickhouse_part": {"problems": problems, "granules": granules}}
    return result | {"_text": "\n".join(lines)}, (1 if problems else EXIT_OK)


def _probe(part: Part, args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    if not args.index or len(args.index) < 2:
        raise ValueError("probe of a ClickHouse part needs --index NAME VALUE...")
    name, *values = args.index
    idx = part.index(name)
    assert idx.definition.columns is not None
    function = args.function or ("has" if idx.column_types[0].is_array else "equals")
    from parquet_bloom._clickhouse.conditions import MULTI_VALUED

    rows = []
    any_kept = False
    # A set or array function decides once for all the values.
    constants: list[Any] = [values] if function in MULTI_VALUED else list(values)
    for v in constants:
        keep = part.might_match(name, function, v)
        kept = [g for g, k in enumerate(keep) if k]
        any_kept |= bool(kept)
        ranges = [idx.granule_rows[g] for g in kept]
        rows.append({"value": v, "granules": kept, "rows": ranges, "of": len(keep)})
    text = [f"{part.path}: index {name} ({idx.type} on {idx.definition.expression}), {function}"]
    for r in rows:
        text.append(f"  {r['value']!r}: {len(r['granules'])} of {r['of']} granules might match"
                    + (f": {r['granules']}" if r["granules"] else ""))  # fmt: skip
    result = {"path": part.path, "clickhouse_part": {"index": name, "function": function,
                                                     "values": rows}}  # fmt: skip
    return result | {"_text": "\n".join(text)}, (EXIT_OK if any_kept else EXIT_FOUND_NOTHING)

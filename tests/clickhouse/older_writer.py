"""Run inside a separate environment holding an older chDB (see ``older_env.py``), never
imported by the suite: writes the MergeTree tables a JSON request names, then answers which rows
ClickHouse reads for each predicate with one skip index, and dumps everything as JSON.

    python older_writer.py REQUEST.json RESULT.json

Only the standard library and chDB: this runs on the old chDB's own Python environment."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

import chdb
from chdb import session as chdb_session

# The settings that keep anything but the skip index from changing which granules are read; the
# ones the old server does not know are left out (they came later, with what they turn off).
WANTED_SETTINGS = {
    "use_skip_indexes_on_data_read": "0",
    "use_query_condition_cache": "0",
    "use_statistics_for_part_pruning": "0",
    "optimize_empty_string_comparisons": "0",
}


class _NotAsked(Exception):
    """The request does not ask for this answer."""


def main() -> None:
    with open(sys.argv[1]) as f:
        request = json.load(f)
    session = chdb_session.Session(request["root"])

    def query(sql: str) -> list[dict[str, Any]]:
        # chDB 0.15 prints a failed query's error to the process's stderr and returns nothing:
        # catch what it prints, so that an error is never taken for an empty answer.
        with tempfile.TemporaryFile() as err:
            sys.stderr.flush()
            saved = os.dup(2)
            os.dup2(err.fileno(), 2)
            try:
                text = str(session.query(sql, "JSONEachRow"))
            except Exception as err:  # chDB 2.x raises ChdbError
                raise RuntimeError(f"{sql}: {err}") from None
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            err.seek(0)
            message = err.read().decode("utf-8", "replace")
        if "Exception" in message:
            raise RuntimeError(f"{sql}: {message.strip()}")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    run = query

    (version,) = query("SELECT version() AS v")
    known = {
        r["name"]
        for r in query(
            "SELECT name FROM system.settings WHERE name IN ("
            + ", ".join(f"'{n}'" for n in WANTED_SETTINGS)
            + ")"
        )
    }
    settings = [f"{n}={v}" for n, v in WANTED_SETTINGS.items() if n in known]
    run("CREATE DATABASE IF NOT EXISTS db")
    tables: dict[str, Any] = {}
    for t in request["tables"]:
        name = t["name"]
        run(
            f"CREATE TABLE db.{name} ({t['columns']}) ENGINE = MergeTree ORDER BY tuple() "
            f"SETTINGS {t['settings']}"
        )
        for start, count in t["inserts"]:
            run(f"INSERT INTO db.{name} {t['select'].format(start=start, count=count)}")
        if t["merge"]:
            run(f"OPTIMIZE TABLE db.{name} FINAL")
            run(f"INSERT INTO db.{name} {t['select'].format(start=10_000, count=40)}")
        (info,) = query(
            "SELECT data_paths, create_table_query FROM system.tables "
            f"WHERE database = 'db' AND name = '{name}'"
        )
        rows: dict[str, dict[str, list[Any]]] = {}
        for r in query(
            f"SELECT _part, * FROM db.{name} ORDER BY _part, _part_offset "
            "SETTINGS output_format_json_quote_64bit_integers = 0"
        ):
            part = rows.setdefault(r.pop("_part"), {})
            for k, v in r.items():
                part.setdefault(k, []).append(v)
        tables[name] = {
            "sql": info["create_table_query"],
            "data_path": info["data_paths"][0],
            # The active parts, as the parts the table's rows come from (23.6 in chDB has no
            # system.parts).
            "parts": sorted(rows),
            "rows": rows,
        }
    decisions = []
    for case in request["cases"]:
        others = ",".join(f"`{n}`" for n in case["all_indexes"] if n != case["index"])
        ignore = [f"ignore_data_skipping_indices='{others}'"] if others else []
        decision: dict[str, Any] = {}
        try:
            if not case["hint"]:
                raise _NotAsked
            got = query(
                f"SELECT _part, _part_offset FROM db.{case['table']} "
                f"WHERE indexHint({case['predicate']}) "
                f"SETTINGS {', '.join(ignore + settings)}"
            )
            by_part: dict[str, list[int]] = {}
            for r in got:
                by_part.setdefault(r["_part"], []).append(int(r["_part_offset"]))
            decision["rows"] = {p: _ranges(sorted(v)) for p, v in by_part.items()}
        except _NotAsked:
            pass
        except RuntimeError as err:
            # The old server cannot run this query (23.6: `u8 = -1` fails with BAD_GET).
            decision["rows_error"] = str(err).rsplit(": ", 1)[-1][:300]
        try:
            if not case["explain"]:
                raise _NotAsked
            # 23.6 does not consult text indexes for indexHint(): EXPLAIN's granule count
            # after the index is its decision there (a count, not which granules).
            explain = query(
                f"EXPLAIN indexes = 1 SELECT * FROM db.{case['table']} "
                f"WHERE {case['predicate']} SETTINGS {', '.join(ignore + settings)}"
            )
            decision["granules"] = _skip_granules([r["explain"] for r in explain], case["index"])
        except _NotAsked:
            pass
        except RuntimeError as err:
            decision["granules_error"] = str(err).rsplit(": ", 1)[-1][:300]
        decisions.append(decision)
    result = {
        "chdb": chdb.__version__,
        "version": version["v"],
        "settings": settings,
        "tables": tables,
        "decisions": decisions,
    }
    with open(sys.argv[2], "w") as f:
        json.dump(result, f)


def _skip_granules(lines: list[str], index: str) -> list[int] | None:
    """(granules kept, granules before) of skip index ``index`` in EXPLAIN indexes = 1, or None
    when it is not listed (no part left to it)."""
    for i, line in enumerate(lines):
        if line.strip() == f"Name: {index}":
            for after in lines[i + 1 : i + 5]:
                if after.strip().startswith("Granules:"):
                    kept, total = after.split(":", 1)[1].strip().split("/")
                    return [int(kept), int(total)]
    return None


def _ranges(offsets: list[int]) -> list[list[int]]:
    """Sorted row offsets as [start, end) runs."""
    out: list[list[int]] = []
    for o in offsets:
        if out and out[-1][1] == o:
            out[-1][1] = o + 1
        else:
            out.append([o, o + 1])
    return out


if __name__ == "__main__":
    main()

"""Real Paimon tables, written by Java Paimon 0.9 (conftest.PaimonOracle) with bloom-filter
file indexes: an append table partitioned two ways with every indexed type (indexes in
``.index`` files), a bucketed one whose indexes sit in the manifests, a primary-key table in
ORC with Parquet manifests, compacted after two commits (deletes in its manifests; Paimon 0.9
indexes no primary-key table's files), and one with ORC manifests whose indexed column was
renamed. Our reading of their snapshots and
manifests lists Paimon's files; every container is rebuilt byte for byte from the file's own
rows; our skipping for ``=`` and ``IN`` is Paimon's.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from parquet_bloom import cli, paimon
from tests.paimon.conftest import PaimonOracle, token

TYPED = [
    ("region", "STRING"),
    ("day", "INT"),
    ("id", "BIGINT"),
    ("name", "STRING"),
    ("small", "SMALLINT"),
    ("tiny", "TINYINT"),
    ("score", "DOUBLE"),
    ("ratio", "FLOAT"),
    ("born", "DATE"),
    ("at", "TIME"),
    ("ts3", "TIMESTAMP(3)"),
    ("ts6", "TIMESTAMP(6)"),
    ("ts9", "TIMESTAMP(9)"),
    ("ltz", "TIMESTAMP_LTZ(6)"),
    ("code", "CHAR(4)"),
    ("payload", "BYTES"),
    ("fixed", "BINARY(4)"),
]
REGIONS = ["north", "a/b:c", "\u00e9t\u00e9", None, "  "]  # escaped; not; default partition x 2


def _typed_row(rng: random.Random, i: int) -> list[Any]:
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.08 else v

    nanos = rng.randint(-(2**61), 2**61)
    return [
        rng.choice(REGIONS),
        rng.choice([1, -5, 20240101]),
        maybe(i * 7919 - 10**12),
        maybe(f"name-{i}-" + rng.choice(["x", "\u4e2d", "\U0001f600"])),
        maybe(rng.randint(-(2**15), 2**15 - 1)),
        maybe(rng.randint(-128, 127)),
        maybe(rng.uniform(-1e9, 1e9)),
        maybe(float(np.float32(rng.uniform(-1e3, 1e3)))),
        maybe(dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-40000, 40000))),
        maybe(
            dt.time(
                rng.randint(0, 23),
                rng.randint(0, 59),
                rng.randint(0, 59),
                rng.randrange(1000) * 1000,
            )
        ),
        maybe(np.datetime64(nanos, "ns")),
        maybe(np.datetime64(nanos + 1, "ns")),
        maybe(np.datetime64(nanos + 2, "ns")),
        maybe(np.datetime64(nanos + 3, "ns")),
        maybe(rng.choice(["ab", "abcd", "\u00e9\u00e9\u00e9\u00e9", "zz"])),
        maybe(rng.randbytes(rng.randint(0, 12))),
        maybe(rng.randbytes(4)),
    ]


@dataclass
class Written:
    """A table written by Java Paimon, and what Paimon said about it."""

    name: str
    columns: list[tuple[str, str]]
    rows: list[list[Any]]
    bloom: list[str]  # the file-index.bloom-filter.columns option
    items: dict[str, int]
    fpp: float
    files: dict[str, tuple[list[str], bytes | None]] = field(default_factory=dict)
    verdicts: dict[str, dict[str, tuple[bool, list[bool]]]] = field(default_factory=dict)
    probes: dict[str, list[Any]] = field(default_factory=dict)

    def type_of(self, column: str) -> str:
        return dict(self.columns)[column]


def _script_table(
    t: Written, *, partition: str | None = None, pk: str | None = None, options: dict[str, str]
) -> list[str]:
    lines = [f"TABLE\t{t.name}"] + [f"COLUMN\t{n}\t{typ}" for n, typ in t.columns]
    if partition:
        lines.append(f"PARTITION\t{partition}")
    if pk:
        lines.append(f"PK\t{pk}")
    options = dict(options)
    options["file-index.bloom-filter.columns"] = ",".join(t.bloom)
    for c in t.bloom:
        options[f"file-index.bloom-filter.{c}.items"] = str(t.items[c])
        options[f"file-index.bloom-filter.{c}.fpp"] = str(t.fpp)
    lines += [f"OPTION\t{k}\t{v}" for k, v in options.items()]
    lines.append("CREATE")
    return lines


def _rows(t: Written, rows: list[list[Any]]) -> list[str]:
    return [
        "ROW\t" + "\t".join(token(v, typ) for v, (_, typ) in zip(row, t.columns, strict=True))
        for row in rows
    ]


def _probe_values(t: Written, column: str, rng: random.Random, absent: list[Any]) -> list[Any]:
    i = [n for n, _ in t.columns].index(column)
    present = [r[i] for r in t.rows if r[i] is not None]
    return rng.sample(present, 3) + absent


@pytest.fixture(scope="module")
def tables(paimon_java: PaimonOracle, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    rng = random.Random(9)
    warehouse = tmp_path_factory.mktemp("paimon-warehouse")
    script: list[str] = []
    made: dict[str, Written] = {}

    typed = Written("typed", TYPED, [], [c for c, _ in TYPED[2:]], {}, 0.05)
    typed.items = {c: (200 if c == "name" else 60) for c in typed.bloom}
    script += _script_table(typed, partition="region,day", options={"file.format": "parquet"})
    for commit in range(3):
        batch = [_typed_row(rng, commit * 1000 + i) for i in range(110)]
        typed.rows += batch
        script += [*_rows(typed, batch), "COMMIT"]
    typed.probes = {
        "id": _probe_values(typed, "id", rng, [5, -(10**12) - 1]),
        "name": _probe_values(typed, "name", rng, ["nobody", ""]),
        "score": _probe_values(typed, "score", rng, [0.5, -0.0]),
        "ratio": _probe_values(typed, "ratio", rng, [0.25]),
        "born": _probe_values(typed, "born", rng, [dt.date(2100, 1, 1)]),
        "ts6": _probe_values(typed, "ts6", rng, [np.datetime64(7, "ns")]),
        "ts9": _probe_values(typed, "ts9", rng, [np.datetime64(7, "ns")]),
        "payload": _probe_values(typed, "payload", rng, [b"\x00" * 20]),
        "tiny": [-128, 0, 127, 5],
    }
    made["typed"] = typed

    small = Written("small", [("k", "INT"), ("s", "STRING")], [], ["k", "s"], {"k": 8, "s": 8}, 0.1)
    script += _script_table(small, options={"bucket": "2", "bucket-key": "k"})
    for commit in range(2):
        batch = [[commit * 100 + i, f"s{i % 13}"] for i in range(40)]
        small.rows += batch
        script += [*_rows(small, batch), "COMMIT"]
    small.probes = {"k": [3, 140, 1000, -1], "s": ["s5", "s12", "zzz"]}
    made["small"] = small

    keyed = Written(
        "keyed",
        [("id", "INT"), ("v", "STRING"), ("n", "BIGINT")],
        [],
        ["v", "n"],
        {"v": 100, "n": 100},
        0.05,
    )
    options = {"bucket": "2", "file.format": "orc", "manifest.format": "parquet"}
    script += _script_table(keyed, pk="id", options=options)
    for commit in range(2):
        batch = [[i, f"v{i}-{commit}", i * commit] for i in range(commit * 30, commit * 30 + 60)]
        keyed.rows += batch
        script += [*_rows(keyed, batch), "COMMIT"]
    script += ["COMPACT\t1", "COMMIT"]  # bucket 0 only
    keyed.probes = {"v": ["v5-0", "v45-1", "v5-1", "v89-1", "nope"], "n": [45, 0, 3, -7]}
    made["keyed"] = keyed

    renamed = Written("renamed", [("id", "INT"), ("t", "STRING")], [], ["id"], {"id": 20}, 0.05)
    script += _script_table(renamed, options={"manifest.format": "orc"})
    script += [*_rows(renamed, [[i, "a"] for i in range(10)]), "COMMIT"]
    script += ["RENAME\tid\tkey", "UNSET\tfile-index.bloom-filter.id.items"]
    script += ["UNSET\tfile-index.bloom-filter.id.fpp", "SET\tfile-index.bloom-filter.columns\tkey"]
    script += ["SET\tfile-index.bloom-filter.key.items\t20"]
    renamed.rows = [[i, "a"] for i in range(10, 20)]
    script += [*_rows(renamed, renamed.rows), "COMMIT"]
    renamed.rows = [[i, "a"] for i in range(20)]
    renamed.columns = [("key", "INT"), ("t", "STRING")]
    renamed.probes = {"key": [3, 13, 99]}
    made["renamed"] = renamed

    for t in made.values():
        script += [f"MARK\t{t.name}", "FILES"]
        for column, values in t.probes.items():
            typ = t.type_of(column)
            script.append("PROBE\t" + column + "\t" + "\t".join(token(v, typ) for v in values))
    out = paimon_java.run(["table", str(warehouse)], "\n".join(script) + "\n")
    current: Written | None = None
    probes: list[str] = []
    for line in out:
        if line[0] == "MARK":
            current = made[line[1]]
            probes = list(current.probes)
            seen_probe: dict[str, int] = {}
        elif line[0] == "FILE":
            assert current is not None
            path = str(Path(line[1]).resolve().relative_to(warehouse / "db.db" / current.name))
            extra = [e for e in line[2].split(",") if e]
            current.files[path] = (extra, None if line[3] == "-" else bytes.fromhex(line[3]))
        else:
            assert line[0] == "VERDICT" and current is not None
            # VERDICT lines come a data file at a time for each PROBE in turn.
            n_files = len(current.files)
            count = sum(seen_probe.values())
            column = probes[count // n_files]
            seen_probe[column] = seen_probe.get(column, 0) + 1
            current.verdicts.setdefault(column, {})[line[1]] = (
                line[2] == "1",
                [c == "1" for c in line[3]],
            )
    return {"warehouse": warehouse, "tables": made}


def _root(tables: dict[str, Any], name: str) -> Path:
    return tables["warehouse"] / "db.db" / name


@pytest.mark.parametrize("name", ["typed", "small", "keyed", "renamed"])
def test_data_files_are_paimons(tables: dict[str, Any], name: str) -> None:
    t: Written = tables["tables"][name]
    root = _root(tables, name)
    ours = paimon.data_files(root)
    assert {str(Path(f.path).relative_to(root)) for f in ours} == set(t.files)
    for f in ours:
        extra, embedded = t.files[str(Path(f.path).relative_to(root))]
        assert f.embedded_index == embedded
        expected_index = [e for e in extra if e.endswith(".index")]
        assert (Path(f.index_path).name if f.index_path else None) == (
            expected_index[0] if expected_index else None
        )
        assert Path(f.path).is_file()
        assert f.index_path is None or Path(f.index_path).is_file()
    if name == "typed":
        assert all(f.index_path for f in ours) and len(ours) >= 20
        assert {f.partition["region"] for f in ours} == set(REGIONS)
        assert any("a%2Fb%3Ac" in f.path for f in ours)
        assert any("__DEFAULT_PARTITION__" in f.path for f in ours)
    if name == "small":
        assert all(f.embedded_index for f in ours) and {f.bucket for f in ours} == {0, 1}
    if name == "keyed":
        # Bucket 0's full compaction left one file; the manifests delete the two it replaced.
        # Paimon 0.9 writes file indexes for append tables only (RowDataFileWriter; key-value
        # files have them from 1.0): none here, and every file is kept.
        assert sorted((f.bucket, f.level, f.has_index) for f in ours) == [
            (0, 5, False),
            (1, 0, False),
            (1, 0, False),
        ]


@pytest.mark.parametrize("name", ["typed", "small", "renamed"])
def test_every_container_rebuilt_byte_for_byte(tables: dict[str, Any], name: str) -> None:
    """From each data file's own rows: the bloom-filter indexes, in Paimon's column order, as
    the container Paimon stored (in the manifest or in the .index file)."""
    t: Written = tables["tables"][name]
    rebuilt = 0
    for f in paimon.data_files(_root(tables, name)):
        data = pq.read_table(f.path)
        options = f.schema.options
        listed = [c.strip() for c in options["file-index.bloom-filter.columns"].split(",")]
        items = {c: int(options[f"file-index.bloom-filter.{c}.items"]) for c in listed}
        fpp = {c: float(options.get(f"file-index.bloom-filter.{c}.fpp", "0.1")) for c in listed}
        types = f.schema.data_types
        ours = paimon.build_file_index(
            {c: data.column(c) for c in listed},
            {c: types[c] for c in listed},
            items=items,
            fpp=fpp,
            order=listed,
        )
        if f.embedded_index is not None:
            stored = f.embedded_index
        else:
            assert f.index_path is not None
            stored = Path(f.index_path).read_bytes()
        assert ours == stored, f.path
        rebuilt += 1
    assert rebuilt == len(t.files)


@pytest.mark.parametrize("name", ["typed", "small", "keyed", "renamed"])
def test_skipping_for_equal_and_in_is_paimons(tables: dict[str, Any], name: str) -> None:
    t: Written = tables["tables"][name]
    root = _root(tables, name)
    assert t.verdicts and set(t.verdicts) == set(t.probes)
    for column, values in t.probes.items():
        java = t.verdicts[column]
        result = paimon.prune_files(root, column, values)
        assert {Path(f.path).name for f in result.kept} == {
            n for n, (keep, _) in java.items() if keep
        }
        assert len(result.kept) + len(result.skipped) == len(java)
        per_value = paimon.files_for_values(root, column, values)
        for i, value in enumerate(values):
            expected = {n for n, (_, each) in java.items() if each[i]}
            assert {Path(p).name for p in per_value[value]} == expected, (column, value)
        one = values[0]
        assert {Path(f.path).name for f in paimon.prune_files(root, column, one).kept} == {
            n for n, (_, each) in java.items() if each[0]
        }
    if name == "typed":
        some = paimon.prune_files(root, "id", t.probes["id"][-2:])  # absent ids
        assert some.skipped and some.indexes_read == len(t.files)


def test_data_file_might_contain(tables: dict[str, Any]) -> None:
    files = paimon.data_files(_root(tables, "small"))
    for f in files:
        index = f.file_index()
        assert index is not None and index.columns == paimon.column_order(["k", "s"])
        rows = pq.read_table(f.path)
        for k in rows.column("k").to_pylist():
            assert f.might_contain("k", k)
        assert f.might_contain_many("s", rows.column("s")).all()


def test_tables_read_through_an_fsspec_filesystem(tables: dict[str, Any]) -> None:
    """The same table copied into fsspec's memory filesystem, read by URL."""
    import fsspec

    memory = fsspec.filesystem("memory")
    root = _root(tables, "typed")
    for path in root.rglob("*"):
        if path.is_file():
            memory.pipe(f"/paimon-typed/{path.relative_to(root)}", path.read_bytes())
    try:
        local = {str(Path(f.path).relative_to(root)): f for f in paimon.data_files(root)}
        remote = paimon.data_files("memory://paimon-typed")
        assert {f.path.removeprefix("memory://paimon-typed/") for f in remote} == set(local)
        t: Written = tables["tables"]["typed"]
        kept = paimon.prune_files("memory://paimon-typed", "name", t.probes["name"]).kept
        expected = paimon.prune_files(root, "name", t.probes["name"]).kept
        assert sorted(Path(f.path).name for f in kept) == sorted(
            Path(f.path).name for f in expected
        )
        one = next(f for f in remote if f.index_path)
        assert one.file_index() is not None
    finally:
        memory.rm("/paimon-typed", recursive=True)


def test_cli_inspects_an_index_file(
    tables: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    typed = paimon.data_files(_root(tables, "typed"))
    path = next(f.index_path for f in typed if f.index_path)
    assert path is not None
    status = cli.main(["inspect", path])
    text = capsys.readouterr().out
    assert status == 0
    index = paimon.read_file_index(path)
    assert f"{len(index.entries)} indexes" in text
    for column in index.columns:
        assert column in text
    status = cli.main(["inspect", "--json", path])
    document = json.loads(capsys.readouterr().out)
    assert status == 0
    (entry,) = document["files"]
    described = entry["paimon_file_index"]
    assert [e["column"] for e in described["indexes"]] == index.columns
    for e in described["indexes"]:
        f = index.bloom_filter(e["column"])
        assert f is not None
        assert (e["num_hashes"], e["num_bits"]) == (f.num_hashes, f.num_bits)
        assert e["offset"] == index.entry(e["column"]).offset  # type: ignore[union-attr]


def test_cli_inspects_index_and_parquet_files_together(
    tables: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    f = next(f for f in paimon.data_files(_root(tables, "typed")) if f.index_path)
    assert f.index_path is not None
    broken = tmp_path / "broken.parquet.index"
    broken.write_bytes(Path(f.index_path).read_bytes()[:30])
    status = cli.main(["inspect", f.path, f.index_path, str(broken)])
    captured = capsys.readouterr()
    assert status == 2  # the truncated index file
    assert "row groups" in captured.out and "Paimon file index" in captured.out
    assert str(broken) in captured.err and "head" in captured.err
    status = cli.main(["inspect", "--json", f.path, f.index_path])
    document = json.loads(capsys.readouterr().out)
    assert status == 0
    assert [("paimon_file_index" in e) for e in document["files"]] == [False, True]

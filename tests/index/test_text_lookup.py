"""Token and substring lookups through an index's token and n-gram filters: the library's
``index.lookup_text`` (and Delta's), and ``parquet-bloom index lookup --token/--substring/...``.
Every row group holding a matching value is a candidate (checked against pyarrow's own match of
each row group); a file the index does not know is a candidate whole."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom import delta, index
from parquet_bloom.cli import main
from tests.index.test_text import expression, log_line, pattern_of
from tests.tables import delta_tables

Capture = pytest.CaptureFixture[str]
FILTERS = [index.TextFilter("msg"), index.TextFilter("msg", "ngrambf", n=3)]
FUNCTIONS = {"token": "has_token"}


@pytest.fixture
def lake(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """Eight files of four row groups of 25 log lines; an index of both filters."""
    root = tmp_path / "data"
    root.mkdir()
    rng = random.Random(7)
    lines: list[str] = []
    for i in range(8):
        msgs = [log_line(rng) for _ in range(100)]
        lines += msgs
        pq.write_table(pa.table({"msg": msgs}), root / f"f{i}.parquet", row_group_size=25)
    target = tmp_path / "idx"
    index.build_index(root, [], target, text=FILTERS)
    return root, target, lines


def _truth(root: Path, function: str, pattern: str) -> dict[str, list[int]]:
    """The row groups holding a matching value, by pyarrow's match."""
    out: dict[str, list[int]] = {}
    expr = expression(function, pattern)
    for path in sorted(root.glob("*.parquet")):
        f = pq.ParquetFile(path)
        for rg in range(f.num_row_groups):
            if f.read_row_group(rg).filter(expr).num_rows:
                out.setdefault(str(path), []).append(rg)
    return out


def _covers(found: dict[str, list[int]], truth: dict[str, list[int]]) -> None:
    for path, groups in truth.items():
        assert path in found, (path, found)
        assert found[path] == [-1] or set(groups) <= set(found[path])


def test_every_matching_row_group_is_a_candidate(lake: tuple[Path, Path, list[str]]) -> None:
    root, target, lines = lake
    rng = random.Random(3)
    asked = narrowed = 0
    with index.BloomIndex(target) as idx:
        while asked < 120:
            function, pattern = pattern_of(rng, lines)
            try:
                found = index.lookup_text(
                    root, "msg", pattern, function=FUNCTIONS.get(function, function), index=idx
                )
            except ValueError as err:
                assert "holds no whole token" in str(err) or "is not one token" in str(err)
                continue
            asked += 1
            truth = _truth(root, function, pattern)
            _covers(found.files, truth)
            assert found.from_index == 8 and found.unindexed == [] and found.probed == []
            narrowed += sum(len(g) for g in found.files.values()) < 32
    assert narrowed > 40  # most patterns leave out some row groups


def test_several_patterns_and_files_the_index_does_not_know(
    lake: tuple[Path, Path, list[str]],
) -> None:
    root, target, _ = lake
    pq.write_table(pa.table({"msg": ["zebra9 crossing"]}), root / "new.parquet")
    (root / "f7.parquet").unlink()
    found = index.lookup_text(root, "msg", ["zebra9", "login"], index=target)
    assert found.unindexed == [str(root / "new.parquet")]
    assert found.files[str(root / "new.parquet")] == [-1]  # no filter of its own: whole
    assert found.gone == [str(root / "f7.parquet")] and found.from_index == 7
    login = index.lookup_text(root, "msg", "login", index=target)
    zebra = index.lookup_text(root, "msg", "zebra9", index=target)
    for path in set(login.files) | set(zebra.files):
        union = set(login.files.get(path, [])) | set(zebra.files.get(path, []))
        assert set(found.files[path]) == union  # any of the patterns
    assert "not indexed (candidates whole)" in str(found)


def test_mistakes(lake: tuple[Path, Path, list[str]]) -> None:
    root, target, _ = lake
    with pytest.raises(ValueError, match="not one token"):
        index.lookup_text(root, "msg", "two words", index=target)
    with pytest.raises(ValueError, match="holds no whole token or n-gram"):
        index.lookup_text(root, "msg", "ab", function="ends_with", index=target)
    with pytest.raises(ValueError, match="no token or n-gram filter of column 'n'"):
        index.lookup_text(root, "n", "x", index=target)
    with pytest.raises(ValueError, match="function must be one of"):
        index.lookup_text(root, "msg", "x", function="regex", index=target)
    with pytest.raises(ValueError, match="at least one pattern"):
        index.lookup_text(root, "msg", [], index=target)


def test_a_delta_tables_text_lookup(tmp_path: Path, capsys: Capture) -> None:
    table = tmp_path / "t"
    delta_tables.write(str(table), delta_tables.rows(0, 1000))
    delta.build_index(str(table), [], text=[index.TextFilter("key")])
    found = delta.lookup_text(str(table), "key", "k421")
    # k421 is in the odd partition's file (the even one may be a false candidate).
    assert any(p.startswith("part=odd/") for p in found.files) and found.from_index == 2
    assert all(len(g) == 1 for g in found.files.values())  # one of 5 row groups a file
    status = main(["index", "lookup", str(table), "--column", "key", "--token", "k421", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert status == 0 and document["files"] == found.files
    assert document["function"] == "has_token" and document["patterns"] == ["k421"]


def _run(capsys: Capture, *argv: object) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_command(lake: tuple[Path, Path, list[str]], capsys: Capture) -> None:
    root, target, _ = lake
    for flag, function in [
        ("--token", "token"),
        ("--substring", "match_substring"),
        ("--starts-with", "starts_with"),
        ("--ends-with", "ends_with"),
        ("--like", "match_like"),
    ]:
        pattern = {"token": "login", "match_like": "%users_log%"}.get(function, "error")
        lookup = ["index", "lookup", root, "--index", target, "--column", "msg"]
        status, out, err = _run(capsys, *lookup, flag, pattern, "--json")
        assert (status, err) == (0, ""), flag
        document = json.loads(out)
        _covers(document["files"], _truth(root, function, pattern))
        assert document["function"] == FUNCTIONS.get(function, function)
        status, out, _ = _run(capsys, *lookup, flag, pattern)
        listed = dict(line.split(": ", 1) for line in out.splitlines()[:-1])
        assert sorted(listed) == sorted(document["files"])
        assert out.splitlines()[-1].startswith(f"msg {document['function']}: ")
    lookup = ["index", "lookup", root, "--index", target, "--column", "msg"]
    status, out, _ = _run(capsys, *lookup, "--token", "id99999999")
    assert status == 1  # nothing may hold it
    status, _, err = _run(capsys, *lookup, "--like", "%_%")
    assert status == 2 and "holds no whole token" in err
    status, _, err = _run(capsys, *lookup, "x", "--token", "y")
    assert status == 2 and "takes the column alone" in err
    status, _, err = _run(capsys, *lookup, "--token", "a", "--substring", "b")
    assert status == 2 and "not allowed with" in err
    status, _, err = _run(
        capsys, "index", "lookup", root, "--index", target, "--column", "n", "--token", "x"
    )
    assert status == 2 and "no token or n-gram filter of column 'n'" in err

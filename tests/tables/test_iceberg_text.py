"""An Iceberg table's Bloom index with token and n-gram filters: built from the values of the
data files (found by field id), then the table changed by pyiceberg (appends, position
deletes, an overwrite, a rename, a column dropped and added again); ``iceberg.prune``'s rows
with a string match always equal pyiceberg's own scan with the same match applied, and the
index drops the row groups whose values cannot match."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.expressions import EqualTo, GreaterThan, NotStartsWith, Or, StartsWith
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField, StringType

import parquet_bloom.iceberg as pbi
from parquet_bloom.index import TextFilter, has_token
from tests.index import test_text as tt
from tests.tables import iceberg_tables as it

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "message", StringType(), required=False),
)
FILTERS = [TextFilter("message"), TextFilter("message", "ngrambf", n=4)]


def _message(i: int) -> str:
    return f"user{i} visited page{i % 7} code{i * 37 % 101}"


def _data(ids: range | list[int], column: str = "message") -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), column: [_message(i) for i in ids]})


@pytest.fixture
def table(tmp_path: Path) -> Table:
    """Three files (ids 0-29, 30-59, 60-89), row groups of 5 rows, no Bloom filters."""
    made = it.catalog(tmp_path).create_table("db.t", SCHEMA)
    for k in range(3):
        ids = range(30 * k, 30 * (k + 1))
        it.add_data_file(made, _data(ids), f"f{k}.parquet", row_group_size=5, bloom=[])
    return made


def _matches(column: str = "message") -> list[pc.Expression]:
    field = pc.field(column)
    return [
        pc.match_substring(field, "user42 "),
        pc.match_substring(field, "visited page3 code"),  # most rows: nothing dropped
        pc.match_substring(field, "absent-token"),
        pc.starts_with(field, "user7 "),
        pc.ends_with(field, " code84"),
        pc.match_like(field, "user5_ visited%"),
        pc.match_like(field, "%code99"),
        has_token(column, "user61"),
        has_token(column, "nowhere"),
        pc.match_substring(field, "user42 ") | has_token(column, "user3"),
        pc.match_substring(field, "user4") & pc.ends_with(field, "code39"),
    ]


def _check(table: Table, match: pc.Expression, row_filter: str = "") -> pbi.IcebergPruneResult:
    """Prune with the index and without: the same rows as pyiceberg's scan with ``match``
    applied; the index keeps a subset of what no index keeps."""
    args = (row_filter,) if row_filter else ()
    indexed = pbi.prune(table, *args, arrow_filter=match, index=True)
    plain = pbi.prune(table, *args, arrow_filter=match, index=False)
    expected = table.scan(*args).to_arrow().filter(match)
    got = indexed.to_arrow()
    # The same columns; their string width (string or large_string) is pyiceberg's, after the
    # files it reads (pyarrow's and pyiceberg's writers differ), with or without an index.
    assert got.column_names == expected.column_names, match
    assert it.sorted_rows(got) == it.sorted_rows(expected), match
    assert it.sorted_rows(plain.to_arrow()) == it.sorted_rows(expected), match
    for path, kept in indexed.row_groups.items():
        assert path in plain.row_groups
        assert plain.row_groups[path] is None or kept is not None
    return indexed


def _skipped(result: pbi.IcebergPruneResult) -> int:
    return int(result.report.bloom.row_groups_skipped + 6 * result.report.bloom.files_skipped)


@pytest.mark.parametrize("match", _matches())
def test_string_matches_decided_by_the_index(table: Table, match: pc.Expression) -> None:
    report = pbi.build_index(table, [], text=FILTERS)
    assert {t.spec for t in report.text} == {"tokenbf_v1(24,7,0)", "ngrambf_v1(4,80,7,0)"}
    result = _check(table, match)
    assert result.report.bloom.index_files == 3
    assert result.report.bloom.per_file == ()  # no data file opened
    rows = len(result.to_arrow())
    if rows <= 2:  # a selective match: the index drops most of the 18 row groups
        kept = sum(len(v) if v is not None else 6 for v in result.row_groups.values())
        assert kept <= 2 + rows, (match, result.row_groups)


def test_the_row_filters_starts_with_is_decided(table: Table) -> None:
    pbi.build_index(table, ["id"], text=[TextFilter("message")], from_data="missing")
    result = pbi.prune(table, StartsWith("message", "user42 "))
    assert result.row_groups == {f"{table.location()}/data/f1.parquet": [2]}
    assert result.to_arrow()["id"].to_pylist() == [42]
    # Both: the row filter's equality by the id column's filters, the match by the text ones.
    both = pbi.prune(table, EqualTo("id", 42), arrow_filter=has_token("message", "user42"))
    assert both.row_groups == {f"{table.location()}/data/f1.parquet": [2]}
    nothing = pbi.prune(table, EqualTo("id", 47), arrow_filter=has_token("message", "user42"))
    assert nothing.tasks == []  # id 47: row group 3 of f1; the token: row group 2
    # A negated match, and an OR with a member the index cannot decide, keep every row group.
    for row_filter in (
        NotStartsWith("message", "user42 "),
        Or(StartsWith("message", "user42 "), GreaterThan("id", 80)),
    ):
        result = pbi.prune(table, row_filter)
        got, expected = result.to_arrow(), table.scan(row_filter=row_filter).to_arrow()
        assert it.sorted_rows(got) == it.sorted_rows(expected)
        assert result.report.bloom.row_groups_skipped == 0, row_filter
    assert nothing.to_arrow().num_rows == 0


def test_changes_after_the_build(table: Table) -> None:
    pbi.build_index(table, [], text=FILTERS)
    # An append (pyiceberg's own writer), position deletes, an overwrite, then a rename.
    table.append(_data(range(90, 120)))
    f1 = it.data_files(table)[f"{table.location()}/data/f1.parquet"]
    it.add_position_deletes(table, f1, [12, 13])  # ids 42, 43
    table.overwrite(_data([0, 1, 200]), overwrite_filter="id < 2")
    with table.update_schema() as update:
        update.rename_column("message", "text")
    for match in [*_matches("text"), pc.match_substring(pc.field("text"), "user95 ")]:
        _check(table, match)
    # The deleted row 42 is not read back; its row group still decided by the index.
    got = pbi.prune(table, arrow_filter=pc.match_substring(pc.field("text"), "user4"))
    assert 42 not in got.to_arrow()["id"].to_pylist()
    # Refreshed: the appended and rewritten files get filters at the index's shape.
    report = pbi.refresh_index(table)  # the append, f0 rewritten, the overwrite's rows
    assert report.files == 3
    assert {t.spec for t in report.text} == {"tokenbf_v1(24,7,0)", "ngrambf_v1(4,80,7,0)"}
    for match in _matches("text"):
        result = _check(table, match)
        planned = list(result.scan.plan_files())
        assert result.report.bloom.index_files == len(planned) == 5  # it knows every file
    result = _check(table, has_token("text", "user95"))
    assert result.report.bloom.per_file == ()
    assert [v for v in result.row_groups.values() if v != []] != []
    pbi.compact_index(table)
    for match in _matches("text"):
        _check(table, match)


def test_a_column_dropped_and_added_again_is_not_the_indexed_one(table: Table) -> None:
    pbi.build_index(table, [], text=FILTERS)
    with table.update_schema() as update:
        update.delete_column("message")
    with table.update_schema() as update:
        update.add_column("message", StringType())
    table.append(_data(range(42, 44)))  # the new column holds what the old one did
    match = pc.match_substring(pc.field("message"), "user42 ")
    result = _check(table, match)
    assert result.to_arrow()["id"].to_pylist() == [42]
    # The old column's filters (another field id) decide nothing of the new one.
    assert result.report.bloom.files_skipped == 0
    assert result.report.bloom.row_groups_skipped == 0


def test_mistakes(table: Table) -> None:
    with pytest.raises(ValueError, match="no column 'nope'"):
        pbi.build_index(table, [], text=[TextFilter("nope")])
    with pytest.raises(ValueError, match="non-empty list"):
        pbi.build_index(table, [])
    with pytest.raises(TypeError, match="arrow_filter must be"):
        pbi.prune(table, arrow_filter="message like 'x%'")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="selected_fields"):
        pbi.prune(table, selected_fields=("id",), arrow_filter=has_token("message", "user1"))


def test_token_lookups_of_the_table(table: Table) -> None:
    pbi.build_index(table, [], text=FILTERS)
    f1 = f"{table.location()}/data/f1.parquet"
    found = pbi.lookup_text(table, "message", "user42")
    assert found.files == {f1: [2]} and found.from_index == 3
    table.append(_data(range(90, 100)))  # unknown to the index: a candidate whole
    with table.update_schema() as update:
        update.rename_column("message", "text")
    found = pbi.lookup_text(table, "text", ["user42 ", " code84"], function="match_substring")
    truth = (
        table.scan()
        .to_arrow()
        .filter(
            pc.match_substring(pc.field("text"), "user42 ")
            | pc.ends_with(pc.field("text"), " code84")
        )
    )
    assert found.column == "text" and len(found.unindexed) == 1
    assert found.files[found.unindexed[0]] == [-1]
    for i in truth["id"].to_pylist():  # every matching row's file and row group
        if i < 90:
            assert (i % 30) // 5 in found.files[f"{table.location()}/data/f{i // 30}.parquet"]
    with table.update_schema() as update:
        update.delete_column("text")
    with table.update_schema() as update:
        update.add_column("text", StringType())
    with pytest.raises(ValueError, match="no token or n-gram filter of column 'text'"):
        pbi.lookup_text(table, "text", "user42")


def test_random_matches_keep_every_row(tmp_path: Path) -> None:
    """Random patterns of every function on random log lines, after an append and a rename:
    the rows always equal pyiceberg's scan with the match applied."""
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "msg", StringType(), required=False),
    )
    table = it.catalog(tmp_path).create_table("db.logs", schema)
    rng = random.Random(13)
    lines: list[str] = []
    for k in range(4):
        msgs = [tt.log_line(rng) for _ in range(60)]
        lines += msgs
        data = pa.table({"id": pa.array(range(60 * k, 60 * k + 60), pa.int64()), "msg": msgs})
        it.add_data_file(table, data, f"f{k}.parquet", row_group_size=15, bloom=[])
    pbi.build_index(table, [], text=[TextFilter("msg"), TextFilter("msg", "ngrambf", n=3)])
    table.append(pa.table({"id": pa.array([999], pa.int64()), "msg": [lines[0]]}))
    with table.update_schema() as update:
        update.rename_column("msg", "line")
    skipped = 0
    for _ in range(40):
        function, pattern = tt.pattern_of(rng, lines)
        if function == "token":
            match = has_token("line", pattern)
        else:
            match = getattr(pc, function)(pc.field("line"), pattern)
        result = _check(table, match)
        skipped += result.report.bloom.row_groups_skipped + 4 * result.report.bloom.files_skipped
    assert skipped > 40  # the index ruled row groups out

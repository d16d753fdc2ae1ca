"""Parts and tables: the active parts, the statement found in the data directory, the row
ranges of granules, every file's size and chained hash against checksums.txt, the kinds of part
and file each table was meant to exercise, and a part read through a URL."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from parquet_bloom import clickhouse as pbch
from parquet_bloom._clickhouse import files
from tests.clickhouse.conftest import TABLES, ClickHouse


@pytest.mark.parametrize("table", list(TABLES))
def test_active_parts_are_clickhouses(clickhouse: ClickHouse, table: str) -> None:
    t = clickhouse.tables[table]
    on_disk = sorted(p.name for p in t.data_dir.iterdir() if p.is_dir())
    assert [p.name for p in pbch.open_table(t.data_dir)] == t.parts
    if TABLES[table][4]:  # merged: the merged parts still wait on disk, covered
        assert len(on_disk) > len(t.parts) + 1


@pytest.mark.parametrize("table", list(TABLES))
def test_granule_rows_are_clickhouses(clickhouse: ClickHouse, table: str) -> None:
    t = clickhouse.tables[table]
    got = clickhouse.query(
        f"SELECT _part AS p, _part_granule_offset AS g, min(_part_offset) AS lo, "
        f"max(_part_offset) + 1 AS hi FROM db.{table} GROUP BY p, g ORDER BY p, g"
    )
    granules: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in got:
        granules[r["p"]].append((int(r["lo"]), int(r["hi"])))
    for part in pbch.open_table(t.data_dir, t.sql):
        data = granules[part.name]
        assert len(data) == len(part.data_granule_rows)
        for name, idx in part.indexes.items():
            g = idx.definition.granularity
            want = [
                (data[i][0], data[min(i + g, len(data)) - 1][1]) for i in range(0, len(data), g)
            ]
            assert part.granule_rows(name) == want


@pytest.mark.parametrize("table", list(TABLES))
def test_every_file_matches_checksums_txt(clickhouse: ClickHouse, table: str) -> None:
    t = clickhouse.tables[table]
    for name in t.parts:
        part = t.data_dir / name
        listed = files.parse_checksums((part / "checksums.txt").read_bytes())
        assert listed
        for entry in listed.values():
            data = (part / entry.name).read_bytes()
            assert len(data) == entry.file_size
            assert files.file_hash(data) == entry.file_hash


def test_the_tables_exercise_every_layout(clickhouse: ClickHouse) -> None:
    seen = set()
    for t in clickhouse.tables.values():
        for name in t.parts:
            listed = set(files.parse_checksums((t.data_dir / name / "checksums.txt").read_bytes()))
            if "skp_idx.packed" in listed:
                archive = (t.data_dir / name / "skp_idx.packed").read_bytes()
                listed |= set(files.parse_packed(archive))
            seen |= (
                {"hashed name"}
                if any(len(n) == 36 and n.endswith(".idx") for n in listed)
                else set()
            )
            seen |= {n.rsplit(".", 1)[-1] for n in listed if n.startswith("skp_idx")}
            seen |= {"packed"} if "skp_idx.packed" in listed else set()
            seen |= {"compact"} if "data.bin" in listed else {"wide"}
    assert {
        "packed",
        "idx",
        "compact",
        "wide",
        "cmrk2",
        "mrk4",
        "mrk2",
        "mrk",
        "cmrk4",
        "hashed name",
    } <= seen


def test_methods_seen(clickhouse: ClickHouse) -> None:
    from parquet_bloom._clickhouse import blocks

    methods = set()
    for t in clickhouse.tables.values():
        for name in t.parts:
            for f in (t.data_dir / name).glob("skp_idx*.idx"):
                methods |= {b.method for b in blocks.decompress_stream(f.read_bytes(), f.name)[1]}
    assert {blocks.ZSTD, blocks.MULTIPLE} <= methods


def test_statement_found_in_the_data_directory(clickhouse: ClickHouse) -> None:
    t = clickhouse.tables["typed_wide"]
    part = pbch.open_part(t.data_dir / t.parts[0])
    bloom = {n for n, d in pbch.parse_table_sql(t.sql).indexes.items() if d.type != "minmax"}
    assert set(part.indexes) | set(part.skipped) == bloom


def test_without_a_statement_outside_a_data_directory(
    clickhouse: ClickHouse, tmp_path: Path
) -> None:
    import shutil

    t = clickhouse.tables["plain"]
    shutil.copytree(t.data_dir / t.parts[0], tmp_path / t.parts[0])
    with pytest.raises(ValueError, match="table_sql"):
        pbch.open_part(tmp_path / t.parts[0])


def test_a_part_through_a_url(clickhouse: ClickHouse) -> None:
    pytest.importorskip("fsspec")
    t = clickhouse.tables["chained"]
    local = pbch.open_part(t.data_dir / t.parts[0], t.sql)
    import fsspec

    memory = fsspec.filesystem("memory")
    for f in (t.data_dir / t.parts[0]).iterdir():
        memory.pipe(f"/ch-test/{t.parts[0]}/{f.name}", f.read_bytes())
    for url in ((t.data_dir / t.parts[0]).as_uri(), f"memory://ch-test/{t.parts[0]}"):
        remote = pbch.open_part(url, t.sql)
        for name, idx in local.indexes.items():
            assert [f.to_bytes() for g in idx.filters for f in g] == [
                f.to_bytes() for g in remote.indexes[name].filters for f in g
            ]
    memory.rm("/ch-test", recursive=True)


def test_filter_bytes_round_trip(clickhouse: ClickHouse) -> None:
    t = clickhouse.tables["typed_wide"]
    part = pbch.open_part(t.data_dir / t.parts[0], t.sql)
    for name in ("bf_s", "tk_s", "ng_s"):
        f = part.filters(name)[0]
        kwargs = {"kind": f.kind, "column_type": f.column_type, "num_hashes": f.num_hashes,
                  "seed": f.seed, "ngram_size": f.ngram_size}  # fmt: skip
        again = pbch.ClickHouseBloomFilter.from_bytes(f.to_bytes(), **kwargs)
        assert again == f
        assert 0 < f.fill() < 1
        assert 0 < f.fpp() < 1
        assert f.estimate_ndv() > 0


def test_indexes_not_read_are_said(clickhouse: ClickHouse) -> None:
    t = clickhouse.tables["typed_wide"]
    part = pbch.open_part(t.data_dir / t.parts[0], t.sql)
    assert "mm_u" not in part.indexes  # not a Bloom filter
    assert set(part.skipped) == {"tk_lower"}
    with pytest.raises(ValueError, match="not plain columns"):
        part.might_match("tk_lower", "hasToken", "w1")

"""The Bloom index's token and n-gram filters against ClickHouse itself: chDB writes a MergeTree
table of log lines with ``tokenbf_v1`` and ``ngrambf_v1`` indexes, one granule of 64 rows each;
the same rows, in part order, written as Parquet row groups of 64 rows and indexed with the same
parameters give, row group for granule, the very bytes of ClickHouse's filters, and a lookup
keeps exactly the granules ClickHouse reads for hasToken, LIKE, startsWith and endsWith."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom import clickhouse as pbch
from parquet_bloom import index
from parquet_bloom._index import layout
from parquet_bloom._index.lookup import IndexSegment
from parquet_bloom._prune.text import match_tokens
from tests.clickhouse.conftest import ClickHouse

GRANULE = 64
INDEXES = {
    "tk": ("tokenbf_v1(256, 3, 0)", index.TextFilter("msg", size=256, hashes=3, seed=0)),
    "ng": (
        "ngrambf_v1(3, 512, 2, 7)",
        index.TextFilter("msg", "ngrambf", n=3, size=512, hashes=2, seed=7),
    ),
}
WORDS = ["GET", "/api/v1", "users", "login?next=", "error", "timeout", "café", "日本語", "ok-200"]


@pytest.fixture(scope="module")
def logs(clickhouse: ClickHouse, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    rng = random.Random(8)
    lines = [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 5))) + f" id{rng.randint(0, 999)}"
        for _ in range(GRANULE * 10 + 17)
    ]
    work = tmp_path_factory.mktemp("text-logs")
    pq.write_table(pa.table({"msg": lines}), work / "in.parquet")
    indexes = ", ".join(
        f"INDEX {name} msg TYPE {kind} GRANULARITY 1" for name, (kind, _) in INDEXES.items()
    )
    clickhouse.session.query(
        f"CREATE TABLE db.text_logs (msg String, {indexes}) ENGINE = MergeTree "
        f"ORDER BY tuple() SETTINGS index_granularity={GRANULE}, index_granularity_bytes=0, "
        "min_bytes_for_wide_part=0"
    )
    clickhouse.session.query(
        f"INSERT INTO db.text_logs SELECT msg FROM file('{work / 'in.parquet'}', Parquet)"
    )
    rows = clickhouse.query("SELECT _part, msg FROM db.text_logs ORDER BY _part, _part_offset")
    assert len({r["_part"] for r in rows}) == 1
    data = work / "data"
    data.mkdir()
    pq.write_table(
        pa.table({"msg": [r["msg"] for r in rows]}),
        data / "logs.parquet",
        row_group_size=GRANULE,
    )
    target = work / "logs.puffin"
    index.build_index(data, [], target, text=[f for _, f in INDEXES.values()])
    return data, target


def _row_group_filters(target: Path, spec: str) -> list[bytes]:
    """Each row group's filter, taken back out of the index's slices."""
    with IndexSegment(str(target)) as segment:
        (blob,) = [
            b
            for b in segment.footer.blobs
            if b.type == layout.TEXT_SLICES_BLOB and b.properties[layout.TEXT] == spec
        ]
        n = int(blob.properties[layout.ROW_GROUPS])
        size = int(blob.properties[layout.NUM_BYTES])
        data = np.frombuffer(segment.read_blob(blob), np.uint8).reshape(8 * size, -1)
    bits = np.unpackbits(data, axis=1, bitorder="little")[:, :n]  # (positions, row groups)
    return [np.packbits(bits[:, i], bitorder="little").tobytes() for i in range(n)]


@pytest.mark.parametrize("name", list(INDEXES))
def test_row_group_filters_are_clickhouses_granules(
    clickhouse: ClickHouse, logs: tuple[Path, Path], name: str
) -> None:
    _, target = logs
    (info,) = clickhouse.query(
        "SELECT data_paths, create_table_query FROM system.tables "
        "WHERE database = 'db' AND name = 'text_logs'"
    )
    (part,) = pbch.open_table(info["data_paths"][0], info["create_table_query"])
    theirs = [g[0].to_bytes() for g in part.index(name).filters]
    key = index.TextSpec(*_spec_parts(INDEXES[name][0])).key
    ours = _row_group_filters(target, key)
    assert len(ours) == len(theirs) == 11
    assert ours == theirs


def _spec_parts(kind: str) -> tuple[str, int | None, int, int, int]:
    name, _, rest = kind.partition("(")
    parts = [int(p) for p in rest.rstrip(")").split(",")]
    if name == "tokenbf_v1":
        return name, None, parts[0], parts[1], parts[2]
    return name, parts[0], parts[1], parts[2], parts[3]


PREDICATES = [
    ("has_token", "timeout", "hasToken(msg, 'timeout')"),
    ("has_token", "id7", "hasToken(msg, 'id7')"),
    ("has_token", "日本語", "hasToken(msg, '日本語')"),
    ("match_like", "%café users%", "msg LIKE '%café users%'"),
    ("match_like", "%id12_%", "msg LIKE '%id12_%'"),
    ("starts_with", "GET error ", "startsWith(msg, 'GET error ')"),
    ("ends_with", " id999", "endsWith(msg, ' id999')"),
]


@pytest.mark.parametrize(("name", "predicate"), [(n, p) for n in INDEXES for p in PREDICATES])
def test_lookup_keeps_clickhouses_granules(
    clickhouse: ClickHouse, logs: tuple[Path, Path], name: str, predicate: tuple[str, str, str]
) -> None:
    _, target = logs
    function, pattern, sql = predicate
    granules = clickhouse.granules("text_logs", sql, name, list(INDEXES))
    expected = sorted(g for _, g in granules)
    with index.BloomIndex(target) as opened:
        spec = next(s for s in opened.text_filters("msg") if s.kind == INDEXES[name][0][:10])
        tokens = match_tokens(function, pattern, spec.n)
        if not tokens:
            assert expected == list(range(11))
            return
        found = opened.lookup_tokens("msg", spec, tokens)
    assert sorted(e.row_group for e in found.row_groups) == expected

"""Sizing advice (issue #30, Why 2): pb.advise on files pyarrow writes and on Delta and Iceberg
tables; the check's size warnings; resize's default size is the advised one."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom import _audit as audit
from parquet_bloom import _sizing as sizing
from parquet_bloom._sbbf import expected_fpp
from parquet_bloom._size_advice import ADVICE_FLAVORS, advise_size, size_notes

ROWS = 500_000
ROW_GROUP = 125_000


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report's case: 125,000 distinct order ids a row group, filters sized for them at 1 %."""
    path = tmp_path_factory.mktemp("advise") / "orders.parquet"
    ids = np.arange(ROWS)
    data = pa.table({"order_id": ids, "customer": ids % 1000, "paid": ids % 2 == 0})
    options = {"order_id": {"ndv": ROW_GROUP, "fpp": 0.01}}
    pq.write_table(data, path, row_group_size=ROW_GROUP, bloom_filter_options=options)
    return path


def test_advice_for_a_filtered_column(orders: Path) -> None:
    advice = pb.advise(orders, ["order_id"], fpp=0.01)
    (column,) = advice.columns
    md = pq.ParquetFile(orders).metadata
    checked = audit.check_file(orders, ["order_id"])
    assert column.column == "order_id" and column.physical_type == "INT64"
    assert len(column.chunks) == md.num_row_groups == ROWS // ROW_GROUP
    for chunk, check in zip(column.chunks, checked.chunks, strict=True):
        assert (chunk.ndv, chunk.ndv_basis) == (ROW_GROUP, "exact")
        assert chunk.column_bytes == md.row_group(chunk.row_group).column(0).total_compressed_size
        assert chunk.filter_bytes == check.num_bytes
        assert chunk.filter_fpp == expected_fpp(ROW_GROUP, check.num_bytes)
        # The spec's bits a value, -8 / ln(1 - fpp ** (1/8)), give 147.7 KiB, rounded up to
        # 256 KiB: a rate of 0.10 %.
        assert chunk.advised_bytes == pb.optimal_num_bytes(ROW_GROUP, 0.01) == 256 * 1024
        assert chunk.advised_fpp == pytest.approx(0.001, abs=0.0002)
        assert chunk.spec_bytes == pytest.approx(ROW_GROUP * -(math.log(1 - 0.01**0.125) ** -1))
        assert chunk.writers == {
            f: sizing.expected_num_bytes(ROW_GROUP, 0.01, f) for f in ADVICE_FLAVORS
        }
        assert chunk.half_fpp == expected_fpp(ROW_GROUP, 128 * 1024)
    assert column.filter_bytes == sum(c.num_bytes for c in checked.chunks)
    text = str(advice)
    assert text.startswith(f"{orders}: 1 file, target fpp 1.00%\n")
    assert "column order_id (INT64), 4 row groups" in text
    assert "advised at fpp 1.00%: 1 MiB" in text
    assert "at half the advised sizes: 512 KiB, expected fpp up to 2.73%" in text
    assert json.loads(json.dumps(advice.to_dict()))["columns"][0]["chunks"][0]["ndv"] == ROW_GROUP


def test_a_looser_target_halves_the_advice(orders: Path) -> None:
    (column,) = pb.advise(orders, "order_id", fpp=0.05).columns
    assert {c.advised_bytes for c in column.chunks} == {128 * 1024}


def test_ndv_estimated_from_the_filter_past_the_limit(orders: Path) -> None:
    advice = pb.advise(orders, ["order_id", "customer"], exact_limit=1000)
    by_name = {c.column: c for c in advice.columns}
    for chunk in by_name["order_id"].chunks:
        assert chunk.ndv_basis == "estimated from the filter"
        assert chunk.ndv == pytest.approx(ROW_GROUP, rel=0.05)
    # A chunk without a filter is counted however large.
    assert {(c.ndv, c.ndv_basis, c.filter_bytes) for c in by_name["customer"].chunks} == {
        (1000, "exact", None)
    }
    assert "(~: NDV estimated from the chunk's filter)" in str(advice)


def test_columns_default_to_those_with_filters(orders: Path, tmp_path: Path) -> None:
    assert [c.column for c in pb.advise(orders).columns] == ["order_id"]
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), plain)
    with pytest.raises(ValueError, match="none has a Bloom filter; name the columns"):
        pb.advise(plain)
    assert pb.advise(plain, ["x"]).columns[0].chunks[0].ndv == 3
    with pytest.raises(ValueError, match="no column 'nope'"):
        pb.advise(orders, ["nope"])
    with pytest.raises(ValueError, match="fpp"):
        pb.advise(orders, ["x"], fpp=1.5)
    booleans = pb.advise(orders, ["paid", "customer"])
    assert [c.column for c in booleans.columns] == ["customer"]


def test_size_notes() -> None:
    assert size_notes(pb.optimal_num_bytes(1000, 0.01), 1000, 0.01) == []
    (over,) = size_notes(1024 * 1024, 1000, 0.01)
    assert over.startswith("oversized: 1,048,576 bytes for 1,000 distinct values, which need 2,048")
    assert "1,046,528 bytes wasted" in over
    (under,) = size_notes(32, 1000, 0.01)
    assert under.startswith("undersized: 32 bytes for 1,000 distinct values")
    assert advise_size(0, 0.01).advised_bytes == 32


def test_the_check_warns_of_oversized_filters(tmp_path: Path) -> None:
    """parquet-java's size without an NDV, 1 MiB, for a few hundred values: a warning."""
    plain, path = tmp_path / "plain.parquet", tmp_path / "big.parquet"
    pq.write_table(pa.table({"k": np.arange(20_000) % 300}), plain)
    pb.rewrite_bloom_filters(plain, path, columns=["k"], num_bytes=1024 * 1024)
    report = audit.check_file(path)
    assert report.ok  # a warning, not a violation
    (chunk,) = report.chunks
    assert any(n.startswith("oversized:") for n in chunk.notes)
    # resize by default writes the advised size: the warning goes.
    resized = tmp_path / "resized.parquet"
    pb.rewrite_bloom_filters(path, resized, columns="existing")
    (after,) = audit.check_file(resized).chunks
    assert after.num_bytes == pb.advise(resized, ["k"]).columns[0].chunks[0].advised_bytes
    assert not any(n.startswith(("oversized", "undersized")) for n in after.notes)


def test_advise_a_delta_table(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from tests.tables import delta_tables as tables

    root = tmp_path / "t"
    tables.build_history(str(root))
    live = DeltaTable(str(root)).file_uris()
    advice = pb.advise(root, ["id"])
    assert advice.files == len(live) < len(list(root.rglob("*.parquet")))
    assert advice.source.endswith(f"(Delta, version {DeltaTable(str(root)).version()})")
    assert pb.advise(DeltaTable(str(root)), ["id"]).to_dict() == advice.to_dict()
    assert all(c.filter_bytes for c in advice.columns[0].chunks)
    with pytest.raises(ValueError, match="not a Delta table's root"):
        pb.advise(root / "part=even", ["id"])


def test_advise_an_iceberg_table(tmp_path: Path) -> None:
    from tests.tables import iceberg_tables as it

    table = it.appended_and_renamed(tmp_path)
    advice = pb.advise(table, ["id"])
    assert advice.files == 4
    assert sum(c.ndv for c in advice.columns[0].chunks) == 60  # every id once


def test_sizes_that_cannot_hold_the_values_are_refused(orders: Path, tmp_path: Path) -> None:
    """--ndv 0 wrote 32-byte filters for 100,000 values; now nothing is written."""
    out = tmp_path / "out.parquet"
    with pytest.raises(ValueError, match=r"ndv=0 sizes every filter for no value at all"):
        pb.rewrite_bloom_filters(orders, out, columns=["order_id"], ndv=0)
    with pytest.raises(ValueError, match=r"num_bytes=32 cannot hold ndv=100000 .* needs 131072"):
        pb.rewrite_bloom_filters(orders, out, columns=["order_id"], ndv=100_000, num_bytes=32)
    with pytest.raises(ValueError, match="more than the 134217728 bytes a filter may have"):
        pb.rewrite_bloom_filters(orders, out, columns=["order_id"], ndv=10**9, fpp=1e-6)
    assert not out.exists()
    # A size that holds them is taken.
    pb.rewrite_bloom_filters(orders, out, columns=["order_id"], ndv=100_000, num_bytes=131072)
    assert {c.num_bytes for c in audit.check_file(out, ["order_id"]).chunks} == {131072}

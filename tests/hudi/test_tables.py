"""Real Hudi tables written by Hudi itself (../shared/fixtures/hudi): every base file's filter
holds every key of the file, and the filter built from those keys with the file's parameters is
the file's, byte for byte; the key lookup over a table finds each key's file and, for keys the
table does not hold, mostly none."""

from __future__ import annotations

import io
import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquet_bloom import hudi
from tests.hudi.conftest import base_files_on_disk

pytestmark = pytest.mark.usefixtures("implementation")  # compiled, then numpy alone


def _keys(path: Path) -> list[str]:
    return pq.read_table(path, columns=["_hoodie_record_key"]).column(0).to_pylist()


def test_every_base_file_holds_its_keys_and_rebuilds_byte_for_byte(
    hudi_tables: dict[str, Path],
) -> None:
    files = keys_checked = 0
    for root in hudi_tables.values():
        for path in base_files_on_disk(root):
            f = hudi.read_bloom_filter(path)
            assert f is not None and f.source == str(path)
            keys = _keys(path)
            assert f.might_contain_many(keys).all(), path  # no false negatives
            assert all(f.might_contain(k) for k in keys)
            # The file's own parameters: nr as num_entries, Hudi's default fpp giving its bits
            # and hashes, the default bound.
            assert f.type == "DYNAMIC_V0" and f.keys_per_row is not None
            size = hudi.filter_size(f.keys_per_row, hudi.DEFAULT_FPP)
            assert (size.num_bits, size.num_hashes) == (f.vector_size, f.num_hashes)
            rebuilt = hudi.build_bloom_filter(keys, f.type, f.keys_per_row, hudi.DEFAULT_FPP)
            value = hudi.read_footer_metadata(path)[hudi.FOOTER_KEY]
            assert rebuilt.to_footer_value() == value  # byte for byte
            assert f.to_footer_value() == value
            assert (f.min_record_key, f.max_record_key) == (min(keys), max(keys))
            assert (rebuilt.min_record_key, rebuilt.max_record_key) == (min(keys), max(keys))
            assert f.keys_added == len(keys)
            report = hudi.check_file(path)
            assert report.ok and report.exact and report.num_keys == len(keys), report
            files += 1
            keys_checked += len(keys)
    assert files >= len(hudi_tables) and keys_checked >= files


def test_one_footer_read_through_every_kind_of_source(hudi_tables: dict[str, Path]) -> None:
    path = base_files_on_disk(hudi_tables["sample_table__cow__v9_txns_simple_meta"])[0]
    expected = hudi.read_bloom_filter(path)
    assert expected is not None
    data = path.read_bytes()
    for source, kwargs in (
        ("file://" + str(path), {}),  # (as_uri() would quote the "=" of region=us)
        (io.BytesIO(data), {}),
        (str(path), {"tail_size": 1 << 20}),
    ):
        found = hudi.read_bloom_filter(source, **kwargs)  # type: ignore[arg-type]
        assert found is not None and found.to_bytes() == expected.to_bytes()
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/hudi/f.parquet", data)
    found = hudi.read_bloom_filter("memory://hudi/f.parquet")
    assert found is not None and found == expected
    from parquet_bloom._hudi.footer import read_hudi_metadata

    one = read_hudi_metadata(str(path), tail_size=1 << 20)
    assert one.requests == 1  # the ~430 KB footer in the 1 MiB tail
    two = read_hudi_metadata(str(path))
    assert two.requests == 2  # past the 64 KiB local tail: one more read
    assert one.metadata == two.metadata


def _latest_keys(root: Path) -> dict[str, list[str]]:
    """key -> the latest base files holding it, from the files themselves (and the table's
    file listing through hudi-rs), the oracle of the lookup."""
    import hudi as hudi_rs

    table = hudi_rs.HudiTable(str(root))
    holders: dict[str, list[str]] = {}
    for piece in table.get_file_slices():
        path = os.path.join(root, *piece.base_file_relative_path().split("/"))
        for key in _keys(Path(path)):
            holders.setdefault(key, []).append(path)
    snapshot = pa.Table.from_batches(table.read())
    assert set(snapshot.column("_hoodie_record_key").to_pylist()) == set(holders)
    return holders


def test_files_for_keys_finds_every_key_of_every_table(hudi_tables: dict[str, Path]) -> None:
    rnd = random.Random(7)
    present = absent_with_files = absent = 0
    for root in hudi_tables.values():
        holders = _latest_keys(root)
        missing = [f"TXN-{i:03d}" for i in range(100, 400)] + [str(i) for i in range(5, 300)]
        missing += [f"{rnd.getrandbits(64):016x}" for _ in range(300)]
        missing = [k for k in missing if k not in holders]
        found = hudi.files_for_keys(str(root), list(holders) + missing)
        for key, paths in holders.items():
            assert set(paths) <= set(found[key]), key  # no false negative
        present += len(holders)
        absent += len(missing)
        absent_with_files += sum(bool(found[k]) for k in missing)
        confirmed = hudi.lookup_keys(str(root), list(holders) + missing, confirm=True)
        assert {k: v for k, v in confirmed.files.items() if v} == holders
        assert confirmed.confirmed and confirmed.requests > 0
        assert confirmed.pruned_by_range + confirmed.pruned_by_filter > 0
    assert present > 0
    # "mostly none": at fpp 1e-9 a filter lets an absent key through about never.
    assert absent > 2000 and absent_with_files <= absent // 100


def test_files_for_keys_by_url_and_the_counts(hudi_tables: dict[str, Path]) -> None:
    root = hudi_tables["sample_table__cow__v8_simplekeygen_nonhivestyle"]
    by_path = hudi.files_for_keys(str(root), ["1", "2", "3", "4", "nope"])
    report = hudi.lookup_keys(root.as_uri(), ["1", "2", "3", "4", "nope"])
    assert {
        k: [Path(p.removeprefix("file://")).name for p in v] for k, v in report.files.items()
    } == {k: [Path(p).name for p in v] for k, v in by_path.items()}
    assert by_path["nope"] == []
    assert len(report.base_files) == 3 and report.pairs == 15
    assert (
        report.pruned_by_range
        + report.pruned_by_filter
        + sum(len(v) for v in report.files.values())
        == report.pairs
    )


def test_files_for_keys_refuses_bad_keys(hudi_tables: dict[str, Path]) -> None:
    root = str(next(iter(hudi_tables.values())))
    with pytest.raises(TypeError):
        hudi.files_for_keys(root, "1")
    with pytest.raises(TypeError):
        hudi.files_for_keys(root, [b"1"])  # type: ignore[list-item]
    assert hudi.files_for_keys(root, []) == {}

"""Pruning Delta tables and datasets of encrypted files (docs/encryption.md#pruning-tables-and-
datasets): the row groups kept are decided by the decrypted filters, and the rows read from
them (``to_table()``, pyarrow's scan given decryption made from the same keys) equal pyarrow's
own decrypted scan of the table filtered the same way. A column whose key is not available
keeps its row groups and is reported; a key that does not decrypt stops the pruning with a
located DecryptionError.

The tables (``tables.py``): pyarrow's encrypted files through a KMS (per-column keys, ``c`` in
plaintext) or with one key given directly (uniform), filters added by this library's rewrite;
and parquet-testing's file with Bloom filters under per-column keys given directly.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
import pytest
from deltalake import DeltaTable

import parquet_bloom as pb
from parquet_bloom import BloomFilterWarning, DecryptionKeys, delta
from parquet_bloom.errors import DecryptionError, MissingKeyError
from tests.encryption import tables
from tests.encryption.keys import COLUMN_KEYS, DATA, FOOTER_KEY, InServerWrapKms
from tests.encryption.test_parquet_testing import bloom_values
from tests.encryption.test_pyarrow_files import MASTER_KEYS, ROW_GROUP

FILES = 2
FOOTERS = pytest.mark.parametrize("plaintext_footer", [False, True], ids=["PARE", "PAR1"])


def kms_table(root: Path, plaintext_footer: bool) -> Path:
    """Two files of distinct rows (``a`` 0..5999), filters on ``a`` and ``b`` (encrypted with
    their own keys), none on ``c`` (plaintext)."""
    tables.encrypted_table(root, plaintext_footer=plaintext_footer, files=FILES, distinct=True)
    return tables.with_filters(root, ["a", "b"], tables.keys())


@pytest.fixture(scope="module", params=[False, True], ids=["PARE", "PAR1"])
def kms_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return kms_table(tmp_path_factory.mktemp("kms") / "t", request.param)


def by_a(table: pa.Table) -> pa.Table:
    return table.sort_by("a")


def oracle(root: Path, expr: pc.Expression, columns: list[str] | None = None) -> pa.Table:
    return by_a(tables.pyarrow_scan(root).to_table(filter=expr, columns=columns))


def expressions() -> dict[str, pc.Expression]:
    return {
        "a present": pc.field("a") == 1500,
        "a absent": pc.field("a") == 10**9,
        "b present": pc.field("b") == "v4321",
        "b absent": pc.field("b") == "nothing",
        "a in": pc.field("a").isin([7, 3999, 5999, 10**9, -1]),
        "b in, absent": pc.field("b").isin(["x", "y", "v-3"]),
        "a and b": (pc.field("a") == 2500) & (pc.field("b") == "v2500"),
        "a or b": (pc.field("a") == 12) | (pc.field("b").isin(["v4000", "zz"])),
        "c (no filter)": pc.field("c") == 100.0,
    }


@pytest.mark.parametrize("name", sorted(expressions()))
def test_rows_equal_pyarrows_decrypted_scan(kms_root: Path, name: str) -> None:
    expr = expressions()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", BloomFilterWarning)  # every filter decrypted
        result = delta.prune(str(kms_root), expr, decryption=tables.keys())
    expected = oracle(kms_root, expr)
    assert by_a(result.to_table()).equals(expected)
    assert by_a(result.dataset.to_table(filter=expr)).equals(expected)
    bloom = result.report.bloom
    assert bloom.row_groups == FILES * 3 and bloom.filters_unreadable == 0
    # What the filters decide: a row group holding a match is kept; with no match anywhere
    # (and a filtered column), most are skipped (one might be a false positive).
    kept_groups = bloom.row_groups - bloom.row_groups_skipped
    holding = {(int(a) // ROW_GROUP) for a in expected.column("a").to_pylist()}
    assert kept_groups >= len(holding)
    if name.endswith("absent") or name == "b in, absent":
        assert expected.num_rows == 0 and bloom.row_groups_skipped >= bloom.row_groups - 1
    if name == "c (no filter)":
        assert bloom.row_groups_skipped == 0
    # Only the columns asked for, read late.
    narrow = result.to_table(columns=["c", "a"])
    assert by_a(narrow).equals(oracle(kms_root, expr, ["c", "a"]).select(["c", "a"]))


def test_no_false_negative_on_any_value(kms_root: Path) -> None:
    # Every value of every row group is in that row group's decrypted filter ...
    keys = tables.keys()
    for uri in DeltaTable(str(kms_root)).file_uris():
        data = pq.ParquetFile(uri, decryption_properties=_kms_properties())
        with pb.BloomFilterReader(uri, decryption=keys) as reader:
            for rg in range(reader.num_row_groups):
                rows = data.read_row_group(rg, columns=["a", "b"])
                for column in ("a", "b"):
                    bloom = reader.filter(rg, column)
                    assert bloom is not None
                    values = rows.column(column).to_numpy(zero_copy_only=False)
                    assert bloom.might_contain_many(values).all(), (uri, rg, column)
    # ... and the table's prune keeps each value's row group: a point lookup of a value
    # every 97 rows (its first and last too), on both columns, against pyarrow's scan.
    scan = tables.pyarrow_scan(kms_root).to_table()
    wanted = sorted({*range(0, FILES * tables.ROWS, 97), FILES * tables.ROWS - 1})
    for a in wanted:
        for expr in (pc.field("a") == a, pc.field("b") == f"v{a}"):
            result = delta.prune(str(kms_root), expr, decryption=keys)
            found = result.to_table()
            assert found.num_rows == 1 and found.column("a")[0].as_py() == a, expr
    assert scan.num_rows == FILES * tables.ROWS


def _kms_properties() -> Any:
    factory = pe.CryptoFactory(lambda config: tables.kms())
    return factory.file_decryption_properties(
        pe.KmsConnectionConfig(), pe.DecryptionConfiguration()
    )


def test_a_column_whose_key_is_missing_is_kept_and_reported(kms_root: Path) -> None:
    lacking = DecryptionKeys.from_kms(
        InServerWrapKms({k: v for k, v in MASTER_KEYS.items() if k != "kb"})
    )
    # On b, whose key the KMS does not give: every row group kept, each filter reported.
    expr = pc.field("b") == "v10"
    with pytest.warns(BloomFilterWarning, match="could not be read") as caught:
        result = delta.prune(str(kms_root), expr, decryption=lacking)
    assert all("'b'" in str(w.message) for w in caught)
    bloom = result.report.bloom
    assert bloom.row_groups_skipped == 0 and bloom.filters_unreadable == FILES * 3
    assert len(bloom.unreadable_files) == FILES
    assert bloom.unreadable_columns == ("b",) and "6 filters unreadable (b)" in str(bloom)
    # Its rows cannot be read either (pyarrow asks the same KMS): a located error.
    with pytest.raises(DecryptionError, match="KMS client does not give") as info:
        result.to_table()
    assert info.value.source in {str(Path(u)) for u in DeltaTable(str(kms_root)).file_uris()}
    assert info.value.column == "b"
    # On a (its key given), decided by a's filters; the columns readable are read.
    expr = pc.field("a").isin([1, 4500])
    with warnings.catch_warnings():
        warnings.simplefilter("error", BloomFilterWarning)  # b's filters are not needed
        result = delta.prune(str(kms_root), expr, decryption=lacking)
    assert result.report.bloom.row_groups_skipped == FILES * 3 - 2
    got = result.to_table(columns=["a", "c"])
    assert by_a(got).equals(oracle(kms_root, expr, ["a", "c"]))
    with pytest.raises(DecryptionError, match="column\\(s\\) 'b'"):
        result.to_table()


class WrongKms(InServerWrapKms):
    """A KMS that answers, wrongly: every key it unwraps is another."""

    def unwrap_key(self, wrapped_key: str, master_key_identifier: str) -> bytes:
        key = super().unwrap_key(wrapped_key, master_key_identifier)
        return bytes(b ^ 1 for b in key)


@FOOTERS
def test_a_wrong_key_stops_the_pruning(tmp_path: Path, plaintext_footer: bool) -> None:
    root = kms_table(tmp_path / "t", plaintext_footer)
    files = {str(Path(u)) for u in DeltaTable(str(root)).file_uris()}
    expr = pc.field("a") == 5
    # A KMS giving wrong keys: the data keys it unwraps do not decrypt.
    with pytest.raises(DecryptionError, match="does not decrypt") as info:
        delta.prune(str(root), expr, decryption=DecryptionKeys.from_kms(WrongKms(MASTER_KEYS)))
    assert info.value.source in files and "pruning stops" in str(info.value)
    # A wrong footer key given directly: the footer does not decrypt, or its signature does
    # not verify.
    with pytest.raises(DecryptionError, match="footer") as info:
        delta.prune(str(root), expr, decryption=DecryptionKeys(bytes(16)))
    assert info.value.source in files and info.value.module == "footer"
    # A wrong key of a column (the footer's right): that column's metadata does not decrypt.
    with pb.BloomFilterReader(sorted(files)[0], decryption=tables.keys()) as reader:
        footer_key = reader._decryptor.footer_key()  # type: ignore[union-attr]
    keys = DecryptionKeys(footer_key, {"a": bytes(16)})
    with pytest.raises(DecryptionError, match="does not decrypt") as info:
        delta.prune(str(root), expr, decryption=keys)
    assert info.value.source == sorted(files)[0] and info.value.column == "a"
    assert info.value.module == "column metadata"
    # Never garbage, never everything kept in silence: without the right keys nothing returns.


def test_uniform_keys_given_directly(tmp_path: Path) -> None:
    root = tables.uniform_table(tmp_path / "t")
    keys = DecryptionKeys(tables.UNIFORM_KEY)
    tables.with_filters(root, ["a", "b"], keys)
    direct = pe.create_decryption_properties(tables.UNIFORM_KEY)
    scan = tables.pyarrow_scan(root, ds.ParquetFragmentScanOptions(decryption_properties=direct))
    for expr in expressions().values():
        with warnings.catch_warnings():
            warnings.simplefilter("error", BloomFilterWarning)
            result = delta.prune(str(root), expr, decryption=keys)
        assert by_a(result.to_table()).equals(by_a(scan.to_table(filter=expr)))
    result = delta.prune(str(root), pc.field("a") == 10**9, decryption=keys)
    assert result.report.bloom.row_groups_skipped >= FILES * 3 - 1
    with pytest.raises(DecryptionError, match="footer"):
        delta.prune(str(root), pc.field("a") == 1, decryption=DecryptionKeys(bytes(16)))


def test_column_keys_given_directly(tmp_path: Path) -> None:
    """parquet-testing's file with Bloom filters on two columns with keys of their own: their
    filters prune with the keys given directly; pyarrow, which takes a footer key only, cannot
    read those columns, and the scan says so and what to do."""
    root = tmp_path / "t"
    root.mkdir()
    bloom = DATA / "encrypt_columns_and_footer_bloom_filter.parquet.encrypted"
    paths = [Path(shutil.copy(bloom, root / f"part-{k}.parquet")) for k in range(2)]
    direct = pe.create_decryption_properties(FOOTER_KEY)
    schema = pq.read_schema(paths[0], decryption_properties=direct)
    tables.register(root, paths, schema, rows=2000)
    keys = DecryptionKeys(FOOTER_KEY, COLUMN_KEYS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BloomFilterWarning)
        absent = delta.prune(str(root), pc.field("double_field") == -0.25, decryption=keys)
        value = float(bloom_values()["double_field"][-1])  # the reference reader's
        present = delta.prune(str(root), pc.field("double_field") == value, decryption=keys)
    assert absent.report.bloom.files_skipped == 2 and absent.to_table().num_rows == 0
    assert present.report.bloom.row_groups_skipped == 0
    with pytest.raises(DecryptionError, match="from_kms") as info:
        present.to_table()
    assert info.value.source == str(paths[0]) and info.value.column == "double_field"
    # The plaintext columns pyarrow reads with the footer key.
    plain = delta.prune(str(root), pc.field("int32_field") == 7, decryption=keys)
    got = plain.to_table(columns=["int32_field", "name"])
    one = pq.read_table(paths[0], decryption_properties=direct, columns=["int32_field", "name"])
    one = one.filter(pc.field("int32_field") == 7)
    assert one.num_rows == 1 and got.equals(pa.concat_tables([one, one]))
    # Without double_field's key its filter is reported, its row groups kept.
    lacking = DecryptionKeys(FOOTER_KEY, {"float_field": COLUMN_KEYS["float_field"]})
    with pytest.warns(BloomFilterWarning, match="no key was given"):
        kept = delta.prune(str(root), pc.field("double_field") == -0.25, decryption=lacking)
    assert kept.report.bloom.row_groups_skipped == 0
    assert kept.report.bloom.filters_unreadable == 2


@FOOTERS
def test_prune_of_paths_scans_with_the_same_keys(tmp_path: Path, plaintext_footer: bool) -> None:
    root = kms_table(tmp_path / "t", plaintext_footer)
    files = [str(Path(u)) for u in DeltaTable(str(root)).file_uris()]
    for expr in expressions().values():
        result = pb.prune(files, expr, decryption=tables.keys())
        assert result.report.filters_unreadable == 0
        assert by_a(result.to_table()).equals(oracle(root, expr))
        assert by_a(result.dataset.to_table(filter=expr)).equals(oracle(root, expr))
    # The table's directory stands for its live files.
    expr = pc.field("b").isin(["v1", "v5998"])
    result = pb.prune(str(root), expr, decryption=tables.keys())
    assert result.report.row_groups_skipped == FILES * 3 - 2
    assert by_a(result.to_table()).equals(oracle(root, expr))
    # A key that does not decrypt stops it here too.
    with pytest.raises(DecryptionError, match="pruning stops"):
        pb.prune(files, expr, decryption=DecryptionKeys.from_kms(WrongKms(MASTER_KEYS)))


def test_the_cli_probes_and_prunes_a_table_with_a_decryption_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from parquet_bloom.cli import main
    from tests.encryption.test_kms_config import KMS, config_file

    root = kms_table(tmp_path / "t", plaintext_footer=False)

    def keys_file(name: str, config: dict[str, Any]) -> list[str]:
        (tmp_path / name).mkdir()
        return ["--decryption-config", str(config_file(tmp_path / name, config))]

    keyed = keys_file("right", {"kms": KMS})
    names = sorted(Path(u).name for u in DeltaTable(str(root)).file_uris())
    # probe on the table's directory: its live files, each probed with the keys.
    capsys.readouterr()
    assert main(["probe", "--json", *keyed, "--column", "a", "4500", "--", str(root)]) == 0
    document = json.loads(capsys.readouterr().out)
    found = {
        Path(f["path"]).name: [g["row_group"] for g in f["row_groups"] if g["result"] != "excluded"]
        for f in document["files"]
    }
    assert found == {names[0]: [], names[1]: [1]}
    # table prune: the files and row groups left.
    assert main(["table", "prune", "--json", str(root), "--column", "b", "v4500", *keyed]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(Path(f["path"]).name, f["row_groups"]) for f in document["files"]] == [(names[1], [1])]
    assert main(["table", "prune", str(root), "--column", "a", "-5", *keyed]) == 1
    capsys.readouterr()
    # Without keys nothing can be decided (every row group kept, warned); wrong keys stop it.
    assert main(["table", "prune", "--json", str(root), "--column", "a", "-5"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["report"]["bloom"]["row_groups_skipped"] == 0
    assert "keeping all row groups" in err
    wrong = {"kms": {**KMS, "connection": {"custom_kms_conf": {"kf": "x" * 16}}}}
    wrong_keys = keys_file("wrong", wrong)
    assert main(["table", "prune", str(root), "--column", "a", "-5", *wrong_keys]) == 0
    out, err = capsys.readouterr()
    assert "no key" in err or "could not unwrap" in err  # the KMS refuses: a missing key
    bad = {"footer_key": "hex:" + "00" * 16}
    bad_keys = keys_file("bad", bad)
    assert main(["table", "prune", str(root), "--column", "a", "-5", *bad_keys]) == 2
    assert "does not decrypt" in capsys.readouterr().err
    # table inspect reads the encrypted footers and filters with the keys.
    assert main(["table", "inspect", "--json", str(root), *keyed]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["columns"]["a"]["row_groups"] == document["columns"]["b"]["row_groups"] == 6
    # table check checks the decrypted filters (their rate: the pages stay encrypted).
    assert main(["table", "check", "--json", str(root), *keyed]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] and document["filters_checked"] == 12
    report = delta.check(str(root), decryption=tables.keys())
    assert report.ok and report.filters_checked == 12


def test_a_table_of_plaintext_and_encrypted_files(tmp_path: Path) -> None:
    """A table being moved to encryption: a plaintext file beside an encrypted one is refused
    by keys that do not allow plaintext files (it may be a file stripped of its encryption),
    and read with those that do."""
    root = tmp_path / "t"
    root.mkdir()
    encrypted = tables.pyarrow_files.write(root / "part-0.parquet")  # no filters
    plain = root / "part-1.parquet"
    rows = tables.pyarrow_files.table(tables.ROWS)
    pq.write_table(rows, plain, row_group_size=ROW_GROUP, bloom_filter_options={"a": True})
    tables.register(root, [encrypted, plain], rows.schema)
    expr = pc.field("a").isin([5, 3500])
    with pytest.raises(DecryptionError, match="not encrypted") as info:
        delta.prune(str(root), expr, decryption=tables.keys())
    assert info.value.source == str(plain) and "allow_plaintext_files=True" in str(info.value)
    mixed = DecryptionKeys.from_kms(tables.kms(), allow_plaintext_files=True)
    result = delta.prune(str(root), expr, decryption=mixed)
    assert result.report.bloom.row_groups_skipped == 2  # the plaintext file's, by its filters
    assert by_a(result.to_table()).equals(oracle(root, expr))
    assert result.to_table().num_rows == 2


def test_the_cli_prunes_an_iceberg_table_with_a_decryption_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from parquet_bloom.cli import main
    from tests.encryption import iceberg_encrypted as ie
    from tests.encryption.test_kms_config import config_file

    root = tmp_path / "t"
    table = ie.encrypted_table(root)  # filters on a, b (own keys) and c (plaintext)
    monkeypatch.setenv("PYICEBERG_CATALOG__TEST__URI", f"sqlite:///{root}/catalog.db")
    monkeypatch.setenv("PYICEBERG_CATALOG__TEST__WAREHOUSE", (root / "warehouse").as_uri())
    connection = {"custom_kms_conf": {k: v.decode() for k, v in ie.MASTER_KEYS.items()}}
    kms = {"client": "tests.encryption.keys:ConfiguredKms", "connection": connection}
    keyed = ["--decryption-config", str(config_file(tmp_path, {"kms": kms}))]
    names = sorted(str(t.file.file_path) for t in table.scan().plan_files())
    target = ["db.enc", "--catalog", "test"]
    capsys.readouterr()
    assert main(["table", "prune", "--json", *target, "--column", "b", "v4500", *keyed]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(f["path"], f["row_groups"]) for f in document["files"]] == [(names[1], [1])]
    assert main(["table", "prune", *target, "--column", "a", "-5", *keyed]) == 1
    capsys.readouterr()
    assert main(["table", "inspect", "--json", *target, *keyed]) == 0
    columns = json.loads(capsys.readouterr().out)["columns"]
    assert {c: t["row_groups"] for c, t in columns.items()} == {"a": 6, "b": 6, "c": 6}
    # table check takes keys for Delta tables only: refused here, saying so.
    assert main(["table", "check", *target, *keyed]) == 2
    assert "Delta tables of encrypted files only" in capsys.readouterr().err


def test_a_tampered_filter_stops_the_pruning(tmp_path: Path) -> None:
    """A filter's bitset that does not authenticate (one byte flipped) is not a filter to keep
    the row group for in silence: AES-GCM cannot tell it from a wrong key."""
    root = kms_table(tmp_path / "t", plaintext_footer=False)
    path = Path(sorted(DeltaTable(str(root)).file_uris())[0])
    with pb.BloomFilterReader(path, decryption=tables.keys()) as reader:
        chunk = reader.column_chunk(1, "a")
    assert chunk.bloom_filter_offset is not None and chunk.bloom_filter_length is not None
    data = bytearray(path.read_bytes())
    data[chunk.bloom_filter_offset + chunk.bloom_filter_length - 5] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(DecryptionError, match="does not decrypt") as info:
        delta.prune(str(root), pc.field("a") == 1500, decryption=tables.keys())
    err = info.value
    assert (err.source, err.row_group, err.column) == (str(path), 1, "a")
    assert err.module == "Bloom filter bitset"
    # A lookup on another column reads no filter of a: the pruning goes on.
    result = delta.prune(str(root), pc.field("b") == "v1500", decryption=tables.keys())
    assert result.to_table().column("a").to_pylist() == [1500]


class PicklingKms(InServerWrapKms):
    """The test KMS made from a connection config (its master keys in ``custom_kms_conf``), as
    a pyarrow ``kms_client_factory`` makes one, and picklable."""

    def __init__(self, config: pe.KmsConnectionConfig | dict[str, str]) -> None:
        conf = config if isinstance(config, dict) else config.custom_kms_conf
        self.conf = dict(conf)
        super().__init__({k: v.encode() for k, v in self.conf.items()})

    def __reduce__(self) -> tuple[type, tuple[dict[str, str]]]:
        return (PicklingKms, (self.conf,))


def make_kms(config: pe.KmsConnectionConfig) -> PicklingKms:
    return PicklingKms(config)


def test_keys_from_a_kms_factory_and_its_config_scan_and_pickle(tmp_path: Path) -> None:
    """from_kms(factory, config): the config reaches pyarrow's CryptoFactory with the client,
    and the keys still pickle (pyarrow's KmsConnectionConfig does not: kept as its fields)."""
    import pickle

    root = kms_table(tmp_path / "t", plaintext_footer=True)
    conf = {k: v.decode() for k, v in MASTER_KEYS.items()}
    config = pe.KmsConnectionConfig(kms_instance_id="lake", custom_kms_conf=conf)
    keys = DecryptionKeys.from_kms(make_kms, config)
    copy = pickle.loads(pickle.dumps(keys))
    for made in (keys, copy):
        given = made.kms_connection_config
        assert given.kms_instance_id == "lake" and dict(given.custom_kms_conf) == conf
        expr = pc.field("a").isin([3, 5000])
        assert by_a(delta.prune(str(root), expr, decryption=made).to_table()).equals(
            oracle(root, expr)
        )


def test_prune_of_paths_whose_first_footer_key_the_kms_does_not_give(tmp_path: Path) -> None:
    """pyarrow takes the dataset's schema from the first file's footer, asking the KMS client
    for its key: a client that refuses it (raising its own error, here a KeyError) made
    ``prune`` of paths raise that error as is. A missing key keeps the file's row groups, as
    for any file whose footer cannot be read; the schema comes from a file that can be read."""
    root = tmp_path / "t"
    root.mkdir()
    encrypted = tables.pyarrow_files.write(root / "part-0.parquet")  # footer key kf
    plain = root / "part-1.parquet"
    rows = tables.pyarrow_files.table(tables.ROWS)
    pq.write_table(rows, plain, row_group_size=ROW_GROUP, bloom_filter_options={"a": True})
    no_footer_key = InServerWrapKms({k: v for k, v in MASTER_KEYS.items() if k != "kf"})
    keys = DecryptionKeys.from_kms(no_footer_key, allow_plaintext_files=True)
    expr = pc.field("a").isin([5, 3500])
    with pytest.warns(BloomFilterWarning, match="keeping all row groups"):
        result = pb.prune([str(encrypted), str(plain)], expr, decryption=keys)
    report = result.report
    assert report.unreadable_files == (str(encrypted),)
    assert report.row_groups_skipped == 2  # the plaintext file's, by its filters
    assert next(f.path for f in result.dataset.get_fragments()) == str(encrypted)
    # No footer readable at all: a located error naming the key, not the client's KeyError.
    with pytest.raises(MissingKeyError, match="could not unwrap") as info:
        pb.prune([str(encrypted)], expr, decryption=keys)
    assert info.value.source == str(encrypted)


def test_the_cli_names_the_config_member_that_allows_plaintext_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plaintext file read with a --decryption-config that does not allow plaintext files:
    the message says what to put in the config file, not the Python parameter."""
    from parquet_bloom.cli import main
    from tests.encryption.test_kms_config import KMS, config_file

    root = tmp_path / "t"
    root.mkdir()
    encrypted = tables.pyarrow_files.write(root / "part-0.parquet")
    plain = root / "part-1.parquet"
    rows = tables.pyarrow_files.table(tables.ROWS)
    pq.write_table(rows, plain, row_group_size=ROW_GROUP, bloom_filter_options={"a": True})
    tables.register(root, [encrypted, plain], rows.schema)
    keyed = ["--decryption-config", str(config_file(tmp_path, {"kms": KMS}))]
    capsys.readouterr()
    assert main(["table", "prune", str(root), "--column", "a", "5", *keyed]) == 2
    err = capsys.readouterr().err
    assert "not encrypted" in err and '"allow_plaintext_files": true' in err, err
    assert "DecryptionKeys(" not in err and "allow_plaintext_files=True" not in err
    assert main(["probe", *keyed, "--column", "a", "5", "--", str(plain)]) == 2
    err = capsys.readouterr().err
    assert '"allow_plaintext_files": true' in err and "DecryptionKeys(" not in err, err


def test_the_cli_probe_stops_on_a_wrong_column_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """probe with a column key that does not decrypt: an error naming the file and column
    (docs/cli.md#encrypted-files, as table prune stops), not "might contain" in every row
    group as for a key not given."""
    from parquet_bloom.cli import main
    from tests.encryption.test_kms_config import config_file

    root = kms_table(tmp_path / "t", plaintext_footer=False)
    path = sorted(str(Path(u)) for u in DeltaTable(str(root)).file_uris())[0]
    with pb.BloomFilterReader(path, decryption=tables.keys()) as reader:
        footer_key = reader._decryptor.footer_key()  # type: ignore[union-attr]
    assert footer_key is not None
    config = {"footer_key": "hex:" + footer_key.hex(), "column_keys": {"a": "hex:" + "00" * 16}}
    keyed = ["--decryption-config", str(config_file(tmp_path, config))]
    capsys.readouterr()
    assert main(["probe", *keyed, "--column", "a", "1500", "--", path]) == 2
    err = capsys.readouterr().err
    assert "does not decrypt" in err and path in err and "'a'" in err, err
    # Without a's key: every row group might contain it, and the probe says why.
    config = {"footer_key": "hex:" + footer_key.hex()}
    (tmp_path / "footer").mkdir()
    keyed = ["--decryption-config", str(config_file(tmp_path / "footer", config))]
    assert main(["probe", "--json", *keyed, "--column", "a", "1500", "--", path]) == 0
    (found,) = json.loads(capsys.readouterr().out)["files"]
    assert [g["result"] for g in found["row_groups"]] == ["might contain"] * 3


@pytest.mark.parametrize("given", ["keys.json", {"footer_key": FOOTER_KEY}, FOOTER_KEY])
def test_decryption_that_is_not_keys_is_a_type_error(kms_root: Path, given: Any) -> None:
    """prune of paths and delta.prune told an AttributeError from inside ('str' object has no
    attribute 'kms_client'); check_file and the reader say what decryption= must be."""
    files = [str(Path(u)) for u in DeltaTable(str(kms_root)).file_uris()]
    expr = pc.field("a") == 1
    with pytest.raises(TypeError, match="decryption must be a DecryptionKeys"):
        pb.prune(files, expr, decryption=given)
    with pytest.raises(TypeError, match="decryption must be a DecryptionKeys"):
        delta.prune(str(kms_root), expr, decryption=given)


def test_the_cli_warnings_of_table_prune_name_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """table prune of encrypted files without keys warns, per file, that its row groups are
    kept: the warning names --decryption-config FILE, not the Python decryption=."""
    from parquet_bloom.cli import main

    root = kms_table(tmp_path / "t", plaintext_footer=False)
    capsys.readouterr()
    assert main(["table", "prune", str(root), "--column", "a", "5"]) == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if "warning:" in line]
    assert len(warned) == FILES and all("--decryption-config FILE" in w for w in warned), err
    assert "decryption=" not in err


def test_a_scan_failure_says_which_keys_pyarrow_was_given(tmp_path: Path) -> None:
    """Column keys given without a footer key, on plaintext footers: pyarrow is given no key,
    and the scan's error says so (it said "a key retriever", which was not given)."""
    root = kms_table(tmp_path / "t", plaintext_footer=True)
    keys = DecryptionKeys(column_keys={"b": bytes(16)})
    expr = pc.field("c") == 750.0
    result = delta.prune(str(root), expr, decryption=keys)  # c has no filter: all kept
    assert result.to_table(columns=["c"]).column("c").to_pylist() == [750.0]
    with pytest.raises(DecryptionError, match="column\\(s\\) 'a'") as info:
        result.to_table(columns=["a", "c"])
    assert "no footer key was given" in str(info.value) and "retriever" not in str(info.value)


class WrongBKms(InServerWrapKms):
    """A KMS that gives b's key wrong, the others right."""

    def unwrap_key(self, wrapped_key: str, master_key_identifier: str) -> bytes:
        key = super().unwrap_key(wrapped_key, master_key_identifier)
        return bytes(b ^ 1 for b in key) if master_key_identifier == "kb" else key


def test_a_scan_of_a_column_whose_key_is_wrong_does_not_say_the_key_is_missing(
    kms_root: Path,
) -> None:
    """b's filters are not needed for a lookup on a, so its wrong key is met only by the
    scan: the error says a key that does not decrypt is one cause, not only a missing key."""
    keys = DecryptionKeys.from_kms(WrongBKms(MASTER_KEYS))
    result = delta.prune(str(kms_root), pc.field("a") == 1500, decryption=keys)
    assert result.to_table(columns=["a", "c"]).column("a").to_pylist() == [1500]
    with pytest.raises(DecryptionError, match="'b'") as info:
        result.to_table()
    assert "does not decrypt" in str(info.value)


class _UnwrapOnly:
    """A KMS client as DecryptionKeys.from_kms takes one: unwrap_key alone."""

    def __init__(self) -> None:
        self.kms = InServerWrapKms(MASTER_KEYS)

    def unwrap_key(self, wrapped_key: str, master_key_identifier: str) -> bytes:
        return bytes(self.kms.unwrap_key(wrapped_key, master_key_identifier))


def test_the_scans_kms_client_unwraps_and_refuses_to_wrap() -> None:
    from parquet_bloom._prune.decryption import _arrow_kms_client_class

    inner = InServerWrapKms(MASTER_KEYS)
    wrapped = inner.wrap_key(FOOTER_KEY, "kf")
    client = _arrow_kms_client_class()(_UnwrapOnly())
    assert isinstance(client, pe.KmsClient)
    assert client.unwrap_key(wrapped, "kf") == FOOTER_KEY
    with pytest.raises(DecryptionError, match="serves reads") as raised:
        client.wrap_key(FOOTER_KEY, "kf")
    assert FOOTER_KEY.hex() not in str(raised.value) and "0123456789012345" not in str(raised.value)

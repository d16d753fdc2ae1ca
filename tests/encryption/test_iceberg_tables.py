"""An Iceberg table of encrypted data files (``iceberg_encrypted.py``: pyarrow's CryptoFactory,
registered by pyiceberg's fast append): pruned by the filters the keys decrypt, and rewritten
with its keys in one snapshot, every new file still encrypted."""

from __future__ import annotations

import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import BooleanExpression, EqualTo, GreaterThan, In
from pyiceberg.table import Table

import parquet_bloom as pb
import parquet_bloom.iceberg as pbi
from parquet_bloom import BloomFilterWarning, DecryptionKeys
from parquet_bloom.errors import DecryptionError, UnsupportedFileError
from tests.encryption import iceberg_encrypted as ie

FOOTERS = pytest.mark.parametrize("plaintext_footer", [False, True], ids=["encrypted", "plaintext"])


def local(uri: str) -> str:
    return uri.removeprefix("file://")


def kept_rows(result: pbi.IcebergPruneResult, schema: pa.Schema) -> pa.Table:
    """The rows of the files and row groups a prune keeps, read by pyarrow with its own
    decryption properties (what docs/encryption.md tells to do instead of to_arrow())."""
    props = ie.decryption_properties()
    parts = []
    for path, groups in result.row_groups.items():
        file = pq.ParquetFile(local(path), decryption_properties=props)
        chosen = range(file.num_row_groups) if groups is None else groups
        parts.append(file.read_row_groups(list(chosen)))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def everything(table: Table) -> pa.Table:
    """Every row of the table, read by pyarrow with its decryption properties."""
    props = ie.decryption_properties()
    files = sorted(local(t.file.file_path) for t in table.scan().plan_files())
    return pa.concat_tables(pq.read_table(f, decryption_properties=props) for f in files)


CASES: list[tuple[BooleanExpression, pc.Expression, dict[str, list[int]]]] = [
    (EqualTo("a", 10), pc.field("a") == 10, {"part-0": [0]}),
    (EqualTo("a", 4500), pc.field("a") == 4500, {"part-1": [1]}),
    (
        In("b", ["v10", "v4500"]),
        pc.field("b").isin(["v10", "v4500"]),
        {"part-0": [0], "part-1": [1]},
    ),
    (EqualTo("c", 1000.0), pc.field("c") == 1000.0, {"part-0": [2]}),
    (EqualTo("a", -5), pc.field("a") == -5, {}),
    (In("b", ["w1", "w2"]), pc.field("b").isin(["w1", "w2"]), {}),
]


def names(result: pbi.IcebergPruneResult) -> dict[str, list[int] | None]:
    return {p.rsplit("/", 1)[1].removesuffix(".parquet"): g for p, g in result.row_groups.items()}


@FOOTERS
def test_prune_decides_by_the_decrypted_filters(tmp_path: Path, plaintext_footer: bool) -> None:
    table = ie.encrypted_table(tmp_path / "t", plaintext_footer=plaintext_footer)
    whole = everything(table)
    assert whole.num_rows == ie.FILES * ie.ROWS
    for expression, arrow, expected in CASES:
        with warnings.catch_warnings():
            warnings.simplefilter("error", BloomFilterWarning)
            result = pbi.prune(table, expression, decryption=ie.keys())
        assert names(result) == expected, expression
        bloom = result.report.bloom
        assert bloom.filters_unreadable == 0
        assert bloom.row_groups_skipped == bloom.row_groups - sum(map(len, expected.values()))
        # The rows the kept row groups hold, filtered, are every matching row of the table.
        assert kept_rows(result, whole.schema).filter(arrow).equals(whole.filter(arrow)), expression
        if expected:
            assert whole.filter(arrow).num_rows > 0
            # pyiceberg cannot read them: refused before pyarrow is given the file.
            with pytest.raises(UnsupportedFileError, match="decryption_properties") as info:
                result.to_arrow()
            assert info.value.source in result.row_groups
        else:
            assert result.tasks == [] and result.to_arrow().num_rows == 0


@FOOTERS
def test_a_missing_column_key_keeps_its_row_groups(tmp_path: Path, plaintext_footer: bool) -> None:
    table = ie.encrypted_table(tmp_path / "t", plaintext_footer=plaintext_footer)
    lacking = ie.keys({k: v for k, v in ie.MASTER_KEYS.items() if k != "kb"})
    with pytest.warns(BloomFilterWarning, match="could not be read.*could not unwrap"):
        result = pbi.prune(table, EqualTo("b", "v10"), decryption=lacking)
    assert names(result) == {"part-0": [0, 1, 2], "part-1": [0, 1, 2]}
    assert result.report.bloom.filters_unreadable == 6
    assert result.report.bloom.unreadable_files == tuple(sorted(result.row_groups))
    whole = everything(table)
    assert kept_rows(result, whole.schema).filter(pc.field("b") == "v10").num_rows == 1
    # The columns whose keys are there still decide.
    result = pbi.prune(table, EqualTo("a", 10), decryption=lacking)
    assert names(result) == {"part-0": [0]}


def _footer_key(table: Table) -> bytes | None:
    path = local(next(iter(table.scan().plan_files())).file.file_path)
    with pb.BloomFilterReader(path, decryption=ie.keys()) as reader:
        found = reader.footer_decryption()
    return None if found is None else found[0]


@FOOTERS
def test_a_wrong_key_is_a_located_error(tmp_path: Path, plaintext_footer: bool) -> None:
    table = ie.encrypted_table(tmp_path / "t", plaintext_footer=plaintext_footer)
    paths = {t.file.file_path for t in table.scan().plan_files()}
    with pytest.raises(DecryptionError) as info:
        pbi.prune(table, EqualTo("a", 10), decryption=DecryptionKeys(footer_key=b"x" * 16))
    assert info.value.module == "footer" and "file://" + str(info.value.source) in paths
    # The right footer key (none needed under a plaintext footer), a wrong key for "a".
    footer = _footer_key(table)
    assert (footer is None) == plaintext_footer
    wrong = DecryptionKeys(footer_key=footer, column_keys={"a": b"y" * 16})
    with pytest.raises(DecryptionError) as info:
        pbi.prune(table, EqualTo("a", 10), decryption=wrong)
    assert info.value.module == "column metadata" and info.value.column == "a"
    assert "file://" + str(info.value.source) in paths
    # Keys given as bytes, not as DecryptionKeys: a TypeError before anything is read.
    with pytest.raises(TypeError, match="DecryptionKeys"):
        pbi.prune(table, EqualTo("a", 10), decryption=b"x" * 16)  # type: ignore[arg-type]


@FOOTERS
def test_without_keys_every_row_group_is_kept(tmp_path: Path, plaintext_footer: bool) -> None:
    table = ie.encrypted_table(tmp_path / "t", plaintext_footer=plaintext_footer)
    if plaintext_footer:
        # The plaintext footer is read; the filters of encrypted columns are not.
        result = pbi.prune(table, EqualTo("a", 10))
        assert names(result) == {"part-0": [0, 1, 2], "part-1": [0, 1, 2]}
        # pyarrow would abort the process on this file's encrypted column metadata: refused.
        with pytest.raises(UnsupportedFileError, match="encrypted data file"):
            result.to_arrow()
        # The plaintext column's filters are read and decide.
        assert names(pbi.prune(table, EqualTo("c", 1000.0))) == {"part-0": [2]}
    else:
        with pytest.warns(BloomFilterWarning, match="keeping all row groups"):
            result = pbi.prune(table, EqualTo("a", 10))
        assert names(result) == {"part-0": None, "part-1": None}


@FOOTERS
def test_files_left_unread_are_checked_before_the_scan(
    tmp_path: Path, plaintext_footer: bool
) -> None:
    """A filter no Bloom filter decides reads no footer; with keys, to_arrow() reads them to
    refuse encrypted files before pyarrow is given one."""
    table = ie.encrypted_table(tmp_path / "t", plaintext_footer=plaintext_footer)
    result = pbi.prune(table, GreaterThan("a", 10), decryption=ie.keys())
    assert names(result) == {"part-0": None, "part-1": None}
    with pytest.raises(UnsupportedFileError, match="and 1 more encrypted files"):
        result.to_arrow()
    # Keys without the footer key: an encrypted footer is encrypted all the same.
    lacking = DecryptionKeys(column_keys={"a": b"y" * 16})
    result = pbi.prune(table, GreaterThan("a", 10), decryption=lacking)
    with pytest.raises(UnsupportedFileError, match="encrypted data file"):
        result.to_arrow()


# -- rewrite ---------------------------------------------------------------------------------


def _check_rewritten(table: Table, plaintext_footer: bool, columns: set[str]) -> None:
    props = ie.decryption_properties()
    files = sorted(local(t.file.file_path) for t in table.scan().plan_files())
    assert len(files) == ie.FILES and all(".bloom-" in f for f in files)
    for k, path in enumerate(files):
        assert Path(path).read_bytes()[-4:] == (b"PAR1" if plaintext_footer else b"PARE")
        assert pq.read_table(path, decryption_properties=props).equals(
            ie.data(k).cast(pq.read_schema(path, decryption_properties=props))
        )
        with pb.BloomFilterReader(path, decryption=ie.keys()) as reader:
            filters, failed = reader.filters_with_errors()
            assert failed == {} and {c for _, c in filters} == columns
            first = k * ie.ROWS
            if "a" in columns:
                assert reader.row_groups_might_contain("a", [first + 2500]) == [2]
            if "b" in columns:
                assert reader.row_groups_might_contain("b", [f"v{first + 10}"]) == [0]


@FOOTERS
def test_an_iceberg_table_of_encrypted_files_rewritten_with_its_keys(
    tmp_path: Path, plaintext_footer: bool
) -> None:
    table = ie.encrypted_table(tmp_path / "t", plaintext_footer=plaintext_footer, bloom=())
    before = table.current_snapshot()
    assert before is not None
    # Without keys no file can be rewritten, and nothing is committed.
    report = pbi.rewrite_bloom_filters(table, columns=["a", "b"])
    assert report.rewritten == [] and len(report.failed) == ie.FILES and report.version is None
    assert all("decryption=" in error for _, error in report.failed), report.failed
    table.refresh()
    assert table.current_snapshot() == before
    assert not list((Path(local(table.location())) / "data").glob("*.bloom-*"))
    report = pbi.rewrite_bloom_filters(table, columns=["a", "b"], decryption=ie.keys())
    assert len(report.rewritten) == ie.FILES and not report.failed, report.failed
    table.refresh()
    after = table.current_snapshot()
    assert after is not None and after.snapshot_id == report.version
    assert after.parent_snapshot_id == before.snapshot_id  # one snapshot
    assert after.summary is not None and after.summary[pbi.SNAPSHOT_PROPERTY] == "build 1,2"
    _check_rewritten(table, plaintext_footer, {"a", "b"})
    # The new filters prune, and the rows kept are those pyarrow reads.
    result = pbi.prune(table, In("a", [10, 4500]), decryption=ie.keys())
    assert sorted(map(len, result.row_groups.values())) == [1, 1]
    arrow = pc.field("a").isin([10, 4500])
    whole = everything(table)
    assert kept_rows(result, whole.schema).filter(arrow).equals(whole.filter(arrow))
    # A resize and a removal, with the same keys.
    report = pbi.rewrite_bloom_filters(
        table, columns=["a"], existing_only=True, fpp=0.001, decryption=ie.keys()
    )
    assert len(report.rewritten) == ie.FILES and not report.failed
    report = pbi.rewrite_bloom_filters(table, remove=["b"], decryption=ie.keys())
    assert len(report.rewritten) == ie.FILES and not report.failed
    table.refresh()
    _check_rewritten(table, plaintext_footer, {"a"})


def test_the_table_commands_take_a_decryption_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from parquet_bloom.cli import main
    from tests.encryption.test_kms_config import config_file

    root = tmp_path / "t"
    table = ie.encrypted_table(root, bloom=())
    monkeypatch.setenv("PYICEBERG_CATALOG__TEST__URI", f"sqlite:///{root}/catalog.db")
    monkeypatch.setenv("PYICEBERG_CATALOG__TEST__WAREHOUSE", (root / "warehouse").as_uri())
    connection = {"custom_kms_conf": {k: v.decode() for k, v in ie.MASTER_KEYS.items()}}
    kms = {"client": "tests.encryption.keys:ConfiguredKms", "connection": connection}
    config = config_file(tmp_path, {"kms": kms})
    keyed = ["--decryption-config", str(config)]
    command = ["table", "add", "db.enc", "--catalog", "test"]
    assert main([*command, "--column", "a", *keyed]) == 0
    assert f"{ie.FILES} files rewritten" in capsys.readouterr().out
    table.refresh()
    _check_rewritten(table, False, {"a"})
    snapshot = table.current_snapshot()
    assert main([*command, "--column", "b"]) == 2
    out, err = capsys.readouterr()
    assert "nothing was committed" in err and "decryption=" in out
    table.refresh()
    assert table.current_snapshot() == snapshot


def test_the_three_stages_take_the_keys(tmp_path: Path) -> None:
    """plan_rewrite holds no keys; run_job and commit_rewrite are given them. A commit without
    them cannot read the new encrypted footers: nothing committed, the new files deleted."""
    table = ie.encrypted_table(tmp_path / "t", bloom=())
    before = table.current_snapshot()
    plan = pbi.plan_rewrite(table, columns=["b"])
    options = pbi.storage_options_for(table)
    outcomes = [pbi.run_job(job, plan.options, options, decryption=ie.keys()) for job in plan.jobs]
    assert all(o.ok for o in outcomes)
    report = pbi.commit_rewrite(table, plan, outcomes)
    assert report.version is None and len(report.failed) == ie.FILES
    assert all("decryption=" in error for _, error in report.failed), report.failed
    assert not any(Path(local(job.target)).exists() for job in plan.jobs)
    table.refresh()
    assert table.current_snapshot() == before
    outcomes = [pbi.run_job(job, plan.options, options, decryption=ie.keys()) for job in plan.jobs]
    report = pbi.commit_rewrite(table, plan, outcomes, decryption=ie.keys())
    assert len(report.rewritten) == ie.FILES and report.version is not None
    table.refresh()
    _check_rewritten(table, False, {"b"})

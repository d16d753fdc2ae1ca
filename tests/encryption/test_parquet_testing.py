"""Reading parquet-testing's encrypted files (written by parquet-java and Arrow C++).

The oracle for the filters: every value of the encrypted columns, read by the reference page
decryptor in ``tests/encryption/reference.py`` (independent of ``parquet_bloom._crypto``), is
found by our probe of the filters we decrypt (no false negative), and our own filter built
from those values at the file's filter size equals the decrypted bitset bit for bit.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
import pytest

import parquet_bloom as pb
from parquet_bloom import BloomFilterWarning, DecryptionKeys
from parquet_bloom.errors import DecryptionError, MissingKeyError, UnsupportedFileError
from tests.encryption import reference
from tests.encryption.keys import (
    AAD_PREFIX,
    COLUMN_KEYS,
    DATA,
    FOOTER_KEY,
    KEY_IDS,
    InServerWrapKms,
)

BLOOM = DATA / "encrypt_columns_and_footer_bloom_filter.parquet.encrypted"
SCHEMA = [
    "boolean_field",
    "int32_field",
    "int64_field",
    "int96_field",
    "float_field",
    "double_field",
    "ba_field",
    "flba_field",
]
# file -> (algorithm, AAD prefix it needs supplied or checks)
FILES = {
    "encrypt_columns_and_footer": ("AES_GCM_V1", None),
    "encrypt_columns_and_footer_aad": ("AES_GCM_V1", None),
    "encrypt_columns_and_footer_ctr": ("AES_GCM_CTR_V1", None),
    "encrypt_columns_and_footer_disable_aad_storage": ("AES_GCM_V1", AAD_PREFIX),
    "encrypt_columns_plaintext_footer": ("AES_GCM_V1", None),
    "uniform_encryption": ("AES_GCM_V1", None),
}


def keys(**kwargs: object) -> DecryptionKeys:
    return DecryptionKeys(FOOTER_KEY, COLUMN_KEYS, **kwargs)  # type: ignore[arg-type]


def path(name: str) -> Path:
    return DATA / f"{name}.parquet.encrypted"


@pytest.mark.parametrize("name", sorted(FILES))
def test_footer_decrypts(name: str) -> None:
    algorithm, prefix = FILES[name]
    with pb.BloomFilterReader(path(name), decryption=keys(aad_prefix=prefix)) as reader:
        assert reader.encryption_algorithm == algorithm
        assert reader.columns == SCHEMA
        assert reader.metadata.num_rows == 50
        chunks = reader.row_group(0)
        encrypted = {c.path for c in chunks if c.encrypted}
        if name == "uniform_encryption":
            assert encrypted == set(SCHEMA)
        else:
            assert encrypted == {"double_field", "float_field"}
        # These files have no filters: every column chunk reads as "none", none unreadable.
        filters, failed = reader.filters_with_errors()
        assert filters == {} and failed == {}
        assert reader.unreadable_columns(0) == {}
        # The decrypted ColumnMetaData agree with the plain ones on where chunks lie.
        assert all(c.num_values >= 50 and c.data_page_offset >= 4 for c in chunks)


def test_uniform_file_matches_pyarrow() -> None:
    """pyarrow decrypts the uniformly encrypted file with the footer key: same row groups,
    rows and column chunk offsets as ours."""
    props = pe.create_decryption_properties(FOOTER_KEY)
    theirs = pq.ParquetFile(path("uniform_encryption"), decryption_properties=props).metadata
    with pb.BloomFilterReader(
        path("uniform_encryption"), decryption=DecryptionKeys(FOOTER_KEY)
    ) as reader:
        assert reader.num_row_groups == theirs.num_row_groups
        for i, chunk in enumerate(reader.row_group(0)):
            col = theirs.row_group(0).column(i)
            assert chunk.path == col.path_in_schema
            assert chunk.data_page_offset == col.data_page_offset
            assert chunk.total_compressed_size == col.total_compressed_size


def bloom_values() -> dict[str, np.ndarray]:
    """The values of the Bloom filter file's encrypted columns, by the reference reader."""
    data = BLOOM.read_bytes()
    out = {}
    with pb.BloomFilterReader(BLOOM, decryption=keys()) as reader:
        file_aad = reader._decryptor.file_aad  # type: ignore[union-attr]
        for chunk in reader.row_group(0):
            if not chunk.encrypted:
                continue
            out[chunk.path] = reference.column_values(
                data,
                start=chunk.data_page_offset,
                num_values=chunk.num_values,
                key=COLUMN_KEYS[chunk.path],
                file_aad=file_aad,
                row_group=0,
                column=chunk.column_index,
                dtype="<f8" if chunk.physical_type == "DOUBLE" else "<f4",
            )
    return out


def test_bloom_filters_hold_every_value() -> None:
    values = bloom_values()
    assert {k: len(v) for k, v in values.items()} == {"double_field": 2000, "float_field": 2000}
    # The plain columns, read by pyarrow with the footer key, say what rows these are.
    plain = pq.read_table(
        BLOOM,
        columns=["int32_field", "name"],
        decryption_properties=pe.create_decryption_properties(FOOTER_KEY),
    )
    assert plain.column("int32_field").to_pylist() == list(range(2000))
    with pb.BloomFilterReader(BLOOM, decryption=keys()) as reader:
        for column, vals in values.items():
            physical = "DOUBLE" if vals.dtype == np.float64 else "FLOAT"
            hashes = pb.hash_values(vals, physical)
            f = reader.filter(0, column)
            assert f is not None
            assert f.find_hashes(hashes).all()  # no false negative
            # Bit for bit: our filter of these values at the file's size.
            ours = pb.SplitBlockBloomFilter(f.num_bytes)
            ours.insert_hashes(hashes)
            assert ours.to_bytes() == f.to_bytes()
            # Every value kept by pruning, one literal at a time.
            for v in vals[:: max(1, len(vals) // 100)]:
                assert reader.row_groups_might_contain(column, [float(v)]) == [0]
        assert reader.filter(0, "int32_field") is None


def test_key_retriever_by_key_id() -> None:
    seen: list[bytes] = []

    def retrieve(key_metadata: bytes) -> bytes | None:
        seen.append(key_metadata)
        return KEY_IDS.get(key_metadata)

    with pb.BloomFilterReader(BLOOM, decryption=DecryptionKeys(key_retriever=retrieve)) as r:
        filters, failed = r.filters_with_errors()
    assert failed == {}
    assert sorted(filters) == [(0, "double_field"), (0, "float_field")]
    assert set(seen) == {b"kf", b"kc1", b"kc2"}


def test_missing_column_key_is_unreadable_and_kept() -> None:
    only = DecryptionKeys(FOOTER_KEY, {"double_field": COLUMN_KEYS["double_field"]})
    with pb.BloomFilterReader(BLOOM, decryption=only) as reader:
        filters, failed = reader.filters_with_errors()
        assert sorted(filters) == [(0, "double_field")]
        err = failed[(0, "float_field")]
        assert isinstance(err, MissingKeyError)
        assert (err.row_group, err.column, err.source) == (0, "float_field", str(BLOOM))
        assert set(reader.unreadable_columns(0)) == {"float_field"}
        with pytest.raises(MissingKeyError):
            reader.filter(0, "float_field")
        with pytest.warns(BloomFilterWarning, match="float_field"):
            assert reader.row_groups_might_contain("float_field", [12345.5]) == [0]


def test_no_keys_at_all() -> None:
    with pytest.raises(UnsupportedFileError, match="encrypted"):
        pb.BloomFilterReader(BLOOM)
    with pytest.raises(MissingKeyError, match="footer") as info:
        pb.BloomFilterReader(BLOOM, decryption=DecryptionKeys(column_keys=COLUMN_KEYS))
    assert info.value.module == "footer"


def test_wrong_keys_are_located_errors() -> None:
    wrong = b"x" * 16
    with pytest.raises(DecryptionError, match="footer") as info:
        pb.BloomFilterReader(BLOOM, decryption=DecryptionKeys(wrong, COLUMN_KEYS))
    assert info.value.module == "footer" and info.value.source == str(BLOOM)
    swapped = {"double_field": COLUMN_KEYS["float_field"], "float_field": wrong}
    with pb.BloomFilterReader(BLOOM, decryption=DecryptionKeys(FOOTER_KEY, swapped)) as r:
        filters, failed = r.filters_with_errors()
    assert filters == {}
    for column in ("double_field", "float_field"):
        err = failed[(0, column)]
        assert type(err) is DecryptionError
        assert (err.row_group, err.column, err.module) == (0, column, "column metadata")


def test_aad_prefix() -> None:
    stored = path("encrypt_columns_and_footer_aad")
    not_stored = path("encrypt_columns_and_footer_disable_aad_storage")
    with pb.BloomFilterReader(stored, decryption=keys(aad_prefix=AAD_PREFIX)) as r:
        assert r.columns == SCHEMA
    with pytest.raises(DecryptionError, match="AAD prefix"):
        pb.BloomFilterReader(stored, decryption=keys(aad_prefix=b"other"))
    with pytest.raises(MissingKeyError, match="AAD prefix"):
        pb.BloomFilterReader(not_stored, decryption=keys())
    with pytest.raises(DecryptionError, match="footer"):
        pb.BloomFilterReader(not_stored, decryption=keys(aad_prefix=b"testex"))


def test_plaintext_footer() -> None:
    name = path("encrypt_columns_plaintext_footer")
    # Without keys the footer is readable; the encrypted columns' filters are not.
    with pb.BloomFilterReader(name) as reader:
        assert reader.columns == SCHEMA
        assert reader.encryption_algorithm is None
    # Only the column keys: the footer is used unchecked.
    with pb.BloomFilterReader(name, decryption=DecryptionKeys(column_keys=COLUMN_KEYS)) as r:
        assert r.encryption_algorithm == "AES_GCM_V1"
        assert r.unreadable_columns(0) == {}
    # A wrong footer key fails the signature.
    with pytest.raises(DecryptionError, match="signature") as info:
        pb.BloomFilterReader(name, decryption=DecryptionKeys(b"y" * 16, COLUMN_KEYS))
    assert info.value.module == "footer"


def test_external_key_material_through_a_kms(tmp_path: Path) -> None:
    name = "external_key_material_java.parquet.encrypted"
    kms = InServerWrapKms()
    decryption = DecryptionKeys.from_kms(kms)
    with pb.BloomFilterReader(DATA / name, decryption=decryption) as reader:
        assert reader.columns == ["integers", "strings"]
        assert all(c.encrypted for c in reader.row_group(0))
        assert reader.filters_with_errors() == ({}, {})
    assert kms.unwraps >= 1
    # Without its key material file next to it the keys cannot be found.
    shutil.copy(DATA / name, tmp_path / name)
    with pytest.raises(DecryptionError, match="_KEY_MATERIAL_FOR_"):
        pb.BloomFilterReader(tmp_path / name, decryption=DecryptionKeys.from_kms(kms))
    # A KMS that does not hold the master key: the footer key is unavailable.
    with pytest.raises(DecryptionError, match=r"could not unwrap.*'kf'"):
        pb.BloomFilterReader(DATA / name, decryption=DecryptionKeys.from_kms(InServerWrapKms({})))


def test_key_arguments_checked() -> None:
    with pytest.raises(ValueError, match="15 bytes"):
        DecryptionKeys(b"x" * 15)
    with pytest.raises(ValueError, match="'c'"):
        DecryptionKeys(FOOTER_KEY, {"c": b"k" * 33})
    with pytest.raises(TypeError):
        DecryptionKeys("0123456789012345")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="DecryptionKeys"):
        pb.BloomFilterReader(BLOOM, decryption={"footer_key": FOOTER_KEY})  # type: ignore[arg-type]
    assert "0123" not in repr(keys())
    bad_length = DecryptionKeys(key_retriever=lambda metadata: b"short")
    with pytest.raises(DecryptionError, match="5 bytes"):
        pb.BloomFilterReader(BLOOM, decryption=bad_length)


AES256_FOOTER_KEY = b"01234567890123456789012345678901"
AES256_COLUMN_KEYS = {
    column: b"12345678901234567890123456789" + suffix
    for column, suffix in [
        ("double_field", b"012"),
        ("float_field", b"013"),
        ("boolean_field", b"014"),
        ("int32_field", b"015"),
        ("ba_field", b"016"),
        ("flba_field", b"017"),
        ("int64_field.list.element", b"018"),
        ("int96_field", b"019"),
    ]
}


@pytest.mark.parametrize("name", ["encrypt_columns_and_footer", "encrypt_columns_plaintext_footer"])
def test_aes256_every_column_with_its_own_key(name: str) -> None:
    """parquet-java 1.17's AES-256 files: eight columns, eight keys, every ColumnMetaData
    decrypted (an unreadable one would be reported), and each key only opens its column."""
    path = DATA / "aes256" / f"{name}.parquet.encrypted"
    keys = DecryptionKeys(AES256_FOOTER_KEY, AES256_COLUMN_KEYS)
    with pb.BloomFilterReader(path, decryption=keys) as reader:
        assert sorted(reader.columns) == sorted(AES256_COLUMN_KEYS)
        assert reader.unreadable_columns(0) == {}
        chunks = reader.row_group(0)
        assert all(c.encrypted and c.num_values >= 50 for c in chunks)
        assert reader.filters_with_errors() == ({}, {})
    rotated = dict(
        zip(AES256_COLUMN_KEYS, [*list(AES256_COLUMN_KEYS.values())[1:], b"x" * 32], strict=True)
    )
    with pb.BloomFilterReader(path, decryption=DecryptionKeys(AES256_FOOTER_KEY, rotated)) as r:
        errors = r.unreadable_columns(0)
    assert set(errors) == set(AES256_COLUMN_KEYS)
    assert all(
        type(e) is DecryptionError and e.module == "column metadata" for e in errors.values()
    )


def test_external_key_material_on_a_filesystem() -> None:
    """The key material file is found next to the data file on the data file's filesystem."""
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    name = "external_key_material_java.parquet.encrypted"
    material = f"_KEY_MATERIAL_FOR_{name}.json"
    fs.pipe(f"/enc/{name}", (DATA / name).read_bytes())
    fs.pipe(f"/enc/{material}", (DATA / material).read_bytes())
    try:
        decryption = DecryptionKeys.from_kms(InServerWrapKms())
        with pb.BloomFilterReader(f"/enc/{name}", filesystem=fs, decryption=decryption) as r:
            assert r.columns == ["integers", "strings"]
            assert r.unreadable_columns(0) == {}
        # A file object has no location: its external key material cannot be found.
        with (DATA / name).open("rb") as f, pytest.raises(DecryptionError, match="location"):
            pb.BloomFilterReader(f, decryption=DecryptionKeys.from_kms(InServerWrapKms()))
    finally:
        fs.rm("/enc", recursive=True)


def test_without_keys_an_encrypted_column_says_how_to_read_it() -> None:
    with pb.BloomFilterReader(path("encrypt_columns_plaintext_footer")) as reader:
        chunk = reader.column_chunk(0, "double_field")
        assert chunk.encrypted
        # In plaintext-footer mode the metadata of encrypted columns is stripped of the
        # filter's offset by parquet-java: nothing to read, nothing to report.
        filters, failed = reader.filters_with_errors()
        assert filters == {} and failed == {}
    with pb.BloomFilterReader(BLOOM, decryption=keys()) as reader:
        chunk = reader.column_chunk(0, "double_field")
    from parquet_bloom._locate import locate_filter

    loc_error = locate_filter  # the unkeyed path refuses it, saying what to do
    with pytest.raises(UnsupportedFileError, match="decryption="):
        loc_error(chunk, footer_start=10**9)

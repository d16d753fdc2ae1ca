"""An encrypted file's column chunks are decrypted when first asked for: probing one column of
a file whose columns have their own keys decrypts that column's ColumnMetaData and unwraps its
key alone; the rest of the file answers as if everything had been decrypted at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import parquet_bloom as pb
from parquet_bloom import DecryptionKeys
from parquet_bloom._crypto.file import FileDecryptor
from parquet_bloom.errors import MissingKeyError
from tests.encryption import test_pyarrow_files as pyarrow_files
from tests.encryption.keys import InServerWrapKms


@pytest.fixture(scope="module")
def filtered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Columns ``a`` and ``b`` under their own keys, ``c`` in plaintext, three row groups,
    filters on every column."""
    tmp = tmp_path_factory.mktemp("asked")
    raw = pyarrow_files.write(tmp / "raw.parquet")
    out = tmp / "filtered.parquet"
    keys = DecryptionKeys.from_kms(InServerWrapKms(pyarrow_files.MASTER_KEYS))
    pb.rewrite_bloom_filters(raw, out, columns=["a", "b", "c"], fpp=0.01, decryption=keys)
    return out


def decrypted_metadata(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (row group ordinal, column) of each ColumnMetaData decrypted from now on."""
    seen: list[tuple[int, int]] = []
    real = FileDecryptor.column_metadata

    def counting(self: FileDecryptor, chunk: Any, key: bytes, rg: int, column: int) -> Any:
        seen.append((rg, column))
        return real(self, chunk, key, rg, column)

    monkeypatch.setattr(FileDecryptor, "column_metadata", counting)
    return seen


def test_probing_one_column_decrypts_its_metadata_alone(
    filtered: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = decrypted_metadata(monkeypatch)
    kms = InServerWrapKms(pyarrow_files.MASTER_KEYS)
    with pb.BloomFilterReader(filtered, decryption=DecryptionKeys.from_kms(kms)) as reader:
        assert reader.row_groups_might_contain("a", [5]) == [0]
        assert sorted(seen) == [(0, 0), (1, 0), (2, 0)]
        unwraps = kms.unwraps  # the footer's key and a's (double wrapping: a KEK, a DEK)
        assert reader.row_groups_might_contain("a", [2500]) == [2]
        assert len(seen) == 3 and kms.unwraps == unwraps  # nothing decrypted twice
        # The whole row group, asked for now: b's metadata too, a's not again.
        chunks = reader.row_group(1)
        assert sorted(seen) == [(0, 0), (1, 0), (1, 1), (2, 0)]
        assert chunks[0] is reader.column_chunk(1, "a")
        assert reader.unreadable_columns(1) == {}


def test_one_chunk_and_its_row_group_agree(filtered: Path) -> None:
    """Whichever is asked for first, a chunk and its row group's list give the same facts."""

    def keys() -> DecryptionKeys:
        return DecryptionKeys.from_kms(InServerWrapKms(pyarrow_files.MASTER_KEYS))

    with pb.BloomFilterReader(filtered, decryption=keys()) as whole:
        expected = [whole.row_group(rg) for rg in range(3)]
    with pb.BloomFilterReader(filtered, decryption=keys()) as reader:
        singles = [[reader.column_chunk(rg, c) for c in "abc"] for rg in range(3)]
        assert singles == expected
        assert [reader.row_group(rg) for rg in range(3)] == expected
        assert reader.column_chunks == [c for rg in expected for c in rg]
    assert all(c.bloom_filter_offset is not None for rg in expected for c in rg)


def test_a_key_not_given_stops_only_its_column(filtered: Path) -> None:
    """b's master key is not in the KMS: probing a reads a's filters; b's row groups are
    kept, each with its located MissingKeyError."""
    kms = InServerWrapKms({k: v for k, v in pyarrow_files.MASTER_KEYS.items() if k != "kb"})
    with pb.BloomFilterReader(filtered, decryption=DecryptionKeys.from_kms(kms)) as reader:
        assert reader.row_groups_might_contain("a", [1500]) == [1]
        with pytest.warns(pb.BloomFilterWarning, match="could not unwrap"):
            assert reader.row_groups_might_contain("b", ["v1500"]) == [0, 1, 2]
        for rg in range(3):
            errors = reader.unreadable_columns(rg)
            assert set(errors) == {"b"}
            err = errors["b"]
            assert isinstance(err, MissingKeyError)
            assert (err.row_group, err.column, err.source) == (rg, "b", str(filtered))

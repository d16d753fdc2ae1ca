"""DecryptionKeys pickle (to be sent to other processes, Spark's executors): explicit keys, a
key retriever that pickles, a KMS whose client pickles (its unwrapped key-encryption keys left
behind); and ``check_picklable`` names the part that does not, never the keys."""

from __future__ import annotations

import base64
import pickle
from pathlib import Path

import pytest

import parquet_bloom as pb
from parquet_bloom import DecryptionKeys
from tests.encryption import test_pyarrow_files as pyarrow_files
from tests.encryption.keys import COLUMN_KEYS, DATA, FOOTER_KEY, InServerWrapKms

BLOOM_FILE = DATA / "encrypt_columns_and_footer_bloom_filter.parquet.encrypted"
UNWRAPS: list[str] = []  # the master key ids CountingKms was asked for, in any copy of it


class CountingKms(InServerWrapKms):
    def __reduce__(self) -> tuple[type, tuple[dict[str, bytes]]]:
        return CountingKms, (self.master_keys,)

    def unwrap_key(self, wrapped_key: str, master_key_identifier: str) -> bytes:
        UNWRAPS.append(master_key_identifier)
        return super().unwrap_key(wrapped_key, master_key_identifier)


def filters(path: Path, keys: DecryptionKeys) -> dict[tuple[int, str], bytes]:
    with pb.BloomFilterReader(path, decryption=keys) as reader:
        found, failed = reader.filters_with_errors()
    assert failed == {}
    return {k: f.to_bytes() for k, f in found.items()}


def test_explicit_keys_and_a_key_retriever_pickle() -> None:
    explicit = DecryptionKeys(FOOTER_KEY, COLUMN_KEYS)
    expected = filters(BLOOM_FILE, explicit)
    assert expected
    config = {
        "key_ids": {
            "kf": f"hex:{FOOTER_KEY.hex()}",
            "kc1": f"hex:{COLUMN_KEYS['double_field'].hex()}",
            "kc2": f"hex:{COLUMN_KEYS['float_field'].hex()}",
        }
    }
    for keys in (explicit, DecryptionKeys.from_config(config)):
        keys.check_picklable()
        copy = pickle.loads(pickle.dumps(keys))
        assert filters(BLOOM_FILE, copy) == expected
        assert repr(copy) == repr(keys) and FOOTER_KEY.decode() not in repr(copy)


def test_a_kms_pickles_with_its_client_alone(tmp_path: Path) -> None:
    path = pyarrow_files.write(tmp_path / "kms.parquet")
    keys = DecryptionKeys.from_kms(CountingKms(pyarrow_files.MASTER_KEYS))
    UNWRAPS.clear()
    pb.BloomFilterReader(path, decryption=keys).close()
    asked = len(UNWRAPS)
    assert asked >= 1  # the footer's KEK
    pb.BloomFilterReader(path, decryption=keys).close()
    assert len(UNWRAPS) == asked  # cached
    copy = pickle.loads(pickle.dumps(keys))
    pb.BloomFilterReader(path, decryption=copy).close()
    assert len(UNWRAPS) == 2 * asked  # the copy's client unwraps its own: no KEK travelled
    assert repr(copy) == "DecryptionKeys(kms=<given>)"


class Unpicklable:
    def __reduce__(self) -> tuple[()]:
        raise TypeError("this retriever stays here")

    def __call__(self, key_metadata: bytes) -> bytes | None:
        return FOOTER_KEY


def test_the_part_that_does_not_pickle_is_named() -> None:
    keys = DecryptionKeys(FOOTER_KEY, COLUMN_KEYS, key_retriever=Unpicklable())
    with pytest.raises(TypeError, match=r"its key_retriever \(.*\.Unpicklable\) is not") as err:
        keys.check_picklable(to="the moon")
    message = str(err.value)
    assert "to be sent to the moon" in message and "this retriever stays here" in message
    for key in (FOOTER_KEY, *COLUMN_KEYS.values()):
        for text in (key.decode(), key.hex(), base64.b64encode(key).decode()):
            assert text not in message
    kms = DecryptionKeys.from_kms(pyarrow_files_kms())
    with pytest.raises(TypeError, match=r"its KMS client \(.*InServerWrapKms\).*__reduce__"):
        kms.check_picklable(dumps=refuse)


def pyarrow_files_kms() -> InServerWrapKms:
    return InServerWrapKms(pyarrow_files.MASTER_KEYS)


def refuse(obj: object) -> bytes:
    """A pickler that takes nothing (as one that cannot take a pyarrow client)."""
    raise pickle.PicklingError(f"cannot pickle {type(obj).__name__!r} object")

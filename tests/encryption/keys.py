"""The keys of parquet-testing's encrypted files (data/README.md), and a test KMS client.

The KMS client is the one parquet-java's ``InMemoryKMS`` and Arrow C++'s
``TestOnlyInServerWrapKms`` are: master keys held in memory by id, a key wrapped by AES-GCM
with the master key (nonce | ciphertext | tag, base64) and the master key id as AAD. It is a
real ``pyarrow.parquet.encryption.KmsClient``, so pyarrow's CryptoFactory writes with it, and
our reader unwraps with the same object. It pickles (Spark sends it to its executors), and
``InMemoryKms.java`` is the same KMS for parquet-java's key tools (Spark's writer and reader).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pyarrow.parquet.encryption as pe
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

DATA = Path(__file__).parent / "data"
FOOTER_KEY = b"0123456789012345"
COLUMN_KEYS = {"double_field": b"1234567890123450", "float_field": b"1234567890123451"}
KEY_IDS = {
    b"kf": FOOTER_KEY,
    b"kc1": COLUMN_KEYS["double_field"],
    b"kc2": COLUMN_KEYS["float_field"],
}
MASTER_KEYS = {
    "kf": FOOTER_KEY,
    "kc1": COLUMN_KEYS["double_field"],
    "kc2": COLUMN_KEYS["float_field"],
}
AAD_PREFIX = b"tester"


class InServerWrapKms(pe.KmsClient):  # type: ignore[misc]
    """Wraps and unwraps keys with master keys it holds; counts its unwrap calls."""

    def __init__(self, master_keys: dict[str, bytes] | None = None) -> None:
        super().__init__()
        self.master_keys = dict(MASTER_KEYS if master_keys is None else master_keys)
        self.unwraps = 0

    def __reduce__(self) -> tuple[type, tuple[dict[str, bytes]]]:
        # pyarrow's KmsClient does not pickle by itself: this makes the client again from its
        # master keys (in another process, its unwrap count starts again from 0).
        return InServerWrapKms, (self.master_keys,)

    def wrap_key(self, key_bytes: bytes, master_key_identifier: str) -> bytes:
        nonce = os.urandom(12)
        master = self.master_keys[master_key_identifier]
        sealed = AESGCM(master).encrypt(nonce, key_bytes, master_key_identifier.encode())
        return base64.b64encode(nonce + sealed)

    def unwrap_key(self, wrapped_key: str, master_key_identifier: str) -> bytes:
        self.unwraps += 1
        data = base64.b64decode(wrapped_key)
        master = self.master_keys[master_key_identifier]
        return AESGCM(master).decrypt(data[:12], data[12:], master_key_identifier.encode())


class ConfiguredKms(InServerWrapKms):
    """The same KMS made from a connection config, as pyarrow's ``kms_client_factory`` and
    the CLI's ``kms.client`` make one: its master keys in ``custom_kms_conf`` (id -> key
    text), as Arrow's and parquet-java's in-memory test KMS take theirs."""

    def __init__(self, config: pe.KmsConnectionConfig) -> None:
        keys = {k: v.encode() for k, v in config.custom_kms_conf.items()}
        super().__init__(keys)


def keys_of_nothing(config: pe.KmsConnectionConfig) -> object:
    """A "client factory" that makes no client: the config's error to report."""
    return object()

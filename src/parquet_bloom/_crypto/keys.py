"""The keys a reader of encrypted files is given: explicit keys, a key retriever, or a KMS.

``DecryptionKeys`` answers one question for a file: given a key's ``key_metadata`` (the bytes
the writer stored next to the footer or a column, possibly empty), and the column it is for,
which key? In that order: a key given explicitly (``footer_key``, ``column_keys`` by dotted
column path), then ``key_retriever(key_metadata)``. None means the key is unavailable: the
module stays unreadable.

:meth:`DecryptionKeys.from_kms` builds the retriever of the Parquet key tools (parquet-java's
``keytools``, Arrow C++ ``parquet/encryption``): the key metadata is JSON, either holding the key
material (``"internalStorage": true``) or referring to it in a file next to the data file
(``_KEY_MATERIAL_FOR_<file name>.json``, a JSON object from reference to key material). The key
material names a master key and holds the data key wrapped: by the KMS itself, or (double
wrapping) by a key-encryption key that the KMS wraps, the data key then AES-GCM-encrypted
locally with the KEK (nonce | ciphertext | tag, base64) and the KEK's id as AAD
(Arrow ``file_key_unwrapper.cc``, ``key_toolkit_internal.cc``, ``key_material.cc``).
"""

from __future__ import annotations

import base64
import binascii
import json
import pickle
import threading
from collections.abc import Callable, Mapping
from typing import Any

from parquet_bloom._crypto.cipher import check_key
from parquet_bloom._logical import hex_bytes
from parquet_bloom.errors import DecryptionError, MissingKeyError

KeyRetriever = Callable[[bytes], "bytes | None"]
# The external key material of one data file, by key reference; None when it has none.
SidecarReader = Callable[[str], "bytes | None"]

# Key material (Arrow key_material.h / KeyMetadata): field names of version "PKMT1".
_KEY_MATERIAL_TYPE = "PKMT1"
_EXTERNAL_KEY_MATERIAL_PREFIX = "_KEY_MATERIAL_FOR_"
# Limits for untrusted input: a key material document is a few hundred bytes; a key material
# file, a few hundred bytes per key of its data file.
MAX_KEY_METADATA_SIZE = 64 * 1024
MAX_KEY_MATERIAL_FILE_SIZE = 64 * 1024 * 1024


class DecryptionKeys:
    """The keys to read encrypted Parquet files with (Parquet Modular Encryption).

    ``footer_key``: the key of the footer (an encrypted footer is unreadable without it; a
    plaintext footer is readable, but its signature is checked only with it), and of every
    column encrypted with the footer key. ``column_keys``: dotted column path -> key, for
    columns encrypted with their own key. Keys are bytes of 16, 24 or 32 bytes.

    ``aad_prefix``: the file's AAD prefix, for files written with one not stored in them
    (``supply_aad_prefix``); when the file stores one, the two must agree.

    ``key_retriever``: called with a key's ``key_metadata`` (bytes; the key id, or whatever the
    writer stored) for every key not given explicitly; returns the key, or None when it does not
    know it (the column stays unreadable).

    ``allow_plaintext_files``: whether a file that is not encrypted at all may be read with
    these keys (as pyarrow's option of that name). By default it is a DecryptionError: a
    plaintext footer proves nothing, and a file expected encrypted that is not may have been
    replaced (or had its footer's encryption fields stripped).

    One ``DecryptionKeys`` serves any number of files (but ``aad_prefix`` is one file's).

    It pickles (to be sent to other processes: Spark's executors) when its ``key_retriever``
    and its KMS client do; the key-encryption keys a KMS has unwrapped stay behind (each copy
    asks its client again). :meth:`check_picklable` says which part does not.
    """

    def __init__(
        self,
        footer_key: bytes | None = None,
        column_keys: Mapping[str, bytes] | None = None,
        *,
        aad_prefix: bytes | None = None,
        key_retriever: KeyRetriever | None = None,
        allow_plaintext_files: bool = False,
    ) -> None:
        self.footer_key = None if footer_key is None else check_key(footer_key, "footer_key")
        self.column_keys = {
            str(column): check_key(key, f"the key of column {column!r}")
            for column, key in (column_keys or {}).items()
        }
        if aad_prefix is not None and not isinstance(aad_prefix, bytes):
            if isinstance(aad_prefix, str):
                aad_prefix = aad_prefix.encode()
            else:
                raise TypeError(f"aad_prefix must be bytes, not {type(aad_prefix).__name__}")
        self.aad_prefix = aad_prefix
        if key_retriever is not None and not callable(key_retriever):
            raise TypeError("key_retriever must be callable: key_metadata bytes -> key or None")
        self.key_retriever = key_retriever
        self.allow_plaintext_files = bool(allow_plaintext_files)
        self._kms: _KmsUnwrapper | None = None
        # from_kms's connection config as its fields (pyarrow's KmsConnectionConfig does not
        # pickle, and keys are sent to Spark's executors)
        self._kms_connection: dict[str, Any] | None = None

    @property
    def kms_client(self) -> Any | None:
        """The KMS client these keys were made with (:meth:`from_kms`), or None: what a
        pyarrow scan of the same files is given to decrypt them with."""
        return None if self._kms is None else self._kms.client

    @property
    def kms_connection_config(self) -> Any | None:
        """The pyarrow ``KmsConnectionConfig`` given to :meth:`from_kms` (a copy), if any."""
        if self._kms_connection is None:
            return None
        import pyarrow.parquet.encryption as pe

        return pe.KmsConnectionConfig(**self._kms_connection)

    def __repr__(self) -> str:  # never the keys themselves
        parts = []
        if self.footer_key is not None:
            parts.append("footer_key=<given>")
        if self.column_keys:
            parts.append(f"column_keys=<{', '.join(map(repr, self.column_keys))}>")
        if self.aad_prefix is not None:
            parts.append(f"aad_prefix={self.aad_prefix!r}")
        if self.key_retriever is not None:
            parts.append("key_retriever=<given>")
        if self._kms is not None:
            parts.append("kms=<given>")
        return f"DecryptionKeys({', '.join(parts)})"

    def check_picklable(
        self, dumps: Callable[[Any], bytes] = pickle.dumps, *, to: str = ""
    ) -> None:
        """Raise a TypeError naming the part of these keys that ``dumps`` (default
        ``pickle.dumps``; Spark's is cloudpickle) cannot serialize: the key retriever, or the
        KMS client, and what to do about it. ``to``: where the keys are to be sent, for the
        message. The keys themselves are never in the message."""
        parts: list[tuple[str, Any]] = []
        if self.key_retriever is not None:
            parts.append(("its key_retriever", self.key_retriever))
        if self._kms is not None:
            parts.append(("its KMS client", self._kms.client))
        for what, part in parts:
            try:
                dumps(part)
            except Exception as err:  # whatever the pickler raises for an object it cannot take
                kind = type(part)
                raise TypeError(
                    f"decryption= must be picklable{' to be sent to ' + to if to else ''}, but "
                    f"{what} ({kind.__module__}.{kind.__qualname__}) is not "
                    f"({type(err).__name__}: {_first_line(err)}). Make it picklable: a function "
                    "defined at module level, or a class whose __reduce__ returns the class "
                    "and the arguments that make the object again (a subclass of pyarrow's "
                    "KmsClient does not pickle without one); or give the keys explicitly "
                    "(footer_key=, column_keys=)"
                ) from None

    @classmethod
    def from_kms(
        cls,
        kms_client: Any,
        kms_connection_config: Any | None = None,
        *,
        aad_prefix: bytes | None = None,
        allow_plaintext_files: bool = False,
    ) -> DecryptionKeys:
        """Keys recovered through a KMS from the key material the Parquet key tools store
        (pyarrow's ``CryptoFactory``, parquet-java's ``PropertiesDrivenCryptoFactory``).

        ``kms_client``: an object with pyarrow's ``KmsClient`` interface, of which only
        ``unwrap_key(wrapped_key: str, master_key_identifier: str) -> bytes`` is called (a
        ``pyarrow.parquet.encryption.KmsClient`` subclass works unchanged); or a factory
        called once with ``kms_connection_config`` that returns one (pyarrow's
        ``kms_client_factory``). Single and double wrapping, key material stored in the file
        (the default) and in ``_KEY_MATERIAL_FOR_<file>.json`` files next to it, are read.
        Unwrapped key-encryption keys are cached by their id for this object's lifetime."""
        if not hasattr(kms_client, "unwrap_key"):
            if not callable(kms_client):
                raise TypeError(
                    "kms_client must have unwrap_key(wrapped_key, master_key_identifier), or be "
                    "a factory returning such a client"
                )
            kms_client = kms_client(kms_connection_config)
            if not hasattr(kms_client, "unwrap_key"):
                raise TypeError("the KMS client factory returned an object without unwrap_key")
        keys = cls(aad_prefix=aad_prefix, allow_plaintext_files=allow_plaintext_files)
        keys._kms = _KmsUnwrapper(kms_client)
        if all(hasattr(kms_connection_config, name) for name in _CONNECTION_MEMBERS):
            keys._kms_connection = {
                name: getattr(kms_connection_config, name) for name in _CONNECTION_MEMBERS
            }
            keys._kms_connection["custom_kms_conf"] = dict(keys._kms_connection["custom_kms_conf"])
        return keys

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> DecryptionKeys:
        """Keys from a decryption config (the CLI's ``--decryption-config`` file, parsed JSON):

        ``{"footer_key": KEY, "column_keys": {"col": KEY, ...}, "key_ids": {"id": KEY, ...},
        "aad_prefix": TEXT, "allow_plaintext_files": BOOL}``, every member optional. A KEY is
        ``"hex:<hex digits>"`` or ``"base64:<base64>"``. ``key_ids`` makes a key retriever:
        the key whose id is the key metadata (as UTF-8). ``aad_prefix`` is a UTF-8 string, or
        ``hex:``/``base64:``-prefixed bytes. Raises ValueError naming the bad member.

        Or, instead of keys, a KMS: ``{"kms": {"client": "package.module:Name", "connection":
        {"kms_instance_id": ..., "kms_instance_url": ..., "key_access_token": ...,
        "custom_kms_conf": {...}}}}`` (with ``aad_prefix`` and ``allow_plaintext_files`` as
        above): ``Name`` is imported and called with a pyarrow ``KmsConnectionConfig`` of
        ``connection`` (as pyarrow calls its ``kms_client_factory``, and parquet-java names its
        ``parquet.encryption.kms.client.class``); the client it returns unwraps the keys
        (:meth:`from_kms`)."""
        if not isinstance(config, Mapping):
            raise ValueError("a decryption config is a JSON object")
        members = {"footer_key", "column_keys", "key_ids", "aad_prefix", "allow_plaintext_files"}
        unknown = set(config) - members - {"kms"}
        if unknown:
            raise ValueError(f"unknown decryption config members: {', '.join(sorted(unknown))}")
        if "kms" in config:
            explicit = sorted({"footer_key", "column_keys", "key_ids"} & set(config))
            if explicit:
                raise ValueError(f"kms cannot be combined with {', '.join(explicit)}")
        footer = config.get("footer_key")
        columns = config.get("column_keys") or {}
        ids = config.get("key_ids") or {}
        for what, table in (("column_keys", columns), ("key_ids", ids)):
            if not isinstance(table, Mapping):
                raise ValueError(f"{what} must be a JSON object of name -> key")
        prefix = config.get("aad_prefix")
        if prefix is not None and not isinstance(prefix, str):
            raise ValueError("aad_prefix must be a string")
        plaintext_ok = config.get("allow_plaintext_files", False)
        if not isinstance(plaintext_ok, bool):
            raise ValueError("allow_plaintext_files must be true or false")
        aad_prefix = (
            None
            if prefix is None
            else (
                _config_bytes(prefix, "aad_prefix")
                if prefix.startswith(("hex:", "base64:"))
                else prefix.encode()
            )
        )
        if "kms" in config:
            factory, connection = _kms_config(config["kms"])
            client = factory(connection)  # a class has unwrap_key too: make the client here
            if not hasattr(client, "unwrap_key"):
                raise ValueError(f"kms.client made {type(client).__name__!r}, without unwrap_key")
            return cls.from_kms(
                client, connection, aad_prefix=aad_prefix, allow_plaintext_files=plaintext_ok
            )
        by_id = {str(k).encode(): _config_bytes(v, f"key_ids[{k!r}]") for k, v in ids.items()}
        return cls(
            None if footer is None else _config_bytes(footer, "footer_key"),
            {str(k): _config_bytes(v, f"column_keys[{k!r}]") for k, v in columns.items()},
            aad_prefix=aad_prefix,
            key_retriever=by_id.get if by_id else None,
            allow_plaintext_files=plaintext_ok,
        )

    def footer_key_for(
        self, key_metadata: bytes | None, sidecar: SidecarReader | None
    ) -> bytes | None:
        """The footer key, or None when it is unavailable."""
        if self.footer_key is not None:
            return self.footer_key
        return self._retrieve(key_metadata, "the footer key", sidecar)

    def column_key_for(
        self, column: str, key_metadata: bytes | None, sidecar: SidecarReader | None
    ) -> bytes | None:
        """The key of a column encrypted with its own key, or None when it is unavailable."""
        key = self.column_keys.get(column)
        if key is not None:
            return key
        return self._retrieve(key_metadata, f"the key of column {column!r}", sidecar)

    def _retrieve(
        self, key_metadata: bytes | None, what: str, sidecar: SidecarReader | None
    ) -> bytes | None:
        metadata = b"" if key_metadata is None else bytes(key_metadata)
        key: bytes | None
        if self._kms is not None:
            if not metadata:
                return None
            key = self._kms.data_key(metadata, sidecar)
        elif self.key_retriever is not None:
            key = self.key_retriever(metadata)
        else:
            return None
        if key is None:
            return None
        try:
            return check_key(key, what)
        except (TypeError, ValueError) as err:
            raise DecryptionError(f"the key retrieved for {what}: {err}") from None


class _KmsUnwrapper:
    """Data keys from key material, through one KMS client (thread-safe, KEKs cached; pickled
    with its client alone, the cached KEKs left behind)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._keks: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"client": self.client}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.client = state["client"]
        self._keks = {}
        self._lock = threading.Lock()

    def data_key(self, key_metadata: bytes, sidecar: SidecarReader | None) -> bytes:
        if len(key_metadata) > MAX_KEY_METADATA_SIZE:
            raise DecryptionError(
                f"key metadata of {len(key_metadata)} bytes exceeds this library's limit of "
                f"{MAX_KEY_METADATA_SIZE} bytes"
            )
        metadata = _json_object(key_metadata, "key metadata")
        if metadata.get("internalStorage", True) is False:
            reference = metadata.get("keyReference")
            if not isinstance(reference, str):
                raise DecryptionError("external key metadata without a keyReference")
            material = self._external_material(reference, sidecar)
        else:
            material = metadata
        if material.get("keyMaterialType") != _KEY_MATERIAL_TYPE:
            raise DecryptionError(
                f"key material type {material.get('keyMaterialType')!r} is not supported "
                f"(only {_KEY_MATERIAL_TYPE!r})"
            )
        master_key_id = _field(material, "masterKeyID", str)
        wrapped_dek = _field(material, "wrappedDEK", str)
        if not _field(material, "doubleWrapping", bool):
            return self._unwrap(wrapped_dek, master_key_id)
        kek_id = _field(material, "keyEncryptionKeyID", str)
        wrapped_kek = _field(material, "wrappedKEK", str)
        with self._lock:
            kek = self._keks.get(kek_id)
        if kek is None:
            kek = check_key(self._unwrap(wrapped_kek, master_key_id), "a key-encryption key")
            with self._lock:
                self._keks[kek_id] = kek
        from parquet_bloom._crypto.cipher import FOOTER, decrypt_gcm

        try:
            return decrypt_gcm(_b64(wrapped_dek), kek, _b64(kek_id), module_type=FOOTER)
        except DecryptionError:
            raise DecryptionError(
                f"the data key wrapped with key-encryption key {kek_id!r} (master key "
                f"{master_key_id!r}) does not decrypt"
            ) from None

    def _unwrap(self, wrapped: str, master_key_id: str) -> bytes:
        try:
            key = self.client.unwrap_key(wrapped, master_key_id)
        except Exception as err:  # the caller's client: a refusal, an unknown key, the network
            # The key is not available to these keys' holder (a KMS grants keys column by
            # column): a missing key, as one not given, not a wrong one.
            raise MissingKeyError(
                f"the KMS client could not unwrap a key with master key {master_key_id!r}: "
                f"{type(err).__name__}: {err}"
            ) from err
        if isinstance(key, str):  # pyarrow's callback turns str into its UTF-8 bytes
            key = key.encode()
        if not isinstance(key, bytes | bytearray):
            raise DecryptionError(
                f"the KMS client's unwrap_key returned {type(key).__name__}, not bytes"
            )
        return bytes(key)

    def _external_material(self, reference: str, sidecar: SidecarReader | None) -> dict[str, Any]:
        if sidecar is None:
            raise MissingKeyError(
                "the key material is stored outside the file, and this file's location "
                "cannot tell where"
            )
        data = sidecar(reference)
        if data is None:
            raise DecryptionError(f"no key material {reference!r} in the key material file")
        return _json_object(data, "key material")


def external_key_material_name(file_name: str) -> str:
    """The name of the file holding a data file's external key material (parquet-java's
    ``HadoopFSKeyMaterialStore``: next to the data file)."""
    return f"{_EXTERNAL_KEY_MATERIAL_PREFIX}{file_name}.json"


def parse_key_material_file(data: bytes) -> dict[str, bytes]:
    """A key material file: a JSON object from key reference to key material (a JSON string)."""
    store = _json_object(data, "key material file")
    return {k: v.encode() for k, v in store.items() if isinstance(v, str)}


_KMS_MEMBERS = {"client", "connection"}
_CONNECTION_MEMBERS = {"kms_instance_id", "kms_instance_url", "key_access_token", "custom_kms_conf"}


def _kms_config(kms: Any) -> tuple[Callable[[Any], Any], Any]:
    """The client factory a decryption config's ``kms`` names, imported, and the pyarrow
    ``KmsConnectionConfig`` it is to be called with. ValueError naming what is wrong."""
    import importlib

    if not isinstance(kms, Mapping):
        raise ValueError('kms must be a JSON object: {"client": "module:Name", "connection": {}}')
    unknown = set(kms) - _KMS_MEMBERS
    if unknown:
        raise ValueError(f"unknown kms members: {', '.join(sorted(unknown))}")
    client = kms.get("client")
    module_name, _, name = client.partition(":") if isinstance(client, str) else ("", "", "")
    if not module_name or not name:
        raise ValueError('kms.client must name the client as "package.module:Name"')
    try:
        factory = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"kms.client {client!r} cannot be imported: {err}") from None
    if not callable(factory):
        raise ValueError(f"kms.client {client!r} is not a class or a function")
    connection = kms.get("connection") or {}
    if not isinstance(connection, Mapping) or set(connection) - _CONNECTION_MEMBERS:
        raise ValueError(
            f"kms.connection must be a JSON object of {', '.join(sorted(_CONNECTION_MEMBERS))}"
        )
    custom = connection.get("custom_kms_conf") or {}
    texts = [v for k, v in connection.items() if k != "custom_kms_conf"]
    if not isinstance(custom, Mapping) or not all(
        isinstance(v, str) for v in [*texts, *custom.keys(), *custom.values()]
    ):
        raise ValueError("kms.connection's members are strings (custom_kms_conf: string to string)")
    import pyarrow.parquet.encryption as pe

    return factory, pe.KmsConnectionConfig(**{**connection, "custom_kms_conf": dict(custom)})


def _first_line(err: BaseException) -> str:
    """An exception's message, its first line, at most 200 characters."""
    lines = str(err).splitlines()
    return lines[0][:200] if lines else ""


def _config_bytes(value: Any, what: str) -> bytes:
    """``hex:...`` or ``base64:...`` from a decryption config, as bytes."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, 'hex:...' or 'base64:...'")
    kind, _, text = value.partition(":")
    if kind == "hex":
        return hex_bytes(value, "hex:", name=what)
    try:
        if kind == "base64":
            return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as err:
        raise ValueError(f"{what} is not valid {kind}: {err}") from None
    raise ValueError(f"{what} must start with 'hex:' or 'base64:'")


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    if len(data) > MAX_KEY_MATERIAL_FILE_SIZE:
        raise DecryptionError(f"{what} of {len(data)} bytes is too large")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise DecryptionError(f"{what} is not JSON: {err}") from None
    if not isinstance(value, dict):
        raise DecryptionError(f"{what} is not a JSON object")
    return value


def _field(obj: dict[str, Any], name: str, kind: type) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind):
        raise DecryptionError(f"key material without a valid {name!r}")
    return value


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as err:
        raise DecryptionError(f"key material field is not base64: {err}") from None

"""Where an Iceberg table's files are, as this library opens them: the table FileIO's
properties as fsspec storage options (:func:`storage_options_for`), and its file URIs as the
paths the reader and the rewrite take (:func:`local_or_url`).

pyiceberg configures its FileIO with properties (``s3.endpoint``, ``s3.access-key-id``, ...;
pyiceberg/io/__init__.py names them, and pyiceberg/io/fsspec.py turns them into s3fs, gcsfs and
adlfs arguments). The rewrite runs anywhere, Spark executors included, so what it needs is a
plain, picklable dict of fsspec options, made here once, on the driver.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["local_or_url", "storage_options_for", "storage_options_from_properties"]

# Schemes pyiceberg's FileIOs map to each fsspec backend (pyiceberg/io/__init__.py,
# SCHEMA_TO_FILE_IO).
_S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
_GCS_SCHEMES = frozenset({"gs", "gcs"})
_ADLS_SCHEMES = frozenset({"abfs", "abfss", "wasb", "wasbs"})
_LOCAL_SCHEMES = frozenset({"", "file"})

# FileIO properties that configure a credential the storage options cannot carry (a request
# signer, a role to assume, a credential object): the caller passes storage_options= instead.
_UNMAPPABLE = {
    "s3.signer": "a remote request signer",
    "s3.role-arn": "a role to assume",
    "client.role-arn": "a role to assume",
    "adls.token": "a static token credential",
    "adls.credential": "a credential object",
}


def _first(properties: Mapping[str, str], *keys: str) -> str | None:
    for key in keys:
        value = properties.get(key)
        if value is not None:
            return value
    return None


def _as_bool(value: str) -> bool:
    return value.strip().lower() in ("true", "1", "yes", "on")


def storage_options_for(table: Any) -> dict[str, Any]:
    """The fsspec storage options (s3fs, gcsfs or adlfs keyword arguments) that reach the
    files of ``table`` (a pyiceberg ``Table``) as its FileIO does: its ``io.properties`` for
    the scheme of its location. Empty for a table on local disk."""
    return storage_options_from_properties(table.io.properties, table.metadata.location)


def storage_options_from_properties(properties: Mapping[str, str], location: str) -> dict[str, Any]:
    """:func:`storage_options_for` from FileIO ``properties`` and a table ``location``.

    S3 (``s3://``, ``s3a://``, ``s3n://``; s3fs): ``s3.endpoint`` -> ``endpoint_url``,
    ``s3.access-key-id`` / ``client.access-key-id`` -> ``key``, ``s3.secret-access-key`` /
    ``client.secret-access-key`` -> ``secret``, ``s3.session-token`` /
    ``client.session-token`` -> ``token``, ``s3.region`` / ``client.region`` ->
    ``client_kwargs={"region_name": ...}``, ``s3.profile-name`` / ``client.profile-name`` ->
    ``profile``, ``s3.anonymous`` -> ``anon``, ``s3.proxy-uri``, ``s3.connect-timeout``,
    ``s3.request-timeout`` and ``s3.force-virtual-addressing`` -> ``config_kwargs``,
    ``s3.server-side-encryption`` and ``s3.sse-kms-key-id`` -> ``s3_additional_kwargs``.
    GCS (gcsfs) and ADLS (adlfs): the string settings pyiceberg's fsspec FileIO passes.
    Properties that are not set are left out (the backend's default, or its standard
    credential chain, applies). A property naming a credential a dict cannot carry (a
    request signer, a role to assume, a token object) raises ValueError: pass the storage
    options yourself then.
    """
    scheme = urlsplit(location).scheme.lower()
    if scheme in _LOCAL_SCHEMES:
        return {}
    for key, what in _UNMAPPABLE.items():
        if properties.get(key):
            raise ValueError(
                f"the table's FileIO property {key!r} configures {what}, which fsspec storage "
                "options cannot carry: pass storage_options= with credentials for the table's "
                "files"
            )
    if scheme in _S3_SCHEMES:
        return _s3(properties)
    if scheme in _GCS_SCHEMES:
        return _gcs(properties)
    if scheme in _ADLS_SCHEMES:
        return _adls(properties)
    return {}  # another fsspec protocol: its own defaults and environment


def _s3(properties: Mapping[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for option, keys in (
        ("endpoint_url", ("s3.endpoint",)),
        ("key", ("s3.access-key-id", "client.access-key-id")),
        ("secret", ("s3.secret-access-key", "client.secret-access-key")),
        ("token", ("s3.session-token", "client.session-token")),
        ("profile", ("s3.profile-name", "client.profile-name")),
    ):
        value = _first(properties, *keys)
        if value is not None:
            options[option] = value
    region = _first(properties, "s3.region", "client.region")
    if region is not None:
        options["client_kwargs"] = {"region_name": region}
    anonymous = properties.get("s3.anonymous")
    if anonymous is not None:
        options["anon"] = _as_bool(anonymous)
    config: dict[str, Any] = {}
    if proxy := properties.get("s3.proxy-uri"):
        config["proxies"] = {"http": proxy, "https": proxy}
    if timeout := properties.get("s3.connect-timeout"):
        config["connect_timeout"] = float(timeout)
    if timeout := properties.get("s3.request-timeout"):
        config["read_timeout"] = float(timeout)
    if _as_bool(properties.get("s3.force-virtual-addressing", "false")):
        config["s3"] = {"addressing_style": "virtual"}
    if config:
        options["config_kwargs"] = config
    extra = {
        name: properties[key]
        for name, key in (
            ("ServerSideEncryption", "s3.server-side-encryption"),
            ("SSEKMSKeyId", "s3.sse-kms-key-id"),
        )
        if properties.get(key)
    }
    if extra:
        options["s3_additional_kwargs"] = extra
    return options


def _gcs(properties: Mapping[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {
        option: properties[key]
        for option, key in (
            ("project", "gcs.project-id"),
            ("access", "gcs.access"),
            ("token", "gcs.oauth2.token"),
            ("consistency", "gcs.consistency"),
            ("cache_timeout", "gcs.cache-timeout"),
            ("endpoint_url", "gcs.service.host"),
            ("default_location", "gcs.default-bucket-location"),
        )
        if properties.get(key)
    }
    for option, key in (
        ("requester_pays", "gcs.requester-pays"),
        ("version_aware", "gcs.version-aware"),
    ):
        if properties.get(key):
            options[option] = _as_bool(properties[key])
    if properties.get("gcs.session-kwargs"):
        options["session_kwargs"] = json.loads(properties["gcs.session-kwargs"])
    return options


def _adls(properties: Mapping[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {
        option: properties[key]
        for option, key in (
            ("connection_string", "adls.connection-string"),
            ("account_name", "adls.account-name"),
            ("account_key", "adls.account-key"),
            ("sas_token", "adls.sas-token"),
            ("tenant_id", "adls.tenant-id"),
            ("client_id", "adls.client-id"),
            ("client_secret", "adls.client-secret"),
            ("account_host", "adls.account-host"),
        )
        if properties.get(key)
    }
    if properties.get("adls.anon"):
        options["anon"] = _as_bool(properties["adls.anon"])
    return options


def local_or_url(uri: str) -> str:
    """A file URI as the reader and the rewrite open it: a ``file:`` URI (or a plain path) as
    a local path, read natively; any other URI unchanged. The path is taken as it is, never
    percent-decoded: Iceberg writers name a partition's directory by its escaped value
    (``region=x%2Fy``) and put that path in the manifests, and pyiceberg's FileIO opens it
    so (``PyArrowFileIO.parse_location``)."""
    parts = urlsplit(uri)
    if parts.scheme.lower() == "file":
        return parts.path
    return uri

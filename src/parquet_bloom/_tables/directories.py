"""A directory named to the file commands (inspect, probe, check, the rewrites' sources) and to
:func:`parquet_bloom.prune` that is a Delta Lake or Iceberg table, or holds one, stands for the
table's live files: the data files of its latest version, never the files a rewrite, compaction
or delete replaced and that stay on disk until vacuum or snapshot expiry
(docs/cli.md#table-directories).

A table is told from the same listing that finds the files (no request more): a directory
holding ``_delta_log/`` is a Delta table; one holding ``metadata/*.metadata.json`` an Iceberg
table, read without a catalog from ``metadata/version-hint.text`` when it names a metadata file
there (the file-system tables Iceberg's Hadoop catalog writes), else from the metadata file
of the highest version number. A local directory inside a table (a partition's) stands for the
live files under it. Reading a table needs its library (deltalake, pyiceberg):
:class:`~parquet_bloom.errors.MissingExtraError` without it.

Globs and single files are taken as named: the caller chose those files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from parquet_bloom._extras import require
from parquet_bloom._io import location
from parquet_bloom._tables.markers import find_table

__all__ = ["VERSION_HINT", "LiveTable", "TableListing", "current_metadata", "list_live_files"]

_DELTA_LOG = "_delta_log"
_ICEBERG_METADATA = "metadata"
_ICEBERG_SUFFIX = ".metadata.json"
VERSION_HINT = "version-hint.text"
# A metadata file's version: "00012-<uuid>.metadata.json" (catalogs), "v12.metadata.json"
# (file-system tables; "v12.gz.metadata.json" compressed).
_METADATA_VERSION = re.compile(r"^v?(\d+)[-.]")
_FORMAT_NAMES = {"delta": "Delta", "iceberg": "Iceberg"}
# fsspec's S3 options (s3fs) -> deltalake's (object_store) and pyiceberg's FileIO properties.
_DELTA_S3 = {
    "key": "AWS_ACCESS_KEY_ID",
    "secret": "AWS_SECRET_ACCESS_KEY",
    "token": "AWS_SESSION_TOKEN",
    "endpoint_url": "AWS_ENDPOINT_URL",
}
_ICEBERG_S3 = {
    "key": "s3.access-key-id",
    "secret": "s3.secret-access-key",
    "token": "s3.session-token",
    "endpoint_url": "s3.endpoint",
}


@dataclass(frozen=True)
class LiveTable:
    """A table found where files were listed: its ``format`` ("delta", "iceberg"), its
    ``root`` as named, the ``version`` read (Delta version, Iceberg snapshot id; None: a table
    without a snapshot), ``live`` (its data files read) and ``ignored`` (files under it on
    disk that are not: replaced, removed, or an Iceberg snapshot's delete files)."""

    format: str
    root: str
    version: int | None
    live: int
    ignored: int

    def __str__(self) -> str:
        kind = "version" if self.format == "delta" else "snapshot"
        version = "no snapshot" if self.version is None else f"{kind} {self.version}"
        live = "live file" if self.live == 1 else "live files"
        replaced = "replaced file" if self.ignored == 1 else "replaced files"
        return (
            f"reading the {self.live} {live} of the {_FORMAT_NAMES[self.format]} table at "
            f"{self.root} ({version}); {self.ignored} {replaced} ignored"
        )


@dataclass
class TableListing:
    """What a listing stands for: ``files`` (each table's live files in place of the files
    under its root) and the ``tables`` found."""

    files: list[location.Entry] = field(default_factory=list)
    tables: list[LiveTable] = field(default_factory=list)


def list_live_files(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    filesystem: Any | None = None,
    storage_options: Mapping[str, Any] | None = None,
    list_plain: bool = False,
) -> TableListing:
    """:func:`parquet_bloom._io.location.list_files` of ``source``, each table directory among
    the names (or under them) standing for its live files (see the module docstring)."""
    if not isinstance(source, str | os.PathLike):
        out = TableListing()
        for one in source:
            part = list_live_files(
                one, filesystem=filesystem, storage_options=storage_options, list_plain=list_plain
            )
            out.files.extend(part.files)
            out.tables.extend(part.tables)
        return out
    text = os.fspath(source)
    hidden: list[location.Entry] = []
    files = location.list_files(
        text,
        filesystem=filesystem,
        storage_options=storage_options,
        list_plain=list_plain,
        hidden=hidden,
    )
    if location.has_glob(text) or (len(files) == 1 and not hidden and _is_file(text, files[0])):
        return TableListing(files)
    roots = _table_roots(files + hidden)
    local_dir = filesystem is None and not location.is_url(text) and os.path.isdir(text)
    if not roots and local_dir:
        above = find_table(os.path.join(text, "_"))  # the directory itself and its ancestors
        if above is not None and above.format in _FORMAT_NAMES:
            roots = {_named(above.root): above.format}
    if not roots:
        return TableListing(files)
    return _with_live_files(text, files, roots, storage_options)


def _is_file(text: str, entry: location.Entry) -> bool:
    """Whether the one entry listed is the name itself: a file, not a directory's content."""
    return entry.path.rstrip("/") == text.rstrip("/") or not entry.listed


def _table_roots(entries: Iterable[location.Entry]) -> dict[str, str]:
    """The table roots the entries show, each with its format: the directory above a
    ``_delta_log/`` entry, or above ``metadata/`` holding a ``*.metadata.json``."""
    roots: dict[str, str] = {}
    for entry in entries:
        parts = _key(entry).split("/")
        if _DELTA_LOG in parts[:-1]:
            roots.setdefault("/".join(parts[: parts.index(_DELTA_LOG)]), "delta")
        elif (
            len(parts) >= 3
            and parts[-2] == _ICEBERG_METADATA
            and parts[-1].endswith(_ICEBERG_SUFFIX)
        ):
            roots.setdefault("/".join(parts[:-2]), "iceberg")
    return roots


def _key(entry: location.Entry) -> str:
    """An entry as a table's file list names it: a local path made absolute (links
    resolved), or a URL."""
    return _named(entry.path) if entry.filesystem is None else entry.name


def _named(where: str) -> str:
    """A local path or a URL, as :func:`_key` names entries."""
    return where if location.is_url(where) else os.path.realpath(where)


def _under(key: str, root: str) -> bool:
    return key.startswith(root.rstrip("/") + "/")


def _with_live_files(
    text: str,
    files: list[location.Entry],
    roots: dict[str, str],
    storage_options: Mapping[str, Any] | None,
) -> TableListing:
    """``files`` with those under each table root replaced by the table's live files (those
    under the directory listed, for a table above it)."""
    out = TableListing()
    by_root: dict[str, list[location.Entry]] = {root: [] for root in roots}
    ordered = sorted(roots, key=len, reverse=True)  # the nearest root first
    for entry in files:
        key = _key(entry)
        root = next((r for r in ordered if _under(key, r)), None)
        if root is None:
            out.files.append(entry)
        else:
            by_root[root].append(entry)
    listed_key = _named(text)
    for root in sorted(roots):
        on_disk = by_root[root]
        version: int | None
        if roots[root] == "delta":
            version, live, skipped = _delta_files(root, storage_options)
        else:
            version, live, skipped = _iceberg_files(root, on_disk, storage_options)
            on_disk = [e for e in on_disk if not _under(_key(e), f"{root}/{_ICEBERG_METADATA}")]
        if _under(listed_key.rstrip("/") + "/_", root) and listed_key.rstrip("/") != root:
            live = {k: v for k, v in live.items() if _under(k, listed_key)}  # a table above
        known = {_key(e): e for e in on_disk}
        for key, size in live.items():
            out.files.append(known.get(key) or _entry(key, size, on_disk, storage_options))
        ignored = sum(1 for e in on_disk if _key(e) not in live and _key(e) not in skipped)
        name = _display(root, text)
        out.tables.append(LiveTable(roots[root], name, version, len(live), ignored))
    return out


def _display(root: str, text: str) -> str:
    """The table's root as the caller named it: relative when they gave a relative path."""
    if location.is_url(root) or os.path.isabs(text):
        return root
    return os.path.relpath(root)


def _entry(
    key: str, size: int, on_disk: list[location.Entry], storage_options: Mapping[str, Any] | None
) -> location.Entry:
    """A live file the listing did not show (outside the directory, or missing): on the
    listing's filesystem, else resolved from its name."""
    if not location.is_url(key):
        return location.Entry(key, size, None)
    fs, path = location.resolve(key, storage_options=storage_options)
    return location.Entry(path, size, fs)


def _delta_files(
    root: str, storage_options: Mapping[str, Any] | None
) -> tuple[int, dict[str, int], set[str]]:
    """The Delta table's version, its live files (key -> size), and nothing to skip."""
    require("deltalake", f"reading the live files of the Delta table at {root}")
    from parquet_bloom._tables.delta_snapshot import (
        file_location,
        load_table,
        snapshot_files,
        table_root,
    )

    options = _mapped(storage_options, _DELTA_S3) if location.is_url(root) else None
    if options is not None:
        # An http:// endpoint, given or from the environment (as s3fs reads it), is one the
        # user chose: object_store refuses it unless told (AWS_ALLOW_HTTP).
        endpoint = options.get("AWS_ENDPOINT_URL") or os.environ.get(
            "AWS_ENDPOINT_URL_S3", os.environ.get("AWS_ENDPOINT_URL", "")
        )
        if endpoint.startswith("http://"):
            options.setdefault("AWS_ALLOW_HTTP", "true")
    from deltalake.exceptions import DeltaError

    try:
        table = load_table(root, None, options)
    except DeltaError as err:  # a _delta_log/ that holds no readable log
        raise _unreadable(root, "_delta_log/", "deltalake", err) from err
    base = table_root(table)
    live = {}
    for f in snapshot_files(table):
        where = file_location(base, f.path)
        live[_named(where)] = f.size
    return int(table.version()), live, set()


def _iceberg_files(
    root: str, on_disk: list[location.Entry], storage_options: Mapping[str, Any] | None
) -> tuple[int | None, dict[str, int], set[str]]:
    """The Iceberg table's current snapshot id, its live data files (key -> size), and the
    snapshot's delete files (not counted as replaced)."""
    require("pyiceberg", f"reading the live files of the Iceberg table at {root}")
    from pyiceberg.manifest import ManifestContent
    from pyiceberg.table import StaticTable

    from parquet_bloom._tables.iceberg_io import local_or_url

    properties = _mapped(storage_options, _ICEBERG_S3) if location.is_url(root) else {}
    metadata = _metadata_file(root, on_disk, storage_options)
    try:
        table = StaticTable.from_metadata(metadata, properties=properties)
    except ValueError as err:  # not a metadata file pyiceberg reads (JSON, its schema)
        raise _unreadable(root, metadata, "pyiceberg", err) from err
    snapshot = table.current_snapshot()
    if snapshot is None:
        return None, {}, set()
    live: dict[str, int] = {}
    deletes: set[str] = set()
    # From the manifests, not a scan: pyiceberg 0.12 refuses to plan a scan of a table with
    # equality deletes.
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            where = _named(local_or_url(entry.data_file.file_path))
            if manifest.content == ManifestContent.DATA:
                live[where] = int(entry.data_file.file_size_in_bytes)
            else:
                deletes.add(where)
    return int(snapshot.snapshot_id), live, deletes


def _unreadable(root: str, marker: str, library: str, err: Exception) -> ValueError:
    """A directory marked as a table whose table cannot be read: the user's to sort out (its
    files can still be named one by one, or by a glob)."""
    detail = " ".join(str(err).split())
    return ValueError(
        f"{root} looks like a table ({marker}) that {library} cannot read: "
        f"{type(err).__name__}: {detail}; to read its files as plain files, name them or a "
        f"glob ({root}/*.parquet)"
    )


def _metadata_file(
    root: str, on_disk: list[location.Entry], storage_options: Mapping[str, Any] | None
) -> str:
    """The table's current metadata file (:func:`current_metadata`), from the listing."""
    directory = f"{root}/{_ICEBERG_METADATA}/"
    names = {_key(e)[len(directory) :]: e for e in on_disk if _key(e).startswith(directory)}
    hint = names.get(VERSION_HINT)
    text = None
    if hint is not None:
        from parquet_bloom._io.source import ByteSource

        with ByteSource(hint.path, filesystem=hint.filesystem, size=hint.size) as source:
            text = source.read_exact(0, source.size).decode("utf-8", "replace")
    return directory + current_metadata(names, text)


def current_metadata(names: Iterable[str], hint: str | None) -> str:
    """Of the names in an Iceberg table's ``metadata/`` directory, its current metadata file:
    the ``vN.metadata.json`` (or ``vN.gz.metadata.json``) that ``hint``, the text of its
    ``version-hint.text`` (None: none there), names when it is among them; else the
    ``*.metadata.json`` of the highest version number (ValueError: none)."""
    candidates = [n for n in names if "/" not in n and n.endswith(_ICEBERG_SUFFIX)]
    if not candidates:
        raise ValueError("no metadata/*.metadata.json: not an Iceberg table")
    if hint is not None:
        version = hint.strip()
        for name in (f"v{version}{_ICEBERG_SUFFIX}", f"v{version}.gz{_ICEBERG_SUFFIX}"):
            if name in candidates:
                return name

    def number(name: str) -> int:
        match = _METADATA_VERSION.match(name)
        return int(match[1]) if match else -1

    return max(candidates, key=lambda n: (number(n), n))


def _mapped(options: Mapping[str, Any] | None, names: Mapping[str, str]) -> dict[str, str]:
    """fsspec's S3 options as the table library's: those it has a name for."""
    out = {names[k]: str(v) for k, v in (options or {}).items() if k in names}
    region = ((options or {}).get("client_kwargs") or {}).get("region_name")
    if region:
        out["AWS_REGION" if "AWS_ACCESS_KEY_ID" in names.values() else "s3.region"] = region
    return out

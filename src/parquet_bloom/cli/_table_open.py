"""The table a ``parquet-bloom table`` command's TABLE names, opened: a Delta table's path or URL
(it has ``_delta_log/``), an Iceberg table named in a catalog (``--catalog NAME``; pyiceberg's
``load_catalog`` configuration), or an Iceberg table's location or ``metadata.json``, opened
read-only as a pyiceberg ``StaticTable``; at the version or snapshot asked; and the data files
of that snapshot. The commands themselves are :mod:`._tables`'."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any

from parquet_bloom._extras import require
from parquet_bloom._io import location
from parquet_bloom._tables.directories import VERSION_HINT, current_metadata
from parquet_bloom._tables.iceberg_io import local_or_url, storage_options_from_properties

__all__ = [
    "DataFile",
    "Table",
    "TableError",
    "data_files",
    "detect_format",
    "heading",
    "open_table",
]

_ICEBERG_SUFFIX = ".metadata.json"


class TableError(ValueError):
    """A table that cannot be opened or used as asked: one line, exit status 2."""


@dataclass(frozen=True)
class DataFile:
    """A data file of the snapshot: ``key`` as the table names it (Delta: its path under the
    root, as the log writes it; Iceberg: its URI), ``source`` as the reader opens it."""

    key: str
    source: str
    size: int
    file_format: str = "PARQUET"


@dataclass
class Table:
    """An opened table: its ``format``, its ``name`` as printed, the library's ``handle``
    (``deltalake.DeltaTable`` or pyiceberg ``Table``), its ``root`` (Delta: its path or URL;
    Iceberg: its location), the ``options`` given (deltalake's storage options or Iceberg
    FileIO properties), ``file_options`` (fsspec's, for the data files) and ``static``: an
    Iceberg table opened from its metadata, which cannot be committed to."""

    format: str
    name: str
    handle: Any
    root: str
    options: dict[str, str]
    file_options: dict[str, Any] = field(default_factory=dict)
    static: bool = False
    snapshot_id: int | None = None

    @property
    def version(self) -> int | None:
        """The Delta version or the Iceberg snapshot id read (None: a table without one)."""
        if self.format == "delta":
            return int(self.handle.version())
        snapshot = self.snapshot()
        return None if snapshot is None else int(snapshot.snapshot_id)

    def snapshot(self) -> Any:
        """The Iceberg snapshot read (None: a table without one)."""
        if self.snapshot_id is not None:
            return self.handle.snapshot_by_id(self.snapshot_id)
        return self.handle.current_snapshot()

    def display(self, key: str) -> str:
        """A data file as the text output names it: under the table's root when it is."""
        for root in (self.root, local_or_url(self.root)):
            prefix = root.rstrip("/") + "/"
            if key.startswith(prefix):
                return key[len(prefix) :]
        return key


def heading(table: Table) -> str:
    """The table as the text output heads it: name, format, version or snapshot."""
    version = table.version
    if table.format == "delta":
        return f"{table.name} (Delta, version {version})"
    return f"{table.name} (Iceberg, " + (
        "no snapshot)" if version is None else f"snapshot {version})"
    )


def open_table(args: argparse.Namespace, *, writing: bool = False) -> Table:
    """The table TABLE names, at ``--version`` / ``--snapshot-id`` when given."""
    options = dict(args.storage_option)
    version = getattr(args, "version", None)
    snapshot_id = getattr(args, "snapshot_id", None)
    if args.catalog is not None:
        if args.format == "delta":
            args.parser.error("--catalog names an Iceberg catalog; not with --format delta")
        table = _open_catalog(args.catalog, args.table, options)
    else:
        kind = args.format or _detect(args.table, options)
        if kind == "delta":
            if snapshot_id is not None:
                args.parser.error("--snapshot-id is for Iceberg tables; use --version N")
            return _open_delta(args.table, version, options)
        table = _open_static(args.table, options)
        if writing:
            raise TableError(
                f"{args.table} is opened from its metadata, read-only: committing to an "
                "Iceberg table needs its catalog (--catalog NAME and the table's identifier)"
            )
    if version is not None:
        args.parser.error("--version is for Delta tables; use --snapshot-id N")
    if snapshot_id is not None:
        if table.handle.snapshot_by_id(snapshot_id) is None:
            raise TableError(f"{args.table} has no snapshot {snapshot_id}")
        table.snapshot_id = snapshot_id
    return table


def _open_delta(uri: str, version: int | None, options: dict[str, str]) -> Table:
    require("deltalake", "reading Delta Lake tables")  # without it: what to install
    from deltalake.exceptions import TableNotFoundError

    import parquet_bloom.delta as pbd
    from parquet_bloom._tables.delta_snapshot import load_table

    try:  # a version the table does not have: TableVersionError, saying its latest
        handle = load_table(uri, version, options or None)
    except TableNotFoundError:
        raise TableError(f"no Delta table at {uri} (no _delta_log/ there)") from None
    return Table("delta", uri, handle, uri, options, pbd.file_storage_options(uri, options))


def _open_catalog(name: str, identifier: str, options: dict[str, str]) -> Table:
    require("pyiceberg", "reading Iceberg tables")  # without it: what to install
    from pyiceberg.catalog import load_catalog
    from pyiceberg.utils.config import Config

    import parquet_bloom.iceberg as pbi

    # Read now, not when pyiceberg was imported: its own copy of the environment is older.
    config = Config().get_catalog_config(name)
    if not config:
        raise TableError(
            f"no Iceberg catalog {name!r}: configure it in ~/.pyiceberg.yaml or with "
            f"PYICEBERG_CATALOG__{name.upper()}__* environment variables"
        )
    try:
        properties: dict[str, Any] = {**config, **options}
        catalog = load_catalog(name, **properties)
        handle = catalog.load_table(identifier)
    except Exception as e:  # the catalog's own errors: no such table, no connection...
        raise TableError(
            f"cannot load {identifier} from the Iceberg catalog {name!r}: {type(e).__name__}: {e}"
        ) from e
    table = Table("iceberg", identifier, handle, handle.location(), options)
    table.file_options = pbi.storage_options_for(handle)
    return table


def _open_static(path: str, options: dict[str, str]) -> Table:
    require("pyiceberg", "reading Iceberg tables")  # without it: what to install
    from pyiceberg.table import StaticTable

    import parquet_bloom.iceberg as pbi

    metadata = _metadata_file(path, options)
    handle = StaticTable.from_metadata(metadata, properties=options)
    table = Table("iceberg", path, handle, handle.location(), options, static=True)
    table.file_options = pbi.storage_options_for(handle)
    return table


def _filesystem(uri: str, options: dict[str, str]) -> tuple[Any | None, str]:
    """``(fsspec filesystem or None for local, path)`` for a table's URI, configured from the
    options given the way each table library's options map to fsspec's."""
    if not location.is_url(uri):
        return None, uri
    fs_options: dict[str, Any] = {}
    if options:
        fs_options = storage_options_from_properties(options, uri)
        try:
            import parquet_bloom.delta as pbd
        except ImportError:
            pass
        else:
            fs_options = {**pbd.file_storage_options(uri, options), **fs_options}
    scheme = uri.split("://", 1)[0].lower()
    return location.resolve(uri, storage_options=fs_options if scheme != "file" else None)


def _children(filesystem: Any | None, path: str) -> list[str]:
    """The names in a directory (FileNotFoundError when there is none)."""
    if filesystem is None:
        return sorted(os.listdir(path))
    filesystem.invalidate_cache(path)  # a listing cached earlier would miss a new metadata file
    return sorted(str(e).rstrip("/").rsplit("/", 1)[-1] for e in filesystem.ls(path, detail=False))


def detect_format(uri: str, options: dict[str, str]) -> str | None:
    """``"delta"`` or ``"iceberg"`` when ``uri`` is a table's directory (or an Iceberg
    ``metadata.json``), else None (a dataset, a file, nothing there)."""
    try:
        return _detect(uri, options)
    except TableError:
        return None


def _detect(uri: str, options: dict[str, str]) -> str:
    """``"delta"`` or ``"iceberg"``, told by what the directory holds."""
    if uri.endswith(_ICEBERG_SUFFIX):
        return "iceberg"
    filesystem, path = _filesystem(uri, options)
    try:
        names = _children(filesystem, path)
    except FileNotFoundError:
        raise TableError(f"no table at {uri}: no such directory") from None
    except NotADirectoryError:
        raise TableError(f"no table at {uri}: not a directory") from None
    if "_delta_log" in names:
        return "delta"
    if "metadata" in names:
        inner = _children(filesystem, f"{path.rstrip('/')}/metadata")
        if any(name.endswith(_ICEBERG_SUFFIX) for name in inner):
            return "iceberg"
    raise TableError(
        f"{uri} is neither a Delta table (no _delta_log/) nor an Iceberg table (no "
        "metadata/*.metadata.json); name a table in a catalog with --catalog NAME"
    )


def _metadata_file(uri: str, options: dict[str, str]) -> str:
    """The metadata file of the Iceberg table at ``uri``: itself when it is one, else the
    current one in its ``metadata/`` directory (``version-hint.text``'s, else the highest
    version number: :func:`parquet_bloom._tables.directories.current_metadata`)."""
    if uri.endswith(_ICEBERG_SUFFIX):
        return uri
    filesystem, path = _filesystem(uri, options)
    directory = f"{path.rstrip('/')}/metadata"
    try:
        names = _children(filesystem, directory)
    except (FileNotFoundError, NotADirectoryError):
        names = []
    hint = None
    if VERSION_HINT in names:
        where = f"{directory}/{VERSION_HINT}"
        if filesystem is None:
            with open(where, "rb") as f:
                hint = f.read().decode("utf-8", "replace")
        else:
            hint = bytes(filesystem.cat_file(where)).decode("utf-8", "replace")
    try:
        name = current_metadata(names, hint)
    except ValueError:
        raise TableError(f"no Iceberg table at {uri}: no metadata/*.metadata.json there") from None
    return f"{uri.rstrip('/')}/metadata/{name}"


def data_files(table: Table) -> list[DataFile]:
    """The snapshot's data files, in the table's order."""
    if table.format == "delta":
        from parquet_bloom._tables.delta_snapshot import (
            file_location,
            snapshot_files,
            table_root,
        )

        root = table_root(table.handle)
        return [
            DataFile(f.key, file_location(root, f.path), f.size)
            for f in snapshot_files(table.handle)
        ]
    from pyiceberg.manifest import ManifestContent

    snapshot = table.snapshot()
    if snapshot is None:
        return []
    io = table.handle.io
    return [
        DataFile(
            entry.data_file.file_path,
            local_or_url(entry.data_file.file_path),
            entry.data_file.file_size_in_bytes,
            str(entry.data_file.file_format.name),
        )
        for manifest in snapshot.manifests(io)
        if manifest.content == ManifestContent.DATA
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True)
    ]

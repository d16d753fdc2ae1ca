"""Which table a data file belongs to, told by the directories table formats keep in a table's
root (docs/tables.md#which-files-belong-to-a-table):

- Delta Lake: ``_delta_log/``;
- Iceberg: ``metadata/`` holding ``*.metadata.json``;
- Hudi: ``.hoodie/``;
- Paimon: ``snapshot/`` beside ``schema/`` (a Paimon table writes its first schema before any
  snapshot; asking for both keeps an unrelated ``snapshot/`` folder from marking a tree).

A table's log records each data file's size (Delta's ``add.size``, Iceberg's
``file_size_in_bytes``), so replacing a data file in place with one of another size breaks the
table: :func:`find_table` is how the rewrite refuses to. It looks in every ancestor of the file,
with one listing per ancestor (two where a ``metadata/`` directory must be looked into) on
object storage.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = ["TableMarker", "find_table"]

# What each format's marker directory is, and the table-aware call that rewrites its files.
_TABLE_CALLS = {
    "delta": "parquet_bloom.delta.rewrite_bloom_filters (or 'parquet-bloom table add')",
    "iceberg": "parquet_bloom.iceberg.rewrite_bloom_filters (or 'parquet-bloom table add')",
    "hudi": "Hudi's own writers (parquet-bloom cannot yet commit to a Hudi table)",
    "paimon": "Paimon's own writers (parquet-bloom cannot yet commit to a Paimon table)",
}
_ICEBERG_METADATA = "metadata"
_ICEBERG_SUFFIX = ".metadata.json"
_MARKERS = {"_delta_log": "delta", ".hoodie": "hudi"}
_PAIMON_MARKERS = ("snapshot", "schema")


@dataclass(frozen=True)
class TableMarker:
    """The table ``path`` lies in: its ``format``, its ``root`` directory (a URL on object
    storage) and the ``marker`` directory that tells it."""

    format: str
    root: str
    marker: str

    @property
    def call(self) -> str:
        """The call that rewrites this table's files safely."""
        return _TABLE_CALLS[self.format]

    def refusal(self, path: str) -> str:
        """Why ``path`` is not rewritten in place, and what to do instead."""
        return (
            f"{path} is a data file of the {_FORMAT_NAMES[self.format]} table at {self.root} "
            f"(found {self.marker}): the table records its size, so replacing it in place "
            f"would break the table. Use {self.call}, which writes new files and commits them "
            "to the table; ignore_table=True (--ignore-table) rewrites it anyway"
        )


_FORMAT_NAMES = {"delta": "Delta Lake", "iceberg": "Iceberg", "hudi": "Hudi", "paimon": "Paimon"}


def find_table(path: str, filesystem: Any | None = None) -> TableMarker | None:
    """The table whose root is an ancestor of the file ``path`` (on ``filesystem``: None for
    a local path, else fsspec or ``pyarrow.fs``), or None. The nearest ancestor wins."""
    tree = _Tree(filesystem)
    directory = tree.parent(os.path.realpath(path) if filesystem is None else tree.strip(path))
    while directory:
        children = tree.children(directory)
        found = None
        for marker, format_ in _MARKERS.items():
            if children.get(marker):
                found = format_, marker
                break
        else:
            if all(children.get(marker) for marker in _PAIMON_MARKERS):
                found = "paimon", _PAIMON_MARKERS[0]
            elif children.get(_ICEBERG_METADATA) and any(
                child.endswith(_ICEBERG_SUFFIX) and not is_dir
                for child, is_dir in tree.children(tree.join(directory, _ICEBERG_METADATA)).items()
            ):
                found = "iceberg", _ICEBERG_METADATA
        if found is not None:
            root = tree.name(directory)
            return TableMarker(found[0], root, tree.join(root, found[1]) + "/")
        up = tree.parent(directory)
        if up == directory:
            break
        directory = up
    return None


class _Tree:
    """Directories on local disk (``filesystem`` None), fsspec or ``pyarrow.fs``."""

    def __init__(self, filesystem: Any | None) -> None:
        self.filesystem: Any = filesystem
        self.local = filesystem is None
        self.arrow = _is_arrow(filesystem)

    def strip(self, path: str) -> str:
        strip = getattr(self.filesystem, "_strip_protocol", None)
        return str(strip(path)) if strip is not None else path

    def parent(self, path: str) -> str:
        """The parent directory; on a remote store, "" above the bucket."""
        if self.local:
            return os.path.dirname(path)
        path = path.rstrip("/")
        return path.rsplit("/", 1)[0] if "/" in path else ""

    def join(self, directory: str, name: str) -> str:
        return os.path.join(directory, name) if self.local else f"{directory.rstrip('/')}/{name}"

    def name(self, path: str) -> str:
        """A path as a person names it: a URL on object storage."""
        unstrip = getattr(self.filesystem, "unstrip_protocol", None)
        return str(unstrip(path)) if unstrip is not None and not self.local else path

    def children(self, directory: str) -> dict[str, bool]:
        """A directory's entries, name -> is a directory (nothing if it cannot be listed)."""
        try:
            if self.local:
                with os.scandir(directory) as entries:
                    return {entry.name: entry.is_dir() for entry in entries}
            if self.arrow:
                import pyarrow.fs as pafs

                selector = pafs.FileSelector(directory, allow_not_found=True)
                infos = self.filesystem.get_file_info(selector)
                return {i.base_name: i.type == pafs.FileType.Directory for i in infos}
            entries = self.filesystem.ls(directory, detail=True)
        except OSError:
            return {}
        return {
            str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]: entry.get("type") == "directory"
            for entry in entries
        }


def _is_arrow(filesystem: Any) -> bool:
    return hasattr(filesystem, "open_input_file") and hasattr(filesystem, "get_file_info")

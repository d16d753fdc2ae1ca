"""The files of a listing as pyarrow opens them, and whether two listed entries share a
filesystem (for :func:`parquet_bloom._prune.dataset.prune` of paths)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from parquet_bloom._io.source import ByteSource

__all__ = ["ListedFiles", "describe_filesystem", "same_filesystem"]


def same_filesystem(a: Any | None, b: Any | None) -> bool:
    """Whether two listed entries' filesystems are one: the same object, both local (None), or
    equal instances. Each URL resolves its own instance, a new one when fsspec's instance cache
    is skipped (``skip_instance_cache``); fsspec instances are equal when their class and
    options are (``AbstractFileSystem.__eq__`` compares the token made of them), pyarrow's
    when ``equals`` says so."""
    if a is b:
        return True
    if a is None or b is None:
        return False
    if isinstance(a, pafs.FileSystem):
        return isinstance(b, pafs.FileSystem) and bool(a.equals(b))
    return bool(a == b)


def describe_filesystem(fs: Any | None) -> str:
    if fs is None:
        return "the local filesystem"
    return type(fs).__name__


class ListedFiles(pafs.FSSpecHandler):  # type: ignore[misc]
    """An fsspec filesystem as pyarrow sees it, its files opened as the listing found them:
    each read of a file is one request for exactly the bytes pyarrow asks for (its scan
    coalesces a row group's column chunks into one read itself), through a
    :class:`~parquet_bloom._io.source.ByteSource` given the listed size, so opening a file
    costs no size lookup. fsspec's own file objects read ahead (s3fs: up to 50 MiB past each
    read, so reading one row group of a pruned file read the rest of the file) and look the
    file up first where no listing cache holds it."""

    def __init__(self, fs: Any, sizes: Mapping[str, int]) -> None:
        super().__init__(fs)
        self.sizes = dict(sizes)

    def open_input_file(self, path: str) -> pa.PythonFile:
        source = ByteSource(path, filesystem=self.fs, size=self.sizes.get(path))
        return pa.PythonFile(source.arrow_file(), mode="r")

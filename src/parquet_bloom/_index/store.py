"""An index directory: segments (Puffin files, never changed once written) and the pointer that
names the current ones (docs/index.md#index-directories).

The pointer, ``latest.json``, is replaced whole (a local file by rename, an object by one PUT),
so a reader sees the old list of segments or the new one, never a mixture. It carries each
segment's size and footer, so that a lookup reads the pointer, then slices, then entries:
three rounds from cold. Segments are written before the pointer that names them.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from parquet_bloom import __version__
from parquet_bloom._io import location
from parquet_bloom._io.source import ByteSource
from parquet_bloom._rewrite.output import open_sink
from parquet_bloom.errors import CorruptFileError

__all__ = [
    "POINTER",
    "Pointer",
    "SegmentRef",
    "is_single_file",
    "join",
    "new_segment_name",
    "read_pointer",
    "write_pointer",
]

POINTER = "latest.json"
_FORMAT = "parquet-bloom-index"
_FORMAT_VERSION = 1
# The largest pointer read: a segment's entry is its footer, a few hundred bytes a column and
# size class; thousands of segments fit. A larger one is a corrupt (or hostile) pointer.
MAX_POINTER_SIZE = 64 << 20
_FIRST_READ = 1 << 20


@dataclass(frozen=True)
class SegmentRef:
    """A segment as the pointer names it: ``name`` (in the directory), ``size``, and its footer
    (``footer_offset``; ``footer``: its bytes from the leading magic to the payload's end)."""

    name: str
    size: int
    footer_offset: int
    footer: bytes


@dataclass(frozen=True)
class Pointer:
    """The current state of an index directory: ``generation`` (1 for a new index, one more at
    each refresh or compaction), ``columns``, ``segments``."""

    generation: int
    columns: tuple[str, ...]
    segments: tuple[SegmentRef, ...]
    size: int = 0  # the pointer's own bytes, when read


def is_single_file(target: str) -> bool:
    """Whether an index location names one Puffin file (``*.puffin``) rather than a directory."""
    return target.rstrip("/").endswith(".puffin")


def join(directory: str, name: str) -> str:
    if location.is_url(directory):
        return f"{directory.rstrip('/')}/{name}"
    return os.path.join(directory, name)


def new_segment_name() -> str:
    return f"segment-{uuid.uuid4().hex}.puffin"


def read_pointer(directory: str, storage_options: Mapping[str, Any] | None) -> Pointer | None:
    """The directory's pointer, or None when it has none (no index there yet)."""
    target = join(directory, POINTER)
    try:
        source = ByteSource(target, storage_options=storage_options)
    except FileNotFoundError:
        return None
    with source:
        # One suffix read gives the size and, for a pointer under 1 MiB, all of it.
        try:
            start, data = source.read_tail(_FIRST_READ)
        except FileNotFoundError:
            return None
        if start > 0:
            if source.size > MAX_POINTER_SIZE:
                raise CorruptFileError(
                    f"an index pointer of {source.size} bytes is over the limit of "
                    f"{MAX_POINTER_SIZE}",
                    source=target,
                )
            data = source.read_exact(0, start) + data
    return _decode(data, target)


def _decode(data: bytes, name: str) -> Pointer:
    def bad(reason: str) -> CorruptFileError:
        return CorruptFileError(f"not an index pointer: {reason}", source=name)

    try:
        doc = json.loads(data)
    except ValueError as err:
        raise bad(f"not JSON ({err})") from None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise bad(f"its format is not {_FORMAT!r}")
    if doc.get("format-version") != _FORMAT_VERSION:
        raise bad(f"format-version {doc.get('format-version')!r}, not {_FORMAT_VERSION}")
    generation, columns, segments = doc.get("generation"), doc.get("columns"), doc.get("segments")
    if not isinstance(generation, int) or generation < 1:
        raise bad(f"generation {generation!r}")
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise bad("columns is not a list of names")
    if not isinstance(segments, list):
        raise bad("segments is not a list")
    refs = []
    for s in segments:
        if not isinstance(s, dict):
            raise bad("a segment is not an object")
        file, size, offset, footer = (s.get(k) for k in ("name", "size", "footer-offset", "footer"))
        if (
            not isinstance(file, str)
            or "/" in file
            or os.sep in file
            or not file.endswith(".puffin")
            or not isinstance(size, int)
            or not isinstance(offset, int)
            or size < 0
            or offset < 0
            or not isinstance(footer, str)
        ):
            raise bad(f"a segment entry {s!r:.200} is malformed")
        refs.append(SegmentRef(file, size, offset, footer.encode("utf-8")))
    return Pointer(generation, tuple(columns), tuple(refs), len(data))


def write_pointer(
    directory: str, pointer: Pointer, storage_options: Mapping[str, Any] | None
) -> None:
    """Replace the directory's pointer with ``pointer``, whole."""
    doc = {
        "format": _FORMAT,
        "format-version": _FORMAT_VERSION,
        "created-by": f"parquet-bloom {__version__}",
        "generation": pointer.generation,
        "columns": list(pointer.columns),
        "segments": [
            {
                "name": s.name,
                "size": s.size,
                "footer-offset": s.footer_offset,
                "footer": s.footer.decode("utf-8"),
            }
            for s in pointer.segments
        ],
    }
    data = json.dumps(doc, separators=(",", ":")).encode()
    filesystem, path = location.resolve(join(directory, POINTER), storage_options=storage_options)
    if filesystem is None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open_sink(filesystem, path) as sink:
        sink.write(data)


def segment_refs(pointer: Pointer | None) -> Sequence[SegmentRef]:
    return () if pointer is None else pointer.segments

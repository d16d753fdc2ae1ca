"""An index directory: segments (Puffin files, never changed once written) and the pointers that
name the current ones (docs/index.md#index-directories).

Each change of the index writes a pointer of the next generation ``n``,
``pointer-<k>-<n>.json`` (``k`` = 999,999,999,999,999,999 - ``n`` in 18 digits, so that the
names sort newest first), only if no writer made that generation first (a local file by a
hard link of the complete file, an S3 object by a PutObject with ``If-None-Match: *``, any
other fsspec store by its ``pipe_file(mode="create")``): two writers that read generation
``n - 1`` cannot both win, and the loser reads the winner's pointer and applies its change to
it again (:func:`commit`). The newest generation is the index. A copy of it, ``latest.json``,
is then replaced whole: readers read it while they look for the newest pointer's name (on S3
one listing of one key: the first name after ``pointer-``, whatever the number of pointers),
and read the newest pointer only when the copy is behind it (a writer that stopped between
the two writes, or two writers' copies crossing). An index written before versioned pointers
has ``latest.json`` alone, which is read as its generation.

A pointer carries each segment's size and footer, so that a lookup reads the pointer, then
slices, then entries: three rounds from cold. Segments are written before the pointer that
names them.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any

from parquet_bloom import __version__
from parquet_bloom._io import limits, location
from parquet_bloom._io.failures import fetching
from parquet_bloom._io.object_sink import S3Sink
from parquet_bloom._io.sink import FileSink
from parquet_bloom._io.source import ByteSource
from parquet_bloom._rewrite.output import is_s3, open_sink
from parquet_bloom._threads import read_pool
from parquet_bloom.errors import BloomFilterError, CorruptFileError

__all__ = [
    "POINTER",
    "Directory",
    "Listed",
    "Pointer",
    "SegmentRef",
    "commit",
    "directory_files",
    "is_single_file",
    "join",
    "modified_time",
    "new_segment_name",
    "pointer_files",
    "pointer_generation",
    "pointer_name",
    "read_pointer",
    "remove",
    "write_pointer",
]

POINTER = "latest.json"
_FORMAT = "parquet-bloom-index"
_FORMAT_VERSION = 1
# The largest pointer read: a segment's entry is its footer, a few hundred bytes a column and
# size class; thousands of segments fit. A larger one is a corrupt (or hostile) pointer.
MAX_POINTER_SIZE = 64 << 20
_FIRST_READ = 1 << 20
# A pointer of one generation n: pointer-<k>-<n>.json, k = MAX_GENERATION - n in 18 digits, so
# that the newest sorts first (an S3 listing returns keys in ascending order).
MAX_GENERATION = 10**18 - 1
POINTER_PREFIX = "pointer-"
_VERSIONED = re.compile(r"^pointer-([0-9]{18})-([1-9][0-9]{0,17})\.json$")
# Changes that lose the race for a generation this many times in a row give up (an error
# saying so): each loss means another writer's change went in.
MAX_COMMIT_ATTEMPTS = 32


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
    size: int = 0  # the bytes read to find it (its copy's, and its own when read too)
    reads: int = 0  # the requests made to find it (the copy, the listing, the pointer)


def is_single_file(target: str) -> bool:
    """Whether an index location names one Puffin file (``*.puffin``) rather than a directory."""
    return target.rstrip("/").endswith(".puffin")


def join(directory: str, name: str) -> str:
    if location.is_url(directory):
        return f"{directory.rstrip('/')}/{name}"
    return os.path.join(directory, name)


def new_segment_name() -> str:
    return f"segment-{uuid.uuid4().hex}.puffin"


def pointer_name(generation: int) -> str:
    """The name of the pointer of ``generation`` (1 to :data:`MAX_GENERATION`)."""
    if not 1 <= generation <= MAX_GENERATION:
        raise ValueError(f"an index generation is 1 to {MAX_GENERATION}, not {generation}")
    return f"{POINTER_PREFIX}{MAX_GENERATION - generation:018d}-{generation}.json"


@dataclass(frozen=True)
class Directory:
    """An index directory resolved once: its ``name`` as given, its ``filesystem`` (None:
    local) and its ``root`` path there, so that the reads of one pointer (and of the segments
    it names, by :class:`~parquet_bloom._index.lookup.BloomIndex`) share one client."""

    name: str
    filesystem: Any | None
    root: str

    @classmethod
    def of(cls, directory: str, storage_options: Mapping[str, Any] | None) -> Directory:
        if not location.is_url(directory):
            return cls(directory, None, directory)
        filesystem, root = location.resolve(directory, storage_options=storage_options)
        return cls(directory, filesystem, root)

    def path(self, name: str) -> str:
        if self.filesystem is None:
            return os.path.join(self.root, name)
        return f"{self.root.rstrip('/')}/{name}"


def read_pointer(
    directory: str | Directory, storage_options: Mapping[str, Any] | None
) -> Pointer | None:
    """The directory's newest pointer, or None when it has none (no index there yet): its copy
    ``latest.json`` read while the newest pointer's name is looked for (at once on a remote
    store), and the newest pointer read when the copy is behind it. ``directory``: a
    location, or one resolved already (``storage_options`` then unused)."""
    where = (
        directory if isinstance(directory, Directory) else Directory.of(directory, storage_options)
    )
    for _ in range(3):
        gone, found = _read_newest(where)
        if not gone:
            return found
    raise CorruptFileError(
        "the newest index pointer was removed three times between listing and reading it",
        source=where.name,
    )


def _read_newest(where: Directory) -> tuple[bool, Pointer | None]:
    """:func:`read_pointer` once: (gone, pointer); ``gone`` when the newest pointer listed was
    removed (by a compaction, once newer ones were written) before it was read."""
    if where.filesystem is not None:
        listing = read_pool().submit(_newest_generation, where)
        try:
            copy = _read_one(where, POINTER)
        finally:
            newest = listing.result()
    else:
        copy = _read_one(where, POINTER)
        newest = _newest_generation(where)
    reads = (0 if copy is None else 1) + 1
    size = 0 if copy is None else copy.size
    if newest is None or (copy is not None and copy.generation >= newest):
        return False, None if copy is None else replace(copy, reads=reads)
    found = _read_one(where, pointer_name(newest))
    if found is None:
        return True, None
    if found.generation != newest:
        raise CorruptFileError(
            f"not an index pointer: its generation is {found.generation}, its name says {newest}",
            source=join(where.name, pointer_name(newest)),
        )
    return False, replace(found, size=size + found.size, reads=reads + 1)


def _newest_generation(where: Directory) -> int | None:
    """The highest generation of the directory's pointers (None: none, or no directory). On
    S3, the first key after ``pointer-`` (names sort newest first): one request of one key,
    however many pointers there are; elsewhere (a directory bucket too, whose listings are
    not in order), and when that key is not a pointer's name, from the directory's listing."""
    if _sorted_listing(where):
        found, first = _first_pointer_name(where.filesystem, where.root, where.name)
        if not found:
            return None
        generation = pointer_generation(first)
        if generation is not None:
            return generation
    return max(_pointers(_files(where)), default=None)


def _sorted_listing(where: Directory) -> bool:
    """Whether the directory is on S3 in a bucket whose listings are in ascending order of key:
    a general purpose bucket, not a directory bucket (S3 Express One Zone, named
    ``...--x-s3``), whose listings are in no order and take only prefixes ending in ``/``."""
    filesystem = where.filesystem
    if filesystem is None or not is_s3(filesystem):
        return False
    return not str(filesystem.split_path(where.root)[0]).endswith("--x-s3")


def _first_pointer_name(filesystem: Any, root: str, name: str) -> tuple[bool, str]:
    """(found, base name): the first object of the S3 directory ``root`` (``name``, as the
    user gave it) whose name starts with ``pointer-``, in S3's (ascending) order, from a
    listing of one key."""
    bucket, key, _ = filesystem.split_path(root)
    prefix = f"{key.rstrip('/')}/" if key else ""
    try:
        with fetching(name, action="list"):
            response = filesystem.call_s3(
                "list_objects_v2", Bucket=bucket, Prefix=prefix + POINTER_PREFIX, MaxKeys=1
            )
    except FileNotFoundError:  # no bucket
        return False, ""
    contents = response.get("Contents") or []
    if not contents:
        return False, ""
    return True, str(contents[0]["Key"])[len(prefix) :]


def pointer_files(directory: str, storage_options: Mapping[str, Any] | None) -> dict[int, Listed]:
    """The directory's versioned pointers: generation -> file."""
    return _pointers(directory_files(directory, storage_options))


def _pointers(listed: list[Listed]) -> dict[int, Listed]:
    found = {}
    for file in listed:
        generation = pointer_generation(file.name)
        if generation is not None:
            found[generation] = file
    return found


def pointer_generation(name: str) -> int | None:
    """The generation of a versioned pointer's base name (None: not one)."""
    matched = _VERSIONED.match(name)
    if matched is None:
        return None
    generation = int(matched.group(2))
    return generation if int(matched.group(1)) == MAX_GENERATION - generation else None


@dataclass(frozen=True)
class Listed:
    """A file directly in an index directory, as one listing gave it: its base ``name``, its
    ``entry``, and when it was last ``modified`` (seconds since the epoch; None when the
    listing does not say: a local directory's, or a store's whose listing has no time)."""

    name: str
    entry: location.Entry
    modified: float | None = None


def directory_files(directory: str, storage_options: Mapping[str, Any] | None) -> list[Listed]:
    """The files directly in the directory, listed once (on object storage: one listing,
    paged by the store)."""
    return _files(Directory.of(directory, storage_options))


def _files(where: Directory) -> list[Listed]:
    filesystem = where.filesystem
    if filesystem is None:
        try:
            with os.scandir(where.root) as names:
                return [
                    Listed(e.name, location.Entry(e.path, None, None)) for e in names if e.is_file()
                ]
        except (FileNotFoundError, NotADirectoryError):
            return []
    try:
        with fetching(where.name, action="list"):
            found = filesystem.find(
                where.root, withdirs=False, detail=True, **limits.deadline_kwargs(filesystem.find)
            )
    except FileNotFoundError:
        return []
    prefix = where.root.rstrip("/") + "/"
    out = []
    for path, info in found.items():
        name = path[len(prefix) :] if path.startswith(prefix) else ""
        if not name or "/" in name or info.get("type", "file") != "file":
            continue  # the directory itself, or a file below it
        size = info.get("size")
        entry = location.Entry(path, None if size is None else int(size), filesystem)
        out.append(Listed(name, entry, modified_time(info)))
    return out


def modified_time(info: Mapping[str, Any]) -> float | None:
    """When a file was last modified (seconds since the epoch) as an fsspec ``info`` says it:
    s3fs's ``LastModified``, adlfs's ``last_modified``, others' ``mtime`` (None: not said)."""
    value = info.get("LastModified") or info.get("mtime") or info.get("last_modified")
    if value is None:
        return None
    return float(value.timestamp()) if hasattr(value, "timestamp") else float(value)


def remove(directory: str, files: Sequence[Listed]) -> list[str]:
    """Delete ``files`` of the index directory ``directory``: on S3 up to 1,000 a request
    (DeleteObjects), elsewhere one at a time; a file already gone counts as deleted. Their
    names (URLs on a remote store) in the order given; a file the store would not delete is
    an OSError naming it."""
    s3: dict[tuple[int, str], list[Listed]] = {}
    for file in files:
        fs = file.entry.filesystem
        if fs is None:
            with suppress(FileNotFoundError):
                os.remove(file.entry.path)
        elif is_s3(fs):
            s3.setdefault((id(fs), fs.split_path(file.entry.path)[0]), []).append(file)
        else:
            with suppress(FileNotFoundError):
                fs.rm_file(file.entry.path)
    for (_, bucket), group in s3.items():
        store: Any = group[0].entry.filesystem
        for start in range(0, len(group), 1000):
            keys = [store.split_path(f.entry.path)[1] for f in group[start : start + 1000]]
            response = store.call_s3(
                "delete_objects",
                Bucket=bucket,
                Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True},
            )
            errors = response.get("Errors") or []
            if errors:
                first = errors[0]
                raise OSError(
                    f"the store would not delete {len(errors)} of the index's old files in "
                    f"{directory}, s3://{bucket}/{first.get('Key')} among them: "
                    f"{first.get('Code')} {first.get('Message')}"
                )
    return [f.entry.name for f in files]


def _read_one(where: Directory, name: str) -> Pointer | None:
    """The pointer in the directory's file ``name``, or None when there is none."""
    target = join(where.name, name)
    try:
        source = ByteSource(where.path(name), filesystem=where.filesystem)
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


def commit(
    directory: str,
    base: Pointer | None,
    change: Callable[[Pointer | None], Pointer | None],
    storage_options: Mapping[str, Any] | None,
) -> Pointer | None:
    """Write ``change(current)`` as the pointer of the generation after ``current``, starting
    from ``base`` (the pointer the caller read), only if no other writer wrote that generation
    first; when one did, read the newest pointer and apply ``change`` to it again. ``change``
    returns None when there is nothing to write (then nothing is, and None is returned); it
    may do work of its own (write a segment) for a current pointer it was not made for. The
    pointer written is returned."""
    current = base
    for _ in range(MAX_COMMIT_ATTEMPTS):
        wanted = change(current)
        if wanted is None:
            return None
        generation = 1 if current is None else current.generation + 1
        made = replace(wanted, generation=generation)
        data = _encode(made)
        try:
            _create(join(directory, pointer_name(generation)), data, storage_options)
        except FileExistsError:
            current = read_pointer(directory, storage_options)
            continue
        # The copy readers read first; behind the newest when another writer's crosses it,
        # which a reader's listing tells.
        _replace(join(directory, POINTER), data, storage_options)
        return made
    raise BloomFilterError(
        f"the index changed {MAX_COMMIT_ATTEMPTS} times while this change was being made "
        "(other builds, refreshes or compactions at once): run it again",
        source=directory,
    )


def write_pointer(
    directory: str, pointer: Pointer, storage_options: Mapping[str, Any] | None
) -> None:
    """Make ``pointer`` the directory's index as the generation after the current one,
    whatever the current one names (a new index that replaces any there)."""
    commit(
        directory,
        read_pointer(directory, storage_options),
        lambda current: pointer,
        storage_options,
    )


def _encode(pointer: Pointer) -> bytes:
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
    return json.dumps(doc, separators=(",", ":")).encode()


def _create(target: str, data: bytes, storage_options: Mapping[str, Any] | None) -> None:
    """Write the object ``target`` only if it does not exist (FileExistsError if it does)."""
    filesystem, path = location.resolve(target, storage_options=storage_options)
    if filesystem is None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with FileSink(path, exclusive=True) as sink:
            sink.write(data)
    elif is_s3(filesystem):
        with S3Sink(filesystem, path, if_none_match=True) as s3_sink:
            s3_sink.write(data)
    else:  # the backend's exclusive create where it has one, else fsspec's check, then write
        filesystem.pipe_file(path, data, mode="create")


def _replace(target: str, data: bytes, storage_options: Mapping[str, Any] | None) -> None:
    """Replace the object ``target`` whole with ``data``."""
    filesystem, path = location.resolve(target, storage_options=storage_options)
    with open_sink(filesystem, path) as sink:
        sink.write(data)


def segment_refs(pointer: Pointer | None) -> Sequence[SegmentRef]:
    return () if pointer is None else pointer.segments

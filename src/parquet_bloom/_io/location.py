"""Where files live: what a caller passes, turned into a filesystem and paths.

A caller names a file or a set of files with

- a local path, or a ``file://`` URL (read with ``pread``, no filesystem object);
- a URL of any fsspec protocol (``s3://``, ``gs://``, ``abfs://``, ``https://``,
  ``memory://``...), resolved with ``fsspec.core.url_to_fs(url, **storage_options)``: the
  backend finds credentials and endpoints through its own chain (environment variables such
  as ``AWS_ENDPOINT_URL``, config files, instance metadata) unless ``storage_options`` says;
- a path on a filesystem object: fsspec's, or a ``pyarrow.fs.FileSystem``.

:func:`resolve` turns one such name into ``(filesystem, path)``. :func:`list_files` turns a
name that stands for many files, a directory, a prefix ending in ``/`` or a glob (``lake/``,
``s3://bucket/table/``, ``lake/day=*/``), into the files under it: listed once (one recursive
listing of the root, each file with its size, so that opening it needs no size lookup),
without hidden and metadata entries (:func:`is_hidden`, the rule of pyarrow's dataset
discovery), in sorted order. See docs/object-storage.md for what each costs in requests.

fsspec and its backends are optional: a missing one raises ImportError naming the extra to
install (:func:`install_hint`).

Every filesystem made here gets the request budget in force (:mod:`parquet_bloom._io.limits`)
through its backend's own options, under the ``storage_options`` given; a listing stops
waiting at the budget's deadline.
"""

from __future__ import annotations

import errno
import os
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from parquet_bloom._io import limits
from parquet_bloom._io.failures import fetching

__all__ = [
    "Entry",
    "has_glob",
    "install_hint",
    "is_hidden",
    "is_url",
    "list_files",
    "resolve",
    "split_glob",
    "translate_glob",
]

# The extra that installs each protocol's backend (pyproject.toml [project.optional-dependencies]).
_EXTRAS = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "abfs": "azure",
    "abfss": "azure",
    "az": "azure",
    "adl": "azure",
    "http": "http",
    "https": "http",
}
# A URL's scheme (RFC 3986): a letter, then letters, digits, "+", "-", ".". A Windows drive
# letter ("C:\\...") has no "//" after its colon, so it is not taken for one.
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
# A chained fsspec URL ("simplecache::s3://..."), resolved by fsspec as a whole.
_CHAIN = "::"
_GLOB_CHARS = frozenset("*?[")
# Path components that pyarrow's dataset discovery leaves out (FileSelector's
# selector_ignore_prefixes default): "." hides .crc files, .hoodie/, .DS_Store; "_" hides
# _delta_log/, _SUCCESS, _metadata and _common_metadata, _temporary/.
HIDDEN_PREFIXES = (".", "_")


@dataclass(frozen=True)
class Entry:
    """One file: its ``path`` on ``filesystem`` (None: a local path), its ``size`` when a
    listing gave it (None: unknown, looked up when opened), and ``listed``: False for a name
    taken to be one file without any request (a plain remote URL), which may turn out to be a
    directory when opened."""

    path: str
    size: int | None
    filesystem: Any | None
    listed: bool = True

    @property
    def name(self) -> str:
        """The file as a person names it: its URL on a remote filesystem, else its path."""
        unstrip = getattr(self.filesystem, "unstrip_protocol", None)
        if unstrip is None or _is_local_fsspec(self.filesystem):
            return self.path
        return str(unstrip(self.path))


# -- pure helpers ----------------------------------------------------------------------------------


def is_url(text: str) -> bool:
    """Whether ``text`` is a URL (``scheme://...``, or a chained fsspec URL)."""
    return bool(_URL.match(text)) or _CHAIN in text


def install_hint(protocol: str) -> str:
    """The ``pip install`` line that brings the backend of ``protocol``."""
    extra = _EXTRAS.get(protocol.lower(), "fsspec")
    return f"pip install 'parquet-bloom[{extra}]'"


def has_glob(path: str) -> bool:
    """Whether ``path`` holds glob characters (``*``, ``?``, ``[``)."""
    return any(c in _GLOB_CHARS for c in path)


def split_glob(path: str) -> tuple[str, str]:
    """``(root, pattern)``: the directory before the first component with a glob character,
    and the rest. ``"lake/day=*/x"`` -> ``("lake", "day=*/x")``."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        if has_glob(part):
            root = "/".join(parts[:i])
            if not root and path.startswith("/"):
                root = "/"
            return root, "/".join(parts[i:])
    return path, ""


def translate_glob(pattern: str) -> re.Pattern[str]:
    """A regular expression for a glob over ``/``-separated paths: ``*`` and ``?`` stay inside
    one component, ``**`` as a whole component spans any number of them, ``[...]`` is a
    character class (``[!...]`` negated)."""
    out = []
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]*/)*")
            continue
        j, piece = 0, []
        while j < len(part):
            c = part[j]
            if c == "*":
                piece.append("[^/]*")
            elif c == "?":
                piece.append("[^/]")
            elif c == "[" and (end := _class_end(part, j)) is not None:
                body = part[j + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                piece.append("[" + body.replace("\\", "\\\\") + "]")
                j = end
            else:
                piece.append(re.escape(c))
            j += 1
        out.append("".join(piece) + ("" if last else "/"))
    return re.compile("".join(out) + r"\Z")


def _class_end(part: str, start: int) -> int | None:
    """The index of the ``]`` closing the character class opened at ``start``, or None (then
    the ``[`` is literal). A ``]`` first in the class (after an optional ``!``) is a member."""
    first = start + 1 + (part[start + 1 : start + 2] == "!")
    end = part.find("]", first + 1)
    return None if end < 0 else end


def is_hidden(parts: Sequence[str], named: Sequence[str] = ()) -> bool:
    """Whether a file whose path components below the listed root are ``parts`` is a hidden
    or metadata entry: any component starting with ``.`` or ``_``, as pyarrow's dataset
    discovery skips them. A component the caller named itself (the component of the glob
    ``named`` at the same depth starts with the same character) does not hide its files."""
    for i, part in enumerate(parts):
        if part.startswith(HIDDEN_PREFIXES):
            given = named[i] if i < len(named) else ""
            if not given.startswith(part[0]):
                return True
    return False


def _matches(regex: re.Pattern[str], relative: str, *, directories_only: bool) -> bool:
    """Whether a file at ``relative`` (below the glob's root) is selected: the pattern matches
    the file itself or one of the directories it lies in."""
    parts = relative.split("/")
    start = len(parts) - 1 if not directories_only else len(parts) - 2
    return any(regex.match("/".join(parts[: i + 1])) for i in range(start, -1, -1))


# -- resolving a name ------------------------------------------------------------------------------


def _is_local_fsspec(filesystem: Any) -> bool:
    protocol = getattr(filesystem, "protocol", None)
    protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol or ())
    return "file" in protocols or "local" in protocols


def _is_arrow(filesystem: Any) -> bool:
    return hasattr(filesystem, "open_input_file") and hasattr(filesystem, "get_file_info")


def _url_to_fs(url: str, storage_options: Mapping[str, Any]) -> tuple[Any, str]:
    protocol = url.split("::")[-1].split("://", 1)[0] if "://" in url else url.split("::")[0]
    try:
        import fsspec.core
    except ImportError as err:
        raise ImportError(
            f"reading {url} needs fsspec: {install_hint(protocol)}", name=err.name
        ) from err
    try:
        options = limits.storage_options_with_limits(url, storage_options)
        fs, path = fsspec.core.url_to_fs(url, **options)
        limits.configure_filesystem(fs)
    except ImportError as err:
        raise ImportError(
            f"reading {protocol}:// URLs needs the {protocol} backend of fsspec: "
            f"{install_hint(protocol)} ({err})",
            name=err.name,
        ) from err
    except ValueError as err:
        if "Protocol not known" in str(err):
            raise ValueError(f"{url}: {err}") from None
        raise
    return fs, str(path)


def resolve(
    source: str | os.PathLike[str],
    *,
    filesystem: Any | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[Any | None, str]:
    """``(filesystem, path)`` for a name: ``(None, path)`` for a local file (a path or a
    ``file://`` URL), ``(fsspec filesystem, path)`` for any other URL, and ``filesystem``
    itself with the path when one is given (``storage_options`` then has no use: ValueError).
    """
    if filesystem is not None:
        if storage_options:
            raise ValueError("storage_options= configures a URL's filesystem; not with filesystem=")
        if not isinstance(source, str | os.PathLike):
            kind = type(source).__name__
            raise TypeError(f"with a filesystem, source must be a path, not {kind}")
        return filesystem, os.fspath(source)
    path = os.fspath(source)
    if not isinstance(path, str):
        raise TypeError(f"a path must be text, not {type(path).__name__}")
    if not is_url(path):
        if storage_options:
            raise ValueError(f"storage_options= is for URLs; {path!r} is a local path")
        return None, path
    fs, fs_path = _url_to_fs(path, storage_options or {})
    if _is_local_fsspec(fs) and _CHAIN not in path:
        # A file:// URL is percent-encoded (RFC 8089; Path.as_uri() writes "region%3Dus"),
        # which fsspec's local filesystem leaves as it is.
        return None, urllib.parse.unquote(str(fs_path))
    return fs, str(fs_path)


# -- listing ---------------------------------------------------------------------------------------


def list_files(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    filesystem: Any | None = None,
    storage_options: Mapping[str, Any] | None = None,
    list_plain: bool = False,
) -> list[Entry]:
    """The files ``source`` stands for, each as an :class:`Entry`.

    A directory, a name ending in ``/`` (a prefix on object storage) or a glob is listed once,
    recursively, keeping each file's size and leaving out hidden and metadata entries
    (:func:`is_hidden`); a glob that matches a directory stands for the files under it. A
    local file stands for itself. A remote name without ``/`` at the end or glob characters
    stands for one object, unlisted (no request made), unless ``list_plain``: then it is
    listed too, as a directory if it is one. A list of names is the concatenation of each
    name's files. An empty listing raises FileNotFoundError. A listing that fails (the store's
    error, a reset, a timeout) raises :class:`~parquet_bloom.errors.FileReadError` naming
    ``source``; a name the store says is not there, FileNotFoundError naming it.
    """
    if not isinstance(source, str | os.PathLike):
        entries = []
        for one in source:
            entries.extend(
                list_files(
                    one,
                    filesystem=filesystem,
                    storage_options=storage_options,
                    list_plain=list_plain,
                )
            )
        return entries
    text = os.fspath(source)
    fs, path = resolve(text, filesystem=filesystem, storage_options=storage_options)
    as_directory = text.endswith("/") or (fs is None and text.endswith(os.sep))
    if fs is None:
        if has_glob(path):
            entries = _glob(
                path, as_directory, lambda root: _walk(root or ".", keep_prefix=bool(root))
            )
        elif as_directory or os.path.isdir(path):
            if not os.path.isdir(path):
                raise NotADirectoryError(f"{path} is not a directory")
            entries = [e for rel, e in _walk(path) if not is_hidden(rel.split("/"))]
        else:
            return [Entry(path, None, None)]  # opening it reports a missing file
    elif has_glob(path):
        entries = _glob(path, as_directory, lambda root: _listing(text, fs, root))
    elif as_directory or list_plain:
        listed = _listing(text, fs, path.rstrip("/"))
        entries = [e for rel, e in listed if not is_hidden(rel.split("/"))]
    else:
        return [Entry(path, None, fs, listed=False)]
    if not entries:
        # "[Errno 2] no Parquet files under: 's3://bucket/t/'", the name as its filename
        raise FileNotFoundError(errno.ENOENT, "no Parquet files under", text)
    return entries


def _glob(
    path: str, as_directory: bool, lister: Callable[[str], list[tuple[str, Entry]]]
) -> list[Entry]:
    """The files a glob selects, from one listing (``lister``) of the directory before its
    first glob component."""
    root, pattern = split_glob(path.rstrip("/"))
    regex = translate_glob(pattern)
    named = pattern.split("/")
    return [
        e
        for rel, e in lister(root)
        if _matches(regex, rel, directories_only=as_directory)
        and not is_hidden(rel.split("/"), named)
    ]


def _walk(root: str, *, keep_prefix: bool = True) -> list[tuple[str, Entry]]:
    """Every file under a local ``root``: (path relative to it with ``/``, entry), sorted."""
    out = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in files:
            full = os.path.join(directory, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            try:
                size: int | None = os.stat(full).st_size
            except OSError:
                size = None  # gone since the listing, or a dangling link: opening it says why
            out.append((rel, Entry(full if keep_prefix else rel, size, None)))
    out.sort(key=lambda pair: pair[1].path)
    return out


def _listing(name: str, filesystem: Any, root: str) -> list[tuple[str, Entry]]:
    """:func:`_find`, its failures in the library's terms, naming ``name`` (what the caller
    asked to list): the same mapping as a read's (:func:`parquet_bloom._io.failures.fetching`)."""
    with fetching(name, action="list"):
        return _find(filesystem, root)


def _find(filesystem: Any, root: str) -> list[tuple[str, Entry]]:
    """Every file under ``root`` on a filesystem, in one recursive listing: (path relative to
    ``root``, entry with its size), sorted. A root that is a file lists as itself."""
    if _is_arrow(filesystem):
        return _find_arrow(filesystem, root)
    found = filesystem.find(
        root, withdirs=False, detail=True, **limits.deadline_kwargs(filesystem.find)
    )
    prefix = root.rstrip("/") + "/"
    out = []
    for path, info in found.items():
        if info.get("type", "file") != "file":
            continue
        rel = path[len(prefix) :] if path.startswith(prefix) else path.rsplit("/", 1)[-1]
        size = info.get("size")
        out.append((rel, Entry(path, None if size is None else int(size), filesystem)))
    out.sort(key=lambda pair: pair[1].path)
    return out


def _find_arrow(filesystem: Any, root: str) -> list[tuple[str, Entry]]:
    import pyarrow.fs as pafs

    info = filesystem.get_file_info(root)
    if info.type == pafs.FileType.File:
        return [(info.base_name, Entry(info.path, int(info.size), filesystem))]
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"{root}: no such file or directory")
    selector = pafs.FileSelector(root, recursive=True)
    prefix = root.rstrip("/") + "/"
    out = []
    for item in filesystem.get_file_info(selector):
        if item.type != pafs.FileType.File:
            continue
        rel = item.path[len(prefix) :] if item.path.startswith(prefix) else item.base_name
        out.append((rel, Entry(item.path, item.size, filesystem)))
    out.sort(key=lambda pair: pair[1].path)
    return out

"""A store's failures in the library's terms: :func:`fetching` turns what a filesystem raises
while fetching bytes of an object, or listing or looking one up, into a located
:class:`~parquet_bloom.errors.FileReadError`, a FileNotFoundError or a PermissionError naming the
object. Reads (:mod:`parquet_bloom._io.source`) and listings (:mod:`parquet_bloom._io.location`)
both go through it."""

from __future__ import annotations

import errno
import time
from collections.abc import Iterator
from contextlib import contextmanager

from parquet_bloom._io import limits
from parquet_bloom.errors import BloomFilterError, FileReadError

__all__ = ["describe_range", "fetching"]


# What a filesystem raises that says exactly what is wrong with the file, not with fetching it.
# (FileNotFoundError and PermissionError are named by :func:`fetching`, which also decides
# whether a "not found" is one.)
_PRECISE = (
    BloomFilterError,
    IsADirectoryError,
    NotADirectoryError,
    TypeError,
)


def _detail(err: BaseException) -> str:
    """What an error says, never nothing: fsspec's FSTimeoutError and asyncio's timeouts have
    no message."""
    text = " ".join(str(err).split())
    if text:
        return text
    return "timed out" if isinstance(err, TimeoutError) else "no detail given"


def describe_range(offset: int | None, length: int | None) -> str:
    """A read's bytes as a message names them: ``" 660 bytes at offset 51655"``, ``" the last
    8 bytes"`` (a suffix read: the size is not known yet), nothing for no range (a look-up, a
    listing)."""
    if offset is None:
        return "" if length is None else f" the last {length} bytes"
    return f" from offset {offset}" if length is None else f" {length} bytes at offset {offset}"


@contextmanager
def fetching(
    name: str,
    offset: int | None = None,
    length: int | None = None,
    *,
    found: bool = False,
    action: str = "read",
) -> Iterator[None]:
    """A filesystem's failure to fetch bytes of ``name`` (botocore's connection errors, a 5xx
    it gave up retrying, aiohttp's response and payload errors, a timeout) as a located
    :class:`FileReadError` naming ``name`` and the bytes asked for (``offset``, ``length``:
    :func:`describe_range`). ``action`` names what was being done ("read", "list", "look up").

    Not found is not always the same thing. Before anything was fetched (``found`` False: the
    first request about the object), the object is missing: FileNotFoundError, naming
    ``name``. Once a request about it succeeded (``found``), a "not found" means the object
    was deleted or replaced while it was being read: a read error like any other, located.
    A refusal (PermissionError) stays one, naming ``name``. A timeout says after how long, and
    how to allow more (:func:`limits.timeout_error`)."""
    start = time.monotonic()
    try:
        yield
    except _PRECISE:
        raise
    except FileNotFoundError as err:
        if found:
            raise FileReadError(
                f"cannot {action}{describe_range(offset, length)}: not found after it was "
                f"read (deleted or replaced meanwhile): {type(err).__name__}: {_detail(err)}",
                source=name,
                offset=offset,
            ) from err
        if err.filename == name:
            raise
        raise FileNotFoundError(errno.ENOENT, _detail(err), name) from err
    except PermissionError as err:
        if err.filename == name:
            raise
        raise PermissionError(errno.EACCES, _detail(err), name) from err
    except Exception as err:
        timed_out = limits.timeout_error(err, name, offset, length, time.monotonic() - start)
        if timed_out is not None:
            raise timed_out from err
        raise FileReadError(
            f"cannot {action}{describe_range(offset, length)}: {type(err).__name__}: "
            f"{_detail(err)}",
            source=name,
            offset=offset,
        ) from err

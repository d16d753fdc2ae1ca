"""One error root for everything a Parquet file can get wrong.

``BloomFilterError`` is a ``ValueError`` so that callers who only know "bad data" can catch
that; its subclasses say what kind of bad. Each error carries where it happened (file, row
group, column, file offset) both as attributes and in its message. Misuse by the caller (a
wrong argument type, an unknown column name) stays a plain ``TypeError``/``ValueError``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BloomFilterError",
    "CorruptFileError",
    "DecryptionError",
    "FileReadError",
    "MissingExtraError",
    "MissingKeyError",
    "TableFileError",
    "TableVersionError",
    "UnsupportedFileError",
]


class BloomFilterError(ValueError):
    """A Parquet file, footer or Bloom filter that cannot be used as it is."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        row_group: int | None = None,
        column: str | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = message
        self.source = source
        self.row_group = row_group
        self.column = column
        self.offset = offset
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.source is not None:
            where.append(f"file {self.source}")
        if self.row_group is not None:
            where.append(f"row group {self.row_group}")
        if self.column is not None:
            where.append(f"column {self.column!r}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.reason} ({', '.join(where)})" if where else self.reason

    def located(
        self,
        *,
        source: str | None = None,
        row_group: int | None = None,
        column: str | None = None,
        offset: int | None = None,
    ) -> BloomFilterError:
        """A copy of this error with the parts of its location it lacked filled in."""
        return type(self)(
            self.reason,
            source=self.source if self.source is not None else source,
            row_group=self.row_group if self.row_group is not None else row_group,
            column=self.column if self.column is not None else column,
            offset=self.offset if self.offset is not None else offset,
            **self._details(),
        )

    def _details(self) -> dict[str, Any]:
        """What a subclass carries besides the location, for :meth:`located`'s copy."""
        return {}


class CorruptFileError(BloomFilterError):
    """Bytes that do not decode: a bad magic, footer, Thrift struct, offset or length."""


class UnsupportedFileError(BloomFilterError):
    """A well-formed file using something this library does not read (encryption, an
    unknown Bloom filter algorithm, hash or compression)."""


class DecryptionError(BloomFilterError):
    """An encrypted part of a file (a "module" of Parquet Modular Encryption: the footer, a
    column's metadata, a Bloom filter header or bitset) that does not decrypt: a wrong key, a
    wrong AAD prefix, tampered or truncated bytes. ``module`` names the part ("footer",
    "column metadata", "Bloom filter header", "Bloom filter bitset"), besides the file, row
    group, column and offset every :class:`BloomFilterError` carries."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        row_group: int | None = None,
        column: str | None = None,
        offset: int | None = None,
        module: str | None = None,
    ) -> None:
        self.module = module
        super().__init__(message, source=source, row_group=row_group, column=column, offset=offset)

    def _render(self) -> str:
        text = super()._render()
        return text if self.module is None else f"{text} [module: {self.module}]"

    def _details(self) -> dict[str, Any]:
        return {"module": self.module}


class MissingKeyError(DecryptionError):
    """An encrypted part of a file whose key was not given (nor found by the key retriever or
    the KMS): the part stays unreadable. Not a sign of a bad file."""


class FileReadError(BloomFilterError):
    """The bytes of a file could not be fetched: a connection refused or reset, a body cut
    short, a timeout, a server error its filesystem gave up retrying, or the object gone after
    a request about it had succeeded (deleted or replaced while it was read). Nothing is known
    about the file's contents, and the same call may succeed later: never a finding about the
    file (``check`` reports it as an error, not a violation). ``source`` is the file as the
    caller named it (its URL), ``offset`` where the failed read started (None for a size
    look-up, a listing, or a first read from the end); the message gives the length. (A file
    that is not there when first asked for, or not ours to read, stays FileNotFoundError or
    PermissionError, naming it.)"""


class TableFileError(ValueError):
    """A file that belongs to a table (Delta Lake, Iceberg, Hudi, Paimon) was to be replaced in
    place: the table records the file's size, so the table would break. The message names the
    table (``table_root``, ``table_format``) and the table-aware call to use instead. Not a
    :class:`BloomFilterError`: nothing is wrong with the file."""

    def __init__(self, message: str, *, path: str, table_format: str, table_root: str) -> None:
        self.path = path
        self.table_format = table_format
        self.table_root = table_root
        super().__init__(message)


class MissingExtraError(ImportError):
    """An optional dependency that is not installed: ``package`` (the module that failed to
    import) is what ``purpose`` needs, and ``extra`` the pip extra of parquet-bloom that
    brings it; the message ends with the line to run (``pip install 'parquet-bloom[delta]'``).
    An ImportError, so that code catching those still does; not a bug in this library, nor in
    the caller's data."""

    def __init__(self, purpose: str, *, package: str, extra: str) -> None:
        self.purpose = purpose
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs {package}: pip install 'parquet-bloom[{extra}]'", name=package
        )


class TableVersionError(LookupError, ValueError):
    """A version (Delta Lake) or snapshot (Iceberg) that the table at ``table`` does not have:
    ``asked`` is what was asked for, ``latest`` the newest the table has (None when it could
    not be told). The caller's mistake about the table, not a fault in it."""

    def __init__(self, message: str, *, table: str, asked: int, latest: int | None) -> None:
        self.table = table
        self.asked = asked
        self.latest = latest
        super().__init__(message)
